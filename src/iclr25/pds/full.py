"""The ``full`` preset's inputs: the paper's models and data by name (README, "Real inputs").

The paper (§4.1) selects from the CommonCrawl split of RedPajama with a 160M Mistral proxy, J = the LM loss on
LIMA's training split, and pre-trains Mistral models of 160M–1.7B from scratch on the selection. Here:

* ``proxy_model`` — the proxy LM θ_0, loaded with :func:`iclr25.assets.load_causal_lm` (a hub id or a local
  ``save_pretrained`` folder); its tokenizer tokenises every text. Default ``Data-Selection/BSL-160M``: the
  authors' conventionally pre-trained 160M Mistral (their 10K-step checkpoint is not released).
* ``target_model`` — only its *config* is read (``AutoConfig``); the target is built from it with fresh weights
  (data selection is about pre-training). Default ``Data-Selection/BSL-160M`` (the paper's smallest target).
* ``corpus`` / ``corpus_config`` / ``corpus_split`` — a ``datasets`` name (streamed, the first
  ``corpus_docs`` documents) or a local ``.parquet`` / ``.jsonl`` file, text in ``text_column``. Default
  ``HuggingFaceFW/fineweb`` ``sample-10BT``: CommonCrawl-derived and stored as parquet (RedPajama-1T is
  published behind a loading script that current ``datasets`` no longer runs).
* ``target_data`` — (a local folder holding ``<split>.jsonl`` / ``.parquet`` works as well) LIMA (``GAIR/lima``; gated on the hub: accept its terms and log in), ``conversations``
  (a list of utterances) joined by newlines; ``dev_split`` is J, ``test_split`` the held-out test set.

Every text is tokenised, followed by EOS, concatenated and cut into rows of ``seq_len + 1`` tokens (the last
partial row dropped, so no row holds padding — the paper packs CC the same way; LIMA is packed too, where the
paper keeps one padded row per conversation).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

# what a full run downloads, with the size of the part it reads (for ``iclr25 config pds --preset full``)
SIZES = {
    "Data-Selection/BSL-160M": "≈ 0.65 GB if stored in fp32 (160M parameters) + tokenizer; not measured here",
    "HuggingFaceFW/fineweb": "streamed: only the first corpus_docs documents are read (a few KB each), not the whole sample",
    "GAIR/lima": "≈ 3 MB (1,030 train + 300 test conversations; gated)",
}


@dataclass
class FullCorpus:
    """Rows of the corpus (the pool) and of LIMA (dev = J, test), in the proxy's tokenizer."""

    pool: torch.Tensor  # (N, L+1)
    source: torch.Tensor  # (N,) all 0: one source
    dev: torch.Tensor  # (M, L+1)
    test: torch.Tensor  # (K, L+1)
    vocab_size: int
    sources: tuple[str, ...] = ("corpus",)
    pad_id: int | None = None  # rows are full: nothing to mask
    counts: dict = field(default_factory=dict)

    def source_fractions(self, idx: torch.Tensor | None = None) -> dict[str, float]:
        return {"corpus": 1.0}


def _local(name: str) -> Path | None:
    p = Path(name).expanduser()
    return (
        p
        if p.suffix in (".parquet", ".jsonl", ".json") or name.startswith((".", "/", "~")) or p.exists()
        else None
    )


def _split_file(p: Path, split: str) -> Path:
    """A local file, or in a folder (the hub repository's layout) the file named after ``split``."""
    if p.is_dir():
        hits = [
            p / f"{split}{ext}" for ext in (".parquet", ".jsonl", ".json") if (p / f"{split}{ext}").is_file()
        ]
        if not hits:
            raise FileNotFoundError(f"{p} holds no {split}.parquet / {split}.jsonl / {split}.json")
        return hits[0]
    if not p.is_file():
        raise FileNotFoundError(f"no such file or folder {p}")
    return p


def load_texts(name: str, config: str, split: str, column: str, limit: int) -> list[str]:
    """The first ``limit`` values of ``column`` of a ``datasets`` name (streamed) or a local parquet / jsonl
    file; a list column (LIMA's ``conversations``) is joined by newlines."""
    import datasets

    p = _local(name)
    if p is not None:
        p = _split_file(p, split)
        kind = "parquet" if p.suffix == ".parquet" else "json"
        ds: Any = datasets.load_dataset(kind, data_files={split: str(p)}, split=split)
    else:
        ds = datasets.load_dataset(name, config or None, split=split, streaming=True)
    out = []
    for row in itertools.islice(ds, limit if limit > 0 else None):
        if column not in row:
            raise ValueError(f"{name}: no column {column!r}; columns: {sorted(row)}")
        v = row[column]
        out.append("\n".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v))
    if not out:
        raise ValueError(f"{name} ({split}): no documents")
    return out


def _rows(texts: list[str], tok: Any, seq_len: int) -> torch.Tensor:
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    flat = np.concatenate([np.asarray([*x, tok.eos_token_id], dtype=np.int64) for x in ids])
    n = flat.size // (seq_len + 1)
    if n == 0:
        raise ValueError(f"{len(texts)} texts hold fewer than seq_len + 1 = {seq_len + 1} tokens")
    return torch.as_tensor(flat[: n * (seq_len + 1)].reshape(n, seq_len + 1))


def load_proxy(cfg) -> tuple[Any, Any]:
    """(proxy model θ_0, its tokenizer) through :func:`iclr25.assets.load_causal_lm`, eager attention."""
    from iclr25.assets import load_causal_lm

    model, tok = load_causal_lm(cfg.proxy_model, device=cfg.device, attn_implementation="eager")
    return model.train(), tok


def make_full_corpus(cfg, tok: Any, seed: int) -> FullCorpus:
    """Pool = the corpus's first ``n_pool`` rows (a seed shuffles them); dev = the first ``n_dev`` rows of LIMA's
    ``dev_split``, test = the first ``n_test`` of its ``test_split`` (fewer when LIMA holds fewer)."""
    from iclr25.common.seeding import torch_generator

    texts = load_texts(cfg.corpus, cfg.corpus_config, cfg.corpus_split, cfg.text_column, cfg.corpus_docs)
    pool = _rows(texts, tok, cfg.seq_len)
    if pool.shape[0] < cfg.n_pool:
        raise ValueError(
            f"n_pool ({cfg.n_pool}) exceeds the {pool.shape[0]} rows of the first {cfg.corpus_docs} documents; "
            "raise corpus_docs"
        )
    pool = pool[torch.randperm(pool.shape[0], generator=torch_generator(seed))[: cfg.n_pool]]
    dev = _rows(load_texts(cfg.target_data, "", cfg.dev_split, cfg.target_column, 0), tok, cfg.seq_len)
    test = _rows(load_texts(cfg.target_data, "", cfg.test_split, cfg.target_column, 0), tok, cfg.seq_len)
    counts = {
        "corpus_docs": len(texts),
        "pool_rows": cfg.n_pool,
        "dev_rows": dev.shape[0],
        "test_rows": test.shape[0],
    }
    return FullCorpus(
        pool,
        torch.zeros(cfg.n_pool, dtype=torch.long),
        dev[: cfg.n_dev],
        test[: cfg.n_test],
        len(tok),
        counts=counts,
    )


def target_init(cfg, vocab: int, seed: int) -> torch.nn.Module:
    """A fresh target LM with ``target_model``'s architecture (its config only; weights drawn from ``seed``)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from iclr25.common.seeding import seed_everything

    conf = AutoConfig.from_pretrained(cfg.target_model)
    conf.vocab_size = max(vocab, conf.vocab_size)
    conf._attn_implementation = "eager"
    seed_everything(seed)
    return AutoModelForCausalLM.from_config(conf, attn_implementation="eager")


def downloads(cfg) -> list[dict]:
    """What a run of ``cfg`` would fetch from the hub (local paths are not downloads): ``what``, ``source`` (hub id
    or ``datasets`` name), ``bytes`` (``None``: not known without the network) and ``size`` (the estimate)."""
    items = [
        ("proxy model + tokenizer", cfg.proxy_model),
        ("target architecture (config.json only)", cfg.target_model),
        (
            f"corpus ({cfg.corpus_config or 'default'} / {cfg.corpus_split}, first {cfg.corpus_docs} documents)",
            cfg.corpus,
        ),
        (f"target data ({cfg.dev_split} = J, {cfg.test_split} = test)", cfg.target_data),
    ]
    out = []
    for what, name in items:
        if _local(name) is not None:
            continue
        if what.startswith("target architecture") and name == cfg.proxy_model:
            continue  # the proxy's download holds the config
        size = (
            "≈ 1 KB" if what.startswith("target architecture") else SIZES.get(name, "unknown (not declared)")
        )
        out.append({"what": what, "source": name, "bytes": None, "size": size})
    return out
