"""D₁/D₂ split, TRL-format preference pairs, and TRL's DPO loss against the paper's formula."""

from __future__ import annotations

import math

import pytest
import torch
from datasets import Dataset

from iclr25.scope_faithfulness import (
    World,
    build_preference_pairs,
    dpo_config,
    dpo_sigmoid_loss,
    independent_copy,
    make_dpo_trainer,
    records_dataset,
    scope_dpo,
    sequence_logps,
    split_halves,
)

from .conftest import make_model


@pytest.mark.parametrize("n", [1, 2, 7, 10])
def test_split_halves_invariants(n):
    rows = [{"i": i} for i in range(n)]
    if n < 2:
        with pytest.raises(ValueError, match="at least 2"):
            split_halves(rows)
        return
    d1, d2 = split_halves(rows, seed=3)
    a, b = {r["i"] for r in d1}, {r["i"] for r in d2}
    assert not a & b and a | b == set(range(n)) and len(d1) == math.ceil(n / 2)
    e1, e2 = split_halves(Dataset.from_list(rows), seed=3)  # same split for a datasets.Dataset
    assert [r["i"] for r in e1] == [r["i"] for r in d1] and [r["i"] for r in e2] == [r["i"] for r in d2]
    assert split_halves(rows, seed=4) != (d1, d2) or n == 2


@pytest.fixture
def rows():
    return records_dataset(World(), 24, seed=5)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_pairs_format_and_invariants(tok, rows, family):
    model, lm = make_model(family, len(tok), 0), make_model(family, len(tok), 1)
    tok.padding_side = "right"
    pairs = build_preference_pairs(
        model, lm, Dataset.from_list(rows), 0.5, tokenizer=tok, batch_size=10, max_new_tokens=10
    )
    assert tok.padding_side == "right"  # restored
    assert isinstance(pairs, Dataset) and pairs.column_names == ["prompt", "chosen", "rejected"]
    assert pairs["prompt"] == [r["prompt"] for r in rows]
    assert pairs["chosen"] == [r["reference"] for r in rows]  # chosen = the reference of the same x
    differs = sum(c.strip() != r.strip() for c, r in zip(pairs["chosen"], pairs["rejected"], strict=True))
    assert differs >= 0.9 * len(rows)
    # rejected renders as the continuation of its prompt: prompt + rejected re-tokenises to prompt ids + y⁻ ids
    for p, r in zip(pairs["prompt"][:5], pairs["rejected"][:5], strict=True):
        assert tok(p + r)["input_ids"][: len(tok(p)["input_ids"])] == tok(p)["input_ids"]
    again = build_preference_pairs(model, lm, rows, 0.5, tokenizer=tok, batch_size=10, max_new_tokens=10)
    assert again["rejected"] == pairs["rejected"]  # seeded


def test_pairs_bad_input(tok, rows):
    model, lm = make_model("gpt2", len(tok), 0), make_model("gpt2", len(tok), 1)
    bad = [dict(rows[0], reference="  ")] + rows[1:]
    with pytest.raises(ValueError, match="empty"):
        build_preference_pairs(model, lm, bad, 0.5, tokenizer=tok)
    with pytest.raises(ValueError, match="reference_column"):
        build_preference_pairs(model, lm, rows, 0.5, tokenizer=tok, reference_column="target")
    with pytest.raises(ValueError, match="alpha"):
        build_preference_pairs(model, lm, rows, 2.0, tokenizer=tok)
    with pytest.raises(ValueError, match="empty"):
        build_preference_pairs(model, lm, [], 0.5, tokenizer=tok)


def _pairs(tok, n=8):
    rows = records_dataset(World(), n, seed=6)
    rej = [" n1 is a o1 from c1 born in y1 .", " n2 is a o7 .", " c3 c3 y2 ."] * n
    return Dataset.from_dict(
        {"prompt": [r["prompt"] for r in rows], "chosen": [r["reference"] for r in rows], "rejected": rej[:n]}
    )


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_trl_dpo_loss_matches_formula(tok, family):
    policy, ref = make_model(family, len(tok), 0), make_model(family, len(tok), 1)
    trainer = make_dpo_trainer(policy, _pairs(tok), tok, ref_model=ref, output_dir=None)
    ex = [trainer.train_dataset[i] for i in range(6)]
    for e in ex:  # response tokens = completion + EOS, prompt tokens excluded
        assert e["chosen_ids"][-1] == tok.eos_token_id and e["rejected_ids"][-1] == tok.eos_token_id
        assert e["prompt_ids"] == tok(e["prompt"])["input_ids"]
    policy.eval()
    loss = trainer.compute_loss(policy, trainer.data_collator(ex)).item()
    naive = torch.stack(
        [
            dpo_sigmoid_loss(
                sequence_logps(policy, e["prompt_ids"], e["chosen_ids"]),
                sequence_logps(policy, e["prompt_ids"], e["rejected_ids"]),
                sequence_logps(ref, e["prompt_ids"], e["chosen_ids"]),
                sequence_logps(ref, e["prompt_ids"], e["rejected_ids"]),
                beta=0.1,
            )
            for e in ex
        ]
    ).mean()
    assert abs(loss - naive.item()) <= 1e-5
    assert abs(loss - math.log(2)) > 1e-3  # a real test: policy ≠ reference
    # π_θ = π_ref (default reference = frozen copy of the policy): loss is exactly log 2
    same = make_dpo_trainer(policy, _pairs(tok), tok)
    assert abs(same.compute_loss(policy, same.data_collator(ex)).item() - math.log(2)) <= 1e-6


def test_dpo_sigmoid_loss_identities():
    z = torch.zeros(4)
    assert torch.allclose(dpo_sigmoid_loss(z, z, z, z), torch.full((4,), math.log(2)))
    big = torch.full((1,), 100.0)
    assert dpo_sigmoid_loss(big, -big, z[:1], z[:1], beta=1.0).item() < 1e-6


def test_scope_dpo_learns_preference(tok):
    policy = make_model("gpt2", len(tok), 0)
    ref = make_model("gpt2", len(tok), 0)
    pairs = _pairs(tok, 8)
    ex = make_dpo_trainer(ref, pairs, tok).train_dataset

    def margin(m):
        return sum(
            (
                sequence_logps(m, e["prompt_ids"], e["chosen_ids"])
                - sequence_logps(m, e["prompt_ids"], e["rejected_ids"])
            ).item()
            for e in ex
        )

    before = margin(policy)
    _, logs = scope_dpo(
        policy,
        pairs,
        tok,
        learning_rate=3e-3,
        num_train_epochs=4,
        per_device_train_batch_size=4,
        logging_steps=1,
    )
    losses = [h["loss"] for h in logs if "loss" in h]
    assert losses[-1] < math.log(2) - 0.05
    assert margin(policy) > before + 1.0  # the policy now prefers the references to the negatives
    assert not policy.training


def test_dpo_config_defaults_and_errors():
    c = dpo_config()
    assert c.beta == 0.1 and c.loss_type == ["sigmoid"] and c.learning_rate == 1e-6 and c.disable_dropout
    assert c.num_train_epochs == 1 and c.per_device_train_batch_size == 4 and c.seed == 12357
    with pytest.raises(ValueError, match="beta"):
        dpo_config(beta=-1.0)
    with pytest.raises(ValueError, match="missing"):
        make_dpo_trainer(
            make_model("gpt2", 79, 0), Dataset.from_dict({"prompt": ["a"], "chosen": ["b"]}), None
        )


def test_independent_copy_survives_trl_patch(tok):
    """TRL replaces model.forward by a closure over the original; our copy must compute with its own weights."""
    model = make_model("gpt2", len(tok), 0)
    make_dpo_trainer(model, _pairs(tok, 4), tok)  # TRL patches model.forward (fused LM head)
    copy_ = independent_copy(model)
    x = torch.tensor([[1, 4, 20, 8]])
    with torch.no_grad():
        before = model(x).logits.clone()
        copy_.get_output_embeddings().weight.zero_()
        assert torch.equal(model(x).logits, before)  # the original is untouched
        assert copy_(x).logits.abs().max() == 0  # the copy really uses its own (zeroed) head
