"""Training losses: intensity regression on pseudo-labels, smoothness, reward, the apex focal loss and IAC.

Paper (ICLR 2025; arXiv 2511.16952): the intensity branch regresses the GIM soft pseudo-labels, the class-aware
apex classification branch is trained on the pseudo-apex frames, and the **Intensity-Aware Contrastive (IAC)
loss** contrasts neutral frames with expression frames of various intensities (:func:`iac_loss`). The terms and
weights below are the released code's (``model.py::CO2.soft_frame_loss`` and ``CO2.criterion``; IAC:
``SupConLossWithWeight``; apex: ``_focal_loss``; KinopioIsAllIn/GIM at 92f5e28).

Paper location: the IAC loss, the intensity branch's GIM supervision and the apex branch are named in the
abstracts of arXiv 2511.16952 (https://arxiv.org/html/2511.16952) and the ICLR 2025 paper; their section and
equation numbers, and the paper's form of the total loss, could not be read (issue #39: only the abstract is in
the stored pages), so none is cited. The MSE / smoothness / reward terms, γ, α, the temperatures and every
weight below are from the released code, not from a paper equation I could check (method card, "Paper
locations cited in the code").

Per video (batch size 1 as in the paper's training):

* negatives N: among frames without a pseudo-label, the K frames with the largest ``1 − a_t``,
  ``K = max(1, min(#unlabelled, #pseudo-expression frames))``;
* intensity: ``MSE(a, y^MaE)`` on ``y^MaE > 0`` + ``MSE(a, y^ME)`` on ``y^ME > 0`` + ``MSE(a, 0)`` on N;
* smoothness ``mean_t |a_{t+1} − a_t|`` (``smooth='signed'`` reproduces the released code's signed mean);
* reward ``−0.4 · mean a on {y^MaE > 0.5} − 0.6 · mean a on {y^ME > 0.5}`` (an empty set contributes 0);
* apex branch (epochs ≥ 5): focal loss with γ = 1, α = 0.90 (MaE) / 0.93 (ME), label smoothing 0.25 on
  negatives, targets 1 on the pseudo-apex frames, 0 on N and within ±6 frames of any frame with soft label > 0.5;
* IAC (intensity-aware contrastive, :func:`iac_loss`) on backbone features;
* total = intensity + 0.1·smooth + reward + apex + λ_IAC·IAC + λ_s·mean(a).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..common.fields import bounded, check_fields
from .pseudo_labels import PseudoLabels


def iac_loss(
    features: torch.Tensor,
    labels: torch.Tensor,
    intensity: torch.Tensor,
    temperature: float = 0.5,
    base_temperature: float = 0.07,
    unit_weights: bool = False,
) -> torch.Tensor:
    """Intensity-Aware Contrastive loss (paper: the IAC loss, named in the abstracts of the ICLR 2025 paper and
    arXiv 2511.16952 — neutral frames contrasted with expression frames of various intensities; § / Eq. not
    confirmed; released code: ``model.py::SupConLossWithWeight``):
    supervised contrastive learning with intensity pair weights.

    ``features``: ``(N, C)`` (not normalised, as in the paper's code); ``labels``: ``(N,)`` 0 = neutral,
    1 = MaE, 2 = ME; ``intensity``: ``(N,)`` pseudo intensity I (0 for neutral frames).
    Weights: ``w_ij = |I_i − I_j|`` for neutral-vs-expression and MaE-vs-ME pairs, ``1 − |I_i − I_j|`` for
    same-expression pairs, 1 for neutral-neutral pairs. With ``z_ij = f_i·f_j/τ`` (row max subtracted)::

        log p_ij = log(w_ij + 1e-6) + z_ij − log(Σ_{k≠i} w_ik exp z_ik + 1e-6)
        L = −(τ/τ_b) · mean_i mean_{j≠i, ℓ_j = ℓ_i} log p_ij

    ``unit_weights=True`` sets every w_ij = 1, which is the SupCon loss of Khosla et al. (2020).
    """
    if features.ndim != 2:
        raise ValueError(f"features must have shape (N, C), got {tuple(features.shape)}")
    n = features.shape[0]
    labels = labels.reshape(-1).to(features.device)
    intensity = intensity.reshape(-1).to(features.device, features.dtype)
    if labels.shape[0] != n or intensity.shape[0] != n:
        raise ValueError(
            f"labels and intensity need N={n} entries, got {labels.shape[0]} and {intensity.shape[0]}"
        )
    if n == 0:
        return features.sum() * 0.0
    if not temperature > 0 or not base_temperature > 0:
        raise ValueError(f"temperatures must be > 0, got {temperature}, {base_temperature}")
    li, lj = labels[:, None], labels[None, :]
    same = (li == lj).float()
    if unit_weights:
        w = torch.ones(n, n, device=features.device, dtype=features.dtype)
    else:
        diff = (intensity[:, None] - intensity[None, :]).abs()
        expr_i, expr_j = li > 0, lj > 0
        cross = (expr_i ^ expr_j) | (expr_i & expr_j & (li != lj))  # neutral vs expression, MaE vs ME
        within = expr_i & expr_j & (li == lj)
        w = torch.where(cross, diff, torch.where(within, 1.0 - diff, torch.ones_like(diff)))
    logits = features @ features.T / temperature
    logits = logits - logits.max(dim=1, keepdim=True).values.detach()
    off = 1.0 - torch.eye(n, device=features.device, dtype=features.dtype)
    pos = same * off
    denom = (torch.exp(logits) * off * w).sum(1, keepdim=True)
    log_prob = torch.log(w + 1e-6) + logits - torch.log(denom + 1e-6)
    mean_pos = (pos * log_prob).sum(1) / (pos.sum(1) + 1e-6)
    return -(temperature / base_temperature) * mean_pos.mean()


def focal_apex_loss(
    q: torch.Tensor, target: torch.Tensor, alpha: float, gamma: float = 1.0, smooth: float = 0.25
):
    """Loss of the paper's class-aware apex classification branch (arXiv 2511.16952, abstract: the branch tells
    MaE from ME from the pseudo-apex frames; § / Eq. and the paper's form of this loss not confirmed; released
    code: ``model.py::_focal_loss``):
    ``−mean_t[α|1−q|^γ·1[y=1]·log q + (1−α)|0.25 − q|^γ·1[y=0]·log(1 − q)]``; frames with y = −1 ignored."""
    pos = (target > 0).float()
    neg = (target == 0).float()
    t = target.clamp(min=0)
    loss = alpha * (t - q).abs() ** gamma * pos * torch.log(q + 1e-5) + (1 - alpha) * (
        t + smooth - q
    ).abs() ** gamma * neg * torch.log(1.0 - q + 1e-5)
    return -loss.mean()


@dataclass(frozen=True)
class LossConfig:
    """Loss weights. λ_IAC = 1.4e-5 and λ_s = 2.5 are the CAS(ME)² values (SAMM: 2e-6 and 0.3).

    Paper location: not confirmed — the values are the released code's (``CO2.criterion``: ``ha`` 2.5 / 0.3;
    ``CO2.soft_frame_loss``: the IAC coefficient), not read from the paper."""

    lambda_iac: float = bounded(1.4e-5, lo=0)
    lambda_sparsity: float = bounded(2.5, lo=0)
    smooth_weight: float = bounded(0.1, lo=0)
    # "abs": mean |Δa| (a smoothness term); "signed": the released code's signed mean of Δa
    smooth: str = bounded("abs", choices=("abs", "signed"))
    reward: tuple[float, float] = (0.4, 0.6)
    apex_alpha: tuple[float, float] = (0.90, 0.93)
    apex_weight: tuple[float, float] = (1.0, 1.8)
    apex_gamma: float = bounded(1.0, lo=0)
    apex_smooth: float = bounded(0.25, lo=0)
    apex_margin: int = bounded(6, lo=0)
    apex_start: int = 5  # apex loss from this epoch on
    iac_temperature: float = 0.5
    iac_base_temperature: float = 0.07

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above

    @classmethod
    def samm(cls, **kw) -> LossConfig:
        return cls(**{"lambda_iac": 2e-6, "lambda_sparsity": 0.3, **kw})


def _masked_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return x[m].mean() if bool(m.any()) else x.sum() * 0.0


def negatives(intensity: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
    """Indices of the K most confident neutral frames among frames without a pseudo-label."""
    lab = soft.sum(-1) > 0
    free = torch.nonzero(~lab).reshape(-1)
    if free.numel() == 0:
        return free
    k = max(1, min(int(free.numel()), int(lab.sum())))
    top = torch.topk((1 - intensity.detach())[free], k=k).indices
    return free[top]


def spotting_loss(
    intensity: torch.Tensor,
    apex: torch.Tensor,
    features: torch.Tensor,
    pl: PseudoLabels,
    itr: int,
    cfg: LossConfig = LossConfig(),
) -> dict[str, torch.Tensor]:
    """All loss terms for one video (released code: ``CO2.soft_frame_loss`` + the sparsity term of
    ``CO2.criterion``). ``intensity`` ``(T,)``, ``apex`` ``(T, 2)``, ``features`` ``(T, C)``.

    Paper location: the total training objective's section / equation in arXiv 2511.16952 is not confirmed;
    the terms and weights here are the released code's."""
    a = intensity.reshape(-1)
    T = a.shape[0]
    y = pl.soft.to(a.device).detach()
    if y.shape != (T, 2):
        raise ValueError(f"pseudo-label soft targets must have shape ({T}, 2), got {tuple(y.shape)}")
    neg = negatives(a, y)
    zero = a.sum() * 0.0
    l_int = zero
    for c in (0, 1):
        m = y[:, c] > 0
        if bool(m.any()):
            l_int = l_int + F.mse_loss(a[m], y[m, c])
    if neg.numel():
        l_int = l_int + (a[neg] ** 2).mean()
    d = a[1:] - a[:-1] if T > 1 else a[:0]
    l_smooth = (d.abs().mean() if cfg.smooth == "abs" else d.mean()) if T > 1 else zero
    l_reward = -cfg.reward[0] * _masked_mean(a, y[:, 0] > 0.5) - cfg.reward[1] * _masked_mean(
        a, y[:, 1] > 0.5
    )
    l_apex = zero
    if itr >= cfg.apex_start:
        near = (y > 0.5).any(dim=1).float()[None, None]
        kernel = torch.ones(1, 1, 2 * cfg.apex_margin + 1, device=a.device)
        near = F.conv1d(near, kernel, padding=cfg.apex_margin).reshape(-1) > 0
        ap = pl.apex.to(a.device)
        for c in (0, 1):
            target = torch.full((T,), -1.0, device=a.device)
            target[near] = 0.0
            target[neg] = 0.0
            target[ap[:, c] > 0] = 1.0
            l_apex = l_apex + cfg.apex_weight[c] * focal_apex_loss(
                apex[:, c], target, cfg.apex_alpha[c], cfg.apex_gamma, cfg.apex_smooth
            )
    l_iac = zero
    if cfg.lambda_iac > 0:
        lab = torch.full((T,), -1, dtype=torch.long, device=a.device)
        lab[neg] = 0
        lab[y[:, 1] > 0.5] = 2
        lab[y[:, 0] > 0.5] = 1  # the later assignment wins, as in the released code
        keep = lab > -1
        inten = y.max(dim=-1).values
        l_iac = iac_loss(
            features[keep], lab[keep], inten[keep], cfg.iac_temperature, cfg.iac_base_temperature
        )
    l_sparse = a.mean()
    total = l_int + cfg.smooth_weight * l_smooth + l_reward + l_apex + cfg.lambda_iac * l_iac
    total = total + cfg.lambda_sparsity * l_sparse
    return {
        "total": total,
        "intensity": l_int.detach(),
        "smooth": l_smooth.detach(),
        "reward": l_reward.detach(),
        "apex": l_apex.detach(),
        "iac": l_iac.detach(),
        "sparsity": l_sparse.detach(),
    }
