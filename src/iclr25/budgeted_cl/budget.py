"""Budget accounting: training FLOPs per block (forward, backward, freezing savings) and memory in bytes.

FLOPs follow the official code's modified-ptflops convention (MAC-style counts, per sample; the paper's computational budget, §4 setup):

* Conv2d  fwd = K²·(C_in/groups)·C_out·H_out·W_out (+ C_out·H_out·W_out bias), bwd = 2·fwd
* Linear  fwd = in·out (+ out bias), bwd = 2·fwd
* BatchNorm fwd = 7·N, bwd = 15·N (N = output elements);  ReLU / pooling fwd = bwd = N

A training step on a batch of b samples with blocks 0..n−1 frozen costs b·(F + B − Σ_{i<n} B_i) where
F = Σ_i F_i and B = Σ_i B_i over all blocks and the head (a frozen prefix needs no backward at all).
``measure_block_flops`` cross-checks the convolution / matmul part with ``torch.utils.flop_counter``.

Memory (the paper's MEMO convention, Zhou et al. 2023): total bytes = model parameters (4 B each) + every stored exemplar
(raw uint8 image) + every extra stored item (logits, use counts, extra model copies, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

__all__ = [
    "BlockFlops",
    "count_block_flops",
    "measure_block_flops",
    "step_flops",
    "model_bytes",
    "per_sample_fisher_share",
    "exemplar_capacity",
    "FLOAT_BYTES",
]

FLOAT_BYTES = 4


@dataclass(frozen=True)
class BlockFlops:
    """Per-sample forward/backward FLOPs of each block; the last entry is the head (pool + fc), never frozen."""

    forward: tuple[float, ...]
    backward: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.forward) != len(self.backward) or len(self.forward) < 2:
            raise ValueError(
                f"forward and backward must have equal length >= 2 (blocks + head), got "
                f"{len(self.forward)} and {len(self.backward)}"
            )

    @property
    def n_blocks(self) -> int:
        """Number of freezable blocks (head excluded)."""
        return len(self.forward) - 1

    @property
    def unit(self) -> float:
        """UC: FLOPs of one full forward + backward of one sample, Σ_i (F_i + B_i)."""
        return float(sum(self.forward) + sum(self.backward))

    def saved(self, n_frozen: int) -> float:
        """Σ_{i<n} B_i: backward FLOPs per sample not spent when the first ``n_frozen`` blocks are frozen."""
        if not 0 <= n_frozen <= self.n_blocks:
            raise ValueError(f"n_frozen must be in [0, {self.n_blocks}], got {n_frozen}")
        return float(sum(self.backward[:n_frozen]))


def _leaf_flops(m: nn.Module, out: torch.Tensor, elementwise: bool = True) -> tuple[float, float]:
    n = out[0].numel()  # per-sample output elements
    if isinstance(m, nn.Conv2d):
        k = m.kernel_size[0] * m.kernel_size[1] * (m.in_channels // m.groups)
        f = k * n + (n if m.bias is not None and elementwise else 0)
        return f, 2.0 * f
    if isinstance(m, nn.Linear):
        f = m.in_features * m.out_features + (m.out_features if m.bias is not None and elementwise else 0)
        return f, 2.0 * f
    if not elementwise:
        return 0.0, 0.0
    if isinstance(m, nn.modules.batchnorm._BatchNorm):
        return 7.0 * n, 15.0 * n
    if isinstance(m, (nn.ReLU, nn.AdaptiveAvgPool2d, nn.AvgPool2d, nn.MaxPool2d)):
        return float(n), float(n)
    return 0.0, 0.0


def _block_modules(model: nn.Module) -> list[list[nn.Module]]:
    groups = [[b] for b in model.blocks]
    head = [model.head]
    if hasattr(model, "pool"):
        head.insert(0, model.pool)
    groups.append(head)
    return groups


@torch.no_grad()
def count_block_flops(model: nn.Module, input_shape: Sequence[int], elementwise: bool = True) -> BlockFlops:
    """Analytic per-sample FLOPs of each block of a block-structured model (``blocks`` + ``pool``/``head``).

    ``input_shape`` is one sample's shape, e.g. (1, 16, 16). Counts are independent of the batch size.
    ``elementwise=False`` counts convolution / matmul multiply-adds only, no bias (what ``FlopCounterMode`` sees).
    """
    if len(input_shape) < 1 or any(int(s) < 1 for s in input_shape):
        raise ValueError(
            f"input_shape must be a positive sample shape like (C, H, W), got {tuple(input_shape)}"
        )
    fwd = [0.0] * (len(model.blocks) + 1)
    bwd = [0.0] * (len(model.blocks) + 1)
    hooks = []
    for gi, group in enumerate(_block_modules(model)):
        for top in group:
            for m in top.modules():
                if len(list(m.children())) > 0:
                    continue

                def hook(mod, _inp, out, gi=gi):
                    f, b = _leaf_flops(mod, out, elementwise)
                    fwd[gi] += f
                    bwd[gi] += b

                hooks.append(m.register_forward_hook(hook))
    was_training = model.training
    model.eval()
    try:
        dev = next(model.parameters()).device
        model(torch.zeros(1, *[int(s) for s in input_shape], device=dev))
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    return BlockFlops(tuple(fwd), tuple(bwd))


def measure_block_flops(model: nn.Module, x: torch.Tensor) -> BlockFlops:
    """Per-sample block FLOPs measured by ``torch.utils.flop_counter.FlopCounterMode`` (conv/matmul only).

    Each block is run in isolation on its real input (captured from one forward of ``x``): forward, then backward
    from a random output gradient, each under its own ``FlopCounterMode``. The block input requires grad except
    for the stem (the image needs no gradient), so the stem's measured backward is ≈ 1× forward while inner
    blocks' is ≈ 2×. FlopCounterMode counts 2 FLOPs per multiply-add, so its numbers are halved to
    match the MAC-style convention of :func:`count_block_flops`. (Per-module attribution of the backward inside a
    single whole-model pass is unreliable, hence the isolation.)
    """
    was_training = model.training
    model.train()
    inputs: list[torch.Tensor] = []
    try:
        with torch.no_grad():
            h = x
            for b in model.blocks:
                inputs.append(h)
                h = b(h)
            inputs.append(model.pool(h) if hasattr(model, "pool") else h)
        parts: list[nn.Module] = [*model.blocks, model.head]
        fwd, bwd = [], []
        for i, (mod, inp) in enumerate(zip(parts, inputs, strict=True)):
            inp = inp.flatten(1) if mod is model.head else inp
            inp = inp.detach().clone().requires_grad_(i > 0)
            with FlopCounterMode(display=False) as fc:
                out = mod(inp)
            gout = torch.randn_like(out)
            with FlopCounterMode(display=False) as bc:
                out.backward(gout)
            fwd.append(fc.get_total_flops() / 2.0 / x.shape[0])
            bwd.append(bc.get_total_flops() / 2.0 / x.shape[0])
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    return BlockFlops(tuple(fwd), tuple(bwd))


def step_flops(bf: BlockFlops, batch: int, n_frozen: int = 0) -> float:
    """FLOPs of one training step: b·(F + B − Σ_{i<n} B_i)."""
    if batch < 0:
        raise ValueError(f"batch must be >= 0, got {batch}")
    return batch * (bf.unit - bf.saved(n_frozen))


def model_bytes(model: nn.Module, bytes_per_param: int = FLOAT_BYTES) -> int:
    """Bytes of the model's parameters (fp32: 4 B each); buffers such as BN statistics are included too."""
    n = sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for b in model.buffers() if b.is_floating_point()
    )
    return int(n * bytes_per_param)


def exemplar_capacity(
    total_bytes: int,
    model_bytes: int,
    bytes_per_image: int,
    extra_bytes_per_exemplar: int = 0,
    fixed_extra_bytes: int = 0,
    extra_models: int = 0,
) -> int:
    """Exemplars that fit the memory budget.

    ⌊(total − model·(1 + extra_models) − fixed_extra) / (bytes_per_image + extra_per_exemplar)⌋, e.g. a budget
    leaving 40 960 B for 256 B images keeps 160 exemplars, or 138 when each also stores 10 float logits (40 B).
    """
    for name, v in (
        ("total_bytes", total_bytes),
        ("model_bytes", model_bytes),
        ("bytes_per_image", bytes_per_image),
    ):
        if v <= 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if extra_bytes_per_exemplar < 0 or fixed_extra_bytes < 0 or extra_models < 0:
        raise ValueError(
            "extra_bytes_per_exemplar, fixed_extra_bytes and extra_models must be >= 0, got "
            f"{extra_bytes_per_exemplar}, {fixed_extra_bytes}, {extra_models}"
        )
    left = total_bytes - model_bytes * (1 + extra_models) - fixed_extra_bytes
    if left <= 0:
        return 0
    return int(math.floor(left / (bytes_per_image + extra_bytes_per_exemplar)))


def per_sample_fisher_share(model: nn.Module, data, bf: BlockFlops) -> float:
    """FLOPs of one per-sample Fisher update (the paper's estimator: every block weight's per-sample gradient,
    fan_out·fan_in·P multiply-adds per layer and sample, + 2 per parameter) as a share of a full training step.
    ``model`` has ``blocks``, ``data`` gives ``sample_shape`` and ``bf`` is the model's :func:`count_block_flops`."""
    macs: list[float] = []
    hooks = [
        m.register_forward_hook(lambda mod, i, o: macs.append(mod.weight.numel() * o[0, 0].numel()))
        for blk in model.blocks
        for m in blk.modules()
        if isinstance(m, (nn.Conv2d, nn.Linear))
    ]
    with torch.no_grad():
        model.eval()
        model(torch.zeros(1, *data.sample_shape))
    for h in hooks:
        h.remove()
    params = sum(p.numel() for blk in model.blocks for p in blk.parameters())
    return float((sum(macs) + 2.0 * params) / bf.unit)
