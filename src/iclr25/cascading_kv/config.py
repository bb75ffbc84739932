"""The cascading-KV reproduction's settings (README, "Reproduction"): :class:`Config` (the tiny recall model,
trained in the run), :class:`RealConfig` (the ``real`` and ``full`` presets, ``real.py``) and their :data:`PRESETS`
(read by ``experiment.py``, ``real.py`` and ``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig
from iclr25.common.train import LMTrainConfig

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
