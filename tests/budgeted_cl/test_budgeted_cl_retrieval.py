import copy

import pytest
import torch
from torch.nn import functional as F

from iclr25.budgeted_cl import (
    ClassBalancedMemory,
    ClassSimilarity,
    FrequencySampler,
    ReservoirMemory,
    decay_rate,
    effective_use_frequency,
    retrieval_probabilities,
)

D = torch.float64


def test_sar_probabilities_worked_example():
    """Eq. 6–7 on a hand-computed example."""
    S = torch.tensor([[0.5, 0.1], [0.1, 0.8]], dtype=D)
    c = effective_use_frequency(
        S, torch.tensor([0, 0, 1]), torch.tensor([2.0, 0, 1], dtype=D), torch.tensor([2.0, 1], dtype=D)
    )
    assert c.tolist() == pytest.approx([0.7, 0.3667, 0.4], abs=1e-4)
    p = retrieval_probabilities(c, 0.5)
    assert p.tolist() == pytest.approx([0.2097, 0.4083, 0.3820], abs=1e-4)
    assert p.sum().item() == pytest.approx(1.0)


def test_zero_similarity_favours_rarely_used():
    u = torch.tensor([5.0, 0.0, 2.0, 1.0], dtype=D)
    lab = torch.tensor([0, 1, 0, 1])
    p = retrieval_probabilities(
        effective_use_frequency(torch.zeros(2, 2, dtype=D), lab, u, torch.zeros(2, dtype=D)), 0.5
    )
    ref = torch.softmax(-u / (4 * 0.5), 0)
    assert torch.allclose(p, ref)
    assert torch.argsort(p, descending=True).tolist() == [1, 3, 2, 0]


def test_decay_worked_example():
    """Use-count decay r = b / (|M| k): |M| = 3, b = 2, k = 2 → r = 1/3; no decay when |M| ≤ b."""
    assert decay_rate(3, 2, 2.0) == pytest.approx(1 / 3)
    assert decay_rate(2, 2, 2.0) == 0.0
    s = FrequencySampler(3, 2, temperature=1.0, k_coeff=2.0, warmup_samples=0)
    s.u[:] = torch.tensor([2.0, 0.0, 1.0], dtype=D)
    s.U[:] = torch.tensor([2.0, 1.0], dtype=D)
    before = s.u.clone()
    idx = s.sample(
        2, torch.zeros(2, 2, dtype=D), torch.tensor([0, 0, 1]), 100, torch.Generator().manual_seed(0)
    )
    decayed = before * (1 - 1 / 3)
    expect = decayed.clone()
    expect[idx] += 1
    assert torch.allclose(s.u, expect)
    assert len(set(idx.tolist())) == 2  # distinct
    assert s.U.sum().item() == pytest.approx(3 * (2 / 3) + 2)


def test_sampler_prefers_unused_samples_empirically():
    s = FrequencySampler(6, 1, temperature=0.125, k_coeff=4.0, warmup_samples=0)
    g = torch.Generator().manual_seed(0)
    lab = torch.zeros(6, dtype=torch.long)
    S = torch.zeros(1, 1, dtype=D)
    for _ in range(50):
        s.sample(2, S, lab, 100, g)
    s.u[0] = 0.0  # a freshly inserted sample
    p = s.probabilities(S, lab)
    assert p[0] == p.max()
    assert p.sum().item() == pytest.approx(1.0)


def test_class_balanced_memory_overwrites_largest_class():
    """Class-balanced memory: the largest class is overwritten, counts stay balanced, new sample has u = 0."""
    g = torch.Generator().manual_seed(0)
    mem = ClassBalancedMemory(6, (1,))
    for y in [0, 0, 0, 1, 1, 2]:
        mem.insert(torch.tensor([y], dtype=torch.uint8), y, g)
    slot = mem.insert(
        torch.tensor([9], dtype=torch.uint8), 1, g
    )  # counts after adding: 0→3, 1→3, 2→1: tie → class 0
    assert mem.class_counts(3).tolist() == [2, 3, 1]
    assert mem.y[slot] == 1 and mem.x[slot, 0] == 9
    slot = mem.insert(torch.tensor([7], dtype=torch.uint8), 2, g)  # counts: 0→2, 1→3, 2→2 → overwrite class 1
    assert mem.class_counts(3).tolist() == [2, 2, 2]
    # round-robin over C classes after filling: max − min ≤ 1
    mem = ClassBalancedMemory(10, (1,))
    for t in range(60):
        mem.insert(torch.tensor([t % 255], dtype=torch.uint8), t % 4 if t < 10 else t % 3, g)
        if t >= 20:
            c = mem.class_counts(4)[:3]
            assert int(c.max() - c.min()) <= 1


def test_sampler_insert_resets_use_count():
    s = FrequencySampler(4, 2)
    s.u[:] = 3.0
    s.on_insert(2)
    assert s.u.tolist() == [3.0, 3.0, 0.0, 3.0]


def test_reservoir_memory_keeps_uniform_sample():
    counts = torch.zeros(100)
    for seed in range(200):
        g = torch.Generator().manual_seed(seed)
        mem = ReservoirMemory(10, (1,), dtype=torch.long)
        for t in range(100):
            mem.insert(torch.tensor([t]), 0, g)
        counts[mem.x[:, 0]] += 1
    # every stream position kept with probability 10/100 → expected 20 per position over 200 runs
    assert counts.sum() == 2000
    assert counts[:50].sum().item() == pytest.approx(1000, rel=0.1)


def _sequential(sim: ClassSimilarity, v, y):
    r = sim.rate
    for j in range(len(y)):
        c = int(y[j])
        sim.g[c] += r * (v[j] - sim.g[c])
        sim.sigma[c] += r * (F.cosine_similarity(v[j], sim.g[c], dim=0) - sim.sigma[c])
        sim.a[c] += r * (1 - sim.a[c])


def test_similarity_closed_form_equals_sequential_updates():
    g = torch.Generator().manual_seed(0)
    sim = ClassSimilarity(3, 6, rate=0.2)
    for c in range(3):
        sim.add_class(c)
    ref = copy.deepcopy(sim)
    for _ in range(3):
        v = torch.randn(9, 6, generator=g, dtype=D)
        y = torch.randint(0, 3, (9,), generator=g)
        sim.update(v, y)
        _sequential(ref, v, y)
    assert (
        torch.allclose(sim.g, ref.g) and torch.allclose(sim.sigma, ref.sigma) and torch.allclose(sim.a, ref.a)
    )


def test_similarity_matrix_properties():
    """Eq. 5: symmetric, diag = σ a², identical class gradients → S_ab = √(σ_a σ_b) a_a a_b."""
    sim = ClassSimilarity(2, 4, rate=0.1)
    sim.add_class(0)
    sim.add_class(1)
    v = torch.tensor([[1.0, -1.0, 0.5, 0.2]], dtype=D)
    for _ in range(30):
        sim.update(torch.cat([v, v]), torch.tensor([0, 1]))
    S = sim.matrix()
    assert torch.allclose(S, S.T)
    assert torch.allclose(S.diagonal(), sim.sigma * sim.a**2)
    expect = (sim.sigma[0] * sim.sigma[1]).sqrt() * sim.a[0] * sim.a[1]
    assert S[0, 1].item() == pytest.approx(expect.item(), rel=1e-9)


def test_new_class_state():
    sim = ClassSimilarity(3, 2)
    sim.add_class(1)
    assert sim.sigma[1] == 1.0 and sim.a[1] == 0.0
    sim.sigma[1] = 0.4
    sim.add_class(0)
    assert sim.sigma[0].item() == pytest.approx(0.4)
    with pytest.raises(ValueError, match="add_class"):
        sim.update(torch.ones(1, 2, dtype=D), torch.tensor([2]))
