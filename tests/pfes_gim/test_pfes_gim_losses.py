"""IAC = SupCon with unit weights (naive reference), weights, invariances; the spotting loss terms."""

import math

import pytest
import torch

from iclr25.pfes_gim import (
    LossConfig,
    focal_apex_loss,
    hard_pseudo_labels,
    iac_loss,
    negatives,
    spotting_loss,
)


def _naive_iac(f, lab, inten, tau=0.5, tau_b=0.07, unit=False):
    """Loop-by-loop SupCon (Khosla et al. 2020, 'out' form) with the intensity pair weights."""
    n = f.shape[0]
    total = 0.0
    for i in range(n):
        z = [float(f[i] @ f[j]) / tau for j in range(n)]
        zmax = max(z)
        z = [x - zmax for x in z]

        def w(i, j):
            if unit:
                return 1.0
            li, lj, d = int(lab[i]), int(lab[j]), abs(float(inten[i]) - float(inten[j]))
            if li == 0 and lj == 0:
                return 1.0
            if li == lj:
                return 1.0 - d
            return d

        den = sum(w(i, k) * math.exp(z[k]) for k in range(n) if k != i)
        pos = [j for j in range(n) if j != i and int(lab[j]) == int(lab[i])]
        lp = [math.log(w(i, j) + 1e-6) + z[j] - math.log(den + 1e-6) for j in pos]
        total += sum(lp) / (len(pos) + 1e-6)
    return -(tau / tau_b) * total / n


def _batch(n=14, seed=0):
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(n, 5, generator=g)
    lab = torch.randint(0, 3, (n,), generator=g)
    inten = torch.where(lab > 0, torch.rand(n, generator=g), torch.zeros(n))
    return f, lab, inten


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_iac_matches_naive_reference(seed):
    f, lab, inten = _batch(seed=seed)
    assert float(iac_loss(f, lab, inten)) == pytest.approx(_naive_iac(f, lab, inten), rel=1e-5, abs=1e-5)


def test_iac_with_unit_weights_is_supcon():
    f, lab, inten = _batch(seed=3)
    f = torch.nn.functional.normalize(f, dim=1)  # SupCon's usual input; keeps the 1e-6 guards negligible
    got = float(iac_loss(f, lab, inten, unit_weights=True))
    assert got == pytest.approx(_naive_iac(f, lab, inten, unit=True), rel=1e-5)
    # textbook SupCon (no 1e-6 guards) agrees
    z = f @ f.T / 0.5
    off = ~torch.eye(len(f), dtype=torch.bool)
    logp = z - torch.logsumexp(z.masked_fill(~off, -float("inf")), 1, keepdim=True)
    pos = (lab[:, None] == lab[None]) & off
    ref = -(0.5 / 0.07) * ((logp * pos).sum(1) / pos.sum(1)).mean()
    assert got == pytest.approx(float(ref), rel=1e-4)


def test_iac_permutation_invariant_and_finite_with_singletons():
    f, lab, inten = _batch(seed=4)
    perm = torch.randperm(len(f), generator=torch.Generator().manual_seed(9))
    assert float(iac_loss(f[perm], lab[perm], inten[perm])) == pytest.approx(
        float(iac_loss(f, lab, inten)), rel=1e-5
    )
    lab1 = torch.tensor([0, 0, 0, 1, 2])  # MaE and ME have one member each
    out = iac_loss(f[:5], lab1, torch.tensor([0, 0, 0, 0.7, 0.4]))
    assert torch.isfinite(out)
    assert float(iac_loss(f[:0], lab1[:0], lab1[:0].float())) == 0.0


def test_iac_pulls_same_class_together():
    f, lab, inten = _batch(n=20, seed=5)
    f = f.clone().requires_grad_(True)
    opt = torch.optim.SGD([f], lr=0.05)
    first = float(iac_loss(f, lab, inten).detach())
    for _ in range(50):
        opt.zero_grad()
        iac_loss(f, lab, inten).backward()
        opt.step()
    assert float(iac_loss(f, lab, inten).detach()) < first


def test_iac_bad_input():
    f, lab, inten = _batch()
    with pytest.raises(ValueError, match="features"):
        iac_loss(f[0], lab, inten)
    with pytest.raises(ValueError, match="N="):
        iac_loss(f, lab[:3], inten)


def test_focal_loss_ignores_minus_one_and_matches_formula():
    q = torch.tensor([0.9, 0.2, 0.5, 0.7])
    y = torch.tensor([1.0, 0.0, -1.0, 0.0])
    ref = (
        -(
            0.9 * 0.1 * math.log(0.9 + 1e-5)
            + 0.1 * 0.05 * math.log(0.8 + 1e-5)
            + 0.1 * 0.45 * math.log(0.3 + 1e-5)
        )
        / 4
    )
    assert float(focal_apex_loss(q, y, alpha=0.9)) == pytest.approx(ref, rel=1e-5)


def test_negatives_are_most_confident_unlabelled_frames():
    T = 30
    a = torch.linspace(0, 1, T)
    pl = hard_pseudo_labels([25], [1], T)  # 6 labelled frames 22..27
    neg = negatives(a, pl.soft)
    assert sorted(neg.tolist()) == list(range(6))  # K = min(24, 6) frames with the lowest a
    assert not (pl.soft[neg].sum(-1) > 0).any()


def test_spotting_loss_terms_and_gradients():
    T = 60
    a = torch.rand(T, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    q = torch.rand(T, 2, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
    f = torch.randn(T, 6, generator=torch.Generator().manual_seed(2)).requires_grad_(True)
    pl = hard_pseudo_labels([20, 45], [0, 1], T)
    out = spotting_loss(a, q, f, pl, itr=6, cfg=LossConfig(lambda_iac=0.1))
    out["total"].backward()
    assert all(torch.isfinite(v) for v in out.values())
    assert a.grad.abs().sum() > 0 and q.grad.abs().sum() > 0 and f.grad.abs().sum() > 0
    out0 = spotting_loss(a, q, f, pl, itr=0, cfg=LossConfig(lambda_iac=0.0))
    assert float(out0["apex"]) == 0.0 and float(out0["iac"]) == 0.0  # no apex loss before epoch 5
    d = a.detach()
    assert float(out0["smooth"]) == pytest.approx(float((d[1:] - d[:-1]).abs().mean()), rel=1e-6)
    signed = spotting_loss(a, q, f, pl, 0, LossConfig(smooth="signed"))["smooth"]
    assert float(signed) == pytest.approx(float((d[-1] - d[0]) / (T - 1)), rel=1e-5)


def test_reward_guarded_on_empty_sets():
    T = 40
    a = torch.rand(T)
    pl = hard_pseudo_labels([10], [0], T)  # no ME instance → empty ME set contributes 0, not NaN
    out = spotting_loss(a, torch.rand(T, 2), torch.randn(T, 3), pl, itr=7)
    assert torch.isfinite(out["reward"]) and float(out["reward"]) == pytest.approx(
        -0.4 * float(a[5:15].mean()), rel=1e-5
    )


def test_loss_config_validation():
    with pytest.raises(ValueError, match="lambda_iac"):
        LossConfig(lambda_iac=-1.0)
    with pytest.raises(ValueError, match="lambda_sparsity"):
        LossConfig(lambda_sparsity=float("nan"))
    with pytest.raises(ValueError, match="smooth"):
        LossConfig(smooth="l2")
