"""Quantised base layers (QLoRA-style): bitsandbytes ``Linear4bit`` / ``Linear8bitLt`` under a Quantum-PEFT adapter.

The adapter never touches the quantised weight in the forward pass (``y = base(x) + s·U(λ ⊙ Vᵀx)``, the update in
fp32), so any bitsandbytes layer that runs on the machine can be wrapped. Merging needs the weight as a dense
matrix: it is dequantised, ΔW added, and re-quantised — as PEFT's LoRA does for the same layers; the result is
rounded to the quantisation grid again, so merged outputs differ slightly from unmerged ones.

The helpers here detect a bitsandbytes layer by its weight class (``Params4bit`` / ``Int8Params``), so nothing is
imported unless such a layer is present; other quantised linear layers (a ``torch.nn.Linear`` subclass with an
integer weight that is not bitsandbytes') are refused by :func:`unsupported_quantised`.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

BNB_LAYERS = ("Linear4bit", "Linear8bitLt")  # the bitsandbytes classes PEFT's LoRA wraps; so do we


def bnb_kind(module: nn.Module) -> str | None:
    """``"4bit"`` / ``"8bit"`` for a bitsandbytes layer whose weight is quantised, else None."""
    w = getattr(module, "weight", None)
    cls = type(w).__name__
    if cls == "Params4bit":
        return "4bit"
    if cls == "Int8Params" and not w.dtype.is_floating_point:  # has_fp16_weights=True keeps a float weight
        return "8bit"
    return None


def unsupported_quantised(module: nn.Module) -> str | None:
    """Why a linear-like ``module`` with a quantised weight cannot be wrapped (None when it can)."""
    w = getattr(module, "weight", None)
    if not isinstance(w, torch.Tensor) or w.dtype.is_floating_point or bnb_kind(module) is not None:
        return None
    return (
        f"{type(module).__name__} holds a {w.dtype} weight of class {type(w).__name__}; of the quantised layers "
        f"only bitsandbytes {' / '.join(BNB_LAYERS)} are supported"
    )


def dequantize(module: nn.Module) -> torch.Tensor:
    """The dense (out, in) weight of a bitsandbytes layer (in the layer's compute dtype for 4-bit, fp32 for 8-bit)."""
    import bitsandbytes as bnb

    w = module.weight
    if bnb_kind(module) == "4bit":
        return bnb.functional.dequantize_4bit(w.data, w.quant_state)
    state = module.state
    scb = state.SCB if state.SCB is not None else w.SCB
    if hasattr(bnb.functional, "int8_vectorwise_dequant"):  # bitsandbytes >= 0.45
        return bnb.functional.int8_vectorwise_dequant(w.data, scb.to(w.device))
    return w.data * scb.to(w.device).view(-1, 1) * (1.0 / 127.0)  # pragma: no cover - old bitsandbytes


def requantize(module: nn.Module, dense: torch.Tensor) -> None:
    """Replace the weight of a bitsandbytes layer by ``dense`` (out, in), quantised with the layer's settings."""
    import bitsandbytes as bnb

    w = module.weight
    if bnb_kind(module) == "4bit":
        kw = {k: v for k, v in w.__dict__.items() if not k.startswith("_") and k != "data"}
        if "bnb_quantized" in kw:
            kw["bnb_quantized"] = False
        kw["requires_grad"] = False
        module.weight = bnb.nn.Params4bit(dense.to("cpu"), **kw).to(w.device)
        return
    module.weight = bnb.nn.Int8Params(
        dense.to("cpu"), requires_grad=False, has_fp16_weights=w.has_fp16_weights
    ).to(w.device)
    module.state.reset_grads()


def add_to_quantised(module: nn.Module, delta: torch.Tensor) -> None:
    """W ← Q(deq(W) + ΔW) for a bitsandbytes layer; ``delta`` is (out, in)."""
    kind = bnb_kind(module)
    warnings.warn(
        f"merging into a bitsandbytes {kind} weight re-quantises it: outputs can differ slightly from the "
        "unmerged adapter (rounding), as with PEFT's LoRA",
        stacklevel=3,
    )
    dense = dequantize(module)
    requantize(module, (dense.float() + delta.float().to(dense.device)).to(dense.dtype))
