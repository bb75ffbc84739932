"""SVF beyond nn.Linear (GPT-2 Conv1D), the SVD cache, the stored factors, and a different expert per batch row."""

import copy
import gc

import pytest
import torch
from torch import nn

from iclr25.common.lm import tiny_causal_lm
from iclr25.transformer2 import (
    GPT2_MLP_MODULES,
    MLP_MODULES,
    SVDCache,
    SVFLinear,
    apply_svf,
    count_svf_params,
    get_expert,
    merge_expert,
    mix_experts,
    svf_disabled,
    svf_modules,
    svf_parameters,
    using_expert,
    using_row_experts,
    using_scales,
)

ALL7 = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
GPT2_ALL = (
    "c_attn",
    "c_proj",
    "c_fc",
)  # attn.c_attn (16×48), attn.c_proj (16×16), mlp.c_fc (16×64), mlp.c_proj


def _gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=40, n_positions=32, n_embd=16, n_layer=2, n_head=2, attn_implementation="eager"
    )
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg).eval()


def _ids(b=3, t=6, seed=0, vocab=40):
    return torch.randint(3, vocab, (b, t), generator=torch.Generator().manual_seed(seed))


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


# ---- 1. GPT-2 Conv1D (weight stored as (in, out)) -------------------------------------------------------------
def test_gpt2_conv1d_identity_is_exact_and_training_changes_logits():
    from transformers.pytorch_utils import Conv1D

    base = _gpt2()
    ids = _ids()
    ref = _logits(base, ids)
    model = apply_svf(copy.deepcopy(base), GPT2_ALL, mode="paper")  # paper mode: z = 1 is W' = W
    mods = svf_modules(model)
    assert len(mods) == 2 * 4 and all(m.transposed for m in mods.values())
    assert {m.left for m in mods.values()} == {True, False}  # both factor sides: (16, 48) and (64, 16)
    # rank = min(in, out) per matrix: c_attn 16, attn.c_proj 16, c_fc 16, mlp.c_proj 16
    assert count_svf_params(base, GPT2_ALL) == sum(p.numel() for p in svf_parameters(model)) == 2 * 4 * 16
    assert torch.equal(_logits(model, ids), ref)  # bit for bit, not just close
    with svf_disabled(model):
        assert torch.equal(_logits(model, ids), ref)

    opt = torch.optim.Adam(svf_parameters(model), lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in svf_parameters(model))
        opt.step()
    trained = _logits(model, ids)
    assert (trained - ref).abs().max() > 1e-3

    # independent reference: W' = U diag(σ ⊙ z) Vᵀ from the SVD of the logical (out, in) weight, written into a copy
    plain = copy.deepcopy(base)
    for name, m in mods.items():
        W = m.base.weight.detach().T.double()  # Conv1D stores Wᵀ
        U, S, Vh = torch.linalg.svd(W, full_matrices=False)
        Wp = (U * (S * m.z.detach().double())) @ Vh
        plain.get_submodule(name).weight.data.copy_(Wp.T.float())
    assert torch.allclose(trained, _logits(plain, ids), atol=1e-5, rtol=0)

    keys = set(base.state_dict())
    merge_expert(model)
    assert all(type(model.get_submodule(n)) is Conv1D for n in mods)
    assert set(model.state_dict()) == keys
    assert torch.allclose(_logits(model, ids), trained, atol=1e-5, rtol=0)


def test_gpt2_official_mode_and_default_targets_error_names_layers():
    base = _gpt2()
    ids = _ids()
    model = apply_svf(copy.deepcopy(base), GPT2_MLP_MODULES)  # official init z = 0.1 + 0.01·N(0,1) ≈ identity
    assert list(svf_modules(model)) == [
        f"transformer.h.{i}.mlp.{n}" for i in (0, 1) for n in ("c_fc", "c_proj")
    ]
    assert torch.allclose(_logits(model, ids), _logits(base, ids), atol=1e-3)
    with pytest.raises(ValueError, match=r"matched no nn.Linear or Conv1D.*c_attn.*c_fc"):
        apply_svf(copy.deepcopy(base), MLP_MODULES)  # Llama names on GPT-2: the message lists GPT-2's names


def test_quantised_or_foreign_layers_are_refused_by_name():
    model = tiny_causal_lm("llama", vocab_size=16, hidden=8, layers=1, heads=2, intermediate=16)
    lin = model.model.layers[0].mlp.up_proj
    lin.weight = nn.Parameter(torch.zeros(lin.weight.shape, dtype=torch.int8), requires_grad=False)
    with pytest.raises(ValueError, match=r"module 'model.layers.0.mlp.up_proj'.*torch.int8.*quantised"):
        apply_svf(model, MLP_MODULES)
    assert not svf_modules(model)  # refused before anything was wrapped
    with pytest.raises(ValueError, match="base must be an nn.Linear or a transformers Conv1D"):
        SVFLinear(nn.Conv1d(2, 2, 1))


# ---- 2. the SVD cache -------------------------------------------------------------------------------------------
def _count_svd(monkeypatch):
    calls = []
    orig = torch.linalg.svd
    monkeypatch.setattr(torch.linalg, "svd", lambda *a, **k: calls.append(1) or orig(*a, **k))
    return calls


def test_second_apply_reuses_the_decomposition_in_memory(monkeypatch):
    calls = _count_svd(monkeypatch)
    base = tiny_causal_lm("llama", seed=0, vocab_size=40, hidden=16, layers=2, heads=2, intermediate=32)
    cache = SVDCache()
    a = apply_svf(copy.deepcopy(base), ALL7, svd_cache=cache)
    assert len(calls) == 14 and cache.computed == 14 and len(cache) == 14
    b = apply_svf(copy.deepcopy(base), ALL7, svd_cache=cache)  # another copy of the same weights
    assert len(calls) == 14 and cache.memory_hits == 14  # no SVD recomputed
    for ma, mb in zip(svf_modules(a).values(), svf_modules(b).values()):
        assert ma.S is mb.S and ma.Q is mb.Q  # shared, not copied: no extra memory
    del a, b, ma, mb
    gc.collect()
    assert len(cache) == 0  # weak: the cache keeps nothing alive once no model uses the factors
    apply_svf(copy.deepcopy(base), ALL7, svd_cache=None)  # no cache: always computed
    assert len(calls) == 28


def test_folder_cache_persists_and_a_changed_weight_is_recomputed(tmp_path, monkeypatch):
    calls = _count_svd(monkeypatch)
    base = tiny_causal_lm(
        "llama", seed=0, vocab_size=40, hidden=16, layers=2, heads=2, intermediate=32
    ).eval()
    ids = _ids(vocab=40)
    first = apply_svf(copy.deepcopy(base), MLP_MODULES, seed=3, svd_cache=tmp_path)
    assert len(calls) == 6 and len(list(tmp_path.glob("*.safetensors"))) == 6
    want = _logits(first, ids)

    cache = SVDCache(tmp_path)  # a new process would start like this: nothing in memory
    again = apply_svf(copy.deepcopy(base), MLP_MODULES, seed=3, svd_cache=cache)
    assert len(calls) == 6 and cache.disk_hits == 6 and cache.computed == 0
    for m1, m2 in zip(svf_modules(first).values(), svf_modules(again).values()):
        assert torch.equal(m1.S, m2.S) and torch.equal(m1.Q, m2.Q)
    assert torch.equal(_logits(again, ids), want)

    changed = copy.deepcopy(base)
    with torch.no_grad():
        changed.model.layers[1].mlp.up_proj.weight[0, 0] += 1e-3  # one element of one matrix
    cache2 = SVDCache(tmp_path)
    apply_svf(changed, MLP_MODULES, svd_cache=cache2)
    assert len(calls) == 7 and cache2.computed == 1 and cache2.disk_hits == 5  # only that matrix recomputed
    m = changed.model.layers[1].mlp.up_proj
    assert torch.allclose(m.S, torch.linalg.svdvals(m.base.weight.detach()), rtol=0, atol=1e-6)
    assert len(list(tmp_path.glob("*.safetensors"))) == 7

    for f in tmp_path.glob("*.safetensors"):  # damaged files are a miss, recomputed and rewritten
        f.write_bytes(b"not a safetensors file")
    cache3 = SVDCache(tmp_path)
    apply_svf(copy.deepcopy(base), MLP_MODULES, svd_cache=cache3)
    assert cache3.computed == 6 and len(calls) == 13
    assert SVDCache(tmp_path).get(
        SVDCache.key(base.model.layers[0].mlp.up_proj.weight), 32, 16, torch.float32, "cpu"
    )


def test_svd_cache_argument_errors(tmp_path):
    model = tiny_causal_lm("llama", vocab_size=16, hidden=8, layers=1, heads=2, intermediate=16)
    with pytest.raises(ValueError, match="svd_cache must be an SVDCache, a folder path or None, got int"):
        apply_svf(model, MLP_MODULES, svd_cache=3)
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="folder must be a directory"):
        SVDCache(tmp_path / "f")


# ---- 3. what SVF stores ---------------------------------------------------------------------------------------
def _nbytes(model):
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def test_only_sigma_and_the_square_factor_are_stored():
    base = tiny_causal_lm("llama", seed=0, vocab_size=22, hidden=64, layers=2, heads=4, intermediate=256)
    before = _nbytes(base)
    model = apply_svf(copy.deepcopy(base), ALL7)
    extra = 0
    for m in svf_modules(model).values():
        out_f, in_f = m.base.weight.shape
        r = min(out_f, in_f)
        assert m.Q.shape == (r, r) and m.S.shape == (r,) and m.z.shape == (r,)
        assert {n for n, _ in m.named_buffers()} == {"S", "Q"}
        extra += 4 * (r * r + 2 * r)  # Q, σ, z in float32
    assert _nbytes(model) == before + extra
    # this toy: 2.43× the base's parameters + buffers with U, S, Vᵀ stored; now:
    assert round(_nbytes(model) / before, 3) == 1.445


# ---- 4. a different expert per row -------------------------------------------------------------------------------
def _experts(model, k, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(k):
        out.append({n: z + 0.8 * torch.randn(z.shape, generator=g) for n, z in get_expert(model).items()})
    return out


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_row_experts_equal_each_row_run_alone(arch):
    if arch == "gpt2":
        model = apply_svf(_gpt2(), GPT2_ALL, seed=1)
    else:  # qwen2: q/k/v biases; all 7 matrices cover both factor sides (square, tall, wide)
        base = tiny_causal_lm(arch, seed=0, vocab_size=40, hidden=16, layers=2, heads=2, intermediate=32)
        model = apply_svf(base.eval(), ALL7, seed=1)
    experts = [*_experts(model, 3, seed=2), None]  # None = the base weights ('other' route)
    index = [2, 0, 3, 1, 2, 0]
    ids = _ids(b=len(index), t=7, seed=4)
    with using_row_experts(model, experts, index):
        mixed = _logits(model, ids)
    for b, k in enumerate(index):
        with using_expert(model, experts[k]):
            alone = _logits(model, ids[b : b + 1])
        assert torch.allclose(mixed[b : b + 1], alone, atol=2e-5, rtol=0), (b, k)
    assert (
        mixed[1] - mixed[0]
    ).abs().max() > 1e-3  # the experts differ, so rows with different experts differ
    assert all(m.row_experts is None for m in svf_modules(model).values())  # restored on exit


def test_row_experts_generate_and_mixtures_match_per_row():
    base = tiny_causal_lm(
        "llama", seed=0, vocab_size=40, hidden=16, layers=2, heads=2, intermediate=32
    ).eval()
    model = apply_svf(base, ALL7, seed=1)
    experts = _experts(model, 2, seed=5)
    mix = mix_experts(model, experts, [0.3, 0.7])  # effective scales
    ids = _ids(b=3, t=5, seed=6)
    kw = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=0)
    with using_row_experts(model, experts, [1, 0, 1]), torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kw)
    for b, k in enumerate([1, 0, 1]):
        with using_expert(model, experts[k]), torch.no_grad():
            one = model.generate(
                input_ids=ids[b : b + 1], attention_mask=torch.ones_like(ids[b : b + 1]), **kw
            )
        assert torch.equal(out[b : b + 1], one)
    with using_row_experts(model, [mix], [0, 0, 0], scales=True):
        rows = _logits(model, ids)
    with using_scales(model, mix):
        assert torch.allclose(rows, _logits(model, ids), atol=2e-5, rtol=0)


def test_row_experts_errors_name_the_parameter():
    model = apply_svf(
        tiny_causal_lm("llama", vocab_size=16, hidden=8, layers=1, heads=2, intermediate=16), ALL7
    )
    e = get_expert(model)
    with pytest.raises(ValueError, match=r"index must hold values in \[0, 2\).*max 2"):
        with using_row_experts(model, [e, None], [0, 2]):
            pass
    with pytest.raises(ValueError, match="index must be a 1-D integer"):
        with using_row_experts(model, [e], [0.5]):
            pass
    with pytest.raises(ValueError, match=r"experts\[1\] keys must equal"):
        with using_row_experts(model, [e, {"x": torch.zeros(2)}], [0]):
            pass
    with pytest.raises(ValueError, match="index has 2 rows, but this layer got input of shape"):
        with using_row_experts(model, [e], [0, 0]):
            _logits(model, _ids(b=3, t=4, vocab=16))


# ---- bf16 base models -------------------------------------------------------------------------------------------
def test_bf16_base_identity_training_and_rows():
    base = tiny_causal_lm(
        "llama", seed=0, vocab_size=40, hidden=16, layers=2, heads=2, intermediate=32, dtype=torch.bfloat16
    ).eval()
    ids = _ids(b=3, t=6, seed=8)
    ref = _logits(base, ids)
    model = apply_svf(copy.deepcopy(base), ALL7, mode="paper")
    m = svf_modules(model)["model.layers.0.mlp.gate_proj"]
    assert m.z.dtype == m.Q.dtype == m.S.dtype == torch.float32  # factors and z in float32, W stays bf16
    assert m.merged_weight().dtype == torch.bfloat16
    assert torch.equal(_logits(model, ids), ref)  # z = 1: the bf16 weights themselves
    opt = torch.optim.Adam(svf_parameters(model), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
    trained = _logits(model, ids)
    assert (trained.float() - ref.float()).abs().max() > 1e-2
    with using_row_experts(model, [get_expert(model), None], [1, 0, 1]):
        rows = _logits(model, ids)
    assert torch.allclose(
        rows[1].float(), trained[1].float(), atol=1e-2, rtol=0
    )  # bf16 rounding (trained: > 1e-2)
    assert torch.equal(rows[0], ref[0])  # a base row (d = 0) gets the bf16 base logits exactly


def test_w_prime_is_float32_under_bf16_autocast():
    """Under torch.autocast(bf16) the recomposition stays in float32, so the cached W' is exact after the region."""
    model = apply_svf(
        tiny_causal_lm("llama", seed=0, vocab_size=40, hidden=32, layers=1, heads=2, intermediate=64).eval(),
        ("gate_proj", "down_proj"),
        noise_std=0.3,
    )
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(input_ids=_ids(b=2, t=5))  # fills the W' cache inside autocast (before the fix: 6e-5 off)
    for m in svf_modules(model).values():
        with torch.no_grad():
            assert m._cache[2].dtype == torch.float32
            assert torch.equal(m._cache[2], m.merged_weight())
