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


# --- issue #34: the remaining public functions -------------------------------------------------------------
import numpy as np  # noqa: E402

from iclr25.hgm import (  # noqa: E402
    Camera,
    activate_gaussians,
    composite,
    make_toyhumans,
    orbit_cameras,
    pixel_rays,
    project_gaussians,
    project_points,
    quat_scale_to_covar,
    quat_to_rotmat,
    render_gaussians,
    sample_image_features,
    sample_volume,
    unproject_pixels,
)
from iclr25.hgm.model import HGMConfig, downscale_camera  # noqa: E402
from iclr25.hgm.toyhumans import CapsuleBody, zbuffer_render  # noqa: E402

NAN = float("nan")
CAM = orbit_cameras(2, 8, 8)
EYE = torch.tensor([0.0, 0.0, 2.0])
K1 = intrinsics_from_fov(40.0, 8, 8)[None]


def _g():
    torch.manual_seed(0)
    return activate_gaussians(torch.randn(1, 4, 14))


def _cov():
    return quat_scale_to_covar(torch.rand(1, 5, 4) + 0.1, torch.rand(1, 5, 3))


_PTS = np.random.default_rng(0).random((20, 3)).astype(np.float32) - 0.5
_COL = np.random.default_rng(1).random((20, 3)).astype(np.float32)
_TH = dict(size=8, num_views=1, num_points=50, surface_points=10)

CASES = [
    ("fovy_deg", lambda: intrinsics_from_fov("40", 8, 8)),
    ("up", lambda: look_at(EYE, up=(0.0, 0.0, 0.0))),
    ("up", lambda: look_at(EYE, up=(NAN, 1.0, 0.0))),
    ("up", lambda: look_at(EYE, up=(0.0, 1.0))),
    ("eye", lambda: look_at([0.0, 0.0, 2.0])),
    ("num_views", lambda: orbit_cameras(2.5)),
    ("num_views", lambda: orbit_cameras(True)),
    ("radius", lambda: orbit_cameras(2, radius=NAN)),
    ("radius", lambda: orbit_cameras(2, radius=float("inf"))),
    ("elevation_deg", lambda: orbit_cameras(2, elevation_deg=90.0)),
    ("elevation_deg", lambda: orbit_cameras(2, elevation_deg=NAN)),
    ("azimuths_deg", lambda: orbit_cameras(2, azimuths_deg=[])),
    ("azimuths_deg", lambda: orbit_cameras(2, azimuths_deg=[0.0, NAN])),
    ("width", lambda: Camera(torch.eye(4)[None], K1, True, 8)),
    ("Ks", lambda: Camera(torch.eye(4)[None], torch.zeros(1, 3, 3), 8, 8)),
    ("viewmats", lambda: Camera(torch.zeros(1, 4, 4), K1, 8, 8)),
    ("camera", lambda: pixel_rays("cam")),
    ("points", lambda: project_points(torch.rand(5, 2), CAM)),
    ("points", lambda: project_points(torch.full((5, 3), NAN), CAM)),
    ("uv", lambda: unproject_pixels(torch.rand(2, 5, 2), torch.rand(2, 4), CAM)),
    ("scale_factor", lambda: activate_gaussians(torch.zeros(4, 14), scale_factor=-1.0)),
    ("scale_factor", lambda: activate_gaussians(torch.zeros(4, 14), scale_factor=NAN)),
    ("width", lambda: sample_image_features(torch.rand(1, 2, 4, 4), torch.rand(1, 3, 2), 0, 8)),
    ("width", lambda: sample_image_features(torch.rand(1, 2, 4, 4), torch.rand(1, 3, 2), -8, 8)),
    ("lo", lambda: sample_volume(torch.rand(1, 2, 4, 4, 4), torch.rand(1, 3, 3), 1.0, 1.0)),
    ("batch", lambda: sample_volume(torch.rand(2, 2, 4, 4, 4), torch.rand(3, 3, 3))),
    ("pred", lambda: psnr(torch.rand(8, 8), torch.rand(8, 8))),
    ("pred", lambda: psnr(torch.rand(0, 8, 3), torch.rand(0, 8, 3))),
    ("finite", lambda: psnr(torch.full((4, 4, 3), NAN), torch.rand(4, 4, 3))),
    ("pred", lambda: ssim(torch.rand(8, 8), torch.rand(8, 8))),
    ("7×7", lambda: ssim(torch.rand(2, 2, 3), torch.rand(2, 2, 3))),
    ("finite", lambda: chamfer_distance(torch.full((1, 4, 3), NAN), torch.rand(1, 4, 3))),
    ("mask_a", lambda: chamfer_distance(torch.rand(1, 4, 3), torch.rand(1, 4, 3), mask_a=torch.ones(1, 4))),
    ("quats", lambda: quat_to_rotmat(torch.rand(5, 3))),
    ("zero quaternion", lambda: quat_to_rotmat(torch.zeros(5, 4))),
    ("scales", lambda: quat_scale_to_covar(torch.rand(5, 4), torch.rand(4, 3))),
    ("width", lambda: project_gaussians(torch.rand(1, 5, 3), _cov(), CAM.viewmats[None], CAM.Ks[None], 0, 8)),
    (
        "eps2d",
        lambda: project_gaussians(torch.rand(1, 5, 3), _cov(), CAM.viewmats[None], CAM.Ks[None], 8, 8, -1.0),
    ),
    (
        "eps2d",
        lambda: project_gaussians(torch.rand(1, 5, 3), _cov(), CAM.viewmats[None], CAM.Ks[None], 8, 8, NAN),
    ),
    (
        "covars",
        lambda: project_gaussians(torch.rand(1, 5, 3), _cov()[:, :4], CAM.viewmats[None], CAM.Ks[None], 8, 8),
    ),
    (
        "alphas",
        lambda: composite(torch.full((4, 3), 2.0), torch.rand(4, 3, 3), torch.rand(4, 3), torch.ones(3)),
    ),
    ("colours", lambda: composite(torch.rand(4, 3), torch.rand(4, 2, 3), torch.rand(4, 3), torch.ones(3))),
    ("depths", lambda: composite(torch.rand(4, 3), torch.rand(4, 3, 3), torch.rand(4, 2), torch.ones(3))),
    (
        "transmittance_min",
        lambda: composite(torch.rand(4, 3), torch.rand(4, 3, 3), torch.rand(4, 3), torch.ones(3), -1.0),
    ),
    (
        "transmittance_min",
        lambda: composite(torch.rand(4, 3), torch.rand(4, 3, 3), torch.rand(4, 3), torch.ones(3), NAN),
    ),
    ("background", lambda: render_gaussians(*_g(), CAM, background=(1.0, 1.0))),
    ("background", lambda: render_gaussians(*_g(), CAM, background=NAN)),
    ("eps2d", lambda: render_gaussians(*_g(), CAM, eps2d=-5.0)),
    ("tile_size", lambda: render_gaussians(*_g(), CAM, tile_size=True)),
    ("factor", lambda: downscale_camera(CAM, True)),
    ("heads", lambda: HGMConfig(heads=0)),
    ("channels", lambda: HGMConfig(channels=(16, 32))),
    ("max_offset", lambda: HGMConfig(max_offset=-1.0)),
    ("feat_dim", lambda: HGMConfig(feat_dim=0)),
    ("code_dim", lambda: HGMConfig(code_dim=0)),
    ("image_size", lambda: HGMConfig(image_size=32.0)),
    ("t_steps", lambda: CapsuleBody(t_steps=2.5)),
    ("theta_steps", lambda: CapsuleBody(theta_steps="6")),
    ("supersample", lambda: zbuffer_render(_PTS, _COL, CAM, supersample=0)),
    ("colours", lambda: zbuffer_render(_PTS, _COL[:5], CAM)),
    ("points", lambda: zbuffer_render(_PTS[:, :2], _COL, CAM)),
    ("n", lambda: make_toyhumans(1.5, **_TH)),
    ("num_points", lambda: make_toyhumans(1, size=8, num_views=1, num_points=0, surface_points=0)),
    ("surface_points", lambda: make_toyhumans(1, size=8, num_views=1, num_points=50, surface_points=100)),
    ("pose_noise_deg", lambda: make_toyhumans(1, pose_noise_deg=-1.0, **_TH)),
    ("shape_noise", lambda: make_toyhumans(1, shape_noise=NAN, **_TH)),
    ("size", lambda: make_toyhumans(1, size=9.5, num_views=1, num_points=50, surface_points=10)),
]


@pytest.mark.parametrize("name, call", CASES, ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)])
def test_public_functions_refuse_bad_input_naming_it(name, call):
    with pytest.raises(ValueError, match=name):
        call()


def test_valid_inputs_still_work_after_the_checks():
    g = _g()
    out = render_gaussians(*g, CAM)
    assert out.image.shape == (1, 2, 8, 8, 3) and torch.isfinite(out.image).all()
    rgb, acc, _ = composite(torch.rand(4, 3), torch.rand(4, 3, 3), torch.rand(4, 3), torch.ones(3), 1e-4)
    assert ((acc >= 0) & (acc <= 1)).all()
    imgs, masks = zbuffer_render(_PTS, _COL, CAM)
    assert imgs.shape == (2, 8, 8, 3) and masks.shape == (2, 8, 8)
