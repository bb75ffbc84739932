"""Conv1d/2d/3d and Embedding targets (issue #51): ΔW = s·UΛVᵀ on the weight's matrix view, as PEFT's LoRA.

Checked against a dense reference (the base op with W + ΔW, float64), zero-init identity, merge, mixed batches,
save/load; grouped convolutions, transposed convolutions and tied-embedding merges are refused by name.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common.lm import tiny_causal_lm
from iclr25.quantum_peft import QuantumPEFTConfig, QuantumPEFTModel, get_qpeft_model
from iclr25.quantum_peft.layer import QuantumPEFTConv, QuantumPEFTEmbedding, QuantumPEFTLinear

F64 = torch.float64


def _lam(layer, seed: int = 0) -> None:
    with torch.no_grad():
        layer.lam.normal_(generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    "conv,shape",
    [
        (nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=True), (2, 3, 9, 9)),
        (nn.Conv1d(4, 6, 5, padding=2, dilation=1, padding_mode="reflect"), (3, 4, 11)),
        (nn.Conv2d(3, 16, 4, stride=4), (2, 3, 8, 8)),  # a ViT patch embedding
        (nn.Conv3d(2, 4, (1, 3, 3), padding=(0, 1, 1)), (2, 2, 3, 5, 5)),
    ],
)
def test_conv_update_equals_the_conv_with_w_plus_delta(conv: nn.Module, shape: tuple) -> None:
    torch.manual_seed(0)
    conv = conv.to(F64)
    x = torch.randn(*shape, dtype=F64)
    y0 = conv(x)
    layer = QuantumPEFTConv(conv, rank=2, layers=1, alpha=0.7, generator=torch.Generator().manual_seed(1))
    assert torch.equal(layer(x), y0)  # Λ = 0: exactly the base layer
    assert (layer.out_features, layer.in_features) == (conv.out_channels, conv.weight[0].numel())
    _lam(layer)
    dw = layer.delta_weight().reshape(conv.weight.shape)
    ref = conv._conv_forward(x, conv.weight + dw, conv.bias)
    assert (layer(x) - ref).abs().max() < 1e-12
    # the update has rank K with singular values s·|λ| (U, V orthonormal)
    sv = torch.linalg.svdvals(layer.delta_weight())[:2]
    assert torch.allclose(sv, 0.7 * layer.lam.abs().sort(descending=True).values, atol=1e-12)
    layer.merge()
    assert (layer(x) - ref).abs().max() < 1e-12 and (conv.weight - (layer.base_layer.weight)).abs().max() == 0
    layer.unmerge()
    assert (layer(x) - ref).abs().max() < 1e-12


def test_embedding_update_equals_lookup_in_w_plus_delta() -> None:
    torch.manual_seed(0)
    emb = nn.Embedding(50, 12, padding_idx=0).to(F64)
    ids = torch.randint(0, 50, (3, 7))
    y0 = emb(ids)
    layer = QuantumPEFTEmbedding(emb, rank=3, layers=1, alpha=0.5, generator=torch.Generator().manual_seed(2))
    assert torch.equal(layer(ids), y0)
    _lam(layer)
    ref = F.embedding(ids, emb.weight + layer.delta_weight())
    assert layer.delta_weight().shape == (50, 12)
    assert (layer(ids) - ref).abs().max() < 1e-12
    layer.merge()
    assert (layer(ids) - ref).abs().max() < 1e-12


def test_refusals_name_module_and_reason() -> None:
    with pytest.raises(ValueError, match=r"Conv2d with groups=4 is not supported \(expected groups=1"):
        QuantumPEFTConv(nn.Conv2d(8, 8, 3, groups=4))
    with pytest.raises(
        ValueError, match="base_layer must be a torch.nn.Linear or transformers Conv1D, got Conv2d"
    ):
        QuantumPEFTLinear(nn.Conv2d(3, 3, 1))  # type: ignore[arg-type]
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, groups=1), nn.ConvTranspose2d(8, 3, 3), nn.Conv2d(8, 8, 3, groups=8)
    )
    with pytest.raises(ValueError, match=r"target module '1' is a ConvTranspose2d; Quantum-PEFT wraps"):
        get_qpeft_model(net, QuantumPEFTConfig(target_modules=["1"]))
    with pytest.raises(
        ValueError, match=r"target module '2' is a Conv2d: a Conv2d with groups=8 is not supported"
    ):
        get_qpeft_model(net, QuantumPEFTConfig(target_modules=["2"]))


def _vit():
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    return ViTForImageClassification(ViTConfig(image_size=8, patch_size=2, num_channels=1, hidden_size=32,
                                               num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                                               num_labels=10)).eval()  # fmt: skip


def test_vit_patch_embedding_target_merge_mixed_batch_and_round_trip(tmp_path) -> None:
    model = get_qpeft_model(_vit(), QuantumPEFTConfig(target_modules=["projection", "q_proj"], rank=2))
    model.add_adapter("b", QuantumPEFTConfig(target_modules=["projection"], rank=3, init_seed=5))
    assert isinstance(model.base_model.vit.embeddings.patch_embeddings.projection, QuantumPEFTConv)
    for i, (_, layer) in enumerate(model.qpeft_layers()):
        for ad in layer.qpeft_adapters.values():
            with torch.no_grad():
                ad.lam.normal_(generator=torch.Generator().manual_seed(i))
    x = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        y = model(pixel_values=x).logits
        mixed = model(pixel_values=x, adapter_names=["b", "default", "__base__"]).logits
        model.set_adapter("b")
        assert (mixed[0] - model(pixel_values=x[:1]).logits[0]).abs().max() < 1e-5
        model.set_adapter("default")
        assert (mixed[1] - y[1]).abs().max() < 1e-5
        with model.disable_adapter():
            assert (mixed[2] - model(pixel_values=x[2:]).logits[0]).abs().max() < 1e-5
        model.save_pretrained(tmp_path)
        back = QuantumPEFTModel.from_pretrained(_vit(), tmp_path)
        assert torch.equal(back(pixel_values=x).logits, y)
        merged = model.merge_and_unload()
        assert type(merged.vit.embeddings.patch_embeddings.projection) is nn.Conv2d
        assert (merged(pixel_values=x).logits - y).abs().max() < 1e-5
    # "all-linear" stays linear-only (as PEFT): the patch embedding is not picked up
    names = get_qpeft_model(_vit(), QuantumPEFTConfig(target_modules="all-linear")).targeted_module_names
    assert names and not any("projection" in n for n in names)


def test_embedding_target_in_a_causal_lm_and_tied_merge_refused() -> None:
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(0))
    cfg = QuantumPEFTConfig(target_modules=["embed_tokens", "q_proj"], rank=2)
    for tied in (False, True):
        lm = tiny_causal_lm("llama", seed=0, vocab_size=64, hidden=32, layers=1, heads=4, intermediate=64,
                            tie_embeddings=tied).eval()  # fmt: skip
        model = get_qpeft_model(lm, cfg)
        emb = model.base_model.model.embed_tokens
        assert isinstance(emb, QuantumPEFTEmbedding)
        assert emb.tied_with == (["lm_head"] if tied else [])
        for _, layer in model.qpeft_layers():
            _lam(layer)
        with torch.no_grad():
            y = model(input_ids=ids).logits
            if tied:  # merging ΔE into a tied table would change lm_head too: refused, unmerged use works
                with pytest.raises(ValueError, match=r"cannot merge into a weight tied with \['lm_head'\]"):
                    model.merge_adapter()
                assert not emb.merged
                assert torch.equal(model(input_ids=ids).logits, y)
            else:
                model.merge_adapter()
                assert (model(input_ids=ids).logits - y).abs().max() < 1e-5
