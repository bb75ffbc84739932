"""Public functions refuse bad input with a ValueError naming the parameter (no empty range, NaN or scipy error)."""

import numpy as np
import pytest

from iclr25.freevs.metrics import average_precision, frechet_distance
from iclr25.freevs.pseudo import window


@pytest.mark.parametrize("args, name", [((5, -1, 10), "n"), ((-1, 2, 10), "centre"), ((3, 2, 0), "n_frames"),
                                        ((10, 2, 10), "centre"), ((2.5, 1, 10), "centre")])  # fmt: skip
def test_window_refuses_bad_arguments(args, name):
    with pytest.raises(ValueError, match=name):
        window(*args)
    assert list(window(0, 2, 10)) == [0, 1, 2, 3, 4] and list(window(9, 2, 10)) == [5, 6, 7, 8, 9]


def test_average_precision_refuses_unequal_lists_and_bad_arrays():
    gts = [np.array([[10.0, 10.0]]), np.array([[5.0, 5.0]])]
    with pytest.raises(ValueError, match="one entry per image"):
        average_precision([np.array([[10.0, 10.0, 0.9]])], gts)
    with pytest.raises(ValueError, match="radius"):
        average_precision([np.zeros((0, 3))] * 2, gts, radius=0)
    with pytest.raises(ValueError, match=r"dets\[0\]"):
        average_precision([np.array([[1.0, 2.0]]), np.zeros((0, 3))], gts)
    perfect = average_precision([np.array([[10.0, 10.0, 0.9]]), np.array([[5.0, 5.0, 0.8]])], gts)
    assert perfect == pytest.approx(1.0)


def test_frechet_distance_refuses_too_few_samples_and_mismatched_features():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(20, 4))
    with pytest.raises(ValueError, match=">= 2 samples"):
        frechet_distance(a, a[:1])
    with pytest.raises(ValueError, match="same features"):
        frechet_distance(a, rng.normal(size=(20, 3)))
    with pytest.raises(ValueError, match="finite"):
        frechet_distance(a, np.full((5, 4), np.nan))
    assert abs(frechet_distance(a, a)) < 1e-4
