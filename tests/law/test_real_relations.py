"""The real preset's added relations on the real assets (issue #52): WordNet antonyms through
``assets.load_wordnet_pointers`` and gensim's ``family`` section — their counts, their phrasing rule, and that no
fact the preset can wash is made of a grammatical-section pair (those sections are the reasoning test)."""

import dataclasses
from types import SimpleNamespace

import pytest

from iclr25.law import real
from iclr25.law.experiment import PRESETS

_LOADED: dict = {}


@pytest.fixture
def assets_loaded(need_asset):
    need_asset("gensim-test-data", "wordnet")
    if not _LOADED:  # read once per module
        from iclr25.assets import load_analogies, load_wordnet_pointers

        _LOADED["v"] = (load_analogies().to_list(), load_wordnet_pointers(("!",)).to_list())  # rows as dicts
    return _LOADED["v"]


def test_wordnet_antonym_pointers_are_wordnets(assets_loaded):
    _, ptr = assets_loaded
    assert len(ptr) == 7979 and {r["symbol"] for r in ptr} == {
        "!"
    }  # WordNet 3.0's antonym pointers, all four POS
    pairs = {(r["pos"], r["word"], r["target"]) for r in ptr}
    assert {
        ("a", "hot", "cold"),
        ("a", "cold", "hot"),
        ("n", "war", "peace"),
        ("v", "increase", "decrease"),
    } <= pairs
    assert all("(" not in r["word"] and "(" not in r["target"] for r in ptr)  # adjective markers dropped


def test_antonym_and_family_facts_count_and_phrase(assets_loaded):
    an, ptr = assets_loaded
    gram = real.gram_pairs(an)
    ant = real.antonym_facts(ptr, gram)
    assert (
        len(real.antonym_facts(ptr)) == 6003 and len(ant) == 5952
    )  # 51 words lose their pair to gram2-opposite
    assert len({f.subject for f in ant}) == len(ant)  # one fact per word
    hot = next(f for f in ant if f.subject == "hot")
    assert (hot.prompt, hot.target) == ("The opposite of hot is", " cold")
    ok = lambda w: w.isalpha() and w.islower() and len(w) >= 3  # noqa: E731
    assert all(
        f.prompt == f"The opposite of {f.subject} is" and ok(f.subject) and ok(f.target[1:]) for f in ant
    )
    fam = real.family_facts(an, gram)
    assert len(fam) == 46  # the section's 23 (male, female) pairs, both directions
    king = [(f.prompt, f.target) for f in fam if f.subject in ("king", "queen")]
    assert king == [
        ("The female equivalent of a king is a", " queen"),
        ("The male equivalent of a queen is a", " king"),
    ]


def test_no_washable_fact_is_a_grammatical_pair(assets_loaded):
    an, ptr = assets_loaded
    gram = real.gram_pairs(an)
    assert len(gram) == 312 and frozenset(("acceptable", "unacceptable")) in gram
    cfg = PRESETS["real"]
    assert set(cfg.washed_relations) == {"capital", "capital_of", "city_state", "hypernym", "antonym"}
    assert not any(r.startswith("gram") for r in cfg.washed_relations + cfg.other_relations)
    cands = real.geo_facts(an) | {
        "antonym": real.antonym_facts(ptr, gram),
        "family": real.family_facts(an, gram),
    }
    cands[
        "hypernym"
    ] = []  # WordNet nouns: no grammatical pair by construction (checked through the split below)
    # every candidate counted as known: the split of any seed washes only facts of washed_relations, none a gram pair
    data = SimpleNamespace(known=cands)
    small = dataclasses.replace(cfg, scales=(64, 256))
    for seed in range(3):
        sp = real.split(small, data, seed)
        washed = sp["washed"][256]
        assert len(washed) == 256 and sp["pool"] >= 256 + 64
        assert not any(frozenset((f.subject, f.target.strip())) in gram for f in washed)
        held = {f for fs in sp["same"].values() for f in fs}
        assert not held & set(sp["washed"][256])  # held-out facts are never washed
