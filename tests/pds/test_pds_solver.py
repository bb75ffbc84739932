"""The PMP solver against its defining identities (paper Theorem 2.1 and Algorithm 1: exactness vs unrolled autograd, terminal condition, HVP, invariances)."""

from __future__ import annotations

import pytest
import torch
from torch.func import grad

from iclr25.common.lm import tiny_causal_lm
from iclr25.pds import example_losses, pmp_scores, trainable_params
from iclr25.pds.pmp import _Objective


def unrolled_scores(model, proxy, batches, dev, lr, T, pad_id=None):
    """−∂/∂ε Σ_{t=1..T} J(θ_t) through unrolled SGD θ_{t+1} = θ_t − η(∇L_{B_t} + Σ_n ε_n ∇l(x_n)) (create_graph)."""
    theta = {k: v.detach().clone().requires_grad_(True) for k, v in model.named_parameters()}
    eps = torch.zeros(proxy.shape[0], dtype=torch.float64, requires_grad=True)
    total = 0.0
    for t in range(T):
        L = example_losses(model, theta, batches[t], pad_id).mean()
        L = L + (eps * example_losses(model, theta, proxy, pad_id)).sum()
        g = torch.autograd.grad(L, list(theta.values()), create_graph=True)
        theta = {k: v - lr * gk for (k, v), gk in zip(theta.items(), g)}
        total = total + example_losses(model, theta, dev, pad_id).mean()
    return -torch.autograd.grad(total, eps)[0]


def test_scores_equal_unrolled_autograd_float64(tiny_f64, toy_data):
    d = toy_data
    s = pmp_scores(tiny_f64, d["proxy"], d["batches"], d["dev"], lr=0.3, score_every=1, pad_id=None)
    ref = unrolled_scores(tiny_f64, d["proxy"], d["batches"], d["dev"], 0.3, 5)
    assert s.dtype == torch.float64 and s.shape == (7,)
    assert ref.abs().max() > 1e-3  # non-trivial scores
    assert (s - ref).abs().max() <= 1e-10


def test_hf_llama_matches_unrolled_autograd(toy_data):
    """HF Llama keeps RMSNorm/RoPE internals in float32, so agreement is ~1e-8 relative, not 1e-16."""
    d = {k: v.clamp_min(1) for k, v in toy_data.items()}  # avoid the pad id 0 (see example_losses' note)
    hf = tiny_causal_lm(
        "llama",
        seed=0,
        dtype=torch.float64,
        vocab_size=12,
        hidden=16,
        layers=1,
        heads=2,
        intermediate=32,
        max_positions=16,
    )
    s = pmp_scores(hf, d["proxy"], d["batches"], d["dev"], lr=0.05, score_every=1)
    ref = unrolled_scores(hf, d["proxy"], d["batches"], d["dev"], 0.05, 5, pad_id=0)
    assert (s - ref).abs().max() <= 1e-6 * ref.abs().max()


def test_terminal_condition_T1(tiny_f64, toy_data):
    """T = 1: s_n = η⟨∇J(θ_1), ∇l(x_n, θ_0)⟩, and λ_T = ∇J(θ_T)."""
    d, lr, m = toy_data, 0.2, tiny_f64
    s, trace = pmp_scores(
        m, d["proxy"], d["batches"], d["dev"], lr=lr, steps=1, pad_id=None, return_trace=True
    )
    th0 = trainable_params(m)
    gB = grad(lambda p: example_losses(m, p, d["batches"][0]).mean())(th0)
    th1 = {k: th0[k] - lr * gB[k] for k in th0}
    gJ = grad(lambda p: example_losses(m, p, d["dev"]).mean())(th1)
    ref = torch.stack(
        [
            lr * sum((gl[k] * gJ[k]).sum() for k in th0)
            for gl in (grad(lambda p, x=x: example_losses(m, p, x[None])[0])(th0) for x in d["proxy"])
        ]
    )
    assert (s - ref).abs().max() <= 1e-12
    assert trace.lambda_norms[1] == pytest.approx(
        float(torch.sqrt(sum((v**2).sum() for v in gJ.values()))), rel=1e-12
    )
    assert trace.score_steps == [0]


def test_hvp_matches_finite_differences(tiny_f64, toy_data):
    obj = _Objective(tiny_f64, None, None, torch.device("cpu"))
    th = trainable_params(tiny_f64)
    g = torch.Generator().manual_seed(3)
    v = {k: torch.randn(x.shape, generator=g, dtype=x.dtype) for k, x in th.items()}
    B = toy_data["batches"][0]
    h = obj.hvp(th, B, v)
    e = 1e-5
    gp, _ = obj.grad_and_value({k: th[k] + e * v[k] for k in th}, B)
    gm, _ = obj.grad_and_value({k: th[k] - e * v[k] for k in th}, B)
    fd = torch.cat([((gp[k] - gm[k]) / (2 * e)).flatten() for k in th])
    hv = torch.cat([h[k].flatten() for k in th])
    assert (hv - fd).norm() <= 1e-6 * hv.norm()
    # micro-batch accumulation gives the same HVP
    h2 = _Objective(tiny_f64, None, 1, torch.device("cpu")).hvp(th, B, v)
    assert max((h[k] - h2[k]).abs().max() for k in th) <= 1e-12


def test_chunk_size_and_checkpointing_invariance(tiny_f64, toy_data):
    d = toy_data
    base = pmp_scores(tiny_f64, d["proxy"], d["batches"], d["dev"], lr=0.3, pad_id=None, chunk_size=256)
    one = pmp_scores(tiny_f64, d["proxy"], d["batches"], d["dev"], lr=0.3, pad_id=None, chunk_size=1)
    assert (base - one).abs().max() <= 1e-10
    # default ⌊√T⌋ = 2 checkpoints vs keeping every θ_t vs one segment: re-computation is exact
    for k in (1, 3, 5):
        sk = pmp_scores(tiny_f64, d["proxy"], d["batches"], d["dev"], lr=0.3, pad_id=None, checkpoint_every=k)
        assert torch.equal(sk, base)


def test_proxy_order_invariance_and_small_lr_linearity(tiny_f64, toy_data):
    d = toy_data
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(0))
    s = pmp_scores(tiny_f64, d["proxy"], d["batches"], d["dev"], lr=0.3, pad_id=None)
    sp = pmp_scores(tiny_f64, d["proxy"][perm], d["batches"], d["dev"], lr=0.3, pad_id=None)
    assert (sp - s[perm]).abs().max() <= 1e-12
    r = [
        pmp_scores(tiny_f64, d["proxy"], d["batches"], d["dev"], lr=lr, pad_id=None) / lr
        for lr in (1e-3, 1e-4, 1e-5)
    ]
    d1, d2 = (r[0] - r[1]).abs().max(), (r[1] - r[2]).abs().max()
    assert d2 < 0.2 * d1  # s(η)/η converges as η → 0 (difference shrinks ~10× per decade)


def test_score_every_uses_lambda_before_update(tiny_f64, toy_data):
    """c ≥ T keeps only t = 0: s = η⟨∇l(x, θ_0), λ_1⟩ = −∂ΣJ/∂ε when only the first update is perturbed."""
    d, m, lr = toy_data, tiny_f64, 0.3
    s_c = pmp_scores(m, d["proxy"], d["batches"], d["dev"], lr=lr, pad_id=None, score_every=5)
    s_1 = pmp_scores(m, d["proxy"], d["batches"], d["dev"], lr=lr, pad_id=None, score_every=1)
    theta = {k: v.detach().clone().requires_grad_(True) for k, v in m.named_parameters()}
    eps = torch.zeros(7, dtype=torch.float64, requires_grad=True)
    total = 0.0
    for t in range(5):
        L = example_losses(m, theta, d["batches"][t]).mean()
        if t == 0:
            L = L + (eps * example_losses(m, theta, d["proxy"])).sum()
        g = torch.autograd.grad(L, list(theta.values()), create_graph=True)
        theta = {k: v - lr * gk for (k, v), gk in zip(theta.items(), g)}
        total = total + example_losses(m, theta, d["dev"]).mean()
    ref = -torch.autograd.grad(total, eps)[0]
    assert (s_c - ref).abs().max() <= 1e-10
    assert (s_c - s_1).abs().max() > 1e-6


def test_sdpa_model_scores_equal_the_eager_model(toy_data):
    """An SDPA model (the transformers default) is scored exactly: eager attention only inside the forward-mode
    JVPs / HVPs, SDPA elsewhere, and the model's implementation is restored (#51)."""
    d = {k: v.clamp_min(1) for k, v in toy_data.items()}
    kw = dict(seed=0, dtype=torch.float64, vocab_size=12, hidden=16, layers=1, heads=2, intermediate=32,
              max_positions=16)  # fmt: skip
    eager = tiny_causal_lm("llama", attn_implementation="eager", **kw)
    sdpa = tiny_causal_lm("llama", attn_implementation="sdpa", **kw)
    s_e, tr_e = pmp_scores(eager, d["proxy"], d["batches"], d["dev"], lr=0.05, return_trace=True)
    s_s, tr_s = pmp_scores(sdpa, d["proxy"], d["batches"], d["dev"], lr=0.05, return_trace=True)
    assert sdpa.config._attn_implementation == "sdpa"  # restored
    assert s_e.abs().max() > 1e-4
    # HF Llama keeps float32 internals (RMSNorm / RoPE), so the two kernels agree to ~1e-7 relative, not 1e-16
    assert (s_s - s_e).abs().max() <= 1e-6 * s_e.abs().max()
    assert max(abs(a - b) for a, b in zip(tr_e.dev_losses, tr_s.dev_losses, strict=True)) <= 1e-6
    # without the switch the fused kernel has no forward-AD rule: the JVP part would fail
    from iclr25.pds.pmp import _Objective

    obj = _Objective(sdpa, 0, None, torch.device("cpu"))
    theta = trainable_params(sdpa)
    with pytest.raises((NotImplementedError, RuntimeError)):
        from torch.func import jvp as raw_jvp

        raw_jvp(lambda p: obj.mean_loss(p, d["dev"]), (theta,), (theta,))


def test_model_without_attention_switch_is_rejected(toy_data):
    class NoSwitch(torch.nn.Module):
        class config:  # noqa: N801
            _attn_implementation = "sdpa"

        def forward(self, x):  # pragma: no cover - never reached
            return x

    with pytest.raises(ValueError, match="must be 'eager' for the PMP solver, got 'sdpa'"):
        pmp_scores(NoSwitch(), toy_data["proxy"], toy_data["batches"], toy_data["dev"], lr=0.1)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"lr": 0.0}, "lr"),
        ({"steps": 9}, "trajectory_batches"),
        ({"score_every": 0}, "score_every"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"checkpoint_every": 0}, "checkpoint_every"),
    ],
)
def test_bad_arguments_raise(tiny_f64, toy_data, kw, match):
    args = dict(lr=0.1, pad_id=None) | kw
    with pytest.raises(ValueError, match=match):
        pmp_scores(tiny_f64, toy_data["proxy"], toy_data["batches"], toy_data["dev"], **args)
    with pytest.raises(ValueError, match="proxy_set"):
        pmp_scores(tiny_f64, toy_data["proxy"].float(), toy_data["batches"], toy_data["dev"], lr=0.1)
