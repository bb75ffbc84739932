"""Figure and report text of the HGM experiment (:mod:`iclr25.hgm.experiment`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from iclr25.common.results import values
from iclr25.common.stats import mean_std

from .config import TRAINED_ARMS, Config
from .training import BACK, FRONT

ARMS = ("image_only", "dual", "refined", "oracle")
TABLE_METRICS = ("psnr_back", "psnr_input", "psnr_novel", "ssim_back", "chamfer", "chamfer_alpha05")


def budget_text(cfg: Config) -> str:
    """The training budget of every trained model, as the claims and the report state it."""
    if cfg.arm_steps is not None:
        steps = "AdamW steps per arm: " + ", ".join(f"{a} {cfg.steps_for(a)}" for a in TRAINED_ARMS)
        return steps if cfg.budget_s is None else f"{cfg.budget_s:g} CPU-s of {steps} at most"
    if cfg.budget_s is None:
        return f"{cfg.steps} AdamW steps"
    return f"{cfg.budget_s:g} CPU-s of AdamW steps (cap {cfg.steps})"


def _save_grid(rows: list[torch.Tensor], path: Path, scale: int = 4) -> Path:
    """rows: list of (n, H, W, 3) images in [0, 1] → one PNG (rows stacked vertically, subjects side by side)."""
    from PIL import Image

    grid = torch.cat([torch.cat(list(r.clamp(0, 1)), dim=1) for r in rows], dim=0)  # (rows·H, n·W, 3)
    arr = (grid.cpu().numpy() * 255).astype(np.uint8)
    img = Image.fromarray(arr).resize((arr.shape[1] * scale, arr.shape[0] * scale), Image.NEAREST)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    img.save(tmp)
    tmp.replace(path)
    return path


def figure(cfg: Config, per_seed: dict, path: Path, test=None, backs: dict | None = None) -> list[Path]:
    """The back-view grid of the first seed (columns = test subjects; rows = input (front), GT back, image-only
    back, dual back, two-view (refined back) back): the figures of the run, ``[path]`` once the grid exists.

    The renders are not stored in the seed files, so the grid is written by :func:`~iclr25.hgm.experiment.one_seed`
    of the first seed, which calls this with the test set ``test`` and its back-view renders ``backs``
    (``image_only``, ``dual``, ``refined`` → (≤ 4, H, W, 3)); ``run`` calls it without them and gets the grid
    written then (none when that seed was computed elsewhere without it)."""

    if backs is not None:
        if test is None:
            raise ValueError("figure: backs given without the test set they were rendered from")
        rows = [test.images[:4, FRONT], test.images[:4, BACK], backs["image_only"], backs["dual"]]
        _save_grid(rows + [backs["refined"]], path)
    return [path] if path.exists() else []


def _table(per_seed: dict) -> list[str]:
    rows = [
        "| arm | back PSNR | input PSNR | novel PSNR | back SSIM | Chamfer (top-k) | Chamfer (α>0.5) |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in ARMS:
        cells = [mean_std(values(per_seed, f"{a}/{k}"), 3) for k in TABLE_METRICS]
        rows.append(f"| {a} | " + " | ".join(cells) + " |")
    return rows


def _mean_by_key(per_seed: dict, group: str) -> dict[str, float]:
    """Mean over seeds of every entry of the per-seed dict ``group`` (the first seed's keys, in its order)."""
    first = per_seed[next(iter(per_seed))][group]
    return {k: float(np.mean(values(per_seed, f"{group}/{k}"))) for k in first}


def _body_refinement_text(cfg: Config, per_seed: dict) -> str:
    """E3 (report-only): body vertex error before/after refinement and how good the coarse silhouettes are."""
    if "body_vertex_error" not in per_seed[next(iter(per_seed))]:
        return ""
    b = values(per_seed, "body_vertex_error/before")
    a = values(per_seed, "body_vertex_error/after")
    soft = values(per_seed, "body_vertex_error/after_soft_target")
    tgt = _mean_by_key(per_seed, "body_refine_target")
    return (
        f"\n\nE3 body refinement (report-only, {cfg.body_refine_steps} Adam steps on the test bodies' pose/shape "
        f"parameters): mean vertex error {mean_std(b, 4)} → {mean_std(a, 4)} "
        f"with the thresholded silhouette (alpha > {cfg.body_refine_threshold:g}; change "
        f"{100 * (np.mean(a) / np.mean(b) - 1):+.1f} %), → {mean_std(soft, 4)} with the released "
        f"soft alpha target ({100 * (np.mean(soft) / np.mean(b) - 1):+.1f} %). Coarse silhouette quality (IoU with "
        f"the GT clothed masks): soft {tgt['soft_iou_with_gt']:.3f}, thresholded "
        f"{tgt['thresholded_iou_with_gt']:.3f}; mean coarse alpha {tgt['alpha_mean_in_gt_mask']:.3f} inside the GT "
        f"mask, {tgt['alpha_mean_outside']:.3f} outside."
    )


def report_md(cfg: Config, per_seed: dict) -> str:
    """The run's report body: the per-arm table, the training budgets and steps reached, E3, the deviations."""
    steps = _mean_by_key(per_seed, "steps")
    cpus = _mean_by_key(per_seed, "cpu_s")
    times = _mean_by_key(per_seed, "time_s")
    refiner = f"{cfg.refiner_budget_s:g} CPU-s" if cfg.refiner_budget_s else f"{cfg.refiner_steps} steps"
    return (
        "### HGM on ToyHumans\n\n" + "\n".join(_table(per_seed)) + "\n\n"
        f"Training: {budget_text(cfg)} per model (batch {cfg.batch_size}, {cfg.sup_views} supervision views, "
        f"auxiliary sets rendered at 1/{cfg.aux_downscale} resolution), refiner {refiner}. Mean steps reached: "
        + ", ".join(f"{k} {v:.0f}" for k, v in steps.items())
        + ". Mean CPU s: "
        + ", ".join(f"{k} {v:.1f}" for k, v in cpus.items())
        + ". Mean wall s: "
        + ", ".join(f"{k} {v:.1f}" for k, v in times.items())
        + f". Chamfer: the {cfg.chamfer_frac:.0%} most opaque merged Gaussians; Chamfer(α>0.5) where that set is "
        "non-empty."
        + _body_refinement_text(cfg, per_seed)
        + "\n\nFigure: columns = test subjects; rows = input (front), GT back, image-only back, dual back, "
        "two-view (refined back) back.\n\nDeviations: procedural capsule bodies instead of scans + SMPL-X; dense "
        "voxel Conv3d instead of a sparse CNN; point-wise fusion head instead of MixNet; LPIPS omitted; a small "
        "conditional U-Net refiner instead of ControlNet-tile + SD 1.5 (the diffusers path is "
        "`ControlNetBackRefiner`); equal CPU-time budgets instead of the paper's long schedules (constant learning "
        "rate, no OneCycle).\n"
    )
