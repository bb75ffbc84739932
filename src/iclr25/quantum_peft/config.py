"""The Quantum-PEFT reproduction's settings (README, "Reproduction"): the arms and the learning-rate protocol,
:class:`Config` (the digits ViT), :class:`RealConfig` (a pretrained causal LM on real text, ``real.py``; also the
``full`` preset) and their :data:`PRESETS`."""

from __future__ import annotations

from dataclasses import dataclass

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig

from .model import QuantumPEFTConfig

# the arms and the LR protocol are the library's (transfer.py), re-exported here for report.py and the tests
from .transfer import LR_GRID, METHODS, TUNE_SEEDS  # noqa: F401

# QuantumPEFTConfig fields make_adapted (transfer.py) sets itself (Config.qpeft keeps their defaults): why, for the refusal
_PER_ARM = {
    "init_seed": "set in make_adapted (derived per seed and width)",
    "modules_to_save": "set in make_adapted (['classifier'] (the fresh head) for the Quantum-PEFT arm)",
}


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # ViT hidden sizes d (powers of two → pure Pauli nodes), each divisible by heads
    widths: tuple[int, ...] = bounded((64, 128), lo=8, each=True)
    depth: int = bounded(2, lo=1)  # transformer blocks
    heads: int = bounded(4, lo=1)
    mlp_ratio: int = bounded(2, lo=1)  # intermediate = mlp_ratio · d
    patch: int = bounded(2, choices=(1, 2, 4, 8))  # divides the 8×8 digits: 16 patches + CLS
    rotation: int = 1  # target domain: torch.rot90(k=rotation)
    source_frac: float = bounded(0.35, lo=0, hi=1, lo_open=True, hi_open=True)
    # the remaining 30 % is the target test set
    target_train_frac: float = bounded(0.35, lo=0, hi=1, lo_open=True, hi_open=True)
    pretrain_epochs: int = bounded(20, lo=1)
    finetune_epochs: int = bounded(20, lo=1)
    batch_size: int = bounded(64, lo=1)
    lr_pretrain: float = bounded(3e-3, lo=0, lo_open=True)
    # Fine-tuning: one LR per method for all its trainable parameters (head included), each chosen from the same
    # LR_GRID on the held-out TUNE_SEEDS at d=64 by `sweep_learning_rates` (README, "Learning-rate protocol").
    lr_head_only: float = bounded(3e-1, lo=0, lo_open=True)  # the head alone (best at the grid's upper edge)
    lr_lora: float = bounded(3e-2, lo=0, lo_open=True)  # LoRA A, B and the head
    lr_angles: float = bounded(1e-1, lo=0, lo_open=True)  # Quantum-PEFT angles θ
    lr_lambda: float = bounded(1e-1, lo=0, lo_open=True)  # Quantum-PEFT Λ and the head
    lr_full: float = bounded(3e-3, lo=0, lo_open=True)
    weight_decay: float = 0.01  # pre-training / full FT; adapters use 0
    # the Quantum-PEFT adapter, every QuantumPEFTConfig field, set with dotted overrides (``--set qpeft.rank=4``):
    # K = rank, L = layers, scale s = alpha (> 0 here), θ ~ N(0, init_std²). qpeft.target_modules is also the LoRA
    # arm's target_modules (one source of truth: both adapters always wrap the same layers). init_seed and
    # modules_to_save are set per seed/width and arm in make_adapted (defaults here).
    qpeft: QuantumPEFTConfig = QuantumPEFTConfig(
        target_modules=["q_proj", "v_proj"], rank=2, layers=1, alpha=1.0, init_std=0.5
    )
    lora_rank: int = bounded(1, lo=1)
    lora_alpha: float = bounded(1.0, lo=0, lo_open=True)
    param_widths: tuple[int, ...] = (64, 128)  # widths whose adapter sizes are counted (claim param_ratio)
    # N = M = 2^n for the log-scaling table
    scaling_qubits: tuple[int, ...] = bounded(tuple(range(6, 15)), lo=1, each=True)
    min_source_acc: float = 0.8  # precondition: the pre-trained ViT must solve upright digits

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (tuples element-wise); below: rules across fields
        check_nested(self, "qpeft", QuantumPEFTConfig, tuple(_PER_ARM), _PER_ARM)
        if not self.qpeft.alpha > 0:  # the library allows any finite scale; the experiment's s is positive
            raise ValueError(f"qpeft.alpha must be a number > 0 (the scale s), got {self.qpeft.alpha!r}")
        if any(d % self.heads for d in self.widths):
            raise ValueError(f"widths must each be divisible by heads={self.heads}, got {self.widths!r}")
        if self.source_frac + self.target_train_frac >= 1:
            raise ValueError(
                f"source_frac + target_train_frac must be < 1 (the rest is the target test set), "
                f"got {self.source_frac!r} + {self.target_train_frac!r}"
            )
        if 64 not in self.param_widths or 128 not in self.param_widths:
            raise ValueError(
                f"param_widths must contain 64 and 128 (claim param_ratio), got {self.param_widths!r}"
            )
        if 10 not in self.scaling_qubits:
            raise ValueError(f"scaling_qubits must contain 10, got {self.scaling_qubits!r}")


PRESETS = {
    "smoke": Config(seeds=1, widths=(64,), pretrain_epochs=12, finetune_epochs=5),
    "quick": Config(),
}

# fields of the digits-ViT protocol: the real / full presets have no use for them (they must keep their defaults)
_VIT_ONLY = (
    "widths", "depth", "heads", "mlp_ratio", "patch", "rotation", "source_frac", "target_train_frac",
    "pretrain_epochs", "finetune_epochs", "batch_size", "lr_pretrain", "lr_head_only", "lr_lora", "lr_angles",
    "lr_lambda", "lr_full", "weight_decay", "param_widths", "scaling_qubits", "min_source_acc",
)  # fmt: skip


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` preset (``real.py``): a pretrained causal LM adapted to real text, Quantum-PEFT (``qpeft``,
    the library's default K = 2, L = 1 on q/v) vs PEFT LoRA r = ``lora_rank`` on the same modules. A subclass, so
    the digits presets keep their fields and config hash; the ViT fields must keep their defaults."""

    model: str = "smollm2-135m-instruct"  # an iclr25 asset name, a save_pretrained folder or a hub id
    corpus: str = "shakespeare"  # an iclr25 corpus asset, a local .parquet file or a `datasets` name
    dataset_config: str = ""  # the `datasets` config name (hub datasets only)
    dataset_split: str = "train"  # the `datasets` split whose rows are the documents (hub datasets only)
    text_columns: tuple[str, ...] = ("text",)  # a row's text: these columns joined by a newline
    test_frac: float = bounded(1 / 7, lo=0, hi=1, lo_open=True, hi_open=True)  # documents held out per seed
    seq_len: int = bounded(64, lo=8)  # tokens per window
    batch: int = bounded(4, lo=1)  # windows per step
    steps: int = bounded(8, lo=1)  # optimizer steps (the same for both arms and every learning rate)
    eval_windows: int = bounded(16, lo=1)  # held-out windows per seed
    merge_windows: int = bounded(2, lo=1)  # held-out windows for the merge check
    # the upper four values of the quick preset's grid (LR_GRID; 3e-3 dropped for the time budget: it moved
    # Quantum-PEFT's held-out loss by 2e-4 nats in a first tuning run), one rate per arm for all its parameters
    lr_grid: tuple[float, ...] = bounded(LR_GRID[1:], lo=0, lo_open=True, each=True)
    tune_seeds: tuple[int, ...] = bounded((1000,), lo=0, each=True)  # distinct from the reported seeds
    lora_rank: int = bounded(4, lo=1)
    lora_alpha: float = bounded(4.0, lo=0, lo_open=True)
    # what a run downloads where the assets are not local (shown by `iclr25 config`; informational)
    downloads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        base = Config()
        for name in _VIT_ONLY:
            if getattr(self, name) != getattr(base, name):
                raise ValueError(
                    f"{name} is a field of the digits-ViT protocol, not used by the real/full presets; leave it "
                    f"at {getattr(base, name)!r}, got {getattr(self, name)!r}"
                )
        if not self.text_columns:
            raise ValueError("text_columns must name at least one column, got ()")
        if set(self.tune_seeds) & set(self.seed_list):
            raise ValueError(
                f"tune_seeds {list(self.tune_seeds)} must be distinct from the reported seeds {self.seed_list}"
            )
        if self.merge_windows > self.eval_windows:
            raise ValueError(
                f"merge_windows must be <= eval_windows={self.eval_windows}, got {self.merge_windows}"
            )


PRESETS["real"] = RealConfig()
# The paper's generation benchmark (GPT-2 Medium on the E2E NLG Challenge, q/v inside GPT-2's fused `c_attn`
# Conv1D) on a GPU, through the same loaders and code as the real preset; never run here (no hub access).
PRESETS["full"] = RealConfig(
    model="openai-community/gpt2-medium",
    corpus="tuetschek/e2e_nlg",
    dataset_split="train",
    text_columns=("meaning_representation", "human_reference"),
    test_frac=0.1,
    seq_len=256,
    batch=16,
    steps=2000,
    eval_windows=512,
    lr_grid=(1e-3, 3e-3, 1e-2, 3e-2, 1e-1),
    tune_seeds=(1000, 1001),
    seeds=5,
    device="cuda",
    qpeft=QuantumPEFTConfig(target_modules=["c_attn"], rank=2, layers=1, alpha=1.0, init_std=0.5),
    downloads=(
        "model openai-community/gpt2-medium (Hugging Face hub, MIT): 355 M parameters, model.safetensors ≈ 1.52 GB",
        "dataset tuetschek/e2e_nlg (Hugging Face datasets, CC BY-SA 4.0): 42,061 train rows "
        "(meaning_representation, human_reference), ≈ 10 MB",
    ),
)
