"""SCOPE's noisy generation: the α = 0 / α = 1 limits, context-freeness, coin statistics, masking, the mixture."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from iclr25.scope_faithfulness import (
    ScopeNoiseProcessor,
    World,
    context_aware_generate,
    generate_unfaithful,
    records_dataset,
    word_tokenizer,
)

from .conftest import make_model


def _batch(tok, n=6, seed=0):
    tok.padding_side = "left"
    rows = records_dataset(World(), n, seed)
    return tok([r["prompt"] for r in rows], return_tensors="pt", padding=True)


def test_alpha0_equals_plain_generate(pair, tok):
    model, lm = pair
    enc = _batch(tok)
    ours = generate_unfaithful(model, lm, enc, 0.0, do_sample=False, max_new_tokens=8, min_new_tokens=1)
    ref = model.generate(**enc, do_sample=False, max_new_tokens=8, min_new_tokens=1, pad_token_id=0)
    assert torch.equal(ours, ref[:, enc["input_ids"].shape[1] :])
    # the processed scores are exactly the main branch's log-softmax
    proc = ScopeNoiseProcessor(lm, 0.0, seed=0)
    scores = torch.randn(enc["input_ids"].shape[0], len(tok))
    assert (proc(enc["input_ids"], scores) - F.log_softmax(scores, -1)).abs().max() <= 1e-6


def test_alpha1_equals_lm_from_bos(pair, tok):
    model, lm = pair
    enc = _batch(tok)
    ours = generate_unfaithful(model, lm, enc, 1.0, n_untouched=0, do_sample=False, max_new_tokens=8)
    bos = torch.ones(enc["input_ids"].shape[0], 1, dtype=torch.long)
    ref = lm.generate(bos, do_sample=False, max_new_tokens=8, min_new_tokens=1, pad_token_id=0)[:, 1:]
    assert torch.equal(ours, ref)  # also checks the LM branch's KV cache: p_LM sees BOS + its own prefix only
    # one step: processed scores = log-softmax of p_LM's logits after BOS, with the main branch's −inf mask
    proc = ScopeNoiseProcessor(lm, 1.0, n_untouched=0, seed=0)
    scores = torch.randn(enc["input_ids"].shape[0], len(tok))
    scores[:, 5] = -math.inf
    out = proc(enc["input_ids"], scores)
    lm_logits = lm(bos).logits[:, -1].masked_fill(torch.isinf(scores), -math.inf)
    assert (out - F.log_softmax(lm_logits, -1)).nan_to_num(0.0, 0.0, 0.0).abs().max() <= 1e-6
    assert torch.isneginf(out[:, 5]).all()


def test_lm_branch_is_context_free(pair, tok):
    """Two different contexts x, x′ with the same generated prefix give bit-identical LM-branch scores."""
    _, lm = pair
    enc = _batch(tok, 2)
    xa = enc["input_ids"][:1]
    xb = tok(["name n7 job o1 city c3 year y2 ::"], return_tensors="pt")["input_ids"]
    assert xa.shape[1] != xb.shape[1] or not torch.equal(xa, xb)
    gen = torch.tensor([[20, 9, 10, 50, 11]])
    pa, pb = ScopeNoiseProcessor(lm, 1.0, n_untouched=0), ScopeNoiseProcessor(lm, 1.0, n_untouched=0)
    scores = torch.zeros(1, len(tok))
    for t in range(gen.shape[1] + 1):
        oa = pa(torch.cat([xa, gen[:, :t]], 1), scores)
        ob = pb(torch.cat([xb, gen[:, :t]], 1), scores)
        assert torch.equal(oa, ob)


def test_switch_frequency_and_untouched_prefix(tok):
    model, lm = make_model("gpt2", len(tok), 0), make_model("gpt2", len(tok), 1)
    enc = _batch(tok, 500, seed=3)
    alpha, k = 0.3, 2
    new, proc = generate_unfaithful(
        model,
        lm,
        enc,
        alpha,
        n_untouched=k,
        max_new_tokens=24,
        min_new_tokens=24,
        seed=0,
        return_processor=True,
    )
    z = proc.lm_steps
    assert z.shape == new.shape == (500, 24)
    assert not z[:, :k].any()  # the first n_untouched tokens always come from p_θ₀
    n = z[:, k:].numel()
    assert n >= 10_000
    sigma = math.sqrt(alpha * (1 - alpha) / n)
    assert abs(z[:, k:].float().mean().item() - alpha) <= 3 * sigma
    # per-sample coins: rows differ at a given step
    assert 0 < z[:, k].float().mean() < 1


def test_masked_tokens_never_emitted(pair, tok):
    model, lm = pair
    enc = _batch(tok, 200, seed=4)
    free = generate_unfaithful(model, lm, enc, 1.0, n_untouched=0, max_new_tokens=6, seed=0, temperature=1.0)
    banned = (
        torch.bincount(free.flatten(), minlength=len(tok))[3:].topk(3).indices + 3
    )  # LM's favourite tokens
    out = generate_unfaithful(
        model, lm, enc, 1.0, n_untouched=0, max_new_tokens=6, seed=0, temperature=1.0,
        suppress_tokens=banned.tolist(),
    )  # fmt: skip
    assert not torch.isin(out, banned).any()
    assert torch.isin(free, banned).any()


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_one_step_distribution_is_the_mixture(tok, family):
    """Sampling with per-sample coins draws from (1 − α)·p_θ₀(·|x) + α·p_LM(·|BOS), token by token."""
    model = make_model(family, len(tok), 0, peaky=40.0)
    lm = make_model(family, len(tok), 1, peaky=40.0)
    n, alpha = 4000, 0.4
    enc = tok(["name n3 job o2 city c1 ::"] * n, return_tensors="pt")
    new = generate_unfaithful(
        model,
        lm,
        enc,
        alpha,
        n_untouched=0,
        max_new_tokens=1,
        min_new_tokens=1,
        temperature=1.0,
        top_p=1.0,
        seed=1,
    )
    emp = torch.bincount(new[:, 0], minlength=len(tok)).double() / n
    with torch.no_grad():
        p_main = model(**tok(["name n3 job o2 city c1 ::"], return_tensors="pt")).logits[0, -1].double()
        p_main[2] = -math.inf  # min_new_tokens=1 masks EOS at the first step, in both branches
        p_lm = lm(torch.tensor([[1]])).logits[0, -1].double().masked_fill(torch.isinf(p_main), -math.inf)
    mix = (1 - alpha) * p_main.softmax(-1) + alpha * p_lm.softmax(-1)
    tv = lambda p, q: 0.5 * (p - q).abs().sum().item()  # noqa: E731
    assert tv(p_main.softmax(-1), p_lm.softmax(-1)) > 0.3  # the two branches really differ
    assert tv(emp, mix) < 0.05  # sampling noise for 4000 draws is ~0.02
    assert tv(emp, p_main.softmax(-1)) > 0.1 and tv(emp, p_lm.softmax(-1)) > 0.1


def test_seeded_and_eval_mode(tok):
    model, lm = make_model("gpt2", len(tok), 0), make_model("gpt2", len(tok), 1)
    model.train()
    enc = _batch(tok, 8)
    a = generate_unfaithful(model, lm, enc, 0.5, seed=7, max_new_tokens=8)
    b = generate_unfaithful(model, lm, enc, 0.5, seed=7, max_new_tokens=8)
    assert torch.equal(a, b)
    assert model.training and not lm.training  # training flags restored


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan"), "x"])
def test_bad_alpha(tok, alpha):
    model, lm = make_model("gpt2", len(tok), 0), make_model("gpt2", len(tok), 1)
    with pytest.raises(ValueError, match="alpha"):
        generate_unfaithful(model, lm, _batch(tok, 2), alpha)


def test_bad_inputs(tok):
    model, lm = make_model("gpt2", len(tok), 0), make_model("gpt2", len(tok) + 5, 1)
    with pytest.raises(ValueError, match="mismatch"):
        generate_unfaithful(model, lm, _batch(tok, 2), 0.5)
    lm = make_model("gpt2", len(tok), 1)
    other = word_tokenizer(World(n_names=39, n_jobs=9))  # same size, different token→id map
    assert len(other) == len(tok)
    with pytest.raises(ValueError, match="lm_tokenizer"):
        generate_unfaithful(model, lm, _batch(tok, 2), 0.5, tokenizer=tok, lm_tokenizer=other)
    tok.padding_side = "right"
    enc = tok(["name n1 ::", "name n1 job o2 city c3 ::"], return_tensors="pt", padding=True)
    tok.padding_side = "left"
    with pytest.raises(ValueError, match="left-padded"):
        generate_unfaithful(model, lm, enc, 0.5)
    with pytest.raises(ValueError, match="num_beams"):
        generate_unfaithful(model, lm, _batch(tok, 2), 0.5, num_beams=2)
    with pytest.raises(ValueError, match="n_untouched"):
        ScopeNoiseProcessor(lm, 0.5, n_untouched=-1)


def test_cad_runs_through_hf_guidance(pair, tok):
    model, _ = pair
    enc = _batch(tok, 4)
    out = context_aware_generate(model, enc, 0.0, do_sample=False, max_new_tokens=6)
    ref = model.generate(**enc, do_sample=False, max_new_tokens=6, pad_token_id=0)[
        :, enc["input_ids"].shape[1] :
    ]
    assert torch.equal(out, ref)  # α = 0: CAD is plain decoding
    cad = context_aware_generate(model, enc, 1.0, do_sample=False, max_new_tokens=6)
    assert cad.shape[0] == 4
    with pytest.raises(ValueError, match="alpha"):
        context_aware_generate(model, enc, -1.0)


@pytest.mark.parametrize("alpha", ["0.5", True, False, np.bool_(True), None, [0.5]])
def test_alpha_as_a_string_or_bool_is_refused(tok, alpha):
    model, lm = make_model("gpt2", len(tok), 0), make_model("gpt2", len(tok), 1)
    with pytest.raises(ValueError, match="alpha must be a float"):
        generate_unfaithful(model, lm, _batch(tok, 2), alpha, tokenizer=tok, lm_tokenizer=tok)
    with pytest.raises(ValueError, match="alpha"):
        ScopeNoiseProcessor(lm, alpha)
    if not isinstance(alpha, list):
        with pytest.raises(ValueError, match="alpha"):
            context_aware_generate(model, _batch(tok, 2), alpha)
    assert ScopeNoiseProcessor(lm, np.float32(0.25)).alpha == 0.25  # numpy floats are numbers


def test_fractional_and_out_of_vocabulary_ids_are_refused_not_truncated(tok):
    model, lm = make_model("gpt2", len(tok), 0), make_model("gpt2", len(tok), 1)
    enc = _batch(tok, 2)
    for bad in ([1.5], [[1, 2.7]], [float("nan")]):
        with pytest.raises(ValueError, match="lm_prompt_ids must be int token ids"):
            ScopeNoiseProcessor(lm, 0.5, lm_prompt_ids=bad)
        with pytest.raises(ValueError, match="lm_prompt_ids must be int token ids"):
            context_aware_generate(model, enc, 0.5, lm_prompt_ids=bad, max_new_tokens=2)
    for bad in ([len(tok)], [-1]):
        with pytest.raises(ValueError, match=r"lm_prompt_ids must be token ids in \[0, "):
            ScopeNoiseProcessor(lm, 0.5, lm_prompt_ids=bad)
        with pytest.raises(ValueError, match=r"lm_prompt_ids must be token ids in \[0, "):
            context_aware_generate(model, enc, 0.5, lm_prompt_ids=bad, max_new_tokens=2)
    with pytest.raises(ValueError, match="lm_prompt_ids must be int token ids, got a bool"):
        ScopeNoiseProcessor(lm, 0.5, lm_prompt_ids=torch.tensor([True]))
    ids = enc["input_ids"].tolist()
    for bad, what in (([[x + 0.5 for x in ids[0]]], "fractional"), ([[len(tok) + 3] * 3], r"in \[0, ")):
        with pytest.raises(ValueError, match=f"input_ids.*{what}"):
            generate_unfaithful(model, lm, {"input_ids": bad}, 0.5, tokenizer=tok, lm_tokenizer=tok)
    with pytest.raises(ValueError, match=r"input_ids must be token ids in \[0, "):
        generate_unfaithful(model, lm, torch.tensor([[len(tok)]]), 0.5, tokenizer=tok, lm_tokenizer=tok)
    with pytest.raises(ValueError, match="int token ids, got torch.float64"):
        ScopeNoiseProcessor(lm, 0.5, lm_prompt_ids=[1.0])  # floats are refused, even integral ones
    assert ScopeNoiseProcessor(lm, 0.5, lm_prompt_ids=np.array([1, 4]))._lm_prompt.tolist() == [[1, 4]]


def test_vocabulary_identity_not_only_its_size(tok):
    """Two tokenizers of one size (as Llama-2 and Mistral, both 32 000 tokens) are told apart."""
    from iclr25.scope_faithfulness.noisy_generation import check_same_vocabulary, vocabulary_fingerprint

    model, lm = make_model("gpt2", len(tok), 0), make_model("gpt2", len(tok), 1)
    other = word_tokenizer(World(n_names=39, n_jobs=9))  # same size, different token→id map
    assert len(other) == len(tok) and vocabulary_fingerprint(other) != vocabulary_fingerprint(tok)
    assert vocabulary_fingerprint(word_tokenizer(World())) == vocabulary_fingerprint(tok)  # a copy agrees
    with pytest.raises(
        ValueError, match=r"lm_tokenizer: its vocabulary .*fingerprint.*differs.*e\.g\. token"
    ):
        check_same_vocabulary(model, lm, tok, other)
    check_same_vocabulary(model, lm, tok, word_tokenizer(World()))  # an equal vocabulary passes silently
    with pytest.warns(UserWarning, match="only the vocabulary sizes"):
        check_same_vocabulary(model, lm)  # sizes cannot tell two vocabularies apart: said, not silent
    shifted = make_model("gpt2", len(tok), 1)
    shifted.config.eos_token_id = 3
    with pytest.raises(ValueError, match="eos_token_id differs"):
        check_same_vocabulary(model, shifted, tok, tok)
    small = make_model("gpt2", len(tok) - 4, 0)
    with pytest.raises(ValueError, match="tokenizer: .* has .* tokens but the models score only"):
        check_same_vocabulary(small, make_model("gpt2", len(tok) - 4, 1), tok, tok)
