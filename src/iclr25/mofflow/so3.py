"""Rotations for the SO(3) part of MOFFlow: exp/log maps, geodesics, uniform prior, quaternions.

Batched over any leading dimensions, differentiable (the log map uses ``atan2`` so gradients stay finite at
angle 0), device-agnostic. Paper notation: the geodesic path is ``R_t = R_0 exp(t log(R_0^T R_1))`` and the
rotation "velocity" toward a predicted endpoint is ``log(R_t^T R̂_1)`` (``calc_rot_vf``).
"""

from __future__ import annotations

import torch

_EPS = 1e-7


def hat(v: torch.Tensor) -> torch.Tensor:
    """Skew-symmetric matrix ``[v]_x`` of rotation vectors ``v`` (..., 3) -> (..., 3, 3)."""
    x, y, z = v.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack([o, -z, y, z, o, -x, -y, x, o], dim=-1).reshape(*v.shape[:-1], 3, 3)


def exp_map(v: torch.Tensor) -> torch.Tensor:
    """Rodrigues: ``exp([v]_x) = I + sinθ/θ [v]_x + (1-cosθ)/θ² [v]_x²`` with θ = |v|."""
    theta2 = (v * v).sum(-1, keepdim=True)
    theta = torch.sqrt(theta2.clamp_min(_EPS**2))
    small = theta2 < 1e-8
    a = torch.where(small, 1.0 - theta2 / 6.0, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - theta2 / 24.0, (1.0 - torch.cos(theta)) / theta2.clamp_min(_EPS**2))
    K = hat(v)
    eye = torch.eye(3, dtype=v.dtype, device=v.device).expand(K.shape)
    return eye + a[..., None] * K + b[..., None] * (K @ K)


def log_map(R: torch.Tensor) -> torch.Tensor:
    """Rotation vector ``log(R)`` (..., 3) with angle in [0, π].

    θ = atan2(|s|, (tr R − 1)/2) with ``s = vee(R − Rᵀ)/2 = sinθ·axis``; near θ = π the axis is read from
    ``(R + I)/2 = a aᵀ`` (largest diagonal column), whose sign is arbitrary there.
    """
    s = 0.5 * torch.stack(
        [R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], dim=-1
    )
    c = 0.5 * (R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2] - 1.0)
    sn = torch.sqrt((s * s).sum(-1).clamp_min(_EPS**2))
    theta = torch.atan2(sn, c)
    scale = torch.where(sn > 1e-6, theta / sn, 1.0 + theta**2 / 6.0)
    v = s * scale[..., None]
    # near π: sinθ ≈ 0 but θ ≈ π; recover the axis from the symmetric part
    near_pi = (c < -0.999) & (sn < 1e-3)
    if bool(near_pi.any()):
        B = 0.5 * (R + torch.eye(3, dtype=R.dtype, device=R.device))
        diag = torch.diagonal(B, dim1=-2, dim2=-1)
        k = diag.argmax(-1)
        col = torch.gather(B, -1, k[..., None, None].expand(*k.shape, 3, 1)).squeeze(-1)
        axis = col / torch.sqrt(torch.gather(diag, -1, k[..., None]).clamp_min(_EPS))
        # keep the sign consistent with the (tiny) skew part when it is informative
        sgn = torch.where((axis * s).sum(-1, keepdim=True) < 0, -1.0, 1.0)
        v = torch.where(near_pi[..., None], axis * sgn * theta[..., None], v)
    return v


def rotation_angle(R: torch.Tensor) -> torch.Tensor:
    """Angle θ ∈ [0, π] of rotations (...,3,3)."""
    return log_map(R).norm(dim=-1)


def geodesic(R0: torch.Tensor, R1: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Geodesic interpolation ``R_t = R_0 exp(t · log(R_0ᵀ R_1))``; ``t`` broadcasts against (...)."""
    t = torch.as_tensor(t, dtype=R0.dtype, device=R0.device)
    return R0 @ exp_map(t[..., None] * log_map(R0.transpose(-1, -2) @ R1))


def calc_rot_vf(Rt: torch.Tensor, R1: torch.Tensor) -> torch.Tensor:
    """Rotation vector of the body-frame velocity from ``R_t`` toward ``R_1``: ``log(R_tᵀ R_1)``."""
    return log_map(Rt.transpose(-1, -2) @ R1)


def quat_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """Unit quaternions (..., 4) in (w, x, y, z) order -> rotation matrices (normalises first)."""
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(_EPS)
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(*q.shape[:-1], 3, 3)  # fmt: skip


def uniform_so3(
    shape: tuple[int, ...], generator: torch.Generator | None = None, dtype=torch.float32, device="cpu"
) -> torch.Tensor:
    """Haar-uniform rotations: normalised 4-d Gaussian quaternions (same law as scipy ``Rotation.random``)."""
    q = torch.randn(*shape, 4, generator=generator, dtype=torch.float64, device=device)
    return quat_to_rotmat(q).to(dtype)
