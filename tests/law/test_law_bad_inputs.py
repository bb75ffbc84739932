"""Public functions refuse bad input with a ValueError naming the parameter (no broadcast or shape surprise)."""

import pytest
import torch

from iclr25.common.lm import tiny_causal_lm
from iclr25.law import (
    LamSearch,
    ZConfig,
    apply_delta,
    associative_recall_facts,
    c_ratio,
    check_covariance,
    compute_z,
    constrained_ascent,
    fact_known,
    facts_from_triplets,
    ft_to_eos,
    ft_unlearn,
    generic_loss,
    key_covariance,
    memit_closed_form,
    memit_to_eos,
    objective_upper_bound,
    resolve_layers,
    wash,
    wash_objective,
)
from iclr25.law.facts import check_facts
from iclr25.law.world import World, WorldConfig


def test_c_ratio_and_objective_refuse_mismatched_shapes():
    delta, C, K = torch.randn(6, 4), torch.eye(4), torch.randn(4, 5)
    assert c_ratio(delta, C) == pytest.approx(float((delta**2).sum() / 4))
    assert wash_objective(delta, K) == pytest.approx(float((delta @ K).pow(2).sum()))
    with pytest.raises(ValueError, match=r"C must have shape \(4, 4\)"):
        c_ratio(delta, torch.eye(6))
    with pytest.raises(ValueError, match="delta must be a"):
        c_ratio(torch.randn(4), C)
    with pytest.raises(ValueError, match="positive trace"):
        c_ratio(delta, torch.zeros(4, 4))
    with pytest.raises(ValueError, match=r"K must have shape \(4, "):
        wash_objective(delta, torch.randn(6, 5))


# --- every public LaW function refuses bad input with a ValueError naming the parameter (hostile-input probe)


nan = float("nan")
d, C, K = torch.randn(6, 4), torch.eye(4), torch.randn(4, 5)

PURE = [
    ("c_ratio delta nan", "delta", lambda: c_ratio(torch.full((6, 4), nan), C)),
    ("c_ratio C nan", "C", lambda: c_ratio(d, torch.full((4, 4), nan))),
    ("c_ratio list", "delta", lambda: c_ratio([[1.0]], C)),
    ("wash_objective K nan", "K", lambda: wash_objective(d, torch.full((4, 5), nan))),
    ("upper_bound beta neg", "beta", lambda: objective_upper_bound(K, C, -1.0)),
    ("upper_bound beta nan", "beta", lambda: objective_upper_bound(K, C, nan)),
    ("upper_bound shapes", ("K", "C"), lambda: objective_upper_bound(torch.randn(3, 5), C, 1.0)),
    ("upper_bound C nonsquare", "C", lambda: objective_upper_bound(K, torch.randn(4, 3), 1.0)),
    ("upper_bound C nan", "C", lambda: objective_upper_bound(K, torch.full((4, 4), nan), 1.0)),
    ("ascent lr nan str", "lr", lambda: constrained_ascent(d, K, C, 1.0, steps=1, lr="x")),
    (
        "ascent lr_after neg",
        "lr_after_boundary",
        lambda: constrained_ascent(d, K, C, 1.0, steps=1, lr_after_boundary=-1.0),
    ),
    ("ascent steps bool", "steps", lambda: constrained_ascent(d, K, C, 1.0, steps=True)),
    ("ascent beta bool", "beta", lambda: constrained_ascent(d, K, C, True, steps=1)),
    ("ascent K shape", "K", lambda: constrained_ascent(d, torch.randn(3, 5), C, 1.0, steps=1)),
    ("ascent delta nan", "delta", lambda: constrained_ascent(torch.full((6, 4), nan), K, C, 1.0, steps=1)),
    ("ascent C asym", "C", lambda: constrained_ascent(d, K, torch.triu(torch.ones(4, 4)), 1.0, steps=1)),
    ("memit lam neg", "lam", lambda: memit_closed_form(torch.randn(6, 5), K, C, -1.0)),
    ("memit lam bool", "lam", lambda: memit_closed_form(torch.randn(6, 5), K, C, True)),
    ("ZConfig steps bool", "steps", lambda: ZConfig(steps=True)),
    ("ZConfig lr bool", "lr", lambda: ZConfig(lr=True)),
    ("ZConfig kl_template no {}", "kl_template", lambda: ZConfig(kl_template="is a")),
    ("LamSearch low>high", ("low", "high"), lambda: LamSearch(low=0.9, high=0.1)),
    ("LamSearch decay 2", "decay", lambda: LamSearch(decay=2.0)),
    ("LamSearch step neg", "step", lambda: LamSearch(step=-1.0)),
    ("LamSearch nan", "low", lambda: LamSearch(low=nan)),
    ("WorldConfig seed str", "seed", lambda: WorldConfig(seed="x")),
    ("WorldConfig subjects bool", "subjects", lambda: WorldConfig(subjects=True)),
    ("World cfg bad", "cfg", lambda: World(None)),
    ("resolve model bad", "model", lambda: resolve_layers(None, [0])),
]


@pytest.mark.parametrize("label, param, call", PURE, ids=[c[0] for c in PURE])
def test_pure_functions_refuse_bad_input_naming_the_parameter(label, param, call):
    names = (param,) if isinstance(param, str) else param
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    assert any(n in str(e.value) for n in names), str(e.value)


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    w = World(WorldConfig(subjects=12, first_names=3, relations=2, objects=6, recall_keys=4, recall_values=4,
                          recall_pairs=2, generic_states=6, generic_len=8, seed=0))  # fmt: skip
    m = tiny_causal_lm("llama", seed=0, vocab_size=w.vocab_size, hidden=32, layers=3, heads=2, intermediate=64,
                       max_positions=32).eval()  # fmt: skip
    texts = w.generic(4, 0)
    return w, w.tokenizer, m, w.facts()[:3], texts, key_covariance(m, [1, 2], texts, w.tokenizer)


MODEL = [
    ("check_cov tol neg", "tol", lambda w, tok, m, facts, texts, cov: check_covariance(C, tol=-1.0)),
    ("check_cov tol nan", "tol", lambda w, tok, m, facts, texts, cov: check_covariance(C, tol=nan)),
    ("LamSearch max_iter 0", "max_iter", lambda w, tok, m, facts, texts, cov: LamSearch(max_iter=0)),
    (
        "triplets template bad",
        "template",
        lambda w, tok, m, facts, texts, cov: facts_from_triplets(
            [{"subject": "A", "relation": "r", "object": "o"}], template="{foo}"
        ),
    ),
    ("triplets rows not dict", "rows", lambda w, tok, m, facts, texts, cov: facts_from_triplets([1, 2])),
    (
        "triplets prefix not str",
        "target_prefix",
        lambda w, tok, m, facts, texts, cov: facts_from_triplets(
            [{"subject": "A", "relation": "r", "object": "o"}], target_prefix=None
        ),
    ),
    (
        "triplets prompt no {}",
        "prompt",
        lambda w, tok, m, facts, texts, cov: facts_from_triplets(
            [{"subject": "A", "prompt": "hello", "object": "o"}]
        ),
    ),
    ("check_facts str", "facts", lambda w, tok, m, facts, texts, cov: check_facts("abc")),
    (
        "recall n_pairs 0",
        "n_pairs",
        lambda w, tok, m, facts, texts, cov: associative_recall_facts(["a", "b"], ["c"], 2, n_pairs=0),
    ),
    (
        "recall n float",
        "n",
        lambda w, tok, m, facts, texts, cov: associative_recall_facts(["a", "b"], ["c"], 2.5, n_pairs=1),
    ),
    (
        "recall values empty",
        "values",
        lambda w, tok, m, facts, texts, cov: associative_recall_facts(["a", "b"], [], 2, n_pairs=1),
    ),
    (
        "recall keys str",
        "keys",
        lambda w, tok, m, facts, texts, cov: associative_recall_facts("ab", ["c"], 2, n_pairs=1),
    ),
    (
        "recall sep empty",
        "sep",
        lambda w, tok, m, facts, texts, cov: associative_recall_facts(
            ["a", "b"], ["c"], 2, n_pairs=1, sep=""
        ),
    ),
    ("World.facts bad subjects", "subjects", lambda w, tok, m, facts, texts, cov: w.facts([999])),
    ("World.recall n 0", "n", lambda w, tok, m, facts, texts, cov: w.recall(0, 0)),
    ("World.generic n neg", "n", lambda w, tok, m, facts, texts, cov: w.generic(-1, 0)),
    (
        "fact_known batch 0",
        "batch_size",
        lambda w, tok, m, facts, texts, cov: fact_known(m, tok, facts, batch_size=0),
    ),
    (
        "fact_known batch bool",
        "batch_size",
        lambda w, tok, m, facts, texts, cov: fact_known(m, tok, facts, batch_size=True),
    ),
    (
        "generic_loss batch 0",
        "batch_size",
        lambda w, tok, m, facts, texts, cov: generic_loss(m, tok, texts, batch_size=0),
    ),
    (
        "generic_loss no tokenizer",
        "tokenizer",
        lambda w, tok, m, facts, texts, cov: generic_loss(m, None, texts),
    ),
    ("generic_loss empty", "texts", lambda w, tok, m, facts, texts, cov: generic_loss(m, tok, [])),
    (
        "generic_loss float ids",
        "texts",
        lambda w, tok, m, facts, texts, cov: generic_loss(m, None, torch.rand(2, 4)),
    ),
    (
        "generic_loss oov ids",
        "texts",
        lambda w, tok, m, facts, texts, cov: generic_loss(m, None, torch.full((2, 4), 10**6)),
    ),
    (
        "key_cov max_length 0",
        "max_length",
        lambda w, tok, m, facts, texts, cov: key_covariance(m, [0], texts, tok, max_length=0),
    ),
    (
        "key_cov batch bool",
        "batch_size",
        lambda w, tok, m, facts, texts, cov: key_covariance(m, [0], texts, tok, batch_size=True),
    ),
    (
        "key_cov oov ids",
        "texts",
        lambda w, tok, m, facts, texts, cov: key_covariance(m, [0], torch.full((2, 4), 10**6)),
    ),
    ("resolve layers float", "layers", lambda w, tok, m, facts, texts, cov: resolve_layers(m, [1.5])),
    (
        "memit_to_eos z bad",
        "z",
        lambda w, tok, m, facts, texts, cov: memit_to_eos(m, tok, facts, [1], cov, z="x"),
    ),
    (
        "memit_to_eos cov missing",
        "cov",
        lambda w, tok, m, facts, texts, cov: memit_to_eos(m, tok, facts, [0], cov),
    ),
    (
        "memit_to_eos templates no {}",
        "templates",
        lambda w, tok, m, facts, texts, cov: memit_to_eos(m, tok, facts, [1], cov, templates=("abc",)),
    ),
    (
        "memit_to_eos templates empty",
        "templates",
        lambda w, tok, m, facts, texts, cov: memit_to_eos(m, tok, facts, [1], cov, templates=()),
    ),
    (
        "memit_to_eos lam_search bad",
        "lam_search",
        lambda w, tok, m, facts, texts, cov: memit_to_eos(m, tok, facts, [1], cov, lam_search="x"),
    ),
    ("compute_z layer bad", "layer", lambda w, tok, m, facts, texts, cov: compute_z(m, tok, facts, 1)),
    ("wash steps neg", "steps", lambda w, tok, m, facts, texts, cov: wash(m, tok, facts, [1], cov, steps=-1)),
    ("wash lr nan", "lr", lambda w, tok, m, facts, texts, cov: wash(m, tok, facts, [1], cov, lr=nan)),
    (
        "wash random_init_std neg",
        "random_init_std",
        lambda w, tok, m, facts, texts, cov: wash(
            m, tok, facts, [1], cov, init="random", beta=1.0, random_init_std=-1.0
        ),
    ),
    (
        "wash best_iterate bad",
        "best_iterate",
        lambda w, tok, m, facts, texts, cov: wash(m, tok, facts, [1], cov, best_iterate="x"),
    ),
    ("wash z bad", "z", lambda w, tok, m, facts, texts, cov: wash(m, tok, facts, [1], cov, z="x")),
    (
        "wash lr_after neg",
        "lr_after_boundary",
        lambda w, tok, m, facts, texts, cov: wash(m, tok, facts, [1], cov, lr_after_boundary=-1.0),
    ),
    ("wash seed str", "seed", lambda w, tok, m, facts, texts, cov: wash(m, tok, facts, [1], cov, seed="x")),
    (
        "apply_delta sign nan",
        "sign",
        lambda w, tok, m, facts, texts, cov: apply_delta(
            m, {"model.layers.1.mlp.down_proj": torch.zeros(32, 64)}, sign=nan
        ),
    ),
    (
        "apply_delta shape",
        ("delta", "path_or_deltas", "shape"),
        lambda w, tok, m, facts, texts, cov: apply_delta(
            m, {"model.layers.1.mlp.down_proj": torch.zeros(3, 3)}
        ),
    ),
    (
        "apply_delta nan",
        ("delta", "path_or_deltas", "finite"),
        lambda w, tok, m, facts, texts, cov: apply_delta(
            m, {"model.layers.1.mlp.down_proj": torch.full((32, 64), nan)}
        ),
    ),
    (
        "ft_unlearn batch 0",
        "batch_size",
        lambda w, tok, m, facts, texts, cov: ft_unlearn(m, tok, facts, batch_size=0, max_steps=1),
    ),
    (
        "ft_unlearn optimizer bad",
        "optimizer",
        lambda w, tok, m, facts, texts, cov: ft_unlearn(m, tok, facts, optimizer="lbfgs", max_steps=1),
    ),
    (
        "ft_unlearn seed str",
        "seed",
        lambda w, tok, m, facts, texts, cov: ft_unlearn(m, tok, facts, seed="x", max_steps=1),
    ),
    (
        "ft_to_eos lr bool",
        "lr",
        lambda w, tok, m, facts, texts, cov: ft_to_eos(m, tok, facts, lr=True, max_steps=1),
    ),
    (
        "ft_to_eos edit_target empty",
        "edit_target",
        lambda w, tok, m, facts, texts, cov: ft_to_eos(m, tok, facts, edit_target=[], max_steps=1),
    ),
]


@pytest.mark.parametrize("label, param, call", MODEL, ids=[c[0] for c in MODEL])
def test_model_functions_refuse_bad_input_naming_the_parameter(small, label, param, call):
    names = (param,) if isinstance(param, str) else param
    w, tok, m, facts, texts, cov = small
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises((ValueError, TypeError)) as e:
        call(w, tok, m, facts, texts, cov)
    assert any(n in str(e.value) for n in names), str(e.value)
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())  # a refused call edits nothing
