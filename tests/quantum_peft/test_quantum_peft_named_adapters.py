"""Several named adapters on one model, as ``peft.PeftModel`` (tiny random Llama, offline).

Two adapters with different configs, targets and seeds: the active one alone is applied (logits equal a model
holding only that adapter) and trained, the U/V cache is per adapter, save/load round-trips every name in
PEFT's layout, ``delete_adapter`` restores untouched layers, merge acts on the active adapter.
"""

from __future__ import annotations

import shutil
import zlib

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from iclr25.common.lm import tiny_causal_lm
from iclr25.quantum_peft import QuantumPEFTConfig, QuantumPEFTLinear, QuantumPEFTModel, get_qpeft_model
from iclr25.quantum_peft.model import ModulesToSave

CFG_A = QuantumPEFTConfig(target_modules=["q_proj", "v_proj"], rank=2, init_seed=1)
# different targets (v_proj shared), rank, depth, scale, seed, and a modules_to_save copy of the LM head
CFG_B = QuantumPEFTConfig(
    target_modules=["v_proj", "o_proj", "up_proj"], rank=3, layers=2, alpha=0.5, init_seed=2,
    modules_to_save=["lm_head"],
)  # fmt: skip


def _lm() -> nn.Module:
    return tiny_causal_lm("llama", seed=0, vocab_size=64, hidden=32, layers=2, heads=4, intermediate=64,
                          tie_embeddings=False).eval()  # fmt: skip


def _ids(n: int = 3, t: int = 7) -> torch.Tensor:
    return torch.randint(0, 64, (n, t), generator=torch.Generator().manual_seed(0))


def _randomise(model: QuantumPEFTModel) -> None:
    """λ of every adapter ~ N(0, 1), seeded by (layer name, adapter name): identical in any model holding it;
    a modules_to_save copy is shifted the same way."""
    with torch.no_grad():
        for name, layer in model.qpeft_layers():
            for ad_name, ad in layer.qpeft_adapters.items():
                g = torch.Generator().manual_seed(zlib.crc32(f"{name}/{ad_name}".encode()))
                ad.lam.normal_(generator=g)
        for m in model.base_model.modules():
            if isinstance(m, ModulesToSave):
                for ad_name, copy_ in m.trained_modules.items():
                    copy_.weight.add_(0.1 * zlib.crc32(ad_name.encode()) / 2**32)


def _two() -> QuantumPEFTModel:
    model = get_qpeft_model(_lm(), CFG_A)
    model.add_adapter("b", CFG_B)
    _randomise(model)
    return model


def _single(cfg: QuantumPEFTConfig, name: str) -> QuantumPEFTModel:
    model = get_qpeft_model(_lm(), cfg, adapter_name=name)
    _randomise(model)
    return model


def test_each_active_adapter_equals_its_single_adapter_model(node_builds) -> None:
    model = _two()
    assert model.active_adapter == "default" and sorted(model.peft_config) == ["b", "default"]
    single_a, single_b = _single(CFG_A, "default"), _single(CFG_B, "b")
    # add_adapter initialises exactly like a fresh injection with the same config (same seed, same order)
    for name, layer in single_b.qpeft_layers():
        other = model.base_model.get_submodule(name)
        assert torch.equal(other.qpeft_adapters["b"].theta_u, layer.theta_u)
        assert torch.equal(other.qpeft_adapters["b"].theta_v, layer.theta_v)
    ids = _ids()
    calls = node_builds
    with torch.no_grad():
        y_base = _lm()(input_ids=ids).logits
        y_a = model(input_ids=ids).logits
        model.set_adapter("b")
        assert model.active_adapters == ["b"]
        y_b = model(input_ids=ids).logits
        n_built = calls["n"]
        model.set_adapter("default")
        y_a2 = model(input_ids=ids).logits
        model.set_adapter("b")
        y_b2 = model(input_ids=ids).logits
        assert calls["n"] == n_built  # switching reuses each adapter's own cached U, V
        assert torch.equal(y_a, y_a2) and torch.equal(y_b, y_b2)
        assert (y_a - single_a(input_ids=ids).logits).abs().max() < 1e-6
        assert (y_b - single_b(input_ids=ids).logits).abs().max() < 1e-6
    assert (y_a - y_b).abs().max() > 1e-2 and (y_a - y_base).abs().max() > 1e-2
    # a layer targeted by "default" only acts as its base layer while "b" is active
    q = model.base_model.model.layers[0].self_attn.q_proj
    x = torch.randn(2, 32)
    assert torch.equal(q(x), q.base_layer(x))


def test_training_step_touches_only_the_active_adapter() -> None:
    model = _two()
    model.set_adapter("b")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".qpeft_adapters.b." in n or ".trained_modules.b." in n for n in trainable)
    assert any("lm_head.trained_modules.b." in n for n in trainable)
    assert model.n_adapter_params() == sum(
        p.numel() for n, p in model.named_parameters() if p.requires_grad and "qpeft_adapters" in n
    )
    # an optimizer over every adapter parameter (as built before a switch): only "b" may move
    everything = [p for n, p in model.named_parameters() if "qpeft_adapters" in n or "trained_modules" in n]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(everything, lr=1e-2, weight_decay=0.0)
    model.train()
    ids = _ids()
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    for n, p in model.named_parameters():
        moved = not torch.equal(p, before[n])
        assert moved == (n in trainable), n
    model.set_adapter("default")  # requires_grad follows the active adapter
    trainable_a = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable_a and all(".qpeft_adapters.default." in n for n in trainable_a)


def test_save_load_round_trip_both_names(tmp_path) -> None:
    model = _two()
    ids = _ids()
    with torch.no_grad():
        y_a = model(input_ids=ids).logits
        model.set_adapter("b")
        y_b = model(input_ids=ids).logits
    model.save_pretrained(tmp_path)
    # PEFT's layout: "default" in the directory, the others in a sub-folder named after them
    assert (tmp_path / "qpeft_adapter_model.safetensors").is_file() and (
        tmp_path / "b" / "qpeft_adapter_config.json"
    ).is_file()
    keys_b = set(load_file(str(tmp_path / "b" / "qpeft_adapter_model.safetensors")))
    assert "lm_head.weight" in keys_b and not any("qpeft_adapters" in k or ".b." in k for k in keys_b)
    fresh = QuantumPEFTModel.from_pretrained(_lm(), tmp_path)
    fresh.load_adapter(tmp_path / "b", adapter_name="b")
    assert fresh.peft_config["b"] == CFG_B and fresh.active_adapter == "default"
    with torch.no_grad():
        assert torch.equal(fresh(input_ids=ids).logits, y_a)
        fresh.set_adapter("b")
        assert torch.equal(fresh(input_ids=ids).logits, y_b)
        # a named adapter's folder is a complete single-adapter checkpoint
        only_b = QuantumPEFTModel.from_pretrained(_lm(), tmp_path / "b")
        assert torch.equal(only_b(input_ids=ids).logits, y_b)
    model.save_pretrained(tmp_path / "sel", selected_adapters=["b"])
    assert not (tmp_path / "sel" / "qpeft_adapter_model.safetensors").exists()
    assert (tmp_path / "sel" / "b" / "qpeft_adapter_model.safetensors").is_file()
    with pytest.raises(ValueError, match="already exists"):
        fresh.load_adapter(tmp_path / "b", adapter_name="b")
    # a folder whose weights do not fit its config: clear error, and no half-added adapter is left behind
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(tmp_path / "b" / "qpeft_adapter_config.json", bad / "qpeft_adapter_config.json")
    shutil.copy(tmp_path / "qpeft_adapter_model.safetensors", bad / "qpeft_adapter_model.safetensors")
    names = {n for n, _ in fresh.named_parameters()}
    with pytest.raises(ValueError, match="adapter weights do not fit"):
        fresh.load_adapter(bad, adapter_name="c")
    assert sorted(fresh.peft_config) == ["b", "default"] and {n for n, _ in fresh.named_parameters()} == names
    with pytest.raises(ValueError, match="unknown adapter 'zzz'"):
        fresh.save_pretrained(tmp_path / "x", selected_adapters=["zzz"])


def test_delete_adapter_and_name_errors() -> None:
    model = _two()
    ids = _ids()
    with pytest.raises(ValueError, match="unknown adapter 'nope'"):
        model.set_adapter("nope")
    with pytest.raises(ValueError, match="already exists"):
        model.add_adapter("b", CFG_A)
    with pytest.raises(ValueError, match="adapter_name"):
        model.add_adapter("a.b", CFG_A)
    with pytest.raises(ValueError, match="unknown adapter 'nope'"):
        model.delete_adapter("nope")
    model.set_adapter("b")
    with pytest.warns(UserWarning, match="now 'default'"):
        model.delete_adapter("b")
    assert model.active_adapter == "default" and list(model.peft_config) == ["default"]
    assert not any(".b." in n for n, _ in model.named_parameters())
    blk = model.base_model.model.layers[0]
    assert (
        type(blk.self_attn.o_proj) is nn.Linear and type(blk.mlp.up_proj) is nn.Linear
    )  # "b" only: restored
    assert type(model.base_model.lm_head) is nn.Linear
    assert list(blk.self_attn.v_proj.qpeft_adapters) == ["default"]
    assert sorted(model.targeted_module_names) == sorted(_single(CFG_A, "default").targeted_module_names)
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, _single(CFG_A, "default")(input_ids=ids).logits)
    with pytest.raises(ValueError, match="only adapter"):
        model.delete_adapter("default")


def test_merge_unload_disable_with_two_adapters() -> None:
    model = _two()
    ids = _ids()
    with torch.no_grad():
        y_base = _lm()(input_ids=ids).logits
        y_a = model(input_ids=ids).logits
        model.set_adapter("b")
        y_b = model(input_ids=ids).logits
        model.merge_adapter()  # merges the active adapter only
        merged = {n for n, m in model.qpeft_layers() if m.merged}
        assert merged and all(model.base_model.get_submodule(n).merged_adapter == "b" for n in merged)
        assert (model(input_ids=ids).logits - y_b).abs().max() < 1e-5
        with model.disable_adapter():
            assert (model(input_ids=ids).logits - y_base).abs().max() < 1e-5
        model.merge_adapter()
        with pytest.warns(UserWarning, match="unmerging"):
            model.set_adapter("default")
        assert not any(m.merged for _, m in model.qpeft_layers())
        assert (model(input_ids=ids).logits - y_a).abs().max() < 1e-5
        model.set_adapter("b")
        plain = model.merge_and_unload()  # keeps the active adapter ("b", its lm_head copy included)
        assert not any(isinstance(m, (QuantumPEFTLinear, ModulesToSave)) for m in plain.modules())
        assert (plain(input_ids=ids).logits - y_b).abs().max() < 1e-5
        other = _two()
        other.set_adapter("b")
        base = other.unload()  # never merged: the original model exactly
        assert not any(isinstance(m, (QuantumPEFTLinear, ModulesToSave)) for m in base.modules())
        assert torch.equal(base(input_ids=ids).logits, y_base)
