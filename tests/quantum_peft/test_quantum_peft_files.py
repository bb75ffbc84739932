"""Adapter folders use file names of their own, so PEFT's loader does not mistake them for a PEFT adapter
(``KeyError: 'QUANTUM_PEFT'``); folders written with PEFT's names by earlier versions still load."""

from __future__ import annotations

import json

import pytest
import torch

from iclr25.common.lm import tiny_causal_lm
from iclr25.quantum_peft import QuantumPEFTConfig, QuantumPEFTModel, get_qpeft_model
from iclr25.quantum_peft.model import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    LEGACY_ADAPTER_CONFIG,
    LEGACY_ADAPTER_WEIGHTS,
)

CFG = QuantumPEFTConfig(target_modules=["q_proj", "v_proj"], rank=2, init_seed=1)


def _lm():
    return tiny_causal_lm(
        "llama", seed=0, vocab_size=61, hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64
    )


def _trained(tmp_path):
    model = get_qpeft_model(_lm(), CFG)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(len(n))))
    ids = torch.randint(0, 61, (2, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        y = model(input_ids=ids).logits
    model.save_pretrained(tmp_path)
    return ids, y


def test_saved_folder_uses_its_own_file_names(tmp_path):
    _trained(tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {ADAPTER_CONFIG, ADAPTER_WEIGHTS}
    assert ADAPTER_CONFIG != LEGACY_ADAPTER_CONFIG and ADAPTER_WEIGHTS != LEGACY_ADAPTER_WEIGHTS
    assert json.loads((tmp_path / ADAPTER_CONFIG).read_text())["peft_type"] == "QUANTUM_PEFT"


def test_peft_loader_does_not_keyerror_on_our_folder(tmp_path):
    peft = pytest.importorskip("peft")
    _trained(tmp_path)
    with pytest.raises(Exception) as e:  # PEFT finds no adapter_config.json: its own error, not KeyError
        peft.PeftModel.from_pretrained(_lm(), str(tmp_path))
    assert not isinstance(e.value, KeyError), repr(e.value)
    assert "QUANTUM_PEFT" not in str(e.value)


def test_our_loader_reads_new_and_legacy_folders_identically(tmp_path):
    ids, y = _trained(tmp_path / "new")
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / LEGACY_ADAPTER_CONFIG).write_bytes((tmp_path / "new" / ADAPTER_CONFIG).read_bytes())
    (legacy / LEGACY_ADAPTER_WEIGHTS).write_bytes((tmp_path / "new" / ADAPTER_WEIGHTS).read_bytes())
    for d in (tmp_path / "new", legacy):
        m = QuantumPEFTModel.from_pretrained(_lm(), d)
        with torch.no_grad():
            assert torch.equal(m(input_ids=ids).logits, y)
        base = get_qpeft_model(_lm(), CFG)
        base.load_adapter(d, "again")
        base.set_adapter("again")
        with torch.no_grad():
            assert torch.equal(base(input_ids=ids).logits, y)


def test_empty_folder_and_a_lora_folder_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=f"from_pretrained: no Quantum-PEFT adapter.*{ADAPTER_CONFIG}"):
        QuantumPEFTModel.from_pretrained(_lm(), tmp_path)
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / LEGACY_ADAPTER_CONFIG).write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    with pytest.raises(ValueError, match="PEFT 'LORA' adapter, not a Quantum-PEFT one"):
        QuantumPEFTModel.from_pretrained(_lm(), lora)
