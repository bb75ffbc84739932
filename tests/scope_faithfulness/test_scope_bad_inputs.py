"""Public functions refuse bad input with a ValueError naming the parameter."""

import pytest
import torch

from iclr25.scope_faithfulness.preference import dpo_sigmoid_loss


@pytest.mark.parametrize("beta", [-0.1, 0.0, float("nan"), float("inf"), True])
def test_dpo_loss_refuses_a_bad_beta(beta):
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="beta"):
        dpo_sigmoid_loss(x, x, x, x, beta=beta)


def test_dpo_loss_refuses_mismatched_shapes_and_matches_the_formula():
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="one shape"):
        dpo_sigmoid_loss(x, torch.zeros(2), x, x)
    pc, pr, rc, rr = torch.tensor([1.0]), torch.tensor([-1.0]), torch.tensor([0.0]), torch.tensor([0.0])
    assert float(dpo_sigmoid_loss(pc, pr, rc, rr, beta=0.5)) == pytest.approx(
        -torch.nn.functional.logsigmoid(torch.tensor(1.0)).item()
    )


# --- issue #34: every public function ---------------------------------------------------------------
import json  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from iclr25.common.lm import tiny_causal_lm  # noqa: E402
from iclr25.scope_faithfulness import (  # noqa: E402
    ScopeNoiseProcessor,
    World,
    build_preference_pairs,
    check_same_vocabulary,
    context_aware_generate,
    corpus_bleu,
    dpo_config,
    generate_unfaithful,
    hallucination_and_recall,
    independent_copy,
    load_data_to_text,
    make_dpo_trainer,
    nli_faithfulness,
    pretraining_corpus,
    records_dataset,
    sequence_logps,
    split_halves,
    word_tokenizer,
)

_TMP = Path(tempfile.mkdtemp())
_CASES = []


def case(label, param, fn):
    _CASES.append((label, param if isinstance(param, str) else "|".join(param), fn))


nan, inf = float("nan"), float("inf")
W = World()
tok = word_tokenizer(W)
case("World prior_seed str", "prior_seed", lambda: World(prior_seed="x").priors())
case("World prior_seed neg", "prior_seed", lambda: World(prior_seed=-1).priors())
case("word_tokenizer not world", "world", lambda: word_tokenizer("w"))
case("corpus n neg", "n", lambda: pretraining_corpus(W, -1, 0))
case("corpus n float", "n", lambda: pretraining_corpus(W, 2.5, 0))
case("corpus prior nan", "prior_strength", lambda: pretraining_corpus(W, 2, 0, prior_strength=nan))
case("corpus prior str", "prior_strength", lambda: pretraining_corpus(W, 2, 0, prior_strength="0.9"))
case("corpus world bad", "world", lambda: pretraining_corpus(None, 2, 0))
case("records n neg", "n", lambda: records_dataset(W, -1, 0))
case("records n 0", "n", lambda: records_dataset(W, 0, 0))
case("records year_absent nan", "year_absent", lambda: records_dataset(W, 2, 0, year_absent=nan))
case("records faithful str", "faithful", lambda: records_dataset(W, 2, 0, faithful="no"))
case("hall outputs str", "outputs", lambda: hallucination_and_recall("abc", [{}] * 3))
case("hall record missing key", "records", lambda: hallucination_and_recall(["n1 is a o1"], [{"name": "n1"}]))
case("hall outputs none", "outputs", lambda: hallucination_and_recall([None], records_dataset(W, 1, 0)))
case("hall empty", ("outputs", "records"), lambda: hallucination_and_recall([], []))
case("bleu outputs none", "outputs", lambda: corpus_bleu([None], ["a b"]))
case("bleu outputs str", "outputs", lambda: corpus_bleu("ab", ["a", "b"]))
case("nli model_path missing", "model_path", lambda: nli_faithfulness(["a"], ["b"], "/nonexistent/x"))
case("nli empty", ("sources", "outputs"), lambda: nli_faithfulness([], [], "/nonexistent/x"))
case("load format bad", "format", lambda: load_data_to_text("/tmp/x.json", format="csv"))
Path(str(_TMP / "bad.jsonl")).write_text(json.dumps({"foo": 1}) + "\n")
case("load missing fields", "path", lambda: load_data_to_text(str(_TMP / "bad.jsonl")))
Path(str(_TMP / "bad2.json")).write_text(json.dumps({"a": 1}))
case("load json object", "path", lambda: load_data_to_text(str(_TMP / "bad2.json")))
Path(str(_TMP / "bad3.json")).write_text("[1, 2]")
case("load json ints", "path", lambda: load_data_to_text(str(_TMP / "bad3.json")))
case("split seed str", "seed", lambda: split_halves([1, 2, 3, 4], seed="a"))
case("split not sized", "dataset", lambda: split_halves(iter([1, 2, 3])))
case("split seed neg", "seed", lambda: split_halves([1, 2, 3, 4], seed=-1))
m = tiny_causal_lm("llama", seed=0, vocab_size=len(tok), hidden=16, layers=1, heads=2).eval()
lm = tiny_causal_lm("llama", seed=1, vocab_size=len(tok), hidden=16, layers=1, heads=2).eval()
m2 = tiny_causal_lm("llama", seed=1, vocab_size=len(tok) + 5, hidden=16, layers=1, heads=2).eval()
enc = tok(["name n1 job o1 city c1 ::"], return_tensors="pt")
case("sameVocab mismatch", "lm", lambda: check_same_vocabulary(m, m2))
case("sameVocab not model", ("model", "lm"), lambda: check_same_vocabulary("a", lm))
case("proc alpha nan", "alpha", lambda: ScopeNoiseProcessor(lm, nan))
case("proc alpha 2", "alpha", lambda: ScopeNoiseProcessor(lm, 2.0))
case("proc prompt empty", "lm_prompt_ids", lambda: ScopeNoiseProcessor(lm, 0.5, lm_prompt_ids=[]))
case("proc prompt oov", "lm_prompt_ids", lambda: ScopeNoiseProcessor(lm, 0.5, lm_prompt_ids=[10**6]))
case("proc prompt neg", "lm_prompt_ids", lambda: ScopeNoiseProcessor(lm, 0.5, lm_prompt_ids=[-1]))
case("proc seed str", "seed", lambda: ScopeNoiseProcessor(lm, 0.5, seed="a"))
case("gen max_new_tokens 0", "max_new_tokens", lambda: generate_unfaithful(m, lm, enc, 0.5, max_new_tokens=0))
case(
    "gen temperature neg",
    "temperature",
    lambda: generate_unfaithful(m, lm, enc, 0.5, temperature=-1.0, max_new_tokens=2),
)
case(
    "gen temperature nan",
    "temperature",
    lambda: generate_unfaithful(m, lm, enc, 0.5, temperature=nan, max_new_tokens=2),
)
case("gen top_p 0", "top_p", lambda: generate_unfaithful(m, lm, enc, 0.5, top_p=0.0, max_new_tokens=2))
case("gen top_p 2", "top_p", lambda: generate_unfaithful(m, lm, enc, 0.5, top_p=2.0, max_new_tokens=2))
case(
    "gen min > max",
    "min_new_tokens",
    lambda: generate_unfaithful(m, lm, enc, 0.5, min_new_tokens=5, max_new_tokens=2),
)
case("gen inputs str", "inputs", lambda: generate_unfaithful(m, lm, "hello", 0.5, max_new_tokens=2))
case(
    "gen inputs float ids",
    "inputs",
    lambda: generate_unfaithful(m, lm, torch.rand(1, 3), 0.5, max_new_tokens=2),
)
case(
    "gen inputs oov",
    "inputs",
    lambda: generate_unfaithful(m, lm, torch.tensor([[10**6]]), 0.5, max_new_tokens=2),
)
case(
    "gen inputs empty",
    "inputs",
    lambda: generate_unfaithful(m, lm, torch.zeros(1, 0, dtype=torch.long), 0.5, max_new_tokens=2),
)
case("cad alpha nan", "alpha", lambda: context_aware_generate(m, enc, nan))
case("cad max_new 0", "max_new_tokens", lambda: context_aware_generate(m, enc, 0.5, max_new_tokens=0))
case("cad inputs str", "inputs", lambda: context_aware_generate(m, "hello", 0.5))
case(
    "cad prompt empty",
    "lm_prompt_ids",
    lambda: context_aware_generate(m, enc, 0.5, lm_prompt_ids=[], max_new_tokens=2),
)
rows = records_dataset(W, 2, 0)
case("pairs alpha nan", "alpha", lambda: build_preference_pairs(m, lm, rows, nan, tokenizer=tok))
case(
    "pairs max_new 0",
    "max_new_tokens",
    lambda: build_preference_pairs(m, lm, rows, 0.5, tokenizer=tok, max_new_tokens=0),
)
case(
    "pairs n_untouched neg",
    "n_untouched",
    lambda: build_preference_pairs(m, lm, rows, 0.5, tokenizer=tok, n_untouched=-1),
)
case(
    "pairs seed str",
    "seed",
    lambda: build_preference_pairs(m, lm, rows, 0.5, tokenizer=tok, seed="a", max_new_tokens=2),
)
case("pairs tokenizer none", "tokenizer", lambda: build_preference_pairs(m, lm, rows, 0.5, tokenizer=None))
case(
    "pairs dataset rows not dict",
    "dataset",
    lambda: build_preference_pairs(m, lm, [1, 2], 0.5, tokenizer=tok),
)
case("dpo_config beta neg", "beta", lambda: dpo_config(str(_TMP / "dpo"), beta=-1.0))
case("dpo_config lr neg", "learning_rate", lambda: dpo_config(str(_TMP / "dpo"), learning_rate=-1.0))
case("dpo_config unknown", "bogus", lambda: dpo_config(str(_TMP / "dpo"), bogus=1))
case(
    "trainer pairs list",
    "pairs",
    lambda: make_dpo_trainer(m, [{"prompt": "a", "chosen": "b", "rejected": "c"}], tok),
)
case("seqlogp empty prompt", "prompt_ids", lambda: sequence_logps(m, [], [5, 6]))
case("seqlogp empty response", "response_ids", lambda: sequence_logps(m, [1, 5], []))
case("seqlogp oov", ("prompt_ids", "response_ids"), lambda: sequence_logps(m, [1, 5], [10**6]))
case("seqlogp float ids", ("prompt_ids", "response_ids"), lambda: sequence_logps(m, [1, 5], [2.5]))
case("dpo loss nan", ("policy_chosen", "log-prob"), lambda: dpo_sigmoid_loss(*(torch.full((2,), nan),) * 4))
case("dpo loss list", ("policy_chosen", "tensor"), lambda: dpo_sigmoid_loss([0.0], [0.0], [0.0], [0.0]))
case("independent_copy none", "model", lambda: independent_copy(None))


@pytest.mark.parametrize("label, name, call", _CASES, ids=[c[0] for c in _CASES])
def test_public_function_refuses_bad_input_naming_the_parameter(label, name, call):
    with pytest.raises(ValueError, match=name):
        call()
