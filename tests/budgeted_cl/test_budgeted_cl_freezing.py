import pytest
import torch
from torch.nn import functional as F

from iclr25.budgeted_cl import (
    AdaptiveLayerFreezer,
    BlockFlops,
    bfc_decision,
    feature_grad_norm,
    info_per_compute,
)

BF = BlockFlops((1, 2, 2, 2, 0.5), (2, 4, 4, 4, 1))
PHI = torch.tensor([0.5, 1.0, 2.0, 4.0])


def test_info_per_compute_worked_example():
    """Eq. 3 on a hand-computed example (official stem handling)."""
    ipc = info_per_compute(PHI, BF, "code")
    assert ipc.tolist() == pytest.approx([1.0, 1.0, 1.0783, 0.9689, 0.0], abs=1e-4)


@pytest.mark.parametrize(("b_t", "n"), [(0.5, 3), (1.0, 2), (2.0, 0)])
def test_bfc_decision_worked_example(b_t, n):
    assert bfc_decision(PHI, BF, b_t, "code") == n


@pytest.mark.parametrize("mode", ["code", "paper"])
def test_decision_non_increasing_in_informativeness(mode):
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        phi = torch.rand(4, generator=g) + 0.01
        ns = [bfc_decision(phi, BF, float(b), mode) for b in torch.linspace(0.0, 5.0, 60)]
        assert all(a >= b for a, b in zip(ns, ns[1:], strict=False))
        assert max(ns) <= BF.n_blocks  # the head is never frozen


def test_paper_mode_uses_all_blocks():
    ipc = info_per_compute(PHI, BF, "paper")
    uc = BF.unit
    share1 = (PHI.sum() - PHI[0]) / PHI.sum()
    assert ipc[1].item() == pytest.approx(share1.item() * uc / (uc - 2.0))
    assert ipc[0].item() == pytest.approx(1.0)


def test_code_mode_never_freezes_stem_alone():
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        phi = torch.rand(4, generator=g)
        assert bfc_decision(phi, BF, float(torch.rand((), generator=g) * 3), "code") != 1


def test_feature_grad_norm_matches_autograd():
    torch.manual_seed(0)
    x = torch.randn(6, 5, requires_grad=True)
    W = torch.randn(4, 5)
    y = torch.randint(0, 4, (6,))
    z = x @ W.T
    loss = F.cross_entropy(z, y, reduction="sum")
    (gx,) = torch.autograd.grad(loss, x)
    assert feature_grad_norm(z, y, W).item() == pytest.approx(gx.pow(2).sum().item(), rel=1e-5)


def test_freezer_warmup_exploration_and_fisher_ema():
    f = AdaptiveLayerFreezer(BF, fisher_rate=0.5, unfreeze_rate=0.0, warmup_steps=3)
    assert [f.decide(0.1) for _ in range(3)] == [0, 0, 0]  # warm-up (and no Fisher yet)
    f.update_fisher(PHI * 2)
    assert f.phi.tolist() == pytest.approx((PHI).tolist())  # φ ← φ + r(x − φ), r = 0.5 from 0
    assert f.decide(0.5) == bfc_decision(f.phi, BF, 0.5)
    always = AdaptiveLayerFreezer(BF, unfreeze_rate=1.0, warmup_steps=0)
    always.update_fisher(PHI)
    assert all(always.decide(0.01) == 0 for _ in range(10))
    periodic = AdaptiveLayerFreezer(BF, exploration="periodic", period=2, warmup_steps=0)
    periodic.update_fisher(PHI)
    d = [periodic.decide(0.5) for _ in range(4)]
    assert d[0] == 0 and d[2] == 0 and d[1] > 0


def test_informativeness_ratio_to_ema():
    f = AdaptiveLayerFreezer(BF, grad_ema_rate=0.5)
    W = torch.eye(3)
    z = torch.tensor([[2.0, 0.0, 0.0]])
    y = torch.tensor([0])
    assert f.informativeness(z, y, W) == pytest.approx(1.0)  # first value initialises the EMA
    b = f.informativeness(z, torch.tensor([1]), W)  # a wrong prediction → larger gradient → b_t > 1
    assert b > 1.0


def test_freezer_validation():
    with pytest.raises(ValueError, match="unfreeze_rate"):
        AdaptiveLayerFreezer(BF, unfreeze_rate=1.5)
    with pytest.raises(ValueError, match="stem_mode"):
        info_per_compute(PHI, BF, "bogus")
    with pytest.raises(ValueError, match="phi"):
        info_per_compute(torch.ones(3), BF)


def test_depth_is_adaptive_only_when_some_prefix_is_cheap_information():
    """BFC (Eq. 4) picks intermediate prefixes when the Fisher per backward FLOP grows with depth ((I/C)_n > 1 for
    some n); when it falls with depth (what the digits runs measure) the decision is 0 or L for every b_t."""
    bf = BlockFlops(forward=(1.0, 2.0, 2.0, 2.0, 2.0, 0.5), backward=(2.0, 4.0, 4.0, 4.0, 4.0, 1.0))
    b_grid = torch.linspace(0.0, 2.0, 201).tolist()
    back_loaded = torch.tensor([0.1, 0.5, 1.0, 2.0, 4.0])
    depths = {bfc_decision(back_loaded, bf, b) for b in b_grid}
    assert max(info_per_compute(back_loaded, bf)) > 1.0
    assert depths & {2, 3, 4}, depths  # intermediate prefixes are chosen for some informativeness
    front_loaded = torch.tensor([0.04, 0.33, 0.37, 0.22, 0.04])  # the measured digits profile
    assert max(info_per_compute(front_loaded, bf)) == pytest.approx(1.0)
    assert {bfc_decision(front_loaded, bf, b) for b in b_grid} == {0, 5}
