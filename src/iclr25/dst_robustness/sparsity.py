"""Dynamic sparse training (DST): binary masks, ERK allocation, prune/regrow schedules.

One engine, :class:`DynamicSparseTraining`, covers the four DST methods of the paper's unified framework
(Sec. 3.2): SET, RigL, MEST and GraNet. It plugs into any ``nn.Module`` + ``torch.optim`` optimiser, like
rigl-torch's ``RigLScheduler``: call ``engine.step()`` *instead of* ``optimizer.step()`` after
``loss.backward()``.

Training-loop contract (gradient clipping, AMP, checkpoints, DDP)::

    loss.backward()                      # or scaler.scale(loss).backward()
    # scaler.unscale_(optimizer)         # AMP only, before clipping
    engine.mask_gradients()              # grads of inactive weights -> 0 (dense grads kept for RigL regrow)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # now sees the sparse model's gradient norm
    engine.step(scaler)                  # scaler=None without AMP; with AMP a skipped (inf/NaN) step changes
    # scaler.update()                    # neither weights, masks nor the step counter

``mask_gradients`` is explicit rather than a ``Tensor.register_hook`` because RigL/GraNet regrow by the *dense*
gradient of the update step; a backward hook would destroy it. ``step`` masks the gradients itself too, so
calling ``mask_gradients`` is only needed before something that reads ``.grad`` (clipping, logging).
Checkpoints: ``engine.state_dict()`` / ``engine.load_state_dict()`` hold the masks, the step counter, the
generator and the history; build model, optimiser and engine first, then load the model, optimiser and engine
states (loading the model *before* building the engine lets the new engine's initial masks zero trained weights;
``load_state_dict`` warns when it sees that). Under DDP give every rank the same ``seed``: masks are drawn from
the engine's generator and regrow uses the all-reduced gradient, so every rank keeps identical masks.

Sparsity is simulated with masks (as in every public DST code base): each masked weight ``W_l`` (all
conv / linear weights, i.e. 2-D and 4-D parameters; biases and BN stay dense) has a boolean mask ``M_l``;
after every optimiser step ``W_l ← W_l ⊙ M_l`` and the optimiser state (momentum, Adam moments) of inactive
entries is zeroed. Because inactive weights are exactly 0 in the forward pass, ``W_l.grad`` after
``backward`` *is* the dense gradient ``∂L/∂W`` that RigL/GraNet regrow by; no hooks are needed.

Topology update every ``ΔT`` optimiser steps while ``t ≤ T_end``:

* drop fraction (cosine decay, RigL Eq. 1):  ``p_t = p_0/2 · (1 + cos(π t / T_end))``
* drop ``k_l = ⌊p_t · nnz_l⌋`` active weights with the smallest ``|w|`` (magnitude drop for every method,
  as in the paper's unified framework; ⌊·⌋ as in RigL/rigl-torch),
* regrow ``k_l`` among the inactive positions (just-dropped ones included, as in RigL): uniformly at
  random (SET, MEST_r, GraNet_r) or the largest ``|∂L/∂w|`` (RigL, MEST_g, GraNet_g). New weights are 0
  and their optimiser state is reset to 0. ``nnz_l`` is preserved exactly.

MEST (soft memory bound, an interpretation of the official ``update_mask``): the net trains at the upper
bound ``d_up = (1 + b)·d`` (``b = 0.1``); each update prunes every layer to ``⌊n_l(1 − p_t)⌋`` by the score
``|w| + λ|g|`` and regrows to ``n_up_l``; at ``T_end`` one final magnitude prune brings each layer to
``n_l``.

GraNet: starts at ``d_init = 0.8`` (ERK) and prunes globally by magnitude, at every ``ΔT`` between
``t_0`` and ``t_f``, to the cubic schedule
``s_t = (1 − d_init) + (d_init − d)·[1 − (1 − (t − t_0)/(t_f − t_0))³]``, plus the drop/regrow
"neuroregeneration" step above at the same ``ΔT``. At the first step ``t ≥ t_f`` one global magnitude prune to
exactly ``round(d·Σ N_l)`` weights ends the schedule at the target even when no ``ΔT`` update lands on ``t_f``.

Initial masks choose exactly ``n_l = round(d_l · N_l)`` positions uniformly at random per layer (the RigL
code's exact-count choice, not GraNet's i.i.d. Bernoulli), from the engine's own ``torch.Generator`` so that
sparsity never shifts the global / data-order RNG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..common.fields import bounded, check_fields

METHODS = ("set", "rigl", "mest", "granet")
DEFAULT_REGROW = {"set": "random", "rigl": "gradient", "mest": "random", "granet": "gradient"}
DISTRIBUTIONS = ("erk", "uniform")


# ----------------------------------------------------------------------------------------------------
# Layer-wise density allocation
# ----------------------------------------------------------------------------------------------------
def erk_densities(shapes: Sequence[Sequence[int]], density: float) -> tuple[list[float], float]:
    """Erdős–Rényi-Kernel densities ``d_l = min(1, ε · Σ shape_l / Π shape_l)``.

    ``ε`` solves ``Σ_l d_l n_l = d · Σ_l n_l``; a layer whose ``d_l`` would exceed 1 is made dense and ``ε`` is
    re-solved over the remaining layers until none exceeds 1 (RigL's ``erdos_renyi_kernel``).
    Σ shape = n_out + n_in + k_h + k_w for a conv, n_out + n_in for a linear layer.

    Returns ``(densities, ε)``.
    """
    if not 0.0 < density <= 1.0:
        raise ValueError(f"density must be in (0, 1], got {density!r}")
    if len(shapes) == 0:
        raise ValueError("shapes must hold at least one layer shape, got an empty sequence")
    n = [math.prod(s) for s in shapes]
    raw = [sum(s) / math.prod(s) for s in shapes]  # Σ shape_l / Π shape_l
    dense: set[int] = set()
    total = sum(n)
    eps = 0.0
    while True:
        # Σ_{sparse} ε raw_l n_l = d·Σ n − Σ_{dense} n_l
        budget = density * total - sum(n[i] for i in dense)
        denom = sum(raw[i] * n[i] for i in range(len(n)) if i not in dense)
        eps = budget / denom if denom > 0 else 0.0
        over = [i for i in range(len(n)) if i not in dense and eps * raw[i] > 1.0]
        if not over:
            break
        dense.update(over)
        if len(dense) == len(n):
            break
    dens = [1.0 if i in dense else eps * raw[i] for i in range(len(n))]
    return dens, eps


def uniform_densities(shapes: Sequence[Sequence[int]], density: float) -> list[float]:
    """The same density ``d`` in every layer."""
    if not 0.0 < density <= 1.0:
        raise ValueError(f"density must be in (0, 1], got {density!r}")
    return [float(density)] * len(shapes)


# ----------------------------------------------------------------------------------------------------
# Schedules
# ----------------------------------------------------------------------------------------------------
def drop_fraction(t: int, p0: float, t_end: int) -> float:
    """Cosine-decayed drop fraction ``p_t = p_0/2 · (1 + cos(π t / T_end))`` (0 after ``T_end``)."""
    if t > t_end or t_end <= 0:
        return 0.0
    return p0 / 2.0 * (1.0 + math.cos(math.pi * t / t_end))


def drop_count(nnz: int, t: int, p0: float, t_end: int) -> int:
    """``k = ⌊p_t · nnz⌋`` weights dropped (and regrown) in a layer with ``nnz`` active weights."""
    return int(drop_fraction(t, p0, t_end) * nnz)


def granet_density(t: int, d_init: float, d_final: float, t0: int, tf: int) -> float:
    """Density ``1 − s_t`` of GraNet's cubic gradual-pruning schedule (Zhu & Gupta 2017).

    ``s_t = (1 − d_init) + (d_init − d)·[1 − (1 − (t − t_0)/(t_f − t_0))³]`` for ``t_0 ≤ t ≤ t_f``.
    """
    if t <= t0:
        return d_init
    if t >= tf:
        return d_final
    frac = (t - t0) / (tf - t0)
    s = (1.0 - d_init) + (d_init - d_final) * (1.0 - (1.0 - frac) ** 3)
    return 1.0 - s


# ----------------------------------------------------------------------------------------------------
# The engine
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DSTConfig:
    """Hyper-parameters of one DST method (defaults: GraNet/ITOP CIFAR code base and the paper).

    ``delta_t``: ΔT, optimiser steps between topology updates; ``p0``: initial drop fraction; ``t_end_frac``:
    T_end as a fraction of training (RigL: 0.75); ``regrow``: ``random``/``gradient`` (None = method default);
    ``soft_bound``: MEST's memory-bound slack (d_up = (1+b)·d); ``mest_lambda``: λ in MEST's removal score
    |w| + λ|g|; ``init_density``: GraNet's d_init; ``granet_t0_frac``/``granet_tf_frac``: t_0, t_f of the
    cubic schedule as fractions of training (GraNet CIFAR code: epochs 0 → 110 of 160); ``exclude``: names of
    parameters kept dense.
    """

    method: str = bounded("set", choices=METHODS)
    sparsity: float = bounded(0.5, lo=0, hi=1, hi_open=True)
    distribution: str = bounded("erk", choices=DISTRIBUTIONS)
    delta_t: int = bounded(1000, lo=1)
    p0: float = bounded(0.5, lo=0, hi=1)
    t_end_frac: float = bounded(0.75, lo=0, hi=1, lo_open=True)
    regrow: str | None = bounded(None, choices=("random", "gradient"), optional=True)
    soft_bound: float = bounded(0.1, lo=0)
    mest_lambda: float = 0.0
    init_density: float = bounded(0.8, lo=0, hi=1, lo_open=True)
    granet_t0_frac: float = bounded(0.0, lo=0, hi=1)
    granet_tf_frac: float = bounded(110 / 160, lo=0, hi=1)
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the rule across fields
        if not self.granet_t0_frac < self.granet_tf_frac:
            raise ValueError(
                f"need 0 <= granet_t0_frac < granet_tf_frac <= 1, got {self.granet_t0_frac!r}, {self.granet_tf_frac!r}"
            )

    @property
    def regrow_mode(self) -> str:
        return self.regrow or DEFAULT_REGROW[self.method]

    @property
    def density(self) -> float:
        return 1.0 - self.sparsity


def sparsifiable_parameters(model: nn.Module, exclude: Sequence[str] = ()) -> list[tuple[str, nn.Parameter]]:
    """Every conv (4-D) and linear (2-D) weight of ``model`` not named in ``exclude``."""
    return [(n, p) for n, p in model.named_parameters() if p.dim() in (2, 4) and n not in set(exclude)]


class DynamicSparseTraining:
    """Masks + topology updates around any model and optimiser (call :meth:`step` instead of ``optimizer.step``).

    Parameters
    ----------
    model, optimizer: the network and its optimiser (state such as momentum is masked too).
    cfg: :class:`DSTConfig`.
    total_steps: number of optimiser steps of the whole run (T); T_end = ⌊t_end_frac · T⌋.
    seed: seed of the engine's own generator (mask init and random regrow).
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        cfg: DSTConfig,
        total_steps: int,
        seed: int = 0,
    ):
        if not isinstance(total_steps, int) or total_steps < 1:
            raise ValueError(f"total_steps must be an int >= 1, got {total_steps!r}")
        self.model, self.optimizer, self.cfg = model, optimizer, cfg
        self.total_steps = total_steps
        self.t_end = int(cfg.t_end_frac * total_steps)
        self.granet_t0 = int(cfg.granet_t0_frac * total_steps)
        self.granet_tf = int(cfg.granet_tf_frac * total_steps)
        self.t = 0
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(int(seed))
        self.named = sparsifiable_parameters(model, cfg.exclude)
        if not self.named:
            raise ValueError("model has no 2-D or 4-D weights to sparsify")
        self.params = [p for _, p in self.named]
        shapes = [tuple(p.shape) for p in self.params]
        self.sizes = [p.numel() for p in self.params]
        d = cfg.density
        alloc = erk_densities if cfg.distribution == "erk" else uniform_densities
        dens = alloc(shapes, d)
        self.densities = list(dens[0] if isinstance(dens, tuple) else dens)
        # target per-layer counts n_l at the final density d
        self.target_counts = [int(round(dl * n)) for dl, n in zip(self.densities, self.sizes)]
        if cfg.method == "mest":
            # upper bound n_up_l = (1+b)·n_l, capped at N_l
            init_counts = [
                min(n, int(round((1.0 + cfg.soft_bound) * c))) for c, n in zip(self.target_counts, self.sizes)
            ]
        elif cfg.method == "granet":
            d0 = max(cfg.init_density, d)
            d0s = alloc(shapes, d0)
            d0s = list(d0s[0] if isinstance(d0s, tuple) else d0s)
            init_counts = [int(round(x * n)) for x, n in zip(d0s, self.sizes)]
        else:
            init_counts = list(self.target_counts)
        self.upper_counts = init_counts if cfg.method == "mest" else list(self.target_counts)
        self.all_dense = all(c == n for c, n in zip(init_counts, self.sizes)) and d >= 1.0
        self._mest_final_done = False
        self._granet_final_done = False
        self._dense_grads: list[torch.Tensor] | None = None  # kept by mask_gradients for the coming update
        self.history: list[dict] = []  # one record per topology change
        self.masks: list[torch.Tensor] = []
        for p, c in zip(self.params, init_counts):
            m = torch.zeros(p.numel(), dtype=torch.bool, device=p.device)
            if c >= p.numel():
                m[:] = True
            else:
                idx = torch.randperm(p.numel(), generator=self.generator)[:c].to(p.device)
                m[idx] = True
            self.masks.append(m.view_as(p))
        self.apply_masks()

    # -- bookkeeping ---------------------------------------------------------------------------
    def nnz(self) -> list[int]:
        """Active weights per masked layer."""
        return [int(m.sum()) for m in self.masks]

    def density(self) -> float:
        """Global density Σ nnz_l / Σ N_l over the masked layers."""
        return sum(self.nnz()) / sum(self.sizes)

    def layer_densities(self) -> list[float]:
        return [c / n for c, n in zip(self.nnz(), self.sizes)]

    @torch.no_grad()
    def apply_masks(self) -> None:
        """``W ← W ⊙ M`` and zero the optimiser state (momentum, moments) of inactive weights."""
        for p, m in zip(self.params, self.masks):
            p.mul_(m)
            for v in self.optimizer.state.get(p, {}).values():
                if torch.is_tensor(v) and v.shape == p.shape:
                    v.mul_(m)

    @torch.no_grad()
    def _reset(self, p: torch.Tensor, positions: torch.Tensor) -> None:
        """New connections start at 0 with zero optimiser state (``positions``: flat indices)."""
        p.view(-1)[positions] = 0.0
        for v in self.optimizer.state.get(p, {}).values():
            if torch.is_tensor(v) and v.shape == p.shape:
                v.view(-1)[positions] = 0.0

    def is_update_step(self, t: int) -> bool:
        return (not self.all_dense) and t % self.cfg.delta_t == 0 and t <= self.t_end

    # -- the training-step hook ----------------------------------------------------------------
    def _needs_dense_grads(self, t: int) -> bool:
        return self.is_update_step(t) and (self.cfg.regrow_mode == "gradient" or self.cfg.mest_lambda > 0)

    @torch.no_grad()
    def mask_gradients(self) -> None:
        """Zero the gradients of inactive weights now (call after ``backward``, before ``clip_grad_norm_``).

        If the coming :meth:`step` is a topology update that regrows by gradient, the dense gradient is kept
        first (it is what RigL/GraNet rank inactive positions by). Idempotent; :meth:`step` calls it too.
        """
        self._mask_gradients(self.t + 1)

    @torch.no_grad()
    def _mask_gradients(self, coming_t: int) -> None:
        if self.all_dense:
            return
        if self._dense_grads is None and self._needs_dense_grads(coming_t):
            self._dense_grads = [
                torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in self.params
            ]
        for p, m in zip(self.params, self.masks):
            if p.grad is not None:
                p.grad.mul_(m)

    def _grads_finite(self) -> bool:
        """All optimiser gradients finite (one device sync, not one per parameter)."""
        flags = [
            torch.isfinite(p.grad).all()
            for group in self.optimizer.param_groups
            for p in group["params"]
            if p.grad is not None
        ]
        return bool(torch.stack([f.to(flags[0].device) for f in flags]).all()) if flags else True

    def step(self, scaler: torch.amp.GradScaler | None = None) -> bool:
        """Masked optimiser step, then (every ΔT steps) a topology update. Returns True when masks changed.

        ``scaler``: a ``torch.amp.GradScaler`` for mixed precision. The gradients are unscaled (unless the
        caller already called ``scaler.unscale_``), masked, and ``scaler.step(optimizer)`` is called; when they
        hold inf/NaN the scaler skips the optimiser step and the engine skips everything else too (no mask
        change, no step count, no topology update). Call ``scaler.update()`` afterwards as usual.
        """
        if scaler is not None:
            if not isinstance(scaler, torch.amp.GradScaler):
                raise ValueError(
                    f"scaler must be a torch.amp.GradScaler or None, got {type(scaler).__name__}"
                )
            if scaler.is_enabled():
                try:
                    scaler.unscale_(self.optimizer)
                except RuntimeError as e:  # the caller unscaled already (e.g. to clip): fine
                    if "already been called" not in str(e):
                        raise
                if not self._grads_finite():  # overflow: the scaler will skip the step; so do we
                    self._dense_grads = None
                    scaler.step(self.optimizer)  # records the skip for scaler.update()
                    return False
        self.t += 1
        t = self.t
        if self.all_dense:  # sparsity 0: plain dense training, no RNG consumed, no mask arithmetic
            self._optimizer_step(scaler)
            return False
        update = self.is_update_step(t)
        self._mask_gradients(t)  # keeps the dense gradient first when this is a gradient-regrow update
        grads, self._dense_grads = self._dense_grads, None
        self._optimizer_step(scaler)
        self.apply_masks()
        changed = False
        if update:
            self.topology_update(t, grads)
            changed = True
        if self.cfg.method == "mest" and not self._mest_final_done and t >= self.t_end:
            self._prune_to_counts(self.target_counts, None)  # final prune to exactly d
            self._mest_final_done = True
            self.history.append({"t": t, "kind": "mest_final", "nnz": self.nnz()})
            changed = True
        if self.cfg.method == "granet" and not self._granet_final_done and t >= self.granet_tf:
            # the cubic schedule ends at d at t_f; when no ΔT update lands on t_f the last scheduled prune left
            # the net denser than d, so prune globally to exactly round(d·ΣN_l) here (a no-op when it did land)
            pruned = self.global_magnitude_prune(int(round(self.cfg.density * sum(self.sizes))))
            self._granet_final_done = True
            self.history.append({"t": t, "kind": "granet_final", "granet_pruned": pruned, "nnz": self.nnz()})
            changed = changed or pruned > 0
        return changed

    def _optimizer_step(self, scaler: torch.amp.GradScaler | None) -> None:
        if scaler is not None and scaler.is_enabled():
            scaler.step(self.optimizer)
        else:
            self.optimizer.step()

    # -- topology ------------------------------------------------------------------------------
    @torch.no_grad()
    def topology_update(self, t: int, grads: list[torch.Tensor] | None = None) -> dict:
        """One prune/regrow update at step ``t`` (see the module docstring for each method)."""
        cfg = self.cfg
        rec: dict = {"t": t, "kind": cfg.method, "p_t": drop_fraction(t, cfg.p0, self.t_end)}
        if cfg.method == "granet" and self.granet_t0 <= t <= self.granet_tf:
            d_t = granet_density(
                t, max(cfg.init_density, cfg.density), cfg.density, self.granet_t0, self.granet_tf
            )
            rec["granet_density"] = d_t
            rec["granet_pruned"] = self.global_magnitude_prune(int(round(d_t * sum(self.sizes))))
        if cfg.method == "mest":
            keep = [int(c * (1.0 - rec["p_t"])) for c in self.target_counts]  # ⌊n_l(1 − p_t)⌋
            dropped = self._prune_to_counts(keep, grads)
            grown = [
                self.regrow(i, up - int(self.masks[i].sum()), grads) for i, up in enumerate(self.upper_counts)
            ]
        else:
            dropped, grown = [], []
            for i in range(len(self.params)):
                k = drop_count(int(self.masks[i].sum()), t, cfg.p0, self.t_end)
                dropped.append(self.drop(i, k))
                grown.append(self.regrow(i, k, grads))
        rec["dropped"] = [int(d.numel()) for d in dropped]
        rec["grown"] = [int(g.numel()) for g in grown]
        rec["nnz"] = self.nnz()
        self.history.append(rec)
        return rec

    @torch.no_grad()
    def drop(self, i: int, k: int, grads: list[torch.Tensor] | None = None) -> torch.Tensor:
        """Deactivate the ``k`` active weights of layer ``i`` with the smallest score ``|w| (+ λ|g|)``."""
        m = self.masks[i].view(-1)
        if k <= 0:
            return torch.empty(0, dtype=torch.long, device=m.device)
        score = self.params[i].detach().abs().view(-1).clone()
        if grads is not None and self.cfg.mest_lambda > 0:
            score += self.cfg.mest_lambda * grads[i].abs().view(-1)
        score[~m] = float("inf")
        idx = torch.topk(score, k, largest=False, sorted=False).indices
        m[idx] = False
        self._reset(self.params[i], idx)  # W = 0 and optimiser state = 0 at dropped positions
        return idx

    @torch.no_grad()
    def regrow(self, i: int, k: int, grads: list[torch.Tensor] | None = None) -> torch.Tensor:
        """Activate ``k`` inactive positions of layer ``i``: top ``|∂L/∂w|`` (gradient) or uniform (random)."""
        m = self.masks[i].view(-1)
        if k <= 0:
            return torch.empty(0, dtype=torch.long, device=m.device)
        if self.cfg.regrow_mode == "gradient":
            if grads is None:
                raise ValueError(
                    "gradient regrow needs the dense gradients of the update step, got grads=None"
                )
            score = grads[i].abs().view(-1).clone()
        else:
            score = torch.rand(m.numel(), generator=self.generator).to(m.device)
        score[m] = -float("inf")
        idx = torch.topk(score, k, largest=True, sorted=False).indices
        m[idx] = True
        self._reset(self.params[i], idx)
        return idx

    @torch.no_grad()
    def _prune_to_counts(self, counts: Sequence[int], grads: list[torch.Tensor] | None) -> list[torch.Tensor]:
        out = []
        for i, c in enumerate(counts):
            out.append(self.drop(i, int(self.masks[i].sum()) - int(c), grads))
        self.apply_masks()
        return out

    @torch.no_grad()
    def global_magnitude_prune(self, target_nnz: int) -> int:
        """GraNet's pruning: remove the globally smallest-|w| active weights until Σ nnz = ``target_nnz``."""
        cur = sum(self.nnz())
        k = cur - int(target_nnz)
        if k <= 0:
            return 0
        scores = []
        for p, m in zip(self.params, self.masks):
            s = p.detach().abs().view(-1).clone()
            s[~m.view(-1)] = float("inf")
            scores.append(s)
        flat = torch.cat(scores)
        idx = torch.topk(flat, k, largest=False, sorted=False).indices
        offsets = [0]
        for n in self.sizes:
            offsets.append(offsets[-1] + n)
        for i, m in enumerate(self.masks):
            sel = idx[(idx >= offsets[i]) & (idx < offsets[i + 1])] - offsets[i]
            m.view(-1)[sel] = False
        self.apply_masks()
        return k

    def state_dict(self) -> dict:
        """Masks, step counter, generator state and history (tensors and plain types: ``torch.save``-able and
        loadable with ``torch.load(..., weights_only=True)``). Weights and optimiser state are not included:
        save ``model.state_dict()`` and ``optimizer.state_dict()`` beside it."""
        return {
            "t": self.t,
            "masks": [m.detach().cpu().clone() for m in self.masks],
            "generator": self.generator.get_state(),
            "mest_final_done": self._mest_final_done,
            "granet_final_done": self._granet_final_done,
            "history": [dict(h) for h in self.history],
            "method": self.cfg.method,
            "total_steps": self.total_steps,
            "shapes": [list(p.shape) for p in self.params],
        }

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        """Restore masks, step counter, generator and history, then apply the masks to the weights.

        Build the engine, then load the model's and optimiser's states, then this one (see the module
        docstring). Raises ``ValueError`` when the checkpoint belongs to another model or method.
        """
        if not isinstance(state, dict) or "masks" not in state or "t" not in state:
            raise ValueError(
                "state must be a dict from DynamicSparseTraining.state_dict() (needs 'masks' and 't')"
            )
        masks = state["masks"]
        shapes = [tuple(p.shape) for p in self.params]
        got = [tuple(m.shape) for m in masks]
        if got != shapes:
            raise ValueError(f"state['masks'] shapes {got} do not match the model's masked weights {shapes}")
        for k, want in (("method", self.cfg.method), ("total_steps", self.total_steps)):
            if k in state and state[k] != want:
                raise ValueError(f"checkpoint has {k}={state[k]!r} but this engine has {k}={want!r}")
        t = state["t"]
        if not isinstance(t, int) or t < 0:
            raise ValueError(f"state['t'] must be an int >= 0, got {t!r}")
        new_masks = [m.to(device=p.device, dtype=torch.bool).clone() for m, p in zip(masks, self.params)]
        # weights that the loaded masks keep but the engine's own initial masks zeroed: if they are all exactly 0,
        # the model's trained weights were loaded *before* this engine was built and are lost.
        lost = sum(
            int(((nm & ~om) & (p == 0)).sum()) for nm, om, p in zip(new_masks, self.masks, self.params)
        )
        cand = sum(int((nm & ~om).sum()) for nm, om in zip(new_masks, self.masks))
        if t > 0 and cand > 0 and lost > 0.5 * cand:
            import warnings

            warnings.warn(
                f"{lost} of {cand} weights the checkpoint's masks keep are exactly 0: load the model's state_dict "
                "after building the DynamicSparseTraining engine (its initial masks zero the weights they drop)",
                RuntimeWarning,
                stacklevel=2,
            )
        self.masks = new_masks
        self.t = t
        if "generator" in state:
            self.generator.set_state(state["generator"])
        self._mest_final_done = bool(state.get("mest_final_done", False))
        self._granet_final_done = bool(state.get("granet_final_done", False))
        self.history = [dict(h) for h in state.get("history", [])]
        self._dense_grads = None
        self.apply_masks()
