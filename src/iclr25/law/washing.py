"""LaW — Large Scale Knowledge Washing (paper §5, Algorithm 1; official ``execute_law`` / ``update_upd_matrix``).

Per edited layer l (in order), with keys K of the facts still to wash and the generic-text covariance C::

    max_Δ ‖Δ K‖²_F   subject to   tr(Δ C Δᵀ) / tr(C) ≤ β

solved by Adam from the MEMIT→EOS initialisation Δ⁰ with β = beta_ratio · tr(Δ⁰CΔ⁰ᵀ)/tr(C), rescaling Δ back onto
the constraint after every step and keeping the best iterate; after each layer the facts the edited model still
answers are re-tested (successive elimination) and only their keys are used at the next layer.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import checks as check
from .covariance import check_covariance
from .evaluation import fact_known
from .facts import Fact, check_facts
from .memit import LamSearch, ZConfig, _cov_for, _memit
from .memories import MemoryLayer, encode_for, fact_keys, resolve_layers

BEST_ITERATE = ("paper", "official")
INITS = ("memit", "random", "zero")


def _check_delta(delta: torch.Tensor, other: torch.Tensor, other_name: str, square: bool) -> None:
    check.matrix("delta", delta)  # a (d, d_k) update, finite
    want_cols = delta.shape[1] if square else None
    try:
        check.matrix(other_name, other, rows=delta.shape[1], cols=want_cols)
    except ValueError as e:
        want = f"({delta.shape[1]}, {delta.shape[1]})" if square else f"({delta.shape[1]}, n)"
        raise ValueError(f"{e} (to match delta {tuple(delta.shape)}: {other_name} {want})") from None


def c_ratio(delta: torch.Tensor, C: torch.Tensor) -> float:
    """``tr(Δ C Δᵀ) / tr(C)``; Δ (d, d_k), C (d_k, d_k) with a positive trace."""
    _check_delta(delta, C, "C", square=True)
    tr = torch.trace(C)
    if not bool(tr > 0):
        raise ValueError(f"C must be a covariance with a positive trace, got tr(C) = {float(tr)!r}")
    return float(((delta @ C) * delta).sum() / torch.trace(C))


def wash_objective(delta: torch.Tensor, K: torch.Tensor) -> float:
    """``‖Δ K‖²_F`` with K (d_k, n)."""
    _check_delta(delta, K, "K", square=False)
    return float((delta @ K).pow(2).sum())


def objective_upper_bound(K: torch.Tensor, C: torch.Tensor, beta: float) -> float:
    """``β·tr(C)·λ_max(C^{-1/2} K Kᵀ C^{-1/2})`` — the constrained maximum of ‖ΔK‖² (paper §5); C must be
    positive definite."""
    check.number("beta", beta, 0.0, open_lo=True)
    check.matrix("C", C)
    check.matrix("C", C, rows=C.shape[1])
    check.matrix("K", K, rows=C.shape[0])
    C = C.double()
    ev, U = torch.linalg.eigh(C)
    if ev[0] <= 0:
        raise ValueError("objective_upper_bound needs a positive-definite covariance C")
    Cih = (U / ev.sqrt()) @ U.t()
    M = Cih @ K.double() @ K.double().t() @ Cih
    return float(beta * torch.trace(C) * torch.linalg.eigvalsh(0.5 * (M + M.t()))[-1])


class _Adam:
    """``torch.optim.Adam``'s CPU update of one tensor (``_single_tensor_adam`` without weight decay or amsgrad),
    transcribed op for op — the same values bit for bit (tested) — with the denominator written into a kept buffer
    instead of two fresh ones per step (the ascent's Δ is 576 × 1,536 float64: the allocations cost as much as the
    arithmetic)."""

    def __init__(
        self, p: torch.Tensor, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ):
        self.p, self.lr, self.eps = p, lr, eps
        self.beta1, self.beta2 = betas
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(p), torch.zeros_like(p)
        self.buf = torch.empty_like(p)
        self.t = 0

    @torch.no_grad()
    def step(self, grad: torch.Tensor) -> None:
        self.t += 1
        step = float(self.t)
        self.exp_avg.lerp_(grad, 1 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
        step_size = self.lr / (1 - self.beta1**step)
        bias_correction2_sqrt = (1 - self.beta2**step) ** 0.5
        torch.sqrt(self.exp_avg_sq, out=self.buf).div_(bias_correction2_sqrt).add_(self.eps)
        self.p.addcdiv_(self.exp_avg, self.buf, value=-step_size)


@dataclass
class AscentResult:
    delta: torch.Tensor  # (d, d_k) float64: the returned update
    objective: float  # ‖ΔK‖² of the returned update
    init_objective: float
    ratio: float  # tr(ΔCΔᵀ)/tr(C) of the returned update
    ratios: list[float]  # after every step (post-rescale)
    objectives: list[float]  # after every step (post-rescale)
    hit_boundary_at: int | None


def constrained_ascent(
    delta0: torch.Tensor,
    K: torch.Tensor,
    C: torch.Tensor,
    beta: float,
    steps: int = 1000,
    lr: float = 1e-7,
    lr_after_boundary: float | None = None,
    best_iterate: str = "paper",
    fast: bool = True,
) -> AscentResult:
    """Adam on ``−‖ΔK‖²`` from ``delta0`` (d, d_k) under ``tr(ΔCΔᵀ)/tr(C) ≤ β`` (paper §5; official
    ``update_upd_matrix``).

    After every step, if the ratio exceeds β, Δ ← Δ·√(β/ratio) (exact: the constraint is quadratic). When the
    boundary is first hit Adam's lr becomes ``lr_after_boundary`` (if given). An infeasible ``delta0`` (ratio > β,
    e.g. an absolute β below the initialisation's) is first scaled onto the constraint, in both modes.

    ``best_iterate="paper"``: return the iterate (start point included) with the largest objective, measured after
    the rescale — always feasible.

    ``best_iterate="official"``: return what the released ``update_upd_matrix`` returns (its l2 loss, no key
    sub-sampling, no projection / ``alpha`` options), for a feasible start — always the case in :func:`wash` with the
    ratio-based β. The released loop, at step t, measures the objective *before* ``opt.step()``; after the step and
    the rescale, if that pre-step objective is the best so far (and > 0), it stores ``Δ.detach()`` — an alias of the
    live parameter, not a copy. Adam's later in-place steps keep writing into the aliased storage until a rescale
    reassigns ``Δ.data``, which cuts the alias. So with t* the last step whose pre-step objective was a new best,
    the returned Δ is

    - the final iterate, if no step after t* rescaled (in particular if t* is the last step);
    - otherwise the iterate right after the ``opt.step()`` of the first rescaling step s > t*, *before* its rescale —
      a point with ratio > β, outside the constraint;
    - the final iterate, if no pre-step objective was > 0 (the released ``best_upd_matrix is None`` fallback).

    In general this is not the best iterate; ``objective`` and ``ratio`` describe the returned Δ.

    ``fast=True`` (default) returns the same Δ as ``fast=False`` with fewer products with C (the cost of a step:
    C is d_k × d_k, K has one column per fact). The exact ratio tr(ΔCΔᵀ)/tr(C) is computed only when the step
    could have left the constraint: with u the step just taken, √ratio(Δ + u) ≤ √ratio(Δ) + ‖u‖_F·√(λ_max(C)/tr(C))
    (triangle inequality in the C-norm; ‖C‖_F stands in for λ_max(C), an upper bound), so while that bound (with a 1e-6 relative safety margin) stays below √β
    no rescale can happen and the product is skipped; a rescaled iterate's ratio is β (not recomputed). In
    ``ratios`` those steps hold the bound (≥ the exact value, ≤ β) or β; every rescale decision and every Δ is
    the one the exact loop makes (tested).
    """
    if best_iterate not in BEST_ITERATE:
        raise ValueError(f"best_iterate must be one of {BEST_ITERATE}, got {best_iterate!r}")
    check.number("beta", beta, 0.0, open_lo=True)
    check.int_at_least("steps", steps, 0)
    check.number("lr", lr, 0.0)
    if lr_after_boundary is not None:
        check.number("lr_after_boundary", lr_after_boundary, 0.0)
    check.matrix("delta0", delta0)
    check.matrix("K", K, rows=delta0.shape[1])
    check.matrix("C", C, rows=delta0.shape[1], cols=delta0.shape[1])
    if not torch.allclose(C, C.t(), rtol=1e-5, atol=1e-8 * float(C.abs().max().clamp_min(1e-30))):
        raise ValueError("C must be a symmetric covariance matrix (C != C^T)")
    K, C = K.double(), C.double()
    trC = float(torch.trace(C))
    if not trC > 0:
        raise ValueError(f"tr(cov) must be > 0, got {trC}")
    delta = delta0.detach().double().clone()
    r0 = c_ratio(delta, C)
    if r0 > beta:  # an infeasible start (e.g. an absolute beta below the initialisation) is projected first
        delta.mul_(math.sqrt(beta / r0))
    p = delta
    opt = _Adam(p, lr)
    init_obj = wash_objective(p, K)
    best_obj = init_obj
    # the best iterate ("paper"): the live Δ (``live``) or the copy in bufs[best_idx]; before a step that would
    # overwrite a live best, Δ is copied into the buffer not holding the best — the same copy the bound needs
    # as the step's start point, so one copy per step serves both
    bufs = [torch.empty_like(p), torch.empty_like(p)]
    live, best_idx = True, -1
    # "official": the released alias, made explicit. rel_best: best pre-step objective (released best_loss = 0);
    # aliased: an alias is held and still follows the live parameter; frozen: its value once a rescale cut it.
    rel_best, aliased, frozen = 0.0, False, None
    ratios, objs = [], []
    hit = None
    # fast path: √ratio grows by at most ‖u‖_F·√(λ_max/tr C) per step (u: the step); sq = a certified bound on √ratio
    lmax_tr = float(torch.linalg.matrix_norm(C)) / trC if fast else 0.0  # ‖C‖_F ≥ λ_max(C)
    sq = math.sqrt(max(float(((p @ C) * p).sum()) / trC, 0.0)) if fast else 0.0
    root_beta = math.sqrt(beta)
    paper = best_iterate == "paper"
    A = p @ K  # ΔK of the iterate the next step starts from (the previous step's objective product)
    grad = torch.empty_like(p)
    for t in range(steps):
        # ∇(−‖ΔK‖²) = −2(ΔK)Kᵀ, the product autograd forms, with ΔK reused from the previous step's objective: two
        # (d × d_k × n) products per step instead of three
        torch.mm(-2.0 * A, K.t(), out=grad)
        pre_obj = float(A.pow(2).sum())  # objective of the iterate this step starts from
        prev = None
        if fast or (paper and live):
            k = 1 if best_idx == 0 else 0
            prev = bufs[k].copy_(p)
            if paper and live:
                best_idx, live = k, False
        opt.step(grad)
        exact = True
        if fast:
            torch.sub(p, prev, out=opt.buf)  # the step just taken (the update's scratch buffer is free again)
            bound = (sq + float(opt.buf.norm()) * math.sqrt(lmax_tr)) * (1 + 1e-6) + 1e-300
            exact = bound >= root_beta
        r = float(((p @ C) * p).sum()) / trC if exact else bound * bound
        if exact and r > beta:
            if best_iterate == "official" and aliased:
                # the rescale cuts the alias: it keeps the post-step, pre-rescale Δ
                frozen, aliased = p.clone(), False
            p.mul_(math.sqrt(beta / r))
            if hit is None:
                hit = t
                if lr_after_boundary is not None:
                    opt.lr = lr_after_boundary
            r_after = float(((p @ C) * p).sum()) / trC if not fast else beta
        else:
            r_after = r
        if fast:
            sq = math.sqrt(max(r_after, 0.0))
        A = p @ K
        obj = float(A.pow(2).sum())
        ratios.append(r_after)
        objs.append(obj)
        if paper and obj > best_obj:
            best_obj, live = obj, True
        elif best_iterate == "official" and pre_obj > rel_best:
            # a new alias of the (post-rescale) live parameter
            rel_best, aliased, frozen = pre_obj, True, None
    if paper:
        best = p.clone() if live else bufs[best_idx].clone()
    else:
        best = frozen if frozen is not None else p.clone()
        best_obj = wash_objective(best, K)
    return AscentResult(best, best_obj, init_obj, c_ratio(best, C), ratios, objs, hit)


@dataclass
class LayerReport:
    layer: int
    name: str
    facts_used: list[int]  # indices (into the washed fact list) whose keys this layer's ascent used
    lam: float | None
    beta: float
    init_ratio: float
    ratio: float
    init_objective: float
    objective: float
    delta_norm: float
    remaining_after: int  # facts still answered correctly after this layer


@dataclass
class WashReport:
    """What :func:`wash` did: per-layer norms, constraint values, facts remaining; the edits themselves."""

    facts: list[Fact]
    known_before: int
    layers: list[LayerReport] = field(default_factory=list)
    deltas: dict[str, torch.Tensor] = field(default_factory=dict)  # W_out name -> Δ (d, d_k)
    remaining: list[int] = field(default_factory=list)  # facts still answered after the last layer
    z_nll: float | None = None  # mean NLL of the edit target under the MEMIT target vectors z (init="memit")
    # init="memit": the MEMIT→EOS edit Δ⁰ per W_out name — applied alone it is the MEMIT baseline on the same facts
    init_deltas: dict[str, torch.Tensor] = field(default_factory=dict)
    # CPU seconds per stage: "z" (target vectors), "init" (the rest of Δ⁰), "ascent", "elimination" (re-tests)
    cpu_s: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict:
        return {
            "known_before": self.known_before,
            "remaining": len(self.remaining),
            "z_nll": self.z_nll,
            "layers": [
                {k: v for k, v in lr.__dict__.items() if k != "facts_used"}
                | {"n_facts_used": len(lr.facts_used)}
                for lr in self.layers
            ],
        }

    def save_delta(self, path: str | Path) -> Path:
        """Write the edits ``{W_out name: Δ (d, d_k)}`` to a safetensors file (see :func:`apply_delta`)."""
        from safetensors.torch import save_file

        from iclr25.common.io import atomic_write_with

        t = {k: v.detach().cpu().contiguous() for k, v in self.deltas.items()}
        return atomic_write_with(
            Path(path), lambda tmp: save_file(t, tmp, metadata={"orientation": "d_out,d_in"})
        )


def apply_delta(model, path_or_deltas, sign: float = 1.0) -> list[str]:
    """Add saved edits to ``model`` (``sign=-1`` removes them). Returns the edited module names."""
    if isinstance(path_or_deltas, (str, Path)):
        from safetensors.torch import load_file

        deltas = load_file(str(path_or_deltas))
    else:
        deltas = dict(path_or_deltas)
    check.number("sign", sign)
    mls = resolve_layers(model, list(deltas))
    for ml in mls:  # every edit checked before any is applied: a bad file leaves the model untouched
        d = deltas[ml.name]
        if not isinstance(d, torch.Tensor) or tuple(d.shape) != tuple(ml.W.shape):
            got = tuple(d.shape) if isinstance(d, torch.Tensor) else type(d).__name__
            raise ValueError(
                f"path_or_deltas[{ml.name!r}] must have the layer's shape {tuple(ml.W.shape)}, got {got}"
            )
        if not bool(torch.isfinite(d).all()):
            raise ValueError(f"path_or_deltas[{ml.name!r}] must be finite (got NaN or inf)")
    for ml in mls:
        ml.add_(sign * deltas[ml.name])
    return [ml.name for ml in mls]


KnownFn = Callable[[object, object, list[Fact]], torch.Tensor]


def wash(
    model,
    tokenizer,
    facts: Sequence[Fact],
    layers: Sequence[int | str],
    cov: dict[int, torch.Tensor],
    *,
    lam: float = 20_000.0,
    beta_ratio: float = 1.1,
    beta: float | dict | None = None,
    steps: int = 1000,
    lr: float = 1e-7,
    lr_after_boundary: float | None = None,
    init: str = "memit",
    successive_elimination: bool = True,
    only_known: bool = True,
    best_iterate: str = "paper",
    z: ZConfig | None = None,
    edit_target=None,
    templates: Sequence[str] = ("{}",),
    lam_search: LamSearch | None = None,
    random_init_std: float = 1e-3,
    seed: int = 0,
    known_fn: KnownFn | None = None,
    fast: bool = True,
    z_cache: dict | None = None,
) -> WashReport:
    """Wash ``facts`` out of ``model`` in place by editing the MLP output matrices of ``layers`` (LaW).

    1. (``only_known``) keep the facts the model answers (official ``unlearn.py``);
    2. Δ⁰ per layer: MEMIT→EOS (``init="memit"``, λ = ``lam``, optional official ``lam_search``), or the ablations
       ``"random"`` (N(0, random_init_std²)) / ``"zero"``; with MEMIT, β_l = beta_ratio·tr(Δ⁰CΔ⁰ᵀ)/tr(C), otherwise
       ``beta`` is required (an explicit ``beta`` always overrides; a dict ``{layer index or W_out name: β}`` gives
       each layer its own budget, e.g. ``{l.layer: l.beta for l in report.layers}`` of a MEMIT-initialised run);
    3. for each layer: keys of the facts still to wash on the current model, :func:`constrained_ascent`,
       ``W_l ← W_l + Δ``; with ``successive_elimination`` the original facts are re-tested (``known_fn``, default
       :func:`fact_known`) and only those still answered go on; stop when none remain.

    Defaults are the official GPT2-XL zsRE/CounterFact ones (λ₀ 20,000, lr 1e-7, 1,000 steps, β ratio 1.1);
    ``best_iterate="official"`` returns the released ``update_upd_matrix``'s Δ per layer (its alias bookkeeping, see
    :func:`constrained_ascent`), which can lie outside the constraint. ``fast``: see :func:`constrained_ascent` (same
    Δ). ``z_cache``: reuse MEMIT target vectors across calls (see :func:`~iclr25.law.memit.memit_to_eos`).
    """
    facts = check_facts(facts)
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    if (
        best_iterate not in BEST_ITERATE
    ):  # checked up front: the known-facts filter may return before the ascent
        raise ValueError(f"best_iterate must be one of {BEST_ITERATE}, got {best_iterate!r}")
    check.int_at_least("steps", steps, 0)
    check.number("lr", lr, 0.0)
    if lr_after_boundary is not None:
        check.number("lr_after_boundary", lr_after_boundary, 0.0)
    check.number("lam", lam, 0.0)
    check.number("random_init_std", random_init_std, 0.0, open_lo=True)
    check.seed(seed)
    if z_cache is not None and not isinstance(z_cache, dict):
        raise ValueError(f"z_cache must be a dict or None, got {type(z_cache).__name__}")
    if z is not None and not isinstance(z, ZConfig):
        raise ValueError(f"z must be a ZConfig or None, got {type(z).__name__}")
    if lam_search is not None and not isinstance(lam_search, LamSearch):
        raise ValueError(f"lam_search must be a LamSearch or None, got {type(lam_search).__name__}")
    if not (isinstance(beta_ratio, (int, float)) and math.isfinite(beta_ratio) and beta_ratio >= 1):
        raise ValueError(f"beta_ratio must be a finite number >= 1, got {beta_ratio!r}")

    def _ok(b) -> bool:
        return isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) and b > 0

    if beta is not None and not (
        _ok(beta) or (isinstance(beta, dict) and all(_ok(b) for b in beta.values()))
    ):
        raise ValueError(f"beta must be a finite number > 0, a dict of them per layer, or None, got {beta!r}")
    if init != "memit" and beta is None:
        raise ValueError(f"init={init!r} needs an explicit beta (the C-norm budget), got beta=None")
    mls = resolve_layers(model, layers)
    covs = {ml.index: check_covariance(_cov_for(cov, ml), f"cov[{ml.index}]") for ml in mls}
    if isinstance(beta, dict):
        betas = {ml.index: beta.get(ml.index, beta.get(ml.name)) for ml in mls}
        missing = [ml.name for ml in mls if betas[ml.index] is None]
        if missing:
            raise ValueError(f"beta has no budget for layer(s) {missing}; keys: {list(beta)}")
    else:
        betas = {ml.index: beta for ml in mls}
    z = ZConfig() if z is None else z
    known_fn = known_fn or (lambda m, t, fs: fact_known(m, t, fs))
    report = WashReport(facts=facts, known_before=0)
    if not facts:
        return report
    if only_known:
        mask = known_fn(model, tokenizer, facts)
        alive = [i for i in range(len(facts)) if bool(mask[i])]
    else:
        alive = list(range(len(facts)))
    report.known_before = len(alive)
    report.remaining = list(alive)
    if not alive:
        warnings.warn("the model answers none of the facts: nothing to wash", stacklevel=2)
        return report
    dev = mls[0].W.device
    lams: dict[int, float | None] = {ml.index: None for ml in mls}
    clock = time.process_time()
    cpu = report.cpu_s = {"z": 0.0, "init": 0.0, "ascent": 0.0, "elimination": 0.0}
    if init == "memit":
        res = _memit(
            model,
            tokenizer,
            [facts[i] for i in alive],
            mls,
            covs,
            lam,
            z,
            edit_target,
            templates,
            lam_search,
            False,
            z_cache,
        )
        d0, lams = res.deltas, res.lams
        report.init_deltas = {ml.name: res.deltas[ml.index].cpu() for ml in mls}
        report.z_nll = float(res.z_nll.mean())
        cpu["z"] = res.z_cpu_s
    elif init == "random":
        g = torch.Generator(device="cpu").manual_seed(int(seed))
        d0 = {
            ml.index: (random_init_std * torch.randn(ml.d_out, ml.d_in, generator=g, dtype=torch.float64)).to(
                dev
            )
            for ml in mls
        }
    else:
        d0 = {ml.index: torch.zeros(ml.d_out, ml.d_in, dtype=torch.float64, device=dev) for ml in mls}
    cpu["init"] = time.process_time() - clock - cpu["z"]
    for ml in mls:
        clock = time.process_time()
        C = covs[ml.index].to(dev)
        b = betas[ml.index] if betas[ml.index] is not None else beta_ratio * c_ratio(d0[ml.index], C)
        if not b > 0:  # a zero initialisation with a ratio-based β leaves no budget: nothing to do
            b = 1e-300
        batch = encode_for(model, tokenizer, [facts[i] for i in alive], templates, target=None)
        K = fact_keys(model, batch, [ml])[ml.index].t()  # (d_k, n_alive)
        res = constrained_ascent(d0[ml.index], K, C, b, steps, lr, lr_after_boundary, best_iterate, fast)
        ml.add_(res.delta)
        report.deltas[ml.name] = res.delta.cpu()
        used = list(alive)
        cpu["ascent"] += time.process_time() - clock
        clock = time.process_time()
        if successive_elimination:
            mask = known_fn(model, tokenizer, facts)
            alive = [i for i in range(len(facts)) if bool(mask[i])]
        cpu["elimination"] += time.process_time() - clock
        report.layers.append(
            LayerReport(
                ml.index,
                ml.name,
                used,
                lams[ml.index],
                float(b),
                c_ratio(d0[ml.index], C),
                res.ratio,
                res.init_objective,
                res.objective,
                float(res.delta.norm()),
                len(alive),
            )
        )
        report.remaining = list(alive)
        if not alive:
            break
    return report


def _layers_doc(mls: Sequence[MemoryLayer]) -> str:  # pragma: no cover - helper for reprs
    return ", ".join(m.name for m in mls)
