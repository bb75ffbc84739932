"""MEMIT towards EOS (paper §3 initialisation and the MEMIT baseline): target vectors z that make the model emit
EOS, and the closed-form least-squares update ``Δ = R Kᵀ (λC + KKᵀ)⁻¹`` spread over the edited layers."""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..common.fields import bounded, check_fields
from .covariance import check_covariance
from .facts import Fact, check_facts
from .memories import (
    MemoryLayer,
    add_to_block_output,
    block_outputs,
    block_values,
    encode_for,
    fact_keys,
    length_groups,
    logits_at,
    resolve_layers,
)


def _check_lam(lam: float) -> float:
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    return float(lam)


def _check_z_templates(z, templates) -> None:
    if not isinstance(z, ZConfig):
        raise ValueError(f"z must be a ZConfig, got {type(z).__name__}")
    if isinstance(templates, str) or not templates:
        raise ValueError(
            f"templates must be a non-empty sequence of context strings with one '{{}}', got {templates!r}"
        )
    for t in templates:
        if not isinstance(t, str) or t.count("{}") != 1:
            raise ValueError(
                f"templates must each contain exactly one '{{}}' (the prompt's place), got {t!r}"
            )


def memit_closed_form(R: torch.Tensor, K: torch.Tensor, C: torch.Tensor, lam: float) -> torch.Tensor:
    """``Δ = R Kᵀ (λC + KKᵀ)⁻¹`` in float64 — the minimiser of ``λ·tr(ΔCΔᵀ) + ‖ΔK − R‖²_F``.

    R: (d, n) residuals, K: (d_k, n) keys, C: (d_k, d_k). Solved with a Cholesky factorisation (never an explicit
    inverse). If ``λC + KKᵀ`` is singular a ridge ``ε·tr/d_k·I`` is added with a warning naming ``lam``.
    """
    lam = _check_lam(lam)
    R, K, C = R.double(), K.double(), C.double()
    if K.ndim != 2 or R.ndim != 2 or R.shape[1] != K.shape[1] or C.shape != (K.shape[0], K.shape[0]):
        raise ValueError(
            f"shapes must be R (d, n), K (d_k, n), C (d_k, d_k); got R {tuple(R.shape)}, K {tuple(K.shape)}, "
            f"C {tuple(C.shape)}"
        )
    for name, x in (("R", R), ("K", K), ("cov", C)):
        if not torch.isfinite(x).all():
            raise ValueError(f"{name} contains NaN or inf")
    A = lam * C + K @ K.t()
    A = 0.5 * (A + A.t())
    L, info = torch.linalg.cholesky_ex(A)
    if info != 0:
        eps = 1e-10 * float(torch.diagonal(A).mean().clamp_min(1e-30))
        for _ in range(8):
            L, info = torch.linalg.cholesky_ex(
                A + eps * torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
            )
            if info == 0:
                break
            eps *= 100
        if info != 0:
            raise ValueError(f"lam·C + KKᵀ is not positive definite even with a ridge (lam={lam}); check cov")
        warnings.warn(
            f"lam·C + KKᵀ is singular (lam={lam}); added a ridge {eps:.3g}·I — raise lam or use a covariance "
            "estimated on more text",
            stacklevel=2,
        )
    X = torch.cholesky_solve(K @ R.t(), L)  # (d_k, d) = A⁻¹ K Rᵀ
    return X.t()


@dataclass(frozen=True)
class ZConfig:
    """Target-vector optimisation (MEMIT ``compute_z``), defaults of the official GPT2-XL hyper-parameters."""

    steps: int = bounded(20, lo=0)
    lr: float = bounded(0.5, lo=0)
    clamp: float = bounded(0.75, lo=0)  # ‖δ‖ ≤ clamp·‖h₀‖ after every step
    weight_decay: float = bounded(0.5, lo=0)  # + weight_decay·‖δ‖/‖h₀‖²
    # + kl_factor·KL(p₀ ‖ p) on kl_template (skipped for facts without a subject)
    kl_factor: float = bounded(0.0625, lo=0)
    kl_template: str | None = "{} is a"
    early_stop: float = bounded(0.05, lo=0)  # a fact stops once its NLL < early_stop

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the template
        if self.kl_template is not None and (
            not isinstance(self.kl_template, str) or self.kl_template.count("{}") != 1
        ):
            raise ValueError(
                f"kl_template must be None or a str with exactly one '{{}}', got {self.kl_template!r}"
            )


def _target_ids(tokenizer, edit_target) -> list[int]:
    if edit_target is None:
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no eos_token_id; pass edit_target explicitly")
        return [int(tokenizer.eos_token_id)]
    if isinstance(edit_target, str):
        ids = tokenizer(edit_target, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"edit_target {edit_target!r} tokenises to no tokens")
        return list(ids)
    ids = [int(i) for i in edit_target]
    if not ids:
        raise ValueError(
            "edit_target must be None (EOS), a string or a non-empty sequence of token ids, got []"
        )
    return ids


def compute_z(
    model,
    tokenizer,
    facts: Sequence[Fact],
    layer: MemoryLayer,
    z: ZConfig = ZConfig(),
    edit_target=None,
    templates: Sequence[str] = ("{}",),
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Target hidden states ``z_i = h₀_i + δ_i`` at the output of ``layer``'s block, subject's last token.

    All facts are optimised at once (each δ_i only sees its own fact's loss). Returns ``(Z, H0, nll)`` with
    Z, H0: (N, d) float64 and the final per-fact NLL of the edit target.

    In a post-norm block (``layer.post_norm``: Gemma2 / OLMo2) δ_i is added to W_out's value v₀ instead (the clamp
    and the weight decay relative to ‖v₀‖), so the target is one the layer can produce:
    z_i = h₀_i + N(v₀_i + δ_i) − N(v₀_i) — a post-norm contribution has a bounded norm, and a residual-space δ
    could ask for more than any value of W_out gives.
    """
    facts = check_facts(facts)
    if not isinstance(layer, MemoryLayer):
        raise ValueError(f"layer must be a MemoryLayer (see resolve_layers), got {type(layer).__name__}")
    _check_z_templates(z, templates)
    tids = _target_ids(tokenizer, edit_target)
    batch = encode_for(model, tokenizer, facts, templates, target=tids)
    T = batch.n_templates
    plain = encode_for(model, tokenizer, facts, ("{}",), target=None)
    H0 = block_outputs(model, plain, layer)  # (N, d)
    post = layer.post_norm is not None
    base = block_values(model, plain, layer) if post else H0  # the space δ lives in: value or residual
    site = layer.module if post else layer.block  # where δ is added
    N, d = H0.shape
    dev = batch.input_ids.device
    p = next(model.parameters())
    delta = torch.zeros(N, d, device=dev, dtype=p.dtype, requires_grad=True)
    h0n = base.norm(dim=1).to(p.dtype)  # (N,)
    kl_rows = (
        [i for i, f in enumerate(facts) if f.subject is not None] if z.kl_factor > 0 and z.kl_template else []
    )
    kl_batch = None
    if kl_rows:
        kl_facts = [Fact(z.kl_template.format(facts[i].subject), "x", facts[i].subject) for i in kl_rows]
        kl_batch = encode_for(model, tokenizer, kl_facts, ("{}",), target=None)
        kl_idx = torch.tensor(kl_rows, device=dev)
        last = kl_batch.prompt_len - 1
        with torch.no_grad():
            lg = model(input_ids=kl_batch.input_ids, attention_mask=kl_batch.attention_mask).logits
            kl_p0 = F.log_softmax(lg[torch.arange(len(kl_rows)), last].float(), -1)
    opt = torch.optim.Adam([delta], lr=z.lr)
    active = torch.ones(N, dtype=torch.bool, device=dev)
    params = [q for q in model.parameters() if q.requires_grad]
    for q in params:
        q.requires_grad_(False)
    trow = torch.arange(T, device=dev)
    kl_pos = None
    if kl_batch is not None:  # fact -> its row of the KL batch (-1: none)
        kl_pos = torch.full((N,), -1, dtype=torch.long, device=dev)
        kl_pos[kl_idx] = torch.arange(len(kl_rows), device=dev)

    def by_length(lens: torch.Tensor, piece) -> torch.Tensor:
        """``piece(g, L)`` for every group ``g`` of equal length ``L``, concatenated back into the rows' order."""
        groups = length_groups(lens)
        out = torch.cat([piece(g, int(lens[g[0]])) for g in groups])
        return out[torch.argsort(torch.cat(groups))]

    def target_nll(rows: torch.Tensor, drows: torch.Tensor) -> torch.Tensor:
        """Mean target NLL of batch ``rows`` (δ ``drows`` added at each row's subject), rows of equal length run
        together unpadded, logits only where a target token is predicted; (len(rows),) in ``rows``' order."""

        def piece(g, L):
            r = rows[g]
            ids = batch.input_ids[r, :L]
            pos = torch.arange(int(batch.prompt_len[r].min()) - 1, L - 1, device=dev)
            with add_to_block_output(site, batch.subject_pos[r], drows[g]):
                lg = logits_at(model, ids, pos)
            tok_lp = F.log_softmax(lg.float(), -1).gather(-1, ids[:, pos + 1, None]).squeeze(-1)
            m = batch.target_mask[r][:, pos + 1].float()
            return -(tok_lp * m).sum(1) / m.sum(1).clamp_min(1)

        return by_length(batch.attention_mask[rows].sum(1), piece)

    def kl_logp(kr: torch.Tensor, drows: torch.Tensor) -> torch.Tensor:
        """log p at the last prompt token of KL batch rows ``kr`` (δ added), (len(kr), V)."""

        def piece(g, L):
            r = kr[g]
            with add_to_block_output(site, kl_batch.subject_pos[r], drows[g]):
                lg = logits_at(model, kl_batch.input_ids[r, :L], torch.tensor([L - 1], device=dev))
            return F.log_softmax(lg[:, 0].float(), -1)

        return by_length(kl_batch.attention_mask[kr].sum(1), piece)

    try:
        nll = torch.zeros(N, device=dev)
        for _ in range(z.steps + 1):
            # only the facts still optimised are run: a stopped fact's δ is frozen and its loss masked, so dropping
            # its rows changes no active fact's loss or gradient
            idx = active.nonzero().squeeze(1)
            rows = (idx[:, None] * T + trow).reshape(-1)
            nll_a = target_nll(rows, delta[idx].repeat_interleave(T, 0)).reshape(len(idx), T).mean(1)
            loss_a = nll_a + z.weight_decay * delta[idx].norm(dim=1) / h0n[idx] ** 2
            if kl_batch is not None:
                sel = kl_pos[idx]
                has = (sel >= 0).nonzero().squeeze(1)
                if len(has):
                    kr = sel[has]
                    lp = kl_logp(kr, delta[idx[has]])
                    kl = (kl_p0[kr].exp() * (kl_p0[kr] - lp)).sum(-1)
                    loss_a = loss_a.index_add(0, has, z.kl_factor * kl)
            nll = nll.clone()
            nll[idx] = nll_a.detach()
            still = nll_a.detach() >= z.early_stop
            active = active.clone()
            active[idx] = still
            if _ == z.steps or not active.any():
                break
            opt.zero_grad()
            (loss_a * still).sum().backward()
            before = delta.detach().clone()
            opt.step()
            with torch.no_grad():
                delta[~active] = before[~active]
                n = delta.norm(dim=1)
                mx = z.clamp * h0n
                scale = torch.where(n > mx, mx / n.clamp_min(1e-30), torch.ones_like(n))
                delta.mul_(scale[:, None])
    finally:
        for q in params:
            q.requires_grad_(True)
    if post:  # z = h₀ + N(v₀ + δ) − N(v₀), computed in float64
        Nd = copy.deepcopy(layer.post_norm).double()
        with torch.no_grad():
            return H0 + Nd(base + delta.detach().double()) - Nd(base), H0, nll.detach()
    return H0 + delta.detach().double(), H0, nll.detach()


@dataclass(frozen=True)
class LamSearch:
    """The official λ band search: while ‖Δ‖_F > high·‖W‖_F add ``step`` to λ; while < low·‖W‖_F multiply λ
    by ``decay``. Tuned for GPT2-XL / GPT-J; on small models it can drive λ so high that nothing is washed."""

    low: float = bounded(1 / 3, lo=0, lo_open=True)
    high: float = bounded(3 / 4, lo=0, lo_open=True)
    step: float = bounded(100_000.0, lo=0, lo_open=True)
    decay: float = bounded(0.75, lo=0, hi=1, lo_open=True, hi_open=True)  # λ shrinks by it
    max_iter: int = bounded(200, lo=1)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the rule across fields
        if not self.low < self.high:
            raise ValueError(
                f"low must be < high (a band around ||W||_F), got low={self.low!r}, high={self.high!r}"
            )


def value_targets(model, batch, layer: MemoryLayer, R: torch.Tensor) -> torch.Tensor:
    """The change of W_out's value that moves ``layer``'s residual contribution by ``R`` (d, N) in a post-norm block.

    Pre-norm blocks add the value v = W k to the residual, so MEMIT asks ΔW k = R. Gemma2 / OLMo2 blocks add
    N(v) (``post_feedforward_layernorm``), so the value must move to v* = argmin_v ‖N(v) − (N(v₀) + R)‖² (v₀: the
    current value at the subject's last token); returns (v* − v₀)ᵀ, (d, N) float64. Solved by L-BFGS on a float64
    copy of N, all facts at once (the loss is a sum over facts); an unreachable target gets its least-squares point.
    """
    if layer.post_norm is None:
        return R
    v0 = block_values(model, batch, layer)  # (N, d) float64
    N = copy.deepcopy(layer.post_norm).double().requires_grad_(False)
    with torch.enable_grad():
        y = (N(v0) + R.t()).detach()  # (N, d) target contributions
        v = v0.clone().requires_grad_(True)
        opt = torch.optim.LBFGS(
            [v], lr=1.0, max_iter=500, history_size=50, tolerance_grad=1e-12, tolerance_change=1e-14,
            line_search_fn="strong_wolfe",
        )  # fmt: skip

        def closure():
            opt.zero_grad()
            loss = (N(v) - y).pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
    return (v.detach() - v0).t()


@dataclass
class MemitResult:
    deltas: dict[int, torch.Tensor]  # layer -> Δ (d, d_k), float64
    lams: dict[int, float]
    Z: torch.Tensor
    z_nll: torch.Tensor  # final NLL of the edit target under the optimised δ
    layers: list[MemoryLayer] = field(default_factory=list)
    z_cpu_s: float = 0.0  # CPU seconds spent optimising target vectors z (0 when all came from a z_cache)


def _solve_with_search(R, K, C, lam, W_norm, search: LamSearch | None):
    D = memit_closed_form(R, K, C, lam)
    if search is None:
        return D, lam
    for _ in range(search.max_iter):
        n = float(D.norm())
        if n > search.high * W_norm:
            lam += search.step
        elif n < search.low * W_norm and lam > 0:
            lam *= search.decay
        else:
            return D, lam
        D = memit_closed_form(R, K, C, lam)
    warnings.warn(
        f"lam search did not reach the band after {search.max_iter} steps (lam={lam:.4g})", stacklevel=3
    )
    return D, lam


@torch.no_grad()
def _memit(
    model, tokenizer, facts, mls, cov, lam, z, edit_target, templates, lam_search, keep, z_cache=None
) -> MemitResult:
    zl = mls[-1]
    t_z = time.process_time()
    if z_cache is None:
        with torch.enable_grad():
            Z, _, znll = compute_z(model, tokenizer, facts, zl, z, edit_target, templates)
    else:  # z_i depends on fact i alone: computed once per fact and reused (same model, layers, z, target, templates)
        missing = list(dict.fromkeys(f for f in facts if f not in z_cache))
        if missing:
            with torch.enable_grad():
                Zm, _, nm = compute_z(model, tokenizer, missing, zl, z, edit_target, templates)
            for f, zr, nr in zip(missing, Zm, nm):
                z_cache[f] = (zr.detach().clone(), nr.detach().clone())
        Z = torch.stack([z_cache[f][0] for f in facts])
        znll = torch.stack([z_cache[f][1] for f in facts])
    z_cpu_s = time.process_time() - t_z
    if z.steps > 0 and float(znll.mean()) > math.log(2):
        warnings.warn(
            f"the target vectors z at {zl.name} do not make the model emit the edit target (mean NLL "
            f"{float(znll.mean()):.2f} nats, i.e. p < 0.5): the closed-form edit cannot wash these facts. Raise "
            f"z.steps / z.clamp (now {z.steps} / {z.clamp}) or edit layers where the facts are looked up",
            stacklevel=4,  # _memit, its no_grad wrapper, memit_to_eos / wash, the caller
        )
    kb = encode_for(model, tokenizer, facts, templates, target=None)
    plain = encode_for(model, tokenizer, facts, ("{}",), target=None)
    m = len(mls)
    deltas, lams = {}, {}
    # exact restore (W + Δ − Δ is not bit-identical in floating point, far from it in bf16)
    saved = {} if keep else {ml.index: ml.module.weight.detach().clone() for ml in mls}
    try:
        for i, ml in enumerate(mls):
            C = cov[ml.index]
            K = fact_keys(model, kb, [ml])[ml.index].t()  # (d_k, N)
            cur = block_outputs(model, plain, zl).t()  # (d, N)
            R = (Z.t() - cur) / (m - i)  # residual change asked of layer i
            if ml.post_norm is not None:  # Gemma2 / OLMo2: the residual receives post_norm(v), not v = W k
                R = value_targets(model, plain, ml, R)
            D, lam_i = _solve_with_search(R, K, C, lam, float(ml.W.detach().double().norm()), lam_search)
            deltas[ml.index], lams[ml.index] = D, lam_i
            ml.add_(D, check_precision=keep)
    finally:
        for ml in mls:
            if ml.index in saved:
                ml.module.weight.data.copy_(saved[ml.index])
    return MemitResult(deltas, lams, Z, znll, mls, z_cpu_s)


def memit_to_eos(
    model,
    tokenizer,
    facts: Sequence[Fact],
    layers: Sequence[int | str],
    cov: dict[int, torch.Tensor],
    lam: float = 20_000.0,
    z: ZConfig = ZConfig(),
    edit_target=None,
    templates: Sequence[str] = ("{}",),
    lam_search: LamSearch | None = None,
    apply: bool = True,
    z_cache: dict | None = None,
) -> MemitResult:
    """MEMIT editing every fact's prompt to EOS (the paper's MEMIT baseline and LaW's initialisation).

    For layer i of m (in order): K = keys of all facts on the current model, R = (Z − h_{l_m}) / (m − i),
    ``Δ_i = R Kᵀ(λC_i + KKᵀ)⁻¹`` (float64). ``apply=False`` restores the weights afterwards (LaW computes the
    initialisation on temporarily edited weights). ``lam`` default = the official GPT2-XL zsRE/CounterFact λ₀;
    ``lam_search=LamSearch()`` turns on the official band search. ``z_cache``: a dict ``{Fact: (z, nll)}`` kept by
    the caller for one model, layer list, ``z``, ``edit_target`` and ``templates``; each fact's target vector is
    computed once and reused by later calls (z_i depends on fact i alone).
    """
    facts = check_facts(facts)
    if not facts:
        raise ValueError("facts must hold at least one Fact, got an empty list")
    _check_lam(lam)
    _check_z_templates(z, templates)
    if lam_search is not None and not isinstance(lam_search, LamSearch):
        raise ValueError(f"lam_search must be a LamSearch or None, got {type(lam_search).__name__}")
    mls = resolve_layers(model, layers)
    cov = {ml.index: check_covariance(_cov_for(cov, ml), f"cov[{ml.index}]") for ml in mls}
    if z_cache is not None and not isinstance(z_cache, dict):
        raise ValueError(f"z_cache must be a dict or None, got {type(z_cache).__name__}")
    return _memit(
        model, tokenizer, facts, mls, cov, lam, z, edit_target, templates, lam_search, apply, z_cache
    )


def _cov_for(cov, ml: MemoryLayer) -> torch.Tensor:
    if not isinstance(cov, dict):
        raise ValueError(f"cov must be a dict {{layer index: (d_k, d_k) tensor}}, got {type(cov).__name__}")
    C = cov.get(ml.index, cov.get(ml.name))
    if C is None:
        raise ValueError(f"cov has no covariance for layer {ml.index} ({ml.name}); keys: {list(cov)}")
    if tuple(C.shape) != (ml.d_in, ml.d_in):
        raise ValueError(f"cov[{ml.index}] must be ({ml.d_in}, {ml.d_in}), got {tuple(C.shape)}")
    return C
