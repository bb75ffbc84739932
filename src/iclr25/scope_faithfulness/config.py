"""The SCOPE reproduction's settings (README, "Reproduction"): :class:`Config` and its :data:`PRESETS` (read by
``experiment.py`` and ``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iclr25.common.fields import bounded
from iclr25.common.results import ExperimentConfig

ARCHS = ("gpt2", "llama")


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
    # p_LM pre-training and SFT (stage 1)
    pretrain_steps: int = bounded(600, lo=1)
    pretrain_batch: int = bounded(64, lo=1)
    pretrain_lr: float = bounded(3e-3, lo=0, lo_open=True)
    sft_steps: int = bounded(700, lo=1)
    sft_batch: int = bounded(64, lo=1)
    sft_lr: float = bounded(1e-3, lo=0, lo_open=True)
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
        pretrain_steps=80,
        sft_steps=80,
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
        pretrain_steps=4000,
        pretrain_batch=128,
        pretrain_lr=1e-3,
        sft_steps=4000,
        sft_batch=128,
        sft_lr=5e-4,
        device="auto",  # with --set base_model_path=<local 1–3B model>, use --set tune_lr=1e-6 (the paper's)
    ),
}
