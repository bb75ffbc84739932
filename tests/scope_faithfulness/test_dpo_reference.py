"""π_ref of SCOPE's DPO stays p_θ₀: after TRL's SFTTrainer / an earlier DPOTrainer, and with a PEFT adapter (#51)."""

from __future__ import annotations

import copy
import math
import tempfile
import warnings

import pytest
import torch
from datasets import Dataset

from iclr25.scope_faithfulness import (
    World,
    independent_copy,
    make_dpo_trainer,
    records_dataset,
    scope_dpo,
    sequence_logps,
)

from .conftest import make_model

X = torch.tensor([[1, 4, 20, 8, 9, 30]])


def _rows(n=16):
    return records_dataset(World(), n, seed=5)


def _pairs(n=16):
    rows = _rows(n)
    rej = [" n1 is a o1 from c1 born in y1 .", " n2 is a o7 .", " c3 c3 y2 ."] * n
    return Dataset.from_dict(
        {"prompt": [r["prompt"] for r in rows], "chosen": [r["reference"] for r in rows], "rejected": rej[:n]}
    )


def _quiet_train(trainer):
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()


def _sft(model, tok):
    """The natural SFT stage: TRL's SFTTrainer on prompt/completion rows (patches model.forward)."""
    from trl import SFTConfig, SFTTrainer

    rows = _rows()
    ds = Dataset.from_dict(
        {"prompt": [r["prompt"] for r in rows], "completion": [r["reference"] for r in rows]}
    )
    args = SFTConfig(
        output_dir=tempfile.mkdtemp(prefix="scope_sft_"), max_steps=2, per_device_train_batch_size=4,
        learning_rate=1e-3, report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    _quiet_train(SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok))


def _earlier_dpo(model, tok):
    _quiet_train(make_dpo_trainer(model, _pairs(), tok, learning_rate=1e-3, max_steps=1, warmup_steps=0))


@pytest.mark.parametrize("stage", [_sft, _earlier_dpo], ids=["after_SFTTrainer", "after_DPOTrainer"])
def test_reference_does_not_follow_the_policy(tok, stage):
    """Regression: a deepcopy reference computed with the policy's weights after TRL patched model.forward."""
    model = make_model("llama", len(tok), 0)
    stage(model, tok)
    assert "forward" in model.__dict__  # TRL patched the instance: the case a plain deepcopy gets wrong
    theta0 = {k: v.detach().clone() for k, v in model.state_dict().items()}
    trainer = make_dpo_trainer(
        model, _pairs(), tok, learning_rate=1e-2, max_steps=1, warmup_steps=0, per_device_train_batch_size=4
    )
    ref = trainer.ref_model
    fresh = make_model("llama", len(tok), 1)
    fresh.load_state_dict(theta0)  # p_θ₀ through its own class forward
    with torch.no_grad():
        pol0, ref0 = model(X).logits.clone(), ref(X).logits.clone()
        assert torch.equal(ref0, fresh(X).logits)
    _quiet_train(trainer)
    with torch.no_grad():
        pol1, ref1 = model(X).logits, ref(X).logits
    assert (pol1 - pol0).abs().max() > 1e-3  # the policy moved
    assert torch.equal(ref1, ref0)  # the reference did not (bitwise)
    assert all(torch.equal(v, theta0[k]) for k, v in ref.state_dict().items())


def test_independent_copy_keeps_forwards_that_refer_to_the_copy():
    """Instance forwards bound to the module itself (accelerate-style hooks) survive; foreign closures do not."""
    m = torch.nn.Linear(3, 2)
    calls = []

    def hooked(self, x):
        calls.append(1)
        return type(self).forward(self, x)

    import types

    m.forward = types.MethodType(hooked, m)
    c = independent_copy(m)
    assert "forward" in c.__dict__ and c.forward.__self__ is c
    c(torch.zeros(1, 3))
    assert calls == [1]


def _lora():
    from peft import LoraConfig

    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], lora_dropout=0.0)


def test_dpo_with_peft_adapter_trains_against_the_base_model(tok):
    """peft_config: only the adapter trains; π_ref = adapter disabled = the base model p_θ₀ (logits bitwise)."""
    from peft import PeftModel

    model = make_model("llama", len(tok), 0)
    base = copy.deepcopy(model)
    pairs = _pairs(8)
    trainer = make_dpo_trainer(
        model, pairs, tok, peft_config=_lora(), learning_rate=3e-3, num_train_epochs=3,
        per_device_train_batch_size=4, warmup_steps=0, logging_steps=1,
    )  # fmt: skip
    assert trainer.ref_model is None and isinstance(
        trainer.model, PeftModel
    )  # no copy: the adapter is disabled
    ex = trainer.train_dataset
    batch = trainer.data_collator([ex[i] for i in range(4)])
    ref_before = trainer.compute_ref_log_probs(trainer.model, batch)
    _quiet_train(trainer)
    peft_model = trainer.model
    peft_model.eval()
    lora = {k: v for k, v in peft_model.named_parameters() if "lora_" in k}
    assert lora and all(v.requires_grad for v in lora.values())
    assert any(
        v.abs().max() > 0 for k, v in lora.items() if "lora_B" in k
    )  # the adapter trained (B starts at 0)
    with torch.no_grad():
        adapted = peft_model(input_ids=X).logits
        with peft_model.disable_adapter():
            disabled = peft_model(input_ids=X).logits
        want = base(X).logits
    assert torch.equal(disabled, want)  # the reference network is exactly the base model
    assert (adapted - want).abs().max() > 1e-4  # … and the policy is not
    ref_after = trainer.compute_ref_log_probs(trainer.model, batch)  # TRL's own reference path
    for a, b in zip(ref_before, ref_after, strict=True):
        assert torch.equal(a, b)
    e = ex[0]
    naive = sequence_logps(base, e["prompt_ids"], e["chosen_ids"]).item()
    assert abs(ref_after[0][0].item() - naive) <= 1e-4  # = log p_θ₀(chosen | prompt) of the base model


def test_scope_dpo_with_peft_returns_the_adapter_model(tok):
    from peft import PeftModel

    model = make_model("gpt2", len(tok), 0)
    out, logs = scope_dpo(
        model, _pairs(8), tok, peft_config=_lora_gpt2(), learning_rate=3e-3, num_train_epochs=4,
        per_device_train_batch_size=4, warmup_steps=0, logging_steps=1,
    )  # fmt: skip
    losses = [h["loss"] for h in logs if "loss" in h]
    assert isinstance(out, PeftModel) and not out.training
    assert losses[-1] < math.log(2) - 0.01  # the DPO loss left log 2 (π_θ ≠ π_ref after training)


def _lora_gpt2():
    from peft import LoraConfig

    return LoraConfig(
        r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"], lora_dropout=0.0, fan_in_fan_out=True
    )


def test_peft_config_errors(tok):
    model = make_model("gpt2", len(tok), 0)
    with pytest.raises(ValueError, match=r"peft_config must be a peft\.PeftConfig.*got dict"):
        make_dpo_trainer(model, _pairs(4), tok, peft_config={"r": 4})
    from peft import get_peft_model

    wrapped = get_peft_model(make_model("gpt2", len(tok), 0), _lora_gpt2())
    with pytest.raises(ValueError, match="already a peft.PeftModel"):
        make_dpo_trainer(wrapped, _pairs(4), tok, peft_config=_lora_gpt2())


def test_peft_model_policy_trains_against_a_frozen_copy_of_its_adapter(tok):
    """A PeftModel (pre-trained adapter) as the policy: no model copy; TRL's frozen "ref" adapter = the start."""
    from peft import get_peft_model

    wrapped = get_peft_model(make_model("gpt2", len(tok), 0), _lora_gpt2())
    with torch.no_grad():  # a non-trivial "pre-trained" adapter
        for k, v in wrapped.named_parameters():
            if "lora_B" in k:
                v.normal_(0.0, 0.05)
    start = {k: v.detach().clone() for k, v in wrapped.named_parameters() if ".default." in k}
    trainer = make_dpo_trainer(
        wrapped,
        _pairs(8),
        tok,
        learning_rate=3e-3,
        max_steps=2,
        warmup_steps=0,
        per_device_train_batch_size=4,
    )
    assert trainer.ref_model is None and "ref" in wrapped.peft_config
    _quiet_train(trainer)
    now = dict(wrapped.named_parameters())
    assert any(not torch.equal(now[k], v) for k, v in start.items())  # the adapter trained
    assert all(
        torch.equal(now[k.replace(".default.", ".ref.")], v) for k, v in start.items()
    )  # the reference did not
