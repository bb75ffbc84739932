"""The real preset's pieces on the real assets: task builders (counts, disjoint splits), SVF on SmolLM2 (zero z =
the base logits), the one-pass greedy check against ``generate``, the prefix-cached dispatcher against running the
full text, and the config's refusals."""

from __future__ import annotations

import copy
import re

import pytest
import torch

from iclr25.transformer2 import real as R
from iclr25.transformer2.experiment import PRESETS, RealConfig
from iclr25.transformer2.svf import apply_svf, get_expert, set_expert, svf_disabled

CFG = PRESETS["real"]


@pytest.fixture(scope="module")
def svf_lm(smollm2):
    """A copy of the session's SmolLM2 with SVF on the real preset's matrices (the shared model stays plain)."""
    model, tok = smollm2
    m = copy.deepcopy(model)
    targets = R.svf_targets(m.config.num_hidden_layers, CFG.svf_modules, CFG.svf_first_layer)
    apply_svf(m, targets, mode="official")
    m.eval()
    return m, tok


@pytest.fixture(scope="module")
def tasks(smollm2):
    return R.build_tasks(CFG, 0, smollm2[1])


def _keys(items):
    return {it.key for it in items}


def test_task_builders_counts_and_disjoint_splits(tasks, need_asset):
    need_asset("gensim-test-data")
    t, held = tasks
    an = t["analogy"]
    assert an.counts["pairs"] == 313  # distinct word pairs of the nine gram sections
    assert len(an.train) + len(an.val) + len(an.test) == 313
    for task in (*t.values(), held):
        tr, va, te = _keys(task.train), _keys(task.val), _keys(task.test)
        assert not (tr & va) and not (tr & te) and not (va & te), task.name
        assert len(tr) == len(task.train) and len(te) == len(task.test)
    # a test analogy's example lines are pairs of the test split of its own section
    test_pairs = {k.split(":", 1)[1] for k in _keys(an.test)}
    for it in an.test[:20]:
        for line in it.prompt.split("\n")[:-1]:
            a, b = line.split(" -> ")
            assert f"{a}:{b}" in test_pairs
    se = t["sentiment"]
    assert (se.counts["sentences"], len(se.test), len(se.val), len(se.train)) == (200, 60, 20, 120)
    assert {it.answer for it in se.test} == {" negative", " positive"}
    so = t["source"]
    assert len(so.test) == 3 * CFG.source_test and len(so.val) == 3 * CFG.source_val
    assert so.counts["docs_newsgroups"] == 198 and so.counts["docs_lee"] == 350
    assert not any(
        re.match(r"Text: (Path|From|Newsgroups|Xref): ", it.prompt) for it in so.train + so.val + so.test
    )
    assert held.counts["pairs"] == 68 and all(k.startswith("gram") for k in _keys(an.train) | _keys(an.test))
    # another seed draws other splits from the same data
    an1 = R.build_analogy(1, CFG.analogy_sections, 2, CFG.analogy_test_frac, CFG.analogy_val_frac)
    assert _keys(an1.test) != _keys(an.test) and an1.counts == an.counts


def test_strip_headers_removes_the_newsgroup_header():
    post = "Newsgroups: alt.atheism\nPath: a!b\nFrom: x@y\n\nIn article <1@x> y writes:\nbody\n\nmore"
    assert R.strip_headers(post) == "In article <1@x> y writes:\nbody\n\nmore"


def test_zero_z_gives_the_base_logits(svf_lm):
    model, tok = svf_lm
    ids = tok(["The capital of France is", "quick -> quickly\nslow ->"], return_tensors="pt", padding=True)
    with torch.no_grad(), svf_disabled(model):
        base = model(**ids).logits
    saved = get_expert(model)
    set_expert(model, {n: torch.zeros_like(z) for n, z in saved.items()})  # official form: sigmoid(0)·c = 1
    with torch.no_grad():
        zero = model(**ids).logits
    set_expert(model, {n: z + torch.randn_like(z) for n, z in saved.items()})
    with torch.no_grad():
        moved = model(**ids).logits
    set_expert(model, saved)
    assert (zero - base).abs().max() < 1e-4
    assert (moved - base).abs().max() > 1e-2  # the z vectors do reach the logits


def test_one_pass_greedy_check_equals_generate(svf_lm, tasks):
    model, tok = svf_lm
    items = tasks[0]["analogy"].test[:8]
    correct, _ = R.greedy_scores(model, tok, items)
    for it, c in zip(items, correct):
        ids = tok(it.prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False, pad_token_id=0
            )
        text = tok.decode(out[0, ids.shape[1] :])
        assert c == (text.startswith(it.answer + "\n")), (it.prompt, text)
    assert 0 < correct.sum() < len(items)  # both outcomes occur on this slice


def test_prefix_cache_equals_the_full_text(svf_lm, tasks):
    model, tok = svf_lm
    t, _ = tasks
    prefix = R.dispatch_prefix(tok, {n: t[n].train[0].prompt for n in R.TASKS}, CFG.dispatch_tokens)
    queries = [R.dispatch_query(tok, t[n].test[0].prompt, CFG.dispatch_tokens) for n in R.TASKS]
    cached = R.prefix_logprobs(model, tok, prefix, queries)
    with torch.no_grad(), svf_disabled(model):
        cached_base = R.prefix_logprobs(model, tok, prefix, queries)
        for i, q in enumerate(queries):
            ids = torch.cat(  # the same tokens (prefix and query tokenised apart), run without the cache
                [tok(x, return_tensors="pt", add_special_tokens=False)["input_ids"] for x in (prefix, q)], 1
            )
            ref = torch.log_softmax(model(input_ids=ids).logits[0, -1].float(), -1)
            assert (cached_base[i] - ref).abs().max() < 1e-3
    assert cached.shape == cached_base.shape


def test_label_words_must_be_single_tokens(smollm2):
    with pytest.raises(ValueError, match="must be one token"):
        R.single_tokens(smollm2[1], (" encyclopedias and more",))


def test_real_config_refusals():
    with pytest.raises(ValueError, match="heldout_section must not be one of analogy_sections"):
        RealConfig(heldout_section="gram2-opposite")
    with pytest.raises(ValueError, match="hidden is a field of the skills toy"):
        RealConfig(hidden=32)
    with pytest.raises(ValueError, match="svf_first_layer must be in"):
        R.svf_targets(30, ("gate_proj",), 30)
    with pytest.raises(ValueError, match="sections must be analogy sections"):
        R.analogy_pairs(("gram10-nothing",))
