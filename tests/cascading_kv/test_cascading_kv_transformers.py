"""The cache as transformers and kvpress users drive it (issue #51): long streams in every cascade/stride regime,
plain ``generate`` / pipelines / evaluation loops without a context manager, left-padded batches, reusing a prefilled
context, per-layer budgets, beam search, and clear refusals of what needs a cache crop."""

import copy

import pytest
import torch
import transformers as tf
from transformers import DynamicCache

from iclr25.cascading_kv import (
    CascadingKVCache,
    cascade_attention,
    generate_streaming,
    strided_prefill,
)
from iclr25.cascading_kv import cache as cache_mod

# users pass the cache as `past_key_values=` (what the issue asks for); transformers 5.x calls it `cache=`
pytestmark = pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")

S, N = 4, 32  # small caches keep every test fast; prompts are >= 4x the cache
KW = dict(sink_tokens=S, cache_size=N, beta=0.99)


def llama(seed: int = 0, layers: int = 2, vocab: int = 99, impl: str = "eager"):
    cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)  # fmt: skip
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)  # the weights are a function of the seed, not of the tests that ran before
        model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl)
        for n, p in model.named_parameters():  # peaked attention: the score competitions matter
            if p.ndim == 2 and "embed" not in n:
                p.normal_(0, 0.15)
    return model.eval()


def ids_of(shape, seed: int) -> torch.Tensor:
    return torch.randint(3, 99, shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def model():
    return llama()


GREEDY = dict(do_sample=False, pad_token_id=0)


# ------------------------------------------------------------------ 1. long streams: every cascade and stride regime
@pytest.mark.parametrize("cascades", [1, 2, 4])
@pytest.mark.parametrize("stride", [8, N, 3 * N // 2])  # below, at and above the cache size
def test_decode_after_a_long_prefill_equals_a_naive_reference(cascades, stride):
    """Issue #51's crash (the rotation table was sized for a chunk, not for a decoded query's largest rotation
    ``S + N + W``): decode after a prefill of 4.6x the cache in every regime, and check each decoded step's logits
    against a naive reference — a one-layer model (its keys depend on the token alone) run from scratch on the
    retained tokens at their cache positions 0..n−1 (sinks, then the cached tokens oldest first), then the new one."""
    model = llama(seed=cascades, layers=1)
    ids = ids_of((1, 150), seed=stride)
    cache = CascadingKVCache(
        model, cascades=cascades, homogeneous_heads=True, **KW
    )  # every head keeps one set
    stream, tok = ids[0, :-1], ids[:, -1:]
    strided_prefill(model, ids[:, :-1], cache, stride=stride)
    with torch.no_grad():
        for step in range(
            6
        ):  # each step reads the cache after evictions, then inserts (cascade, C + 1 moves)
            kept = cache.retained(0)[0, 0]
            kept = kept[kept >= 0].sort().values  # sinks then cached, by age = by cache position
            got = model(input_ids=tok, cache=cache, use_cache=True).logits[0, -1]
            seq = torch.cat([stream[kept], tok[0]])[None]
            want = model(input_ids=seq, position_ids=torch.arange(seq.shape[1])[None]).logits[0, -1]
            assert (got - want).abs().max().item() <= 1e-4, (cascades, stride, step)
            stream, tok = torch.cat([stream, tok[0]]), got.argmax()[None, None]
    st = cache.layers[0].state
    st.check_invariants()
    assert st.t == 149 + 6 and cache.get_seq_length() == 155 and cache.get_held_length() == S + N


@pytest.mark.parametrize("cascades", [1, 2, 4])
@pytest.mark.parametrize("stride", [8, 48])
def test_generate_streaming_long_prompts_in_every_regime(model, cascades, stride):
    """The configurations of the issue at small scale (StreamingLLM C = 1, stride below/above the cache) on a
    two-layer model: generation runs, every layer keeps its invariants and the newest tokens."""
    ids = ids_of((2, 4 * N + 30), seed=cascades)
    cache = CascadingKVCache(model, cascades=cascades, **KW)
    out = generate_streaming(model, ids, cache, stride=stride, max_new_tokens=5, min_new_tokens=5)
    assert out.shape == (2, ids.shape[1] + 5) and torch.equal(out[:, : ids.shape[1]], ids)
    for layer in cache.layers:
        layer.state.check_invariants()
        assert layer.state.t == ids.shape[1] + 4
        assert layer.state.slot_positions().max().item() < S + N
    assert (cache.retained(1)[..., S:].amax(-1) == ids.shape[1] + 3).all()  # the newest fed token is held


def test_the_issue_configuration_streaming_llm_2048_on_8192_tokens(model):
    """The exact report: sinks 4, cache 2048, one cascade, stride 1024, an 8,192-token prompt (was IndexError 7169)."""
    ids = ids_of((1, 8192), seed=0)
    cache = CascadingKVCache(model, sink_tokens=4, cache_size=2048, cascades=1)
    out = generate_streaming(model, ids, cache, stride=1024, max_new_tokens=2, min_new_tokens=2)
    assert out.shape == (1, 8194)
    assert cache.retained(0)[0, 0, 4:].min().item() == 8193 - 2048  # StreamingLLM: the last 2048 tokens


# ------------------------------------------------------------------ 2. plain generate, pipelines, evaluation loops
def test_plain_generate_equals_the_context_manager_path(model):
    """``model.generate(ids, past_key_values=CascadingKVCache(model, ...))`` with no context manager: the cache
    switches the model itself; the same tokens as inside ``cascade_attention`` and as generate_streaming, in one
    prefill chunk and with transformers' own ``prefill_chunk_size``."""
    ids = ids_of((1, 150), seed=1)
    kw = dict(cascades=2, **KW)
    plain = model.generate(ids, past_key_values=CascadingKVCache(model, **kw), max_new_tokens=16, **GREEDY)
    with cascade_attention(model):
        ctx = model.generate(ids, cache=CascadingKVCache(model, **kw), max_new_tokens=16, **GREEDY)
    assert torch.equal(plain, ctx)
    assert torch.equal(
        plain, generate_streaming(model, ids, CascadingKVCache(model, **kw), stride=150, max_new_tokens=16)
    )
    chunked = model.generate(ids, past_key_values=CascadingKVCache(model, **kw), max_new_tokens=16,
                             prefill_chunk_size=16, **GREEDY)  # fmt: skip
    assert torch.equal(
        chunked, generate_streaming(model, ids, CascadingKVCache(model, **kw), stride=16, max_new_tokens=16)
    )
    # the cache differs from full attention once the prompt is past the window (it is a real cascade run)
    assert not torch.equal(plain, model.generate(ids, max_new_tokens=16, **GREEDY))


def test_switched_model_keeps_its_attention_for_other_caches():
    """Building a cache switches the model to ``cascade_eager`` (``cascade`` for SDPA): forwards with a DynamicCache,
    no cache, or training give the previous implementation's numbers bit for bit."""
    for impl in ("eager", "sdpa"):
        model = llama(impl=impl)
        ids = ids_of((2, 40), seed=2)
        with torch.no_grad():
            before = model(ids).logits
            before_dyn = model(ids, cache=DynamicCache(config=model.config), use_cache=True).logits
        CascadingKVCache(model, cascades=2, **KW)
        assert model.config._attn_implementation == {"eager": "cascade_eager", "sdpa": "cascade"}[impl]
        with torch.no_grad():
            assert torch.equal(model(ids).logits, before)
            assert torch.equal(
                model(ids, cache=DynamicCache(config=model.config), use_cache=True).logits, before_dyn
            )
        loss = model(ids, labels=ids).loss  # training forward (autograd on)
        loss.backward()
        assert torch.isfinite(loss)


def test_pipeline_and_evaluation_loop():
    """``pipeline("text-generation")`` with ``past_key_values=`` and a Trainer-style loop computing the loss of each
    batch through a fresh cache: the same as generate_streaming / strided_prefill."""
    from iclr25.common.lm import byte_tokenizer

    tok = byte_tokenizer()
    model = llama(vocab=len(tok))
    kw = dict(cascades=2, **KW)
    text = "a cascade keeps old tokens far beyond a sliding window, " * 3
    pipe = tf.pipeline("text-generation", model=model, tokenizer=tok)
    got = pipe(text, past_key_values=CascadingKVCache(model, **kw), max_new_tokens=8, **GREEDY)[0][
        "generated_text"
    ]
    ids = tok(text, return_tensors="pt")["input_ids"]
    want = generate_streaming(model, ids, CascadingKVCache(model, **kw), stride=10_000, max_new_tokens=8)
    assert got == tok.decode(want[0])
    losses = []
    for batch in ids.split(1, dim=0):  # a loader of one batch, as an evaluation loop sees it
        with torch.no_grad():
            out = model(input_ids=batch, labels=batch, past_key_values=CascadingKVCache(model, **kw))
        logits = strided_prefill(
            model, batch, CascadingKVCache(model, **kw), stride=10_000, return_logits="all"
        )
        ref = torch.nn.functional.cross_entropy(logits[0, :-1], batch[0, 1:])
        losses.append((out.loss.item(), ref.item()))
    assert all(abs(a - b) <= 1e-5 for a, b in losses)


# ------------------------------------------------------------------ 3. left-padded batches
def _left_padded(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    L = max(lengths)
    ids = torch.zeros(len(lengths), L, dtype=torch.long)
    mask = torch.zeros_like(ids)
    rows = []
    for b, n in enumerate(lengths):
        rows.append(torch.randint(3, 99, (n,), generator=g))
        ids[b, L - n :], mask[b, L - n :] = rows[-1], 1
    return ids, mask, rows


LENGTHS = (150, 61, 7)  # beyond the cache, inside it, fewer than one stride


def test_left_padded_prefill_equals_each_row_alone(model):
    """Every real position's logits, the last-token logits and the retained tokens of each row equal the row run
    alone (pads never enter the cache; each row is chunked as it would be alone)."""
    ids, mask, rows = _left_padded(LENGTHS, seed=3)
    L = ids.shape[1]
    cache = CascadingKVCache(model, cascades=2, **KW)
    got = strided_prefill(model, ids, cache, stride=16, return_logits="all", attention_mask=mask)
    last = strided_prefill(
        model, ids, CascadingKVCache(model, cascades=2, **KW), stride=16, attention_mask=mask
    )
    assert torch.equal(got[mask == 0], torch.zeros_like(got[mask == 0]))
    for b, r in enumerate(rows):
        alone = CascadingKVCache(model, cascades=2, **KW)
        want = strided_prefill(model, r[None], alone, stride=16, return_logits="all")[0]
        assert (got[b, L - len(r) :] - want).abs().max().item() <= 1e-5, b
        assert (last[b] - want[-1]).abs().max().item() <= 1e-5, b
        for li in range(2):
            assert torch.equal(cache.retained(li)[b], alone.retained(li)[0]), (b, li)
    assert cache.get_seq_length() == L  # columns fed, pads included (where the caller's next token sits)


def test_left_padded_generation_equals_each_row_alone(model):
    """generate_streaming and plain generate on a left-padded batch (tokenizer output): each row's new tokens equal
    the row generated alone; min_new_tokens keeps rows from stopping early, so the outputs align."""
    ids, mask, rows = _left_padded(LENGTHS, seed=4)
    L = ids.shape[1]
    kw = dict(cascades=2, **KW)
    new = dict(max_new_tokens=10, min_new_tokens=10)
    streamed = generate_streaming(
        model, ids, CascadingKVCache(model, **kw), stride=16, attention_mask=mask, **new
    )
    plain = model.generate(
        ids, attention_mask=mask, past_key_values=CascadingKVCache(model, **kw), **new, **GREEDY
    )
    assert torch.equal(streamed[:, :L], ids) and torch.equal(plain[:, :L], ids)
    for b, r in enumerate(rows):
        alone = generate_streaming(model, r[None], CascadingKVCache(model, **kw), stride=16, **new)
        assert torch.equal(streamed[b, L:], alone[0, len(r) :]), b
        alone = model.generate(r[None], past_key_values=CascadingKVCache(model, **kw), **new, **GREEDY)
        assert torch.equal(plain[b, L:], alone[0, len(r) :]), b


def test_padded_parts_follow_batch_selection(model):
    """A padded batch's parts follow transformers' row operations (reorder / select / repeat)."""
    ids, mask, _ = _left_padded(LENGTHS, seed=5)
    cache = CascadingKVCache(model, cascades=2, **KW)
    strided_prefill(model, ids, cache, stride=16, attention_mask=mask)
    before = [cache.retained(li) for li in range(2)]
    assert len(cache.layers[0].parts) == 3
    cache.reorder_cache(torch.tensor([2, 0, 0, 1]))
    assert [torch.equal(cache.retained(li), before[li][[2, 0, 0, 1]]) for li in range(2)] == [True, True]
    cache.batch_select_indices(torch.tensor([0]))
    assert cache.layers[0].parts is None  # a single row: back to one buffer
    assert torch.equal(cache.retained(1), before[1][[2]])
    # generation from a padded batch needs an empty cache (it realigns the rows from their first token)
    ids2, mask2 = ids_of((1, 200), seed=6), torch.ones(1, 200, dtype=torch.long)
    mask2[:, :5] = 0
    with pytest.raises(
        ValueError, match="must start from an empty cache, but the cache holds a stream of 150 tokens"
    ):
        generate_streaming(model, ids2, cache, stride=16, attention_mask=mask2)


# ------------------------------------------------------------------ 4. reusing a prefilled context
def test_prefilled_context_copied_for_two_questions(model):
    """kvpress's most requested use: prefill a context once, copy the cache per question (``copy()`` or
    ``copy.deepcopy``), continue with generate. Exact (same tokens as prefilling context + question from scratch)
    when the context length is a multiple of the stride — the same chunks; otherwise the chunk boundaries move and
    the answers are those of a different (equally valid) chunking."""
    kw = dict(cascades=2, **KW)
    ctx = ids_of((1, 96), seed=6)  # 6 chunks of 16
    questions = [ids_of((1, 10), seed=7), ids_of((1, 23), seed=8)]
    base = CascadingKVCache(model, **kw)
    strided_prefill(model, ctx, base, stride=16)
    held = [base.retained(li).clone() for li in range(2)]
    new = dict(max_new_tokens=10, min_new_tokens=10)
    for i, q in enumerate(questions):
        full = torch.cat([ctx, q], dim=1)
        scratch = generate_streaming(model, full, CascadingKVCache(model, **kw), stride=16, **new)
        answer = generate_streaming(model, full, base.copy(), stride=16, **new)
        assert torch.equal(answer, scratch), i
        deep = copy.deepcopy(base)
        assert deep.layers[0].kbuf is not base.layers[0].kbuf and deep.rotary is base.rotary
        answer = model.generate(full, past_key_values=deep, prefill_chunk_size=16, **new, **GREEDY)
        assert torch.equal(answer, scratch), i
        assert deep.get_seq_length() == full.shape[1] + 9
    # the original cache is untouched by its copies' answers
    assert base.get_seq_length() == 96 and all(torch.equal(base.retained(li), held[li]) for li in range(2))


# ------------------------------------------------------------------ 5. per-layer budgets
def test_per_layer_cache_sizes(model, monkeypatch):
    """``cache_size=[...]``: each layer holds its own budget. Layer 0 sees the same inputs whatever the other layers
    keep, so it retains what a uniform cache of its size retains; a list of equal sizes is the int; the memoised
    single-token moves (shared by the layers) give the general commit's result with layers of different W."""
    ids = ids_of((1, 120), seed=9)
    mixed = CascadingKVCache(model, sink_tokens=S, cache_size=[16, 64], cascades=2, beta=0.99)
    uniform = CascadingKVCache(model, sink_tokens=S, cache_size=16, cascades=2, beta=0.99)
    strided_prefill(model, ids, mixed, stride=8)
    strided_prefill(model, ids, uniform, stride=8)
    assert torch.equal(mixed.retained(0), uniform.retained(0))
    assert mixed.retained(1).shape[-1] == S + 64 and mixed.layers[1].state.n_cached == 64
    assert mixed.cache_size == [16, 64] and mixed.layers[1].get_max_length() == S + 64
    as_list = CascadingKVCache(model, sink_tokens=S, cache_size=[16, 16], cascades=2, beta=0.99)
    assert torch.equal(strided_prefill(model, ids, as_list, stride=8), strided_prefill(model, ids, CascadingKVCache(
        model, sink_tokens=S, cache_size=16, cascades=2, beta=0.99), stride=8))  # fmt: skip
    res = []
    for fast in (True, False):
        monkeypatch.setattr(cache_mod, "FAST_SINGLE", fast)
        cache = CascadingKVCache(model, sink_tokens=S, cache_size=[32, 16], cascades=2, beta=0.99)
        logits = strided_prefill(model, ids, cache, stride=1, return_logits="all")
        res.append((logits, cache.retained(0), cache.retained(1)))
    assert (res[0][0] - res[1][0]).abs().max().item() <= 1e-5
    assert torch.equal(res[0][1], res[1][1]) and torch.equal(res[0][2], res[1][2])
    with pytest.raises(
        ValueError, match=r"cache_size must be an int or a list with one size per layer \(2\)"
    ):
        CascadingKVCache(model, cache_size=[16, 16, 16])
    with pytest.raises(ValueError, match=r"cache_size\[1\] must be divisible by cascades"):
        CascadingKVCache(model, cache_size=[16, 30], cascades=4)


# ------------------------------------------------------------------ 6. beam search; what needs a crop is refused
def test_beam_search_reorders_the_cascade(model):
    """Beam search needs no crop, only row reordering (``reorder_cache``): inside the window it equals beam search
    with full attention; beyond it, every beam keeps its own cascade."""
    ids = ids_of((1, 20), seed=10)
    beam = dict(max_new_tokens=8, num_beams=3, **GREEDY)
    big = CascadingKVCache(model, sink_tokens=4, cache_size=64, cascades=2)
    assert torch.equal(generate_streaming(model, ids, big, stride=8, **beam), model.generate(ids, **beam))
    long = ids_of((1, 150), seed=11)
    out = model.generate(long, past_key_values=CascadingKVCache(model, cascades=2, **KW), **beam)
    assert out.shape == (1, 158) and torch.equal(out[:, :150], long)


def test_rollback_decoding_is_refused_saying_why(model):
    ids = ids_of((1, 20), seed=12)
    cache = CascadingKVCache(model, cascades=2, **KW)
    with pytest.raises(
        ValueError,
        match="assistant_model=<LlamaForCausalLM> is not supported.*cascade evicts and merges tokens irreversibly.*cannot be cropped",
    ):
        generate_streaming(model, ids, cache, stride=8, assistant_model=llama(seed=1))
    with pytest.raises(
        ValueError, match="prompt_lookup_num_tokens=3 is not supported.*crop the rejected ones"
    ):
        generate_streaming(model, ids, cache, stride=8, prompt_lookup_num_tokens=3)
    assert cache.get_seq_length() == 0  # refused before anything ran
    # plain generate: transformers refuses after the prefill (the cache reports is_croppable=False) ...
    with pytest.raises(ValueError, match="requires a cache that can be cropped"):
        model.generate(ids, past_key_values=cache, prompt_lookup_num_tokens=3, max_new_tokens=4, **GREEDY)
    # ... and a direct crop says why
    with pytest.raises(
        NotImplementedError, match=r"cannot be cropped \(crop\(-2\) on \d+ tokens fed\): it evicts"
    ):
        cache.crop(-2)
    cache.crop(0)  # nothing to roll back: allowed
    # a filled cache cannot be expanded to several beams/sequences (its rows are streams)
    with pytest.raises(
        ValueError, match="holds streams of batch size 1 but the model got a chunk of batch size 2"
    ):
        model.generate(torch.cat([ids, ids_of((1, 4), 13)], 1), past_key_values=cache, num_beams=2, max_new_tokens=2,
                       **GREEDY)  # fmt: skip


# ------------------------------------------------------------------ the transformers 5 keyword: generate(cache=...)
def test_generate_cache_keyword_equals_the_deprecated_past_key_values(model):
    """The cards use ``generate(..., cache=cache)``; it streams through the cascade exactly as the older
    ``past_key_values=cache`` (same tokens, same cache contents), without the deprecation warning."""
    import warnings

    ids = ids_of((1, 90), 21)
    got = {}
    for kw in ("cache", "past_key_values"):
        cache = CascadingKVCache(model, sink_tokens=4, cache_size=32, cascades=4)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = model.generate(ids, **{kw: cache}, prefill_chunk_size=16, max_new_tokens=6, **GREEDY)
        deprecated = [x for x in w if "past_key_values" in str(x.message) and "deprecat" in str(x.message)]
        got[kw] = (out, cache.get_seq_length(), [k.clone() for k, _ in cache_layers(cache)], deprecated)
    assert torch.equal(got["cache"][0], got["past_key_values"][0])
    # the 90 prompt tokens and the 5 generated tokens fed back (the 6th is returned, never fed) went through the cache
    assert got["cache"][1] == got["past_key_values"][1] == 95
    assert all(torch.equal(a, b) for a, b in zip(got["cache"][2], got["past_key_values"][2]))
    assert not got["cache"][3]  # the recommended keyword warns nothing


def cache_layers(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]
