"""ToyHumans data, HGM-tiny (three Gaussian sets, gradient routing) and the back-view refiner."""

import numpy as np
import pytest
import torch

from iclr25.hgm import orbit_cameras
from iclr25.hgm.model import HGM, BackViewRefiner, HGMConfig, hgm_loss
from iclr25.hgm.toyhumans import CapsuleBody, make_toyhumans, zbuffer_render

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_toyhumans(3, seed=0, size=16, num_points=4000, cache_dir=tmp_path_factory.mktemp("toy"))


def test_toyhumans_is_seeded_cached_and_consistent(data, tmp_path):
    a = make_toyhumans(2, seed=5, size=16, num_points=3000, cache_dir=tmp_path)
    b = make_toyhumans(2, seed=5, size=16, num_points=3000, cache_dir=tmp_path)  # loaded from the cache
    c = make_toyhumans(2, seed=5, size=16, num_points=3000)
    assert torch.equal(a.images, b.images) and torch.equal(a.images, c.images)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    assert data.images.shape == (3, 12, 16, 16, 3) and data.masks.shape == (3, 12, 16, 16)
    assert (data.masks >= 0).all() and (data.masks <= 1).all() and data.masks.mean() > 0.05
    empty = data.masks == 0
    assert torch.all(data.images[empty] == 1.0)  # white background outside the body
    # The prior is the unclothed body with noise: close to, but not on, the clothed surface.
    body = CapsuleBody()
    exact = body.vertices(data.params)
    err = (data.prior_vertices - exact).norm(dim=-1).mean()
    assert 0.005 < err < 0.1
    # Front and back views differ (texture is not symmetric).
    assert (data.images[:, 0] - data.images[:, 6].flip(2)).abs().mean() > 0.01


def test_capsule_body_protocol_and_errors():
    body = CapsuleBody(t_steps=2, theta_steps=4)
    v = body.vertices(torch.tensor([[1.0, 0.5, 0.5, 0, 0, 0.1, 0.1, 0, 0, 0, 1.0]]))
    assert v.shape == (1, body.num_vertices, 3) and body.num_vertices == 12 * 8
    assert v.abs().max() < 1.0
    with pytest.raises(ValueError, match="params"):
        body.vertices(torch.zeros(1, 5))
    with pytest.raises(ValueError, match="n must"):
        make_toyhumans(0)


def test_zbuffer_keeps_the_nearest_point():
    cam = orbit_cameras(1, 8, 8)  # camera on +z looking at the origin
    pts = np.array([[0.0, 0.0, 0.2], [0.0, 0.0, -0.2]], np.float32)
    cols = np.array([[1.0, 0, 0], [0, 1.0, 0]], np.float32)
    for order in ([0, 1], [1, 0]):
        img, mask = zbuffer_render(pts[order], cols[order], cam, supersample=1)
        assert mask.sum() == 1.0
        np.testing.assert_allclose(img[0][mask[0] > 0][0], [1.0, 0, 0])


def _model(use_body=True):
    torch.manual_seed(0)
    return HGM(
        HGMConfig(
            image_size=16,
            splat_size=8,
            channels=(8, 16, 16),
            feat_dim=16,
            code_dim=8,
            heads=2,
            grid=8,
            use_body=use_body,
        )
    )


def test_three_gaussian_sets_are_valid_and_receive_their_own_gradients(data):
    m = _model()
    cam = data.camera
    out = m(data.images[:2, [0]], cam[[0]], data.prior_vertices[:2])
    assert out.merged.num == 64 and out.image.num == 64 and out.body.num == 288
    for g in (out.merged, out.image, out.body):
        assert g.means.abs().max() <= 1 and (g.scales > 0).all()
        torch.testing.assert_close(g.quats.norm(dim=-1), torch.ones_like(g.opacities), rtol=0, atol=1e-6)
    sup = cam[[0, 6]]
    _, _ = hgm_loss(out, sup, data.images[:2, [0, 6]], data.masks[:2, [0, 6]])

    def grads(term):
        m.zero_grad()
        o = m(data.images[:2, [0]], cam[[0]], data.prior_vertices[:2])
        from iclr25.hgm import render_gaussians

        g = getattr(o, term)
        r = render_gaussians(*g, sup)
        (
            (r.image - data.images[:2, [0, 6]]).square().mean()
            + (r.alpha[..., 0] - data.masks[:2, [0, 6]]).square().mean()
        ).backward()
        return {
            k: sum(p.grad.abs().sum().item() for p in mod.parameters() if p.grad is not None)
            for k, mod in (
                ("image", m.image_branch),
                ("body", m.body_mlp),
                ("codes", m.body_attn),
                ("head", m.head),
                ("volume", m.vol1),
            )
        }

    gi, gs = grads("image"), grads("body")
    with (
        torch.no_grad()
    ):  # the fusion head's last layer starts at zero (merged = image Gaussians); perturb it
        m.head[-1].weight.normal_(0, 0.01)
    gm = grads("merged")
    assert gi["image"] > 0 and gi["body"] == 0 and gi["head"] == 0  # G_I's loss only trains the image branch
    assert gs["body"] > 0 and gs["codes"] > 0 and gs["image"] == 0  # G_S's loss only trains the body branch
    assert (
        gm["image"] > 0 and gm["head"] > 0 and gm["volume"] > 0 and gm["codes"] > 0
    )  # fusion reaches the body features
    # Image-only model: no body parameters at all, merged loss still trains the image branch.
    m0 = _model(use_body=False)
    o0 = m0(data.images[:2, [0]], cam[[0]])
    assert o0.body is None
    loss, terms = hgm_loss(o0, sup, data.images[:2, [0, 6]], data.masks[:2, [0, 6]])
    loss.backward()
    assert set(terms) == {"merged", "image"}
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m0.image_branch.parameters())


def test_training_reduces_the_loss(data):
    m = _model()
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.05)
    sup = data.camera[[0, 3, 6]]
    losses = []
    for _ in range(12):
        out = m(data.images[:, [0]], data.camera[[0]], data.prior_vertices)
        loss, _ = hgm_loss(out, sup, data.images[:, [0, 3, 6]], data.masks[:, [0, 3, 6]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_model_and_refiner_input_errors_and_refiner_identity_at_init(data):
    m = _model()
    with pytest.raises(ValueError, match="body_vertices"):
        m(data.images[:1, [0]], data.camera[[0]], None)
    with pytest.raises(ValueError, match="images"):
        m(data.images[:1, [0], :8], data.camera[[0]], data.prior_vertices[:1])
    with pytest.raises(ValueError, match="views"):
        m(data.images[:1, [0, 6]], data.camera[[0]], data.prior_vertices[:1])
    with pytest.raises(ValueError, match="splat_size"):
        HGMConfig(image_size=32, splat_size=12)
    ref = BackViewRefiner(channels=(8, 16, 16))
    back, front = data.images[:, 6], data.images[:, 0]
    torch.testing.assert_close(ref(back, front), back)  # zero-initialised residual
    with pytest.raises(ValueError, match="coarse_back"):
        ref(back, front[:, :8])


def test_gaussian_set_moves_and_casts_every_tensor():
    from iclr25.hgm.gaussians import GaussianSet

    g = GaussianSet(*(torch.rand(1, 3, k) for k in (3, 1, 3, 4, 3)))
    h = g.to(torch.float64)
    assert all(
        getattr(h, k).dtype == torch.float64 for k in ("means", "opacities", "scales", "quats", "colours")
    )
    assert torch.equal(h.means.float(), g.means) and g.to("meta").colours.device.type == "meta"
