"""Quantised bases (QLoRA-style, issue #51): bitsandbytes Linear4bit / Linear8bitLt under a Quantum-PEFT adapter.

bitsandbytes is not a dependency of the package: the bitsandbytes tests are skipped without it (0.50 runs on
CPU; the CUDA test also needs a GPU). The refusal of other quantised linear layers runs everywhere.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from iclr25.common.lm import tiny_causal_lm
from iclr25.quantum_peft import QuantumPEFTConfig, get_qpeft_model
from iclr25.quantum_peft.layer import QuantumPEFTLinear


class _Int8Linear(nn.Linear):
    """A quantised linear that is not bitsandbytes' (int8 weight, its own scales)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__(n_in, n_out)
        self.weight = nn.Parameter(torch.zeros(n_out, n_in, dtype=torch.int8), requires_grad=False)


def test_other_quantised_linears_are_refused_by_name() -> None:
    net = nn.Sequential(nn.Linear(8, 8), _Int8Linear(8, 8))
    with pytest.raises(
        ValueError,
        match=r"target module '1' is a _Int8Linear: _Int8Linear holds a torch.int8 weight .*bitsandbytes",
    ):
        get_qpeft_model(net, QuantumPEFTConfig(target_modules=["0", "1"]))
    assert type(net[0]) is nn.Linear  # nothing was wrapped: every target is checked first


def _bnb_layer(kind: str, device: str, compute=torch.float32):
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    dense = nn.Linear(64, 32)
    if kind == "4bit":
        q = bnb.nn.Linear4bit(64, 32, compute_dtype=compute, quant_type="nf4")
    else:
        q = bnb.nn.Linear8bitLt(64, 32, has_fp16_weights=False)
    q.load_state_dict(dense.state_dict())
    q = q.to(device)
    try:
        q(torch.randn(2, 64, device=device, dtype=compute))
    except (RuntimeError, NotImplementedError) as e:  # pragma: no cover - a build without this backend
        pytest.skip(f"bitsandbytes {kind} does not run on {device}: {e}")
    return q


def _check_bnb_layer(kind: str, device: str) -> None:
    from iclr25.quantum_peft.kbit import dequantize

    q = _bnb_layer(kind, device)
    x = torch.randn(3, 64, device=device)
    y0 = q(x)
    layer = QuantumPEFTLinear(q, rank=2, generator=torch.Generator().manual_seed(0))
    assert (layer.out_features, layer.in_features) == (32, 64)  # not the packed 4-bit weight's shape
    assert layer.lam.dtype == torch.float32 and torch.equal(layer(x), y0)
    with torch.no_grad():
        layer.lam.normal_(generator=torch.Generator().manual_seed(1))
    w = dequantize(q).float()
    dw = layer.delta_weight()
    ref = x @ (w + dw).T + q.bias
    assert (layer(x) - ref).abs().max() < 1e-4
    xg = x.clone().requires_grad_(True)
    layer(xg).square().sum().backward()
    assert layer.theta_u.grad.abs().sum() > 0 and layer.lam.grad.abs().sum() > 0 and xg.grad is not None
    # merge = dequantise, add ΔW, re-quantise (PEFT's recipe): the stored weight is W + ΔW up to the grid
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer.merge()
    assert any(f"bitsandbytes {kind} weight re-quantises" in str(c.message) for c in caught)
    merged = dequantize(layer.base_layer).float()
    err = (merged - (w + dw)).norm() / (w + dw).norm()
    assert err < (0.15 if kind == "4bit" else 0.02), err
    assert type(layer.base_layer.weight).__name__ == ("Params4bit" if kind == "4bit" else "Int8Params")
    layer.unmerge()
    assert not layer.merged


@pytest.mark.parametrize("kind", ["4bit", "8bit"])
def test_bitsandbytes_layers_on_cpu(kind: str) -> None:
    _check_bnb_layer(kind, "cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", ["4bit", "8bit"])
def test_bitsandbytes_layers_on_cuda(kind: str) -> None:
    _check_bnb_layer(kind, "cuda")


def test_qlora_style_tiny_llama_kbit_preparation_and_checkpointing(tmp_path) -> None:
    """transformers' 4-bit loading + peft.prepare_model_for_kbit_training (reentrant checkpointing) + all-linear."""
    pytest.importorskip("bitsandbytes")
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    tiny_causal_lm("llama", seed=0, vocab_size=64, hidden=64, layers=2, heads=4, intermediate=128,
                   tie_embeddings=False).save_pretrained(tmp_path)  # fmt: skip
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    base = AutoModelForCausalLM.from_pretrained(
        tmp_path, quantization_config=q, dtype=torch.float32, device_map=device
    )
    assert type(base.model.layers[0].self_attn.q_proj).__name__ == "Linear4bit"
    base = peft.prepare_model_for_kbit_training(base)  # freezes, casts norms to fp32, checkpointing on
    model = get_qpeft_model(base, QuantumPEFTConfig(target_modules="all-linear", rank=2))
    assert len(model.targeted_module_names) == 2 * 7
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0)).to(device)
    with torch.no_grad():  # λ ≠ 0, so the angles get a gradient too
        for i, (_, layer) in enumerate(model.qpeft_layers()):
            layer.lam.normal_(generator=torch.Generator().manual_seed(i))
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    g_ckpt = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    assert len(g_ckpt) == 3 * 14 and all(g.abs().sum() > 0 for g in g_ckpt.values())
    model.zero_grad()
    model.base_model.gradient_checkpointing_disable()
    model(input_ids=ids, labels=ids).loss.backward()
    for n, p in model.named_parameters():
        if p.requires_grad:
            assert torch.allclose(p.grad, g_ckpt[n], rtol=1e-4, atol=1e-6), n
