"""FreeVS-tiny: a pseudo-image-conditioned diffusion model with EDM preconditioning (FreeVS §3.3).

The paper fine-tunes Stable Video Diffusion: per frame, the network input is ``concat[c_in·x_σ, E(p + σ_aug·ε)]``
(E = a pseudo-image encoder replacing SVD's image latent), a CLIP embedding of one real reference frame is the
global context, the pseudo latent and the reference embedding are each dropped with p = 0.2 in training, and
sampling uses classifier-free guidance 2.0. Here the same conditioning drives a small pixel-space model built from
``diffusers`` parts: ``UNet2DModel`` (the reference embedding enters through its class-embedding slot, added to the
time embedding), ``EDMEulerScheduler`` with ``sigma_data = 1`` and v-prediction (exactly the paper's c_skip, c_out,
c_in, c_noise), plus a temporal convolution across the frames of a clip. :func:`svd_unet` builds the paper's
latent-space ``UNetSpatioTemporalConditionModel`` (8 input channels) for GPU users with local weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..common.fields import bounded, check_fields


@dataclass(frozen=True)
class EDMConfig:
    """EDM preconditioning and noise distribution. ``sigma_data = 1`` gives the paper's (SVD's) formulas; the
    training noise ln σ ~ N(p_mean, p_std²) uses EDM's pixel-space defaults (−1.2, 1.2) instead of SVD's latent-
    space (0.7, 1.6)."""

    sigma_data: float = bounded(1.0, lo=0, lo_open=True)
    p_mean: float = bounded(-1.2)
    p_std: float = bounded(1.2, lo=0, lo_open=True)
    sigma_min: float = bounded(0.002, lo=0, lo_open=True)
    sigma_max: float = bounded(80.0, lo=0, lo_open=True)
    pseudo_noise_mean: float = bounded(-3.0)  # σ_aug = exp(N(−3, 0.5²)) in training
    pseudo_noise_std: float = bounded(0.5, lo=0, lo_open=True)
    pseudo_noise_infer: float = bounded(0.02, lo=0)
    # condition dropout, pseudo and reference independently
    drop_prob: float = bounded(0.2, lo=0, hi=1, hi_open=True)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the rule across fields
        if self.sigma_min >= self.sigma_max:
            raise ValueError(f"sigma_min must be < sigma_max = {self.sigma_max}, got {self.sigma_min}")

    def scheduler(self):
        from diffusers import EDMEulerScheduler

        return EDMEulerScheduler(
            sigma_min=self.sigma_min,
            sigma_max=self.sigma_max,
            sigma_data=self.sigma_data,
            prediction_type="v_prediction",
        )


def _check_sigma(sigma, sigma_data, validate: bool) -> None:
    if (
        isinstance(sigma_data, bool)
        or not isinstance(sigma_data, (int, float))
        or not 0 < sigma_data < math.inf
    ):
        raise ValueError(f"sigma_data must be a finite number > 0, got {sigma_data!r}")
    if not isinstance(sigma, torch.Tensor):
        raise ValueError(f"sigma must be a torch.Tensor of noise levels, got {type(sigma).__name__}")
    if validate and not ((sigma > 0) & torch.isfinite(sigma)).all():
        raise ValueError("sigma must be finite and > 0 (noise levels); got a value <= 0, NaN or inf")


def precondition(
    sigma: torch.Tensor, sigma_data: float = 1.0, validate: bool = True
) -> tuple[torch.Tensor, ...]:
    """(c_skip, c_out, c_in, c_noise) of EDM with v-prediction: σ_d²/(σ²+σ_d²), −σσ_d/√(σ²+σ_d²), 1/√(σ²+σ_d²),
    ln(σ)/4 — for σ_d = 1 exactly the paper's 1/(σ²+1), −σ/√(σ²+1), 1/√(σ²+1), ln(σ)/4. ``validate=False``
    skips the σ > 0 check (a device sync) for internal callers."""
    _check_sigma(sigma, sigma_data, validate)
    s2 = sigma**2 + sigma_data**2
    return sigma_data**2 / s2, -sigma * sigma_data / s2.sqrt(), 1.0 / s2.sqrt(), 0.25 * sigma.log()


def loss_weight(sigma: torch.Tensor, sigma_data: float = 1.0, validate: bool = True) -> torch.Tensor:
    """λ(σ) = (σ² + σ_d²) / (σ σ_d)² — the paper's (σ² + 1)/σ²."""
    _check_sigma(sigma, sigma_data, validate)
    return (sigma**2 + sigma_data**2) / (sigma * sigma_data) ** 2


class TemporalConv(nn.Module):
    """Residual 1-D convolution over the frames of a clip (zero-initialised: starts as the identity)."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv3d(channels, channels, (3, 1, 1), padding=(1, 0, 0))
        nn.init.zeros_(self.conv.weight)
        nn.init.zeros_(self.conv.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C, H, W)
        return x + self.conv(x.transpose(1, 2)).transpose(1, 2)


class FreeVSTiny(nn.Module):
    """Denoiser network F of D(x; σ) = c_skip x + c_out F(c_in x ⊕ E(p), c_noise, ref)."""

    def __init__(
        self, channels: tuple[int, ...] = (16, 32, 64), cond_channels: int = 8, ref_dim: int | None = None
    ):
        super().__init__()
        from diffusers import UNet2DModel

        if (
            not isinstance(channels, (tuple, list))
            or len(channels) < 2
            or any(isinstance(c, bool) or not isinstance(c, int) or c < 8 or c % 8 for c in channels)
        ):
            raise ValueError(f"channels must have >= 2 levels, each a multiple of 8, got {channels}")
        if isinstance(cond_channels, bool) or not isinstance(cond_channels, int) or cond_channels < 1:
            raise ValueError(f"cond_channels must be a positive int, got {cond_channels!r}")
        if ref_dim is not None and (isinstance(ref_dim, bool) or not isinstance(ref_dim, int) or ref_dim < 1):
            raise ValueError(f"ref_dim must be None or a positive int, got {ref_dim!r}")
        temb = channels[0] * 4
        self.encoder = nn.Sequential(  # E: pseudo-image encoder (pixel space, same resolution)
            nn.Conv2d(3, 16, 3, padding=1),
            nn.SiLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.SiLU(),
            nn.Conv2d(16, cond_channels, 3, padding=1),
        )
        self.temporal_in = TemporalConv(cond_channels)
        self.ref = nn.Sequential(  # stand-in for the CLIP image embedding of the reference frame
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.SiLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.SiLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, ref_dim or temb),
        )
        self.unet = UNet2DModel(
            in_channels=3 + cond_channels,
            out_channels=3,
            block_out_channels=tuple(channels),
            layers_per_block=1,
            down_block_types=("DownBlock2D",) * len(channels),
            up_block_types=("UpBlock2D",) * len(channels),
            norm_num_groups=8,
            class_embed_type="identity",
        )
        self.temporal_out = TemporalConv(3)

    def forward(
        self,
        x_in: torch.Tensor,  # (B, T, 3, H, W), already scaled by c_in
        c_noise: torch.Tensor,  # (B,)
        pseudo: torch.Tensor,  # (B, T, 3, H, W) in [−1, 1], holes = black (−1)
        ref: torch.Tensor,  # (B, 3, H, W)
        keep_pseudo: torch.Tensor | None = None,  # (B,) 1 = keep, 0 = dropped
        keep_ref: torch.Tensor | None = None,
    ) -> torch.Tensor:
        B, T = x_in.shape[:2]
        h = self.encoder(pseudo.flatten(0, 1)).unflatten(0, (B, T))
        if keep_pseudo is not None:
            h = h * keep_pseudo.view(B, 1, 1, 1, 1).to(h.dtype)
        h = self.temporal_in(h)
        r = self.ref(ref)
        if keep_ref is not None:
            r = r * keep_ref.view(B, 1).to(r.dtype)
        inp = torch.cat([x_in, h], dim=2).flatten(0, 1)
        # c_noise = ln(σ)/4 ∈ [−1.6, 1.1] for σ ∈ [0.002, 80], mapped affinely onto the positional time
        # embedding's usual range [0, 1000]
        t = (250.0 * c_noise + 500.0).repeat_interleave(T)
        out = self.unet(inp, t, class_labels=r.repeat_interleave(T, dim=0)).sample
        return self.temporal_out(out.unflatten(0, (B, T)))


def _check_clips(pseudo: torch.Tensor, ref: torch.Tensor, x0: torch.Tensor | None = None) -> None:
    if pseudo.dim() != 5 or pseudo.shape[2] != 3:
        raise ValueError(f"pseudo must have shape (B, T, 3, H, W), got {tuple(pseudo.shape)}")
    if x0 is not None and tuple(x0.shape) != tuple(pseudo.shape):
        raise ValueError(
            f"x0 must have shape (B, T, 3, H, W) = pseudo's {tuple(pseudo.shape)}, got {tuple(x0.shape)}"
        )
    B, _, _, H, W = pseudo.shape
    if tuple(ref.shape) != (B, 3, H, W):
        raise ValueError(
            f"ref must have shape {(B, 3, H, W)} (one reference frame per clip), got {tuple(ref.shape)}"
        )


def _draw(fn, shape, gen: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """``fn(shape)`` (``torch.randn`` / ``torch.rand``) drawn on the generator's own device and moved to ``device``:
    a CPU generator drives a CUDA model with the same noise as on the CPU (and is allowed at all: torch refuses a
    CPU generator for a CUDA draw)."""
    where = gen.device if gen is not None else device
    return fn(shape, generator=gen, device=where).to(device)


def edm_loss(
    model: FreeVSTiny,
    x0: torch.Tensor,
    pseudo: torch.Tensor,
    ref: torch.Tensor,
    cfg: EDMConfig,
    gen: torch.Generator,
) -> torch.Tensor:
    """One EDM training loss on clips x0 (B, T, 3, H, W) in [−1, 1], with pseudo-image noise augmentation and
    independent condition dropout."""
    if not isinstance(cfg, EDMConfig):
        raise ValueError(f"cfg must be an EDMConfig, got {type(cfg).__name__}")
    if x0.dim() != 5:
        raise ValueError(f"x0 must have shape (B, T, 3, H, W), got {tuple(x0.shape)}")
    _check_clips(pseudo, ref, x0)
    B = x0.shape[0]
    dev = x0.device
    sigma = (cfg.p_mean + cfg.p_std * _draw(torch.randn, (B,), gen, dev)).exp()
    s = sigma.view(B, 1, 1, 1, 1)
    x_s = x0 + s * _draw(torch.randn, x0.shape, gen, dev)
    s_aug = (cfg.pseudo_noise_mean + cfg.pseudo_noise_std * _draw(torch.randn, (B,), gen, dev)).exp()
    p_in = pseudo + s_aug.view(B, 1, 1, 1, 1) * _draw(torch.randn, pseudo.shape, gen, dev)
    keep_p = (_draw(torch.rand, (B,), gen, dev) >= cfg.drop_prob).float()
    keep_r = (_draw(torch.rand, (B,), gen, dev) >= cfg.drop_prob).float()
    c_skip, c_out, c_in, c_noise = precondition(s, cfg.sigma_data, validate=False)
    D = c_skip * x_s + c_out * model(c_in * x_s, c_noise.view(B), p_in, ref, keep_p, keep_r)
    return (loss_weight(s, cfg.sigma_data, validate=False) * (D - x0) ** 2).mean()


@torch.no_grad()
def sample(
    model: FreeVSTiny,
    pseudo: torch.Tensor,
    ref: torch.Tensor,
    cfg: EDMConfig,
    steps: int = 18,
    guidance: float = 2.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Generate clips (B, T, 3, H, W) in [−1, 1] with diffusers' EDM Euler sampler (Karras σ schedule) and
    classifier-free guidance: F_u + g (F_c − F_u), the unconditional branch with both conditions zeroed."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}")
    if isinstance(guidance, bool) or not isinstance(guidance, (int, float)) or not math.isfinite(guidance):
        raise ValueError(f"guidance must be a finite number (CFG scale), got {guidance!r}")
    if not isinstance(cfg, EDMConfig):
        raise ValueError(f"cfg must be an EDMConfig, got {type(cfg).__name__}")
    _check_clips(pseudo, ref)
    sched = cfg.scheduler()
    sched.set_timesteps(steps, device=pseudo.device)
    B = pseudo.shape[0]
    x = _draw(torch.randn, pseudo.shape, generator, pseudo.device) * sched.init_noise_sigma
    p_in = pseudo + cfg.pseudo_noise_infer * _draw(torch.randn, pseudo.shape, generator, pseudo.device)
    ones, zeros = torch.ones(B, device=pseudo.device), torch.zeros(B, device=pseudo.device)
    for t in sched.timesteps:
        x_in = sched.scale_model_input(x, t)
        c_noise = t.expand(B).float()
        if guidance == 1.0:
            out = model(x_in, c_noise, p_in, ref, ones, ones)
        else:
            both = model(
                torch.cat([x_in, x_in]),
                torch.cat([c_noise, c_noise]),
                torch.cat([p_in, p_in]),
                torch.cat([ref, ref]),
                torch.cat([ones, zeros]),
                torch.cat([ones, zeros]),
            )
            f_c, f_u = both[:B], both[B:]
            out = f_u + guidance * (f_c - f_u)
        x = sched.step(out, t, x).prev_sample
    return x.clamp(-1, 1)


def svd_unet(
    block_out_channels: tuple[int, ...] = (64, 128, 256, 256),
    in_channels: int = 8,
    cross_attention_dim: int = 1024,
):
    """The paper's backbone: a ``UNetSpatioTemporalConditionModel`` with 8 input channels (noisy latent ⊕ pseudo
    latent), from a reduced config; load SVD-xt weights into it with ``from_pretrained`` when you have them."""
    from diffusers import UNetSpatioTemporalConditionModel

    for name, v in (("in_channels", in_channels), ("cross_attention_dim", cross_attention_dim)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if len(block_out_channels) < 1 or any(
        isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in block_out_channels
    ):
        raise ValueError(
            f"block_out_channels must be a non-empty tuple of positive ints, got {block_out_channels!r}"
        )
    n = len(block_out_channels)
    return UNetSpatioTemporalConditionModel(
        in_channels=in_channels,
        out_channels=4,
        block_out_channels=tuple(block_out_channels),
        layers_per_block=1,
        down_block_types=("CrossAttnDownBlockSpatioTemporal",) * (n - 1) + ("DownBlockSpatioTemporal",),
        up_block_types=("UpBlockSpatioTemporal",) + ("CrossAttnUpBlockSpatioTemporal",) * (n - 1),
        cross_attention_dim=cross_attention_dim,
        num_attention_heads=tuple(max(1, c // 64) for c in block_out_channels),
    )


def to_unit(x: torch.Tensor) -> torch.Tensor:
    """[−1, 1] → [0, 1]."""
    return (x + 1) / 2


def from_unit(x: torch.Tensor) -> torch.Tensor:
    return x * 2 - 1


def downsample_ref(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)
