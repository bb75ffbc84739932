"""SVF parameterisation: identity at init, spectrum / nuclear norm, parameter counts, gradient path, experts I/O."""

import pytest
import torch
from torch import nn

from iclr25.common.lm import tiny_causal_lm
from iclr25.transformer2 import (
    ATTN_MODULES,
    MLP_MODULES,
    SVFLinear,
    apply_svf,
    count_svf_params,
    get_expert,
    load_expert,
    lora_trainable_params,
    make_lora,
    reset_svf,
    save_expert,
    set_expert,
    svf_disabled,
    svf_parameters,
    using_expert,
)


def _linear(n_out, n_in, dtype, seed=0, bias=True):
    torch.manual_seed(seed)
    lin = nn.Linear(n_in, n_out, bias=bias).to(dtype)
    with torch.no_grad():
        lin.weight.normal_()
    return lin


@pytest.mark.parametrize("shape", [(7, 5), (5, 7)])
def test_paper_mode_identity_at_z_one(shape):
    for dtype, tol in ((torch.float64, 1e-6), (torch.float32, 1e-5)):
        lin = _linear(*shape, dtype)
        svf = SVFLinear(lin, mode="paper")
        assert torch.equal(svf.z.detach(), torch.ones(min(shape), dtype=dtype))
        x = torch.randn(4, shape[1], dtype=dtype)
        assert torch.allclose(svf(x), lin(x), atol=tol, rtol=0)
        assert torch.allclose(svf.merged_weight(), lin.weight, atol=tol, rtol=0)


@pytest.mark.parametrize("c", [-2.0, 0.1, 3.0])
def test_official_mode_constant_z_is_identity(c):
    lin = _linear(6, 9, torch.float32)
    svf = SVFLinear(lin, mode="official")
    with torch.no_grad():
        svf.z.fill_(c)
    assert torch.allclose(svf.merged_weight(), lin.weight, atol=1e-5, rtol=0)


def test_spectrum_and_nuclear_norm():
    lin = _linear(8, 6, torch.float64)
    for mode in ("official", "paper"):
        svf = SVFLinear(lin, mode=mode)
        with torch.no_grad():
            svf.z.copy_(torch.linspace(-1.0, 2.0, 6, dtype=torch.float64))
        m = svf.effective_scale().detach()
        S = svf.S
        want = S * m * ((S.sum() / (S * m).sum()) if mode == "official" else 1.0)
        got = torch.linalg.svdvals(svf.merged_weight().detach())
        assert torch.allclose(
            got, want.abs().sort(descending=True).values, rtol=1e-10, atol=1e-12
        )  # |σ z| in paper mode
        if mode == "official":  # Σσ' == Σσ
            assert abs(float(got.sum() / S.sum()) - 1) < 1e-5
    # same singular vectors: Uᵀ W' V is diagonal
    W = svf.merged_weight().detach()
    D = svf.U.T @ W @ svf.Vh.T
    assert torch.allclose(D, torch.diag(torch.diagonal(D)), atol=1e-10)


def test_parameter_counts_on_llama3_8b_shape_on_meta():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    assert count_svf_params(model, MLP_MODULES) == 393_216
    assert count_svf_params(model, ATTN_MODULES) == 163_840
    apply_svf(model, MLP_MODULES)  # SVFLinear on meta: shapes only
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 393_216
    with torch.device("meta"):
        model2 = LlamaForCausalLM(cfg)
    pm = make_lora(model2, r=16, alpha=32, dropout=0.05, target_modules=ATTN_MODULES)  # PEFT LoraConfig
    assert lora_trainable_params(pm) == 6_815_744


@pytest.mark.parametrize("mode", ["official", "paper"])
def test_finite_difference_gradient_of_z(mode):
    lin = _linear(5, 4, torch.float64, seed=3)
    svf = SVFLinear(lin, mode=mode, noise_std=0.3, generator=torch.Generator().manual_seed(1))
    x = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))

    def loss(z):
        W = svf.compose(svf.effective_scale(z))
        return torch.tanh(x @ W.T + lin.bias).pow(2).sum()

    z0 = svf.z.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(z0), z0)
    eps = 1e-6
    fd = torch.stack(
        [
            (loss(z0.detach() + eps * e) - loss(z0.detach() - eps * e)) / (2 * eps)
            for e in torch.eye(len(z0), dtype=torch.float64)
        ]
    )
    assert torch.allclose(g, fd, atol=1e-6, rtol=0)
    # and through the module's forward (the z Parameter gets the same gradient)
    torch.tanh(svf(x)).pow(2).sum().backward()
    assert torch.allclose(svf.z.grad, g, atol=1e-10)


def test_apply_svf_on_tiny_llama_names_freeze_reset_and_io(tmp_path):
    model = tiny_causal_lm("llama", seed=0, vocab_size=32, hidden=16, layers=2, heads=2, intermediate=48)
    ids = torch.randint(0, 32, (3, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(input_ids=ids).logits
    apply_svf(model, MLP_MODULES, seed=1)
    params = svf_parameters(model)
    assert len(params) == 6 and sum(p.numel() for p in params) == 2 * (16 + 16 + 16)
    assert all(not p.requires_grad for n, p in model.named_parameters() if not n.endswith(".z"))
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, ref, atol=1e-3)  # init ≈ identity (noise 0.01)
        with svf_disabled(model):
            assert torch.equal(model(input_ids=ids).logits, ref)  # exact base weights
    e0 = get_expert(model)
    with torch.no_grad():
        for p in params:
            p.add_(torch.linspace(-1, 1, p.numel()))
    e1 = get_expert(model)
    path = save_expert(e1, tmp_path / "e.safetensors", {"task": "x"})
    assert path.stat().st_size < 4096
    loaded = load_expert(path)
    assert all(torch.equal(loaded[k], e1[k]) for k in e1)
    with using_expert(model, e0):
        assert all(torch.equal(p.detach(), e0[n]) for n, p in zip(e0, svf_parameters(model)))
    assert all(torch.equal(p.detach(), e1[n]) for n, p in zip(e1, svf_parameters(model)))  # restored
    reset_svf(model, seed=1)
    assert all(torch.equal(get_expert(model)[k], e0[k]) for k in e0)  # same seed, same init
    with pytest.raises(ValueError, match="expert keys"):
        set_expert(model, {"nope": torch.zeros(3)})
    with pytest.raises(ValueError, match="target_modules"):
        apply_svf(tiny_causal_lm("llama", vocab_size=8, hidden=8, layers=1, heads=2), ["no_such_proj"])
    with pytest.raises(ValueError, match="mode"):
        SVFLinear(nn.Linear(2, 2), mode="bogus")
