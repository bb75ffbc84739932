"""FreeVS: projection and z-buffer, colour round trip, occupancy trick, viewpoint simulation, EDM
preconditioning, CFG and condition dropout, determinism, metrics, bad input, and a smoke run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.freevs import (
    Camera,
    EDMConfig,
    FreeVSTiny,
    ToyDriveScene,
    average_precision,
    camera_pose,
    edm_loss,
    fill_holes,
    frechet_distance,
    loss_weight,
    precondition,
    project,
    project_points,
    pseudo_image,
    psnr,
    record_drive,
    sample,
    svd_unet,
    zbuffer,
)

torch.set_num_threads(1)
CAM = Camera(40, 16)


@pytest.fixture(scope="module")
def drive():
    scene = ToyDriveScene(3, n_frames=12)
    imgs, log = record_drive(scene, CAM, beams=24, azimuths=360)
    return scene, imgs, log


def test_projection_lands_on_analytic_pixel_and_zbuffer_keeps_nearest():
    pose = camera_pose(0.0, 0.0)
    K = CAM.K
    # a point 10 m ahead, 1 m left, 0.6 m below the camera: u = cx − f·1/10, v = cy + f·0.6/10
    row, col, dist, inside = project(np.array([[10.0, 1.0, 1.0]]), K, pose, CAM.height, CAM.width)
    f = K[0, 0]
    assert (
        inside[0]
        and col[0] == int(np.floor(K[0, 2] - f * 0.1))
        and row[0] == int(np.floor(K[1, 2] + f * 0.06))
    )
    assert dist[0] == pytest.approx(np.sqrt(100 + 1 + 0.36), abs=1e-9)
    # two points on one pixel ray: the nearer one's colour survives
    d = np.array([10.0, 1.0, 1.0 - 1.6])
    pts = np.stack([np.array([0, 0, 1.6]) + d, np.array([0, 0, 1.6]) + 2 * d])
    img, filled = project_points(pts, np.array([[1.0, 0, 0], [0, 1.0, 0]]), K, pose, CAM.height, CAM.width)
    assert filled.sum() == 1 and (img[filled] == [1, 0, 0]).all()
    # vectorised z-buffer == naive per-pixel minimum on random input
    rng = np.random.default_rng(0)
    r, c, dd = rng.integers(0, 4, 300), rng.integers(0, 5, 300), rng.random(300)
    keep, pix = zbuffer(r, c, dd, 5)
    naive = {}
    for i in range(300):
        p = r[i] * 5 + c[i]
        if p not in naive or dd[i] < dd[naive[p]]:
            naive[p] = i
    assert dict(zip(pix.tolist(), keep.tolist())) == naive


def test_colour_round_trip(drive):
    scene, imgs, log = drive
    for t in (2, 7):
        p, m = pseudo_image(log, scene, CAM, camera_pose(float(t), 0.0), t, n=0)
        assert m.mean() > 0.3
        assert np.abs(p[m] - imgs[t][m]).max() <= 1 / 255


def test_occupancy_trick():
    pose = camera_pose(0.0, 0.0)
    K = CAM.K
    obj = np.array([[5.0, 0.0, 1.6]])  # projects to the image centre
    row, col, _, _ = project(obj, K, pose, CAM.height, CAM.width)
    # a far background point one pixel to the side of the object's pixel
    u = col[0] + 1.5 - K[0, 2]
    far = np.array([[30.0, -u * 30.0 / K[0, 0], 1.6 + 0.0]])
    far[0, 2] = 1.6 - ((row[0] + 0.5) - K[1, 2]) * 30.0 / K[1, 1]
    _, fc, _, ins = project(far, K, pose, CAM.height, CAM.width)
    assert ins[0] and abs(fc[0] - col[0]) == 1
    cols = [(np.array([[1.0, 0, 0]]))]
    img2, f2 = project_points(
        far, [[0, 0, 1.0]], K, pose, CAM.height, CAM.width, [(obj, cols[0])], occupancy_radius=2
    )
    img0, f0 = project_points(
        far, [[0, 0, 1.0]], K, pose, CAM.height, CAM.width, [(obj, cols[0])], occupancy_radius=0
    )
    assert f2.sum() == 1 and f0.sum() == 2  # suppressed within r px; r = 0 keeps it
    # r = 0 equals a plain z-buffer over all points when the objects are in front
    plain, pf = project_points(
        np.concatenate([obj, far]), [[1.0, 0, 0], [0, 0, 1.0]], K, pose, CAM.height, CAM.width
    )
    assert (plain == img0).all() and (pf == f0).all()


def test_viewpoint_simulation_coverage(drive):
    scene, _, log = drive
    lower = 0
    frames = range(3, 9)
    for t in frames:
        pose = camera_pose(float(t), 0.0)
        m_p, m_f = pseudo_image(log, scene, CAM, pose, t)
        k0_p, k0_f = pseudo_image(log, scene, CAM, pose, t, centre=t)
        assert (m_p == k0_p).all() and (m_f == k0_f).all()
        sh_f = pseudo_image(log, scene, CAM, pose, t, centre=t + 3)[1]
        lower += sh_f.mean() < m_f.mean()
    assert lower >= 0.9 * len(frames)


def test_edm_preconditioning_matches_paper_and_scheduler():
    sigma = torch.tensor([1e-3, 0.1, 1.0, 7.0, 80.0], dtype=torch.float64)
    c_skip, c_out, c_in, c_noise = precondition(sigma)
    assert torch.allclose(c_skip, 1 / (sigma**2 + 1))
    assert torch.allclose(c_out, -sigma / (sigma**2 + 1).sqrt())
    assert torch.allclose(c_in, 1 / (sigma**2 + 1).sqrt())
    assert torch.allclose(c_noise, sigma.log() / 4)
    assert torch.allclose(loss_weight(sigma), (sigma**2 + 1) / sigma**2)
    sched = EDMConfig().scheduler()
    x, F = torch.randn(5, 3, dtype=torch.float64), torch.rand(5, 3, dtype=torch.float64) * 2 - 1
    for i, s in enumerate(sigma):
        assert torch.allclose(sched.precondition_outputs(x[i], F[i], s), c_skip[i] * x[i] + c_out[i] * F[i])
        assert torch.allclose(sched.precondition_inputs(x[i], s), c_in[i] * x[i])
    s = torch.tensor(1e-4, dtype=torch.float64)  # σ → 0: D(x) → x for any bounded F
    cs, co, _, _ = precondition(s)
    assert (cs * x + co * F - x).abs().max() < 1e-4


class _Stub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))
        self.calls = []

    def forward(self, x_in, c_noise, pseudo, ref, keep_p=None, keep_r=None):
        self.calls.append((keep_p, keep_r))
        kp = 1.0 if keep_p is None else keep_p.view(-1, 1, 1, 1, 1)
        return x_in * 0 + self.w + 0.3 * kp * pseudo


def test_condition_dropout_rates_and_independence():
    stub = _Stub()
    B = 10_000
    x = torch.zeros(B, 1, 3, 1, 1)
    edm_loss(stub, x, x, torch.zeros(B, 3, 1, 1), EDMConfig(), torch.Generator().manual_seed(0))
    kp, kr = stub.calls[0]
    dp, dr = 1 - kp.mean().item(), 1 - kr.mean().item()
    band = 3 * np.sqrt(0.2 * 0.8 / B)
    assert abs(dp - 0.2) < band and abs(dr - 0.2) < band
    both = ((kp == 0) & (kr == 0)).float().mean().item()
    assert abs(both - 0.04) < 3 * np.sqrt(0.04 * 0.96 / B)  # independent: P(both dropped) = 0.2 · 0.2


def test_cfg_guidance_one_is_conditional_and_uncond_zeroes_both():
    stub = _Stub()
    p = torch.rand(2, 1, 3, 4, 4) * 2 - 1
    ref = torch.zeros(2, 3, 4, 4)
    cfg = EDMConfig()
    a = sample(stub, p, ref, cfg, steps=4, guidance=1.0, generator=torch.Generator().manual_seed(1))
    assert all(c[0] is not None and bool((c[0] == 1).all()) for c in stub.calls)
    stub.calls.clear()
    b = sample(stub, p, ref, cfg, steps=4, guidance=2.0, generator=torch.Generator().manual_seed(1))
    kp, kr = stub.calls[0]
    assert kp.tolist() == [1, 1, 0, 0] and kr.tolist() == [1, 1, 0, 0]
    # a guided sample moves further along the conditional direction than g = 1
    assert not torch.allclose(a, b)


def test_model_learns_and_sampling_is_deterministic(drive):
    scene, imgs, log = drive
    torch.manual_seed(0)
    model = FreeVSTiny((8, 16), cond_channels=4)
    gt = torch.tensor(imgs[2:4], dtype=torch.float32).permute(0, 3, 1, 2)[None] * 2 - 1
    ps = np.stack([pseudo_image(log, scene, CAM, camera_pose(float(t), 0.0), t)[0] for t in (2, 3)])
    p = torch.tensor(ps, dtype=torch.float32).permute(0, 3, 1, 2)[None] * 2 - 1
    ref = gt[:, 0]
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    g = torch.Generator().manual_seed(0)
    cfg = EDMConfig(drop_prob=0.0)
    losses = []
    for _ in range(40):
        loss = edm_loss(
            model, gt.repeat(4, 1, 1, 1, 1), p.repeat(4, 1, 1, 1, 1), ref.repeat(4, 1, 1, 1), cfg, g
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-8:]) < 0.7 * np.mean(losses[:8])  # a learning signal
    model.eval()
    s1 = sample(model, p, ref, cfg, steps=3, generator=torch.Generator().manual_seed(5))
    s2 = sample(model, p, ref, cfg, steps=3, generator=torch.Generator().manual_seed(5))
    assert torch.equal(s1, s2)


def test_svd_unet_config_builds():
    pytest.importorskip("diffusers")
    unet = svd_unet(block_out_channels=(32, 64), cross_attention_dim=32)
    assert unet.config.in_channels == 8 and unet.config.out_channels == 4


def test_metrics_and_baseline():
    rng = np.random.default_rng(0)
    a = rng.random((8, 10, 3))
    assert psnr(a, a) > 100
    assert psnr(a, np.clip(a + 0.1, 0, 1)) < psnr(a, np.clip(a + 0.01, 0, 1))
    m = np.zeros((8, 10), dtype=bool)
    assert np.isnan(psnr(a, a, m))
    filled = rng.random((8, 10)) > 0.5
    out = fill_holes(a, filled)
    assert (out[filled] == a[filled]).all()
    f = rng.normal(size=(200, 4))
    assert abs(frechet_distance(f, f)) < 1e-6 and frechet_distance(f, f + 1) == pytest.approx(4.0, rel=0.1)
    gts = [np.array([[5.0, 5.0]]), np.array([[1.0, 1.0], [9.0, 9.0]])]
    perfect = [np.array([[5.0, 5.0, 0.9]]), np.array([[1, 1, 0.8], [9, 9, 0.7]])]
    assert average_precision(perfect, gts) == pytest.approx(1.0)
    half = [np.array([[50.0, 50.0, 0.9]]), np.array([[1, 1, 0.8], [9, 9, 0.7]])]
    # a false positive ranked first: precision (0, 1/2, 2/3) → interpolated 2/3 at recall 1/3 and 2/3
    assert average_precision(half, gts) == pytest.approx(4 / 9)


def test_bad_input():
    K = CAM.K
    pose = camera_pose(0.0, 0.0)
    pts = np.array([[5.0, 0.0, 1.0]])
    bad = pose.copy()
    bad[:3, :3] *= 2.0
    with pytest.raises(ValueError, match="rigid"):
        project_points(pts, [[1, 0, 0]], K, bad, 8, 8)
    K0 = K.copy()
    K0[0, 0] = 0.0
    with pytest.raises(ValueError, match="focal"):
        project_points(pts, [[1, 0, 0]], K0, pose, 8, 8)
    with pytest.raises(ValueError, match="empty"):
        project_points(np.zeros((0, 3)), np.zeros((0, 3)), K, pose, 8, 8)
    with pytest.raises(ValueError, match="NaN"):
        project_points(np.array([[np.nan, 0, 0]]), [[1, 0, 0]], K, pose, 8, 8)
    with pytest.raises(ValueError, match="hfov"):
        Camera(8, 8, 0.0)


def test_smoke_experiment(tmp_path):
    from iclr25.freevs import experiment as ex

    res = ex.run(ex.PRESETS["smoke"], tmp_path)
    assert [c.id for c in res.claims] == [
        "shift_sim_helps",
        "beats_hole_filling",
        "recorded_parity",
        "gain_grows_with_shift",
    ]
    for r in res.per_seed.values():
        for m in ("sim", "nosim", "holefill"):
            assert np.isfinite(r[m]["dy2"]["psnr"]) and 0 <= r[m]["dy2"]["ssim"] <= 1
    assert list((tmp_path / "cache").glob("toydrive_*.npz"))
    with pytest.raises(ValueError, match="offsets"):
        ex.Config(offsets=(0.0, 1.0))
