"""Atomic writes: every artefact goes to a temp file in the same folder, then ``os.replace``.

JSON cannot hold NaN or ±inf, and a number that silently turns into ``null`` is lost for good (a reader then
crashes on it, or worse, skips it). :func:`to_jsonable` therefore writes them as the tagged strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"`` and :func:`from_jsonable` / :func:`as_float` turn them back into floats.
Temporary files carry the writer's identity — a tag of its host, boot and PID namespace, and its process id
(``.<name>.w<tag>.pid<pid>.<random>.tmp``, :func:`tmp_prefix`) — so :func:`clean_stale_tmp` removes those left
behind by a killed writer on this machine without touching a live one, nor one of another node or container that
shares the folder (whose process ids mean nothing here).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

_UMASK = os.umask(0)
os.umask(_UMASK)
TMP_SUFFIX = ".tmp"
NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


STALE_TMP_AGE_S = (
    24 * 3600
)  # a temp file of a writer we cannot check (another host or container) is stale after this


def _read_first_line(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.readline().strip()
    except OSError:
        return ""


def writer_identity() -> dict[str, str]:
    """Who writes from this process: host name, boot id (``/proc/sys/kernel/random/boot_id``, changes at every
    boot) and PID namespace (``/proc/self/ns/pid``, differs between containers). A process id is meaningful only
    between processes that share all three."""
    import socket

    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return {
        "host": socket.gethostname(),
        "boot_id": _read_first_line("/proc/sys/kernel/random/boot_id"),
        "pidns": pidns,
    }


_TAG: list = [None, None]  # [pid the tag was computed in, tag]


def writer_tag() -> str:
    """10 hex digits naming this host + boot + PID namespace (:func:`writer_identity`); the same in every
    process of one machine and container, different on another node or in another PID namespace."""
    import hashlib

    if _TAG[0] != os.getpid():  # recomputed after a fork into another namespace (cheap, once per process)
        ident = writer_identity()
        key = "\0".join((ident["host"], ident["boot_id"], ident["pidns"]))
        _TAG[:] = [os.getpid(), hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:10]]
    return _TAG[1]


def tmp_prefix(name: str) -> str:
    """The prefix of this process's temporary file for ``name``: ``.<name>.w<tag>.pid<pid>.``."""
    return f".{name}.w{writer_tag()}.pid{os.getpid()}."


def _with_filename(e: OSError, path: Path) -> OSError:
    """``e`` naming ``path`` when it names no file (a full disk fails in ``write``, which names none) or only
    our temporary file beside it."""
    name = getattr(e, "filename", None)
    ours = isinstance(name, str) and os.path.basename(name).startswith(f".{path.name}.w")
    if (name and not ours) or e.errno is None or getattr(e, "filename2", None):
        return e
    return OSError(e.errno, e.strerror or os.strerror(e.errno), str(path))  # the errno's subclass


def _atomic(path: str | os.PathLike, writer: Callable[[str], None]) -> Path:
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=tmp_prefix(path.name), suffix=TMP_SUFFIX, dir=path.parent)
        os.close(fd)
        writer(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        named = _with_filename(e, path) if isinstance(e, OSError) else e
        if named is not e:
            raise named from e
        raise
    return path


def atomic_write_with(path: str | os.PathLike, writer: Callable[[str], None]) -> Path:
    """Atomically create ``path`` with ``writer(tmp_path)`` (any library's save function), then rename."""
    return _atomic(path, writer)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    def w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    return _atomic(path, w)


def to_jsonable(obj: Any) -> Any:
    """Convert numpy/torch scalars and arrays, tuples, paths and dataclasses to plain JSON types.

    Non-finite floats become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` so the output is strict
    JSON and the value survives the round trip (:func:`from_jsonable`).
    """
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else _tag(f)
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    try:
        import torch

        if isinstance(obj, torch.Tensor):
            return to_jsonable(obj.detach().cpu().tolist())
    except ImportError:  # pragma: no cover
        pass
    return obj


def _tag(f: float) -> str:
    return "NaN" if math.isnan(f) else ("Infinity" if f > 0 else "-Infinity")


def as_float(x: Any) -> float:
    """A number read from our JSON as a float: the tags ``"NaN"``/``"Infinity"``/``"-Infinity"`` and ``None``
    (how older files stored a non-finite number) become NaN/±inf; anything else must be a real number."""
    if x is None:
        return float("nan")
    if isinstance(x, str):
        if x in NONFINITE:
            return NONFINITE[x]
        raise ValueError(f"expected a number or one of {sorted(NONFINITE)}, got the string {x!r}")
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"expected a number, got the boolean {x!r}")
    if isinstance(x, (int, float, np.integer, np.floating)):
        return float(x)
    try:  # 0-d tensors and arrays, Decimal, Fraction …
        return float(x)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {type(x).__name__} {x!r}") from None


def from_jsonable(obj: Any) -> Any:
    """Inverse of :func:`to_jsonable` for numbers: every ``"NaN"``/``"Infinity"``/``"-Infinity"`` string in a
    nested structure becomes the float again (other values are returned unchanged)."""
    if isinstance(obj, dict):
        return {k: from_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_jsonable(v) for v in obj]
    if isinstance(obj, str) and obj in NONFINITE:
        return NONFINITE[obj]
    return obj


def canonical_json(obj: Any) -> str:
    """The one JSON text of ``obj`` that is hashed (seed files' ``result_sha256``): :func:`to_jsonable` first
    (so NaN/±inf are the same tags as in the files), keys sorted, no whitespace, UTF-8 characters kept."""
    return json.dumps(
        to_jsonable(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_json(obj: Any) -> str:
    """Hex SHA-256 of :func:`canonical_json` of ``obj``."""
    import hashlib

    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(
        path, json.dumps(to_jsonable(obj), indent=2, sort_keys=False, allow_nan=False) + "\n"
    )


MAX_JSON_BYTES = 64 << 20  # our artefacts are kilobytes; a run's seed file or claims.json is never near this
MAX_JSON_DEPTH = 64  # our documents nest < 10 levels; deeper input is refused before anything recurses on it


class UnsafeFileError(ValueError):
    """A file refused before (or while) it is parsed: over the size limit, not a regular file, a symlink that
    leads out of the folder it must stay in, or JSON nested too deeply. The message names the file and why."""


def read_bytes_limited(
    path: str | os.PathLike, max_bytes: int = MAX_JSON_BYTES, within: str | os.PathLike | None = None
) -> bytes:
    """The bytes of the regular file ``path``, read without trusting it.

    Refuses (:class:`UnsafeFileError`) a file over ``max_bytes`` (counted while reading, so a symlink to
    ``/dev/zero`` or a growing file stops at the limit), anything that is not a regular file (a FIFO is opened
    non-blocking, so it cannot hang the reader) and, with ``within``, a path that — symlinks resolved — lies
    outside the folder ``within``. ``OSError`` when it cannot be opened at all.
    """
    import stat

    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
        raise ValueError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
    path = Path(path)
    if within is not None:
        base = Path(within).resolve()
        real = path.resolve()
        if not real.is_relative_to(base):
            raise UnsafeFileError(f"{path} resolves to {real}, outside {base}; refusing to follow it")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
            raise UnsafeFileError(f"{path} is {kind}; refusing to read it")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafeFileError(f"{path} is larger than the {max_bytes}-byte limit; refusing to read it")
    return data


def _depth_ok(obj: Any, max_depth: int) -> bool:
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, (dict, list)):
            if d > max_depth:
                return False
            stack.extend((v, d + 1) for v in (o.values() if isinstance(o, dict) else o))
    return True


def parse_json(text: str | bytes, max_depth: int = MAX_JSON_DEPTH, name: str = "the JSON text") -> Any:
    """``json.loads`` that refuses (:class:`UnsafeFileError`) objects/arrays nested deeper than ``max_depth``
    — including input deep enough to exhaust Python's recursion limit in the parser — so nothing that walks
    the result recursively can overflow. ``json.JSONDecodeError`` (a ``ValueError``) for malformed JSON,
    ``UnicodeDecodeError`` for bytes that are not UTF-8."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        obj = json.loads(text)
    except RecursionError:
        raise UnsafeFileError(f"{name} is nested too deeply to parse (limit {max_depth} levels)") from None
    if not _depth_ok(obj, max_depth):
        raise UnsafeFileError(f"{name} is nested deeper than {max_depth} levels; refusing it")
    return obj


def read_json(
    path: str | os.PathLike,
    decode: bool = False,
    *,
    max_bytes: int = MAX_JSON_BYTES,
    within: str | os.PathLike | None = None,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """Parse a JSON file (UTF-8). ``decode=True`` turns the non-finite tags back into floats.

    The file is read with :func:`read_bytes_limited` (size limit, regular files only, with ``within`` no
    symlink out of that folder) and parsed with :func:`parse_json` (nesting limit); a refusal is an
    :class:`UnsafeFileError` naming the file, malformed JSON a ``json.JSONDecodeError``, both ``ValueError``.
    """
    obj = parse_json(read_bytes_limited(path, max_bytes, within), max_depth, name=str(path))
    return from_jsonable(obj) if decode else obj


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # exists but not ours (or not a pid): leave it alone
    return True


_TMP_TAGGED = re.compile(r"\.w([0-9a-f]{10})\.pid(\d+)\.")
_TMP_LEGACY = re.compile(r"\.pid(\d+)\.")


def _stale(p: Path, now: float, max_age: float) -> bool:
    """Whether the temp file (or folder) ``p`` was left by a writer that no longer runs.

    Tagged names (:func:`tmp_prefix`): a writer of this host + boot + PID namespace is checked by its pid; one
    of another node or container cannot be, so its file is stale only when older than ``max_age``. Names of
    older versions (``.pid<N>.`` alone) are checked by pid as they always were; a name without a pid, by age."""
    m = _TMP_TAGGED.search(p.name)
    if m is not None:
        pid = int(m.group(2))
        if m.group(1) == writer_tag():
            return pid != os.getpid() and not _pid_alive(pid)
        return now - p.lstat().st_mtime > max_age
    m = _TMP_LEGACY.search(p.name)
    if m is not None:
        pid = int(m.group(1))
        return pid != os.getpid() and not _pid_alive(pid)
    return now - p.lstat().st_mtime > 3600


def is_stale_tmp(path: str | os.PathLike, max_age: float = 24 * 3600) -> bool:
    """Whether a temporary file or folder named with :func:`tmp_prefix` was left by a writer that no longer runs
    (same host + boot + PID namespace: its pid is gone; another node or container: older than ``max_age`` s)."""
    import time

    return _stale(Path(path), time.time(), max_age)


def clean_stale_tmp(
    folder: str | os.PathLike, recursive: bool = True, max_age: float = STALE_TMP_AGE_S
) -> list[Path]:
    """Remove temporary files (``.<name>.w<tag>.pid<pid>.*.tmp``) and folders left by writers that no longer run.

    A temp file whose writer runs on this host, boot and PID namespace is removed only when that process is
    gone; one written from another node or container sharing the folder (another tag: its pid cannot be checked
    here) only when older than ``max_age`` seconds (a day) — never a live writer's. Returns the removed paths.
    """
    import shutil
    import time

    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    paths = folder.rglob(f".*{TMP_SUFFIX}") if recursive else folder.glob(f".*{TMP_SUFFIX}")
    now = time.time()
    for p in list(paths):
        try:
            if not _stale(p, now, max_age):
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
        except OSError:
            continue
    return removed


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> Path:
    import torch

    return _atomic(path, lambda tmp: torch.save(obj, tmp))


def atomic_savefig(fig: Any, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Save a matplotlib figure atomically (format from the suffix, PNG by default); a figure that pyplot
    manages is closed afterwards (a standalone :func:`iclr25.common.figures.subplots` figure needs no closing)."""
    path = Path(path)
    fmt = path.suffix.lstrip(".") or "png"
    try:
        return _atomic(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight"))
    finally:
        if getattr(getattr(fig, "canvas", None), "manager", None) is not None:
            import matplotlib.pyplot as plt

            plt.close(fig)
