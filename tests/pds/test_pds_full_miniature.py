"""The ``full`` preset's loaders on local miniatures in the hub formats (never downloaded): a tiny
``save_pretrained`` Llama + tokenizer folder as proxy and target architecture, a parquet file with fineweb's
columns as the corpus and a folder with LIMA's ``train.jsonl`` / ``test.jsonl`` (``conversations``, ``source``)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from iclr25.pds import full
from iclr25.pds.experiment import PRESETS, FullConfig, downloads, one_seed

WORDS = "the cat dog sat ran on in a park mat sun song bird warm play is and for today".split()


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "[EOS]"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]")


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    import pandas as pd
    from transformers import LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("pds_full")
    tok = _tokenizer()
    conf = LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    LlamaForCausalLM(conf).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    rng = np.random.default_rng(0)
    docs = [" ".join(rng.choice(WORDS, rng.integers(5, 30))) for _ in range(300)]
    pd.DataFrame(  # fineweb's columns
        {
            "text": docs,
            "id": [f"<urn:uuid:{i}>" for i in range(300)],
            "dump": "CC-MAIN-2024-10",
            "url": [f"http://example.org/{i}" for i in range(300)],
            "date": "2024-02-01T00:00:00Z",
            "file_path": "s3://commoncrawl/x.warc.gz",
            "language": "en",
            "language_score": 0.9,
            "token_count": [len(d.split()) for d in docs],
        }
    ).to_parquet(root / "cc.parquet")
    (root / "lima").mkdir()
    for split, n in (("train", 40), ("test", 20)):
        rows = [
            {
                "conversations": [" ".join(rng.choice(WORDS[:8], 12)), " ".join(rng.choice(WORDS[:8], 20))],
                "source": "mini",
            }
            for _ in range(n)
        ]
        (root / "lima" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _cfg(mini) -> FullConfig:
    return dataclasses.replace(
        PRESETS["full"],
        proxy_model=str(mini / "model"),
        target_model=str(mini / "model"),
        corpus=str(mini / "cc.parquet"),
        corpus_config="",
        target_data=str(mini / "lima"),
        device="cpu",
        seeds=1,
        seq_len=15,
        n_pool=240,
        n_dev=16,
        n_test=16,
        pmp_steps=4,
        pmp_batch=16,
        pmp_lr=0.5,
        score_every=2,
        proxy_size=120,
        scorer_val=40,
        chunk_size=64,
        scorer="ridge",
        train_steps=20,
        train_batch=8,
        train_lr=3e-3,
        train_warmup=2,
        eval_every=10,
    )


def test_full_preset_names_the_papers_assets():
    cfg = PRESETS["full"]
    assert cfg.device == "cuda" and cfg.seq_len == 1024 and cfg.pmp_steps == 100 and cfg.pmp_lr == 0.008
    got = {d["source"]: d for d in downloads(cfg)}
    assert set(got) == {"Data-Selection/BSL-160M", "HuggingFaceFW/fineweb", "GAIR/lima"}
    assert all(d["size"] and "unknown" not in d["size"] for d in got.values())


@pytest.mark.slow
def test_full_miniature_runs_offline(mini, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = _cfg(mini)
    assert downloads(cfg) == []  # local paths: nothing to fetch
    tok = full.load_proxy(cfg)[1]
    data = full.make_full_corpus(cfg, tok, seed=0)
    # rows are packed texts: every row full (no padding), EOS between documents, the LIMA splits kept apart
    assert data.pool.shape == (240, 16) and data.dev.shape[1] == 16 and data.test.shape[0] >= 1
    assert (data.pool == tok.eos_token_id).any() and data.pad_id is None
    lima_vocab = set(tok.convert_tokens_to_ids(WORDS[:8])) | {tok.eos_token_id}
    assert set(data.dev.unique().tolist()) <= lima_vocab  # J comes from LIMA's train split only
    out = one_seed(cfg, 0)
    for arm in ("pds", "random", "dsir"):
        assert math.isfinite(out[arm]["final_loss"])
    assert out["random"]["curve"][-1] < out["random"]["curve"][0]  # the fresh target learns
    assert out["n_params_target"] > 0


def test_full_loader_errors(mini, tmp_path):
    with pytest.raises(FileNotFoundError, match="train.parquet"):
        full.load_texts(str(tmp_path), "", "train", "text", 0)
    with pytest.raises(ValueError, match="no column 'body'"):
        full.load_texts(str(mini / "cc.parquet"), "", "train", "body", 5)
    with pytest.raises(ValueError, match="proxy_model"):
        dataclasses.replace(PRESETS["full"], proxy_model=" ")
