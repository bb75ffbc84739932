"""The recall task and its tiny model (the reproduction's ``recall`` mode, ``experiment.one_seed``): the token ids
(:func:`vocab`), the key–value recall streams (:func:`recall_batch`, :func:`train_batch_fn`), the tiny Llama trained
on them with full attention (:func:`build_model`, :func:`train_recall_model`), the caches compared
(:func:`make_cache`), their needle accuracy (:func:`full_attention_accuracy`, :func:`cache_accuracy`) and the prefill
timing (:func:`timing`). ``cfg`` is the reproduction's ``Config`` (``config.py``) or any object with its fields.
Also used by ``benchmarks/bench_cascading_kv.py``."""

from __future__ import annotations

from dataclasses import replace

import torch

from iclr25.common.lm import tiny_causal_lm
from iclr25.common.seeding import derive_seed, seed_everything, torch_generator
from iclr25.common.train import train_lm

from .cache import CascadingKVCache
from .profiling import time_prefills
from .streaming import strided_prefill


def vocab(cfg) -> dict[str, int]:
    """Ids: fillers 1..F, values F+1..F+V, KEY, QUERY, BOS; id 0 is the (unused) padding id of the HF config,
    whose embedding row is frozen at zero — a BOS there could not become a learned attention sink."""
    F, V = cfg.n_filler, cfg.n_values
    return {
        "filler0": 1,
        "value0": F + 1,
        "key": F + V + 1,
        "query": F + V + 2,
        "bos": F + V + 3,
        "size": F + V + 4,
    }


def recall_batch(cfg, n: int, length: int, distance: torch.Tensor | int, g: torch.Generator):
    """``n`` streams ``(n, length)`` ending in QUERY, the value ``v`` at ``distance`` before it, KEY just before v.

    Returns ``(input_ids, values)``. ``distance`` is an int or a ``(n,)`` tensor (2 ≤ d ≤ length − 3).
    """
    tk = vocab(cfg)
    ids = torch.randint(tk["filler0"], tk["filler0"] + cfg.n_filler, (n, length), generator=g)
    ids[:, 0] = tk["bos"]
    ids[:, -1] = tk["query"]
    vals = torch.randint(0, cfg.n_values, (n,), generator=g) + tk["value0"]
    d = torch.as_tensor(distance).expand(n) if not isinstance(distance, torch.Tensor) else distance
    pos_v = length - 1 - d
    rows = torch.arange(n)
    ids[rows, pos_v] = vals
    ids[rows, pos_v - 1] = tk["key"]
    return ids, vals


def train_batch_fn(cfg):
    def fn(step: int, g: torch.Generator):
        L = cfg.train_lengths[int(torch.randint(len(cfg.train_lengths), (1,), generator=g))]
        d = torch.randint(1, L - 3, (cfg.train.batch_size,), generator=g)
        x, v = recall_batch(cfg, cfg.train.batch_size, L, d, g)
        x = torch.cat([x, v[:, None]], dim=1)  # the answer follows QUERY; loss only on it
        y = torch.full_like(x, -100)
        y[:, -1] = v
        return x, y

    return fn


def build_model(cfg, seed: int):
    return tiny_causal_lm(
        "llama", seed=derive_seed(seed, "init"), vocab_size=vocab(cfg)["size"], hidden=cfg.hidden, layers=cfg.layers,
        heads=cfg.heads, kv_heads=cfg.kv_heads, intermediate=cfg.intermediate, rope_theta=cfg.rope_theta,
        max_positions=4096, attn_implementation="eager", tie_embeddings=cfg.tie_embeddings,
    )  # fmt: skip


def make_cache(cfg, model, cascades: int) -> CascadingKVCache:
    return CascadingKVCache(
        model, sink_tokens=cfg.sink_tokens, cache_size=cfg.cache_size, cascades=cascades, beta=cfg.beta,
        head_reduction=cfg.head_reduction, homogeneous_heads=cfg.homogeneous_heads,
    )  # fmt: skip


@torch.no_grad()
def full_attention_accuracy(cfg, model, ids: torch.Tensor, vals: torch.Tensor) -> float:
    from .profiling import attn_implementation

    with attn_implementation(model, cfg.full_attn_impl):
        pred = model(input_ids=ids).logits[:, -1].argmax(-1)
    return float((pred == vals).float().mean())


@torch.no_grad()
def cache_accuracy(cfg, model, ids, vals, cascades: int) -> tuple[float, float]:
    """Accuracy through the strided prefill, and the fraction of streams whose value token is still cached."""
    cache = make_cache(cfg, model, cascades)
    pred = strided_prefill(model, ids, cache, stride=cfg.stride).argmax(-1)
    pos_v = (ids == vocab(cfg)["key"]).float().argmax(1) + 1  # (n,)
    kept = torch.zeros(ids.shape[0], dtype=torch.bool)
    for li in range(len(cache.layers)):
        ret = cache.retained(li)  # (n, Hkv, S + N)
        kept |= (ret == pos_v[:, None, None]).flatten(1).any(1)
    return float((pred == vals).float().mean()), float(kept.float().mean())


def timing(cfg, model, seed: int) -> dict[str, float]:
    """Prefill seconds at L and 4L for the cascade, StreamingLLM and full attention; ratios time(4L)/time(L).

    Best of ``timing_repeats`` interleaved rounds, process CPU time on CPU (see :func:`.profiling.time_prefills`).
    """
    g = torch_generator(derive_seed(seed, "timing"))
    vocab_size = model.config.vocab_size
    keys, runs = [], []
    for method in ("cascade", "streaming", "full"):
        for mult in (1, 4):
            keys.append(f"{method}_s_{mult}L")
            runs.append((method, torch.randint(0, vocab_size, (1, cfg.timing_length * mult), generator=g)))
    secs = time_prefills(model, runs, cfg.cache_size, cfg.sink_tokens, cfg.cascades, cfg.stride,
                         cfg.timing_repeats, cfg.full_attn_impl)  # fmt: skip
    out = dict(zip(keys, secs, strict=True))
    for method in ("cascade", "streaming", "full"):
        out[f"{method}_ratio"] = out[f"{method}_s_4L"] / out[f"{method}_s_1L"]
    return out


def train_recall_model(cfg, seed: int, dev: torch.device):
    """The seed's recall model, trained with full attention (README, "Reproduction"); ``(model, history)``.

    Also used by ``benchmarks/bench_cascading_kv.py`` (needle recall of each cache beside its speed)."""
    seed_everything(seed)
    model = build_model(cfg, seed)
    tcfg = replace(
        cfg.train, seed=derive_seed(seed, "train")
    )  # cfg.train: plain AdamW, constant lr (see Config)
    hist = train_lm(model, cfg=tcfg, batch_fn=train_batch_fn(cfg), device=dev, desc=f"train seed {seed}")
    return model.eval(), hist
