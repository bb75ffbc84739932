"""Reproduction (README, "Reproduction"): ViT transfer in miniature — adapt a digits ViT to 90°-rotated digits.

Protocol: scikit-learn's ``load_digits`` (8×8, ships with scikit-learn). A seeded permutation splits it into
35 % source (upright), 35 % target-train and 30 % target-test (both rotated by 90°). A Hugging Face
``ViTForImageClassification`` (patch 2×2 → 16 tokens + CLS, pre-norm, 2 blocks, 4 heads, MLP 2d) built from a
config is pre-trained on the source, then fine-tuned on the target with a fresh 10-way head by

* ``head_only``: only the head;
* ``lora_r1``: PEFT's ``LoraConfig(r=1, lora_alpha=1)`` on q and v (+ head);
* ``qpeft``: Quantum-PEFT K=2, L=1 on q and v (+ head), separate learning rates for the angles and Λ
  (``Config.qpeft``, a ``QuantumPEFTConfig`` set with dotted overrides: ``--set qpeft.rank=4``);
* ``full_ft``: every parameter.

Claims (ids fixed by the issue): ``adapter_learns``, ``param_ratio``, ``competitive``, ``log_scaling``.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common.claims import Claim, all_of, make_claim
from iclr25.common.device import get_device
from iclr25.common.progress import progress
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import derive_seed, numpy_rng, seed_everything, torch_generator
from iclr25.harness.rundir import RunDir, RunResult

from . import real, report
from .config import LR_GRID, METHODS, PRESETS, TUNE_SEEDS, Config, RealConfig
from .model import get_qpeft_model
from .params import comparison_table

__all__ = [
    "Config",
    "METHODS",
    "PRESETS",
    "RealConfig",
    "claims",
    "one_seed",
    "run",
    "sweep_learning_rates",
]  # the config names re-exported for the registry (METHODS for the tests; sweep_learning_rates: README's command)


# ---------------------------------------------------------------------------------------------------
# data and model
# ---------------------------------------------------------------------------------------------------
def digits_domains(cfg: Config, seed: int) -> dict[str, torch.Tensor]:
    """Source (upright) / target-train / target-test (rotated by 90°·rotation) tensors, (n, 1, 8, 8)."""
    from sklearn.datasets import load_digits

    ds = load_digits()
    x = torch.tensor(ds.images, dtype=torch.float32)[:, None] / 16.0
    y = torch.tensor(ds.target, dtype=torch.long)
    perm = torch.from_numpy(numpy_rng(derive_seed(seed, "split")).permutation(len(y)))
    n_s, n_t = int(cfg.source_frac * len(y)), int(cfg.target_train_frac * len(y))
    i_s, i_t, i_e = perm[:n_s], perm[n_s : n_s + n_t], perm[n_s + n_t :]
    mean, std = x[i_s].mean(), x[i_s].std()
    x = (x - mean) / std
    rot = lambda z: torch.rot90(z, k=cfg.rotation, dims=(-2, -1))  # noqa: E731
    return {
        "xs": x[i_s], "ys": y[i_s],
        "xt": rot(x[i_t]), "yt": y[i_t],
        "xe": rot(x[i_e]), "ye": y[i_e],
        "xe_upright": x[i_e],
    }  # fmt: skip


def build_vit(cfg: Config, width: int, seed: int) -> nn.Module:
    """A tiny ``transformers.ViTForImageClassification`` from a config (pre-norm, no download)."""
    from transformers import ViTConfig, ViTForImageClassification

    vc = ViTConfig(
        image_size=8,
        patch_size=cfg.patch,
        num_channels=1,
        hidden_size=width,
        num_hidden_layers=cfg.depth,
        num_attention_heads=cfg.heads,
        intermediate_size=cfg.mlp_ratio * width,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=10,
    )
    torch.manual_seed(derive_seed(seed, "vit", width))
    return ViTForImageClassification(vc)


def _logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(pixel_values=x).logits


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device) -> float:
    model.eval()
    pred = torch.cat([_logits(model, xb.to(device)).argmax(-1).cpu() for xb in x.split(512)])
    return float((pred == y).float().mean())


def train(
    model: nn.Module,
    groups: list[dict],
    x: torch.Tensor,
    y: torch.Tensor,
    epochs: int,
    batch_size: int,
    seed: int,
    device: torch.device,
    desc: str = "train",
) -> list[float]:
    """AdamW + OneCycle (max LR per group) on shuffled mini-batches; returns the per-epoch mean loss."""
    opt = torch.optim.AdamW(groups)
    steps_per_epoch = -(-len(y) // batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=[g["lr"] for g in groups], total_steps=epochs * steps_per_epoch
    )
    gen = torch_generator(derive_seed(seed, "batches", desc))
    hist = []
    model.train()
    for _ in progress(range(epochs), desc=desc):
        perm = torch.randperm(len(y), generator=gen)
        tot = 0.0
        for idx in perm.split(batch_size):
            loss = F.cross_entropy(_logits(model, x[idx].to(device)), y[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            tot += float(loss.detach()) * len(idx)
        hist.append(tot / len(y))
    return hist


def _fresh_head(model: nn.Module, seed: int, width: int) -> None:
    g = torch_generator(derive_seed(seed, "head", width))
    head = model.classifier
    with torch.no_grad():
        bound = 1.0 / np.sqrt(head.in_features)
        head.weight.copy_((torch.rand(head.weight.shape, generator=g) * 2 - 1) * bound)
        head.bias.zero_()


def make_adapted(
    method: str, pre: nn.Module, cfg: Config, seed: int, width: int
) -> tuple[nn.Module, list[dict], int]:
    """(model, optimizer groups, adapter parameter count excluding the head) for one method."""
    model = copy.deepcopy(pre)
    _fresh_head(model, seed, width)
    head = list(model.classifier.parameters())
    if method == "head_only":
        for p in model.parameters():
            p.requires_grad_(False)
        for p in head:
            p.requires_grad_(True)
        return model, [{"params": head, "lr": cfg.lr_head_only, "weight_decay": 0.0}], 0
    if method == "full_ft":
        n = sum(p.numel() for n_, p in model.named_parameters() if not n_.startswith("classifier."))
        return (
            model,
            [{"params": list(model.parameters()), "lr": cfg.lr_full, "weight_decay": cfg.weight_decay}],
            n,
        )
    if method == "lora_r1":
        from peft import LoraConfig, get_peft_model

        tm = cfg.qpeft.target_modules  # the same layers as the Quantum-PEFT arm
        lc = LoraConfig(
            r=cfg.lora_rank,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=0.0,
            target_modules=tm if isinstance(tm, str) else list(tm),
            modules_to_save=["classifier"],
        )
        torch.manual_seed(derive_seed(seed, "lora", width))  # PEFT initialises A from the global RNG
        pm = get_peft_model(model, lc)
        params = [p for p in pm.parameters() if p.requires_grad]
        n = sum(p.numel() for n_, p in pm.named_parameters() if "lora_" in n_)
        return pm, [{"params": params, "lr": cfg.lr_lora, "weight_decay": 0.0}], n
    if method == "qpeft":
        qc = dataclasses.replace(
            cfg.qpeft, modules_to_save=["classifier"], init_seed=derive_seed(seed, "qpeft", width)
        )
        qm = get_qpeft_model(model, qc)
        return qm, qm.param_groups(cfg.lr_angles, cfg.lr_lambda, cfg.lr_lambda), qm.n_adapter_params()
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def adapter_param_counts(cfg: Config, width: int) -> dict[str, int]:
    """Adapter sizes (head excluded) measured on instantiated modules: PEFT LoRA vs Quantum-PEFT."""
    pre = build_vit(cfg, width, 0)
    return {m: make_adapted(m, pre, cfg, 0, width)[2] for m in ("lora_r1", "qpeft")}


def pretrain(cfg: Config, seed: int, width: int, device: torch.device) -> tuple[nn.Module, dict, dict]:
    """(pre-trained ViT, data, {source_acc, zero_shot_rotated_acc}) for one seed and width."""
    seed_everything(derive_seed(seed, "width", width))
    data = digits_domains(cfg, seed)
    pre = build_vit(cfg, width, seed).to(device)
    pre_groups = [{"params": list(pre.parameters()), "lr": cfg.lr_pretrain, "weight_decay": cfg.weight_decay}]
    train(
        pre,
        pre_groups,
        data["xs"],
        data["ys"],
        cfg.pretrain_epochs,
        cfg.batch_size,
        seed,
        device,
        f"pretrain d={width}",
    )
    info = {
        "source_acc": accuracy(pre, data["xe_upright"], data["ye"], device),
        "zero_shot_rotated_acc": accuracy(pre, data["xe"], data["ye"], device),
    }
    return pre, data, info


def finetune(
    method: str, pre: nn.Module, data: dict, cfg: Config, seed: int, width: int, device: torch.device
) -> dict:
    """Fine-tune one method on the target-train split; target-test accuracy, params, final loss, seconds."""
    model, groups, n_params = make_adapted(method, pre, cfg, seed, width)
    t0 = time.perf_counter()
    hist = train(
        model,
        groups,
        data["xt"],
        data["yt"],
        cfg.finetune_epochs,
        cfg.batch_size,
        seed,
        device,
        f"{method} d={width}",
    )
    return {
        "acc": accuracy(model, data["xe"], data["ye"], device),
        "params": n_params,
        "final_train_loss": hist[-1],
        "time_s": time.perf_counter() - t0,
    }


def one_width(cfg: Config, seed: int, width: int, device: torch.device) -> dict:
    pre, data, out = pretrain(cfg, seed, width, device)
    for method in METHODS:
        r = finetune(method, pre, data, cfg, seed, width, device)
        out.setdefault("time_s", {})[method] = r.pop("time_s")
        out[method] = r
    return out


def with_lr(cfg: Config, method: str, lr: float) -> Config:
    """``cfg`` with every trainable group of ``method`` (adapter and head alike) at learning rate ``lr``."""
    fields = {
        "head_only": ("lr_head_only",),
        "lora_r1": ("lr_lora",),
        "qpeft": ("lr_angles", "lr_lambda"),
        "full_ft": ("lr_full",),
    }[method]
    return dataclasses.replace(cfg, **{f: lr for f in fields})


def sweep_learning_rates(
    cfg: Config,
    seeds: tuple[int, ...] = TUNE_SEEDS,
    grid: tuple[float, ...] = LR_GRID,
    width: int = 64,
    device: str = "cpu",
) -> dict:
    """The fair-baseline protocol: every method gets one learning rate (adapter *and* head), chosen from the
    same ``grid`` by mean target-test accuracy on held-out ``seeds`` (never the reported seeds 0, 1, 2).

    Returns ``{"acc": {method: {lr: [per-seed acc]}}, "best": {method: lr}}``.
    """
    dev = torch.device(device)
    acc: dict = {m: {str(lr): [] for lr in grid} for m in METHODS}
    for s in seeds:
        pre, data, _ = pretrain(cfg, s, width, dev)
        for m in METHODS:
            for lr in grid:
                acc[m][str(lr)].append(finetune(m, pre, data, with_lr(cfg, m, lr), s, width, dev)["acc"])
    best = {m: float(max(grid, key=lambda lr: float(np.mean(acc[m][str(lr)])))) for m in METHODS}
    return {"seeds": list(seeds), "grid": list(grid), "width": width, "acc": acc, "best": best}


def one_seed(cfg: Config, seed: int) -> dict:
    device = get_device(cfg.device)
    return {f"d{w}": one_width(cfg, seed, w, device) for w in cfg.widths}


# ---------------------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------------------
def param_tables(cfg: Config) -> tuple[dict, list[dict]]:
    """Seed-independent parameter counts: adapters instantiated at ``param_widths`` and the analytic scaling table
    over ``scaling_qubits`` (N = M = 2^n, K = 1, L = 1 vs LoRA r = 1)."""
    counts = {w: adapter_param_counts(cfg, w) for w in cfg.param_widths}
    rows = comparison_table([(1 << n, 1 << n) for n in cfg.scaling_qubits], rank=1, layers=1, lora_rank=1)
    return counts, rows


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The keys the claims and the validity check read, at every width: the source accuracy and the target
    accuracy of head-only, LoRA-r1 and Quantum-PEFT."""
    keys = ("source_acc", "head_only/acc", "lora_r1/acc", "qpeft/acc")
    return tuple(f"d{w}/{k}" for w in cfg.widths for k in keys)


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims (ids and thresholds fixed): adapter learns, parameter ratio, competitive, log scaling."""
    counts, rows = param_tables(cfg)
    ns = list(cfg.scaling_qubits)
    ratios = [r["ratio"] for r in rows]
    nseed = len(cfg.seed_list)
    w0 = cfg.widths[0] if 64 not in cfg.widths else 64
    k0 = f"d{w0}"

    learn_parts = [
        make_claim(
            f"adapter_learns_d{w}",
            f"Quantum-PEFT ≥ head-only + 8 points at d={w}",
            f"d{w} target test accuracy",
            method=values(per_seed, f"d{w}/qpeft/acc"),
            baseline=values(per_seed, f"d{w}/head_only/acc"),
            threshold=0.08,
            compare="difference",
        )
        for w in cfg.widths
    ]
    ratio_parts = [
        make_claim(
            f"param_ratio_d{w}",
            f"LoRA-r1 / Quantum-PEFT adapter parameters ≥ {th} at d={w}",
            f"adapter params (q,v of {cfg.depth} blocks) d={w}",
            method=[counts[w]["lora_r1"]] * nseed,
            baseline=[counts[w]["qpeft"]] * nseed,
            threshold=th,
            compare="ratio",
        )
        for w, th in ((64, 3.0), (128, 6.0))
    ]
    step = max(ratios[i + 1] / ratios[i] for i in range(len(ratios) - 1))
    scaling_parts = [
        make_claim(
            "log_scaling_monotone",
            "QPEFT/LoRA-r1 parameter ratio decreases with n (max step ratio ≤ 1)",
            "max_n ratio(n+1)/ratio(n), N=M=2^n, n=" + f"{ns[0]}..{ns[-1]}",
            method=[step] * nseed,
            threshold=1.0,
            direction="<=",
        ),
        make_claim(
            "log_scaling_n10",
            "QPEFT(K=1,L=1)/LoRA-r1 parameters < 1/30 at n=10",
            "params ratio at N=M=1024",
            method=[ratios[ns.index(10)]] * nseed,
            threshold=1 / 30,
            direction="<=",
        ),
    ]
    margins = {
        w: float(
            np.mean(values(per_seed, f"d{w}/qpeft/acc")) - np.mean(values(per_seed, f"d{w}/head_only/acc"))
        )
        for w in cfg.widths
    }
    learn_note = (
        "margins "
        + ", ".join(f"d={w}: {m:+.3f}" for w, m in margins.items())
        + f"; every method at its own LR from the same grid (head-only {cfg.lr_head_only:g}, Quantum-PEFT "
        f"{cfg.lr_lambda:g}). A well-tuned head alone already recovers much of the rotated task on this small "
        "problem, so the +8-point margin measured before against a head-only baseline at a 33× smaller LR was "
        "mostly a tuning gap"
        if min(margins.values()) < 0.08
        else ""
    )
    gap = np.mean(values(per_seed, f"{k0}/lora_r1/acc")) - np.mean(values(per_seed, f"{k0}/qpeft/acc"))
    gap_note = (
        f"gap {gap:.3f} with {cfg.finetune_epochs} fine-tuning epochs: Quantum-PEFT starts slower than LoRA (Λ = 0 "
        "gives the angles no gradient until Λ moves, and the circuit angles need many steps)"
        if gap > 0.08
        else ""
    )
    return [
        all_of(
            "adapter_learns",
            "Quantum-PEFT adapters learn the rotated-digits task: ≥ head-only + 8 points",
            learn_parts,
            note=learn_note,
        ),
        all_of(
            "param_ratio",
            "Quantum-PEFT needs ≤ 1/3 of LoRA-r1's parameters at d=64 and ≤ 1/6 at d=128",
            ratio_parts,
            note="counted on instantiated modules (PEFT LoRA vs QuantumPEFTLinear), head excluded; seed-independent",
        ),
        make_claim(
            "competitive",
            f"accuracy gap LoRA-r1 − Quantum-PEFT ≤ 8 points at d={w0}",
            f"{k0} target test accuracy",
            method=values(per_seed, f"{k0}/lora_r1/acc"),
            baseline=values(per_seed, f"{k0}/qpeft/acc"),
            threshold=0.08,
            direction="<=",
            compare="difference",
            note=gap_note,
        ),
        all_of(
            "log_scaling",
            "for N=M=2^n, n=6..14, QPEFT/LoRA-r1 params decrease monotonically and are < 1/30 at n=10",
            scaling_parts,
            note="analytic counts from count_parameters (tests check them against instantiated layers)",
        ),
    ]


def validity(cfg: Config, per_seed: dict) -> tuple[bool, str]:
    """The comparison means something only when the pre-trained ViT solves the upright source task."""
    src_all = [v for w in cfg.widths for v in values(per_seed, f"d{w}/source_acc")]
    valid = min(src_all) >= cfg.min_source_acc
    reason = f"pre-trained ViT reaches only {min(src_all):.3f} < {cfg.min_source_acc} on upright test digits"
    return valid, "" if valid else reason


def run(cfg: Config, out: Path) -> RunResult:
    if isinstance(cfg, RealConfig):  # a pretrained LM on real text (real.py)
        return real.run(cfg, out)
    return run_digits(cfg, out)


def run_digits(cfg: Config, out: Path) -> RunResult:
    """The smoke / quick presets: the digits-ViT reproduction."""
    rd = RunDir(out, cfg, required=required_keys(cfg))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    counts, rows = param_tables(cfg)
    tables = {"param_counts": {f"d{w}": c for w, c in counts.items()}, "scaling_table": rows}
    valid, reason = validity(cfg, per_seed)
    return RunResult(
        seeds=cfg.seed_list,
        metrics={**aggregate(per_seed), **tables},
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[report.figure(cfg, per_seed, rd.figures / "quantum_peft.png", counts, rows, METHODS)],
        report_md=report.report_md(cfg, per_seed, counts, rows, METHODS),
        valid=valid,
        invalid_reason=reason,
    )


# what a real/full run fetches when its model or corpus is a hub id / `datasets` name (sizes approximate, from the
# hub listings; `iclr25 config quantum_peft --preset full` shows them; nothing is fetched here)
_HUB_SIZES = {
    "openai-community/gpt2-medium": ("model (model.safetensors ≈ 1.52 GB, MIT)", 1_520_000_000),
    "tuetschek/e2e_nlg": ("dataset, split train (42,061 rows, CC BY-SA 4.0; ≈ 10 MB)", 10_000_000),
}


def downloads(cfg: Config) -> list[dict] | None:
    """The hub model and ``datasets`` corpus a run of ``cfg`` would download (``None``: only local assets)."""
    if not isinstance(cfg, RealConfig):
        return None
    from ..assets.catalog import NAMES

    items = []
    for src in (cfg.model, cfg.corpus):
        if src in NAMES or src.endswith(".parquet") or Path(src).expanduser().exists():
            continue
        what, size = _HUB_SIZES.get(src, ("hub model or dataset (size unknown offline)", None))
        items.append({"what": what, "source": src, "bytes": size})
    return items or None
