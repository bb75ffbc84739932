"""#52's speed-up changes no number: with the in-place logits scaling, masking and softmax and the reused
new-token-score buffer, prefill logits, decode logits, greedy tokens and every layer's keys, values, EMA scores,
retained tokens and counters are bit-identical to the out-of-place path (the implementation before the speed-up)."""

import pytest
import torch
import transformers as tf

from iclr25.cascading_kv import CascadingKVCache, new_token_scores, strided_prefill
from iclr25.cascading_kv import attention as attn
from iclr25.cascading_kv.scores import ema_new_token_weights

BASE = dict(vocab_size=99, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2)  # fmt: skip
CONFIGS = {
    # head_dim 12: a logit scale 1/√12 that is not a power of two (its product rounds)
    "llama": (tf.LlamaConfig, dict(hidden_size=48)),
    # softcapping and a sliding window: the mask's cache block is not all zeros (the whole mask is added)
    "gemma2": (
        tf.Gemma2Config,
        dict(
            hidden_size=64,
            head_dim=16,
            query_pre_attn_scalar=16,
            sliding_window=24,
            attn_logit_softcapping=2.0,
            final_logit_softcapping=30.0,
        ),
    ),  # fmt: skip
}


def _build(name: str):
    cls, extra = CONFIGS[name]
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        model = tf.AutoModelForCausalLM.from_config(cls(**BASE, **extra), attn_implementation="eager")
        for n, p in model.named_parameters():  # weights large enough that attention is far from uniform
            if p.ndim == 2 and "embed" not in n:
                p.normal_(0, 0.15)
    return model.eval()


def _old_new_token_scores(probs_chunk, beta):
    w = ema_new_token_weights(probs_chunk.shape[-1], beta, probs_chunk.device, probs_chunk.dtype)
    return (probs_chunk * w).sum(dim=-2)


def _run(model, ids, inplace: bool, monkeypatch, decode: int = 12):
    with monkeypatch.context() as mp:
        mp.setattr(attn, "INPLACE_PREFILL", inplace)
        if not inplace:
            mp.setattr(attn, "new_token_scores", _old_new_token_scores)
        cache = CascadingKVCache(model, sink_tokens=4, cache_size=32, cascades=4, beta=0.999)
        logits = strided_prefill(model, ids, cache, stride=16, return_logits="all")
        tok, toks, step_logits = logits[:, -1:].argmax(-1), [], []
        with torch.no_grad():
            for _ in range(decode):
                out = model(input_ids=tok, cache=cache, use_cache=True).logits[:, -1]
                step_logits.append(out)
                tok = out.argmax(-1, keepdim=True)
                toks.append(tok)
    state = [
        (layer.kbuf, layer.vbuf, layer.state.scores, layer.state.og, layer.state.t, layer.state.stored,
         layer.state.start)
        for layer in cache.layers
    ]  # fmt: skip
    return logits, torch.cat(step_logits), torch.cat(toks, 1), state


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("length", [20, 150])  # cache never full during the prefill / full after 2 chunks
def test_inplace_prefill_is_bit_identical(name, length, monkeypatch):
    model = _build(name)
    ids = torch.randint(3, 99, (2, length), generator=torch.Generator().manual_seed(length))
    new = _run(model, ids, True, monkeypatch)
    old = _run(model, ids, False, monkeypatch)
    assert torch.equal(new[0], old[0])  # prefill logits
    assert torch.equal(new[1], old[1])  # decode-step logits
    assert torch.equal(new[2], old[2])  # greedy tokens
    for a, b in zip(new[3], old[3]):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])  # keys, values
        assert torch.equal(a[2], b[2]) and torch.equal(a[3], b[3])  # EMA scores, original indices
        assert a[4:] == b[4:]  # counters


def test_new_token_scores_buffer_matches_product_and_keeps_autograd():
    g = torch.Generator().manual_seed(0)
    for shape in [(1, 9, 64, 64), (2, 4, 7, 7), (1, 9, 64, 64)]:  # grow, shrink, reuse the buffer
        p = torch.softmax(torch.randn(*shape, generator=g), -1)
        first = new_token_scores(p, 0.99)
        assert torch.equal(first, _old_new_token_scores(p, 0.99))
        new_token_scores(
            torch.rand(*shape, generator=g), 0.99
        )  # a later call does not touch the earlier result
        assert torch.equal(first, _old_new_token_scores(p, 0.99))
    x = torch.rand(1, 2, 5, 5, requires_grad=True)
    new_token_scores(x, 0.9).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
