"""Synthetic biographies (priors, divergence), the exact hallucination/recall metric, BLEU and the NLI hook."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.scope_faithfulness import (
    World,
    corpus_bleu,
    hallucination_and_recall,
    nli_faithfulness,
    pretraining_corpus,
    records_dataset,
    word_tokenizer,
)


def test_metric_on_handmade_outputs():
    recs = [
        {"name": "n1", "job": "o2", "city": "c3", "year": "y4"},
        {"name": "n1", "job": "o2", "city": "c3", "year": ""},
    ]
    outs = ["n1 is a o2 from c3 born in y4 .", "n1 is a o2 from c3 born in y5 ."]
    m = hallucination_and_recall(outs, recs)
    assert m["hallucinated"].tolist() == [False, True]  # a year absent from the record is a hallucination
    assert m["recall"].tolist() == [1.0, 1.0]
    m = hallucination_and_recall(["n1 is a o3 .", "n9 ."], recs)
    assert m["hallucinated"].tolist() == [True, False]  # a wrong name is not a field error; a wrong job is
    assert np.allclose(m["recall"], [1 / 4, 0.0])
    with pytest.raises(ValueError, match="outputs"):
        hallucination_and_recall(["a"], recs)


def test_data_properties():
    w = World()
    test = records_dataset(w, 400, seed=0, faithful=True)
    m = hallucination_and_recall([r["reference"] for r in test], test, w)
    assert not m["hallucinated"].any() and (m["recall"] == 1).all()  # faithful references are exact
    d = records_dataset(w, 4000, seed=1, year_absent=0.4, divergent=0.5)
    m = hallucination_and_recall([r["reference"] for r in d], d, w)
    share = m["hallucinated"].mean()
    assert abs(share - 0.2) < 0.03 and share == np.mean(
        [r["divergent"] for r in d]
    )  # 0.4 × 0.5 divergent refs
    pc, py = w.priors()
    corpus = pretraining_corpus(w, 4000, seed=2, prior_strength=0.9)
    hits = [s.split()[5] == f"c{pc[int(s.split()[3][1:])]}" for s in corpus]
    assert 0.88 < np.mean(hits) < 0.94  # 0.9 + 0.1/8 by chance
    with pytest.raises(ValueError, match="prior_strength"):
        pretraining_corpus(w, 10, 0, prior_strength=1.5)
    with pytest.raises(ValueError, match="n_jobs"):
        World(n_jobs=1)


def test_tokenizer_roundtrip():
    tok = word_tokenizer()
    r = records_dataset(World(), 3, seed=0)[0]
    ids = tok(r["prompt"] + r["reference"])["input_ids"]
    assert ids[0] == tok.bos_token_id and tok.unk_token_id not in ids
    assert tok.decode(ids, skip_special_tokens=True) == (r["prompt"] + r["reference"])


def test_bleu():
    assert corpus_bleu(["n1 is a o2 ."], ["n1 is a o2 ."]) == pytest.approx(100.0)
    assert corpus_bleu(["x y z w"], ["n1 is a o2 ."]) < 1.0
    with pytest.raises(ValueError, match="references"):
        corpus_bleu(["a"], [""])


def test_nli_hook_with_local_model(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    tok = word_tokenizer()
    cfg = BertConfig(
        vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        num_labels=3, id2label={0: "contradiction", 1: "neutral", 2: "entailment"},
        label2id={"contradiction": 0, "neutral": 1, "entailment": 2},
    )  # fmt: skip
    torch.manual_seed(0)
    BertForSequenceClassification(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    p = nli_faithfulness(
        ["name n1 job o2 ::"] * 3, ["n1 is a o2 .", "n1 .", "o3"], str(tmp_path), batch_size=2
    )
    assert p.shape == (3,) and ((p >= 0) & (p <= 1)).all()
    with pytest.raises(ValueError, match="entailment_label"):
        nli_faithfulness(["a"], ["b"], str(tmp_path), entailment_label="entails")


def test_local_data_loaders(tmp_path):
    import json

    from iclr25.scope_faithfulness import load_data_to_text

    totto = tmp_path / "totto.jsonl"
    totto.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "linearized_input": "<page_title> Ada </page_title> <cell> 1815 </cell>",
                    "target": "Ada was born in 1815.",
                },
                {"linearized_input": "<cell> Paris </cell>", "references": ["It is Paris."]},
            ]
        )
    )
    rows = load_data_to_text(totto, "totto")
    assert [r["reference"] for r in rows] == [" Ada was born in 1815.", " It is Paris."]
    assert rows[0]["prompt"].endswith("Sentence:") and "<cell> 1815 </cell>" in rows[0]["prompt"]
    web = tmp_path / "webnlg.json"
    web.write_text(
        json.dumps(
            [{"input": ["Ada | birthYear | 1815", "Ada | field | maths"], "target": "Ada (1815) did maths."}]
        )
    )
    (r,) = load_data_to_text(web, "webnlg", template="{source} =>")
    assert r["prompt"] == "Ada | birthYear | 1815 ; Ada | field | maths =>"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"source": "x", "reference": " "}))
    with pytest.raises(ValueError, match="empty reference"):
        load_data_to_text(bad)
    with pytest.raises(ValueError, match="format"):
        load_data_to_text(totto, "xsum")
    with pytest.raises(ValueError, match="not a file"):
        load_data_to_text(tmp_path / "missing.jsonl")
