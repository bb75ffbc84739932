"""Training of the HGM models and the back-view refiner on ToyHumans, under equal compute budgets.

Every trained model gets the same optimiser (AdamW, betas (0.9, 0.95), weight decay 0.05, the paper's settings),
the same learning rate and batch size, and the same budget: training stops after ``budget_s`` seconds of process
CPU time (or after ``steps`` steps, a cap). Supervision views (HGM §3.2, 'views_sup'): every step renders the input
views **and** views that are not inputs (:func:`supervision_views`).

The functions read their settings from ``cfg``, a :class:`iclr25.hgm.config.Config` (or any object with the fields
they name): ``model``, ``n_train``, ``n_test``, ``data_seed``, ``num_points``, ``pose_noise_deg``, ``lr``,
``batch_size``, ``steps``, ``budget_s``, ``sup_views``, ``aux_downscale``, ``refiner_steps``, ``refiner_budget_s``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import torch

from .model import HGM, BackViewRefiner, hgm_loss
from .renderer import render_gaussians
from .toyhumans import ToyHumans, make_toyhumans

__all__ = ["BACK", "FRONT", "build_model", "make_data", "supervision_views", "train_model", "train_refiner"]

BACK, FRONT = 6, 0  # the back (180°) and front (0°) orbit views of the 12


def build_model(cfg, use_body: bool, nv: int) -> HGM:
    """``cfg.model`` for a body model with ``nv`` vertices, dual branch (``use_body``) or image-only."""
    return HGM(replace(cfg.model, num_vertices=nv, use_body=use_body))


def supervision_views(
    in_views: list[int], sup_views: int, gen: torch.Generator, n_views: int = 12
) -> list[int]:
    """The views one training step renders and supervises: the input views, then views that are not inputs — the
    back view (when it is not an input), then random others — up to ``sup_views`` in all, and always at least one
    non-input view (so with ``sup_views = 2`` a two-view [front, back] model gets its inputs plus one random other
    view). HGM (§3.2) supervises 8 of the 12 rendered views, most of them not inputs."""
    if not in_views or len(set(in_views)) != len(in_views) or not all(0 <= v < n_views for v in in_views):
        raise ValueError(f"in_views must be distinct view indices in [0, {n_views}); got {in_views}")
    if not 1 <= sup_views <= n_views:
        raise ValueError(f"sup_views must be in [1, {n_views}]; got {sup_views}")
    n_extra = min(max(sup_views - len(in_views), 1), n_views - len(in_views))
    first = [BACK] if BACK not in in_views else []
    others = [v for v in range(n_views) if v not in in_views and v not in first]
    rand = [others[int(i)] for i in torch.randperm(len(others), generator=gen)]
    return list(in_views) + (first + rand)[:n_extra]


def train_model(
    model: HGM, data, cfg, in_views: list[int], gen: torch.Generator, device, steps: int | None = None
) -> dict:
    """AdamW until ``cfg.budget_s`` CPU seconds (process time) or ``steps`` steps (default ``cfg.steps``),
    whichever comes first."""
    cap = cfg.steps if steps is None else steps
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        raise ValueError(f"steps must be a positive int, got {cap!r}")
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.05)
    t0, c0 = time.perf_counter(), time.process_time()
    cam = data.camera.to(device)
    steps = 0
    while steps < cap and (cfg.budget_s is None or time.process_time() - c0 < cfg.budget_s):
        idx = torch.randint(0, len(data), (cfg.batch_size,), generator=gen)
        sup = supervision_views(in_views, cfg.sup_views, gen)
        imgs, masks = data.images[idx].to(device), data.masks[idx].to(device)
        out = model(imgs[:, in_views], cam[in_views], data.prior_vertices[idx].to(device))
        loss, _ = hgm_loss(out, cam[sup], imgs[:, sup], masks[:, sup], aux_downscale=cfg.aux_downscale)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        steps += 1
    return {"steps": steps, "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0}


def make_data(cfg, cache_dir: Path | None = None) -> tuple[ToyHumans, ToyHumans]:
    """The shared (train, test) ToyHumans sets (seeded by ``cfg.data_seed``, the same for every seed), cached in
    ``cache_dir`` when given."""
    kw = {"size": cfg.model.image_size, "num_points": cfg.num_points, "pose_noise_deg": cfg.pose_noise_deg}
    train = make_toyhumans(cfg.n_train, seed=cfg.data_seed, cache_dir=cache_dir, **kw)
    return train, make_toyhumans(cfg.n_test, seed=cfg.data_seed + 1, cache_dir=cache_dir, **kw)


def train_refiner(cfg, coarse: HGM, train, gen: torch.Generator, dev) -> tuple[BackViewRefiner, dict]:
    """Generate-then-refine (HGM §3.3): the back-view refiner, trained on the coarse (dual) model's back renders
    of the training subjects with the same optimiser, until ``cfg.refiner_budget_s`` CPU seconds or
    ``cfg.refiner_steps`` steps."""
    with torch.no_grad():
        cam = train.camera.to(dev)
        backs = []
        for i in range(0, len(train), 16):
            o = coarse(
                train.images[i : i + 16, [FRONT]].to(dev),
                cam[[FRONT]],
                train.prior_vertices[i : i + 16].to(dev),
            )
            backs.append(render_gaussians(*o.merged, cam[[BACK]]).image[:, 0])
        backs = torch.cat(backs)
    ref = BackViewRefiner(cfg.model.channels).to(dev)
    opt = torch.optim.AdamW(ref.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.05)
    t0, c0, rsteps = time.perf_counter(), time.process_time(), 0
    while rsteps < cfg.refiner_steps and (
        cfg.refiner_budget_s is None or time.process_time() - c0 < cfg.refiner_budget_s
    ):
        rsteps += 1
        idx = torch.randint(0, len(train), (cfg.batch_size * 4,), generator=gen)
        loss = torch.nn.functional.mse_loss(
            ref(backs[idx], train.images[idx, FRONT].to(dev)), train.images[idx, BACK].to(dev)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    return ref, {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "steps": rsteps}
