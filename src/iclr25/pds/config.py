"""The pds reproduction's configuration: ``Config`` (the generated preset), ``RealConfig`` (``real.py``), ``FullConfig`` (``full.py``) and ``PRESETS``."""

from __future__ import annotations

from dataclasses import dataclass

from iclr25.common.fields import bounded
from iclr25.common.results import ExperimentConfig

from . import full

# the real preset's sources (``real.py`` reads them here)
REAL_SOURCES = ("wikipedia", "shakespeare", "milton", "lee", "glosses")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # corpus (README, "Reproduction")
    n_symbols: int = bounded(48, lo=1)
    seq_len: int = bounded(32, lo=1)
    n_pool: int = bounded(12000, lo=1)
    n_dev: int = bounded(128, lo=1)
    n_test: int = bounded(512, lo=1)
    # source fractions: clean, noisy, other chain, repeats (sum 1)
    mix: tuple[float, float, float, float] = bounded(
        (0.3, 0.3, 0.2, 0.2), kind=float, lo=0, each=True, length=4
    )
    # proxy LM (HF config, eager attention) and its warm start (the paper's "160M-10k" checkpoint)
    arch: str = "llama"
    proxy_hidden: int = bounded(32, lo=1)
    proxy_layers: int = bounded(2, lo=1)
    proxy_heads: int = bounded(4, lo=1)
    warm_steps: int = bounded(150, lo=0)
    warm_lr: float = bounded(3e-3, lo=0, lo_open=True)
    # PMP solver (paper: T = 100, η = 0.008 for a 160M model, c = 10, batch 256 instances)
    pmp_steps: int = bounded(100, lo=1)
    pmp_batch: int = bounded(32, lo=1)
    pmp_lr: float = bounded(0.5, lo=0, lo_open=True)
    score_every: int = bounded(10, lo=1)
    proxy_size: int = bounded(1500, lo=1)
    chunk_size: int = bounded(256, lo=1)
    # data scorer
    # "ridge" (n-gram ridge) or "transformer" (the released design)
    scorer: str = bounded("ridge", choices=("ridge", "transformer"))
    scorer_val: int = bounded(300, lo=1)  # first rows of the proxy set = validation split
    ridge_alpha: float = 1.0
    scorer_hidden: int = bounded(64, lo=1)
    scorer_layers: int = bounded(2, lo=1)
    scorer_epochs: int = bounded(5, lo=1)
    scorer_batch: int = bounded(512, lo=1)
    scorer_lr: float = bounded(1e-4, lo=0, lo_open=True)
    # selection (paper: r = 0.4, τ = 0.1)
    ratio: float = bounded(0.4, lo=0, hi=1, lo_open=True)
    tau: float = bounded(0.1, lo=0)
    # target LM trained from scratch on each selection
    target_hidden: int = bounded(48, lo=1)
    target_layers: int = bounded(2, lo=1)
    target_heads: int = bounded(4, lo=1)
    train_steps: int = bounded(400, lo=1)
    train_batch: int = bounded(32, lo=1)
    train_lr: float = bounded(3e-3, lo=0, lo_open=True)
    train_warmup: int = bounded(20, lo=0)
    eval_every: int = bounded(20, lo=1)
    # baselines / ablations reported alongside
    run_dsir: bool = True
    # "package" (PyPI data-selection) or "numpy" (same estimator, vectorised)
    dsir_backend: str = bounded("package", choices=("package", "numpy"))
    run_t1: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (mix element-wise); below: mix's sum, rules across fields
        if abs(sum(self.mix) - 1) > 1e-9:  # as make_markov_corpus checks it, so `--set` rejects it up front
            raise ValueError(f"mix must sum to 1, got {self.mix!r}")
        for hid, heads in (("proxy_hidden", "proxy_heads"), ("target_hidden", "target_heads")):
            if getattr(self, hid) % getattr(self, heads):
                raise ValueError(
                    f"{hid} ({getattr(self, hid)}) must be divisible by {heads} ({getattr(self, heads)}): "
                    f"each attention head gets {hid} / {heads} dimensions"
                )
        if self.scorer_val >= self.proxy_size:
            raise ValueError(f"scorer_val must be < proxy_size ({self.proxy_size}), got {self.scorer_val}")
        if self.proxy_size > self.n_pool:
            raise ValueError(f"proxy_size must be <= n_pool ({self.n_pool}), got {self.proxy_size}")
        if self.pmp_steps * self.pmp_batch > self.n_pool:
            raise ValueError(
                f"pmp_steps * pmp_batch must be <= n_pool ({self.n_pool}) (one pass of the stream), "
                f"got {self.pmp_steps * self.pmp_batch}"
            )
        if self.train_steps % self.eval_every:
            raise ValueError(
                f"train_steps must be a multiple of eval_every ({self.eval_every}), got {self.train_steps}"
            )


PRESETS = {
    "smoke": Config(
        seeds=1,
        n_pool=1500,
        n_test=128,
        n_dev=64,
        warm_steps=30,
        pmp_steps=8,
        pmp_batch=16,
        score_every=2,
        proxy_size=200,
        scorer_val=50,
        train_steps=40,
        eval_every=10,
        train_warmup=4,
    ),
    "quick": Config(),
}


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` preset (``real.py``): chunks of five real corpora in SmolLM2's tokenizer, Wikipedia as the
    target. A subclass, so the generated presets keep their fields and config hash; ``n_symbols`` and ``mix``
    (fields of the generated corpus) are not used and must keep their defaults; ``n_pool`` must equal
    ``per_source`` × the number of sources."""

    sources: tuple[str, ...] = bounded(REAL_SOURCES, choices=REAL_SOURCES, each=True)
    per_source: int = bounded(1000, lo=1)  # chunks each source puts in the pool
    vocab: int = bounded(4096, lo=4)  # the pool's most frequent SmolLM2 ids kept (+ pad / bos / unk)
    max_tokens: int = bounded(400_000, lo=0)  # per non-Wikipedia source, ≈ tokens kept (every k-th unit)
    run_t1: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sources[:1] != ("wikipedia",) or len(set(self.sources)) != len(self.sources):
            raise ValueError(
                f"sources must start with 'wikipedia' and not repeat a source, got {self.sources!r}"
            )
        if self.n_pool != self.per_source * len(self.sources):
            raise ValueError(
                f"n_pool must equal per_source × len(sources) = {self.per_source * len(self.sources)}, "
                f"got {self.n_pool}"
            )
        base = Config()
        for name in ("n_symbols", "mix"):
            if getattr(self, name) != getattr(base, name):
                raise ValueError(
                    f"{name} is a field of the generated corpus, not used by the real preset; leave it at "
                    f"{getattr(base, name)!r}, got {getattr(self, name)!r}"
                )


PRESETS["real"] = RealConfig(
    seq_len=32,
    n_pool=5000,
    vocab=2048,
    proxy_hidden=32,
    proxy_layers=2,
    proxy_heads=4,
    # the paper starts PMP from a trained checkpoint (10K steps): after 150 warm steps the proxy sat where the
    # co-state λ_t grows exponentially backwards (seed 0: ‖λ_1‖ 3e8 even at the paper's η = 0.008, NaN at 0.1);
    # after 600 it stays ≤ 36 (README, "Real inputs")
    warm_steps=600,
    # η = the paper's ratio of η to the pre-training peak lr (0.008 / 6e-4 ≈ 13) × the warm start's 3e-3
    pmp_lr=0.04,
    proxy_size=1000,
    target_hidden=64,
    target_layers=2,
    target_heads=4,
    train_steps=300,
)


@dataclass(frozen=True)
class FullConfig(Config):
    """The ``full`` preset (``full.py``): the paper's proxy / target LMs, a CommonCrawl-derived corpus and LIMA by
    hub id / ``datasets`` name (or local files in the same format). ``n_symbols`` and ``mix`` are not used."""

    proxy_model: str = "Data-Selection/BSL-160M"
    target_model: str = "Data-Selection/BSL-160M"
    corpus: str = "HuggingFaceFW/fineweb"
    corpus_config: str = "sample-10BT"
    corpus_split: str = "train"
    corpus_docs: int = bounded(200_000, lo=0)  # documents read (0: all); enough for n_pool rows
    text_column: str = "text"
    target_data: str = "GAIR/lima"
    target_column: str = "conversations"
    dev_split: str = "train"
    test_split: str = "test"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("proxy_model", "target_model", "corpus", "target_data", "text_column", "target_column"):
            if not getattr(self, name).strip():
                raise ValueError(
                    f"{name} must name a hub id, dataset or local path, got {getattr(self, name)!r}"
                )

    def downloads(self) -> list[dict[str, str]]:
        return full.downloads(self)


PRESETS["full"] = FullConfig(
    seq_len=1024,  # instances of 1,025 tokens (§4.1)
    n_pool=100_000,
    n_dev=1024,
    n_test=512,
    warm_steps=0,  # the proxy is a pre-trained checkpoint
    pmp_steps=100,  # T = 100, η = 0.008, every 10 steps (§4.1)
    pmp_batch=64,
    pmp_lr=0.008,
    score_every=10,
    proxy_size=16384,
    scorer_val=2048,
    chunk_size=8,
    scorer="transformer",
    scorer_hidden=256,
    scorer_layers=4,
    scorer_epochs=5,
    scorer_batch=128,
    train_steps=2000,
    train_batch=64,
    train_lr=6e-4,
    train_warmup=100,
    eval_every=100,
    dsir_backend="numpy",
    run_t1=False,
    device="cuda",
)
