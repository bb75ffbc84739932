import pytest
import torch
from torch import nn

from iclr25.budgeted_cl import PerSampleGradCapture


@pytest.mark.parametrize(
    "layer",
    [
        nn.Conv2d(3, 5, 3, 1, 1, bias=False),
        nn.Conv2d(3, 4, 3, 2, 1, bias=False),
        nn.Conv2d(2, 3, 1, 2),
        nn.Linear(6, 3),
    ],
)
def test_per_sample_grads_match_naive_loop(layer):
    torch.manual_seed(0)
    cap = PerSampleGradCapture([layer])
    cap.enabled = True
    x = torch.randn(4, layer.in_channels, 8, 8) if isinstance(layer, nn.Conv2d) else torch.randn(4, 6)
    (layer(x).pow(2).sum()).backward()
    cap.enabled = False
    pg = cap.weight_grads(layer).flatten(1)
    ref = torch.stack(
        [torch.autograd.grad(layer(x[n : n + 1]).pow(2).sum(), layer.weight)[0].flatten() for n in range(4)]
    )
    assert torch.allclose(pg, ref, atol=1e-4)
    assert torch.allclose(pg.sum(0), layer.weight.grad.flatten(), atol=1e-4)  # sums to the batch gradient
    idx = torch.randperm(layer.weight.numel(), generator=torch.Generator().manual_seed(1))[:7]
    assert torch.allclose(cap.weight_grad_entries(layer, idx), ref[:, idx], atol=1e-4)


def test_frozen_layer_reports_no_grad():
    a, b = nn.Linear(3, 3), nn.Linear(3, 2)
    cap = PerSampleGradCapture([a, b])
    cap.enabled = True
    loss = b(a(torch.randn(2, 3))).sum()
    torch.autograd.grad(loss, list(b.parameters()))  # a is frozen: graph pruned below b
    assert cap.has_grad(b) and not cap.has_grad(a)
    with pytest.raises(ValueError, match="no gradient"):
        cap.weight_grads(a)


def test_rejects_unsupported_modules():
    with pytest.raises(ValueError, match="Conv2d or Linear"):
        PerSampleGradCapture([nn.ReLU()])
