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


def _at(r: float, c: float, depth: float) -> np.ndarray:
    """World point that the camera ``camera_pose(0, 0)`` with ``CAM.K`` sees at the centre of pixel (r, c)."""
    K = CAM.K
    return np.array(
        [depth, -(c + 0.5 - K[0, 2]) * depth / K[0, 0], 1.6 - (r + 0.5 - K[1, 2]) * depth / K[1, 1]]
    )


def _released_projpc(
    objects, background, K, pose, H, W, radius, to_pixel=np.round, dilate_written_only=False
):
    """Naive transcription of the released ``projpc`` occupancy rule (objects nearest-first by the minimum planar
    distance of their points, per-object ``filter_duplicates`` z-buffer, write where the mask is free, then
    zero the mask on the (2r + 1)² square around *every* z-buffer survivor; background last). Its own pinhole
    projection through the full K (homogeneous division), ``to_pixel`` = the released ``.round()``.
    ``dilate_written_only`` transcribes the alternative rule (only the pixels this object wrote)."""
    cam_pos = pose[:3, 3]

    def pixels(pts, cols):  # {(row, col): (dist, colour)}: the nearest point per pixel
        out = {}
        for x, colour in zip(pts, cols):
            xc = pose[:3, :3].T @ (x - cam_pos)
            if xc[2] <= 1e-6:
                continue
            uvw = K @ xc
            u, v = to_pixel(uvw[0] / uvw[2]), to_pixel(uvw[1] / uvw[2])
            if not (0 <= u < W and 0 <= v < H):
                continue
            d = float(np.linalg.norm(x - cam_pos))
            key = (int(v), int(u))
            if key not in out or d < out[key][0]:
                out[key] = (d, colour)
        return out

    img, filled = np.zeros((H, W, 3)), np.zeros((H, W), dtype=bool)
    mask = np.ones((H, W), dtype=bool)  # True = free
    order = sorted(
        range(len(objects)), key=lambda i: min(np.hypot(*(q[:2] - cam_pos[:2])) for q in objects[i][0])
    )
    for i in order:
        surv = pixels(*objects[i])
        written = []
        for (r, c), (_, colour) in surv.items():
            if mask[r, c]:
                img[r, c], filled[r, c] = colour, True
                written.append((r, c))
        for r, c in written if dilate_written_only else list(surv):
            for dr in range(-radius, radius + 1):
                for dc in range(-radius, radius + 1):
                    if 0 <= r + dr < H and 0 <= c + dc < W:
                        mask[r + dr, c + dc] = False
    for (r, c), (_, colour) in pixels(*background).items():
        if mask[r, c]:
            img[r, c], filled[r, c] = colour, True
    return img, filled


def _random_scene(rng, n_obj=4):
    """Objects as overlapping clusters at different depths in front of ``camera_pose(0, 0)``, plus background."""
    objects = []
    for _ in range(n_obj):
        depth = rng.uniform(4, 25)
        centre = _at(rng.uniform(4, 12), rng.uniform(10, 30), depth)
        pts = centre + rng.normal(size=(rng.integers(5, 40), 3)) * [0.3, 0.15 * depth / 4, 0.1 * depth / 4]
        objects.append((pts, rng.uniform(0.1, 1, size=(len(pts), 3))))
    bg = np.stack([_at(r, c, rng.uniform(25, 40)) for r, c in rng.uniform([0, 0], [16, 40], size=(300, 2))])
    return objects, (bg, rng.uniform(0.1, 1, size=(len(bg), 3)))


@pytest.mark.parametrize("radius", [0, 1, 2])
@pytest.mark.parametrize("rounding", ["round", "floor"])
def test_occupancy_rule_matches_released_transcription(radius, rounding):
    pose = camera_pose(0.0, 0.0)
    K = CAM.K.copy()
    if rounding == "round":
        K[0, 1] = 3.0  # a skew: supported exactly (u = (fx·x + s·y)/z + cx), as the full-K transcription
    to_pixel = np.round if rounding == "round" else np.floor
    n_differ = 0
    for seed in range(6):
        objects, (bg, bgc) = _random_scene(np.random.default_rng(seed))
        args = (bg, bgc, K, pose, CAM.height, CAM.width, objects, radius)
        img, filled = project_points(*args, rounding=rounding)  # default occupancy = the released rule
        ref_img, ref_filled = _released_projpc(
            objects, (bg, bgc), K, pose, CAM.height, CAM.width, radius, to_pixel
        )
        assert (filled == ref_filled).all() and (img == ref_img).all()
        w_img, w_filled = project_points(*args, occupancy="written", rounding=rounding)
        ref_w = _released_projpc(objects, (bg, bgc), K, pose, CAM.height, CAM.width, radius, to_pixel, True)
        assert (w_filled == ref_w[1]).all() and (w_img == ref_w[0]).all()
        n_differ += int((w_filled != filled).any())
    if radius == 0:
        assert n_differ == 0  # r = 0: the two rules coincide exactly
    else:
        assert n_differ > 0  # the scenes are built so that the rules do differ


def test_occupancy_dilates_pixels_hidden_behind_a_nearer_object():
    """Regression (issue #33): the released rule also dilates an object's pixels a nearer object holds."""
    pose, K = camera_pose(0.0, 0.0), CAM.K
    near = (np.array([_at(8, 10, 5.0)]), [[1.0, 0, 0]])  # occupies rows 7–9, cols 9–11 (r = 1)
    far = (np.array([_at(8, 11, 10.0), _at(8, 14, 10.0)]), [[0, 1.0, 0], [0, 1.0, 0]])  # (8, 11) is hidden
    bg = np.array([_at(8, 12, 30.0)])  # next to the hidden pixel (8, 11), two columns from the drawn (8, 14)
    kw = dict(objects=[far, near], occupancy_radius=1)
    img, filled = project_points(bg, [[0, 0, 1.0]], K, pose, CAM.height, CAM.width, **kw)
    assert filled.sum() == 2 and filled[8, 10] and filled[8, 14] and not filled[8, 12]
    assert (img[8, 10] == [1, 0, 0]).all() and (img[8, 14] == [0, 1, 0]).all()
    img_w, filled_w = project_points(
        bg, [[0, 0, 1.0]], K, pose, CAM.height, CAM.width, occupancy="written", **kw
    )
    assert filled_w.sum() == 3 and (img_w[8, 12] == [0, 0, 1]).all()


def test_half_pixel_convention():
    pose, K = camera_pose(0.0, 0.0), CAM.K
    # floor (default): pixel (r, c) is [c, c + 1) × [r, r + 1); a point on the ray through its centre lands on it
    rc = np.array([[r, c] for r in range(CAM.height) for c in range(CAM.width)])
    pts = np.stack([_at(r, c, 7.0) for r, c in rc])
    row, col, _, inside = project(pts, K, pose, CAM.height, CAM.width)
    assert inside.all() and (row == rc[:, 0]).all() and (col == rc[:, 1]).all()
    # "round" (released): centres at integer coordinates = floor with the principal point shifted by +½
    rng = np.random.default_rng(3)
    pts = np.stack([_at(r, c, rng.uniform(3, 30)) for r, c in rng.uniform([-2, -2], [18, 42], size=(500, 2))])
    r1, c1, d1, i1 = project(pts, K, pose, CAM.height, CAM.width, rounding="round")
    K2 = K.copy()
    K2[:2, 2] += 0.5
    r2, c2, d2, i2 = project(pts, K2, pose, CAM.height, CAM.width)
    assert (i1 == i2).all() and (r1[i1] == r2[i1]).all() and (c1[i1] == c2[i1]).all() and (d1 == d2).all()
    assert i1.sum() > 300


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


def test_bad_point_arrays_and_intrinsics_name_the_parameter():
    K, pose = CAM.K, camera_pose(0.0, 0.0)
    pts, col = np.array([[5.0, 0.0, 1.0]]), [[1.0, 0, 0]]
    obj = np.array([[6.0, 0.0, 1.0], [6.0, 0.1, 1.0]])
    render = lambda *a, **kw: project_points(*a, CAM.height, CAM.width, **kw)  # noqa: E731
    xyzi = np.concatenate([obj, np.ones((2, 1))], 1)  # (N, 4) xyz + intensity: was an obscure reshape error
    with pytest.raises(
        ValueError, match=r"objects\[0\] points must have shape \(N, 3\).*\(2, 4\).*intensity"
    ):
        render(pts, col, K, pose, objects=[(xyzi, np.ones((2, 3)))])
    with pytest.raises(ValueError, match=r"objects\[1\] colours must have shape \(2, 3\).*\(3, 3\)"):
        render(pts, col, K, pose, objects=[(obj, np.ones((2, 3))), (obj, np.ones((3, 3)))])
    with pytest.raises(ValueError, match=r"objects\[0\] colours contain NaN"):
        render(pts, col, K, pose, objects=[(obj, np.full((2, 3), np.nan))])
    with pytest.raises(ValueError, match=r"objects\[0\] must be a \(points"):
        render(pts, col, K, pose, objects=[obj])
    with pytest.raises(ValueError, match=r"^points must have shape \(N, 3\).*\(1, 4\)"):
        render(np.array([[5.0, 0.0, 1.0, 0.3]]), col, K, pose)
    with pytest.raises(ValueError, match=r"^colours must have shape \(1, 3\).*\(2, 3\)"):
        render(pts, [[1.0, 0, 0], [0, 1.0, 0]], K, pose)
    Ks = K.copy()
    Ks[0, 1] = 50.0  # a skew is supported exactly: u = (fx·x + s·y)/z + cx
    x, y, z = -obj[:, 1], 1.6 - obj[:, 2], obj[:, 0]  # camera coordinates of camera_pose(0, 0)
    r1, c1, _, _ = project(obj, Ks, pose, CAM.height, CAM.width)
    assert (c1 == np.floor((K[0, 0] * x + 50.0 * y) / z + K[0, 2])).all()
    assert (r1 == np.floor(K[1, 1] * y / z + K[1, 2])).all() and (c1 >= np.floor(K[0, 2]) + 4).all()
    for entry, value, msg in (((2, 2), 2.0, r"K\[2, 2\] must be 1"), ((1, 0), 0.7, "upper triangular")):
        Kb = K.copy()
        Kb[entry] = value
        with pytest.raises(ValueError, match=msg):
            render(pts, col, Kb, pose)
    Kn = K.copy()
    Kn[0, 2] = np.nan
    with pytest.raises(ValueError, match="finite 3x3"):
        render(pts, col, Kn, pose)
    with pytest.raises(ValueError, match="occupancy must be one of"):
        render(pts, col, K, pose, occupancy="square")
    with pytest.raises(ValueError, match="rounding must be one of"):
        render(pts, col, K, pose, rounding="ceil")
    with pytest.raises(ValueError, match="occupancy_radius must be an int"):
        render(pts, col, K, pose, occupancy_radius=1.5)
    from iclr25.freevs.experiment import Config

    with pytest.raises(ValueError, match="occupancy must be one of"):
        Config(occupancy="square")


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
    assert all(set(r["curve"]) == {"sim", "nosim"} for r in res.per_seed.values())  # training curve logged
    assert (tmp_path / "figures" / "freevs_training.png").exists()
    # one_seed(cfg, seed) without the run's cached data builds the same ToyDrive and gives the run's numbers
    alone = ex.one_seed(ex.PRESETS["smoke"], 0)
    for m in ("sim", "nosim", "holefill", "pseudo_only"):
        np.testing.assert_equal(alone[m]["dy2"], res.per_seed[0][m]["dy2"])
    with pytest.raises(ValueError, match="offsets"):
        ex.Config(offsets=(0.0, 1.0))


def test_training_curve_is_monitoring_only_and_evenly_spaced(tmp_path):
    """The held-out curve does not change training (same final weights with and without it), lands on evenly
    spaced steps ending at the last one, and records a finite loss and PSNR per point."""
    from dataclasses import replace

    from iclr25.freevs import experiment as ex
    from iclr25.freevs import report, training
    from iclr25.freevs.data import load_data

    cfg = replace(ex.PRESETS["smoke"], train_steps=6, curve_points=3)
    assert training.curve_steps(cfg) == [2, 4, 6]
    data = load_data(cfg, tmp_path)
    dev = torch.device("cpu")
    m1, s1 = training.train_variant(cfg, data, 0.5, 0, dev)
    m0, s0 = training.train_variant(replace(cfg, curve_points=0), data, 0.5, 0, dev)
    for a, b in zip(m1.state_dict().values(), m0.state_dict().values()):
        assert torch.equal(a, b)
    assert s1["loss_last"] == s0["loss_last"] and "curve" not in s0
    c = s1["curve"]
    assert c["step"] == [2.0, 4.0, 6.0]
    assert all(np.isfinite(c[k]).all() and len(c[k]) == 3 for k in ("loss", "psnr_dy0", "psnr_dy2"))
    text = report.convergence_text(
        {0: {"curve": {"sim": c, "nosim": c}}, 1: {"curve": {"sim": c, "nosim": c}}}
    )
    assert "converged" in text and "| 6 |" in text
    with pytest.raises(ValueError, match="curve_points"):
        ex.Config(curve_points=-1)


def test_full_preset_asks_for_cuda_and_prints_without_it(capsys):
    from iclr25.freevs import experiment as ex
    from iclr25.harness.cli import main

    assert ex.PRESETS["full"].device == "cuda"
    main(["config", "freevs", "--preset", "full"])
    assert "cuda" in capsys.readouterr().out


class _Stop(Exception):
    pass


def test_dotted_edm_overrides_reach_training(monkeypatch):
    """``--set edm.drop_prob=… edm.p_mean=…`` reach the EDMConfig the training loss receives; a bad value names the
    nested field."""
    from iclr25.freevs import training
    from iclr25.freevs.data import build_data
    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.harness.runs import UsageError

    mod = experiment_module("freevs")
    cfg = effective_config(mod, "smoke", overrides=["edm.drop_prob=0.1", "edm.p_mean=-1.0"])[0]
    seen = []

    def fake_loss(model, x0, p, ref, edm, g):
        seen.append(edm)
        raise _Stop

    monkeypatch.setattr(training, "edm_loss", fake_loss)
    with pytest.raises(_Stop):
        training.train_variant(cfg, build_data(cfg), 0.5, 0, torch.device("cpu"))
    assert seen[0].drop_prob == 0.1 and seen[0].p_mean == -1.0 and seen[0].sigma_max == 80.0
    with pytest.raises(UsageError, match=r"edm: drop_prob must be a number in \[0, 1\) \(finite\), got 1.0"):
        effective_config(mod, "quick", overrides=["edm.drop_prob=1.0"])
    with pytest.raises(UsageError, match=r"edm: sigma_min must be < sigma_max"):
        effective_config(mod, "quick", overrides=["edm.sigma_min=100"])
    with pytest.raises(UsageError, match=r"did you mean edm\.drop_prob\?"):
        effective_config(mod, "quick", overrides=["drop_prob=0.1"])
