"""Test scores of a trained HGM model (the reproduction's arms): its merged Gaussians rendered in every third
orbit view (0°, 90°, 180°, 270°, as the released inference script computes PSNR on every third rendered view),
PSNR / SSIM of those renders and the Chamfer distance of the most opaque centres to the clothed GT surface."""

from __future__ import annotations

import numpy as np
import torch

from .metrics import chamfer_distance, psnr, ssim, topk_mask
from .model import HGM
from .renderer import render_gaussians
from .training import BACK, FRONT

__all__ = ["ARM_METRICS", "EVAL_VIEWS", "arm_metrics", "render_eval_views"]

EVAL_VIEWS = (0, 3, 6, 9)  # every third of the 12 orbit views (the released inference script's PSNR views)
# one arm's test scores (:func:`arm_metrics`)
ARM_METRICS = (
    "psnr_back",
    "psnr_input",
    "psnr_novel",
    "ssim_back",
    "chamfer",
    "chamfer_alpha05",
    "frac_alpha05",
)


@torch.no_grad()
def render_eval_views(model: HGM, inputs: torch.Tensor, data, in_views: list[int], device):
    """The merged Gaussians for ``inputs`` and their renders in :data:`EVAL_VIEWS` (image index i ↔ view
    EVAL_VIEWS[i])."""
    cam = data.camera.to(device)
    out = model(inputs, cam[in_views], data.prior_vertices.to(device))
    r = render_gaussians(*out.merged, cam[list(EVAL_VIEWS)])
    return out, r


@torch.no_grad()
def arm_metrics(out, r, data, frac: float) -> dict:
    """One arm's test scores (:data:`ARM_METRICS`): PSNR of the back (180°), input and novel views, back-view
    SSIM, and the Chamfer distance of the most opaque merged Gaussian centres to the clothed GT surface."""
    dev = r.image.device  # the model's device; the test set lives on the CPU
    gt = data.images[:, list(EVAL_VIEWS)].to(dev)
    surface = data.surface.to(dev)
    b = EVAL_VIEWS.index(BACK)
    p = psnr(r.image.clamp(0, 1), gt)  # (n, len(EVAL_VIEWS))
    s_back = ssim(r.image[:, b].clamp(0, 1), gt[:, b])
    # Claim metric: Chamfer between the `frac` most opaque merged Gaussian centres and the clothed GT surface
    # (always defined: both models have the same number of merged Gaussians). Report-only: the α > 0.5 set.
    ch = chamfer_distance(out.merged.means, surface, topk_mask(out.merged.opacities, frac))
    opaque = out.merged.opacities > 0.5
    ch05 = [
        float(chamfer_distance(out.merged.means[i : i + 1], surface[i : i + 1], opaque[i : i + 1]))
        if opaque[i].any()
        else float("nan")
        for i in range(len(data))
    ]
    novel = [i for i, v in enumerate(EVAL_VIEWS) if v != FRONT]
    return {
        "psnr_back": float(p[:, b].mean()),
        "psnr_input": float(p[:, EVAL_VIEWS.index(FRONT)].mean()),
        "psnr_novel": float(p[:, novel].mean()),
        "ssim_back": float(s_back.mean()),
        "chamfer": float(ch.mean()),
        "chamfer_alpha05": float(np.nanmean(ch05)) if not np.all(np.isnan(ch05)) else float("nan"),
        "frac_alpha05": float(opaque.float().mean()),
    }
