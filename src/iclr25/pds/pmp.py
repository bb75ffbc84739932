"""The PMP solver: data-quality scores from Pontryagin's Maximum Principle (paper §2.2, Theorem 2.1).

Training is plain gradient descent on the uniformly weighted proxy-corpus loss,

    θ_{t+1} = θ_t − η ∇L(θ_t, γ),          L(θ, γ) = Σ_n γ_n l(x_n, θ)                       (state)

and the objective is the area under the downstream-loss curve Σ_{t=1..T} J(θ_t). The co-states are

    λ_T = ∇J(θ_T),   λ_t = λ_{t+1} + ∇J(θ_t) − η ∇²L(θ_t, γ) λ_{t+1}                         (co-state)

and the control condition ranks every example x_n by

    s_n = η Σ_{t ∈ S} ⟨∇l(x_n, θ_t), λ_{t+1}⟩,        S = {t < T : t mod c = 0}               (score)

With c = 1 this is exactly s_n = −∂/∂ε_n Σ_{t=1..T} J(θ_t) for the perturbed update
θ_{t+1} = θ_t − η(∇L_{B_t}(θ_t) + Σ_n ε_n ∇l(x_n, θ_t)) at ε = 0 (the identity the tests check against
unrolled autograd). Following the released solver: the state runs on trajectory batches B_t (not the
proxy set), the HVP at step t uses B_t, the score at t uses λ_{t+1} *before* the co-state update, θ is kept
every ⌊√T⌋ steps and re-computed segment by segment (O(√T) parameter copies), per-example scores are
``vmap``-ped forward-mode JVPs ⟨∇l(x_n, θ), λ⟩ and HVPs are forward-over-reverse (``jvp`` of ``grad``).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, jvp, vmap

from iclr25.common.progress import progress

Params = dict[str, torch.Tensor]

_SDPA_MSG = (
    "forward-mode AD (torch.func.jvp) has no rule for PyTorch's fused scaled-dot-product attention "
    "(e.g. _scaled_dot_product_flash_attention_for_cpu); build the model with attn_implementation='eager' "
    "(iclr25.common.lm.tiny_causal_lm(..., attn_implementation='eager') or config._attn_implementation='eager')"
)


def _attn_impl(model: torch.nn.Module) -> str | None:
    cfg = getattr(model, "config", None)
    return getattr(cfg, "_attn_implementation", None) if cfg is not None else None


def check_forward_ad_ready(model: torch.nn.Module) -> None:
    """Raise ``ValueError`` when ``model`` runs an attention kernel without a forward-AD rule *and* cannot be
    switched to eager attention for the forward-mode parts (an HF model can: ``set_attn_implementation``)."""
    impl = _attn_impl(model)
    if impl is not None and impl != "eager" and not hasattr(model, "set_attn_implementation"):
        raise ValueError(
            f"model.config._attn_implementation must be 'eager' for the PMP solver, got {impl!r}: {_SDPA_MSG}"
        )


@contextlib.contextmanager
def _eager_attention(model: torch.nn.Module):
    """Eager attention inside the block (forward-mode AD needs it), the model's own implementation restored after.

    The PMP solver needs eager attention only where it differentiates in forward mode — the per-example JVPs and the
    forward-over-reverse HVPs. The trajectory's SGD steps, ∇J and J itself run with the model's own kernel (SDPA)."""
    impl = _attn_impl(model)
    if impl is None or impl == "eager":
        yield
        return
    model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation(impl)


def trainable_params(model: torch.nn.Module) -> Params:
    """θ as a dict ``name -> detached tensor`` (parameters with ``requires_grad``; tied weights appear once)."""
    return {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}


class PMPDivergenceWarning(RuntimeWarning):
    """The proxy trajectory diverged: J(θ_T) > J(θ_0), a spike max_t J(θ_t) > 1.5·J(θ_0), or a non-finite J or score.

    The PMP scores describe how each example moves Σ_t J(θ_t) along *this* trajectory; when J rises (η too
    large, a diverging proxy) they no longer rank data by how much it helps the downstream loss.
    """


_SPIKE = 1.5  # max_t J(θ_t) above this multiple of J(θ_0) counts as divergence


def tokenizer_pad_id(tokenizer: Any) -> int:
    """The id a tokenizer pads with: ``tokenizer.pad_token_id`` (equal to the eos id when ``pad_token`` is the
    eos token, the usual Llama/Mistral set-up). Raises ``ValueError`` naming ``pad_id`` when it has none."""
    pid = getattr(tokenizer, "pad_token_id", None)
    if pid is None:
        eos = getattr(tokenizer, "eos_token", None)
        hint = (
            f" (e.g. tokenizer.pad_token = tokenizer.eos_token = {eos!r} if you padded with eos)"
            if eos
            else ""
        )
        raise ValueError(
            f"pad_id='auto' cannot be resolved: the tokenizer {type(tokenizer).__name__} has no pad token "
            f"(pad_token_id is None). Set tokenizer.pad_token{hint}, or pass pad_id=<int> (the id your rows are "
            "padded with) or pad_id=None (rows contain no padding)"
        )
    return int(pid)


def _check_int_pad(pad_id: Any, name: str = "pad_id") -> int:
    if isinstance(pad_id, bool) or not isinstance(pad_id, (int, np.integer)) or pad_id < 0:
        raise ValueError(f"{name} must be a non-negative int, None or 'auto', got {pad_id!r}")
    return int(pad_id)


def resolve_pad_id(
    model: torch.nn.Module | None, pad_id: int | None | str, tokenizer: Any = None
) -> int | None:
    """The input-token id to mask, from an explicit ``pad_id`` or (``pad_id='auto'``) the tokenizer/config.

    'auto' resolves, in order: ``tokenizer.pad_token_id`` when a tokenizer is given (the tokenizer padded the
    rows; its pad id is the eos id when it pads with eos), else ``model.config.pad_token_id``. When neither
    exists — e.g. a default ``LlamaConfig`` (``pad_token_id=None``) and no tokenizer — it raises ``ValueError``
    instead of silently scoring padding as target tokens. ``pad_id=None`` explicitly disables masking.
    """
    if pad_id is None:
        return None
    if isinstance(pad_id, str):
        if pad_id != "auto":
            raise ValueError(f"pad_id must be a non-negative int, None or 'auto', got {pad_id!r}")
        cfg = getattr(model, "config", None)
        cfg_pad = getattr(cfg, "pad_token_id", None) if cfg is not None else None
        if tokenizer is not None:
            pid = tokenizer_pad_id(tokenizer)
            if cfg_pad is not None and int(cfg_pad) != pid:
                warnings.warn(
                    f"pad_id='auto': tokenizer.pad_token_id={pid} differs from model.config.pad_token_id={cfg_pad}; "
                    f"masking {pid} (the tokenizer's, which padded the rows)",
                    UserWarning,
                    stacklevel=3,
                )
            return pid
        if cfg_pad is None:
            what = (
                f"model.config.pad_token_id is None ({type(cfg).__name__})"
                if cfg is not None
                else f"{type(model).__name__} has no .config"
            )
            raise ValueError(
                f"pad_id='auto' cannot be resolved: {what} and no tokenizer was given. Pass tokenizer=<the tokenizer "
                "that built the rows> (its pad_token_id is used; set tokenizer.pad_token = tokenizer.eos_token if you "
                "padded with eos), pad_id=<int>, or pad_id=None if the rows contain no padding"
            )
        return int(cfg_pad)
    return _check_int_pad(pad_id)


def example_losses(
    model: torch.nn.Module, params: Params, tokens: torch.Tensor, pad_id: int | None = None
) -> torch.Tensor:
    """l(x_n, θ) for every row of ``tokens`` (B, L+1): token-mean next-token cross-entropy.

    Inputs are ``tokens[:, :-1]``, labels ``tokens[:, 1:]``; positions whose *input* token is ``pad_id`` are
    masked (the released code's convention: instances are right-padded, so causal attention needs no mask).
    Returns (B,).

    Note: ``nn.Embedding(padding_idx=…)`` (HF models set it to the pad id) zeroes the *reverse-mode* gradient
    of the pad row while forward-mode AD does not; with pad inputs masked here (and right padding) that row
    never reaches an unmasked loss, so JVP scores and HVPs stay consistent. Do not pass ``pad_id=None`` on data
    that contains the pad id at positions that matter.
    """
    inp, lab = tokens[:, :-1], tokens[:, 1:]
    out = functional_call(model, params, (inp,), {"use_cache": False} if hasattr(model, "config") else {})
    logits = out.logits if hasattr(out, "logits") else out  # (B, L, V)
    ce = F.cross_entropy(logits.transpose(1, 2), lab, reduction="none")  # (B, L)
    if pad_id is None:
        return ce.mean(dim=1)
    mask = (inp != pad_id).to(ce.dtype)
    return (ce * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)


def _tmap(fn: Callable[..., torch.Tensor], *trees: Params) -> Params:
    return {k: fn(*(t[k] for t in trees)) for k in trees[0]}


def _accumulate(acc: Params | None, w: float, g: Params) -> Params:
    """acc + w·g (acc = None starts the sum)."""
    if acc is None:
        return {k: w * v for k, v in g.items()}
    return {k: acc[k] + w * v for k, v in g.items()}


def _micro(data: torch.Tensor, micro_batch_size: int | None) -> list[tuple[torch.Tensor, float]]:
    """Split a batch into micro-batches with their weights n_i / n (gradient accumulation of a mean)."""
    n = data.shape[0]
    size = n if micro_batch_size is None else micro_batch_size
    return [(data[i : i + size], min(size, n - i) / n) for i in range(0, n, size)]


@dataclass
class _Objective:
    """Mean-loss gradients and HVPs of one model, with micro-batch accumulation."""

    model: torch.nn.Module
    pad_id: int | None
    micro_batch_size: int | None
    device: torch.device

    def mean_loss(self, params: Params, data: torch.Tensor) -> torch.Tensor:
        return example_losses(self.model, params, data, self.pad_id).mean()

    def grad_and_value(self, params: Params, data: torch.Tensor) -> tuple[Params, float]:
        """∇_θ mean_n l(x_n, θ) and the mean loss, accumulated over micro-batches."""
        g_tot: Params | None = None
        v_tot = 0.0
        for chunk, w in _micro(data.to(self.device), self.micro_batch_size):
            g, v = grad_and_value(self.mean_loss)(params, chunk)
            g_tot = _accumulate(g_tot, w, g)
            v_tot += w * float(v)
        assert g_tot is not None
        return g_tot, v_tot

    def hvp(self, params: Params, data: torch.Tensor, vec: Params) -> Params:
        """∇²_θ L_B(θ) v by forward-over-reverse: ``jvp(grad(L_B), (θ,), (v,))``."""
        h_tot: Params | None = None
        with _eager_attention(self.model):
            for chunk, w in _micro(data.to(self.device), self.micro_batch_size):
                gfn = lambda p, c=chunk: grad_and_value(self.mean_loss)(p, c)[0]  # noqa: E731
                _, h = _jvp(gfn, params, vec)
                h_tot = _accumulate(h_tot, w, h)
        assert h_tot is not None
        return h_tot

    def example_jvps(
        self, params: Params, data: torch.Tensor, vec: Params, chunk_size: int | None
    ) -> torch.Tensor:
        """⟨∇l(x_n, θ), v⟩ for every row: ``vmap`` over examples of ``jvp(l(x_n, ·), θ, v)`` → (N,).

        No per-example gradient (N × |θ|) is ever materialised.
        """

        def one(x: torch.Tensor) -> torch.Tensor:
            f = lambda p: example_losses(self.model, p, x[None], self.pad_id)[0]  # noqa: E731
            return _jvp(f, params, vec)[1]

        with _eager_attention(self.model):
            return vmap(one, chunk_size=chunk_size)(data.to(self.device))


def _jvp(fn, params: Params, vec: Params):
    try:
        return jvp(fn, (params,), (vec,))
    except NotImplementedError as e:  # fused attention kernels have no forward-AD formula
        if "forward AD" in str(e) or "forward-mode" in str(e):
            raise NotImplementedError(f"{_SDPA_MSG}. Original error: {e}") from e
        raise


@dataclass
class PMPTrace:
    """What the solver saw: J(θ_t) for t = 0..T, the co-state norms ‖λ_t‖, the checkpoint interval, the resolved
    pad id and whether the trajectory diverged (J(θ_T) > J(θ_0), max_t J(θ_t) > 1.5·J(θ_0) or non-finite; see
    :class:`PMPDivergenceWarning`)."""

    dev_losses: list[float] = field(default_factory=list)
    lambda_norms: dict[int, float] = field(default_factory=dict)
    checkpoint_every: int = 1
    score_steps: list[int] = field(default_factory=list)
    pad_id: int | None = None
    diverged: bool = False


def _as_batch_list(
    trajectory_batches: Sequence[torch.Tensor] | torch.Tensor, steps: int
) -> list[torch.Tensor]:
    n = len(trajectory_batches)
    if n < steps:
        raise ValueError(f"trajectory_batches must hold at least steps={steps} batches, got {n}")
    out = [trajectory_batches[t] for t in range(steps)]
    for t, b in enumerate(out):
        if not isinstance(b, torch.Tensor) or b.ndim != 2 or b.dtype != torch.long:
            raise ValueError(
                f"trajectory_batches[{t}] must be a 2-D LongTensor (B, L+1), got {type(b).__name__} "
                f"{getattr(b, 'shape', '')}"
            )
    return out


def pmp_scores(
    model: torch.nn.Module,
    proxy_set: torch.Tensor,
    trajectory_batches: Sequence[torch.Tensor] | torch.Tensor,
    dev_set: torch.Tensor,
    lr: float,
    steps: int | None = None,
    score_every: int = 1,
    *,
    chunk_size: int | None = 256,
    checkpoint_every: int | None = None,
    micro_batch_size: int | None = None,
    pad_id: int | None | str = "auto",
    tokenizer: Any = None,
    return_trace: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, PMPTrace]:
    """PMP data-quality scores s_n of the rows of ``proxy_set`` (higher = better; raw, not normalised).

    Args:
        model: a causal LM (any HF model — an SDPA one runs the trajectory, ∇J and J with SDPA and switches to
            eager attention only for the forward-mode JVPs / HVPs, restoring its implementation after — or any
            module returning logits); its current weights are θ_0. It is not modified.
        proxy_set: (N, L+1) LongTensor, the examples x_n to score.
        trajectory_batches: T batches B_t, each (B, L+1), that drive θ_{t+1} = θ_t − η ∇ mean_{B_t} l.
        dev_set: (M, L+1) LongTensor, the downstream set defining J(θ) = mean_m l(y_m, θ).
        lr: η, the SGD learning rate of the trajectory.
        steps: T (default: ``len(trajectory_batches)``).
        score_every: c; scores are accumulated at t ∈ {0, c, 2c, …} (the released solver uses 10).
        chunk_size: ``vmap`` chunk of the per-example JVPs (memory knob; results are chunk-independent).
        checkpoint_every: keep θ every k steps and re-compute the rest (default ⌊√T⌋; 1 keeps all θ_t).
        micro_batch_size: gradient/HVP accumulation micro-batch for B_t and the dev set (None: whole batch).
        pad_id: input-token id to mask. 'auto': ``tokenizer.pad_token_id`` when ``tokenizer`` is given, else
            ``model.config.pad_token_id``; a ``ValueError`` when neither is set (a default Llama config has no
            pad id). None: no mask (only for rows without padding).
        tokenizer: the tokenizer that built (and padded) the rows; used to resolve ``pad_id='auto'``.
        return_trace: also return a :class:`PMPTrace`.

    Returns: scores (N,) in the parameters' dtype (and the trace when asked).

    Warns: :class:`PMPDivergenceWarning` when J(θ_T) > J(θ_0), max_t J(θ_t) > 1.5·J(θ_0), or a J(θ_t) or score is
    not finite (lower ``lr``).
    """
    check_forward_ad_ready(model)
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"lr must be a positive float, got {lr!r}")
    T = len(trajectory_batches) if steps is None else steps
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}")
    if not isinstance(score_every, int) or score_every < 1:
        raise ValueError(f"score_every must be an int >= 1, got {score_every!r}")
    for name, x in (("proxy_set", proxy_set), ("dev_set", dev_set)):
        if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.dtype != torch.long or x.shape[1] < 2:
            raise ValueError(
                f"{name} must be a 2-D LongTensor (N, L+1) with L+1 >= 2, got "
                f"{type(x).__name__} {getattr(x, 'shape', '')}"
            )
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size!r}")
    if micro_batch_size is not None and (not isinstance(micro_batch_size, int) or micro_batch_size < 1):
        raise ValueError(f"micro_batch_size must be a positive int or None, got {micro_batch_size!r}")
    k = max(1, math.isqrt(T)) if checkpoint_every is None else checkpoint_every
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"checkpoint_every must be an int >= 1 or None, got {checkpoint_every!r}")
    batches = _as_batch_list(trajectory_batches, T)

    theta0 = trainable_params(model)
    if not theta0:
        raise ValueError("model has no trainable parameters (requires_grad=True)")
    device = next(iter(theta0.values())).device
    pid = resolve_pad_id(model, pad_id, tokenizer)
    obj = _Objective(model, pid, micro_batch_size, device)
    trace = PMPTrace(checkpoint_every=k, pad_id=pid)

    def sgd_step(theta: Params, t: int) -> Params:
        g, _ = obj.grad_and_value(theta, batches[t])
        return _tmap(lambda p, gp: p - lr * gp, theta, g)  # θ_{t+1} = θ_t − η ∇L_{B_t}(θ_t)

    was_training = model.training
    model.eval()  # dropout off: the trajectory must be a deterministic function of θ
    try:
        # ---- forward: run the state equation, keep θ_t for t ∈ {0, k, 2k, …} -------------------------
        ckpts: dict[int, Params] = {0: theta0}
        theta = theta0
        for t in progress(range(T), desc="PMP forward"):
            theta = sgd_step(theta, t)
            if (t + 1) % k == 0 and t + 1 < T:
                ckpts[t + 1] = theta
        # ---- terminal condition λ_T = ∇J(θ_T) ------------------------------------------------------------
        lam, j_T = obj.grad_and_value(theta, dev_set)
        dev_losses = {T: j_T}
        trace.lambda_norms[T] = _norm(lam)
        scores = torch.zeros(proxy_set.shape[0], dtype=next(iter(theta0.values())).dtype, device=device)
        del theta
        # ---- backward, segment by segment from the end --------------------------------------------------
        for start in progress(sorted(ckpts, reverse=True), desc="PMP backward (segments)"):
            end = min(start + k, T)
            thetas = [ckpts[start]]  # re-compute θ_start … θ_{end−1} from the checkpoint
            for t in range(start, end - 1):
                thetas.append(sgd_step(thetas[-1], t))
            for t in range(end - 1, start - 1, -1):
                theta_t = thetas[t - start]
                if t % score_every == 0:  # control: s_n += η ⟨∇l(x_n, θ_t), λ_{t+1}⟩ (before the λ update)
                    scores += lr * obj.example_jvps(theta_t, proxy_set, lam, chunk_size)
                    trace.score_steps.append(t)
                # co-state: λ_t = ∇J(θ_t) + λ_{t+1} − η H_{B_t}(θ_t) λ_{t+1}  (same batch as step t; λ_0 unused)
                if t > 0:
                    gJ, j_t = obj.grad_and_value(theta_t, dev_set)
                    h = obj.hvp(theta_t, batches[t], lam)
                    lam = _tmap(lambda a, b, c: a + b - lr * c, gJ, lam, h)
                    dev_losses[t] = j_t
                    trace.lambda_norms[t] = _norm(lam)
            del thetas
        with torch.no_grad():
            dev_losses[0] = float(obj.mean_loss(theta0, dev_set.to(device)))
    finally:
        model.train(was_training)
    trace.dev_losses = [dev_losses[t] for t in range(T + 1)]
    trace.score_steps.sort()
    J = np.asarray(trace.dev_losses, dtype=np.float64)
    trace.diverged = bool(
        not np.isfinite(J).all()
        or J[-1] > J[0]  # no net decrease
        or J.max() > _SPIKE * J[0]  # blew up on the way (it may come back down to a degenerate model)
        or not torch.isfinite(scores).all()
    )
    if trace.diverged:
        worst = int(np.nanargmax(np.where(np.isfinite(J), J, np.inf)))
        warnings.warn(
            f"PMP proxy trajectory diverged: J(θ_0)={J[0]:.4g}, J(θ_T)={J[-1]:.4g} (T={T}), max J(θ_t)={J[worst]:.4g} at "
            f"t={worst}; the downstream loss rose along the trajectory, so the scores do not rank data by how much "
            f"it helps J. Lower lr (now {lr:g}) or check the proxy model / trajectory batches",
            PMPDivergenceWarning,
            stacklevel=2,
        )
    return (scores, trace) if return_trace else scores


def _norm(p: Params) -> float:
    return float(torch.sqrt(sum((v.double() ** 2).sum() for v in p.values())))
