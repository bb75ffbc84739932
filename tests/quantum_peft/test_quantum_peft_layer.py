"""QuantumPEFTLinear: zero-init identity, gradients, merge, quantisation (the update ΔW = s·UΛVᵀ of the paper)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from iclr25.quantum_peft import QuantumPEFTLinear, count_parameters, node_columns, quantize_angles

F64 = torch.float64


def _linear(m: int, n: int, seed: int = 0, dtype=torch.float32) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(m, n).to(dtype)


@pytest.mark.parametrize("m,n,k,layers", [(8, 4, 2, 1), (12, 6, 3, 2), (64, 96, 2, 1), (5, 7, 1, 0)])
def test_zero_init_is_exact_identity(m: int, n: int, k: int, layers: int) -> None:
    base = _linear(m, n)
    x = torch.randn(3, 5, m)
    y0 = base(x)
    layer = QuantumPEFTLinear(
        base, rank=k, layers=layers, init_std=3.0, generator=torch.Generator().manual_seed(1)
    )
    assert (layer(x) - y0).abs().max().item() == 0.0
    assert layer.n_adapter_params() == count_parameters(m, n, k, layers)
    assert not any(p.requires_grad for p in base.parameters())


def test_rectangular_768_3072_counts_and_shapes() -> None:
    layer = QuantumPEFTLinear(nn.Linear(768, 3072), rank=2, layers=1)
    assert layer.n_adapter_params() == count_parameters(768, 3072, 2, 1)
    u, v = layer.u(), layer.v()
    assert u.shape == (3072, 2) and v.shape == (768, 2)
    for f in (u, v):
        assert (f.T @ f - torch.eye(2)).abs().max() < 1e-5


def test_forward_matches_dense_delta() -> None:
    base = _linear(8, 4, dtype=F64)
    layer = QuantumPEFTLinear(base, rank=2, layers=1, alpha=0.7, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        layer.lam.copy_(torch.tensor([0.5, -1.5], dtype=F64))
    x = torch.randn(6, 8, dtype=F64)
    dw = layer.delta_weight()
    u = node_columns(layer.theta_u, 4, 2, 1)
    v = node_columns(layer.theta_v, 8, 2, 1)
    assert (dw - 0.7 * u @ torch.diag(layer.lam) @ v.T).abs().max() < 1e-14  # ΔW = s·UΛVᵀ
    assert (layer(x) - (base(x) + x @ dw.T)).abs().max() < 1e-13
    # the singular values of ΔW are s·|λ| (U, V orthonormal)
    sv = torch.linalg.svdvals(dw)[:2]
    assert torch.allclose(sv, torch.tensor([1.05, 0.35], dtype=F64), atol=1e-12)


def test_gradients_match_finite_differences() -> None:
    base = _linear(4, 8, dtype=F64)  # N = 8 (out), M = 4 (in), K = 2
    layer = QuantumPEFTLinear(base, rank=2, layers=1, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        layer.lam.normal_(generator=torch.Generator().manual_seed(1))
    x = torch.randn(5, 4, dtype=F64, generator=torch.Generator().manual_seed(2))
    tu, tv, lam = (layer.theta_u.detach().clone(), layer.theta_v.detach().clone(), layer.lam.detach().clone())

    def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        u, v = node_columns(a, 8, 2, 1), node_columns(b, 4, 2, 1)
        return base(x) + ((x @ v) * c) @ u.T

    for t in (tu, tv, lam):
        t.requires_grad_(True)
    assert torch.autograd.gradcheck(f, (tu, tv, lam), eps=1e-6, atol=1e-6)
    # and the module's own autograd agrees with the functional form
    (layer(x) ** 2).sum().backward()
    g = torch.autograd.grad((f(tu, tv, lam) ** 2).sum(), (tu, tv, lam))
    for a, b in zip((layer.theta_u.grad, layer.theta_v.grad, layer.lam.grad), g):
        assert torch.allclose(a, b, atol=1e-12)


def test_every_angle_gets_gradient_after_one_step() -> None:
    base = _linear(16, 32, dtype=F64)
    layer = QuantumPEFTLinear(base, rank=2, layers=2, generator=torch.Generator().manual_seed(0))
    x = torch.randn(64, 16, dtype=F64, generator=torch.Generator().manual_seed(1))
    target = torch.randn(64, 32, dtype=F64, generator=torch.Generator().manual_seed(2))
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    loss = ((layer(x) - target) ** 2).mean()
    loss.backward()
    # Λ = 0 ⇒ zero angle gradients on step 1 (expected: Λ = 0 at init); Λ itself moves
    assert layer.theta_u.grad.abs().max() == 0 and layer.lam.grad.abs().max() > 0
    opt.step()
    opt.zero_grad()
    ((layer(x) - target) ** 2).mean().backward()
    assert (layer.theta_u.grad.abs() > 0).all() and (layer.theta_v.grad.abs() > 0).all()


def test_merge_unmerge_equivalence() -> None:
    base = _linear(64, 32)
    w0 = base.weight.detach().clone()
    layer = QuantumPEFTLinear(base, rank=4, layers=2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        layer.lam.normal_(generator=torch.Generator().manual_seed(3))
    x = torch.randn(10, 64)
    y = layer(x)
    layer.merge()
    layer.merge()  # idempotent
    assert layer.merged and (layer(x) - y).abs().max() < 1e-5
    assert (base.weight - w0).abs().max() > 1e-3
    layer.unmerge()
    assert (base.weight - w0).abs().max() < 1e-6 and (layer(x) - y).abs().max() < 1e-6


def test_angle_quantisation_grid_and_ste() -> None:
    theta = torch.linspace(-10, 10, 101, dtype=F64, requires_grad=True)
    q = quantize_angles(theta, 4)
    step = 2 * math.pi / 16
    assert (q >= -math.pi - 1e-12).all() and (q <= math.pi + 1e-12).all()
    assert torch.allclose(q / step, torch.round(q / step), atol=1e-9)
    # same rotation up to quantisation error: |angle difference on the circle| ≤ step / 2
    d = torch.remainder(q - theta + math.pi, 2 * math.pi) - math.pi
    assert d.abs().max() <= step / 2 + 1e-9
    q.sum().backward()
    assert torch.equal(theta.grad, torch.ones_like(theta))
    layer = QuantumPEFTLinear(_linear(8, 8), rank=2, angle_bits=3)
    u = layer.u()
    assert (u.T @ u - torch.eye(2)).abs().max() < 1e-5


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="rank"):
        QuantumPEFTLinear(nn.Linear(4, 3), rank=4)
    with pytest.raises(ValueError, match="base_layer"):
        QuantumPEFTLinear(nn.Conv1d(3, 3, 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="node"):
        QuantumPEFTLinear(nn.Linear(4, 4), node="taylor")
    with pytest.raises(ValueError, match="bits"):
        QuantumPEFTLinear(nn.Linear(4, 4), angle_bits=0)
