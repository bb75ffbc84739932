"""FreeVS-tiny's noise draws on any device."""

import pytest
import torch


def test_noise_comes_from_the_generators_device_and_lands_on_the_models():
    """A CPU generator drives a model on another device with the CPU's noise (a CUDA run used to die with
    "Expected a 'cuda' device type for generator"); on the CPU the draw is the plain torch draw."""
    from iclr25.freevs.model import _draw

    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(_draw(torch.randn, (4, 5), g1, torch.device("cpu")), torch.randn((4, 5), generator=g2))
    g1.manual_seed(3)
    meta = _draw(torch.rand, (4,), g1, torch.device("meta"))  # another device than the generator's
    assert meta.device.type == "meta" and meta.shape == (4,)


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA (the device a CPU generator cannot draw on)"
)
def test_cuda_draw_from_a_cpu_generator_equals_the_cpu_draw():
    from iclr25.freevs.model import _draw

    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    on_gpu = _draw(torch.randn, (8,), g1, torch.device("cuda"))
    assert on_gpu.is_cuda and torch.equal(on_gpu.cpu(), torch.randn((8,), generator=g2))
