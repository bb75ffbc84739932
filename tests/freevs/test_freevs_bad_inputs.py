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


# --- issue #34: every public function ---------------------------------------------------------------
import torch  # noqa: E402

from iclr25.freevs import (  # noqa: E402
    EDMConfig,
    FreeVSTiny,
    ToyDriveScene,
    camera_pose,
    check_pose,
    colour_points,
    edm_loss,
    fill_holes,
    loss_weight,
    pixel_rays,
    precondition,
    project,
    pseudo_image,
    psnr,
    record_drive,
    sample,
    ssim,
    svd_unet,
    zbuffer,
)
from iclr25.freevs.world import Camera as FCam  # noqa: E402

_CASES = []


def case(label, param, fn):
    _CASES.append((label, param if isinstance(param, str) else "|".join(param), fn))


nan, inf = float("nan"), float("inf")
img = np.random.rand(8, 8, 3)
case("psnr nan", "pred", lambda: psnr(np.full((4, 4, 3), nan), img[:4, :4]))
case("psnr empty", "pred", lambda: psnr(np.zeros((0, 3)), np.zeros((0, 3))))
case("psnr mask shape", "mask", lambda: psnr(img, img * 0.9, mask=np.ones((4, 4), bool)))
case("psnr mask 3-D", "mask", lambda: psnr(img, img * 0.9, mask=np.ones((8, 8, 3), bool)))
case("psnr out of range", "pred", lambda: psnr(img * 255, img * 200))
case("ssim shape mismatch", "pred", lambda: ssim(img, img[:4]))
case("ssim tiny", "pred", lambda: ssim(np.random.rand(3, 3, 3), np.random.rand(3, 3, 3)))
case("ssim nan", "pred", lambda: ssim(np.full((8, 8, 3), nan), img))
case("ssim 2-D", "pred", lambda: ssim(np.random.rand(8, 8), np.random.rand(8, 8)))
case("fill_holes shape", "filled", lambda: fill_holes(img, np.ones((4, 4), bool)))
case("fill_holes float mask", "filled", lambda: fill_holes(img, np.ones((8, 8))))
case("fill_holes list", "filled", lambda: fill_holes(img, [[True]]))
case(
    "ap dets nan score",
    "dets",
    lambda: average_precision([np.array([[1.0, 1.0, nan]])], [np.array([[1.0, 1.0]])]),
)
case("ap gts nan", "gts", lambda: average_precision([np.array([[1.0, 1.0, 0.5]])], [np.array([[nan, 1.0]])]))
case("ap dets not list", "dets", lambda: average_precision(np.zeros((1, 0, 3)), [np.zeros((0, 2))]))
case("fd 1-D", ("a", "b"), lambda: frechet_distance(np.random.rand(5), np.random.rand(5)))
case("precondition sigma 0", "sigma", lambda: precondition(torch.tensor([0.0])))
case("precondition sigma neg", "sigma", lambda: precondition(torch.tensor([-1.0])))
case("precondition sigma_data 0", "sigma_data", lambda: precondition(torch.tensor([1.0]), 0.0))
case("precondition sigma_data nan", "sigma_data", lambda: precondition(torch.tensor([1.0]), nan))
case("precondition sigma float", "sigma", lambda: precondition(1.0))
case("loss_weight sigma 0", "sigma", lambda: loss_weight(torch.tensor([0.0])))
case("loss_weight sigma_data 0", "sigma_data", lambda: loss_weight(torch.tensor([1.0]), 0.0))
case("EDMConfig sigma_min > max", "sigma_min", lambda: EDMConfig(sigma_min=100.0))
case("EDMConfig sigma_data nan", "sigma_data", lambda: EDMConfig(sigma_data=nan))
case("EDMConfig p_mean nan", "p_mean", lambda: EDMConfig(p_mean=nan))
case("EDMConfig sigma_max inf", "sigma_max", lambda: EDMConfig(sigma_max=inf))
case("EDMConfig drop str", "drop_prob", lambda: EDMConfig(drop_prob="0.2"))
case("EDMConfig pseudo_noise_infer neg", "pseudo_noise_infer", lambda: EDMConfig(pseudo_noise_infer=-1.0))
case("EDMConfig pseudo_noise_mean nan", "pseudo_noise_mean", lambda: EDMConfig(pseudo_noise_mean=nan))
case("FreeVSTiny channels 0", "channels", lambda: FreeVSTiny(channels=(0, 8)))
case("FreeVSTiny cond 0", "cond_channels", lambda: FreeVSTiny(channels=(8, 16), cond_channels=0))
case("FreeVSTiny ref_dim 0", "ref_dim", lambda: FreeVSTiny(channels=(8, 16), ref_dim=-1))
m = FreeVSTiny(channels=(8, 16))
cfg = EDMConfig()
g = torch.Generator().manual_seed(0)
x0 = torch.rand(1, 2, 3, 8, 8) * 2 - 1
ref = torch.rand(1, 3, 8, 8)
case("edm_loss pseudo shape", "pseudo", lambda: edm_loss(m, x0, x0[:, :1], ref, cfg, g))
case("edm_loss x0 4-D", "x0", lambda: edm_loss(m, x0[0], x0[0], ref, cfg, g))
case("edm_loss ref batch", "ref", lambda: edm_loss(m, x0, x0, torch.rand(2, 3, 8, 8), cfg, g))
case("edm_loss cfg", "cfg", lambda: edm_loss(m, x0, x0, ref, None, g))
case("sample steps float", "steps", lambda: sample(m, x0, ref, cfg, steps=1.5))
case("sample steps bool", "steps", lambda: sample(m, x0, ref, cfg, steps=True))
case("sample guidance nan", "guidance", lambda: sample(m, x0, ref, cfg, steps=1, guidance=nan))
case("sample pseudo 4-D", "pseudo", lambda: sample(m, x0[0], ref, cfg, steps=1))
case("sample ref shape", "ref", lambda: sample(m, x0, torch.rand(1, 3, 4, 4), cfg, steps=1))
case("svd_unet in 0", "in_channels", lambda: svd_unet(in_channels=0))
case("svd_unet blocks empty", "block_out_channels", lambda: svd_unet(block_out_channels=()))
K = FCam(16, 8).K
pose = camera_pose(0.0, 0.0)
case("project h 0", "height", lambda: project(np.random.rand(5, 3), K, pose, 0, 8))
case("project w float", "width", lambda: project(np.random.rand(5, 3), K, pose, 8, 8.5))
case(
    "zbuffer len mismatch",
    ("row", "col", "dist"),
    lambda: zbuffer(np.array([0, 1]), np.array([0]), np.array([1.0, 2.0]), 4),
)
case("zbuffer width 0", "width", lambda: zbuffer(np.array([0]), np.array([0]), np.array([1.0]), 0))
case("zbuffer dist nan", "dist", lambda: zbuffer(np.array([0, 0]), np.array([0, 0]), np.array([nan, 1.0]), 4))
case("zbuffer col out of range", "col", lambda: zbuffer(np.array([0]), np.array([5]), np.array([1.0]), 4))
case(
    "colour_points image nan",
    "image",
    lambda: colour_points(np.random.rand(5, 3), np.full((8, 16, 3), nan), K, pose),
)
case("camera_pose nan", ("x", "y", "z", "yaw"), lambda: camera_pose(nan, 0.0))
case("camera_pose yaw inf", "yaw", lambda: camera_pose(0.0, 0.0, yaw=inf))
case("camera_pose str", "x", lambda: camera_pose("a", 0.0))
case("pixel_rays pose bad", "pose", lambda: pixel_rays(FCam(16, 8), np.zeros((4, 4))))
case("pixel_rays cam bad", "cam", lambda: pixel_rays(None, pose))
case("Camera width float", "width", lambda: FCam(8.5, 8))
case("Camera width bool", "width", lambda: FCam(True, 8))
case("Camera hfov nan", "hfov_deg", lambda: FCam(16, 8, nan))
case("Scene n_frames float", "n_frames", lambda: ToyDriveScene(0, n_frames=2.5))
case("Scene moving -1", "moving_cars", lambda: ToyDriveScene(0, n_frames=4, moving_cars=-1))
case("Scene parked -1", "parked_cars", lambda: ToyDriveScene(0, n_frames=4, parked_cars=-1))
case("Scene seed str", "seed", lambda: ToyDriveScene("x", n_frames=4))
sc = ToyDriveScene(0, n_frames=4)
case("render pose bad", "pose", lambda: sc.render(FCam(16, 8), np.eye(3), 0))
case("lidar beams 0", "beams", lambda: sc.lidar(0, beams=0))
case("lidar azimuths 0", "azimuths", lambda: sc.lidar(0, azimuths=0))
case("lidar max_range neg", "max_range", lambda: sc.lidar(0, max_range=-1.0))
case("lidar az range 0", "azimuth_range_deg", lambda: sc.lidar(0, azimuth_range_deg=0.0))
case("lidar frame nan", "frame", lambda: sc.lidar(nan))
case("record beams 0", "beams", lambda: record_drive(ToyDriveScene(0, n_frames=1), FCam(16, 8), beams=0))
case(
    "record azimuths float",
    "azimuths",
    lambda: record_drive(ToyDriveScene(0, n_frames=1), FCam(16, 8), azimuths=10.5),
)
imgs, log = record_drive(ToyDriveScene(0, n_frames=3), FCam(16, 8), beams=8, azimuths=90)
sc3 = ToyDriveScene(0, n_frames=3)
case("pseudo_image t float", "t", lambda: pseudo_image(log, sc3, FCam(16, 8), pose, 1.5))
case("pseudo_image t bool", "t", lambda: pseudo_image(log, sc3, FCam(16, 8), pose, True))
case("pseudo_image centre float", "centre", lambda: pseudo_image(log, sc3, FCam(16, 8), pose, 0, centre=1.5))
case("pseudo_image n neg", "n", lambda: pseudo_image(log, sc3, FCam(16, 8), pose, 0, n=-1))
case("check_pose list", "pose", lambda: check_pose("abc"))


@pytest.mark.parametrize("label, name, call", _CASES, ids=[c[0] for c in _CASES])
def test_public_function_refuses_bad_input_naming_the_parameter(label, name, call):
    with pytest.raises(ValueError, match=name):
        call()
