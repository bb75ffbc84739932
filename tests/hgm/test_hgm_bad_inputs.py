"""Public functions refuse bad input with a ValueError naming the parameter (no silent -inf or zero matrix)."""

import pytest
import torch

from iclr25.hgm.cameras import intrinsics_from_fov, look_at
from iclr25.hgm.metrics import chamfer_distance, psnr, ssim


@pytest.mark.parametrize("dr", [0, -1.0, float("nan"), float("inf"), True])
def test_psnr_and_ssim_refuse_a_bad_data_range(dr):
    x = torch.rand(8, 8, 3)
    for f in (psnr, ssim):
        with pytest.raises(ValueError, match="data_range"):
            f(x, x, data_range=dr)
    assert torch.isfinite(psnr(x, x * 0.9, data_range=1.0))


def test_look_at_refuses_coincident_eye_and_target_and_parallel_up():
    with pytest.raises(ValueError, match="eye and target coincide"):
        look_at(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="parallel"):
        look_at(torch.tensor([0.0, 2.0, 0.0]))  # looking straight down the up axis
    with pytest.raises(ValueError, match="eye"):
        look_at(torch.tensor([float("nan"), 0.0, 1.0]))
    M = look_at(torch.tensor([0.0, 0.0, 2.0]))
    assert torch.allclose(M[:3, :3] @ M[:3, :3].T, torch.eye(3), atol=1e-6)  # still a rotation


@pytest.mark.parametrize("w, h", [(-4, 8), (0, 8), (8, 0), (8.5, 8), (True, 8)])
def test_intrinsics_refuse_bad_sizes(w, h):
    with pytest.raises(ValueError, match="width|height"):
        intrinsics_from_fov(40.0, w, h)


def test_chamfer_refuses_bad_shapes():
    a, b = torch.rand(2, 5, 3), torch.rand(2, 4, 3)
    with pytest.raises(ValueError, match="point sets"):
        chamfer_distance(a, torch.rand(3, 4, 3))
    with pytest.raises(ValueError, match="at least one point"):
        chamfer_distance(a, torch.rand(2, 0, 3))
    with pytest.raises(ValueError, match="mask_a must have shape"):
        chamfer_distance(a, b, mask_a=torch.ones(2, 4, dtype=torch.bool))
    assert chamfer_distance(a, a).abs().max() < 1e-6
