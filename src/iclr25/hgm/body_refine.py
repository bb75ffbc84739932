"""Body refinement against the coarse Gaussians (HGM §3.3, E3 of the reproduction): the noisy body estimate's
pose/shape parameters optimised so that the body, splatted as small Gaussians, matches the coarse model's
silhouettes and its most opaque centres."""

from __future__ import annotations

import torch
from torch import Tensor

from .gaussians import GaussianSet
from .metrics import chamfer_distance, topk_mask
from .model import HGM, downscale_camera
from .renderer import render_gaussians
from .toyhumans import CapsuleBody
from .training import FRONT

__all__ = ["body_refinement", "refine_body"]


def refine_body(
    body: CapsuleBody,
    prior_params: Tensor,
    coarse: GaussianSet,
    camera,
    steps: int = 30,
    lr: float = 0.01,
    frac: float = 0.25,
    vertex_scale: float = 0.035,
    threshold: float | None = 0.5,
) -> Tensor:
    """Body refinement against the coarse Gaussians (HGM §3.3): optimise pose/shape parameters (B, P) with Adam
    on (1 − soft IoU) between the body's alpha renders (vertices splatted as small isotropic Gaussians) and the
    coarse model's silhouettes in ``camera``'s views, plus the Chamfer distance between the body vertices and
    the coarse model's ``frac`` most opaque centres. Returns the refined parameters (detached).

    The coarse silhouette is its opacity-weighted alpha render (α-compositing of every Gaussian's opacity) made
    binary, ``alpha > threshold`` — a mask like the ones SMPL-X fitting is refined against — so many faint,
    semi-transparent Gaussians do not make a faint, blurred target. ``threshold=None`` uses the raw alpha render
    (the released code's soft target)."""
    if steps < 0:
        raise ValueError(f"steps must be ≥ 0; got {steps}")
    if threshold is not None and not 0 < threshold < 1:
        raise ValueError(f"threshold must be None or in (0, 1); got {threshold}")
    coarse = coarse.detach()
    with torch.no_grad():
        target = render_gaussians(*coarse, camera).alpha[..., 0]  # (B, C, H, W)
        if threshold is not None:
            target = (target > threshold).to(target.dtype)
        mask = topk_mask(coarse.opacities, frac)
    p = prior_params.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=lr)
    B, Nv = p.shape[0], body.num_vertices
    quats = torch.zeros(B, Nv, 4, dtype=p.dtype)
    quats[..., 0] = 1.0
    scales = torch.full((B, Nv, 3), vertex_scale, dtype=p.dtype)
    opac = torch.full((B, Nv), 0.9, dtype=p.dtype)
    cols = torch.ones(B, Nv, 3, dtype=p.dtype)
    for _ in range(steps):
        v = body.vertices(p)
        a = render_gaussians(v, quats, scales, opac, cols, camera).alpha[..., 0]
        inter = (a * target).flatten(-2).sum(-1)
        union = (a + target - a * target).flatten(-2).sum(-1).clamp_min(1e-6)
        loss = (1 - inter / union).mean() + chamfer_distance(coarse.means, v, mask).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return p.detach()


def body_refinement(cfg, coarse: HGM, test, dev) -> tuple[dict, dict]:
    """E3 (report-only): refine the noisy test bodies against the coarse model (:func:`refine_body`, HGM §3.3)
    with the thresholded and with the soft alpha target; returns the body vertex errors before/after and how good
    a target each coarse silhouette is (IoU with the GT clothed masks). ``cfg`` (a :class:`iclr25.hgm.config.Config`)
    gives ``body_refine_threshold``, ``body_refine_steps``, ``body_refine_lr`` and ``chamfer_frac``."""
    body = CapsuleBody()
    with torch.no_grad():
        o = coarse(test.images[:, [FRONT]].to(dev), test.camera.to(dev)[[FRONT]], test.prior_vertices.to(dev))
    merged = o.merged.to("cpu")  # E3 refines the CPU body model against the coarse Gaussians (small: 4 views)
    views = downscale_camera(test.camera[[0, 3, 6, 9]], 2)
    v_true = body.vertices(test.params)
    err = lambda p: float((body.vertices(p) - v_true).norm(dim=-1).mean())  # noqa: E731
    errors = {"before": err(test.prior_params)}
    for key, thr in (("after", cfg.body_refine_threshold), ("after_soft_target", None)):
        p1 = refine_body(
            body,
            test.prior_params,
            merged,
            views,
            cfg.body_refine_steps,
            cfg.body_refine_lr,
            cfg.chamfer_frac,
            threshold=thr,
        )
        errors[key] = err(p1)
    with torch.no_grad():  # how good a target each silhouette is: IoU with the GT (clothed) masks
        a = render_gaussians(*merged, views).alpha[..., 0]  # (n, 4, H/2, W/2)
        gt = torch.nn.functional.avg_pool2d(test.masks[:, [0, 3, 6, 9]], 2) > 0.5
        soft_iou = (a * gt).flatten(1).sum(1) / (a + gt - a * gt).flatten(1).sum(1).clamp_min(1e-6)
        hard = a > cfg.body_refine_threshold
        hard_iou = (hard & gt).flatten(1).sum(1) / (hard | gt).flatten(1).sum(1).clamp_min(1)
    target = {
        "alpha_mean_in_gt_mask": float(a[gt].mean()),
        "alpha_mean_outside": float(a[~gt].mean()),
        "soft_iou_with_gt": float(soft_iou.mean()),
        "thresholded_iou_with_gt": float(hard_iou.float().mean()),
    }
    return errors, target
