import pytest
import torch

from iclr25.budgeted_cl import (
    BlockFlops,
    TinyResNet,
    count_block_flops,
    exemplar_capacity,
    measure_block_flops,
    model_bytes,
    step_flops,
)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyResNet()


def test_analytic_conv_counts_equal_flop_counter(model):
    """Convolution/matmul part of the analytic count == torch FlopCounterMode (halved: FLOPs = 2·MACs)."""
    analytic = count_block_flops(model, (1, 16, 16), elementwise=False)
    measured = measure_block_flops(model, torch.randn(4, 1, 16, 16))
    assert analytic.forward == pytest.approx(measured.forward, rel=1e-9)
    full = count_block_flops(model, (1, 16, 16))
    assert all(f >= a for f, a in zip(full.forward, analytic.forward, strict=True))  # + BN / ReLU / pool


def test_measured_backward_ratios(model):
    """Measured backward ≈ 2× forward for inner blocks, ≈ 1× for the stem (no input gradient)."""
    m = measure_block_flops(model, torch.randn(4, 1, 16, 16))
    ratios = [b / f for f, b in zip(m.forward, m.backward, strict=True)]
    assert ratios[0] == pytest.approx(1.0, rel=0.1)
    for r in ratios[1:]:
        assert r == pytest.approx(2.0, rel=0.1)


def test_step_flops_freezing_formula(model):
    bf = count_block_flops(model, (1, 16, 16))
    F, B = sum(bf.forward), sum(bf.backward)
    assert step_flops(bf, 16, 0) == pytest.approx(16 * (F + B))
    for n in range(bf.n_blocks + 1):
        assert step_flops(bf, 16, n) == pytest.approx(16 * (F + B - sum(bf.backward[:n])))
    with pytest.raises(ValueError, match="n_frozen"):
        step_flops(bf, 16, bf.n_blocks + 1)  # the head can never be frozen
    # convention of the official counter: conv/linear backward = 2× forward
    conv_only = count_block_flops(model, (1, 16, 16), elementwise=False)
    assert conv_only.backward == pytest.approx(tuple(2 * f for f in conv_only.forward))


def test_exemplar_capacity_examples():
    """Bytes accounting (MEMO convention): 40 960 B of 256 B images → 160; with 10 float logits each → 138; extra model copy costs its bytes."""
    mb = 400_000
    assert exemplar_capacity(mb + 40_960, mb, 256) == 160
    assert exemplar_capacity(mb + 40_960, mb, 256, extra_bytes_per_exemplar=4 * 10) == 138
    assert exemplar_capacity(2 * mb + 40_960, mb, 256, extra_models=1) == 160
    assert exemplar_capacity(mb + 100, mb, 256) == 0
    with pytest.raises(ValueError, match="bytes_per_image"):
        exemplar_capacity(1000, 10, 0)


def test_model_bytes_counts_fp32_params(model):
    n = sum(p.numel() for p in model.parameters())
    assert model_bytes(model) >= 4 * n
    assert 80_000 < n < 120_000  # ≈ 0.1 M params (README, "Reproduction")


def test_blockflops_validation():
    with pytest.raises(ValueError, match="equal length"):
        BlockFlops((1.0, 2.0), (1.0,))
