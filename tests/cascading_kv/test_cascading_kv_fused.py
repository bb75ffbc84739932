"""The compiled decode step (decode_backend="compile", iclr25.cascading_kv.fused) against the eager reference."""

import numpy as np
import pytest
import torch
import transformers as tf

from iclr25.cascading_kv import CascadingKVCache, cascade_attention, fused, strided_prefill
from iclr25.cascading_kv import cache as cache_mod


def _llama(seed: int = 0):
    cfg = tf.LlamaConfig(vocab_size=99, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)  # fmt: skip
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)  # the weights are a function of the seed, not of the tests that ran before
        model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
        # weights large enough that attention is peaked and the score competitions split the rows
        for n, p in model.named_parameters():
            if p.ndim == 2 and "embed" not in n:
                p.normal_(0, 0.15)
    return model.eval()


def test_decode_backend_is_validated():
    model = _llama()
    with pytest.raises(ValueError, match="decode_backend must be one of"):
        CascadingKVCache(model, cache_size=16, decode_backend="triton")


@pytest.mark.parametrize("head_reduction", ["max"])
def test_compiled_decode_equals_eager(head_reduction, monkeypatch):
    """Greedy decoding of 2 streams, 120 tokens past a full 3 + 16-slot cache (every cascade evicting, the final
    carry competing): the compiled step gives the same tokens, the same retained tokens and counters in every
    layer, and the same keys, values and EMA scores up to float rounding (inductor may contract multiply-adds)."""
    calls = []
    run = cache_mod.run_compiled
    monkeypatch.setattr(cache_mod, "run_compiled", lambda *a, **k: calls.append(1) or run(*a, **k))
    model = _llama()
    ids = torch.randint(3, 99, (2, 40), generator=torch.Generator().manual_seed(7))
    toks, caches = {}, {}
    for backend in ("eager", "compile"):
        cache = CascadingKVCache(model, sink_tokens=3, cache_size=16, cascades=4, beta=0.99,
                                 head_reduction=head_reduction, decode_backend=backend)  # fmt: skip
        strided_prefill(model, ids, cache, stride=8)
        out, tok = [], ids[:, -1:]
        with torch.no_grad(), cascade_attention(model):
            for _ in range(120):
                tok = model(input_ids=tok, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
                out.append(tok)
        toks[backend], caches[backend] = torch.cat(out, 1), cache
    assert len(calls) == 120 * 2  # every decoded token of both layers went through the compiled step
    assert torch.equal(toks["eager"], toks["compile"])
    for le, lc in zip(caches["eager"].layers, caches["compile"].layers):
        se, sc = le.state, lc.state
        assert (se.t, se.stored, se.start, se.n_sinks) == (sc.t, sc.stored, sc.start, sc.n_sinks)
        assert np.array_equal(se._og, sc._og)
        assert torch.allclose(le.kbuf, lc.kbuf, atol=1e-5, rtol=0)
        assert torch.allclose(le.vbuf, lc.vbuf, atol=1e-5, rtol=0)
        assert np.allclose(se._score, sc._score, atol=1e-9, rtol=1e-6)
        sc.check_invariants()
    # the score competitions did split rows at least once (the two streams keep different tokens)
    og = caches["compile"].layers[0].state._og
    assert not np.array_equal(og[0], og[2])
    assert fused.COMPILE_SECONDS  # the compilation time is recorded for the benchmark
