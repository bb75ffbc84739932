"""PEFT-shaped injector on Hugging Face models: targeting, freezing, batched factors, merge, save/load."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from iclr25.common.lm import tiny_causal_lm
from iclr25.quantum_peft import (
    QuantumPEFTConfig,
    QuantumPEFTLinear,
    QuantumPEFTModel,
    count_parameters,
    get_qpeft_model,
    lora_parameters,
)


def _vit(seed: int = 0, width: int = 64):
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(seed)
    cfg = ViTConfig(
        image_size=8,
        patch_size=2,
        num_channels=1,
        hidden_size=width,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=2 * width,
        num_labels=10,
    )
    return ViTForImageClassification(cfg).eval()


def _randomise_lambda(model: QuantumPEFTModel, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, layer in model.qpeft_layers():
            layer.lam.normal_(generator=g)


def test_inject_vit_freezes_and_counts() -> None:
    base = _vit()
    x = torch.randn(4, 1, 8, 8)
    y0 = base(pixel_values=x).logits
    cfg = QuantumPEFTConfig(
        target_modules=["q_proj", "v_proj"], rank=2, layers=1, modules_to_save=["classifier"]
    )
    model = get_qpeft_model(base, cfg)
    assert len(model.targeted_module_names) == 4
    assert (model(pixel_values=x).logits - y0).abs().max().item() == 0.0  # Λ = 0
    trainable = {n for n, p in model.base_model.named_parameters() if p.requires_grad}
    assert all(
        n.startswith("classifier.") or n.rsplit(".", 1)[-1] in ("theta_u", "theta_v", "lam")
        for n in trainable
    )
    assert model.n_adapter_params() == 4 * count_parameters(64, 64, 2, 1) == 136
    groups = {g["name"]: g for g in model.param_groups(0.1, 0.03, 0.003)}
    assert sum(p.numel() for p in groups["angles"]["params"]) == 4 * 32
    assert groups["angles"]["lr"] == 0.1 and groups["other"]["lr"] == 0.003


def test_regex_targets_and_llama_injection() -> None:
    lm = tiny_causal_lm("llama", seed=0, vocab_size=64, hidden=48, layers=2, heads=4, intermediate=96)
    # a regex on the full name (PEFT semantics): only layer 1's q/v; 48 is not a power of two → QSD node
    model = get_qpeft_model(
        lm, QuantumPEFTConfig(target_modules=r".*layers\.1\.self_attn\.(q|v)_proj", rank=2)
    )
    names = model.targeted_module_names
    assert len(names) == 2 and all(".layers.1." in n for n in names)
    ids = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(0))
    _randomise_lambda(model)
    out = model(input_ids=ids).logits
    assert torch.isfinite(out).all()
    with pytest.raises(ValueError, match="matched no module"):
        get_qpeft_model(_vit(), QuantumPEFTConfig(target_modules=["nope"]))
    with pytest.raises(ValueError, match="target module .*layernorm_before' is a LayerNorm; .*nn.Linear"):
        get_qpeft_model(_vit(), QuantumPEFTConfig(target_modules=["layernorm_before"]))


def test_batched_factors_equal_per_layer_forward_and_grad() -> None:
    base = _vit()
    model = get_qpeft_model(base, QuantumPEFTConfig(target_modules=["q_proj", "v_proj", "fc1"], rank=2))
    _randomise_lambda(model)
    x = torch.randn(3, 1, 8, 8)
    y_batched = model(pixel_values=x).logits  # factors built per (size, K, L) group
    y_single = base(pixel_values=x).logits  # each layer builds its own factors
    assert (y_batched - y_single).abs().max() < 1e-6
    y_batched.square().sum().backward()
    g1 = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    y_single.square().sum().backward()
    g2 = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g1, g2))


def test_merge_and_unload_gives_plain_equivalent_model() -> None:
    model = get_qpeft_model(_vit(), QuantumPEFTConfig(target_modules=["q_proj", "v_proj"], rank=3, layers=2))
    _randomise_lambda(model)
    x = torch.randn(4, 1, 8, 8)
    y = model(pixel_values=x).logits
    model.merge_adapter()
    assert (model(pixel_values=x).logits - y).abs().max() < 1e-5
    model.unmerge_adapter()
    plain = model.merge_and_unload()
    assert not any(isinstance(m, QuantumPEFTLinear) for m in plain.modules())
    assert isinstance(plain.vit.layers[0].attention.q_proj, nn.Linear)
    assert (plain(pixel_values=x).logits - y).abs().max() < 1e-5


def test_save_load_adapter_only(tmp_path) -> None:
    cfg = QuantumPEFTConfig(
        target_modules=["q_proj", "v_proj"], rank=2, modules_to_save=["classifier"], init_seed=5
    )
    model = get_qpeft_model(_vit(seed=0), cfg)
    _randomise_lambda(model, 1)
    with torch.no_grad():
        model.base_model.classifier.weight.add_(1.0)
    x = torch.randn(4, 1, 8, 8)
    y = model(pixel_values=x).logits
    model.save_pretrained(tmp_path)
    state = load_file(str(tmp_path / "qpeft_adapter_model.safetensors"))
    trainable = {  # file keys drop the adapter-name segment, as in PEFT's adapter files
        n.replace("trained_modules.default.", "").replace("qpeft_adapters.default.", "")
        for n, p in model.base_model.named_parameters()
        if p.requires_grad
    }
    assert set(state) == trainable and "classifier.weight" in state
    assert sum(v.numel() for v in state.values()) == 136 + 64 * 10 + 10  # adapters + head only
    assert json.loads((tmp_path / "qpeft_adapter_config.json").read_text())["rank"] == 2
    fresh = QuantumPEFTModel.from_pretrained(_vit(seed=0), tmp_path)
    assert (fresh(pixel_values=x).logits - y).abs().max().item() == 0.0
    with pytest.raises(ValueError, match="do not fit"):
        other = get_qpeft_model(
            _vit(), QuantumPEFTConfig(target_modules=["q_proj"], modules_to_save=["classifier"])
        )
        other.load_adapter_weights(tmp_path)


def test_same_seed_same_init_and_peft_lora_counts() -> None:
    from peft import LoraConfig, get_peft_model

    cfg = QuantumPEFTConfig(target_modules=["q_proj", "v_proj"], init_seed=3)
    a, b = get_qpeft_model(_vit(), cfg), get_qpeft_model(_vit(), cfg)
    for (_, la), (_, lb) in zip(a.qpeft_layers(), b.qpeft_layers()):
        assert torch.equal(la.theta_u, lb.theta_u) and torch.equal(la.theta_v, lb.theta_v)
    lora = get_peft_model(_vit(), LoraConfig(r=1, lora_alpha=1, target_modules=["q_proj", "v_proj"]))
    n_lora = sum(p.numel() for n, p in lora.named_parameters() if "lora_" in n)
    assert n_lora == 4 * lora_parameters(64, 64, 1) == 512
    assert n_lora / a.n_adapter_params() >= 3


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="target_modules"):
        QuantumPEFTConfig(target_modules=[])
    with pytest.raises(ValueError, match="rank"):
        QuantumPEFTConfig(rank=0)
    with pytest.raises(ValueError, match="node"):
        QuantumPEFTConfig(node="taylor")
    d = QuantumPEFTConfig(target_modules=("a", "b"), angle_bits=4).to_dict()
    assert QuantumPEFTConfig.from_dict(d) == QuantumPEFTConfig(target_modules=["a", "b"], angle_bits=4)
