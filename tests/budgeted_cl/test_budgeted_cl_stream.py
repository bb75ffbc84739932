import numpy as np
import pytest

from iclr25.budgeted_cl import disjoint_stream, gaussian_stream, load_digits16


def test_gaussian_stream_is_permutation_with_ordered_class_centres():
    labels = np.repeat(np.arange(10), 50)
    order = gaussian_stream(labels, sigma=0.1, seed=3)
    assert sorted(order.tolist()) == list(range(500))
    pos = np.empty(500)
    pos[order] = np.arange(500)
    mean_pos = np.array([pos[labels == c].mean() for c in range(10)])
    # classes appear in a shuffled order whose mean positions are well separated (centres i/C, σ = 0.1)
    ranks = np.argsort(np.argsort(mean_pos))
    assert len(set(ranks.tolist())) == 10
    assert np.array_equal(order, gaussian_stream(labels, sigma=0.1, seed=3))
    assert not np.array_equal(order, gaussian_stream(labels, sigma=0.1, seed=4))
    # σ = 0 → disjoint by class
    z = labels[gaussian_stream(labels, sigma=0.0, seed=3)]
    assert (np.diff(z) != 0).sum() == 9


def test_disjoint_stream_tasks():
    labels = np.repeat(np.arange(10), 20)
    order = disjoint_stream(labels, n_tasks=5, seed=0)
    y = labels[order]
    for k in range(5):
        assert len(set(y[k * 40 : (k + 1) * 40].tolist())) == 2
    with pytest.raises(ValueError, match="n_tasks"):
        disjoint_stream(labels, n_tasks=11)


def test_digits16_shapes_and_split():
    d = load_digits16(0)
    assert d.train_x.shape[1:] == (1, 16, 16) and d.train_x.dtype.is_floating_point is False
    assert d.bytes_per_image == 256
    assert len(d.train_y) + len(d.test_y) == 1797
    assert abs(len(d.test_y) / 1797 - 0.2) < 0.01
    assert d.n_classes == 10
