"""Token rows from a user's corpus: right-padded rows per document, or documents packed into equal-length rows.

The scorers and :func:`~.selection.select_corpus` read ``(n, L)`` integer rows. A corpus of strings (tokenised
with the scorer's tokenizer) or of ragged token-id lists becomes such rows here, shard by shard:

- one row per document (``pack=False``): right-padded with the tokenizer's pad id to ``max_length`` (longer
  documents truncated) or to the longest document of the shard — the scorers here are padding-invariant (the ridge
  n-gram features count non-pad tokens; the transformer scorer mean-pools non-pad positions under right padding and
  causal attention), so the shard-wise width does not change a score beyond float rounding;
- packed (``pack=True``): documents concatenated in corpus order, each followed by the EOS id, and cut into rows
  of exactly ``max_length`` tokens (the causal-LM pre-training layout); the last, partial row is right-padded.
  Selection then keeps packed rows, as pre-training consumes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .pmp import _check_int_pad, tokenizer_pad_id


def corpus_pad_id(tokenizer: Any, pad_id: int | str) -> int:
    """The id rows are padded with: the tokenizer's (``pad_id='auto'``) or an explicit one that must agree with it."""
    if pad_id == "auto":
        if tokenizer is None:
            raise ValueError(
                "pad_id='auto' needs tokenizer=... to pad a ragged or text corpus; pass pad_id=<int> instead"
            )
        return tokenizer_pad_id(tokenizer)
    pid = _check_int_pad(pad_id)
    if tokenizer is not None and getattr(tokenizer, "pad_token_id", None) not in (None, pid):
        raise ValueError(f"pad_id={pid} contradicts tokenizer.pad_token_id={tokenizer.pad_token_id}")
    return pid


def _check_max_length(max_length: int | None, required: bool = False) -> None:
    if max_length is None and not required:
        return
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        need = "a positive int (the packed row length)" if required else "a positive int or None"
        raise ValueError(f"max_length must be {need}, got {max_length!r}")


def pad_token_rows(
    corpus: list,
    tokenizer: Any = None,
    pad_id: int | str = "auto",
    max_length: int | None = None,
) -> tuple[np.ndarray, int]:
    """A ``list[str]`` (encoded with ``tokenizer``) or ``list[list[int]]`` → right-padded int64 array (N, L).

    L = ``max_length`` (longer rows are truncated on the right) or the longest row. The pad id is
    ``tokenizer.pad_token_id`` for ``pad_id='auto'`` (``ValueError`` when the tokenizer has none or no tokenizer is
    given); an explicit ``pad_id`` must agree with the tokenizer's. Returns (rows, pad_id).
    """
    if not isinstance(corpus, (list, tuple)) or len(corpus) == 0:
        raise ValueError(
            f"corpus must be a non-empty list of strings or of token-id lists, got {type(corpus).__name__}"
        )
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
    ):
        raise ValueError(f"max_length must be a positive int or None, got {max_length!r}")
    if all(isinstance(x, str) for x in corpus):
        if tokenizer is None:
            raise ValueError(
                "corpus is a list[str]: pass tokenizer=<the tokenizer the scorer was trained with>"
            )
        rows = tokenizer(list(corpus))["input_ids"]
    elif all(isinstance(x, (list, tuple, np.ndarray)) for x in corpus):
        rows = corpus
    else:
        raise ValueError("corpus must be a list of strings or a list of token-id lists, not a mix of both")
    pid = corpus_pad_id(tokenizer, pad_id)
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    if (lengths == 0).any():
        raise ValueError(f"corpus rows must be non-empty; row {int(np.argmin(lengths))} has no tokens")
    flat = np.concatenate([np.asarray(r).reshape(-1) for r in rows])
    if not (np.issubdtype(flat.dtype, np.integer) or flat.size == 0) or (flat < 0).any():
        raise ValueError(f"corpus token ids must be non-negative integers, got dtype {flat.dtype}")
    L = int(lengths.max()) if max_length is None else max_length
    W = max(int(lengths.max()), L)
    src = np.full((len(rows), W), pid, dtype=np.int64)  # (N, W) right-padded, W >= every row and L
    src[np.arange(W)[None, :] < lengths[:, None]] = flat
    return np.ascontiguousarray(src[:, :L]), pid  # (N, L): longer rows truncated on the right


def _doc_ids(docs: list, tokenizer: Any) -> list:
    """Token-id lists of a batch of documents: strings tokenised with ``tokenizer``, id lists as given."""
    if docs and all(isinstance(x, str) for x in docs):
        if tokenizer is None:
            raise ValueError(
                "the corpus holds strings: pass tokenizer=<the tokenizer the scorer was trained with>"
            )
        return tokenizer(list(docs))["input_ids"]
    if all(isinstance(x, (list, tuple, np.ndarray)) for x in docs):
        return list(docs)
    raise ValueError("corpus must hold strings or token-id lists, not a mix of both (or other types)")


class Packer:
    """Streaming packer: feed batches of documents, get full rows of ``length`` tokens; ``flush`` pads the rest.

    Each document's ids are followed by ``eos_id`` (None: nothing appended), then concatenated in order.
    """

    def __init__(self, tokenizer: Any, length: int, pad_id: int, eos_id: int | None):
        _check_max_length(length, required=True)
        self.tokenizer, self.length, self.pad_id, self.eos_id = tokenizer, length, pad_id, eos_id
        self._carry = np.zeros(0, dtype=np.int64)

    def add(self, docs: list) -> np.ndarray:
        """Rows (m, length) completed by ``docs`` (m may be 0)."""
        ids = _doc_ids(docs, self.tokenizer)
        parts = [self._carry]
        for r in ids:  # one array per document (no loop over tokens)
            a = np.asarray(r, dtype=np.int64).reshape(-1)
            if a.size and a.min() < 0:
                raise ValueError(f"corpus token ids must be non-negative integers, got {int(a.min())}")
            parts.append(a)
            if self.eos_id is not None:
                parts.append(np.array([self.eos_id], dtype=np.int64))
        flat = np.concatenate(parts)
        m = flat.size // self.length
        self._carry = flat[m * self.length :]
        return flat[: m * self.length].reshape(m, self.length)

    def flush(self) -> np.ndarray:
        """The last, partial row right-padded with ``pad_id`` ((1, length)), or (0, length) when nothing is left."""
        if self._carry.size == 0:
            return np.zeros((0, self.length), dtype=np.int64)
        row = np.full((1, self.length), self.pad_id, dtype=np.int64)
        row[0, : self._carry.size] = self._carry
        self._carry = np.zeros(0, dtype=np.int64)
        return row


def pack_token_rows(
    corpus: Iterable,
    tokenizer: Any = None,
    max_length: int = 1024,
    *,
    pad_id: int | str = "auto",
    eos: bool = True,
    batch_size: int = 1000,
    column: str = "input_ids",
    text_column: str = "text",
) -> tuple[np.ndarray, int]:
    """Pack a corpus into ``(n, max_length)`` int64 rows: documents (strings tokenised with ``tokenizer`` or
    token-id lists; a ``datasets.Dataset`` or iterable of rows reads ``column`` or ``text_column``) in order, each
    followed by ``tokenizer.eos_token_id`` (``eos=True``), concatenated and cut; the last partial row is padded.
    Returns (rows, pad_id). Everything is held in memory (8 bytes per token): stream larger corpora through
    :func:`~.stream.select_stream` with ``pack=True``."""
    pid = corpus_pad_id(tokenizer, pad_id)
    eos_id = None
    if eos:
        eos_id = getattr(tokenizer, "eos_token_id", None)
        if eos_id is None:
            raise ValueError("eos=True needs a tokenizer with an eos_token_id (or pass eos=False)")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    pk = Packer(tokenizer, max_length, pid, eos_id)
    out = [pk.add(b) for b in iter_doc_batches(corpus, batch_size, column, text_column)]
    out.append(pk.flush())
    return np.concatenate(out), pid


def _field(row: Any, column: str, text_column: str) -> Any:
    if isinstance(row, dict):
        if column in row:
            return row[column]
        if text_column in row:
            return row[text_column]
        raise ValueError(
            f"corpus rows must have a {column!r} (token ids) or {text_column!r} (text) field, got {sorted(row)}"
        )
    return row


def iter_doc_batches(corpus: Iterable, batch_size: int, column: str, text_column: str) -> Iterator[list]:
    """Batches of documents (strings or id lists) from a ``datasets.Dataset`` (read by slices), an
    ``IterableDataset`` or any iterable of rows (dicts, strings or id lists)."""
    cols = getattr(corpus, "column_names", None)
    if (
        cols is not None and hasattr(corpus, "__getitem__") and hasattr(corpus, "__len__")
    ):  # map-style Dataset
        col = column if column in cols else text_column if text_column in cols else None
        if col is None:
            raise ValueError(
                f"the dataset has no {column!r} (token ids) or {text_column!r} (text) column: {cols}"
            )
        for lo in range(0, len(corpus), batch_size):
            yield list(corpus[lo : lo + batch_size][col])
        return
    batch: list = []
    for row in corpus:
        batch.append(_field(row, column, text_column))
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


class DatasetRows:
    """A ``datasets.Dataset`` of text (``text_column``) or ragged token ids (``column``) read shard by shard as
    right-padded ``(n, L)`` int64 rows, one per document (see the module docstring); ``.dataset`` is the original."""

    def __init__(
        self,
        dataset: Any,
        *,
        column: str,
        text_column: str,
        tokenizer: Any,
        pad_id: int | str,
        max_length: int | None,
    ):
        cols = dataset.column_names
        self.column = column if column in cols else text_column if text_column in cols else None
        if self.column is None:
            raise ValueError(
                f"corpus (a datasets.Dataset) has no {column!r} (token ids) or {text_column!r} (text) column; "
                f"its columns: {cols}"
            )
        _check_max_length(max_length)
        self.dataset, self.tokenizer, self.max_length = dataset, tokenizer, max_length
        self.pad_id = corpus_pad_id(tokenizer, pad_id)

    def __len__(self) -> int:
        return len(self.dataset)

    def rows(self, lo: int, hi: int) -> np.ndarray:
        docs = list(self.dataset[lo:hi][self.column])
        return pad_token_rows(_doc_ids(docs, self.tokenizer), None, self.pad_id, self.max_length)[0]
