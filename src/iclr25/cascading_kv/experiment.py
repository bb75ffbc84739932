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
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import Claim, all_of, make_claim
from iclr25.common.device import get_device
from iclr25.common.fields import bounded, check_nested
from iclr25.common.lm import tiny_causal_lm
from iclr25.common.progress import progress
from iclr25.common.results import ExperimentConfig, aggregate, values
from iclr25.common.seeding import derive_seed, seed_everything, torch_generator
from iclr25.common.train import LMTrainConfig, train_lm
from iclr25.harness.rundir import RunDir, RunResult

from .cache import CascadingKVCache
from .profiling import time_prefills
from .report import figure, report_md
from .streaming import strided_prefill

SLUG = "cascading_kv"
MODES = ("recall", "pretrained")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # "recall": tiny Llama trained here; "pretrained": an HF checkpoint (full preset)
    mode: str = bounded("recall", choices=MODES)
    # tiny model (README, "Reproduction")
    hidden: int = bounded(64, lo=1)
    intermediate: int = 128
    layers: int = bounded(2, lo=1)
    heads: int = bounded(4, lo=1)
    kv_heads: int = bounded(2, lo=1)
    rope_theta: float = 1e4
    tie_embeddings: bool = (
        False  # LlamaConfig's default (see README: tied + warm-up/cosine retained the needle ~50%)
    )
    n_filler: int = bounded(64, lo=1)
    n_values: int = bounded(32, lo=1)
    train_lengths: tuple[int, ...] = bounded((32, 64, 96), lo=8, each=True)
    # training of the recall model, every LMTrainConfig field (``--set train.steps=600 --set train.lr=1e-3``):
    # plain AdamW at a constant learning rate (README, "Reproduction") — no warm-up/decay, no clipping, torch's
    # default betas.
    # train.seq_len is the longest training stream + 1; train.seed is derived per seed (left at 0 here).
    train: LMTrainConfig = LMTrainConfig(
        steps=400, batch_size=32, seq_len=97, lr=3e-3, warmup_steps=0, min_lr_ratio=1.0, weight_decay=0.01,
        beta2=0.999, grad_clip=0.0, eval_every=0,
    )  # fmt: skip
    # cache (README; the paper's scripts use 64 sinks, β = 0.9999 and much larger caches)
    sink_tokens: int = bounded(4, lo=0)
    cache_size: int = bounded(64, lo=1)
    cascades: int = bounded(4, lo=1)
    stride: int = bounded(32, lo=1)
    beta: float = bounded(0.999, lo=0, hi=1, lo_open=True, hi_open=True)
    head_reduction: str = "max"
    homogeneous_heads: bool = False
    # evaluation: needle distance d = factor · N before the final QUERY
    distance_factors: tuple[float, ...] = bounded(
        (0.625, 1.5, 2.5, 3.4, 4.7), kind=float, lo=0, lo_open=True, each=True
    )
    stream_length: int = bounded(360, lo=1)
    trials: int = bounded(50, lo=1)
    valid_trials: int = bounded(256, lo=1)
    valid_min_acc: float = 0.95
    # prefill timing: L and 4L, with L >= 8N
    timing_length: int = bounded(512, lo=1)
    timing_repeats: int = bounded(5, lo=1)  # interleaved rounds; the best time of each configuration is kept
    full_attn_impl: str = "eager"
    # pretrained mode
    model_name: str = ""  # local path or hub id; "tiny" builds a random tiny Llama (tests)
    dtype: str = "float32"

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (tuples element-wise); below: rules across fields
        check_nested(self, "train", LMTrainConfig, ("seed",), "derived from each run seed")
        if self.train.seq_len != max(self.train_lengths) + 1:
            raise ValueError(
                f"train.seq_len must be the longest of train_lengths + 1 = {max(self.train_lengths) + 1} (the "
                f"training streams' length), got {self.train.seq_len}"
            )
        if self.cache_size % self.cascades:
            raise ValueError(
                f"cache_size ({self.cache_size}) must be divisible by cascades ({self.cascades})"
            )
        ds = self.distances
        if min(ds) < 2 or max(ds) > self.stream_length - self.sink_tokens - 4:
            raise ValueError(
                f"distance_factors give distances {ds}; they must lie in [2, stream_length - sink_tokens - 4]"
            )
        groups = (
            [d for d in ds if d < self.cache_size],
            [d for d in ds if self.cache_size < d < self.span_limit],
            [d for d in ds if d > self.span_limit],
        )
        if not all(groups):
            raise ValueError(
                f"distance_factors must give distances below N, between N and W·(2^C−1) = {self.span_limit}, and "
                f"beyond it; got {ds}"
            )
        if self.timing_length < 8 * self.cache_size:
            raise ValueError(
                f"timing_length must be >= 8 * cache_size = {8 * self.cache_size}, got {self.timing_length}"
            )
        if self.mode == "pretrained" and not self.model_name:
            raise ValueError("model_name must name a local path or hub id (or 'tiny') when mode='pretrained'")

    @property
    def distances(self) -> list[int]:
        return [int(round(f * self.cache_size)) for f in self.distance_factors]

    @property
    def window(self) -> int:
        return self.cache_size // self.cascades

    @property
    def span_limit(self) -> int:
        return self.window * (2**self.cascades - 1)


PRESETS = {
    "smoke": Config(
        seeds=1, train=replace(Config.train, steps=80), trials=8, valid_trials=32, timing_repeats=1
    ),
    "quick": Config(seeds=3, train=replace(Config.train, steps=300), trials=50),
}


_RECALL_ONLY = ("mode", "hidden", "intermediate", "layers", "heads", "kv_heads", "rope_theta", "tie_embeddings",
                "n_filler", "n_values", "train_lengths", "train", "homogeneous_heads", "distance_factors",
                "stream_length", "trials", "valid_trials", "timing_length", "timing_repeats", "full_attn_impl")  # fmt: skip


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` preset (SmolLM2-135M-Instruct, ``real.py``) and the ``full`` preset (the paper's model class and
    PG19): passkey retrieval at fixed prompt lengths and key distances through caches of equal size, and streaming
    perplexity on held-out text. A subclass, so that the recall presets keep their fields and config hash; the recall
    model's fields (``mode`` … ``full_attn_impl``, :data:`_RECALL_ONLY`) are not used and must keep their defaults."""

    # local path, asset name or hub id, loaded with iclr25.assets.load_causal_lm
    model_name: str = "smollm2-135m-instruct"
    dtype: str = bounded("float32", choices=("float32", "bfloat16", "float16"))
    # every cache holds S + N tokens: the cascade (C cascades), StreamingLLM (C = 1), HF's sliding window (S + N)
    sink_tokens: int = bounded(4, lo=0)
    cache_size: int = bounded(256, lo=1)
    cascades: int = bounded(4, lo=1)
    stride: int = bounded(64, lo=1)
    beta: float = bounded(0.9999, lo=0, hi=1, lo_open=True, hi_open=True)
    head_reduction: str = bounded("max", choices=("max", "mean"))
    # passkey: prompt lengths and key distances (needle start -> prompt end), fixed before the run; L - d must be a
    # multiple of the stride (the filler is read once and copied there)
    prompt_lengths: tuple[int, ...] = bounded((1024, 4096), lo=1, each=True)
    key_distances: tuple[int, ...] = bounded((128, 192, 384, 640, 896), lo=1, each=True)
    keys_per_point: int = bounded(1, lo=1)  # keys per (length, distance) and seed
    full_max_length: int = bounded(8192, lo=1)  # full attention runs only up to this prompt length
    # precondition: full attention's accuracy at every length it runs
    valid_min_acc: float = bounded(0.8, kind=float, lo=0, hi=1)
    # streaming perplexity: "shakespeare" (iclr25.assets), a `datasets` hub name, or a local parquet file (text column)
    ppl_corpus: str = "shakespeare"
    ppl_split: str = "test"
    ppl_tokens: int = bounded(8192, lo=2)
    ppl_beyond: int = bounded(4096, lo=0)  # also report the perplexity of the tokens after this position

    def __post_init__(self) -> None:
        ExperimentConfig.__post_init__(self)  # the declared bounds; Config's rules are the recall model's
        base = Config()
        for name in _RECALL_ONLY:
            if getattr(self, name) != getattr(base, name):
                raise ValueError(
                    f"{name} is a field of the recall model, not used by the real/full presets; leave it at "
                    f"{getattr(base, name)!r}, got {getattr(self, name)!r}"
                )
        if self.cache_size % self.cascades or self.cascades < 2:
            raise ValueError(
                f"cascades must be >= 2 (C = 1 is the StreamingLLM baseline) and divide cache_size "
                f"({self.cache_size}), got {self.cascades}"
            )
        bad = [
            (L, d)
            for L in self.prompt_lengths
            for d in self.key_distances
            if (L - d) % self.stride or L - d < 64
        ]
        if bad:
            raise ValueError(
                f"prompt_lengths and key_distances must give filler cuts L - d >= 64 (past the intro) that are multiples of stride "
                f"{self.stride}, got (L, d) = {bad}"
            )
        if not any(d < self.cache_size for d in self.key_distances) or not any(
            self.cache_size < d < self.span_limit for d in self.key_distances
        ):
            raise ValueError(
                f"key_distances must include one below cache_size {self.cache_size} and one between it and the span "
                f"W·(2^C−1) = {self.span_limit}, got {self.key_distances}"
            )
        if not any(L <= self.full_max_length for L in self.prompt_lengths):
            raise ValueError(
                f"full_max_length ({self.full_max_length}) must admit at least one of prompt_lengths "
                f"{self.prompt_lengths} (the precondition needs full attention)"
            )
        if self.ppl_beyond >= self.ppl_tokens:
            raise ValueError(f"ppl_beyond must be < ppl_tokens = {self.ppl_tokens}, got {self.ppl_beyond}")


# run with --jobs 2 (one thread per seed; the filler is read once, before the seeds, and the workers inherit it)
PRESETS["real"] = RealConfig()
# the paper's setting by name (never downloaded in tests; `iclr25 config cascading_kv --preset full`): the model
# class of its passkey and PG19 experiments (Llama 3.1 8B Instruct, 128K trained context), passkey to 1M tokens
PRESETS["full"] = RealConfig(
    seeds=3,
    model_name="meta-llama/Llama-3.1-8B-Instruct",
    device="cuda",
    dtype="bfloat16",
    threads=None,
    sink_tokens=64,
    cache_size=32768,
    cascades=4,
    stride=4096,
    prompt_lengths=(131072, 262144, 1048576),
    key_distances=(16384, 61440, 118784),
    full_max_length=131072,
    ppl_corpus="deepmind/pg19",
    ppl_split="test",
    ppl_tokens=65536,
    ppl_beyond=32768,
)

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


# ----------------------------------------------------------------------------- key–value recall data
def vocab(cfg: Config) -> dict[str, int]:
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


def recall_batch(cfg: Config, n: int, length: int, distance: torch.Tensor | int, g: torch.Generator):
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


def train_batch_fn(cfg: Config):
    def fn(step: int, g: torch.Generator):
        L = cfg.train_lengths[int(torch.randint(len(cfg.train_lengths), (1,), generator=g))]
        d = torch.randint(1, L - 3, (cfg.train.batch_size,), generator=g)
        x, v = recall_batch(cfg, cfg.train.batch_size, L, d, g)
        x = torch.cat([x, v[:, None]], dim=1)  # the answer follows QUERY; loss only on it
        y = torch.full_like(x, -100)
        y[:, -1] = v
        return x, y

    return fn


def build_model(cfg: Config, seed: int):
    return tiny_causal_lm(
        "llama", seed=derive_seed(seed, "init"), vocab_size=vocab(cfg)["size"], hidden=cfg.hidden, layers=cfg.layers,
        heads=cfg.heads, kv_heads=cfg.kv_heads, intermediate=cfg.intermediate, rope_theta=cfg.rope_theta,
        max_positions=4096, attn_implementation="eager", tie_embeddings=cfg.tie_embeddings,
    )  # fmt: skip


def make_cache(cfg: Config, model, cascades: int) -> CascadingKVCache:
    return CascadingKVCache(
        model, sink_tokens=cfg.sink_tokens, cache_size=cfg.cache_size, cascades=cascades, beta=cfg.beta,
        head_reduction=cfg.head_reduction, homogeneous_heads=cfg.homogeneous_heads,
    )  # fmt: skip


@torch.no_grad()
def full_attention_accuracy(cfg: Config, model, ids: torch.Tensor, vals: torch.Tensor) -> float:
    from .profiling import attn_implementation

    with attn_implementation(model, cfg.full_attn_impl):
        pred = model(input_ids=ids).logits[:, -1].argmax(-1)
    return float((pred == vals).float().mean())


@torch.no_grad()
def cache_accuracy(cfg: Config, model, ids, vals, cascades: int) -> tuple[float, float]:
    """Accuracy through the strided prefill, and the fraction of streams whose value token is still cached."""
    cache = make_cache(cfg, model, cascades)
    pred = strided_prefill(model, ids, cache, stride=cfg.stride).argmax(-1)
    pos_v = (ids == vocab(cfg)["key"]).float().argmax(1) + 1  # (n,)
    kept = torch.zeros(ids.shape[0], dtype=torch.bool)
    for li in range(len(cache.layers)):
        ret = cache.retained(li)  # (n, Hkv, S + N)
        kept |= (ret == pos_v[:, None, None]).flatten(1).any(1)
    return float((pred == vals).float().mean()), float(kept.float().mean())


def timing(cfg: Config, model, seed: int) -> dict[str, float]:
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


# ----------------------------------------------------------------------------- one seed, recall mode
def train_recall_model(cfg: Config, seed: int, dev: torch.device):
    """The seed's recall model, trained with full attention (README, "Reproduction"); ``(model, history)``.

    Also used by ``benchmarks/bench_cascading_kv.py`` (needle recall of each cache beside its speed)."""
    seed_everything(seed)
    model = build_model(cfg, seed)
    tcfg = replace(
        cfg.train, seed=derive_seed(seed, "train")
    )  # cfg.train: plain AdamW, constant lr (see Config)
    hist = train_lm(model, cfg=tcfg, batch_fn=train_batch_fn(cfg), device=dev, desc=f"train seed {seed}")
    return model.eval(), hist


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
def _load_pretrained(cfg: Config, dev: torch.device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from iclr25.common.lm import byte_tokenizer

    if cfg.model_name == "tiny":
        tok = byte_tokenizer()
        model = tiny_causal_lm("llama", seed=0, vocab_size=len(tok), hidden=64, layers=2, heads=4, kv_heads=2,
                               max_positions=8192)  # fmt: skip
        return model.to(dev).eval(), tok
    dtype = getattr(torch, cfg.dtype)
    tok = AutoTokenizer.from_pretrained(cfg.model_name)
    model = AutoModelForCausalLM.from_pretrained(cfg.model_name, dtype=dtype, attn_implementation="sdpa")
    return model.to(dev).eval(), tok


def _passkey_ids(tok, length: int, distance: int, key: str, g: torch.Generator) -> torch.Tensor:
    """Filler sentences with "The pass key is KEY." about ``distance`` tokens before the question."""
    filler = tok(" The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
                 add_special_tokens=False)["input_ids"]  # fmt: skip
    needle = tok(f" The pass key is {key}. Remember it. {key} is the pass key.", add_special_tokens=False)[
        "input_ids"
    ]
    question = tok(" What is the pass key? The pass key is", add_special_tokens=False)["input_ids"]
    body = length - len(question)
    hay = (filler * (body // len(filler) + 2))[:body]
    at = max(0, body - distance)
    ids = hay[:at] + needle + hay[at : body - len(needle)]
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    return torch.tensor(bos + ids + question)[None]


def one_seed_pretrained(cfg: Config, seed: int) -> dict:
    from .streaming import generate_streaming

    seed_everything(seed)
    dev = get_device(cfg.device)
    model, tok = _load_pretrained(cfg, dev)
    res: dict = {"full": {"in_dist_acc": float("nan")}, "cascade": {}, "streaming": {}}
    g = torch_generator(derive_seed(seed, "passkey"))
    for d in progress(cfg.distances, desc="passkey"):
        for name, c in (("cascade", cfg.cascades), ("streaming", 1)):
            digits = []
            for _ in range(cfg.trials):
                key = "".join(str(int(x)) for x in torch.randint(0, 10, (5,), generator=g))
                ids = _passkey_ids(tok, cfg.stream_length, d, key, g)
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
def one_seed(cfg: Config, seed: int) -> dict:
    """One seed of the configured mode: the trained recall model (``recall``) or a checkpoint (``pretrained``)."""
    return (one_seed_recall if cfg.mode == "recall" else one_seed_pretrained)(cfg, seed)


def _split_distances(cfg: Config) -> tuple[list[int], list[int], list[int]]:
    ds = cfg.distances
    inside = [d for d in ds if d < cfg.cache_size]
    beyond = [d for d in ds if cfg.cache_size < d < cfg.span_limit]
    outside = [d for d in ds if d > cfg.span_limit]
    return inside, beyond, outside


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The per-seed keys the claims read: both caches' accuracy at every split distance, the prefill ratios."""
    inside, beyond, outside = _split_distances(cfg)
    acc = tuple(f"{n}/acc_d{d}" for d in (*inside, *beyond, *outside) for n in ("cascade", "streaming"))
    return (*acc, "timing/cascade_ratio", "timing/full_ratio")


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
    if isinstance(cfg, RealConfig):
        return _run_real(cfg, out)
    rd = RunDir(out, cfg, required=required_keys(cfg))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    valid, reason = validity(cfg, per_seed)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[figure(cfg, per_seed, rd.figures / "accuracy_vs_distance.png")],
        report_md=report_md(cfg, per_seed),
        valid=valid,
        invalid_reason=reason,
    )


def _run_real(cfg: RealConfig, out: Path) -> RunResult:
    from . import real

    rd = RunDir(out, cfg, required=real.required_keys(cfg))
    per_seed = real.run_all(cfg, rd, get_device(cfg.device))
    reason = real.precondition(cfg, per_seed)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=real.claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[],
        report_md=real.report_md(cfg, per_seed),
        valid=not reason,
        invalid_reason=reason,
    )
