"""Key covariance ``C = E[k kᵀ]`` of the ``W_out`` inputs on generic text (paper §3; MEMIT's ``layer_stats``):
the uncentred second moment over all non-padding tokens, streamed in batches, accumulated in float64 and cached
on disk as safetensors keyed by (model, layers, corpus)."""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from iclr25.common.io import atomic_write_with

from . import checks as check
from .memories import MemoryLayer, _forward_until, model_fingerprint, resolve_layers


def _corpus_hash(texts) -> str:
    h = hashlib.sha256()
    if isinstance(texts, torch.Tensor):
        h.update(texts.cpu().numpy().tobytes())
        h.update(str(tuple(texts.shape)).encode())
    else:
        for t in texts:
            h.update(t.encode())
            h.update(b"\0")
    return h.hexdigest()[:16]


def cache_key(model, layers: Sequence[MemoryLayer], texts, max_length: int) -> str:
    h = hashlib.sha256()
    h.update(model_fingerprint(model).encode())
    h.update(",".join(m.name for m in layers).encode())
    h.update(_corpus_hash(texts).encode())
    h.update(str(max_length).encode())
    return h.hexdigest()[:24]


@torch.no_grad()
def _vocab_size(model) -> int | None:
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    return None if emb is None else int(emb.weight.shape[0])


def key_covariance(
    model,
    layers: Sequence[int | str],
    texts: Sequence[str] | torch.Tensor,
    tokenizer=None,
    batch_size: int = 16,
    max_length: int = 256,
    cache_dir: str | Path | None = None,
) -> dict[int, torch.Tensor]:
    """``{layer: C}`` with ``C = E[k kᵀ]`` (float64, (d_k, d_k)) over every non-padding token of ``texts``.

    ``texts``: strings (then ``tokenizer`` is required; truncated to ``max_length`` tokens) or a
    ``(n, L)`` LongTensor of token ids. With ``cache_dir`` the result is stored as
    ``law_cov_<hash>.safetensors`` and read back on the next call with the same model weights, layers and corpus.
    """
    mls = resolve_layers(model, layers)
    if isinstance(texts, torch.Tensor):
        if texts.ndim != 2 or texts.dtype != torch.long:
            raise ValueError(
                f"texts as a tensor must be a (n, L) LongTensor, got {tuple(texts.shape)} {texts.dtype}"
            )
        if texts.shape[0] == 0:
            raise ValueError("texts must hold at least one sequence")
        check.token_ids("texts", texts, _vocab_size(model))
    else:
        texts = list(texts)
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError("texts must be a non-empty list of strings or a (n, L) LongTensor of token ids")
        if tokenizer is None:
            raise ValueError("tokenizer is required when texts are strings")
    check.batch_size(batch_size)
    check.int_at_least("max_length", max_length, 1)
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"law_cov_{cache_key(model, mls, texts, max_length)}.safetensors"
        if path.exists():
            from safetensors.torch import load_file

            d = load_file(str(path))
            return {m.index: d[m.name] for m in mls}
    dev = next(model.parameters()).device
    sums = {m.index: torch.zeros(m.d_in, m.d_in, dtype=torch.float64, device=dev) for m in mls}
    count = 0
    handles = []
    mask_holder: dict = {}

    for m in mls:

        def pre(mod, args, _i=m.index):
            k = args[0][mask_holder["mask"]].double()  # (tokens, d_k)
            sums[_i].addmm_(k.t(), k)

        handles.append(m.module.register_forward_pre_hook(pre))
    was = model.training
    model.eval()
    try:
        n = texts.shape[0] if isinstance(texts, torch.Tensor) else len(texts)
        for s in range(0, n, batch_size):
            if isinstance(texts, torch.Tensor):
                ids = texts[s : s + batch_size].to(dev)
                am = torch.ones_like(ids)
            else:
                enc = tokenizer(
                    texts[s : s + batch_size],
                    return_tensors="pt",
                    padding=True,
                    truncation=True,
                    max_length=max_length,
                )
                ids, am = enc["input_ids"].to(dev), enc["attention_mask"].to(dev)
            mask_holder["mask"] = am.bool()
            count += int(am.sum())
            # the keys of the deepest edited layer are read once its block has run: the rest is skipped; no
            # autograd graph (a model whose weights require grad would otherwise record one, and C would too)
            with torch.no_grad():
                _forward_until(model, ids, am, max(mls, key=lambda m: m.index).block)
    finally:
        for h in handles:
            h.remove()
        model.train(was)
    if count == 0:
        raise ValueError("texts contain no tokens")
    cov = {i: (v / count).cpu() for i, v in sums.items()}
    for m in mls:
        if not torch.isfinite(cov[m.index]).all():
            raise ValueError(
                f"key covariance of {m.name} is not finite (the model produced NaN/inf activations)"
            )
    if path is not None:
        from safetensors.torch import save_file

        atomic_write_with(path, lambda tmp: save_file({m.name: cov[m.index].contiguous() for m in mls}, tmp))
    return cov


def check_covariance(C: torch.Tensor, name: str = "cov", tol: float = 1e-8) -> torch.Tensor:
    """Validate a covariance: square, finite, symmetric and PSD (up to ``tol``·max|eig|). Returns it in float64.

    A non-PSD matrix is an error (a covariance can never be one); a singular PSD one is allowed here and
    handled where it is used (the ridge ``λC + KKᵀ`` or a warning).
    """
    check.number("tol", tol, 0.0)
    if not isinstance(C, torch.Tensor) or C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got {getattr(C, 'shape', type(C))}")
    C = C.double()
    if not torch.isfinite(C).all():
        raise ValueError(f"{name} contains NaN or inf")
    scale = C.abs().max().clamp_min(1e-300)
    if (C - C.t()).abs().max() > 1e-6 * scale:
        raise ValueError(f"{name} must be symmetric (max asymmetry {(C - C.t()).abs().max():.3g})")
    C = 0.5 * (C + C.t())
    ev = torch.linalg.eigvalsh(C)
    if ev[0] < -tol * ev.abs().max().clamp_min(1e-300) - 1e-12:
        raise ValueError(
            f"{name} must be positive semi-definite (an uncentred second moment E[kkᵀ]); smallest eigenvalue "
            f"{ev[0].item():.3g}"
        )
    if ev[0] <= tol * ev[-1]:
        warnings.warn(
            f"{name} is singular or nearly so (eigenvalues {ev[0].item():.3g} … {ev[-1].item():.3g}); the "
            "closed form relies on λ·C + KKᵀ being invertible — increase lam or the covariance corpus",
            stacklevel=3,
        )
    return C
