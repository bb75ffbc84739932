"""Reproduction: key–value recall in streams longer than the cache (README, "Reproduction"), plus prefill scaling.

A tiny Llama (GQA: 4 query heads, 2 KV heads) is trained in the run, with full attention on short sequences
(lengths 32–96), to answer ``QUERY → v`` for the single ``KEY v`` pair hidden in random filler. It is then run,
without retraining, on streams of 360 tokens through the strided prefill with a fixed cache (S = 4 sinks,
N = 64 slots): StreamingLLM (C = 1, a window of 64) against the cascading cache (C = 4, W = 16, span ≈ 240).
The needle sits ``d`` tokens before the final ``QUERY``:

* ``d < N``: both caches hold it (``window_parity``);
* ``N < d < W·(2^C − 1)``: only the cascade can still hold it (``retrieval_beyond_window``);
* ``d > W·(2^C − 1)``: neither can (``span_bound``, the method's limit).

``prefill_linear`` times the strided prefill at ``L`` and ``4L`` (``L ≥ 8N``) against one full-attention forward.

The ``full`` preset (``mode="pretrained"``) runs the same claims with a real HF checkpoint (``model_name``: local
path or hub id, GPU): passkey retrieval at the same distance multiples of ``N`` and a streaming perplexity.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import Claim, all_of, make_claim
from iclr25.common.device import get_device
from iclr25.common.progress import progress
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import derive_seed, seed_everything, torch_generator
from iclr25.harness.rundir import RunDir, RunResult

from . import real
from .config import PRESETS, Config, RealConfig
from .pretrained import load_pretrained, passkey_ids
from .recall import (
    cache_accuracy,
    full_attention_accuracy,
    make_cache,
    recall_batch,
    timing,
    train_recall_model,
)
from .report import figure, report_md
from .streaming import strided_prefill

__all__ = [
    "Config",
    "PRESETS",
    "RealConfig",
    "claims",
    "one_seed",
    "run",
]  # the config names re-exported for the registry

SLUG = "cascading_kv"
# what a preset downloads (hub ids and `datasets` names). Sizes are approximate, recalled from the hub's file
# listings and not verified from here (no network): the model's 4 bf16 safetensors shards, PG19's whole dataset.
KNOWN_DOWNLOADS = {
    "meta-llama/Llama-3.1-8B-Instruct": 16_060_556_376,
    "deepmind/pg19": 11_744_571_011,  # the whole dataset (train + validation + test)
}


def downloads(cfg) -> list[dict]:
    """What running ``cfg`` would download: ``[{"what", "source", "bytes"}]`` (``bytes`` None when unknown); assets
    of :mod:`iclr25.assets`, local paths and built-in corpora download nothing here."""
    from iclr25.assets import NAMES

    if not isinstance(cfg, RealConfig):
        return []
    out = []
    if cfg.model_name not in NAMES and not Path(cfg.model_name).expanduser().exists():
        out.append({"what": "model", "source": cfg.model_name, "bytes": KNOWN_DOWNLOADS.get(cfg.model_name)})
    if cfg.ppl_corpus != "shakespeare" and not Path(cfg.ppl_corpus).expanduser().exists():
        out.append(
            {"what": "dataset", "source": cfg.ppl_corpus, "bytes": KNOWN_DOWNLOADS.get(cfg.ppl_corpus)}
        )
    return out


# ----------------------------------------------------------------------------- one seed, recall mode
def one_seed_recall(cfg: Config, seed: int) -> dict:
    dev = get_device(cfg.device)
    t0 = time.perf_counter()
    model, hist = train_recall_model(cfg, seed, dev)
    train_s = time.perf_counter() - t0

    # precondition: in-distribution accuracy with full attention
    g = torch_generator(derive_seed(seed, "valid"))
    accs = []
    for L in cfg.train_lengths:
        n = cfg.valid_trials // len(cfg.train_lengths)
        ids, vals = recall_batch(cfg, n, L, torch.randint(1, L - 3, (n,), generator=g), g)
        accs.append(full_attention_accuracy(cfg, model, ids.to(dev), vals.to(dev)))
    res: dict = {"train": {"final_loss": hist["final_train_loss"], "seconds": train_s},
                 "full": {"in_dist_acc": float(np.mean(accs))}, "cascade": {}, "streaming": {}}  # fmt: skip

    t0 = time.perf_counter()
    for d in progress(cfg.distances, desc=f"eval seed {seed}"):
        g = torch_generator(derive_seed(seed, "eval", d))
        ids, vals = recall_batch(cfg, cfg.trials, cfg.stream_length, d, g)
        ids, vals = ids.to(dev), vals.to(dev)
        res["full"][f"acc_d{d}"] = full_attention_accuracy(cfg, model, ids, vals)
        for name, c in (("cascade", cfg.cascades), ("streaming", 1)):
            acc, kept = cache_accuracy(cfg, model, ids, vals, c)
            res[name][f"acc_d{d}"] = acc
            res[name][f"kept_d{d}"] = kept
    res["eval_seconds"] = time.perf_counter() - t0
    res["timing"] = timing(cfg, model, seed)
    return res


# ----------------------------------------------------------------------------- one seed, pretrained mode
def one_seed_pretrained(cfg: Config, seed: int) -> dict:
    from .streaming import generate_streaming

    seed_everything(seed)
    dev = get_device(cfg.device)
    model, tok = load_pretrained(cfg, dev)
    res: dict = {"full": {"in_dist_acc": float("nan")}, "cascade": {}, "streaming": {}}
    g = torch_generator(derive_seed(seed, "passkey"))
    for d in progress(cfg.distances, desc="passkey"):
        for name, c in (("cascade", cfg.cascades), ("streaming", 1)):
            digits = []
            for _ in range(cfg.trials):
                key = "".join(str(int(x)) for x in torch.randint(0, 10, (5,), generator=g))
                ids = passkey_ids(tok, cfg.stream_length, d, key, g)
                out = generate_streaming(
                    model, ids, make_cache(cfg, model, c), stride=cfg.stride, max_new_tokens=8
                )
                text = tok.decode(out[0, ids.shape[1] :])
                got = "".join(ch for ch in text if ch.isdigit())[:5].ljust(5)
                digits.append(np.mean([a == b for a, b in zip(got, key)]))
            res[name][f"acc_d{d}"] = float(np.mean(digits))
    # streaming perplexity over an offline text (PG19-style: whole text streamed from the start)
    from iclr25.cascading_kv.corpus import stdlib_corpus

    text = " ".join(stdlib_corpus(("docs",)).test)
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"][:, : cfg.stream_length].to(
        dev
    )
    for name, c in (("cascade", cfg.cascades), ("streaming", 1)):
        logits = strided_prefill(
            model, ids, make_cache(cfg, model, c), stride=cfg.stride, return_logits="all"
        )
        nll = torch.nn.functional.cross_entropy(logits[0, :-1].float(), ids[0, 1:])
        res[name]["ppl"] = float(nll.exp())
    res["timing"] = timing(cfg, model, seed)
    return res


# ----------------------------------------------------------------------------- run
def one_seed(cfg: Config, seed: int, runner: real.Runner | None = None, snaps: dict | None = None) -> dict:
    """One seed of the configured mode: the trained recall model (``recall``), a checkpoint (``pretrained``) or, for
    a ``RealConfig``, ``real.one_seed`` with the model's ``runner`` and filler ``snaps`` (built once by ``run``
    through ``real.prepare``; here when not given)."""
    if isinstance(cfg, RealConfig):
        if runner is None or snaps is None:
            runner, snaps = real.prepare(cfg, get_device(cfg.device))
        return real.one_seed(cfg, seed, runner, snaps)
    return (one_seed_recall if cfg.mode == "recall" else one_seed_pretrained)(cfg, seed)


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The per-seed keys the claims read: both caches' accuracy at every split distance, the prefill ratios (a
    ``RealConfig``: real.py's declaration)."""
    if isinstance(cfg, RealConfig):
        return real.required_keys(cfg)
    inside, beyond, outside = _split_distances(cfg)
    acc = tuple(f"{n}/acc_d{d}" for d in (*inside, *beyond, *outside) for n in ("cascade", "streaming"))
    return (*acc, "timing/cascade_ratio", "timing/full_ratio")


def _split_distances(cfg: Config) -> tuple[list[int], list[int], list[int]]:
    ds = cfg.distances
    inside = [d for d in ds if d < cfg.cache_size]
    beyond = [d for d in ds if cfg.cache_size < d < cfg.span_limit]
    outside = [d for d in ds if d > cfg.span_limit]
    return inside, beyond, outside


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims (ids and thresholds fixed): window parity, retrieval beyond the window, the span bound and
    linear prefill."""
    inside, beyond, outside = _split_distances(cfg)
    N, span = cfg.cache_size, cfg.span_limit

    def v(key: str) -> list[float]:
        return values(per_seed, key)

    parity = all_of(
        "window_parity",
        f"Inside the window (d < N = {N}) the cascade and StreamingLLM both retrieve the needle (accuracy >= 0.9).",
        [
            make_claim(
                "window_parity",
                f"{name} accuracy at d={d}",
                f"{name}/acc_d{d}",
                method=v(f"{name}/acc_d{d}"),
                threshold=0.9,
                direction=">=",
            )
            for d in inside
            for name in ("cascade", "streaming")
        ],
    )
    casc_beyond = [
        float(np.mean([v(f"cascade/acc_d{d}")[i] for d in beyond])) for i in range(len(cfg.seed_list))
    ]
    beyond_parts = [
        make_claim(
            "retrieval_beyond_window",
            f"cascade − StreamingLLM accuracy at d={d}",
            f"acc_d{d}",
            method=v(f"cascade/acc_d{d}"),
            baseline=v(f"streaming/acc_d{d}"),
            threshold=0.5,
            direction=">=",
            compare="difference",
        )
        for d in beyond
    ] + [
        make_claim(
            "retrieval_beyond_window",
            f"cascade accuracy averaged over d in {beyond}",
            "cascade/acc_beyond",
            method=casc_beyond,
            threshold=0.7,
            direction=">=",
        )
    ]
    retrieval = all_of(
        "retrieval_beyond_window",
        f"Beyond the window (d in {beyond}, N = {N}) the cascade (C = {cfg.cascades}) retrieves the needle: accuracy "
        "exceeds StreamingLLM's by >= 0.5 at each distance, and is >= 0.7 on average.",
        beyond_parts,
        note="" if beyond else "no distance between N and W·(2^C−1) configured",
    )
    bound = all_of(
        "span_bound",
        f"Beyond the cascade's span W·(2^C−1) = {span} (d in {outside}) both caches fail (accuracy <= 0.25).",
        [
            make_claim(
                "span_bound",
                f"{name} accuracy at d={d}",
                f"{name}/acc_d{d}",
                method=v(f"{name}/acc_d{d}"),
                threshold=0.25,
                direction="<=",
            )
            for d in outside
            for name in ("cascade", "streaming")
        ],
    )
    L = cfg.timing_length
    linear = all_of(
        "prefill_linear",
        f"Strided prefill is linear: time(4L)/time(L) <= 5 at L = {L} >= 8N, while full attention's ratio is >= 8.",
        [
            make_claim(
                "prefill_linear",
                "cascade prefill time(4L)/time(L)",
                "timing/cascade_ratio",
                method=v("timing/cascade_ratio"),
                threshold=5.0,
                direction="<=",
            ),
            make_claim(
                "prefill_linear",
                "full-attention prefill time(4L)/time(L)",
                "timing/full_ratio",
                method=v("timing/full_ratio"),
                threshold=8.0,
                direction=">=",
            ),
        ],
        note=f"process CPU time on CPU ({cfg.full_attn_impl} full attention, one forward over the prompt), best of "
        f"{cfg.timing_repeats} interleaved rounds (robust to a loaded machine; a single run can still be noisy)",
    )
    return [parity, retrieval, bound, linear]


def validity(cfg: Config, per_seed: dict) -> tuple[bool, str]:
    """A recall run is valid only when the trained model answers in distribution with full attention."""
    valid, reason = True, ""
    if cfg.mode == "recall":
        accs = values(per_seed, "full/in_dist_acc")
        if min(accs) < cfg.valid_min_acc:
            valid = False
            reason = (
                f"the trained model reaches only {min(accs):.3f} < {cfg.valid_min_acc} in-distribution accuracy "
                "with full attention (train longer): the cache comparison is not meaningful"
            )
    return valid, reason


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=required_keys(cfg))
    ctx = real.prepare(cfg, get_device(cfg.device)) if isinstance(cfg, RealConfig) else (None, None)
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s, *ctx), cfg.seed_list)
    if isinstance(cfg, RealConfig):  # a pretrained LM's passkey record (real.py)
        reason = real.precondition(cfg, per_seed)
        return RunResult(seeds=cfg.seed_list, metrics=aggregate(per_seed), claims=real.claims(cfg, per_seed),
                         per_seed=per_seed, figures=[], report_md=real.report_md(cfg, per_seed), valid=not reason,
                         invalid_reason=reason)  # fmt: skip
    valid, reason = validity(cfg, per_seed)
    return RunResult(
        seeds=cfg.seed_list, metrics=aggregate(per_seed), claims=claims(cfg, per_seed), per_seed=per_seed,
        figures=[figure(cfg, per_seed, rd.figures / "accuracy_vs_distance.png")], report_md=report_md(cfg, per_seed),
        valid=valid, invalid_reason=reason,
    )  # fmt: skip
