"""PEFT-grade API on tiny random HF models (BERT, GPT-2, Llama; built from configs, no network).

bf16 bases (fp32 adapter), inference cache of U/V and its invalidation, GPT-2 Conv1D + ``all-linear``,
``disable_adapter``, adapter names never falling through to transformers' LoRA integration, ``unload`` giving
the original model back (``modules_to_save`` copies), clear errors, and HF ``Trainer`` round trips.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from iclr25.common.lm import tiny_causal_lm
from iclr25.quantum_peft import QuantumPEFTConfig, QuantumPEFTLinear, QuantumPEFTModel, get_qpeft_model


def _bert(seed: int = 0):
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=32, num_labels=3,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    torch.manual_seed(seed)
    return BertForSequenceClassification(cfg).eval()


def _gpt2(seed: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg).eval()


def _randomise_lambda(model: QuantumPEFTModel, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, layer in model.qpeft_layers():
            layer.lam.normal_(generator=g)


def _ids(n: int = 4, t: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 64, (n, t), generator=torch.Generator().manual_seed(seed))


# -- bf16 / fp16 bases ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_base_keeps_fp32_adapter(dtype) -> None:
    base = tiny_causal_lm("llama", seed=0, dtype=dtype, vocab_size=64, hidden=64, layers=1, heads=4)
    model = get_qpeft_model(base, QuantumPEFTConfig(target_modules=["q_proj", "v_proj"], rank=2))
    _randomise_lambda(model)
    for _, layer in model.qpeft_layers():
        assert layer.theta_u.dtype == layer.lam.dtype == torch.float32
        assert layer.base_layer.weight.dtype == dtype
        u, v = layer.u(), layer.v()
        assert (u.T @ u - torch.eye(2)).abs().max() < 1e-5 and (v.T @ v - torch.eye(2)).abs().max() < 1e-5
    model.train()
    ids = _ids()
    out = model(input_ids=ids, labels=ids)
    assert out.logits.dtype == dtype
    before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3, weight_decay=0.0)
    out.loss.backward()
    opt.step()
    after = [p for p in model.parameters() if p.requires_grad]
    changed = sum(int((a != b).sum()) for a, b in zip(after, before))
    assert changed == sum(p.numel() for p in after)  # every angle and λ moves (bf16 storage froze ~1/3)


# -- inference cache ------------------------------------------------------------------------------------
def test_inference_cache_reused_and_invalidated(node_builds) -> None:
    model = get_qpeft_model(_gpt2(), QuantumPEFTConfig(target_modules=["c_attn"], rank=2))
    _randomise_lambda(model)
    calls = node_builds
    ids = _ids(2, 6)
    with torch.no_grad():
        y1 = model(input_ids=ids).logits
        n_first = calls["n"]
        y2 = model(input_ids=ids).logits
        gen = model.generate(input_ids=ids[:, :3], max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert n_first > 0 and calls["n"] == n_first  # second forward and all decode steps: cached U, V
    assert torch.equal(y1, y2) and gen.shape == (2, 8)
    # an optimizer step changes the angles in place -> the cache must be rebuilt
    model.train()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        y3 = model(input_ids=ids).logits
        for _, layer in model.qpeft_layers():
            layer.clear_cache()
        y3_fresh = model(input_ids=ids).logits
    assert (y3 - y1).abs().max() > 1e-4 and torch.equal(y3, y3_fresh)
    # load_state_dict back to the old angles -> cache invalidated again
    other = get_qpeft_model(_gpt2(), QuantumPEFTConfig(target_modules=["c_attn"], rank=2))
    with torch.no_grad():
        other(input_ids=ids)  # fills other's cache
        other.load_state_dict(model.state_dict())
        assert torch.equal(other(input_ids=ids).logits, y3)


# -- GPT-2 Conv1D, all-linear ------------------------------------------------------------------------------
def test_gpt2_conv1d_and_all_linear_merge() -> None:
    from transformers.pytorch_utils import Conv1D

    model = get_qpeft_model(_gpt2(), QuantumPEFTConfig(target_modules="all-linear", rank=2))
    names = set(model.targeted_module_names)
    assert names == {f"transformer.h.{i}.{n}" for i in range(2)
                     for n in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")}  # fmt: skip
    assert "lm_head" not in names  # the output head is excluded, as in PEFT
    layer = model.base_model.transformer.h[0].attn.c_attn
    assert isinstance(layer.base_layer, Conv1D) and (layer.in_features, layer.out_features) == (32, 96)
    _randomise_lambda(model)
    ids = _ids()
    with torch.no_grad():
        y = model(input_ids=ids).logits
        # ΔW acts as x ↦ x + s·U Λ Vᵀ x on the Conv1D (weight stored (in, out))
        x = torch.randn(3, 32)
        dense = layer.base_layer(x) + x @ layer.delta_weight().T
        assert (layer(x) - dense).abs().max() < 1e-5
        model.merge_adapter()
        assert (model(input_ids=ids).logits - y).abs().max() < 1e-4
        model.unmerge_adapter()
    bert = get_qpeft_model(_bert(), QuantumPEFTConfig(target_modules="all-linear"))
    assert "classifier" not in bert.targeted_module_names and len(bert.targeted_module_names) == 2 * 6 + 1


# -- disable_adapter, adapter names, unload, errors -----------------------------------------------------
def test_disable_adapter_names_and_unload_restore_original() -> None:
    ids = _ids()
    y_base = _bert()(input_ids=ids).logits
    model = get_qpeft_model(
        _bert(), QuantumPEFTConfig(target_modules=["query", "value"], modules_to_save=["classifier"])
    )
    _randomise_lambda(model)
    model.train()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    model(input_ids=ids, labels=torch.tensor([0, 1, 2, 0])).loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        y = model(input_ids=ids).logits
        assert (y - y_base).abs().max() > 1e-2
        with model.disable_adapter():
            assert torch.equal(model(input_ids=ids).logits, y_base)
        assert torch.equal(model(input_ids=ids).logits, y)
        model.merge_adapter()
        with model.disable_adapter():  # merged layers are unmerged inside the context
            assert (model(input_ids=ids).logits - y_base).abs().max() < 1e-5
    # transformers' own adapter API must not inject LoRA behind our back
    assert model.active_adapters == ["default"]
    with pytest.raises(ValueError, match="peft_config must be a QuantumPEFTConfig"):
        model.add_adapter("other", None)  # transformers' add_adapter(LoraConfig) would inject LoRA
    with pytest.raises(ValueError, match="unknown adapter"):
        model.set_adapter("other")
    with pytest.raises(ValueError, match="load_adapter"):
        model.load_adapter("somewhere", "other")
    assert not any("lora" in n for n, _ in model.named_parameters())
    plain = model.unload()
    assert not any(isinstance(m, QuantumPEFTLinear) for m in plain.modules())
    assert isinstance(plain.classifier, nn.Linear)
    with torch.no_grad():
        # the original model, head included (1e-5: the merge/unmerge above rounds W + ΔW − ΔW in fp32)
        assert (plain(input_ids=ids).logits - y_base).abs().max() < 1e-5


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match="modules_to_save entry 'clasifier'"):
        get_qpeft_model(_bert(), QuantumPEFTConfig(target_modules=["query"], modules_to_save=["clasifier"]))
    with pytest.raises(ValueError, match="alpha"):
        QuantumPEFTConfig(alpha=float("nan"))
    with pytest.raises(ValueError, match="alpha"):
        QuantumPEFTLinear(nn.Linear(4, 4), alpha=float("inf"))
    with pytest.raises(ValueError, match="safe_serialization"):
        get_qpeft_model(_bert(), QuantumPEFTConfig(target_modules=["query"])).save_pretrained("x", False)


# -- HF Trainer ------------------------------------------------------------------------------------------
def _train_round_trip(tmp_path, build, cfg: QuantumPEFTConfig, rows: dict, inputs: dict) -> None:
    import inspect

    from datasets import Dataset
    from transformers import TrainingArguments

    from iclr25.quantum_peft import QuantumPEFTTrainer

    model = get_qpeft_model(build(), cfg)
    assert "input_ids" in inspect.signature(model.forward).parameters  # the base model's signature
    assert model.get_base_model() is model.base_model
    ds = Dataset.from_dict({**rows, "unused_text": ["x"] * len(rows["input_ids"])})
    args = TrainingArguments(output_dir=str(tmp_path / "run"), num_train_epochs=1, per_device_train_batch_size=4,
                             learning_rate=5e-2, report_to=[], save_strategy="no", logging_strategy="no",
                             use_cpu=True, disable_tqdm=True, seed=0)  # fmt: skip
    trainer = QuantumPEFTTrainer(model=model, args=args, train_dataset=ds)  # remove_unused_columns=True
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    trainer.train()
    assert any(not torch.equal(p, before[n]) for n, p in model.named_parameters() if p.requires_grad)
    out = tmp_path / "adapter"
    trainer.save_model(str(out))
    files = {p.name for p in out.iterdir()}
    assert {
        "qpeft_adapter_model.safetensors",
        "qpeft_adapter_config.json",
    } <= files and "model.safetensors" not in files
    model.eval()
    with torch.no_grad():
        y = model(**inputs).logits
        fresh = QuantumPEFTModel.from_pretrained(build(), out).eval()
        assert (fresh(**inputs).logits - y).abs().max() < 1e-6
        merged = fresh.merge_and_unload()
        assert (merged(**inputs).logits - y).abs().max() < 1e-4


def test_trainer_bert_classifier_round_trip(tmp_path) -> None:
    ids = _ids(8, 8, 1)
    rows = {"input_ids": ids.tolist(), "attention_mask": torch.ones_like(ids).tolist(),
            "labels": [i % 3 for i in range(8)]}  # fmt: skip
    cfg = QuantumPEFTConfig(target_modules=["query", "value"], modules_to_save=["classifier"])
    _train_round_trip(tmp_path, _bert, cfg, rows, {"input_ids": ids})


def test_trainer_gpt2_round_trip(tmp_path) -> None:
    ids = _ids(8, 8, 2)
    rows = {
        "input_ids": ids.tolist(),
        "attention_mask": torch.ones_like(ids).tolist(),
        "labels": ids.tolist(),
    }
    _train_round_trip(
        tmp_path, _gpt2, QuantumPEFTConfig(target_modules="all-linear"), rows, {"input_ids": ids}
    )
