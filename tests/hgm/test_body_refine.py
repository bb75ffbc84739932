"""E3 body refinement (pose/shape against the coarse Gaussians) and the low-resolution auxiliary camera."""

import torch

from iclr25.hgm import GaussianSet, orbit_cameras, project_points
from iclr25.hgm.body_refine import refine_body
from iclr25.hgm.metrics import topk_mask
from iclr25.hgm.model import downscale_camera
from iclr25.hgm.toyhumans import CapsuleBody, make_toyhumans


def test_downscale_camera_halves_pixel_coordinates():
    cam = orbit_cameras(4, 32, 32)
    small = downscale_camera(cam, 2)
    pts = torch.rand(1, 50, 3) - 0.5
    uv, z = project_points(pts, cam)
    uv2, z2 = project_points(pts, small)
    torch.testing.assert_close(uv2, uv / 2)
    torch.testing.assert_close(z2, z)
    assert (small.width, small.height) == (16, 16)


def test_topk_mask_selects_the_most_opaque():
    op = torch.tensor([[0.1, 0.9, 0.5, 0.3], [0.2, 0.2, 0.8, 0.7]])
    m = topk_mask(op, 0.5)
    assert m.tolist() == [[False, True, True, False], [False, False, True, True]]


def test_refinement_moves_a_noisy_body_towards_the_gaussians_it_explains():
    data = make_toyhumans(2, seed=3, size=16, num_points=2000, pose_noise_deg=10.0)
    body = CapsuleBody()
    v_true = body.vertices(data.params)
    n = v_true.shape[1]
    # "Coarse Gaussians" that sit exactly on the true body: refinement must reduce the vertex error.
    quats = torch.zeros(2, n, 4)
    quats[..., 0] = 1
    target = GaussianSet(
        v_true, torch.full((2, n), 0.9), torch.full((2, n, 3), 0.035), quats, torch.ones(2, n, 3)
    )
    cams = downscale_camera(orbit_cameras(12, 32, 32)[[0, 3, 6, 9]], 2)
    p1 = refine_body(body, data.prior_params, target, cams, steps=25, lr=0.01, frac=1.0)
    before = (body.vertices(data.prior_params) - v_true).norm(dim=-1).mean()
    after = (body.vertices(p1) - v_true).norm(dim=-1).mean()
    assert after < 0.8 * before


def test_thresholded_silhouette_target_refines_towards_the_body_and_rejects_bad_thresholds():
    """Gaussians on the true body, target = their opacity-weighted alpha render thresholded at 0.5 (a binary
    silhouette): refinement still moves the noisy body towards the truth."""
    import pytest

    data = make_toyhumans(2, seed=3, size=16, num_points=2000, pose_noise_deg=10.0)
    body = CapsuleBody()
    v_true = body.vertices(data.params)
    n = v_true.shape[1]
    quats = torch.zeros(2, n, 4)
    quats[..., 0] = 1
    target = GaussianSet(
        v_true, torch.full((2, n), 0.9), torch.full((2, n, 3), 0.035), quats, torch.ones(2, n, 3)
    )
    cams = downscale_camera(orbit_cameras(12, 32, 32)[[0, 3, 6, 9]], 2)
    p1 = refine_body(body, data.prior_params, target, cams, steps=25, lr=0.01, frac=1.0, threshold=0.5)
    before = (body.vertices(data.prior_params) - v_true).norm(dim=-1).mean()
    after = (body.vertices(p1) - v_true).norm(dim=-1).mean()
    assert after < 0.8 * before
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="threshold"):
            refine_body(body, data.prior_params, target, cams, steps=1, threshold=bad)
