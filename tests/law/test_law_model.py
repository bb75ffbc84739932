"""LaW on tiny random Hugging Face decoders (Llama and GPT-2): keys, covariance, MEMIT, wash, locality, no-op,
successive elimination, delta files and bad input."""

import copy

import pytest
import torch

from iclr25.law import (
    Fact,
    ZConfig,
    apply_delta,
    compute_z,
    fact_known,
    key_covariance,
    memit_to_eos,
    resolve_layers,
    wash,
)
from iclr25.law.memories import block_outputs, encode_for, fact_keys

Z = ZConfig(steps=10, lr=0.5, clamp=3.0, kl_factor=0.0)


def _setup(mk, world, arch, layers=(0, 1)):
    m = mk(arch, world.vocab_size)
    texts = world.generic(40, 1) + [f.prompt + f.target for f in world.facts()]
    cov = key_covariance(m, list(layers), texts, world.tokenizer, batch_size=16)
    return m, cov


def test_keys_match_per_fact_reference(mk, world, arch):
    m = mk(arch, world.vocab_size)
    facts = world.facts()[:5] + world.recall(2, 0)  # recall facts: no subject -> last prompt token
    mls = resolve_layers(m, [1])
    b = encode_for(m, world.tokenizer, facts, target=None)
    K = fact_keys(m, b, mls)[1]
    for i, f in enumerate(facts):  # naive: one unpadded fact at a time, full activation, index by hand
        ids = world.tokenizer(f.prompt, return_tensors="pt")["input_ids"]
        pos = len(world.tokenizer(f.prompt[: f.subject_end])["input_ids"]) - 1
        got = {}
        h = mls[0].module.register_forward_pre_hook(lambda mod, a, got=got: got.update(k=a[0]))
        m(input_ids=ids)
        h.remove()
        assert torch.allclose(K[i], got["k"][0, pos].double(), atol=1e-5)


def test_covariance_matches_naive_and_caches(mk, world, arch, tmp_path):
    m = mk(arch, world.vocab_size)
    texts = world.generic(10, 3) + ["f0 u1 r0", "Q k1 v2"]
    cov = key_covariance(m, [0, 2], texts, world.tokenizer, batch_size=3, cache_dir=tmp_path)
    ml = resolve_layers(m, [2])[0]
    acc, n = 0, 0
    for t in texts:  # naive: one text at a time, every token
        ids = world.tokenizer(t, return_tensors="pt")["input_ids"]
        got = {}
        h = ml.module.register_forward_pre_hook(lambda mod, a, got=got: got.update(k=a[0][0].double()))
        m(input_ids=ids)
        h.remove()
        acc = acc + got["k"].t() @ got["k"]
        n += got["k"].shape[0]
    assert torch.allclose(cov[2], acc / n, atol=1e-9, rtol=1e-7)
    files = list(tmp_path.glob("law_cov_*.safetensors"))
    assert len(files) == 1
    cov2 = key_covariance(m, [0, 2], texts, world.tokenizer, cache_dir=tmp_path)
    assert torch.equal(cov2[2], cov[2]) and torch.equal(cov2[0], cov[0])
    m2 = copy.deepcopy(m)
    with torch.no_grad():
        resolve_layers(m2, [0])[0].W.add_(0.1)
    key_covariance(m2, [0, 2], texts, world.tokenizer, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("law_cov_*.safetensors"))) == 2  # other weights -> other cache entry


def test_gpt2_conv1d_orientation(mk, world):
    m = mk("gpt2", world.vocab_size)
    ml = resolve_layers(m, ["transformer.h.1.mlp.c_proj"])[0]
    assert ml.transposed and tuple(ml.W.shape) == (32, 128)
    k = torch.randn(2, 128)
    before = ml.module(k[:, None])[:, 0]
    D = torch.randn(32, 128, dtype=torch.float64)
    ml.add_(D)
    after = ml.module(k[:, None])[:, 0]
    assert torch.allclose(after - before, k @ D.float().t(), atol=1e-4)


def test_compute_z_raises_eos_and_clamps(mk, world, arch):
    m = mk(arch, world.vocab_size)
    facts = world.facts()[:6]
    ml = resolve_layers(m, [1])[0]
    eos = world.tokenizer.eos_token_id
    Zt, H0, nll = compute_z(m, world.tokenizer, facts, ml, ZConfig(steps=0, kl_factor=0.0))
    assert torch.equal(Zt, H0)
    z = ZConfig(steps=25, lr=0.5, clamp=2.0, kl_factor=0.0625, early_stop=0.0)
    Zt, H0, nll2 = compute_z(m, world.tokenizer, facts, ml, z)
    assert ((Zt - H0).norm(dim=1) <= 2.0 * H0.norm(dim=1) * (1 + 1e-5)).all()
    assert eos is not None and nll2.shape == nll.shape


def test_memit_single_layer_reaches_targets(mk, world, arch):
    """λ → 0, one layer = the z layer: the edited residuals equal Z (ΔK = R, keys unchanged by the edit)."""
    m, cov = _setup(mk, world, arch, layers=(1,))
    facts = world.facts()[::2][:6]  # distinct subjects: distinct keys (a subject's relations share its key)
    res = memit_to_eos(m, world.tokenizer, facts, [1], cov, lam=1e-7, z=Z)
    ml = resolve_layers(m, [1])[0]
    h = block_outputs(m, encode_for(m, world.tokenizer, facts, target=None), ml)
    assert torch.allclose(h, res.Z, atol=1e-3 * res.Z.abs().max().item())


def test_wash_locality_and_constraint(mk, world, arch):
    m, cov = _setup(mk, world, arch)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    facts = world.facts()[:8]
    rep = wash(m, world.tokenizer, facts, [0, 1], cov, lam=1.0, steps=30, lr=1e-3, z=Z, only_known=False,
               successive_elimination=False)  # fmt: skip
    changed = {k for k, v in m.state_dict().items() if not torch.equal(v, before[k])}
    names = {ml.name + ".weight" for ml in resolve_layers(m, [0, 1])}
    assert changed == names  # only W_out of the listed layers, everything else bit-identical
    for lr_ in rep.layers:
        assert lr_.ratio <= lr_.beta * (1 + 1e-9)
        assert lr_.objective >= lr_.init_objective
        assert abs(lr_.beta - 1.1 * lr_.init_ratio) <= 1e-12 * lr_.beta
    # the delta file reproduces the edit on a fresh copy
    p = rep.save_delta(world_path := __import__("tempfile").mkdtemp() + "/d.safetensors")
    m2 = mk(arch, world.vocab_size)
    apply_delta(m2, p)
    for k, v in m2.state_dict().items():
        assert torch.allclose(v, m.state_dict()[k], atol=1e-6), k
    assert world_path


def test_wash_noop(mk, world, arch):
    m, cov = _setup(mk, world, arch)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    rep = wash(m, world.tokenizer, [], [0, 1], cov, z=Z)
    assert rep.layers == []
    wash(m, world.tokenizer, world.facts()[:4], [0, 1], cov, init="zero", beta=1.0, lr=0.0, steps=5,
         only_known=False, z=Z)  # fmt: skip
    for k, v in m.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_memit_init_restores_weights_exactly_and_bf16_rounding_warns(mk, world):
    """``memit_to_eos(apply=False)`` (LaW's initialisation on temporarily edited weights) leaves the model
    bit-identical — also in bf16, where W + Δ − Δ ≠ W; applying an edit to bf16 weights that rounding visibly
    distorts warns, naming the layer and the dtype (no silent wrong edit)."""
    import warnings

    for dtype in (torch.float32, torch.bfloat16):
        m, cov = _setup(mk, world, "llama")
        m = m.to(dtype)
        before = {k: v.clone() for k, v in m.state_dict().items()}
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "error", message=".*is stored in"
            )  # a temporary edit never warns about precision
            memit_to_eos(m, world.tokenizer, world.facts()[:4], [0, 1], cov, lam=1.0, z=Z, apply=False)
        for k, v in m.state_dict().items():
            assert torch.equal(v, before[k]), (dtype, k)
    ml = resolve_layers(m, [0])[0]
    tiny = 1e-3 * ml.W.double().abs().mean() * torch.randn(ml.d_out, ml.d_in, dtype=torch.float64)
    with pytest.warns(UserWarning, match=r"model\.layers\.0\.mlp\.down_proj is stored in torch\.bfloat16"):
        ml.add_(tiny)
    m32 = m.float()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*is stored in")
        resolve_layers(m32, [0])[0].add_(tiny)  # float32: exact enough, no warning


def test_unreachable_edit_target_warns(mk, world):
    """z that does not make the model emit EOS (here: 1 step at a tiny lr on a random model) cannot wash
    anything; memit_to_eos / wash say so instead of silently applying a useless edit."""
    m, cov = _setup(mk, world, "llama")
    with pytest.warns(UserWarning, match="do not make the model emit the edit target"):
        memit_to_eos(m, world.tokenizer, world.facts()[:4], [0, 1], cov, lam=1.0,
                     z=ZConfig(steps=1, lr=1e-9, kl_factor=0.0))  # fmt: skip


def test_per_layer_beta_budget(mk, world):
    """``beta`` as a per-layer dict (the random-Δ⁰ ablation with the MEMIT initialisation's budgets): each layer's
    returned update sits within its own budget; a layer without a budget is refused by name."""
    m, cov = _setup(mk, world, "llama")
    betas = {0: 1e-6, "model.layers.1.mlp.down_proj": 4e-6}
    rep = wash(m, world.tokenizer, world.facts()[:6], [0, 1], cov, init="random", beta=betas, steps=40, lr=1e-3,
               only_known=False, successive_elimination=False, z=Z)  # fmt: skip
    got = {lr_.layer: (lr_.beta, lr_.ratio) for lr_ in rep.layers}
    assert got[0][0] == 1e-6 and got[1][0] == 4e-6
    assert all(r <= b * (1 + 1e-9) for b, r in got.values())
    assert got[1][1] > 1.5e-6  # the ascent uses layer 1's larger budget (it reaches the boundary)
    with pytest.raises(ValueError, match="no budget for layer"):
        wash(m, world.tokenizer, world.facts()[:6], [0, 1], cov, init="random", beta={0: 1e-6}, z=Z,
             only_known=False)  # fmt: skip
    with pytest.raises(ValueError, match="beta must be"):
        wash(m, world.tokenizer, world.facts()[:6], [0, 1], cov, init="random", beta={0: float("nan"), 1: 1.0},
             z=Z, only_known=False)  # fmt: skip


def test_successive_elimination_with_stub(mk, world):
    m, cov = _setup(mk, world, "llama", layers=(0, 1, 2))
    facts = world.facts()[:6]
    masks = iter(
        [
            torch.tensor([1, 1, 1, 1, 0, 1], dtype=torch.bool),  # before washing (only_known)
            torch.tensor([1, 0, 1, 0, 0, 0], dtype=torch.bool),  # after layer 0
            torch.tensor([0, 0, 0, 0, 0, 0], dtype=torch.bool),  # after layer 1 -> stop
        ]
    )
    used_keys = []
    orig = fact_keys

    def spy(model, batch, layers, chunk=256):
        used_keys.append(batch.n_facts)
        return orig(model, batch, layers, chunk)

    import iclr25.law.washing as W

    W.fact_keys, saved = spy, W.fact_keys
    try:
        rep = wash(m, world.tokenizer, facts, [0, 1, 2], cov, lam=1.0, steps=3, lr=1e-4, z=Z,
                   known_fn=lambda *_: next(masks))  # fmt: skip
    finally:
        W.fact_keys = saved
    assert [lr_.facts_used for lr_ in rep.layers] == [[0, 1, 2, 3, 5], [0, 2]]
    assert used_keys == [5, 2]  # the ascent at layer i+1 used exactly the survivors of layer i
    assert len(rep.layers) == 2 and rep.remaining == []  # stopped: layer 2 untouched
    assert "model.layers.2.mlp.down_proj" not in rep.deltas


def test_bad_inputs(mk, world):
    m, cov = _setup(mk, world, "llama")
    tok = world.tokenizer
    with pytest.raises(ValueError, match="not an MLP output projection"):
        resolve_layers(m, ["model.layers.0.mlp.up_proj"])
    with pytest.raises(ValueError, match="out of range"):
        resolve_layers(m, [7])
    with pytest.raises(ValueError, match="prompt"):
        Fact("", " o1")
    with pytest.raises(ValueError, match="subject"):
        Fact("f0 u1 r0", " o1", subject="u9")
    long = Fact(" ".join(["g1"] * 40), " o1")
    with pytest.raises(ValueError, match="longer than the model's context"):
        wash(m, tok, [long], [0], cov, only_known=False, z=Z)
    bad = {0: -cov[0], 1: cov[1]}
    with pytest.raises(ValueError, match="positive semi-definite"):
        wash(m, tok, world.facts()[:2], [0, 1], bad, z=Z)
    with pytest.raises(ValueError, match="no covariance for layer 2"):
        wash(m, tok, world.facts()[:2], [0, 2], cov, z=Z)
    with pytest.raises(ValueError, match="needs an explicit beta"):
        wash(m, tok, world.facts()[:2], [0], cov, init="random")

    class Fake(torch.nn.Module):
        class config:  # noqa: N801
            model_type = "opt"

    with pytest.raises(ValueError, match="must be a Hugging Face decoder-only LM with a .config, got Fake"):
        resolve_layers(Fake(), [0])


def test_known_facts_learning_signal_and_baselines(mk, world):
    """A model trained on a handful of facts knows them; LaW / FT baselines wash them (learning signal). The world
    puts the relation first, so the subject's last token (where the keys are read) is the answering position and z
    can reach EOS (with the subject first a layer-0 edit of this model washed only 1-2 of the 4 facts)."""
    import dataclasses
    import math

    from iclr25.common.train import LMTrainConfig, train_lm
    from iclr25.law import fact_accuracy, ft_to_eos, ft_unlearn
    from iclr25.law.world import World

    torch.manual_seed(0)  # the result must not depend on which tests ran before (global RNG state)
    world = World(dataclasses.replace(world.cfg, relation_first=True))
    facts = world.facts()
    x, y = world.fact_rows(facts)
    m = mk("llama", world.vocab_size, seed=1).train()
    train_lm(m, batch_fn=lambda s, g: (x, y), cfg=LMTrainConfig(steps=150, batch_size=len(x), seq_len=8, lr=1e-2,
             warmup_steps=10, eval_every=0, weight_decay=0.0))  # fmt: skip
    m.eval()
    assert fact_accuracy(m, world.tokenizer, facts) == 1.0
    wash_set = facts[:4]
    cov = key_covariance(
        m, [0, 1], [f.prompt + f.target for f in facts] + world.generic(30, 0), world.tokenizer
    )
    ml = resolve_layers(m, [0])[0]
    z = ZConfig(steps=60, clamp=3.0, kl_factor=0.0)
    nll0 = compute_z(m, world.tokenizer, wash_set, ml, ZConfig(steps=0))[2]
    nll1 = compute_z(m, world.tokenizer, wash_set, ml, z)[2]
    assert (nll1 < nll0 - 1.0).all()  # the target vectors make EOS far more likely
    m1 = copy.deepcopy(m)
    rep = wash(m1, world.tokenizer, wash_set, [0], cov, lam=0.1, steps=20, lr=1e-3, z=z)
    assert rep.known_before == 4 and rep.z_nll < math.log(2)  # z makes EOS the likely answer
    # learning signal: LaW removes every washed fact while keeping the other subjects' facts
    assert fact_known(m1, world.tokenizer, wash_set).sum() == 0
    assert fact_accuracy(m1, world.tokenizer, facts[8:]) >= 0.9
    m2 = copy.deepcopy(m)
    # at lr 1e-3 this model's FT-UL stalls at 1 of 4 facts still known (400 steps); 3e-3 washes all 4 in 23 steps
    r = ft_unlearn(m2, world.tokenizer, wash_set, lr=3e-3, max_steps=150, stop_at=0.0)
    assert r.stopped_at_target and r.accuracies[-1] == 0.0
    m3 = copy.deepcopy(m)
    r = ft_to_eos(m3, world.tokenizer, wash_set, lr=1e-3, max_steps=50, stop_at=0.25)
    assert r.stopped_at_target and fact_accuracy(m3, world.tokenizer, wash_set) <= 0.25


def test_covariance_records_no_graph(mk, world):
    """C of a model whose weights require grad (a freshly loaded model) carries no autograd graph."""
    m = mk("llama", world.vocab_size)
    assert all(p.requires_grad for p in m.parameters())
    cov = key_covariance(m, [0, 1], world.generic(8, 1), world.tokenizer, batch_size=4)
    assert not any(C.requires_grad for C in cov.values())
