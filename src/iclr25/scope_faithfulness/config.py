"""The SCOPE reproduction's settings (README, "Reproduction"): :class:`Config` and its :data:`PRESETS` (read by
``experiment.py`` and ``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig
from iclr25.common.train import LMTrainConfig

ARCHS = ("gpt2", "llama")
# the LMTrainConfig fields each training stage sets itself (training.stage_config)
_SET_PER_STAGE = ("warmup_steps", "eval_every", "seed")
_WHY = {
    "warmup_steps": "set per stage to min(50, steps // 10)",
    "eval_every": "set per stage to 0 (no held-out data to evaluate on)",
    "seed": "set per stage from the run's or the seed's seed",
}


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # synthetic world and data
    # p_LM corpus: city/year follow the occupation prior with prob. prior_strength
    n_pretrain: int = bounded(6000, lo=1)
    prior_strength: float = bounded(0.9, lo=0, hi=1)
    n_data: int = bounded(3000, lo=4)  # D, split in halves D₁ (SFT) / D₂ (SCOPE)
    n_test: int = bounded(300, lo=1)  # faithful test records
    year_absent: float = bounded(0.4, lo=0, hi=1)
    divergent: float = bounded(0.5, lo=0, hi=1)  # P(reference states the prior year | year absent)
    # model: a random-init tiny model over the 79-word vocabulary, or a local HF causal LM (+ its tokenizer),
    # further pre-trained on the prior-driven corpus to become p_LM (the paper's 1–3B/7B setting on a GPU)
    base_model_path: str = ""
    arch: str = bounded("gpt2", choices=ARCHS)
    hidden: int = bounded(96, lo=1)
    layers: int = bounded(2, lo=1)
    heads: int = bounded(4, lo=1)
    # p_LM pre-training and SFT (stage 1): the optimiser settings of common.train.train_lm, nested whole
    # (`--set sft.steps=900`); warm-up min(50, steps // 10), no periodic evaluation and the seed are set per stage
    pretrain: LMTrainConfig = LMTrainConfig(steps=600, batch_size=64, lr=3e-3)
    sft: LMTrainConfig = LMTrainConfig(steps=700, batch_size=64, lr=1e-3)
    # noisy generation (paper: α = 0.5, T = 0.6, top-p 0.9, first 2 tokens from p_θ₀)
    alpha: float = bounded(0.5, lo=0, hi=1)
    alphas: tuple[float, ...] = bounded((0.1, 0.5, 0.9), lo=0, hi=1, lo_open=True, each=True)
    temperature: float = bounded(0.6, lo=0, lo_open=True)
    top_p: float = bounded(0.9, lo=0, hi=1, lo_open=True)
    n_untouched: int = bounded(2, lo=0)
    max_new_tokens: int = bounded(16, lo=1)  # paper: 90 (ToTTo); every biography here fits in 12 tokens
    gen_batch: int = bounded(512, lo=1)
    # preference stage (paper: β = 0.1, sigmoid loss, lr 1e-6, 1 epoch for 7B models)
    beta: float = bounded(0.1, lo=0, lo_open=True)
    tune_lr: float = bounded(1e-4, lo=0, lo_open=True)  # same for DPO and continued SFT
    tune_epochs: int = bounded(2, lo=1)
    tune_batch: int = bounded(32, lo=1)
    warmup_ratio: float = bounded(0.1, lo=0, hi=1)
    cad_alpha: float = bounded(0.5, lo=0, lo_open=True)

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (alphas element-wise); below: the path and cross-field rules
        for stage in ("pretrain", "sft"):
            check_nested(self, stage, LMTrainConfig, _SET_PER_STAGE, _WHY)
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        for a in (0.1, self.alpha):
            if a not in self.alphas:
                raise ValueError(
                    f"alphas must contain 0.1 and alpha={self.alpha} (claims use them), got {self.alphas}"
                )
        if self.base_model_path and not Path(self.base_model_path).is_dir():
            raise ValueError(f"base_model_path must be a local model folder, got {self.base_model_path!r}")


PRESETS = {
    "smoke": Config(
        seeds=1,
        n_pretrain=1500,
        n_data=400,
        n_test=60,
        hidden=48,
        pretrain=LMTrainConfig(steps=80, batch_size=64, lr=3e-3),
        sft=LMTrainConfig(steps=80, batch_size=64, lr=1e-3),
        alphas=(0.1, 0.5),
        tune_epochs=1,
    ),
    "quick": Config(seeds=5),  # 5 seeds: a paired interval for alpha_trend's sign (3 left it to one seed)
    # GPU: a wider/deeper Llama on 10× the data; same protocol and claims.
    "full": Config(
        seeds=3,
        n_pretrain=60000,
        n_data=30000,
        n_test=3000,
        arch="llama",
        hidden=256,
        layers=4,
        heads=8,
        pretrain=LMTrainConfig(steps=4000, batch_size=128, lr=1e-3),
        sft=LMTrainConfig(steps=4000, batch_size=128, lr=5e-4),
        device="auto",  # with --set base_model_path=<local 1–3B model>, use --set tune_lr=1e-6 (the paper's)
    ),
}
