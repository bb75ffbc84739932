"""ViT transfer in miniature (README, "Reproduction"): a tiny Hugging Face ViT pre-trained on upright digits
(scikit-learn's ``load_digits``) and fine-tuned on 90°-rotated digits with a fresh head by head-only, PEFT LoRA,
Quantum-PEFT or full fine-tuning; the adapters' parameter counts; and the fair-baseline learning-rate protocol
(:func:`sweep_learning_rates`: one grid for every method, tuned on held-out seeds).

The functions read their settings from ``cfg``, a :class:`iclr25.quantum_peft.config.Config` (or any object with the
fields they name: the split fractions and ``rotation``, the ViT's ``patch``, ``depth``, ``heads``, ``mlp_ratio``,
the epochs, ``batch_size``, the learning rates and ``weight_decay``, ``lora_rank`` / ``lora_alpha``, ``qpeft``,
``widths``, ``param_widths`` and ``scaling_qubits``).
"""

from __future__ import annotations

import copy
import dataclasses
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common.progress import progress
from iclr25.common.seeding import derive_seed, numpy_rng, seed_everything, torch_generator

from .model import get_qpeft_model
from .params import comparison_table

__all__ = [
    "LR_GRID",
    "METHODS",
    "TUNE_SEEDS",
    "accuracy",
    "adapter_param_counts",
    "build_vit",
    "digits_domains",
    "finetune",
    "make_adapted",
    "one_width",
    "param_tables",
    "pretrain",
    "sweep_learning_rates",
    "train",
    "with_lr",
]

METHODS = ("head_only", "lora_r1", "qpeft", "full_ft")
LR_GRID = (3e-3, 1e-2, 3e-2, 1e-1, 3e-1)  # the one grid every method is tuned on
TUNE_SEEDS = (10, 11, 12)  # held-out seeds for the tuning (the reported seeds are 0, 1, 2)


def digits_domains(cfg, seed: int) -> dict[str, torch.Tensor]:
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


def build_vit(cfg, width: int, seed: int) -> nn.Module:
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
    """Top-1 accuracy of ``model`` on (``x``, ``y``), in batches of 512."""
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
    method: str, pre: nn.Module, cfg, seed: int, width: int
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


def adapter_param_counts(cfg, width: int) -> dict[str, int]:
    """Adapter sizes (head excluded) measured on instantiated modules: PEFT LoRA vs Quantum-PEFT."""
    pre = build_vit(cfg, width, 0)
    return {m: make_adapted(m, pre, cfg, 0, width)[2] for m in ("lora_r1", "qpeft")}


def pretrain(cfg, seed: int, width: int, device: torch.device) -> tuple[nn.Module, dict, dict]:
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
    method: str, pre: nn.Module, data: dict, cfg, seed: int, width: int, device: torch.device
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


def one_width(cfg, seed: int, width: int, device: torch.device) -> dict:
    """One seed at one width: pre-train the ViT (:func:`pretrain`), then fine-tune every method of
    :data:`METHODS` from it; ``{source_acc, zero_shot_rotated_acc, time_s: {method: s}, method: {acc, ...}}``."""
    pre, data, out = pretrain(cfg, seed, width, device)
    for method in METHODS:
        r = finetune(method, pre, data, cfg, seed, width, device)
        out.setdefault("time_s", {})[method] = r.pop("time_s")
        out[method] = r
    return out


def with_lr(cfg, method: str, lr: float):
    """``cfg`` with every trainable group of ``method`` (adapter and head alike) at learning rate ``lr``."""
    fields = {
        "head_only": ("lr_head_only",),
        "lora_r1": ("lr_lora",),
        "qpeft": ("lr_angles", "lr_lambda"),
        "full_ft": ("lr_full",),
    }[method]
    return dataclasses.replace(cfg, **{f: lr for f in fields})


def sweep_learning_rates(
    cfg,
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


def param_tables(cfg) -> tuple[dict, list[dict]]:
    """Seed-independent parameter counts: adapters instantiated at ``param_widths`` and the analytic scaling table
    over ``scaling_qubits`` (N = M = 2^n, K = 1, L = 1 vs LoRA r = 1)."""
    counts = {w: adapter_param_counts(cfg, w) for w in cfg.param_widths}
    rows = comparison_table([(1 << n, 1 << n) for n in cfg.scaling_qubits], rank=1, layers=1, lora_rank=1)
    return counts, rows
