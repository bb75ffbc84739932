"""CascadingKVCache inside HF models: exactness in the window, generate parity, EMA scores, robust prefill timing."""

import pytest
import torch
from transformers import DynamicCache

from iclr25.cascading_kv import (
    CascadingKVCache,
    enable_cascade_attention,
    generate_streaming,
    new_token_scores,
    reduce_heads,
    strided_prefill,
    update_cached_scores,
)
from iclr25.cascading_kv.attention import rope, unrope
from iclr25.common.lm import tiny_causal_lm

KW = dict(vocab_size=99, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128)


@pytest.fixture(scope="module")
def models():
    return {a: tiny_causal_lm(a, seed=0, **KW).eval() for a in ("llama", "qwen2", "mistral")}


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral"])
@pytest.mark.parametrize("cascades,stride", [(1, 16), (4, 7), (4, 1)])
def test_exact_logits_inside_window(models, arch, cascades, stride):
    model = models[arch]
    ids = torch.randint(0, 99, (2, 68), generator=torch.Generator().manual_seed(0))  # = S + N
    with torch.no_grad():
        dense = model(ids, cache=DynamicCache(config=model.config)).logits
    cache = CascadingKVCache(model, sink_tokens=4, cache_size=64, cascades=cascades, beta=0.999)
    logits = strided_prefill(model, ids, cache, stride=stride, return_logits="all")
    assert (logits - dense).abs().max().item() <= 1e-4
    assert cache.get_seq_length() == 68


def test_generate_streaming_matches_generate_while_it_fits(models):
    model = models["llama"]
    ids = torch.randint(0, 99, (1, 40), generator=torch.Generator().manual_seed(1))
    enable_cascade_attention(model)
    plain = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=0)
    cache = CascadingKVCache(model, sink_tokens=4, cache_size=64, cascades=4, beta=0.999)
    ours = generate_streaming(model, ids, cache, stride=16, max_new_tokens=24)
    assert torch.equal(plain, ours)


def test_long_stream_keeps_constant_memory_and_positions(models):
    model = models["qwen2"]
    sizes = []
    for L in (200, 800):
        cache = CascadingKVCache(model, sink_tokens=4, cache_size=64, cascades=4, beta=0.999)
        ids = torch.randint(0, 99, (2, L), generator=torch.Generator().manual_seed(L))
        out = strided_prefill(model, ids, cache, stride=32)
        assert out.shape == (2, 99) and torch.isfinite(out).all()
        sizes.append(cache.cache_tensor_bytes())
        for layer in cache.layers:
            layer.state.check_invariants()
            assert layer.state.slot_positions().max().item() < 4 + 64  # positions never exceed S + N
        ret = cache.retained(0)
        assert ret.shape == (2, 2, 68)
        assert (ret[..., :4] == torch.arange(4)).all()
        assert L - ret.max().item() == 1  # newest token always retained (cascade 0)
    assert sizes[0] == sizes[1]


def test_decoding_beyond_cache_with_sampling_and_batch(models):
    model = models["mistral"]
    ids = torch.randint(0, 99, (3, 150), generator=torch.Generator().manual_seed(2))
    cache = CascadingKVCache(
        model, sink_tokens=4, cache_size=32, cascades=2, beta=0.99, homogeneous_heads=True
    )
    torch.manual_seed(0)
    out = generate_streaming(model, ids, cache, stride=32, max_new_tokens=10, do_sample=True, top_k=5)
    assert out.shape == (3, 160)
    ret = cache.retained(1)
    assert torch.equal(ret[:, 0], ret[:, 1])  # homogeneous heads select the same tokens


def test_cache_built_without_the_model_needs_cascade_attention():
    """A cache built from num_layers + rotary_emb cannot switch the model: the first forward says what to do."""
    model = tiny_causal_lm("llama", seed=1, **KW).eval()  # eager attention
    cache = CascadingKVCache(
        num_layers=2, rotary_emb=model.model.rotary_emb, sink_tokens=4, cache_size=16, cascades=2
    )
    with pytest.raises(RuntimeError, match="enable_cascade_attention"):
        with torch.no_grad():
            model(torch.randint(0, 99, (1, 8)), cache=cache, use_cache=True)


def test_rope_inverse_is_exact():
    model = tiny_causal_lm("llama", seed=0, **KW)
    rot = model.model.rotary_emb
    x = torch.randn(2, 2, 10, 16, dtype=torch.float64)
    cos, sin = rot(x, torch.arange(100, 110)[None])
    assert torch.allclose(unrope(rope(x, cos, sin), cos, sin), x, atol=1e-12)


def test_ema_closed_form_one_token_at_a_time():
    beta, T = 0.9, 12
    torch.manual_seed(0)
    A = torch.rand(T, T, dtype=torch.float64).tril()
    A = A / A.sum(-1, keepdim=True)  # causal attention rows
    s = torch.zeros(T, dtype=torch.float64)
    for t in range(T):  # decode step t: key t is new, keys < t are cached
        s[:t] = update_cached_scores(s[:t], A[t : t + 1, :t], beta)
        s[t] = new_token_scores(A[t : t + 1, t : t + 1], beta)[0]
    want = torch.stack(
        [sum((1 - beta) * beta ** (T - 1 - t) * A[t, k] for t in range(k, T)) for k in range(T)]
    )
    assert torch.allclose(s, want, atol=1e-6, rtol=0)


def test_ema_chunk_update_equals_successive_steps():
    beta, q, K = 0.97, 9, 5
    A = torch.rand(q, K, dtype=torch.float64)
    s0 = torch.rand(K, dtype=torch.float64)
    chunk = update_cached_scores(s0, A, beta)
    step = s0.clone()
    for j in range(q):
        step = update_cached_scores(step, A[j : j + 1], beta)
    assert torch.allclose(chunk, step, atol=1e-12)
    # new tokens inside a chunk: s_m = sum_{j>=m} (1-beta) beta^(j-m) A[j,m]
    Aq = torch.rand(q, q, dtype=torch.float64).tril()
    m = 3
    want = sum((1 - beta) * beta ** (j - m) * Aq[j, m] for j in range(m, q))
    assert torch.allclose(new_token_scores(Aq, beta)[m], want)


def test_head_reduction():
    x = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    assert torch.equal(reduce_heads(x, 2, "max"), x.reshape(2, 2, 2, 3).amax(2))
    assert torch.allclose(reduce_heads(x, 2, "mean"), x.reshape(2, 2, 2, 3).mean(2))
    h = reduce_heads(x, 2, "max", homogeneous=True)
    assert torch.equal(h[:, 0], x.amax(1)) and torch.equal(h[:, 1], x.amax(1))
    with pytest.raises(ValueError, match="head_reduction"):
        reduce_heads(x, 2, "median")


def test_cache_validation():
    model = tiny_causal_lm("llama", seed=0, **KW)
    with pytest.raises(ValueError, match="cache_size must be divisible"):
        CascadingKVCache(model, cache_size=30, cascades=4)
    with pytest.raises(ValueError, match="beta"):
        CascadingKVCache(model, cache_size=32, beta=1.5)
    with pytest.raises(ValueError, match="num_layers"):
        CascadingKVCache(cache_size=32)
    cache = CascadingKVCache(model, cache_size=32, sink_tokens=4)
    with pytest.raises(ValueError, match="stride"):
        strided_prefill(model, torch.zeros(1, 5, dtype=torch.long), cache, stride=0)


def test_time_prefills_interleaves_rounds_and_keeps_the_best(monkeypatch):
    """Timing ratios on a loaded machine: rounds alternate the order, each configuration keeps its minimum,
    and on CPU the clock is the process CPU time (other processes' load does not count)."""
    import time

    from iclr25.cascading_kv import profiling
    from iclr25.common import timing

    assert profiling.default_clock(torch.device("cpu")) is time.process_time
    now = [0.0]
    calls: list[str] = []
    durations = {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 9.0, 4.0])}

    def fake_prefill(model, ids, method, *args, **kw):
        calls.append(method)
        now[0] += next(durations[method])  # the fake process clock advances by the scripted run time

    monkeypatch.setattr(profiling, "prefill_once", fake_prefill)
    monkeypatch.setitem(timing.CLOCKS, "process", lambda: now[0])
    model = torch.nn.Linear(1, 1)  # on CPU: the process clock is chosen
    runs = [("a", torch.zeros(1, 4, dtype=torch.long)), ("b", torch.zeros(1, 16, dtype=torch.long))]
    best = profiling.time_prefills(model, runs, 8, 1, 2, 4, repeats=3, warmup=0)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert best == [1.0, 4.0]
    with pytest.raises(ValueError, match="repeats"):
        profiling.time_prefills(model, runs, 8, 1, 2, 4, repeats=0)
