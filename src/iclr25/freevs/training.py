"""Training and evaluation of FreeVS-tiny on ToyDrive (the reproduction's variants): the training loop with the
viewpoint-translation simulation, the held-out monitoring curve (monitoring only: nothing is selected on it) and
the metrics per lateral shift Δy (PSNR, hole-PSNR, SSIM, detection AP, FD-proxy).

The functions read their settings from ``cfg``, a :class:`iclr25.freevs.config.Config` (or any object with the
fields they name).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from .data import valid_centres
from .metrics import average_precision, detect, frechet_distance, psnr, ssim
from .model import FreeVSTiny, edm_loss, sample

__all__ = ["curve_steps", "evaluate", "monitor_psnr", "monitor_set", "train_variant"]


def curve_steps(cfg) -> list[int]:
    """The steps (1-based, after the optimiser update) at which the training curve measures held-out PSNR."""
    if cfg.curve_points == 0:
        return []
    return sorted(
        {max(1, round(cfg.train_steps * (i + 1) / cfg.curve_points)) for i in range(cfg.curve_points)}
    )


def monitor_set(cfg, data: dict) -> tuple[torch.Tensor, torch.Tensor, np.ndarray] | None:
    """Held-out clips for the curve: the first ``curve_clips`` test clips at Δy = 0 and at Δy = 2 m."""
    if cfg.curve_points == 0 or cfg.curve_clips == 0:
        return None
    idx = [list(cfg.offsets).index(0.0), list(cfg.offsets).index(2.0)]
    k = min(cfg.curve_clips, data["test_gt"].shape[1])
    p = torch.tensor(data["test_pseudo"][idx, :k])  # (2, k, T, H, W, 3)
    r = torch.tensor(data["test_ref"][idx, :k])  # (2, k, H, W, 3)
    g = data["test_gt"][idx, :k]
    pseudo = p.reshape(-1, *p.shape[2:]).permute(0, 1, 4, 2, 3) * 2 - 1
    ref = r.reshape(-1, *r.shape[2:]).permute(0, 3, 1, 2) * 2 - 1
    return pseudo, ref, g.reshape(-1, *g.shape[2:])


def monitor_psnr(cfg, model: FreeVSTiny, mon, seed: int, device) -> list[float]:
    """Mean PSNR of sampled frames on the monitor clips, [Δy = 0, Δy = 2 m] (same sampler noise at every call)."""
    pseudo, ref, gt = mon
    was = model.training
    model.eval()
    g = torch.Generator(device="cpu").manual_seed(20_000 + seed)
    with torch.no_grad():
        x = sample(
            model,
            pseudo.to(device),
            ref.to(device),
            cfg.edm,
            cfg.sample_steps,
            cfg.guidance,
            g,
        ).cpu()
    model.train(was)
    frames = ((x + 1) / 2).permute(0, 1, 3, 4, 2).numpy()  # (2k, T, H, W, 3)
    per = np.array([np.mean([psnr(a, b) for a, b in zip(f, t)]) for f, t in zip(frames, gt)])
    half = len(per) // 2
    return [float(per[:half].mean()), float(per[half:].mean())]


def train_variant(cfg, data: dict, ratio: float, seed: int, device: torch.device) -> tuple[FreeVSTiny, dict]:
    """Train one FreeVS-tiny variant: AdamW, ``cfg.train_steps`` steps of the EDM loss on random recorded clips,
    a fraction ``ratio`` of them conditioned on pseudo-images with the point window centred at t ± ``shift_k``
    (the viewpoint-translation simulation; 0 = without it). Returns the model (eval mode) and its loss / CPU
    statistics, with the held-out ``curve`` when ``cfg.curve_points`` > 0 (monitoring only)."""
    torch.manual_seed(seed)
    g = torch.Generator(device="cpu").manual_seed(seed)
    edm = cfg.edm
    model = FreeVSTiny(cfg.channels, cfg.cond_channels).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    gt = torch.tensor(data["train_gt"]) * 2 - 1  # (S, F, H, W, 3)
    pseudo = [torch.tensor(data[k]) * 2 - 1 for k in ("train_p0", "train_pp", "train_pm")]
    S, Fn = gt.shape[:2]
    T = cfg.clip_len
    t0 = time.process_time()
    losses = []
    mon = monitor_set(cfg, data)
    at = set(curve_steps(cfg)) if mon is not None else set()
    curve: dict[str, list[float]] = {"step": [], "loss": [], "psnr_dy0": [], "psnr_dy2": []}
    mon_cpu = 0.0
    for step in range(1, cfg.train_steps + 1):
        si = torch.randint(0, S, (cfg.batch,), generator=g)
        ti = torch.randint(0, Fn - T + 1, (cfg.batch,), generator=g)
        frames = ti[:, None] + torch.arange(T)
        shifted = torch.rand(cfg.batch, generator=g) < ratio
        sign = torch.randint(1, 3, (cfg.batch,), generator=g)  # 1: +k, 2: −k (whole clip)
        which = torch.where(shifted, sign, torch.zeros_like(sign))
        x0 = gt[si[:, None], frames].permute(0, 1, 4, 2, 3)
        p = torch.stack([pseudo[int(w)][int(s), f] for w, s, f in zip(which, si, frames)]).permute(
            0, 1, 4, 2, 3
        )
        ref = gt[si, ti].permute(0, 3, 1, 2)
        loss = edm_loss(model, x0.to(device), p.to(device), ref.to(device), edm, g)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step in at:  # monitoring only (its CPU time is excluded from train_cpu_s)
            c = time.process_time()
            p0, p2 = monitor_psnr(cfg, model, mon, seed, device)
            prev = int(curve["step"][-1]) if curve["step"] else 0
            curve["step"].append(float(step))
            curve["loss"].append(float(np.mean(losses[prev:step])))
            curve["psnr_dy0"].append(p0)
            curve["psnr_dy2"].append(p2)
            mon_cpu += time.process_time() - c
    n = max(1, len(losses) // 10)
    out = {
        "loss_first": float(np.mean(losses[:n])),
        "loss_last": float(np.mean(losses[-n:])),
        "train_cpu_s": time.process_time() - t0 - mon_cpu,
    }
    if curve["step"]:
        out["curve"] = curve
    return model.eval(), out


def evaluate(cfg, data: dict, frames: np.ndarray, probe, gt_feats: dict) -> dict:
    """Metrics per offset for generated (or baseline) frames ``frames`` (offset, clip, T, H, W, 3) in [0, 1]."""
    out = {}
    for i, dy in enumerate(cfg.offsets):
        gt, fil, pred = data["test_gt"][i], data["test_filled"][i], frames[i]
        flat_p, flat_g = pred.reshape(-1, *pred.shape[2:]), gt.reshape(-1, *gt.shape[2:])
        flat_f = fil.reshape(-1, *fil.shape[2:])
        ps = [psnr(a, b) for a, b in zip(flat_p, flat_g)]
        hs = [psnr(a, b, ~m) for a, b, m in zip(flat_p, flat_g, flat_f)]
        ss = [ssim(a.astype(np.float64), b.astype(np.float64)) for a, b in zip(flat_p, flat_g)]
        dets, feats = detect(probe, flat_p)
        cents = [
            valid_centres(c) for c in data["test_centres"][i].reshape(-1, *data["test_centres"].shape[3:])
        ]
        out[f"dy{dy:g}"] = {
            "psnr": float(np.mean(ps)),
            "hole_psnr": float(np.nanmean(hs)),
            "ssim": float(np.mean(ss)),
            "ap": average_precision(dets, cents),
            "fd_proxy": frechet_distance(feats, gt_feats[dy]),
        }
    return out
