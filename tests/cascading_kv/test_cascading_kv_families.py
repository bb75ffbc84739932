"""Decoder families: exact logits inside the window (cache ≥ sequence ⇒ the plain model's logits), clear refusals,
sliding windows / softcapping honoured, the attention switch restored, API misuse caught on the first call."""

import pytest
import torch
import transformers as tf
from transformers import DynamicCache

from iclr25.cascading_kv import (
    SUPPORTED_MODEL_TYPES,
    CascadingKVCache,
    cascade_attention,
    disable_cascade_attention,
    enable_cascade_attention,
    generate_streaming,
    strided_prefill,
)
from iclr25.cascading_kv.rope import rope, rotaries_for, rotary_for, unrope

BASE = dict(vocab_size=99, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2)  # fmt: skip
KV = dict(num_key_value_heads=2)
FAMILIES = {
    "llama": (tf.LlamaConfig, KV),
    "mistral": (tf.MistralConfig, {**KV, "sliding_window": None}),
    "qwen2": (tf.Qwen2Config, KV),
    "qwen3": (tf.Qwen3Config, {**KV, "head_dim": 16}),
    "gemma": (tf.GemmaConfig, {**KV, "head_dim": 16}),
    "gemma2": (
        tf.Gemma2Config,
        {
            **KV,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 24,
            "attn_logit_softcapping": 2.0,
            "final_logit_softcapping": 30.0,
        },
    ),  # fmt: skip
    "phi3": (tf.Phi3Config, {**KV, "sliding_window": None}),
    "stablelm": (tf.StableLmConfig, {**KV, "partial_rotary_factor": 0.25}),
    "gpt_neox": (tf.GPTNeoXConfig, {"partial_rotary_factor": 0.25}),
    "phi": (tf.PhiConfig, {**KV, "partial_rotary_factor": 0.5}),
    "cohere": (tf.CohereConfig, KV),
    # local layers (sliding window 24, rope base 10k) and global layers (rope base 1e6, linear scaling ×2)
    "gemma3_text": (
        tf.Gemma3TextConfig,
        {
            **KV,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 24,
            "num_hidden_layers": 3,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "rope_theta": 1e6, "factor": 2.0},
            },
        },
    ),  # fmt: skip
}


def build(family: str, seed: int = 0, **over):
    cls, extra = FAMILIES[family]
    cfg = cls(**{**BASE, **extra, **over})
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)  # the weights are a function of the seed, not of the tests that ran before
        model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        # random weights large enough that RoPE/softcap mistakes show in the logits
        for n, p in model.named_parameters():
            if p.ndim == 2 and "embed" not in n:
                p.normal_(0, 0.15)
    return model.eval()


def test_every_supported_family_has_a_test():
    assert set(FAMILIES) == set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_logits_equal_plain_model_inside_the_window(family):
    model = build(family)
    ids = torch.randint(3, 99, (2, 60), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        dense = model(ids).logits
    for stride in (
        9,
        1,
    ):  # chunked prefill (keys rotated) and token-by-token (query rotated per offset group)
        cache = CascadingKVCache(model, sink_tokens=4, cache_size=64, cascades=4, beta=0.999)  # S + N > 60
        got = strided_prefill(model, ids, cache, stride=stride, return_logits="all")
        err = (got - dense).abs().max().item()
        assert err <= 1e-4, (family, stride, err)
    # the cache switched the model to the cascade; its plain forwards still run the eager attention, bit for bit
    assert model.config._attn_implementation == "cascade_eager"
    with torch.no_grad():
        assert torch.equal(model(ids).logits, dense)


def test_partial_and_interleaved_layouts_are_detected():
    assert rotary_for(build("gpt_neox")).rotary_dim == 4  # head 16 × 0.25
    assert rotary_for(build("phi")).rotary_dim == 8
    rots = rotaries_for(
        build("gemma3_text")
    )  # one frequency set per layer type, shared by the layers of a type
    assert [r.layer_type for r in rots] == ["sliding_attention", "full_attention", "sliding_attention"]
    assert rots[0] is rots[2] and rots[0] is not rots[1] and rots[1].scaling == 1.0
    r = rotary_for(build("cohere"))
    assert r.interleaved and r.rotary_dim == 16
    x = torch.randn(1, 2, 5, 16, dtype=torch.float64)
    cos, sin = r.module(x, torch.arange(3, 8)[None])
    assert torch.allclose(unrope(rope(x, cos, sin, True), cos, sin, True), x, atol=1e-12)


def test_softcap_and_sliding_window_matter_and_are_honoured():
    """The Gemma2 test above would pass vacuously if softcap/window did not change the logits: check they do."""
    model = build("gemma2")
    ids = torch.randint(3, 99, (1, 60), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        dense = model(ids).logits
        plain = build("gemma2", attn_logit_softcapping=None, sliding_window=4096)(ids).logits
    assert (dense - plain).abs().max().item() > 1e-2
    # sliding window smaller than the cache on every layer (Mistral)
    m = build("mistral", sliding_window=20)
    with torch.no_grad():
        dense = m(ids).logits
        wide = build("mistral")(ids).logits
    assert (dense - wide).abs().max().item() > 1e-2
    cache = CascadingKVCache(m, sink_tokens=4, cache_size=64, cascades=4)
    got = strided_prefill(m, ids, cache, stride=7, return_logits="all")
    assert (got - dense).abs().max().item() <= 1e-4


@pytest.mark.parametrize(
    "config,name",
    [
        (
            lambda: tf.Gemma3Config(
                text_config=dict(**BASE, **KV, head_dim=16),
                vision_config=dict(
                    hidden_size=32,
                    intermediate_size=37,
                    num_hidden_layers=1,
                    num_attention_heads=2,
                    image_size=28,
                    patch_size=14,
                ),
            ),
            "gemma3.*bidirectionally",
        ),
        (
            lambda: tf.Gemma3TextConfig(**BASE, **KV, head_dim=16, use_bidirectional_attention=True),
            "use_bidirectional_attention",
        ),
        (lambda: tf.Cohere2Config(**BASE, **KV), "cohere2.*no RoPE"),
        (lambda: tf.GPT2Config(vocab_size=99, n_embd=64, n_layer=2, n_head=4), "gpt2"),
        (
            lambda: tf.LlamaConfig(
                **BASE, rope_parameters={"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0}
            ),
            "dynamic",
        ),  # fmt: skip
    ],
)
def test_unsupported_models_are_refused_by_name(config, name):
    model = tf.AutoModelForCausalLM.from_config(config())
    with pytest.raises(ValueError, match=name):
        CascadingKVCache(model, sink_tokens=4, cache_size=16, cascades=2)
    with pytest.raises(ValueError, match=name):
        enable_cascade_attention(model)


def test_context_manager_restores_plain_forwards():
    model = build("llama")
    ids = torch.randint(3, 99, (1, 30), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        before = model(ids).logits
        with cascade_attention(model):
            assert (
                model.config._attn_implementation == "cascade_eager"
            )  # other caches keep the eager attention
            assert torch.equal(model(ids).logits, before)
            cache = CascadingKVCache(model, sink_tokens=4, cache_size=16, cascades=2)
            model(ids[:, :10], cache=cache, use_cache=True)
        assert model.config._attn_implementation == "eager"
        after = model(ids, cache=DynamicCache(config=model.config)).logits
    assert torch.equal(before, after)
    # the old permanent switch still works; an SDPA model gets the cascade whose other caches run SDPA
    enable_cascade_attention(model)
    assert model.config._attn_implementation == "cascade_eager"
    sdpa = build("llama")
    sdpa.set_attn_implementation("sdpa")
    with cascade_attention(sdpa):
        assert sdpa.config._attn_implementation == "cascade"
    assert sdpa.config._attn_implementation == "sdpa"


def test_switching_the_attention_away_fails_on_the_first_call():
    model = build("qwen2")
    cache = CascadingKVCache(model, sink_tokens=4, cache_size=16, cascades=2)
    disable_cascade_attention(model)  # the cache had switched it on; the user switched it off again
    assert model.config._attn_implementation == "eager"
    with pytest.raises(RuntimeError, match="enable_cascade_attention.*model uses 'eager'"), torch.no_grad():
        model(torch.randint(3, 99, (1, 8)), cache=cache, use_cache=True)
    assert cache.get_seq_length() == 0


def test_generate_streaming_takes_tokenizer_output_and_reset():
    model = build("llama")
    ids = torch.randint(3, 99, (1, 40), generator=torch.Generator().manual_seed(3))
    enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    cache = CascadingKVCache(model, sink_tokens=4, cache_size=32, cascades=2)
    first = generate_streaming(model, cache=cache, stride=16, max_new_tokens=6, **enc)
    assert cache.get_seq_length() == 40 + 6 - 1  # tokens fed (the last generated one is not)
    assert cache.get_held_length() == 4 + 32
    with pytest.raises(ValueError, match="holds a stream of 45 tokens but input_ids has only 40.*reset"):
        generate_streaming(model, cache=cache, stride=16, max_new_tokens=6, **enc)
    cache.reset()
    assert cache.get_seq_length() == 0
    again = generate_streaming(model, cache=cache, stride=16, max_new_tokens=6, **enc)
    assert torch.equal(first, again)
    right = torch.ones_like(ids)
    right[:, -3:] = 0
    with pytest.raises(ValueError, match="left-padded"):
        generate_streaming(model, ids, CascadingKVCache(model, cache_size=32), attention_mask=right)
    with pytest.raises(ValueError, match="only 0 .padding. and 1"):
        generate_streaming(model, ids, CascadingKVCache(model, cache_size=32), attention_mask=right * 2)
    with pytest.raises(ValueError, match=r"rows \[0\] have no real token"):
        strided_prefill(model, ids, CascadingKVCache(model, cache_size=32), attention_mask=right * 0)


@pytest.mark.parametrize("family", ["llama", "phi", "cohere", "gemma3_text"])
def test_query_rotation_decode_equals_cache_rotation_beyond_the_window(family, monkeypatch):
    """Decoding rotates the query once per offset group instead of re-rotating the cache: same logits as rotating
    every stored key to its cache position, also long after evictions started (positions shifted many times)."""
    from iclr25.cascading_kv import attention

    model = build(family)
    ids = torch.randint(3, 99, (1, 80), generator=torch.Generator().manual_seed(4))
    outs = []
    for grouped in (True, False):
        monkeypatch.setattr(attention, "GROUPED_DECODE", grouped)
        cache = CascadingKVCache(model, sink_tokens=3, cache_size=16, cascades=4, beta=0.99)
        outs.append(strided_prefill(model, ids, cache, stride=1, return_logits="all"))
        for layer in cache.layers:
            layer.state.check_invariants()
    assert (outs[0] - outs[1]).abs().max().item() <= 1e-4


def test_layout_matches_state_positions():
    """The per-slot positions/validity the attention uses equal CascadeState.slot_positions at every step."""
    model = build("llama")
    for cascades, stride in ((4, 5), (2, 1), (1, 3)):
        cache = CascadingKVCache(model, sink_tokens=3, cache_size=16, cascades=cascades)
        g = torch.Generator().manual_seed(cascades)
        for _ in range(25):
            strided_prefill(model, torch.randint(3, 99, (1, stride), generator=g), cache, stride=stride)
            layer = cache.layers[0]
            lay, st = layer.layout(), layer.state
            sp = st.slot_positions()
            v = sp >= 0
            assert torch.equal(lay["valid"][3:], v)
            assert torch.equal(lay["positions"][3:][v], sp[v])
            assert torch.equal(lay["valid"][:3], torch.arange(3) < st.n_sinks)
            assert torch.equal(lay["positions"][: st.n_sinks], torch.arange(st.n_sinks))


@pytest.mark.parametrize("family", ["llama", "phi"])
def test_single_token_commit_equals_general_commit(family, monkeypatch):
    """Decoding commits through a memoised plan and ≤ C + 1 slot moves: same logits, stored keys/values and
    retained tokens as the general chunk commit, batch of 2 streams (score competitions split the rows)."""
    from iclr25.cascading_kv import cache as cache_mod

    model = build(family)
    ids = torch.randint(3, 99, (2, 70), generator=torch.Generator().manual_seed(5))
    res = []
    for fast in (True, False):
        monkeypatch.setattr(cache_mod, "FAST_SINGLE", fast)
        cache = CascadingKVCache(model, sink_tokens=3, cache_size=16, cascades=4, beta=0.99)
        logits = strided_prefill(model, ids, cache, stride=1, return_logits="all")
        lay = cache.layers[1]
        res.append((logits, lay.kbuf.clone(), lay.vbuf.clone(), cache.retained(1)))
    assert (res[0][0] - res[1][0]).abs().max().item() <= 1e-5
    assert torch.allclose(res[0][1], res[1][1], atol=1e-5) and torch.equal(res[0][2], res[1][2])
    assert torch.equal(res[0][3], res[1][3])
