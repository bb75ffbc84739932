"""Shared LM tools: builders, tokenisers and a training loop that learns (also under torchrun)."""

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest
import torch

from iclr25.cascading_kv.corpus import stdlib_corpus, unigram_entropy  # the corpus the LM loop is tested on
from iclr25.common.lm import byte_tokenizer, tiny_causal_lm, tiny_config, train_bpe
from iclr25.common.schedule import warmup_cosine_factor
from iclr25.common.train import LMTrainConfig, evaluate_lm, train_lm

HERE = Path(__file__).parent


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral"])
def test_tiny_models_build_with_gqa_and_are_deterministic(arch):
    a = tiny_causal_lm(arch, seed=3, vocab_size=50, hidden=32, layers=2, heads=4, kv_heads=2)
    b = tiny_causal_lm(arch, seed=3, vocab_size=50, hidden=32, layers=2, heads=4, kv_heads=2)
    attn = a.model.layers[0].self_attn
    assert attn.k_proj.out_features == 2 * 8 and attn.q_proj.out_features == 4 * 8  # GQA: 2 KV heads of dim 8
    x = torch.randint(0, 50, (2, 7))
    assert torch.equal(a(x).logits, b(x).logits)
    assert a(x).logits.shape == (2, 7, 50)


def lr_at(step: int, cfg: LMTrainConfig) -> float:
    """The learning rate ``train_lm`` uses at ``step`` (its transformers schedule times ``cfg.lr``)."""
    return cfg.lr * warmup_cosine_factor(cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio)(step)


def encode_corpus(tokenizer, docs: Iterable[str], add_eos: bool = True) -> torch.Tensor:
    """Concatenate documents into one 1-D LongTensor of token ids (eos between documents)."""
    docs = list(docs)
    ids = tokenizer(docs, add_special_tokens=False)["input_ids"]
    eos = [tokenizer.eos_token_id] if add_eos else []
    flat = [t for d in ids for t in (d + eos)]
    return torch.tensor(flat, dtype=torch.long)


def test_config_errors_name_the_parameter():
    with pytest.raises(ValueError, match="arch"):
        tiny_config("gpt5")
    with pytest.raises(ValueError, match="kv_heads"):
        tiny_config(heads=4, kv_heads=3)


def test_byte_tokenizer_round_trips_any_text():
    tok = byte_tokenizer()
    s = "naïve café — ∑ x² \t\n def f(): return '\\x00'"
    ids = tok(s, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(s.encode("utf-8")) and tok.decode(ids) == s
    assert len(tok) == 260 and tok.pad_token_id == 0 and tok.eos_token_id == 2


def test_bpe_compresses_and_round_trips():
    texts = [
        "the quick brown fox jumps over the lazy dog. " * 20,
        "def function(argument): return argument\n" * 20,
    ]
    tok = train_bpe(texts, vocab_size=320, min_frequency=2)
    byte = byte_tokenizer()
    s = "the quick brown fox; def function(argument)"
    assert tok.decode(tok(s, add_special_tokens=False)["input_ids"]) == s
    assert len(tok(s)["input_ids"]) < len(byte(s, add_special_tokens=False)["input_ids"])


def test_lr_schedule_warmup_then_cosine():
    cfg = LMTrainConfig(steps=100, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(0.1) and lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(10, cfg) == pytest.approx(1.0) and lr_at(100, cfg) == pytest.approx(0.1)
    assert all(lr_at(s, cfg) >= lr_at(s + 1, cfg) for s in range(10, 100))


def test_training_loop_learns_well_below_unigram_entropy(tmp_path):
    """Smoke-size run on the stdlib docs corpus: validation loss ends far below the unigram entropy."""
    c = stdlib_corpus(("docs",))
    tok = byte_tokenizer()
    tr, va = encode_corpus(tok, c.train), encode_corpus(tok, c.val)
    h = unigram_entropy(tr)
    model = tiny_causal_lm(
        "llama", seed=0, vocab_size=260, hidden=64, layers=2, heads=4, kv_heads=2, attn_implementation="sdpa"
    )
    cfg = LMTrainConfig(
        steps=200, batch_size=16, seq_len=64, lr=3e-3, warmup_steps=20, eval_every=100, eval_batches=4
    )
    res = train_lm(model, tr, va, cfg)
    assert res["final_val_loss"] < 0.8 * h, (res["final_val_loss"], h)
    assert res["history"][-1]["train_loss"] < res["history"][0]["train_loss"] - 1.0


def test_checkpoint_resume_is_exact(tmp_path):
    torch.manual_seed(0)
    tokens = torch.randint(4, 40, (3000,))
    cfg = LMTrainConfig(
        steps=10, batch_size=4, seq_len=16, lr=5e-3, warmup_steps=2, checkpoint_every=5, eval_every=0
    )
    mk = lambda: tiny_causal_lm("llama", seed=1, vocab_size=40, hidden=16, layers=1, heads=2)  # noqa: E731
    full = train_lm(mk(), tokens, cfg=cfg)
    half_cfg = LMTrainConfig(**{**cfg.__dict__, "steps": 10})
    m = mk()
    # interrupt after step 5 by raising from a batch function, then resume from the checkpoint
    calls = {"n": 0}

    def batch_fn(step, g):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        from iclr25.common.train import stream_batch

        return stream_batch(tokens, cfg.batch_size, cfg.seq_len, g)

    with pytest.raises(KeyboardInterrupt):
        train_lm(m, batch_fn=batch_fn, cfg=half_cfg, checkpoint_dir=tmp_path)
    resumed = train_lm(mk(), tokens, cfg=half_cfg, checkpoint_dir=tmp_path)
    a = [h["train_loss"] for h in full["history"]]
    b = [h["train_loss"] for h in resumed["history"]]
    assert len(b) == 10 and a == pytest.approx(b, abs=1e-6)


def test_eval_is_deterministic():
    tokens = torch.randint(4, 40, (2000,), generator=torch.Generator().manual_seed(0))
    m = tiny_causal_lm("llama", seed=0, vocab_size=40, hidden=16, layers=1, heads=2)
    cfg = LMTrainConfig(batch_size=4, seq_len=16, eval_batches=3)
    assert evaluate_lm(m, tokens, cfg) == evaluate_lm(m, tokens, cfg)


@pytest.mark.distributed
@pytest.mark.slow
def test_torchrun_two_processes_match_one_process(tmp_path):
    """DDP with gloo on 2 CPU processes follows the 1-process run on the same global batch."""
    script = HERE / "ddp_train_script.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, str(script), str(tmp_path / "one.json")], check=True, env=env, cwd=tmp_path
    )
    port = str(29500 + os.getpid() % 1000)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            f"--master_port={port}",
            str(script),
            str(tmp_path / "two.json"),
        ],
        check=True,
        env=env,
        cwd=tmp_path,
        capture_output=True,
    )
    one = json.loads((tmp_path / "one.json").read_text())
    two = json.loads((tmp_path / "two.json").read_text())
    assert one["world"] == 1 and two["world"] == 2
    assert two["train"] == pytest.approx(one["train"], abs=1e-5)
    assert two["val"] == pytest.approx(one["val"], abs=1e-6)
    assert one["train"][-1] < one["train"][0] - 0.5  # it learned something


def _old_lr_at(step, cfg):  # the hand-written schedule replaced by transformers' (kept here as the reference)
    import math

    if cfg.warmup_steps and step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    t = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


@pytest.mark.parametrize("steps,warmup,ratio", [(100, 10, 0.1), (7, 0, 0.0), (50, 49, 0.5), (3, 1, 1.0)])
def test_transformers_schedule_gives_the_same_numbers(steps, warmup, ratio):
    from iclr25.common.train import warmup_cosine_schedule

    cfg = LMTrainConfig(steps=steps, lr=0.3, warmup_steps=warmup, min_lr_ratio=ratio)
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=cfg.lr)
    sched = warmup_cosine_schedule(opt, warmup, steps, ratio)
    for s in range(steps + 1):
        assert lr_at(s, cfg) == pytest.approx(_old_lr_at(s, cfg), abs=1e-12)
        assert opt.param_groups[0]["lr"] == pytest.approx(_old_lr_at(s, cfg), abs=1e-12)
        opt.step()
        sched.step()


def test_checkpoint_is_loaded_without_unpickling_objects(tmp_path):
    """A checkpoint holding an arbitrary Python object is refused (weights_only=True), never executed."""
    import fractions
    import pickle

    tokens = torch.randint(0, 50, (500,))
    m = tiny_causal_lm("llama", seed=0, vocab_size=50, hidden=16, layers=1, heads=2, kv_heads=1)
    cfg = LMTrainConfig(steps=2, batch_size=2, seq_len=8, warmup_steps=0, eval_every=0)

    torch.save({"config": {}, "payload": fractions.Fraction(1, 3)}, tmp_path / "checkpoint.pt")
    with pytest.raises(pickle.UnpicklingError):
        train_lm(m, tokens, cfg=cfg, checkpoint_dir=tmp_path)
