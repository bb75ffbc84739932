"""Per-sample weight gradients of Conv2d / Linear layers from one ordinary batched backward pass.

A forward hook stores each target layer's input x and a tensor hook its output gradient G = ∂L/∂out. For a conv
layer with unfolded input U = unfold(x) (batch, C_in·K², P) and G reshaped to (batch, C_out, P), sample n's weight
gradient is G_n U_nᵀ (batch, C_out, C_in·K²); summing over n gives the ordinary batch gradient (the role of
autograd_hacks' ``grad1`` in the official code; BN couples samples, whose cross terms are ignored as there).
Selected entries only (SAR's random subsample) cost batch·k·P multiply-adds.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F


class PerSampleGradCapture:
    """Capture inputs and output-gradients of ``modules`` while ``enabled``; layers whose backward did not run
    (e.g. inside a frozen block pruned from the graph) report ``has_grad(m) = False``."""

    def __init__(self, modules: Sequence[nn.Module]):
        for m in modules:
            if not isinstance(m, (nn.Conv2d, nn.Linear)):
                raise ValueError(f"modules must be Conv2d or Linear layers, got {type(m).__name__}")
        self.modules = list(modules)
        self.enabled = False
        self._x: dict[int, torch.Tensor] = {}
        self._g: dict[int, torch.Tensor] = {}
        self._u: dict[int, torch.Tensor] = {}  # unfolded inputs, computed at most once per step
        self._gather: dict[tuple[int, int, int], torch.Tensor] = {}  # cached gather indices for entry subsets
        self._handles = [m.register_forward_hook(self._fwd) for m in self.modules]

    def _fwd(self, mod: nn.Module, inp: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        if not self.enabled or not out.requires_grad:
            return
        key = id(mod)
        self._x[key] = inp[0].detach()
        self._g.pop(key, None)

        def store(g: torch.Tensor, key: int = key) -> None:
            self._g[key] = g.detach()

        out.register_hook(store)

    def clear(self) -> None:
        self._x.clear()
        self._g.clear()
        self._u.clear()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def has_grad(self, m: nn.Module) -> bool:
        return id(m) in self._g and id(m) in self._x

    def _operands(self, m: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """(U, G): unfolded input (batch, fan_in, P) and output gradient (batch, fan_out, P)."""
        if not self.has_grad(m):
            raise ValueError(f"no gradient captured for layer {m}; was it frozen or was capture disabled?")
        x, g = self._x[id(m)], self._g[id(m)]
        if isinstance(m, nn.Conv2d):
            if id(m) not in self._u:
                self._u[id(m)] = F.unfold(
                    x, m.kernel_size, dilation=m.dilation, padding=m.padding, stride=m.stride
                )
            return self._u[id(m)], g.flatten(2)
        return x.unsqueeze(-1), g.unsqueeze(-1)

    def weight_grads(self, m: nn.Module, scale: float = 1.0) -> torch.Tensor:
        """Per-sample weight gradients, shape (batch, fan_out, fan_in) (conv: fan_in = C_in·K², groups=1)."""
        u, g = self._operands(m)
        return scale * torch.einsum("nop,nkp->nok", g, u)

    def weight_grad_entries(self, m: nn.Module, flat_index: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        """Per-sample gradients of the weight entries ``weight.flatten()[flat_index]``, shape (batch, k).

        For a conv entry (o, c, i, j) this is Σ_p G[n, o, p] · x_pad[n, c, h_p·s + i·d, w_p·s + j·d]: the needed
        input pixels are gathered directly (no full unfold), k·P multiply-adds per sample.
        """
        if not self.has_grad(m):
            raise ValueError(f"no gradient captured for layer {m}; was it frozen or was capture disabled?")
        x, g = self._x[id(m)], self._g[id(m)]
        g = g.flatten(2) if isinstance(m, nn.Conv2d) else g.unsqueeze(-1)  # (batch, C_out, P)
        fan_in = m.weight[0].numel()
        o = flat_index // fan_in
        if isinstance(m, nn.Linear):
            return scale * g[:, o, 0] * x[:, flat_index % fan_in]
        key = (id(m), flat_index.data_ptr(), flat_index.numel())
        ph, pw = m.padding
        xp = F.pad(x, (pw, pw, ph, ph))
        if key not in self._gather:
            kh, kw = m.kernel_size
            sh, sw = m.stride
            dh, dw = m.dilation
            Hp, Wp = xp.shape[-2:]
            Ho = (Hp - dh * (kh - 1) - 1) // sh + 1
            Wo = (Wp - dw * (kw - 1) - 1) // sw + 1
            r = flat_index % fan_in
            c, i, j = r // (kh * kw), (r % (kh * kw)) // kw, r % kw
            hh = torch.arange(Ho, device=x.device)[:, None] * sh
            ww = torch.arange(Wo, device=x.device)[None, :] * sw
            rows = hh[None] + (i * dh)[:, None, None]  # (k, Ho, 1)
            cols = ww[None] + (j * dw)[:, None, None]  # (k, 1, Wo)
            self._gather[key] = (c[:, None, None] * Hp * Wp + rows * Wp + cols).reshape(len(r), -1)  # (k, P)
        idx = self._gather[key]
        vals = xp.flatten(1)[:, idx]  # (batch, k, P)
        return scale * (g[:, o, :] * vals).sum(-1)
