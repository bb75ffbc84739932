"""The real preset's inputs on Fashion-MNIST: loader counts, the Si-Blurry stream built over the real labels
(class and blurry proportions), and the FLOPs / bytes accounting on a real batch (issue #53)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from iclr25.budgeted_cl import (
    TinyResNet,
    count_block_flops,
    exemplar_capacity,
    measure_block_flops,
    model_bytes,
    real,
)
from iclr25.budgeted_cl.experiment import PRESETS, _strides
from iclr25.budgeted_cl.stream import images_to_float


@functools.cache
def _loaded():
    return real.load_split("train"), real.load_split("test"), real.fashion_stream_data(0, 50, 20)


@pytest.fixture
def fashion(need_asset):
    need_asset("fashion-mnist")
    return _loaded()  # once per process


def test_loader_counts_and_the_seeded_balanced_sample(fashion):
    (xtr, ytr), (xte, yte), data = fashion
    assert tuple(xtr.shape) == (60_000, 1, 28, 28) and tuple(xte.shape) == (10_000, 1, 28, 28)
    assert xtr.dtype == torch.uint8 and ytr.dtype == torch.int64
    assert (
        np.bincount(ytr.numpy()).tolist() == [6000] * 10 and np.bincount(yte.numpy()).tolist() == [1000] * 10
    )
    assert data.n_classes == 10 and data.sample_shape == (1, 28, 28) and data.bytes_per_image == 784
    assert np.bincount(data.train_y.numpy()).tolist() == [50] * 10
    assert np.bincount(data.test_y.numpy()).tolist() == [20] * 10
    a = real.balanced_sample(ytr.numpy(), 50, 0)
    assert a.tolist() == real.balanced_sample(ytr.numpy(), 50, 0).tolist()
    assert a.tolist() != real.balanced_sample(ytr.numpy(), 50, 1).tolist()
    assert torch.equal(data.train_x, xtr[torch.from_numpy(a)])


@pytest.mark.parametrize("seed", range(4))
def test_si_blurry_proportions_on_the_real_stream(fashion, seed):
    *_, data = fashion
    y = data.train_y.numpy()
    order, task, info = real.si_blurry_stream(y, n_tasks=5, disjoint_ratio=0.5, blurry_ratio=0.1, seed=seed)
    assert sorted(order.tolist()) == list(range(500))  # every sample exactly once
    dis = [c for cs in info["disjoint_classes"] for c in cs]
    blu = [c for cs in info["blurry_classes"] for c in cs]
    assert (
        len(dis) == 5
        and len(blu) == 5
        and sorted(dis + blu) == list(range(10))
        and not info["dropped_classes"]
    )
    assert all(len(cs) == 1 for cs in info["blurry_classes"])  # blurry classes split evenly over the tasks
    home = {c: k for k, cs in enumerate(info["disjoint_classes"] + info["blurry_classes"]) for c in cs}
    home = {c: (k % 5) for c, k in home.items()}
    ys = y[order]
    for c in dis:  # a disjoint class appears only in its own task
        assert set(task[ys == c].tolist()) == {home[c]}
    # M = 10 % of the 250 blurry-class samples are dealt to random tasks; each task gives as many as it receives
    assert info["n_moved"] == 25
    away = sum(int(((ys == c) & (task != home[c])).sum()) for c in blu)
    assert 0 < away <= 25
    sizes = np.bincount(task, minlength=5)
    want = [50 * (len(info["disjoint_classes"][k]) + 1) for k in range(5)]
    assert sizes.tolist() == want and (ys[np.isin(ys, blu)].size / ys.size) == 0.5  # 1 − N of the stream


def test_si_blurry_task_sizes_are_stochastic_and_inputs_checked(fashion):
    *_, data = fashion
    y = data.train_y.numpy()
    splits = {tuple(map(len, real.si_blurry_stream(y, seed=s)[2]["disjoint_classes"])) for s in range(8)}
    assert len(splits) > 1  # the disjoint classes are cut at random points: uneven tasks
    with pytest.raises(ValueError, match="n_tasks"):
        real.si_blurry_stream(y, n_tasks=11)
    with pytest.raises(ValueError, match="blurry_ratio"):
        real.si_blurry_stream(y, blurry_ratio=1.5)


def test_budget_accounting_on_a_real_batch(fashion):
    """The quick preset's accounting on 28×28 real images: analytic conv/matmul FLOPs == torch's FlopCounterMode
    on a real batch, and the memory budget (model bytes + 160 × 784 B) holds exactly 160 exemplars."""
    *_, data = fashion
    cfg = PRESETS["real"]
    torch.manual_seed(0)
    model = TinyResNet(
        n_classes=10, stem_channels=cfg.stem_channels, widths=cfg.widths, strides=_strides(cfg)
    )
    analytic = count_block_flops(model, data.sample_shape, elementwise=False)
    measured = measure_block_flops(model, images_to_float(data.train_x[:4]))
    assert analytic.forward == pytest.approx(measured.forward, rel=1e-9)
    full = count_block_flops(model, data.sample_shape)
    quick = count_block_flops(model, (1, 16, 16))
    assert sum(full.forward) > 2.5 * sum(quick.forward)  # (28/16)² ≈ 3.1× the pixels of quick's images
    total = model_bytes(model) + cfg.extra_bytes
    assert exemplar_capacity(total, model_bytes(model), data.bytes_per_image) == 160
