"""An offline English + code corpus from text that ships with Python itself, and hooks for generators.

* ``docs``: the help topics in ``pydoc_data.topics`` (the language reference, in English);
* ``docstrings``: module/class/function docstrings of the standard library, read with ``ast`` (no imports);
* ``code``: standard-library source files, with docstrings left in.

Documents are deduplicated (exact, after whitespace normalisation) and split train/val/test by a stable
hash of their text, so the split never changes with the order in which files are found.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SOURCES = ("docs", "docstrings", "code")
_GENERATORS: dict[str, Callable[..., list[str]]] = {}


@dataclass(frozen=True)
class Corpus:
    train: list[str]
    val: list[str]
    test: list[str]

    def __len__(self) -> int:
        return len(self.train) + len(self.val) + len(self.test)


def _stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _stdlib_files(max_files: int | None) -> list[Path]:
    root = _stdlib_dir()
    skip = {
        "test",
        "idlelib",
        "site-packages",
        "lib2to3",
        "tkinter",
        "turtledemo",
        "ensurepip",
        "__pycache__",
    }
    files = sorted(p for p in root.rglob("*.py") if not (set(p.relative_to(root).parts) & skip))
    return files[:max_files] if max_files else files


@lru_cache(maxsize=4)
def _docs() -> tuple[str, ...]:
    from pydoc_data.topics import topics

    return tuple(topics[k] for k in sorted(topics))


@lru_cache(maxsize=4)
def _docstrings(max_files: int | None) -> tuple[str, ...]:
    out = []
    for f in _stdlib_files(max_files):
        try:
            tree = ast.parse(f.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        nodes = [tree] + [
            n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        ]
        for n in nodes:
            d = ast.get_docstring(n)
            if d and len(d) >= 80:
                out.append(d)
    return tuple(out)


@lru_cache(maxsize=4)
def _code(max_files: int | None, max_chars: int) -> tuple[str, ...]:
    out = []
    for f in _stdlib_files(max_files):
        txt = f.read_text(encoding="utf-8", errors="replace")
        # split long files into chunks at top-level definitions so documents stay comparable in size
        parts = re.split(r"\n(?=(?:def |class |async def ))", txt)
        buf = ""
        for p in parts:
            if len(buf) + len(p) > max_chars and buf:
                out.append(buf)
                buf = ""
            buf += ("\n" if buf else "") + p
        if buf.strip():
            out.append(buf[: max_chars * 2])
    return tuple(out)


def _chunks(text: str, max_chars: int) -> list[str]:
    """Split a long text at blank lines into pieces of at most about ``max_chars`` characters."""
    out, buf = [], ""
    for para in text.split("\n\n"):
        if buf and len(buf) + len(para) > max_chars:
            out.append(buf)
            buf = ""
        buf += ("\n\n" if buf else "") + para
    if buf.strip():
        out.append(buf)
    return out


def _norm(t: str) -> str:
    return re.sub(r"\s+", " ", t).strip()


def dedup(docs: list[str]) -> list[str]:
    """Exact deduplication after whitespace normalisation, keeping first occurrences."""
    seen: set[str] = set()
    out = []
    for d in docs:
        h = hashlib.sha1(_norm(d).encode()).hexdigest()
        if h not in seen and _norm(d):
            seen.add(h)
            out.append(d)
    return out


def split(docs: list[str], val_frac: float = 0.05, test_frac: float = 0.05) -> Corpus:
    """Stable split by a hash of each document's text."""
    if not (0 <= val_frac < 1 and 0 <= test_frac < 1 and val_frac + test_frac < 1):
        raise ValueError(
            f"val_frac and test_frac must be in [0, 1) with sum < 1, got {val_frac}, {test_frac}"
        )
    tr, va, te = [], [], []
    for d in docs:
        u = int(hashlib.sha1(_norm(d).encode()).hexdigest()[:8], 16) / 16**8
        (va if u < val_frac else te if u < val_frac + test_frac else tr).append(d)
    return Corpus(tr, va, te)


def stdlib_corpus(
    sources: tuple[str, ...] = ("docs", "docstrings"),
    max_files: int | None = None,
    max_chars: int = 2000,
    val_frac: float = 0.05,
    test_frac: float = 0.05,
) -> Corpus:
    """The offline corpus: any of ``docs`` (English reference), ``docstrings`` (English), ``code`` (Python)."""
    bad = [s for s in sources if s not in SOURCES and s not in _GENERATORS]
    if bad or not sources:
        raise ValueError(
            f"sources must be a non-empty subset of {SOURCES + tuple(_GENERATORS)}, got {sources!r}"
        )
    docs: list[str] = []
    for s in sources:
        if s == "docs":
            docs += [c for d in _docs() for c in _chunks(d, max_chars)]
        elif s == "docstrings":
            docs += list(_docstrings(max_files))
        elif s == "code":
            docs += list(_code(max_files, max_chars))
        else:
            docs += list(_GENERATORS[s]())
    return split(dedup(docs), val_frac, test_frac)


def register_generator(name: str, fn: Callable[[], list[str]]) -> None:
    """Register a synthetic document generator usable as a source of :func:`stdlib_corpus`."""
    if name in SOURCES:
        raise ValueError(f"name must not shadow a built-in source {SOURCES}, got {name!r}")
    _GENERATORS[name] = fn


def unigram_entropy(tokens) -> float:
    """Entropy (nats/token) of the empirical unigram distribution of a token sequence."""
    import torch

    t = torch.as_tensor(tokens).flatten()
    p = torch.bincount(t).double()
    p = p[p > 0] / p.sum()
    return float(-(p * p.log()).sum())
