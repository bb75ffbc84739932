"""CascadeState bookkeeping: StreamingLLM equivalence, structural invariants, 2^i spacing, the score rule of Algorithm 2 (no model)."""

import numpy as np
import pytest
import torch

from iclr25.cascading_kv import EMPTY, CascadeState


def _stream(state: CascadeState, scores: np.ndarray, chunk: int, check: bool = True) -> None:
    for c in range(0, scores.shape[-1], chunk):
        state.push(scores[..., c : c + chunk])
        if check:
            state.check_invariants()


def _retained_set(state: CascadeState, row=(0, 0)) -> set[int]:
    r = state.retained()[row].tolist()
    return {x for x in r if x != EMPTY}


def test_one_cascade_is_streaming_llm():
    S, N, T = 4, 32, 200
    st = CascadeState(S, N, 1, rows=(2, 3))
    rng = np.random.default_rng(0)
    for c in range(0, T, 7):
        q = min(7, T - c)
        st.push(rng.random((2, 3, q)))
        t = st.t
        want = set(range(min(S, t))) | set(range(max(S, t - N), t))
        for b in range(2):
            for h in range(3):
                assert _retained_set(st, (b, h)) == want


@pytest.mark.parametrize("C", [2, 4, 8])
def test_eager_fill_equals_one_cascade_until_full(C):
    S, N = 4, 64
    rng = np.random.default_rng(C)
    a, b = CascadeState(S, N, C, rows=(1, 2)), CascadeState(S, N, 1, rows=(1, 2))
    for c in range(0, S + N, 5):
        s = rng.random((1, 2, min(5, S + N - c)))
        a.push(s)
        b.push(s)
        assert _retained_set(a, (0, 1)) == _retained_set(b, (0, 1))


@pytest.mark.parametrize("C,chunk", [(1, 1), (2, 3), (4, 16), (4, 1), (8, 5)])
def test_structural_invariants_after_every_update(C, chunk):
    st = CascadeState(4, 64, C, rows=(2, 2))
    _stream(st, np.random.default_rng(1).random((2, 2, 400)), chunk, check=True)
    assert all(s <= st.W for s in st.stored) and st.n_cached <= st.N
    sinks = st.retained()[..., : st.S]
    assert (sinks == torch.arange(4)).all()  # sinks are tokens 0..S-1 at positions 0..S-1
    assert st.sink_positions().tolist() == [0, 1, 2, 3]


def test_constant_scores_give_power_of_two_spacing():
    S, N, C = 4, 64, 4
    st = CascadeState(S, N, C, rows=(1,))
    _stream(st, np.zeros((1, 1000)), 32, check=False)
    W = st.W
    og = st.og[0].numpy()
    for i in range(C):
        seg = np.sort(og[i * W : (i + 1) * W])
        gaps = np.diff(seg)
        assert (gaps[:-1] == 2**i).all(), (i, gaps)  # the newest slot may be closer
        assert gaps[-1] <= 2**i
    span = st.t - og.min()
    assert span >= 0.9 * W * (2**C - 1)


def test_high_score_token_survives_to_span_limit_and_c1_does_not():
    rng = np.random.default_rng(0)
    s = rng.random((1, 2000))
    s[0, 600] = 10.0
    ages = {}
    for C in (1, 4):
        st = CascadeState(4, 64, C, rows=(1,))
        last = None
        for t in range(2000):
            st.push(s[:, t : t + 1])
            if 600 in st.og[0].tolist():
                last = t
        ages[C] = last - 600
    assert ages[4] >= 0.9 * 16 * (2**4 - 1)
    assert ages[1] < 64


def test_pair_competition_and_ties():
    # W=2, C=2: cascade 1 accepts every other arrival; at a non-accepting arrival the carry competes with the newest
    S, N, C = 0, 4, 2
    st = CascadeState(S, N, C, rows=(3,), eager_fill=False)
    # fill cascade 0 (2 slots) and start pushing into cascade 1
    st.push(np.zeros((3, 2)))
    assert sorted(st.og[0].tolist()) == [-1, -1, 0, 1]
    # token 2: cascade 0 full -> evicts token 0 into cascade 1 ((t-1-S)=2 even -> accepted, cascade 1 empty -> stored)
    st.push(np.zeros((3, 1)))
    # token 3: evicts token 1; (t-1-S)=3 odd -> cascade 1 rejects: token 1 competes with newest (token 0)
    # row 0: token 1 has the lower score -> dropped; row 1: higher -> replaces; row 2: tie -> newer (token 1) wins
    st._score[0, 2], st._score[1, 2], st._score[2, 2] = 5.0, -5.0, 0.0  # slot of token 0 in cascade 1
    st.push(np.zeros((3, 1)))
    held = [set(st.og[r].tolist()) for r in range(3)]
    assert 0 in held[0] and 1 not in held[0]
    assert 1 in held[1] and 0 not in held[1]
    assert 1 in held[2] and 0 not in held[2]


def test_validation_errors():
    with pytest.raises(ValueError, match="cache_size must be divisible by cascades"):
        CascadeState(4, 30, 4)
    with pytest.raises(ValueError, match="sink_tokens"):
        CascadeState(-1, 32, 4)
    st = CascadeState(4, 32, 4, rows=(2, 2))
    with pytest.raises(ValueError, match="scores must have shape"):
        st.push(np.zeros((3, 2, 5)))


@pytest.mark.parametrize("C", [1, 2, 4])
@pytest.mark.parametrize("eager", [True, False])
def test_single_token_plan_equals_general_push(C, eager):
    """The decode fast path (time-only plan memoised across layers + one score comparison) leaves the same state as
    the general push, ties included (integer scores), long after evictions started."""
    rng = np.random.default_rng(C)
    a = CascadeState(2, 8, C, (2, 3), eager_fill=eager)
    b = CascadeState(2, 8, C, (2, 3), eager_fill=eager)
    s = rng.integers(0, 3, (2, 3, 300)).astype(float)
    for t in range(300):
        add = rng.integers(0, 2, (2, 3, 8)).astype(float)
        for st in (a, b):
            st.decay_scores(0.5, add)
        a.push(s[..., t : t + 1])
        if b.n_sinks < b.S:
            b.push(s[..., t : t + 1])
        else:
            b.push_single(b.plan_single(), s[..., t])
        assert (a.t, a.stored, a.start) == (b.t, b.stored, b.start)
        np.testing.assert_array_equal(a.og.numpy(), b.og.numpy())
        np.testing.assert_array_equal(a.scores.numpy(), b.scores.numpy())
    b.check_invariants()
    with pytest.raises(ValueError, match="plan"):
        b.push_single(b.plan_single().__class__((), -1, False, 0, (0,) * C, (0,) * C), s[..., 0])
