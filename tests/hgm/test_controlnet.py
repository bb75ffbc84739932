"""ControlNet back-view refiner (diffusers path): tiny config built offline, one denoising step on CPU."""

import pytest
import torch

pytest.importorskip("diffusers")

from iclr25.hgm.controlnet import ControlNetBackRefiner  # noqa: E402

TINY_UNET = {
    "sample_size": 8,
    "in_channels": 4,
    "out_channels": 4,
    "block_out_channels": (16, 32),
    "layers_per_block": 1,
    "norm_num_groups": 8,
    "down_block_types": ("CrossAttnDownBlock2D", "DownBlock2D"),
    "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D"),
    "cross_attention_dim": 16,
    "attention_head_dim": 4,
}


@pytest.fixture(scope="module")
def refiner():
    torch.manual_seed(0)
    return ControlNetBackRefiner.from_config(
        TINY_UNET, controlnet_kwargs={"conditioning_embedding_out_channels": (8, 16)}
    )


def test_one_denoise_step_shapes_and_zero_init(refiner):
    lat = torch.randn(2, 4, 8, 8)
    cond = torch.rand(2, 3, 16, 16)  # (8, 16) conditioning embedding: one stride-2 stage → 2× the latent size
    text = torch.randn(2, 5, 16)
    refiner.scheduler.set_timesteps(10)
    t = refiner.scheduler.timesteps[0]
    with torch.no_grad():
        eps, prev = refiner.denoise_step(lat, t, cond, text)
        plain = refiner.unet(lat, t, encoder_hidden_states=text).sample
    assert eps.shape == lat.shape and prev.shape == lat.shape and torch.isfinite(prev).all()
    # ControlNet's zero convolutions: a freshly copied ControlNet adds exactly nothing to the UNet's prediction.
    torch.testing.assert_close(eps, plain)
    assert not torch.allclose(prev, lat)


def test_controlnet_residuals_change_the_prediction_once_trained(refiner):
    import copy

    r = copy.deepcopy(refiner)
    with torch.no_grad():  # stand-in for training: non-zero zero-convolutions
        zero_convs = [*r.controlnet.controlnet_down_blocks, r.controlnet.controlnet_mid_block]
        for m in [*zero_convs, r.controlnet.controlnet_cond_embedding.conv_out]:
            m.weight.normal_(0, 0.1)
    lat, text = torch.randn(1, 4, 8, 8), torch.randn(1, 5, 16)
    with torch.no_grad():
        a = r.predict_noise(lat, 10, torch.zeros(1, 3, 16, 16), text)
        b = r.predict_noise(lat, 10, torch.ones(1, 3, 16, 16), text)
    assert not torch.allclose(a, b)  # the condition image now steers the denoiser


def test_missing_weights_and_bad_inputs_raise_clearly(tmp_path, refiner):
    with pytest.raises(FileNotFoundError, match="local weights.*Missing"):
        ControlNetBackRefiner.from_pretrained(tmp_path / "sd15", tmp_path / "tile")
    with pytest.raises(ValueError, match="vae, text_encoder and tokenizer"):
        refiner.pipeline()
    with pytest.raises(ValueError, match="finite"):
        refiner.predict_noise(
            torch.full((1, 4, 8, 8), float("nan")), 1, torch.rand(1, 3, 16, 16), torch.randn(1, 5, 16)
        )
    with pytest.raises(ValueError, match="multiples of 8"):
        refiner(torch.rand(1, 12, 12, 3))
