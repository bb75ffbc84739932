"""Public functions refuse bad input with a ValueError naming the parameter."""

import numpy as np
import pytest
import torch

from iclr25.fosp.env import lidar
from iclr25.fosp.values import ref_targets


def test_ref_targets_refuses_a_non_indicator_h_and_a_bad_bootstrap():
    h = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0])
    assert torch.allclose(ref_targets(h, 0.99), torch.tensor([0.9801, 0.99, 1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match=r"violation must hold the indicator h in \{0, 1\}"):
        ref_targets(torch.tensor([0.0, 0.3, 1.0]), 0.99)
    with pytest.raises(ValueError, match="bootstrap"):
        ref_targets(h, 0.99, bootstrap=1.5)
    with pytest.raises(ValueError, match="bootstrap"):
        ref_targets(h, 0.99, bootstrap=float("nan"))
    with pytest.raises(ValueError, match="mu"):
        ref_targets(h, 1.2)
    with pytest.raises(ValueError, match="H >= 1"):
        ref_targets(torch.zeros(0), 0.99)


@pytest.mark.parametrize("kw, name", [({"bins": 0}, "bins"), ({"bins": 2.5}, "bins"), ({"max_dist": 0.0}, "max_dist"),
                                      ({"max_dist": float("nan")}, "max_dist")])  # fmt: skip
def test_lidar_refuses_bad_bins_and_range(kw, name):
    with pytest.raises(ValueError, match=name):
        lidar(np.zeros((1, 2)), np.ones((3, 2)), **kw)


def test_lidar_refuses_bad_positions_and_reads_the_nearest_hazard():
    with pytest.raises(ValueError, match="pos and hazards"):
        lidar(np.zeros((1, 3)), np.ones((3, 2)))
    v = lidar(np.zeros((1, 2)), np.array([[1.0, 0.0]]), bins=4, max_dist=2.0)
    assert v.shape == (1, 4) and v[0, 0] == pytest.approx(0.5) and v[0, 1:].sum() == 0
