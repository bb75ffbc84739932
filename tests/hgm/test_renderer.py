"""Renderer, cameras, activations and sampling: parity with gsplat, closed forms, invariants, gradients, errors."""

import math

import pytest
import torch
import torch.nn.functional as F

from iclr25.hgm import (
    Camera,
    activate_gaussians,
    chamfer_distance,
    orbit_cameras,
    pixel_rays,
    plucker_rays,
    project_gaussians,
    project_points,
    psnr,
    quat_scale_to_covar,
    render_gaussians,
    sample_image_features,
    sample_volume,
    ssim,
    unproject_pixels,
)

torch.set_num_threads(1)


def _random_scene(n, seed=0, dtype=torch.float32, spread=0.6):
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g, dtype=dtype) * 2 - 1) * spread
    quats = torch.randn(n, 4, generator=g, dtype=dtype)
    scales = torch.rand(n, 3, generator=g, dtype=dtype) * 0.06 + 0.01
    opac = torch.rand(n, generator=g, dtype=dtype) * 0.9 + 0.05
    cols = torch.rand(n, 3, generator=g, dtype=dtype)
    return means, quats, scales, opac, cols


def test_projection_matches_gsplat_torch_reference():
    _torch_impl = pytest.importorskip("gsplat.cuda._torch_impl")
    means, quats, scales, _, _ = _random_scene(1000, seed=1, dtype=torch.float64, spread=1.5)
    cam = orbit_cameras(5, 40, 30, radius=2.0, fovy_deg=60.0, elevation_deg=15.0, dtype=torch.float64)
    covars_ref, _ = _torch_impl._quat_scale_to_covar_preci(quats, scales, compute_preci=False)
    covars = quat_scale_to_covar(quats, scales)
    torch.testing.assert_close(covars, covars_ref, rtol=1e-10, atol=1e-12)
    radii_ref, m2d_ref, depths_ref, conics_ref, _ = _torch_impl._fully_fused_projection(
        means, covars_ref, cam.viewmats, cam.Ks, 40, 30, eps2d=0.3
    )
    radii, m2d, depths, conics = project_gaussians(
        means[None], covars[None], cam.viewmats[None], cam.Ks[None], 40, 30
    )
    assert torch.equal(radii[0], radii_ref)
    assert (radii > 0).any() and (radii == 0).any()  # both visible and culled Gaussians exercised
    torch.testing.assert_close(m2d[0], m2d_ref, rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(depths[0], depths_ref, rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(conics[0], conics_ref, rtol=1e-5, atol=1e-8)


def test_single_isotropic_gaussian_closed_form():
    cam = orbit_cameras(1, 32, 32, radius=1.5, fovy_deg=49.1, dtype=torch.float64)
    s, o = 0.05, 0.8
    out = render_gaussians(
        torch.zeros(1, 3, dtype=torch.float64),
        torch.tensor([[1.0, 0, 0, 0]], dtype=torch.float64),
        torch.full((1, 3), s, dtype=torch.float64),
        torch.tensor([o], dtype=torch.float64),
        torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64),
        cam,
    )
    f = cam.Ks[0, 0, 0].item()
    var = (f * s / 1.5) ** 2 + 0.3
    v, u = torch.meshgrid(
        torch.arange(32.0, dtype=torch.float64) + 0.5,
        torch.arange(32.0, dtype=torch.float64) + 0.5,
        indexing="ij",
    )
    d2 = (u - 16) ** 2 + (v - 16) ** 2
    expected = o * torch.exp(-0.5 * d2 / var)
    expected = torch.where(expected >= 1 / 255, expected, torch.zeros_like(expected))
    torch.testing.assert_close(out.alpha[0, ..., 0], expected, rtol=0, atol=1e-4)
    # Colour: red over white background, white exactly where α = 0.
    torch.testing.assert_close(out.image[0, ..., 1], 1 - expected, rtol=0, atol=1e-4)
    assert torch.all(out.image[0][expected == 0] == 1.0)


@pytest.mark.parametrize("backend", ["tile", "dense"])
def test_compositing_order_red_in_front_of_green(backend):
    cam = orbit_cameras(1, 24, 24, dtype=torch.float64)
    q = torch.tensor([[1.0, 0, 0, 0]], dtype=torch.float64)

    def one(z, x, colour, op):
        return (
            torch.tensor([[x, 0.0, z]], dtype=torch.float64), q, torch.full((1, 3), 0.12, dtype=torch.float64),
            torch.tensor([op], dtype=torch.float64), torch.tensor([colour], dtype=torch.float64),
        )  # fmt: skip

    red, green = (
        one(0.3, 0.05, [1.0, 0, 0], 0.7),
        one(-0.2, -0.05, [0, 1.0, 0], 0.9),
    )  # camera at +z: red is nearer
    a_r = render_gaussians(*red, cam, backend=backend).alpha[0]
    a_g = render_gaussians(*green, cam, backend=backend).alpha[0]
    both = [torch.cat([r, g]) for r, g in zip(red, green)]
    img = render_gaussians(*both, cam, backend=backend).image[0]
    red_c, green_c = (
        torch.tensor([1.0, 0, 0], dtype=torch.float64),
        torch.tensor([0, 1.0, 0], dtype=torch.float64),
    )
    expected = a_r * red_c + (1 - a_r) * (a_g * green_c + (1 - a_g) * 1.0)
    torch.testing.assert_close(img, expected, rtol=0, atol=1e-5)
    swapped = [torch.cat([g, r]) for r, g in zip(red, green)]
    torch.testing.assert_close(
        render_gaussians(*swapped, cam, backend=backend).image[0], img, rtol=0, atol=1e-12
    )


def test_permutation_invariance_and_tile_equals_dense():
    scene = _random_scene(150, seed=3)
    cam = orbit_cameras(3, 30, 22)  # sizes not multiples of the tile size
    perm = torch.randperm(150, generator=torch.Generator().manual_seed(0))
    a = render_gaussians(*scene, cam, tile_size=8)
    b = render_gaussians(*(t[perm] for t in scene), cam, tile_size=8)
    d = render_gaussians(*scene, cam, backend="dense")
    assert a.alpha.max() > 0.5
    torch.testing.assert_close(a.image, b.image, rtol=0, atol=1e-5)
    torch.testing.assert_close(a.image, d.image, rtol=0, atol=1e-5)
    torch.testing.assert_close(a.alpha, d.alpha, rtol=0, atol=1e-5)
    torch.testing.assert_close(a.depth, d.depth, rtol=0, atol=1e-5)


def test_batched_cameras_match_per_item_renders():
    s1, s2 = _random_scene(60, seed=4), _random_scene(60, seed=5)
    c1, c2 = orbit_cameras(2, 16, 16), orbit_cameras(2, 16, 16, elevation_deg=20.0)
    cam = Camera(torch.stack([c1.viewmats, c2.viewmats]), torch.stack([c1.Ks, c2.Ks]), 16, 16)
    batched = render_gaussians(*(torch.stack([a, b]) for a, b in zip(s1, s2)), cam)
    torch.testing.assert_close(batched.image[0], render_gaussians(*s1, c1).image, rtol=0, atol=1e-6)
    torch.testing.assert_close(batched.image[1], render_gaussians(*s2, c2).image, rtol=0, atol=1e-6)


def test_unnormalised_quaternions_are_normalised():
    m, q, s, o, c = _random_scene(40, seed=6)
    cam = orbit_cameras(1, 16, 16)
    torch.testing.assert_close(
        render_gaussians(m, 3.7 * q, s, o, c, cam).image, render_gaussians(m, q, s, o, c, cam).image
    )


@pytest.mark.parametrize("backend", ["tile", "dense"])
def test_gradients_reach_every_parameter_and_match_finite_differences(backend):
    m, q, s, o, c = _random_scene(4, seed=7, dtype=torch.float64, spread=0.2)
    s = s + 0.05
    cam = orbit_cameras(2, 8, 8, dtype=torch.float64)
    params = [t.clone().requires_grad_(True) for t in (m, q, s, o, c)]
    out = render_gaussians(*params, cam, backend=backend)
    (out.image.square().sum() + out.alpha.sum()).backward()
    for name, p in zip("means quats scales opacities colours".split(), params):
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    # Autograd agrees with central differences (the sort/culling is piecewise constant, smooth elsewhere).
    fn = lambda mm, ss, oo: render_gaussians(mm, q, ss, oo, c, cam[[0]], backend=backend).image  # noqa: E731
    assert torch.autograd.gradcheck(
        fn, tuple(t.clone().requires_grad_(True) for t in (m, s, o)), eps=1e-6, atol=1e-4
    )


def test_activations_map_any_output_to_valid_gaussians():
    raw = torch.randn(2, 500, 14, generator=torch.Generator().manual_seed(0)) * 50
    g = activate_gaussians(raw)
    assert g.means.abs().max() <= 1.0
    assert (g.scales > 0).all() and (g.colours >= 0).all() and (g.colours <= 1).all()
    assert (g.opacities >= 0).all() and (g.opacities <= 1).all()
    torch.testing.assert_close(g.quats.norm(dim=-1), torch.ones(2, 500), rtol=0, atol=1e-6)
    moderate = activate_gaussians(torch.randn(1, 100, 14))
    assert ((moderate.opacities > 0) & (moderate.opacities < 1)).all()
    with pytest.raises(ValueError, match="14 channels"):
        activate_gaussians(torch.zeros(3, 13))


def test_plucker_rays_and_camera_round_trip():
    cam = orbit_cameras(4, 12, 10, elevation_deg=10.0, dtype=torch.float64)
    o, d = pixel_rays(cam)
    torch.testing.assert_close(d.norm(dim=-1), torch.ones_like(d[..., 0]), rtol=0, atol=1e-12)
    pl = plucker_rays(cam)  # (C, 6, H, W)
    assert pl.shape == (4, 6, 10, 12)
    moment = pl[:, :3].movedim(1, -1)
    for t in (0.3, 1.7):  # any point on the ray has the same moment p × d
        p = o + t * d
        torch.testing.assert_close(torch.cross(p, d, dim=-1), moment, rtol=0, atol=1e-12)
    # Pixel centres project back onto themselves; unproject ∘ project = id.
    uv = torch.rand(4, 20, 2, dtype=torch.float64) * torch.tensor([12.0, 10.0], dtype=torch.float64)
    depth = torch.rand(4, 20, dtype=torch.float64) + 0.5
    world = unproject_pixels(uv, depth, cam)  # (C, N, 3)
    for k in range(4):
        uv2, z2 = project_points(world[k], cam[[k]])
        torch.testing.assert_close(uv2[0], uv[k], rtol=0, atol=1e-9)
        torch.testing.assert_close(z2[0], depth[k], rtol=0, atol=1e-9)
    # The ray through the image centre of an orbit camera hits the origin.
    world_c = unproject_pixels(
        torch.tensor([[[6.0, 5.0]]], dtype=torch.float64).expand(4, 1, 2),
        torch.full((4, 1), 1.5, dtype=torch.float64),
        cam,
    )
    torch.testing.assert_close(world_c, torch.zeros_like(world_c), rtol=0, atol=1e-9)


def _naive_bilinear(feat, x, y):
    """Textbook bilinear interpolation at continuous array coordinates (x along W, y along H), zeros outside."""
    C, H, W = feat.shape
    x0, y0 = math.floor(x), math.floor(y)
    out = torch.zeros(C, dtype=feat.dtype)
    for dx in (0, 1):
        for dy in (0, 1):
            xi, yi = x0 + dx, y0 + dy
            w = (1 - abs(x - xi)) * (1 - abs(y - yi))
            if 0 <= xi < W and 0 <= yi < H:
                out += w * feat[:, yi, xi]
    return out


def test_feature_sampling_matches_grid_sample_and_naive_bilinear():
    g = torch.Generator().manual_seed(0)
    feat = torch.randn(2, 5, 8, 8, generator=g, dtype=torch.float64)
    uv = torch.rand(2, 30, 2, generator=g, dtype=torch.float64) * 32  # image 32×32, features 8×8
    got = sample_image_features(feat, uv, 32, 32)
    # Same normalised coordinates through grid_sample, and a naive bilinear reference in feature-array coordinates.
    grid = (uv / 32 * 2 - 1).unsqueeze(1)
    ref = F.grid_sample(feat, grid, align_corners=False)[:, :, 0].transpose(1, 2)
    torch.testing.assert_close(got, ref)
    for b in range(2):
        for n in range(0, 30, 7):
            x, y = (uv[b, n] / 4 - 0.5).tolist()  # image pixel → feature-array coordinate
            torch.testing.assert_close(got[b, n], _naive_bilinear(feat[b], x, y))


def test_trilinear_volume_sampling_is_exact_on_linear_fields():
    D = 9
    lin = torch.linspace(-1, 1, D, dtype=torch.float64)
    z, y, x = torch.meshgrid(lin, lin, lin, indexing="ij")
    vol = torch.stack([2 * x - y + 0.5 * z + 1, x + y + z]).unsqueeze(0)  # (1, 2, D, H, W)
    pts = torch.rand(1, 100, 3, dtype=torch.float64) * 2 - 1
    got = sample_volume(vol, pts)
    px, py, pz = pts[0].unbind(-1)
    torch.testing.assert_close(
        got[0], torch.stack([2 * px - py + 0.5 * pz + 1, px + py + pz], -1), rtol=0, atol=1e-12
    )


def test_metrics():
    a = torch.rand(2, 8, 8, 3)
    torch.testing.assert_close(psnr(a, (a + 0.1)), torch.full((2,), 20.0), rtol=0, atol=1e-3)
    assert torch.allclose(ssim(a, a), torch.ones(2), atol=1e-5)
    pts = torch.cartesian_prod(*(torch.arange(4.0),) * 3).unsqueeze(0) * 0.5  # spacing 0.5
    assert chamfer_distance(pts, pts).item() == pytest.approx(0.0, abs=1e-6)
    assert chamfer_distance(pts, pts + torch.tensor([0.1, 0, 0])).item() == pytest.approx(0.1, abs=1e-5)


def test_bad_inputs_raise_clear_errors():
    m, q, s, o, c = _random_scene(5)
    cam = orbit_cameras(1, 8, 8)
    with pytest.raises(ValueError, match="scales"):
        render_gaussians(m, q, -s, o, c, cam)
    with pytest.raises(ValueError, match="empty"):
        render_gaussians(m[:0], q[:0], s[:0], o[:0], c[:0], cam)
    bad = m.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="means"):
        render_gaussians(bad, q, s, o, c, cam)
    with pytest.raises(ValueError, match="opacities"):
        render_gaussians(m, q, s, o + 2, c, cam)
    with pytest.raises(ValueError, match="quats"):
        render_gaussians(m, torch.zeros_like(q), s, o, c, cam)
    with pytest.raises(ValueError, match="quats"):
        render_gaussians(m, q[:, :3], s, o, c, cam)
    with pytest.raises(ValueError, match="backend"):
        render_gaussians(m, q, s, o, c, cam, backend="cuda")
    with pytest.raises(ValueError, match="camera"):
        render_gaussians(m, q, s, o, c, cam.viewmats)
    with pytest.raises(ValueError, match="Ks"):
        Camera(cam.viewmats, torch.eye(3), 8, 8)
    with pytest.raises(ValueError, match="width"):
        Camera(cam.viewmats, cam.Ks, 0, 8)


# --- early ray termination: a per-pixel transcription of the released forward rules -------------------------


def _reference_rasterise(means2d, conics, depths, radii, opac, cols, W, H, bg, alpha_cap, terminate):
    """Per-pixel loop of the 3DGS forward rule (diff-gaussian-rasterization ``renderCUDA``; gsplat's
    ``rasterize_to_pixels`` has the same loop with cap 0.999 and ``next_T <= 1e-4``): Gaussians front to back;
    power = −½ dᵀ Σ'⁻¹ d, skipped if > 0; α = min(cap, o·e^power), skipped if α < 1/255; test_T = T·(1 − α);
    if test_T < 1e-4 the pixel is done *before* this Gaussian is added; else C += c·α·T, T = test_T."""
    order = sorted((i for i in range(len(depths)) if radii[i].min() > 0), key=lambda i: float(depths[i]))
    img = torch.zeros(H, W, cols.shape[-1], dtype=cols.dtype)
    acc = torch.zeros(H, W, dtype=cols.dtype)
    dep = torch.zeros(H, W, dtype=cols.dtype)
    n_done = 0
    for y in range(H):
        for x in range(W):
            px, py = x + 0.5, y + 0.5  # gsplat's pixel centres (the projection follows gsplat)
            T, C, D = 1.0, torch.zeros(cols.shape[-1], dtype=cols.dtype), 0.0
            for i in order:
                dx, dy = px - float(means2d[i, 0]), py - float(means2d[i, 1])
                a, b, c = (float(v) for v in conics[i])
                power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
                if power > 0.0:
                    continue
                alpha = min(alpha_cap, float(opac[i]) * math.exp(power))
                if alpha < 1.0 / 255.0:
                    continue
                test_T = T * (1.0 - alpha)
                if terminate and test_T < 1e-4:
                    n_done += 1
                    break
                C = C + cols[i] * alpha * T
                D += float(depths[i]) * alpha * T
                T = test_T
            img[y, x] = C + T * bg
            acc[y, x] = 1.0 - T
            dep[y, x] = D
    return img, acc, dep, n_done


def _opaque_scene(n=80, seed=11):
    """Many large, nearly opaque Gaussians stacked in depth, so that most pixels saturate."""
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g, dtype=torch.float64) * 2 - 1) * torch.tensor([0.6, 0.5, 0.5])
    quats = torch.randn(n, 4, generator=g, dtype=torch.float64)
    scales = torch.rand(n, 3, generator=g, dtype=torch.float64) * 0.15 + 0.15
    opac = torch.rand(n, generator=g, dtype=torch.float64) * 0.25 + 0.75
    cols = torch.rand(n, 3, generator=g, dtype=torch.float64)
    return means, quats, scales, opac, cols


@pytest.mark.parametrize("alpha_max", [0.99, 0.999])  # 3DGS's cap (the default) and gsplat's
@pytest.mark.parametrize("early_termination", [True, False])
def test_renderer_matches_per_pixel_reference_of_the_released_rule(alpha_max, early_termination):
    scene = _opaque_scene()
    cam = orbit_cameras(1, 12, 10, radius=1.5, dtype=torch.float64)
    H, W = 10, 12
    covars = quat_scale_to_covar(scene[1], scene[2])
    radii, m2d, depths, conics = project_gaussians(
        scene[0][None], covars[None], cam.viewmats[None], cam.Ks[None], W, H
    )
    ref_img, ref_acc, ref_dep, n_done = _reference_rasterise(
        m2d[0, 0],
        conics[0, 0],
        depths[0, 0],
        radii[0, 0],
        scene[3],
        scene[4],
        W,
        H,
        1.0,
        alpha_max,
        early_termination,
    )
    if early_termination:
        assert n_done >= H * W // 2  # the stopping rule is exercised on most pixels
    for backend in ("tile", "dense"):
        out = render_gaussians(
            *scene,
            cam,
            backend=backend,
            tile_size=4,
            alpha_max=alpha_max,
            early_termination=early_termination,
        )
        torch.testing.assert_close(out.image[0], ref_img, rtol=0, atol=1e-12)
        torch.testing.assert_close(out.alpha[0, ..., 0], ref_acc, rtol=0, atol=1e-12)
        torch.testing.assert_close(out.depth[0, ..., 0], ref_dep, rtol=0, atol=1e-12)


def test_early_termination_default_and_size_of_the_change():
    scene = _opaque_scene()
    cam = orbit_cameras(2, 12, 10, dtype=torch.float64)
    default = render_gaussians(*scene, cam)
    on = render_gaussians(*scene, cam, early_termination=True)
    off = render_gaussians(*scene, cam, early_termination=False)
    assert torch.equal(default.image, on.image)  # the reference rasteriser's rule is the default
    diff = (on.image - off.image).abs().max().item()
    # The pixel stops with T ≥ 1e-4 left and T·(1 − α) < 1e-4, so T < 1e-4 / (1 − α_max) bounds the change.
    assert 1e-4 < diff < 1e-4 / (1 - 0.99)
    assert (on.alpha - off.alpha).abs().max().item() < 1e-4 / (1 - 0.99)
    assert (on.alpha <= off.alpha + 1e-15).all()  # stopping early can only leave more transmittance


def test_early_termination_gradients_match_finite_differences():
    # Four nearly opaque Gaussians stacked along the view axis: the centre pixels stop before the third or fourth.
    f64 = dict(dtype=torch.float64)
    m = torch.tensor([[0.02, 0.01, 0.3], [-0.03, 0.0, 0.1], [0.0, -0.02, -0.1], [0.01, 0.03, -0.3]], **f64)
    q = torch.randn(4, 4, generator=torch.Generator().manual_seed(1), **f64)
    s = torch.tensor([[0.5, 0.6, 0.4], [0.6, 0.4, 0.5], [0.4, 0.5, 0.6], [0.6, 0.6, 0.6]], **f64)
    o = torch.tensor([0.985, 0.98, 0.985, 0.975], **f64)
    c = torch.rand(4, 3, generator=torch.Generator().manual_seed(2), **f64)
    cam = orbit_cameras(1, 8, 8, **f64)
    on = render_gaussians(m, q, s, o, c, cam)
    off = render_gaussians(m, q, s, o, c, cam, early_termination=False)
    assert (on.image - off.image).abs().max() > 1e-5  # termination is active in this scene
    # Autograd of the terminated composite agrees with central differences (the stop is piecewise constant).
    fn = lambda mm, ss, oo, cc: render_gaussians(mm, q, ss, oo, cc, cam).image  # noqa: E731
    assert torch.autograd.gradcheck(
        fn, tuple(t.clone().requires_grad_(True) for t in (m, s, o, c)), eps=1e-6, atol=1e-4
    )


@pytest.mark.parametrize("backend", ["tile", "dense"])
def test_gaussians_on_the_camera_plane_have_finite_gradients(backend):
    cam = orbit_cameras(1, 12, 10, dtype=torch.float64)
    R, t = cam.viewmats[0, :3, :3], cam.viewmats[0, :3, 3]
    # camera-frame z: exactly on the camera plane, between it and the near plane, behind, and in view.
    pc = torch.tensor(
        [[0.3, 0.1, 0.0], [0.0, 0.0, 0.005], [0.1, 0.0, -0.5], [0.0, 0.0, 1.5]], dtype=torch.float64
    )
    means = (pc - t) @ R
    q = torch.tensor([[1.0, 0, 0, 0]] * 4, dtype=torch.float64)
    s = torch.full((4, 3), 0.1, dtype=torch.float64)
    o = torch.full((4,), 0.8, dtype=torch.float64)
    c = torch.rand(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    params = [p.clone().requires_grad_(True) for p in (means, q, s, o, c)]
    out = render_gaussians(*params, cam, backend=backend)
    (out.image.sum() + out.alpha.sum() + out.depth.sum()).backward()
    for name, p in zip("means quats scales opacities colours".split(), params):
        assert torch.isfinite(p.grad).all(), name
        assert (p.grad[:3] == 0).all(), name  # culled Gaussians get no gradient
    assert (out.radii[0, :3] == 0).all() and (out.radii[0, 3] > 0).all()
    alone = render_gaussians(*(p[3:] for p in (means, q, s, o, c)), cam, backend=backend)
    torch.testing.assert_close(out.image, alone.image, rtol=0, atol=1e-12)


def test_gsplat_backend_errors():
    m, q, s, o, c = _random_scene(5)
    cam = orbit_cameras(1, 8, 8)
    with pytest.raises(ValueError, match="needs CUDA"):
        render_gaussians(m, q, s, o, c, cam, backend="gsplat", alpha_max=0.999)
    with pytest.raises(ValueError, match="early_termination"):
        render_gaussians(m, q, s, o, c, cam, early_termination=1)
    # "auto" on CPU is the tile path.
    torch.testing.assert_close(
        render_gaussians(m, q, s, o, c, cam, backend="auto").image, render_gaussians(m, q, s, o, c, cam).image
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gsplat_backend_on_cuda_refuses_other_rules_and_matches_tile():
    m, q, s, o, c = (t.cuda() for t in _random_scene(200, seed=8))
    cam = orbit_cameras(2, 32, 24)
    cam = Camera(cam.viewmats.cuda(), cam.Ks.cuda(), 32, 24)
    with pytest.raises(ValueError, match="alpha_max"):
        render_gaussians(m, q, s, o, c, cam, backend="gsplat")  # default cap 0.99 ≠ gsplat's 0.999
    with pytest.raises(ValueError, match="early_termination"):
        render_gaussians(m, q, s, o, c, cam, backend="gsplat", alpha_max=0.999, early_termination=False)
    pytest.importorskip("gsplat")
    got = render_gaussians(m, q, s, o, c, cam, backend="gsplat", alpha_max=0.999)
    ref = render_gaussians(m, q, s, o, c, cam, backend="tile", alpha_max=0.999)
    torch.testing.assert_close(got.image, ref.image, rtol=0, atol=1e-4)
    torch.testing.assert_close(got.alpha, ref.alpha, rtol=0, atol=1e-4)
