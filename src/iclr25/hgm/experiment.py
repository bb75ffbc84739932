"""HGM reproduction at small scale on ToyHumans (procedural clothed capsule humans, 12 orbit views).

Per seed (the data set is shared; the seed drives initialisation and batch order):

* E1 (body prior / dual branch): the image-only (LGM-like) model vs the dual-branch HGM, single front input
  view; back-view (180°) PSNR and Chamfer distance of opaque Gaussian centres to the clothed GT surface.
* E2 (generate-then-refine): (a) the single-view dual model; (b) a two-view dual model fed [front, refined
  back], where the refined back is the coarse model's back render enhanced by a small conditional refiner
  (standing in for the paper's ControlNet-tile + SD 1.5); (c) the same two-view model fed the GT back (oracle).

Every model gets the same optimiser (AdamW, betas (0.9, 0.95), weight decay 0.05, the paper's settings), the
same learning rate, batch size and number of optimisation steps; wall-clock time per arm is recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import all_of, make_claim
from iclr25.common.results import ExperimentConfig, RunDir, RunResult
from iclr25.common.seeding import seed_everything

from .metrics import chamfer_distance, psnr, ssim
from .model import HGM, BackViewRefiner, HGMConfig, hgm_loss
from .renderer import render_gaussians
from .toyhumans import make_toyhumans

BACK, FRONT = 6, 0


@dataclass(frozen=True)
class Config(ExperimentConfig):
    n_train: int = 300
    n_test: int = 50
    image_size: int = 32
    splat_size: int = 16
    num_points: int = 16000
    pose_noise_deg: float = 7.0
    steps: int = 400  # optimisation steps per model (identical for every arm)
    refiner_steps: int = 200
    batch_size: int = 4
    sup_views: int = 3  # supervision views per sample: input, back, one random other
    lr: float = 1e-3
    channels: tuple[int, int, int] = (16, 32, 64)
    data_seed: int = 1234

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("n_train", "n_test", "steps", "refiner_steps", "batch_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive; got {getattr(self, name)}")
        if not 2 <= self.sup_views <= 12:
            raise ValueError(f"sup_views must be in [2, 12]; got {self.sup_views}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive; got {self.lr}")


PRESETS = {
    "smoke": Config(
        seeds=2,
        n_train=4,
        n_test=2,
        image_size=16,
        splat_size=4,
        num_points=2000,
        steps=2,
        refiner_steps=2,
        batch_size=2,
        channels=(8, 16, 16),
    ),
    "quick": Config(
        seeds=3, n_train=60, n_test=12, num_points=8000, steps=40, refiner_steps=30, batch_size=2, sup_views=2
    ),
    "full": Config(
        seeds=3, n_train=300, n_test=50, steps=3000, refiner_steps=1000, batch_size=8, sup_views=4
    ),
}


def _model(cfg: Config, use_body: bool, nv: int) -> HGM:
    c = cfg.channels
    return HGM(
        HGMConfig(
            image_size=cfg.image_size,
            splat_size=cfg.splat_size,
            channels=c,
            feat_dim=c[1],
            code_dim=16,
            heads=4,
            num_vertices=nv,
            grid=16,
            use_body=use_body,
        )
    )


def _train(model: HGM, data, cfg: Config, in_views: list[int], gen: torch.Generator, device) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.05)
    t0 = time.perf_counter()
    cam = data.camera.to(device)
    for _ in range(cfg.steps):
        idx = torch.randint(0, len(data), (cfg.batch_size,), generator=gen)
        others = [v for v in range(12) if v not in in_views]
        extra = [
            others[int(i)]
            for i in torch.randperm(len(others), generator=gen)[: max(cfg.sup_views - len(in_views), 0)]
        ]
        sup = list(dict.fromkeys(in_views + [BACK] + extra))[: max(cfg.sup_views, len(in_views))]
        imgs, masks = data.images[idx].to(device), data.masks[idx].to(device)
        out = model(imgs[:, in_views], cam[in_views], data.prior_vertices[idx].to(device))
        loss, _ = hgm_loss(out, cam[sup], imgs[:, sup], masks[:, sup])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return time.perf_counter() - t0


@torch.no_grad()
def _renders(model: HGM, inputs: torch.Tensor, data, in_views: list[int], device):
    cam = data.camera.to(device)
    out = model(inputs, cam[in_views], data.prior_vertices.to(device))
    r = render_gaussians(*out.merged, cam)
    return out, r


@torch.no_grad()
def _metrics(out, r, data) -> dict:
    gt = data.images
    p = psnr(r.image.clamp(0, 1), gt)  # (n, 12)
    s_back = ssim(r.image[:, BACK].clamp(0, 1), gt[:, BACK])
    opaque = out.merged.opacities > 0.5
    ch = []
    for i in range(len(data)):
        if opaque[i].any():
            ch.append(
                float(
                    chamfer_distance(out.merged.means[i : i + 1], data.surface[i : i + 1], opaque[i : i + 1])
                )
            )
        else:
            ch.append(float("nan"))
    novel = [v for v in range(12) if v != FRONT]
    return {
        "psnr_back": float(p[:, BACK].mean()), "psnr_input": float(p[:, FRONT].mean()),
        "psnr_novel": float(p[:, novel].mean()), "ssim_back": float(s_back.mean()),
        "chamfer": float(np.nanmean(ch)) if not np.all(np.isnan(ch)) else float("nan"),
    }  # fmt: skip


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


def _one_seed(cfg: Config, seed: int, train, test, fig_path: Path | None = None) -> dict:
    seed_everything(seed)
    gen = torch.Generator().manual_seed(seed)
    dev = torch.device(cfg.device)
    nv = train.prior_vertices.shape[1]
    res: dict = {"time_s": {}}
    models = {}
    for name, body in (("image_only", False), ("dual", True)):
        torch.manual_seed(seed)
        m = _model(cfg, body, nv).to(dev)
        res["time_s"][name] = _train(m, train, cfg, [FRONT], gen, dev)
        m.eval()
        out, r = _renders(m, test.images[:, [FRONT]].to(dev), test, [FRONT], dev)
        res[name] = _metrics(out, r, test)
        models[name] = m
        res.setdefault("_backs", {})[name] = r.image[:4, BACK]
    # Generate-then-refine: refiner trained on the coarse (dual) model's back renders of training subjects.
    coarse = models["dual"]
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
    ref = BackViewRefiner(cfg.channels).to(dev)
    opt = torch.optim.AdamW(ref.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.05)
    t0 = time.perf_counter()
    for _ in range(cfg.refiner_steps):
        idx = torch.randint(0, len(train), (cfg.batch_size * 4,), generator=gen)
        loss = torch.nn.functional.mse_loss(
            ref(backs[idx], train.images[idx, FRONT].to(dev)), train.images[idx, BACK].to(dev)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    res["time_s"]["refiner"] = time.perf_counter() - t0
    torch.manual_seed(seed)
    two = _model(cfg, True, nv).to(dev)
    res["time_s"]["two_view"] = _train(two, train, cfg, [FRONT, BACK], gen, dev)
    two.eval()
    with torch.no_grad():
        cam = test.camera.to(dev)
        o = coarse(test.images[:, [FRONT]].to(dev), cam[[FRONT]], test.prior_vertices.to(dev))
        cback = render_gaussians(*o.merged, cam[[BACK]]).image[:, 0]
        rback = ref(cback, test.images[:, FRONT].to(dev))
        res["back_psnr_coarse_render"] = float(psnr(cback, test.images[:, BACK]).mean())
        res["back_psnr_refined_render"] = float(psnr(rback, test.images[:, BACK]).mean())
        refined_in = torch.stack([test.images[:, FRONT].to(dev), rback], 1)
        out, r = _renders(two, refined_in, test, [FRONT, BACK], dev)
        res["refined"] = _metrics(out, r, test)
        backs = res.pop("_backs")
        backs["refined"] = r.image[:4, BACK]
        out, r = _renders(two, test.images[:, [FRONT, BACK]].to(dev), test, [FRONT, BACK], dev)
        res["oracle"] = _metrics(out, r, test)
    if fig_path is not None:
        # Rows: input (front), GT back, image-only back, dual back, refined two-view back.
        _save_grid(
            [
                test.images[:4, FRONT],
                test.images[:4, BACK],
                backs["image_only"],
                backs["dual"],
                backs["refined"],
            ],
            fig_path,
        )
    return res


def _chamfer_note(dual: list[float], img: list[float], cfg: Config) -> str:
    if any(np.isnan(dual)) or any(np.isnan(img)):
        return (
            f"undefined at this scale: after {cfg.steps} steps no merged Gaussian of any test subject reached "
            "α > 0.5, so the opaque point set (the metric's definition) is empty; longer training (full preset) is "
            "needed before geometry can be compared."
        )
    return f"per-seed ratios: {', '.join(f'{a / b:.3f}' for a, b in zip(dual, img))}"


def run(cfg: Config, out: Path) -> RunResult:
    out = Path(out)
    rd = RunDir(out, cfg)
    cache = out / "data"
    train = make_toyhumans(
        cfg.n_train,
        seed=cfg.data_seed,
        size=cfg.image_size,
        num_points=cfg.num_points,
        pose_noise_deg=cfg.pose_noise_deg,
        cache_dir=cache,
    )
    test = make_toyhumans(
        cfg.n_test,
        seed=cfg.data_seed + 1,
        size=cfg.image_size,
        num_points=cfg.num_points,
        pose_noise_deg=cfg.pose_noise_deg,
        cache_dir=cache,
    )
    fig = out / "figures" / "hgm_back_views.png"
    per = rd.map_seeds(
        lambda s: _one_seed(cfg, s, train, test, fig if s == cfg.seed_list[0] else None), cfg.seed_list
    )
    seeds = cfg.seed_list
    arms = ("image_only", "dual", "refined", "oracle")

    def vals(arm, key):
        return [float(per[s][arm][key]) for s in seeds]

    metrics = {
        f"{a}/{k}": float(np.mean(vals(a, k)))
        for a in arms
        for k in ("psnr_back", "psnr_input", "psnr_novel", "ssim_back", "chamfer")
    }
    diff = np.array(vals("dual", "psnr_back")) - np.array(vals("image_only", "psnr_back"))
    claims = [
        make_claim(
            "dual_branch_psnr", "Dual-branch HGM beats the image-only model by ≥ 0.5 dB back-view PSNR (single input view).",
            "back-view PSNR (dB)", vals("dual", "psnr_back"), 0.5, ">=", baseline=vals("image_only", "psnr_back"), compare="difference",
            note=f"paired per-seed differences: {', '.join(f'{d:+.2f}' for d in diff)} dB; {cfg.steps} steps per arm at toy scale.",
        ),
        make_claim(
            "dual_branch_chamfer", "Dual-branch Chamfer distance ≤ 0.9 × the image-only model's.",
            "Chamfer (opaque Gaussian centres ↔ clothed GT surface)", vals("dual", "chamfer"), 0.9, "<=", baseline=vals("image_only", "chamfer"), compare="ratio",
            note=_chamfer_note(vals("dual", "chamfer"), vals("image_only", "chamfer"), cfg),
        ),
        all_of(
            "refine_helps", "Generate-then-refine (two-view model with refined back) ≥ single-view + 0.3 dB back PSNR; oracle GT back ≥ refined.",
            [
                make_claim("refined_vs_single", "refined two-view ≥ single-view + 0.3 dB", "back-view PSNR (dB)", vals("refined", "psnr_back"), 0.3, ">=", baseline=vals("dual", "psnr_back"), compare="difference"),
                make_claim("oracle_vs_refined", "oracle ≥ refined", "back-view PSNR (dB)", vals("oracle", "psnr_back"), 0.0, ">=", baseline=vals("refined", "psnr_back"), compare="difference"),
            ],
            note=(
                "paired per-seed refined − single-view: "
                + ", ".join(f"{a - b:+.2f}" for a, b in zip(vals("refined", "psnr_back"), vals("dual", "psnr_back")))
                + " dB; oracle − refined: "
                + ", ".join(f"{a - b:+.3f}" for a, b in zip(vals("oracle", "psnr_back"), vals("refined", "psnr_back")))
                + " dB. The refiner alone lifts the coarse back render from "
                + f"{np.mean([per[s]['back_psnr_coarse_render'] for s in seeds]):.2f} to "
                + f"{np.mean([per[s]['back_psnr_refined_render'] for s in seeds]):.2f} dB; a near-zero oracle − refined gap "
                "means the two-view model barely uses its second input at this training length."
            ),
        ),
    ]  # fmt: skip
    rows = [
        "| arm | back PSNR | input PSNR | novel PSNR | back SSIM | Chamfer |",
        "|---|---|---|---|---|---|",
    ]
    for a in arms:
        cells = [
            f"{np.mean(vals(a, k)):.3f} ± {np.std(vals(a, k)):.3f}"
            for k in ("psnr_back", "psnr_input", "psnr_novel", "ssim_back", "chamfer")
        ]
        rows.append(f"| {a} | " + " | ".join(cells) + " |")
    times = {k: float(np.mean([per[s]["time_s"][k] for s in seeds])) for k in per[seeds[0]]["time_s"]}
    report = (
        "### HGM on ToyHumans\n\n" + "\n".join(rows) + "\n\n"
        f"Training: {cfg.steps} AdamW steps per model (batch {cfg.batch_size}, {cfg.sup_views} supervision views), "
        f"refiner {cfg.refiner_steps} steps. Mean train time per arm (s): "
        + ", ".join(f"{k} {v:.1f}" for k, v in times.items())
        + ".\n\nFigure: columns = test subjects; rows = input (front), GT back, image-only back, dual back, "
        "two-view (refined back) back.\n\nDeviations: procedural capsule bodies instead of scans + SMPL-X; dense voxel Conv3d instead of a sparse "
        "CNN; point-wise fusion head instead of MixNet; LPIPS omitted; a small conditional U-Net refiner instead of "
        "ControlNet-tile + SD 1.5; body refinement (E3) not run.\n"
    )
    return RunResult(
        seeds=seeds,
        metrics=metrics,
        claims=claims,
        per_seed=per,
        figures=[fig] if fig.exists() else [],
        report_md=report,
    )
