import json

import pytest

from iclr25.law import Fact, load_facts


def test_load_jsonl_and_csv(tmp_path):
    rows = [
        {"subject": "Danielle Darrieux", "relation": "mother tongue is", "object": "French"},
        {"subject": "Edwin of Northumbria", "prompt": "The religion of {} is", "object": "Christianity"},
    ]
    p = tmp_path / "f.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    facts = load_facts(p)
    assert facts[0] == Fact("Danielle Darrieux mother tongue is", " French", "Danielle Darrieux")
    assert facts[1].prompt == "The religion of Edwin of Northumbria is"
    assert facts[1].subject_end == len("The religion of Edwin of Northumbria")
    c = tmp_path / "f.csv"
    c.write_text("subject,relation,object\nParis,is the capital of,France\n")
    assert load_facts(c) == [Fact("Paris is the capital of", " France", "Paris")]


def test_loader_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_facts(tmp_path / "none.jsonl")
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"subject": "x"}\n')
    with pytest.raises(ValueError, match="object"):
        load_facts(bad)
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_facts(bad)
    t = tmp_path / "f.txt"
    t.write_text("x")
    with pytest.raises(ValueError, match=".jsonl or .csv"):
        load_facts(t)


def test_world_recall_rows_are_consistent(world):
    """Every labelled position of a recall training row is the value bound to the key just before it, and the
    evaluation prompts follow the same format (a prefix of a training row)."""
    x, y = world.recall_rows(50, 0, length=16)
    v = world.vocab
    for row, lab in zip(x.tolist(), y.tolist()):
        p = world.cfg.recall_pairs
        binding = {row[2 * i]: row[2 * i + 1] for i in range(p)}
        assert len(binding) == p  # distinct keys
        for t, yt in enumerate(lab):
            if yt != -100:
                assert yt == binding[row[t - 1]] and v[row[t - 1]].startswith("k")
    f = world.recall(5, 1)[0]
    words = f.prompt.split()
    assert dict(zip(words[0:-1:2], words[1:-1:2]))[words[-1]] == f.target.strip()


def test_world_relation_first_prompts_end_at_the_subject():
    """The reproduction's prompt order "r s₁ s₂" → o: same subjects and answers as "s₁ s₂ r", and the subject's
    last token is the prompt's last token (the position MEMIT/LaW read the key at is where the answer is produced)."""
    import dataclasses

    from iclr25.law.memories import encode_facts
    from iclr25.law.world import World, WorldConfig

    cfg = WorldConfig(subjects=12, first_names=3, relations=2, objects=6, recall_keys=4, recall_values=4,
                      recall_pairs=2, generic_states=6, generic_len=8, seed=0)  # fmt: skip
    a, b = World(cfg), World(dataclasses.replace(cfg, relation_first=True))
    fa, fb = a.facts(), b.facts()
    assert [f.target for f in fa] == [f.target for f in fb] and [f.subject for f in fa] == [
        f.subject for f in fb
    ]
    for f, g in zip(fa, fb):
        s, r = f.prompt.rsplit(" ", 1)
        assert g.prompt == f"{r} {s}" and s == f.subject
    batch = encode_facts(b.tokenizer, fb, target=None)
    assert (batch.subject_pos == batch.prompt_len - 1).all()
    batch = encode_facts(a.tokenizer, fa, target=None)
    assert (batch.subject_pos == batch.prompt_len - 2).all()
    with pytest.raises(ValueError, match="relation_first"):
        WorldConfig(relation_first=1)
