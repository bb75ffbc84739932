"""What PEFT users expect of a ``PeftModel`` (issue #51), on tiny random models, offline.

Mixed-adapter batches (``adapter_names``, each row = that row alone with its adapter), gradient checkpointing
(reentrant and not: gradients equal a step without it), loading as PEFT does (``is_trainable``, Hub ids),
``push_to_hub`` uploading the adapter only (the upload is intercepted), ``add_weighted_adapter`` refused.
"""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from iclr25.common.lm import tiny_causal_lm
from iclr25.quantum_peft import QuantumPEFTConfig, QuantumPEFTModel, get_qpeft_model
from iclr25.quantum_peft.model import ADAPTER_CONFIG, ADAPTER_WEIGHTS, ModulesToSave

CFG_A = QuantumPEFTConfig(target_modules=["q_proj", "v_proj"], rank=2, init_seed=1)
CFG_B = QuantumPEFTConfig(
    target_modules=["v_proj", "o_proj", "up_proj"], rank=3, layers=2, alpha=0.5, init_seed=2,
    modules_to_save=["lm_head"],
)  # fmt: skip


def _lm() -> nn.Module:
    return tiny_causal_lm("llama", seed=0, vocab_size=64, hidden=32, layers=2, heads=4, intermediate=64,
                          tie_embeddings=False).eval()  # fmt: skip


def _ids(n: int = 4, t: int = 6) -> torch.Tensor:
    return torch.randint(0, 64, (n, t), generator=torch.Generator().manual_seed(0))


def _randomise(model: QuantumPEFTModel) -> None:
    """λ ~ N(0, 1) per (layer, adapter) and a shifted modules_to_save copy, so every adapter changes the output."""
    with torch.no_grad():
        for name, layer in model.qpeft_layers():
            for ad_name, ad in layer.qpeft_adapters.items():
                ad.lam.normal_(
                    generator=torch.Generator().manual_seed(zlib.crc32(f"{name}/{ad_name}".encode()))
                )
        for m in model.base_model.modules():
            if isinstance(m, ModulesToSave):
                for ad_name, copy_ in m.trained_modules.items():
                    copy_.weight.add_(0.1 * zlib.crc32(ad_name.encode()) / 2**32)


def _two() -> QuantumPEFTModel:
    model = get_qpeft_model(_lm(), CFG_A)
    model.add_adapter("b", CFG_B)
    _randomise(model)
    return model


def _alone(model: QuantumPEFTModel, name: str, fn):
    """``fn()`` with ``name`` active ("__base__": adapters disabled), the active adapter restored after."""
    active = model.active_adapter
    if name == "__base__":
        with model.disable_adapter():
            return fn()
    model.set_adapter(name)
    try:
        return fn()
    finally:
        model.set_adapter(active)


# -- 1. mixed-adapter batches ---------------------------------------------------------------------------
def test_mixed_batch_rows_equal_each_row_alone_with_its_adapter() -> None:
    model = _two()
    ids = _ids()
    names = ["default", "b", "__base__", "b"]
    with torch.no_grad():
        mixed = model(input_ids=ids, adapter_names=names).logits
        for i, name in enumerate(names):
            alone = _alone(model, name, lambda i=i: model(input_ids=ids[i : i + 1]).logits)
            assert (mixed[i] - alone[0]).abs().max() < 1e-5, (i, name)
        # the adapters really differ on these rows (the bug: row 1 used "default")
        row1_default = model(input_ids=ids[1:2]).logits[0]
        assert (mixed[1] - row1_default).abs().max() > 1e-2
        # one name for every row = that adapter active; the active adapter is untouched by the call
        all_b = model(input_ids=ids, adapter_names=["b"] * 4).logits
        assert (all_b - _alone(model, "b", lambda: model(input_ids=ids).logits)).abs().max() < 1e-5
    assert model.active_adapter == "default"
    assert all(m.mixed is None for m in model.modules() if hasattr(m, "mixed"))


def test_mixed_batch_generate_greedy_and_beams_equal_per_prompt_generation() -> None:
    model = _two()
    ids = _ids(n=3, t=5)
    names = ["b", "__base__", "default"]
    for kw in ({}, {"num_beams": 2}):
        gen = dict(max_new_tokens=4, do_sample=False, pad_token_id=0, **kw)
        mixed = model.generate(input_ids=ids, adapter_names=names, **gen)
        for i, name in enumerate(names):
            alone = _alone(model, name, lambda i=i, g=gen: model.generate(input_ids=ids[i : i + 1], **g))
            assert torch.equal(mixed[i], alone[0]), (kw, i, name)


def test_mixed_batch_refusals_name_the_problem() -> None:
    model = _two()
    ids = _ids()
    with pytest.raises(ValueError, match=r"adapter_names: unknown adapter\(s\) \['zzz'\]"):
        model(input_ids=ids, adapter_names=["default", "zzz", "b", "b"])
    with pytest.raises(ValueError, match="adapter_names has 3 names for a batch of 4 rows"):
        model(input_ids=ids, adapter_names=["default", "b", "b"])
    with pytest.raises(ValueError, match="adapter_names must be a non-empty list"):
        model(input_ids=ids, adapter_names="b")
    model.train()
    with pytest.raises(ValueError, match=r"adapter_names is for inference .*model.eval\(\)"):
        model(input_ids=ids, adapter_names=["b"] * 4)
    model.eval()
    model.merge_adapter()
    with pytest.raises(ValueError, match=r"merged adapter: call unmerge_adapter\(\) first"):
        model(input_ids=ids, adapter_names=["b"] * 4)
    model.unmerge_adapter()
    assert all(m.mixed is None for m in model.modules() if hasattr(m, "mixed"))


# -- 2. gradient checkpointing -------------------------------------------------------------------------
def _grads(model: nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("reentrant", [True, False])
@pytest.mark.parametrize("before_wrapping", [True, False])
def test_gradient_checkpointing_gives_the_same_gradients(reentrant: bool, before_wrapping: bool) -> None:
    cfg = QuantumPEFTConfig(
        target_modules=["q_proj", "v_proj", "down_proj"], rank=2, modules_to_save=["lm_head"]
    )
    ids = _ids()
    ref = get_qpeft_model(_lm(), cfg)
    _randomise(ref)
    ref.train()
    g_ref = _grads(ref, ref(input_ids=ids, labels=ids).loss)
    kw = {"gradient_checkpointing_kwargs": {"use_reentrant": reentrant}}
    if before_wrapping:  # PEFT users often enable it on the base model first
        base = _lm()
        base.gradient_checkpointing_enable(**kw)
        model = get_qpeft_model(base, cfg)
    else:
        model = get_qpeft_model(_lm(), cfg)
        model.gradient_checkpointing_enable(**kw)
    _randomise(model)
    model.train()
    loss = model(input_ids=ids, labels=ids).loss
    g = _grads(model, loss)
    assert set(g) == set(g_ref) and len(g) > 10
    for n in g:
        assert torch.allclose(g[n], g_ref[n], rtol=1e-5, atol=1e-7), n
    assert all(g[n].abs().sum() > 0 for n in g if n.endswith(("theta_u", "theta_v", "lam")))


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointed_training_builds_factors_per_block_and_steps_like_without(
    reentrant: bool, node_builds
) -> None:
    """Under checkpointing U, V are built in one batched call per block and signature (not once per layer and
    pass), and an optimizer step leaves the model equal to the same step without checkpointing."""
    cfg = QuantumPEFTConfig(target_modules=["q_proj", "k_proj", "v_proj", "down_proj"], rank=2)
    ids = _ids()
    models = []
    for ckpt in (False, True):
        model = get_qpeft_model(_lm(), cfg)
        _randomise(model)
        if ckpt:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        model.train()
        opt = torch.optim.AdamW(model.param_groups(1e-1, 1e-1, 1e-1))
        before = node_builds["n"]
        model(input_ids=ids, labels=ids).loss.backward()
        builds = node_builds["n"] - before
        opt.step()
        models.append(model.eval())
    n_layers = len(models[1].targeted_module_names)  # 8: per-layer builds would be 2 per layer and pass
    # one build per block and node size (32, 64): 2 × 2, twice where transformers runs block hooks inside the
    # checkpoint (recomputed); building per layer would be 16 per pass
    assert n_layers == 8 and builds <= 2 * 2 * 2, builds
    with torch.no_grad():
        assert torch.allclose(models[0](input_ids=ids).logits, models[1](input_ids=ids).logits, atol=1e-5)


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradient_checkpointing_on_a_vit_with_pixel_inputs(reentrant: bool) -> None:
    """ViT's input is pixel_values: a reentrant checkpoint needs the input-grad hook PEFT also installs."""
    from transformers import ViTConfig, ViTForImageClassification

    def vit() -> nn.Module:
        torch.manual_seed(0)
        return ViTForImageClassification(ViTConfig(image_size=8, patch_size=2, num_channels=1, hidden_size=32,
                                                   num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                                   num_labels=10))  # fmt: skip

    cfg = QuantumPEFTConfig(target_modules=["q_proj", "v_proj"], rank=2, modules_to_save=["classifier"])
    x, y = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(1)), torch.tensor([1, 2, 3])
    ref = get_qpeft_model(vit(), cfg)
    _randomise(ref)
    ref.train()
    g_ref = _grads(ref, ref(pixel_values=x, labels=y).loss)
    model = get_qpeft_model(vit(), cfg)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    _randomise(model)
    model.train()
    g = _grads(model, model(pixel_values=x, labels=y).loss)
    for n in g_ref:
        assert torch.allclose(g[n], g_ref[n], rtol=1e-5, atol=1e-7), n


def test_factors_are_built_in_fp32_under_autocast() -> None:
    """Trainer(bf16=True) runs forward under autocast: U, V (and their cache) must still be the fp32 circuit
    output — chained bf16 matmuls lost ~1e-2 of orthonormality, and the cache kept them after training."""
    from iclr25.quantum_peft import QuantumPEFTLinear, node_columns

    model = get_qpeft_model(_lm(), CFG_A)
    _randomise(model)
    single = QuantumPEFTLinear(nn.Linear(24, 40), rank=3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(input_ids=_ids())  # batched build, cached
        single(torch.randn(2, 24))  # one layer's own build, cached
    for _, layer in [*model.qpeft_layers(), ("single", single)]:
        ad = layer._adapter()
        with torch.no_grad():
            u, v = layer.factors()  # the cached factors (with a gradient needed they would be rebuilt)
        assert u.dtype == torch.float32 and ad._cache is not None
        assert torch.allclose(
            u, node_columns(ad.theta_u.detach(), ad.out_features, ad.rank, ad.layers), atol=1e-6
        )
        assert torch.allclose(
            v, node_columns(ad.theta_v.detach(), ad.in_features, ad.rank, ad.layers), atol=1e-6
        )


def test_trainer_with_gradient_checkpointing_trains_the_adapter(tmp_path) -> None:
    from datasets import Dataset
    from transformers import TrainingArguments

    from iclr25.quantum_peft import QuantumPEFTTrainer

    model = get_qpeft_model(_lm(), CFG_A)
    ids = _ids(n=8).tolist()
    ds = Dataset.from_dict({"input_ids": ids, "labels": ids})
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    args = TrainingArguments(str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, learning_rate=1e-1,
                             gradient_checkpointing=True, report_to=[], save_strategy="no", use_cpu=True)  # fmt: skip
    QuantumPEFTTrainer(model=model, args=args, train_dataset=ds).train()
    assert all(not torch.equal(p, before[n]) for n, p in model.named_parameters() if n.endswith("theta_u"))


# -- 4. loading as PEFT users do -----------------------------------------------------------------------
def test_from_pretrained_is_trainable_as_peft(tmp_path) -> None:
    model = _two()
    model.save_pretrained(tmp_path)
    ids = _ids()
    with torch.no_grad():
        want = model(input_ids=ids).logits
    frozen = QuantumPEFTModel.from_pretrained(_lm().train(), tmp_path)  # PEFT's default: is_trainable=False
    assert not frozen.training and not frozen.base_model.training
    assert not any(p.requires_grad for p in frozen.parameters())
    with torch.no_grad():
        assert torch.equal(frozen(input_ids=ids).logits, want)
    live = QuantumPEFTModel.from_pretrained(_lm(), tmp_path, is_trainable=True)
    trainable = [n for n, p in live.named_parameters() if p.requires_grad]
    assert trainable and all(".qpeft_adapters.default." in n for n in trainable)
    # load_adapter: frozen until activated; set_adapter makes it trainable unless inference_mode (as PEFT)
    frozen.load_adapter(tmp_path / "b", "b")
    assert not any(p.requires_grad for p in frozen.parameters())
    frozen.set_adapter("b", inference_mode=True)
    assert not any(p.requires_grad for p in frozen.parameters())
    frozen.set_adapter("b")
    assert {n for n, p in frozen.named_parameters() if p.requires_grad} == {
        n for n, _ in frozen.named_parameters() if ".qpeft_adapters.b." in n or ".trained_modules.b." in n
    }
    with pytest.raises(ValueError, match="is_trainable must be a bool, got 'yes'"):
        QuantumPEFTModel.from_pretrained(_lm(), tmp_path, is_trainable="yes")


def _intercept_hub(monkeypatch, uploaded: dict) -> None:
    import huggingface_hub

    def create_repo(self, repo_id, **kw):
        uploaded["create"] = (repo_id, kw)
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, *, repo_id, folder_path, **kw):
        d = Path(uploaded["dir"]) / repo_id.replace("/", "--")
        shutil.copytree(folder_path, d)
        uploaded["repo"], uploaded["files"], uploaded["kw"] = (
            repo_id,
            sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()),
            kw,
        )
        return "commit-info"

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)

    def snapshot_download(repo_id, revision=None, token=None, allow_patterns=None, **kw):
        uploaded["download"] = (repo_id, revision, allow_patterns)
        return str(Path(uploaded["dir"]) / repo_id.replace("/", "--"))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)


def test_push_to_hub_uploads_the_adapter_only_and_loads_back(tmp_path, monkeypatch) -> None:
    uploaded: dict = {"dir": tmp_path}
    _intercept_hub(monkeypatch, uploaded)
    model = get_qpeft_model(_lm(), CFG_B)
    _randomise(model)
    assert model.push_to_hub("someone/qpeft-tiny", private=True) == "commit-info"
    assert uploaded["create"] == (
        "someone/qpeft-tiny",
        {"private": True, "exist_ok": True, "repo_type": "model"},
    )
    assert uploaded["files"] == sorted(["README.md", ADAPTER_CONFIG, ADAPTER_WEIGHTS])
    d = tmp_path / "someone--qpeft-tiny"
    keys = set(load_file(str(d / ADAPTER_WEIGHTS)))
    assert keys == set(model.adapter_state_dict())  # θ, λ and the lm_head copy — nothing of the frozen model
    assert not any(
        k.startswith("model.") and k.endswith(("q_proj.weight", "embed_tokens.weight")) for k in keys
    )
    assert (
        'QuantumPEFTModel.from_pretrained(base_model, "someone/qpeft-tiny")' in (d / "README.md").read_text()
    )
    # and a Hub id loads back (snapshot_download intercepted): the same logits
    back = QuantumPEFTModel.from_pretrained(_lm(), "someone/qpeft-tiny", revision="main")
    assert uploaded["download"][0:2] == ("someone/qpeft-tiny", "main")
    with torch.no_grad():
        assert torch.equal(back(input_ids=_ids()).logits, model.eval()(input_ids=_ids()).logits)


def test_hub_failures_and_bad_repo_ids_are_named(monkeypatch) -> None:
    import huggingface_hub

    def offline(**kw):
        raise OSError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(
        ValueError, match=r"'nobody/nothing' is not a local folder and could not be fetched .*offline"
    ):
        QuantumPEFTModel.from_pretrained(_lm(), "nobody/nothing")
    model = get_qpeft_model(_lm(), CFG_A)
    with pytest.raises(ValueError, match="repo_id must be a Hub repo id like 'user/name', got 'a b/c'"):
        model.push_to_hub("a b/c")


# -- 5. add_weighted_adapter ---------------------------------------------------------------------------
def test_add_weighted_adapter_is_refused_with_the_reason() -> None:
    model = _two()
    with pytest.raises(NotImplementedError, match="add_weighted_adapter .*not representable by one circuit"):
        model.add_weighted_adapter(["default", "b"], [0.5, 0.5], "mix")
    with pytest.raises(ValueError, match=r"set_adapter: expected one adapter name, got \['default', 'b'\]"):
        model.set_adapter(["default", "b"])
