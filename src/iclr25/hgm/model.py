"""HGM-tiny: image branch, body branch, 3-D fusion and the three supervised Gaussian sets (HGM §3), plus the
back-view refiner used by generate-then-refine.

Structure (paper → here):

* **Image branch** (LGM asymmetric U-Net on RGB + Plücker rays, cross-view attention) → a small U-Net on
  (3 + 6)-channel inputs, cross-view self-attention at the bottleneck, a splat map of ``splat²`` Gaussians per
  view (raw 14-vectors) and decoder features ``F_I``.
* **Body branch**: a learnable code ``e_v`` per body vertex; image features (a small CNN standing in for the
  paper's ResUNet) are projected and bilinearly sampled at each vertex in every input view; multi-head
  attention with ``e_v`` as the query and the per-view samples as keys/values aggregates the views; an MLP maps
  [attended feature, e_v, xyz] to a 14-vector with ``μ_S = X_S + clamp(Δ, ±max_offset)`` → body Gaussians G_S.
* **3-D fusion** (paper: sparse 3-D CNN on voxelised body Gaussians with 4 pyramid levels) → a dense voxel grid
  of body features over [−1, 1]³ (mean-scattered), two Conv3d levels, trilinear sampling at the image
  Gaussians' centres; concatenated with ``F_I`` and ``μ_I`` and mapped by a point-wise network (the paper's
  MixNet is a 1-D conv U-Net over the sequence) to a residual position update and new α, s, q, c → merged G.
* ``use_body=False`` gives the image-only (LGM-like) model with the same image branch and head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from ..common.fields import bounded, check_fields
from .cameras import Camera, plucker_rays, project_points
from .gaussians import GAUSSIAN_DIM, GaussianSet, activate_gaussians, sample_image_features, sample_volume
from .renderer import render_gaussians

__all__ = ["BackViewRefiner", "HGM", "HGMConfig", "HGMOutput", "downscale_camera", "hgm_loss"]


@dataclass(frozen=True)
class HGMConfig:
    """HGM-tiny hyper-parameters (the paper's 'big' model: 512² input, 256² splat map, 32-d vertex codes,
    8 attention heads, 32-channel sparse CNN)."""

    image_size: int = bounded(32, lo=1)
    splat_size: int = bounded(16, lo=1)
    channels: tuple[int, int, int] = bounded((16, 32, 64), lo=4, each=True, length=3)  # multiples of 4
    feat_dim: int = bounded(32, lo=1)
    code_dim: int = bounded(16, lo=1)
    heads: int = bounded(4, lo=1)
    num_vertices: int = bounded(288, lo=1)
    grid: int = bounded(16, lo=1)
    use_body: bool = bounded(True)
    max_offset: float = bounded(0.1, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above (channels element-wise); below: multiples, rules
        if any(c % 4 for c in self.channels):
            raise ValueError(
                f"channels must each be a multiple of 4 (GroupNorm(4, c)); got {self.channels!r}"
            )
        if self.image_size % 4 or self.image_size < 8:
            raise ValueError(f"image_size must be a multiple of 4 and ≥ 8; got {self.image_size}")
        if self.splat_size not in (self.image_size, self.image_size // 2, self.image_size // 4):
            raise ValueError(
                f"splat_size must be image_size, /2 or /4; got {self.splat_size} for {self.image_size}"
            )
        if self.feat_dim % self.heads:
            raise ValueError(f"feat_dim ({self.feat_dim}) must be divisible by heads ({self.heads})")
        if self.grid < 4 or self.grid % 2:
            raise ValueError(f"grid must be an even number ≥ 4; got {self.grid}")


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1),
        nn.GroupNorm(4, cout),
        nn.SiLU(),
        nn.Conv2d(cout, cout, 3, padding=1),
        nn.SiLU(),
    )


class _UNet(nn.Module):
    """Three-level U-Net with cross-view self-attention at the bottleneck (LGM's multi-view attention)."""

    def __init__(self, cin: int, ch: tuple[int, int, int], cout: int, out_level: int, heads: int):
        super().__init__()
        c1, c2, c3 = ch
        self.d1, self.d2, self.d3 = _block(cin, c1), _block(c1, c2), _block(c2, c3)
        self.attn = nn.MultiheadAttention(c3, heads, batch_first=True)
        self.u2 = _block(c3 + c2, c2) if out_level <= 1 else None
        self.u1 = _block(c2 + c1, c1) if out_level == 0 else None
        self.out_level = out_level  # 0: full resolution, 1: half, 2: quarter
        cf = (c1, c2, c3)[out_level]
        self.head = nn.Conv2d(cf, cout, 1)
        self.feat_dim = cf

    def forward(self, x: Tensor, views: int) -> tuple[Tensor, Tensor]:
        h1 = self.d1(x)
        h2 = self.d2(F.avg_pool2d(h1, 2))
        h3 = self.d3(F.avg_pool2d(h2, 2))
        BV, C, H, W = h3.shape
        tok = h3.flatten(2).transpose(1, 2).reshape(BV // views, views * H * W, C)  # attend across all views
        tok = tok + self.attn(tok, tok, tok, need_weights=False)[0]
        h3 = tok.reshape(BV, H * W, C).transpose(1, 2).reshape(BV, C, H, W)
        if self.out_level == 2:
            return self.head(h3), h3
        u2 = self.u2(torch.cat([F.interpolate(h3, scale_factor=2.0), h2], 1))
        if self.out_level == 1:
            return self.head(u2), u2
        u1 = self.u1(torch.cat([F.interpolate(u2, scale_factor=2.0), h1], 1))
        return self.head(u1), u1


@dataclass
class HGMOutput:
    """The merged Gaussians ``merged`` (G), image Gaussians ``image`` (G_I) and body Gaussians ``body`` (G_S, None
    for the image-only model)."""

    merged: GaussianSet
    image: GaussianSet
    body: GaussianSet | None


class HGM(nn.Module):
    """HGM-tiny. ``forward(images (B, V, H, W, 3), camera (V views, shared or per-batch), body_vertices (B, Nv, 3))``."""

    def __init__(self, cfg: HGMConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or HGMConfig()
        level = {cfg.image_size: 0, cfg.image_size // 2: 1, cfg.image_size // 4: 2}[cfg.splat_size]
        self.image_branch = _UNet(9, cfg.channels, GAUSSIAN_DIM, level, cfg.heads)
        fi = self.image_branch.feat_dim
        self.feat_proj = nn.Conv2d(fi, cfg.feat_dim, 1)
        vol_dim = 2 * cfg.feat_dim
        self.head = nn.Sequential(
            nn.Linear(cfg.feat_dim + 3 + GAUSSIAN_DIM + vol_dim, 64),
            nn.SiLU(),
            nn.Linear(64, 64),
            nn.SiLU(),
            nn.Linear(64, GAUSSIAN_DIM),
        )
        nn.init.zeros_(self.head[-1].weight)
        nn.init.zeros_(self.head[-1].bias)
        if cfg.use_body:
            self.body_cnn = nn.Sequential(_block(3, 16), nn.Conv2d(16, cfg.feat_dim, 1))  # ResUNet stand-in
            self.codes = nn.Parameter(torch.randn(cfg.num_vertices, cfg.code_dim) * 0.1)  # e_v
            self.q_proj = nn.Linear(cfg.code_dim + 3, cfg.feat_dim)
            self.kv_proj = nn.Linear(cfg.feat_dim + 6, cfg.feat_dim)
            self.body_attn = nn.MultiheadAttention(cfg.feat_dim, cfg.heads, batch_first=True)
            self.body_mlp = nn.Sequential(
                nn.Linear(cfg.feat_dim + cfg.code_dim + 3, 64),
                nn.SiLU(),
                nn.Linear(64, 64),
                nn.SiLU(),
                nn.Linear(64, GAUSSIAN_DIM),
            )
            self.vol1 = nn.Sequential(nn.Conv3d(cfg.feat_dim, cfg.feat_dim, 3, padding=1), nn.SiLU())
            self.vol2 = nn.Sequential(
                nn.Conv3d(cfg.feat_dim, cfg.feat_dim, 3, stride=2, padding=1), nn.SiLU()
            )
        # Sensible initial Gaussians: small, semi-transparent (LGM initialises similarly through its output conv).
        with torch.no_grad():
            out = self.image_branch.head
            out.weight.mul_(0.1)
            out.bias.zero_()
            out.bias[3] = -1.0  # opacity logit
            out.bias[4:7] = -2.0  # scale → 0.1·softplus(−2) ≈ 0.013
            out.bias[7] = 1.0  # identity rotation

    # --- body branch -------------------------------------------------------------------------------------------
    def _body_branch(self, images: Tensor, camera: Camera, verts: Tensor) -> tuple[Tensor, Tensor]:
        B, V, H, W, _ = images.shape
        cfg = self.cfg
        feats = self.body_cnn(images.reshape(B * V, H, W, 3).permute(0, 3, 1, 2))  # (B·V, F, H, W)
        uv, _ = project_points(verts, camera, validate=False)  # (B, V, Nv, 2)
        samp = sample_image_features(feats, uv.reshape(B * V, -1, 2), W, H).reshape(B, V, -1, cfg.feat_dim)
        dirs = F.normalize(
            camera.centres.unsqueeze(-2) - verts.unsqueeze(1), dim=-1
        )  # (B, V, Nv, 3) view rays
        cen = camera.centres.unsqueeze(-2).expand_as(dirs)
        kv = self.kv_proj(torch.cat([samp, dirs, cen], -1)).permute(0, 2, 1, 3).reshape(-1, V, cfg.feat_dim)
        code = self.codes.unsqueeze(0).expand(B, -1, -1)
        q = self.q_proj(torch.cat([code, verts], -1)).reshape(-1, 1, cfg.feat_dim)
        agg = self.body_attn(q, kv, kv, need_weights=False)[0].reshape(B, -1, cfg.feat_dim)  # (B, Nv, F)
        raw = self.body_mlp(torch.cat([agg, code, verts], -1))
        delta = raw[..., :3].clamp(-cfg.max_offset, cfg.max_offset)
        raw = torch.cat([verts + delta, raw[..., 3:]], -1)  # μ_S = X_S + clamp(Δ)
        return raw, agg

    def _volume(self, centres: Tensor, feats: Tensor) -> list[Tensor]:
        """Mean-scatter per-vertex features into a G³ grid over [−1, 1]³, then a 2-level Conv3d pyramid."""
        B, N, Fd = feats.shape
        G = self.cfg.grid
        idx = ((centres.detach().clamp(-1, 1) + 1) / 2 * (G - 1)).round().long()  # (B, N, 3) as (x, y, z)
        flat = (idx[..., 2] * G + idx[..., 1]) * G + idx[..., 0]  # D ↔ z, H ↔ y, W ↔ x
        vol = feats.new_zeros(B, G**3, Fd).scatter_add(1, flat.unsqueeze(-1).expand(-1, -1, Fd), feats)
        cnt = feats.new_zeros(B, G**3, 1).scatter_add(1, flat.unsqueeze(-1), torch.ones_like(feats[..., :1]))
        vol = (vol / cnt.clamp_min(1)).transpose(1, 2).reshape(B, Fd, G, G, G)
        v1 = self.vol1(vol)
        v2 = self.vol2(v1)
        return [v1, v2]

    def forward(self, images: Tensor, camera: Camera, body_vertices: Tensor | None = None) -> HGMOutput:
        cfg = self.cfg
        if (
            images.dim() != 5
            or images.shape[-1] != 3
            or images.shape[2:4] != (cfg.image_size, cfg.image_size)
        ):
            raise ValueError(
                f"images must have shape (B, V, {cfg.image_size}, {cfg.image_size}, 3); got {tuple(images.shape)}"
            )
        B, V = images.shape[:2]
        if camera.num_views != V:
            raise ValueError(f"camera has {camera.num_views} views but images has V={V}")
        if camera.viewmats.dim() == 3:
            camera = camera.expand(B)
        if cfg.use_body and (body_vertices is None or body_vertices.shape[1:] != (cfg.num_vertices, 3)):
            got = None if body_vertices is None else tuple(body_vertices.shape)
            raise ValueError(
                f"body_vertices must have shape (B, {cfg.num_vertices}, 3) when use_body=True; got {got}"
            )
        # Image branch: RGB + Plücker rays per pixel → splat map (LGM).
        pl = plucker_rays(camera).to(images)  # (B, V, 6, H, W)
        x = torch.cat([images.permute(0, 1, 4, 2, 3), pl], 2).reshape(
            B * V, 9, cfg.image_size, cfg.image_size
        )
        raw_i, feat_i = self.image_branch(x, V)
        S = cfg.splat_size
        raw_i = (
            raw_i.reshape(B, V, GAUSSIAN_DIM, S * S).permute(0, 1, 3, 2).reshape(B, V * S * S, GAUSSIAN_DIM)
        )
        f_i = (
            self.feat_proj(feat_i)
            .reshape(B, V, cfg.feat_dim, S * S)
            .permute(0, 1, 3, 2)
            .reshape(B, V * S * S, -1)
        )
        g_img = activate_gaussians(raw_i)
        mu_i = g_img.means
        g_body = None
        if cfg.use_body:
            raw_s, agg = self._body_branch(images, camera, body_vertices)
            g_body = activate_gaussians(raw_s)
            vols = self._volume(g_body.means, agg)
            vol_feat = torch.cat(
                [sample_volume(v, mu_i) for v in vols], -1
            )  # trilinear at image-Gaussian centres
        else:
            vol_feat = mu_i.new_zeros(B, mu_i.shape[1], 2 * cfg.feat_dim)
        # Fusion head: residual update of the image Gaussians' raw parameters.
        raw_m = raw_i + self.head(torch.cat([f_i, mu_i, raw_i, vol_feat], -1))
        return HGMOutput(activate_gaussians(raw_m), g_img, g_body)


def downscale_camera(camera: Camera, factor: int) -> Camera:
    """The same rig rendering at ``1/factor`` resolution (focal lengths and principal point divided by ``factor``);
    a pixel of the small image covers exactly a ``factor × factor`` block of the full one."""
    if (
        isinstance(factor, bool)
        or not isinstance(factor, int)
        or factor < 1
        or camera.width % factor
        or camera.height % factor
    ):
        raise ValueError(
            f"factor must be a positive int dividing the image size {camera.width}×{camera.height}; got {factor!r}"
        )
    Ks = camera.Ks.clone()
    Ks[..., :2, :] = Ks[..., :2, :] / factor
    return Camera(camera.viewmats, Ks, camera.width // factor, camera.height // factor)


def hgm_loss(
    out: HGMOutput,
    camera: Camera,
    images: Tensor,
    masks: Tensor,
    aux_weight: float = 1.0,
    aux_downscale: int = 1,
) -> tuple[Tensor, dict]:
    """Σ over {G, G_S, G_I} of MSE(rgb) + MSE(alpha, mask) in the supervision views (HGM §3; LPIPS omitted).

    images (B, V, H, W, 3) on white, masks (B, V, H, W), camera with V views. ``aux_downscale`` > 1 renders the
    two auxiliary sets (G_I, G_S) at ``1/aux_downscale`` resolution against box-downsampled targets (a compute
    saving for CPU training; the merged set is always supervised at full resolution).
    """
    if (
        isinstance(aux_weight, bool)
        or not isinstance(aux_weight, (int, float))
        or not 0 <= aux_weight < float("inf")
    ):
        raise ValueError(f"aux_weight must be a finite number >= 0; got {aux_weight!r}")
    if isinstance(aux_downscale, bool) or not isinstance(aux_downscale, int) or aux_downscale < 1:
        raise ValueError(f"aux_downscale must be a positive int; got {aux_downscale!r}")
    V = camera.num_views
    if (
        images.dim() != 5
        or images.shape[1] != V
        or tuple(images.shape[2:]) != (camera.height, camera.width, 3)
    ):
        raise ValueError(
            f"images must have shape (B, {V}, {camera.height}, {camera.width}, 3) to match the camera; "
            f"got {tuple(images.shape)}"
        )
    if tuple(masks.shape) != tuple(images.shape[:-1]):
        raise ValueError(f"masks must have shape {tuple(images.shape[:-1])}; got {tuple(masks.shape)}")
    if aux_downscale != 1:
        small_cam = downscale_camera(camera, aux_downscale)
        B, V, H, W, _ = images.shape
        small_img = F.avg_pool2d(images.reshape(B * V, H, W, 3).permute(0, 3, 1, 2), aux_downscale)
        small_img = small_img.permute(0, 2, 3, 1).reshape(B, V, H // aux_downscale, W // aux_downscale, 3)
        small_mask = F.avg_pool2d(masks.reshape(B * V, 1, H, W), aux_downscale).reshape(
            B, V, H // aux_downscale, W // aux_downscale
        )
    terms = {}
    sets = {"merged": out.merged, "image": out.image}
    if out.body is not None:
        sets["body"] = out.body
    for name, g in sets.items():
        if name != "merged" and aux_downscale != 1:
            r = render_gaussians(*g, small_cam)
            terms[name] = F.mse_loss(r.image, small_img) + F.mse_loss(r.alpha[..., 0], small_mask)
            continue
        r = render_gaussians(*g, camera)
        terms[name] = F.mse_loss(r.image, images) + F.mse_loss(r.alpha[..., 0], masks)
    total = terms["merged"] + aux_weight * sum(v for k, v in terms.items() if k != "merged")
    return total, {k: float(v.detach()) for k, v in terms.items()}


class BackViewRefiner(nn.Module):
    """Conditional back-view enhancer (stands in for the paper's ControlNet-tile + SD 1.5 img2img): a small U-Net
    mapping [coarse back render, horizontally mirrored input view] (6 channels) to a residual-corrected back view."""

    def __init__(self, channels: tuple[int, int, int] = (16, 32, 64)):
        super().__init__()
        self.net = _UNet(6, channels, 3, 0, 4)
        nn.init.zeros_(self.net.head.weight)
        nn.init.zeros_(self.net.head.bias)

    def forward(self, coarse_back: Tensor, front: Tensor) -> Tensor:
        """coarse_back, front: (B, H, W, 3) in [0, 1] → refined back view (B, H, W, 3)."""
        if coarse_back.shape != front.shape or coarse_back.dim() != 4:
            raise ValueError(
                f"coarse_back and front must both be (B, H, W, 3); got {tuple(coarse_back.shape)}, {tuple(front.shape)}"
            )
        x = torch.cat([coarse_back, front.flip(2)], -1).permute(0, 3, 1, 2)
        delta, _ = self.net(x, 1)
        return (coarse_back + delta.permute(0, 2, 3, 1)).clamp(0, 1)
