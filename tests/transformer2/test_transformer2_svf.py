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
    find_targets,
    get_expert,
    load_expert,
    lora_trainable_params,
    make_lora,
    merge_expert,
    reset_svf,
    save_expert,
    set_expert,
    set_scales,
    svf_disabled,
    svf_modules,
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
    # same singular vectors: Uᵀ W' V is diagonal (U, V of the base weight; SVFLinear stores only the square one)
    W = svf.merged_weight().detach()
    U, _, Vh = torch.linalg.svd(lin.weight.detach(), full_matrices=False)
    D = U.T @ W @ Vh.T
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


# ---- W' cache, merge for export, idempotent injection (regressions) ------------------------------------------
ALL7 = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _tiny(arch):  # Qwen2 has biases on q/k/v: exercises the bias path of the wrapper and of merge_expert
    return tiny_causal_lm(arch, seed=0, vocab_size=40, hidden=16, layers=2, heads=2, intermediate=32).eval()


def _perturb(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in svf_parameters(model):
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype))


def _uncached_logits(model, ids):
    """Reference: the same model with every W' recomposed from z right now (no cache involved)."""
    saved = {}
    for m in svf_modules(model).values():
        saved[m] = m.adapted_weight
        m.adapted_weight = m.merged_weight  # instance attribute shadows the caching method
    try:
        with torch.no_grad():
            return model(input_ids=ids).logits
    finally:
        for m in saved:
            del m.adapted_weight


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_generate_composes_each_weight_once_and_matches_uncached(arch, monkeypatch):
    model = apply_svf(_tiny(arch), ALL7, seed=1)
    _perturb(model)
    ids = torch.randint(3, 40, (2, 5), generator=torch.Generator().manual_seed(0))
    calls = []
    orig = SVFLinear.compose
    monkeypatch.setattr(SVFLinear, "compose", lambda self, s: calls.append(1) or orig(self, s))
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=16,
            min_new_tokens=16,
            do_sample=False,
            pad_token_id=0,
        )
    n_mod = len(svf_modules(model))
    assert n_mod == 14 and len(calls) == n_mod  # before the cache: 16 forwards × 14 recompositions
    monkeypatch.setattr(SVFLinear, "compose", orig)
    full = out[:, :-1]
    with torch.no_grad():
        cached = model(input_ids=full).logits
    assert torch.allclose(cached, _uncached_logits(model, full), atol=1e-6, rtol=0)
    assert torch.equal(cached[:, ids.shape[1] - 1 :].argmax(-1), out[:, ids.shape[1] :])


@pytest.mark.parametrize("foreach", [False, True])
def test_cache_invalidated_by_optimizer_expert_and_scale_changes(foreach):
    model = apply_svf(_tiny("llama"), MLP_MODULES, seed=1)
    ids = torch.randint(3, 40, (3, 6), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.Adam(svf_parameters(model), lr=0.5, foreach=foreach)

    def check():
        with torch.no_grad():
            got = model(input_ids=ids).logits
        assert torch.allclose(got, _uncached_logits(model, ids), atol=1e-6, rtol=0)
        return got

    before = check()
    for _ in range(2):  # train: the gradient flows through W' (recomposed per forward), then z moves
        opt.zero_grad()
        model(input_ids=ids).logits.logsumexp(-1).mean().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in svf_parameters(model))
        opt.step()
    after = check()
    assert not torch.allclose(before, after)  # the step changed z, and the cached W' followed
    e = get_expert(model)
    _perturb(model, seed=5)
    check()
    with using_expert(model, e):
        assert torch.allclose(check(), after, atol=1e-6)
    scales = {
        n: torch.rand(m.rank, generator=torch.Generator().manual_seed(2))
        for n, m in svf_modules(model).items()
    }
    set_scales(model, scales)
    mixed = check()
    set_scales(model, None)
    assert not torch.allclose(mixed, check())
    with svf_disabled(model):
        check()


def test_two_backwards_through_the_module_train_like_uncached():
    lin = _linear(6, 5, torch.float64, seed=4)
    svf = SVFLinear(lin, noise_std=0.3, generator=torch.Generator().manual_seed(0))
    x = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        svf(x)  # fills the cache; the training forwards below must not reuse its graph-less W'
    for _ in range(2):
        svf.z.grad = None
        svf(x).pow(2).sum().backward()
        z = svf.z.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad((x @ svf.compose(svf.effective_scale(z)).T + lin.bias).pow(2).sum(), z)
        assert torch.allclose(svf.z.grad, g, atol=1e-12)
        with torch.no_grad():
            svf.z.sub_(0.1 * svf.z.grad)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_merge_expert_exports_plain_linear_weights(arch, tmp_path):
    from transformers import AutoModelForCausalLM

    plain = _tiny(arch)
    keys = set(plain.state_dict())
    model = apply_svf(plain, ALL7, seed=1)
    _perturb(model)
    ids = torch.randint(3, 40, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = model(input_ids=ids).logits
    merge_expert(model)
    assert not svf_modules(model)
    assert all(type(model.get_submodule(n)) is nn.Linear for n in find_targets(model, ALL7))
    assert set(model.state_dict()) == keys  # the original checkpoint layout
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, want, atol=1e-5, rtol=0)
        assert torch.allclose(loaded(input_ids=ids).logits, want, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="apply_svf"):
        merge_expert(model)  # nothing left to merge


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_count_after_apply_and_reapply_is_idempotent(arch):
    model = _tiny(arch)
    for targets in (MLP_MODULES, r".*proj"):  # a list and a regex (which would also match '...proj.base')
        m = apply_svf(_tiny(arch), targets, seed=1)
        n0 = count_svf_params(_tiny(arch), targets)
        assert n0 > 0 and count_svf_params(m, targets) == n0 == sum(p.numel() for p in svf_parameters(m))
        e = get_expert(m)
        names = list(svf_modules(m))
        apply_svf(m, targets, seed=2)
        assert list(svf_modules(m)) == names  # no double wrapping
        assert not any(isinstance(mod.base, SVFLinear) for mod in svf_modules(m).values())
        assert all(torch.equal(get_expert(m)[k], e[k]) for k in e)  # z untouched
        assert all(p.requires_grad for p in svf_parameters(m))
        assert count_svf_params(m, targets) == n0
    apply_svf(model, MLP_MODULES)
    apply_svf(model, ATTN_MODULES)  # extends the targets; the MLP wrappers stay as they are
    assert len(svf_modules(model)) == 2 * (3 + 2)
    with pytest.raises(ValueError, match="mode"):
        apply_svf(model, MLP_MODULES, mode="paper")
