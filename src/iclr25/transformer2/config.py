"""The Transformer² reproduction's settings (README, "Reproduction"): :class:`Config` (the skills toy on a tiny Llama),
:class:`RealConfig` (a pretrained LM on real tasks, ``real.py``), :class:`FullConfig` (the paper's model and tasks,
``full.py``) and their :data:`PRESETS`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig

from . import full as F
from . import skills as S
from .reinforce import ReinforceConfig
from .tasks import GRAM_SECTIONS

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# the ReinforceConfig field _rl_config sets per seed and phase; Config.rl keeps its default


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # tiny base model (Llama family) and its deliberately short pre-training
    arch: str = "llama"
    hidden: int = bounded(64, lo=1)
    layers: int = bounded(2, lo=1)
    heads: int = bounded(4, lo=1)
    intermediate: int = bounded(256, lo=1)
    pretrain_steps: int = bounded(40, lo=0)
    pretrain_lr: float = bounded(3e-3, lo=0, lo_open=True)
    pretrain_per_task: int = bounded(64, lo=1)
    cls_fraction: float = 0.25
    model_path: str | None = (
        None  # an HF causal LM folder instead of the tiny model (symbols mapped to its tokens)
    )
    # SVF experts (official form) trained with REINFORCE
    targets: tuple[str, ...] = ALL_LINEAR
    svf_mode: str = bounded("official", choices=("official", "paper"))
    # every REINFORCE run (SVF experts, classification expert, LoRA-RL), set with dotted overrides
    # (``--set rl.steps=300 --set rl.kl_coef=0.2``): rl.steps / rl.lr are the SVF experts' (lr 1e-2 is a toy value;
    # official 2e-3 with batch 256 on 8B models), the classification expert takes cls_steps at rl.lr and LoRA-RL
    # lora_steps at lora_lr; rl.batch_size is also the prompts per step of every RL and LoRA-SFT run.
    # greedy=False: sampled one-token rollouts (greedy = the official vLLM setting). rl.seed is derived per seed
    # and phase in _rl_config (it keeps its default here).
    rl: ReinforceConfig = ReinforceConfig(
        steps=200,
        lr=1e-2,
        batch_size=256,
        max_grad_norm=1e-3,
        kl_coef=0.1,
        kl_direction="ref_policy",
        greedy=False,
        eval_every=20,
    )
    n_val: int = bounded(512, lo=1)
    cls_steps: int = bounded(50, lo=1)
    # LoRA baseline (PEFT) on the same matrices
    lora_r: int = bounded(4, lo=1)
    lora_alpha: float = 8.0
    lora_dropout: float = 0.05
    lora_lr: float = bounded(3e-3, lo=0, lo_open=True)
    lora_steps: int = bounded(200, lo=1)
    lora_tasks: tuple[str, ...] = bounded(("A", "B", "C"), choices=S.SKILLS, each=True)  # must include "A"
    # evaluation, dispatch and few-shot CEM
    n_test: int = bounded(2000, lo=1)
    n_route: int = bounded(600, lo=1)
    shift_lo: int = bounded(3, lo=0, hi=9)
    shift_hi: int = bounded(7, lo=0, hi=9)
    shift_tasks: tuple[str, ...] = bounded(("A", "C"), choices=S.SKILLS, each=True)
    shots: int = bounded(32, lo=1)
    cem_iters: int = bounded(20, lo=1)
    cem_pop: int = bounded(32, lo=1)
    cem_elite: float = 0.2
    per_matrix: bool = False
    normalise: bool = False
    raw_mixing: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (task tuples element-wise); below: rules across fields
        check_nested(
            self,
            "rl",
            ReinforceConfig,
            ("seed",),
            "derived per seed and phase in _rl_config (set seed instead)",
        )
        if self.shift_lo > self.shift_hi:
            raise ValueError(f"shift_lo must be <= shift_hi ({self.shift_hi}), got {self.shift_lo}")
        if "A" not in self.lora_tasks:
            raise ValueError(
                f"lora_tasks must include 'A' (the side-by-side comparison), got {self.lora_tasks!r}"
            )


_QUICK = Config(
    rl=replace(Config.rl, steps=150, batch_size=128), lora_steps=150, lora_tasks=("A",), cls_steps=30
)
PRESETS = {
    "smoke": Config(
        seeds=1,
        pretrain_steps=30,
        rl=replace(Config.rl, steps=12, batch_size=64, eval_every=4),
        n_val=128,
        cls_steps=4,
        lora_steps=8,
        lora_tasks=("A",),
        n_test=256,
        n_route=96,
        shots=16,
        cem_iters=3,
        cem_pop=10,
    ),
    "quick": _QUICK,
}


# fields of the toy the real preset does not read (it must leave them at their defaults)
_TOY_ONLY = (
    "arch", "hidden", "layers", "heads", "intermediate", "pretrain_steps", "pretrain_lr", "pretrain_per_task",
    "cls_fraction", "model_path", "targets", "svf_mode", "n_val", "cls_steps", "lora_r", "lora_alpha",
    "lora_dropout", "lora_lr", "lora_steps", "lora_tasks", "n_test", "n_route", "shift_lo", "shift_hi",
    "shift_tasks", "shots", "cem_iters", "cem_pop", "cem_elite", "per_matrix", "normalise", "raw_mixing",
)  # fmt: skip


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` preset (``real.py``): SVF experts for a pretrained LM on three real tasks, prompt dispatch and a
    held-out task. A subclass, so the toy presets keep their fields and config hash; the toy's fields
    (``_TOY_ONLY``) are not read and must keep their defaults. ``rl`` holds the experts' REINFORCE settings
    (``--set rl.steps=36``): batch 8 prompts, 12 steps, Adam lr 2e-2 (the official 2e-3 is for ~200 steps;
    the same total movement of z in 12), clip 1e-3, λ = 0.1 KL(π_ref‖π), sampled rollouts of <= 4 tokens."""

    rl: ReinforceConfig = ReinforceConfig(
        steps=12,
        lr=2e-2,
        batch_size=8,
        max_grad_norm=1e-3,
        kl_coef=0.1,
        kl_direction="ref_policy",
        greedy=False,
        eval_every=4,
        max_new_tokens=4,
    )
    model: str = (
        "smollm2-135m-instruct"  # an asset name, a local folder or a hub id (iclr25.assets.load_causal_lm)
    )
    svf_modules: tuple[str, ...] = ("gate_proj", "up_proj", "down_proj")
    svf_first_layer: int = bounded(20, lo=0)  # SVF on the MLP of layers svf_first_layer … last
    analogy_sections: tuple[str, ...] = GRAM_SECTIONS
    heldout_section: str = "city-in-state"
    analogy_shots: int = bounded(2, lo=1)
    analogy_test_frac: float = bounded(0.25, lo=0, hi=1, lo_open=True, hi_open=True)
    analogy_val_frac: float = bounded(0.1, lo=0, hi=1, lo_open=True, hi_open=True)
    heldout_test_frac: float = bounded(0.5, lo=0, hi=1, lo_open=True, hi_open=True)
    sentiment_test: int = bounded(60, lo=1)
    sentiment_val: int = bounded(20, lo=1)
    source_test: int = bounded(20, lo=1)  # per source
    source_val: int = bounded(8, lo=1)  # per source
    source_train: int = bounded(60, lo=1)  # per source, at most
    source_min_words: int = bounded(20, lo=1)
    doc_tokens: int = bounded(32, lo=4)  # sentences and documents cut to their first doc_tokens tokens
    dispatch_per_task: int = bounded(30, lo=1)
    dispatch_tokens: int = bounded(
        16, lo=4
    )  # the dispatcher reads each prompt's first dispatch_tokens tokens

    def __post_init__(self) -> None:
        super().__post_init__()
        base = Config()
        for name in _TOY_ONLY:
            if getattr(self, name) != getattr(base, name):
                raise ValueError(
                    f"{name} is a field of the skills toy, not used by the real preset; leave it at "
                    f"{getattr(base, name)!r}, got {getattr(self, name)!r}"
                )
        if self.heldout_section in self.analogy_sections:
            raise ValueError(
                f"heldout_section must not be one of analogy_sections (it is never used to train an expert), "
                f"got {self.heldout_section!r}"
            )


PRESETS["real"] = RealConfig()


@dataclass(frozen=True)
class FullConfig(RealConfig):
    """The ``full`` preset: the paper's model and training tasks by name (§4.1) — Llama-3-8B-Instruct, SVF experts
    on GSM8K, MBPP and ARC-Easy, ARC-Challenge held out — read by ``full.load_task_table`` from the hub or from
    local parquet files (``data_files``: ``NAME=PATH``). ``downloads`` lists what a run would fetch and its size
    (``iclr25 config transformer2 --preset full``)."""

    train_datasets: tuple[str, ...] = bounded(
        ("gsm8k", "mbpp", "arc"), choices=("gsm8k", "mbpp", "arc"), each=True
    )
    heldout_dataset: str = bounded("arc-challenge", choices=("arc-challenge",))
    data_files: tuple[str, ...] = ()
    n_test_per_task: int = bounded(200, lo=1)
    n_val_per_task: int = bounded(50, lo=1)
    downloads: tuple[str, ...] = F.DOWNLOADS


PRESETS["full"] = FullConfig(
    model=F.HUB_MODEL,
    device="cuda",
    seeds=3,
    svf_first_layer=0,  # every MLP matrix, as the paper
    rl=replace(RealConfig.rl, steps=200, batch_size=256, lr=2e-3, eval_every=10, max_new_tokens=8),
)
