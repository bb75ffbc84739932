"""run_online with a user's data and models: float images, input validation, any nn.Module, explicit blocks."""

import dataclasses
from collections import OrderedDict

import numpy as np
import pytest
import torch
from torch import nn

from iclr25.budgeted_cl import (
    METHODS,
    BlockStructure,
    DigitsData,
    ImageStreamData,
    TinyResNet,
    count_block_flops,
    gaussian_stream,
    images_to_float,
    load_digits16,
    model_bytes,
    run_online,
    step_flops,
)


@pytest.fixture(scope="module")
def data():
    return load_digits16(0)


@pytest.fixture(scope="module")
def order(data):
    return gaussian_stream(data.train_y.numpy(), 0.1, seed=0)[:60]


def small_model(c):
    return TinyResNet(n_classes=c, stem_channels=8, widths=(8, 16), strides=(1, 2))


def _as_float(d):
    return ImageStreamData(
        d.train_x.float() / 255.0, d.train_y, d.test_x.float() / 255.0, d.test_y, d.n_classes
    )


def test_float_images_are_not_divided_twice(data, order):
    fd = _as_float(data)
    assert torch.equal(images_to_float(fd.train_x), images_to_float(data.train_x))
    extra = 6_000  # the same exemplar capacity: float images cost 4 bytes per pixel
    r_u8 = run_online(
        METHODS["er"],
        data,
        order,
        seed=0,
        total_bytes=model_bytes(small_model(10)) + extra,
        eval_period=20,
        model_fn=small_model,
    )
    r_f = run_online(
        METHODS["er"],
        fd,
        order,
        seed=0,
        total_bytes=model_bytes(small_model(10)) + 4 * extra,
        eval_period=20,
        model_fn=small_model,
    )
    assert r_u8.capacity == r_f.capacity
    assert r_f.eval_acc == r_u8.eval_acc  # the same numbers: the float stream is fed as it is


def test_bad_image_ranges_and_labels_are_refused(data):
    x, y = data.train_x, data.train_y
    with pytest.raises(ValueError, match=r"train_x .*\[0, 1\]"):
        ImageStreamData(x.float(), y, data.test_x.float() / 255, data.test_y, 10)  # floats in 0..255
    bad = x.float() / 255
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ImageStreamData(bad, y, data.test_x.float() / 255, data.test_y, 10)
    with pytest.raises(ValueError, match="dtype"):
        ImageStreamData(x.int(), y, data.test_x.int(), data.test_y, 10)
    with pytest.raises(ValueError, match="test_y"):
        ImageStreamData(x, y, data.test_x, data.test_y + 5, 10)
    with pytest.raises(ValueError, match="share"):
        ImageStreamData(x, y, data.test_x.float() / 255, data.test_y, 10)
    with pytest.raises(ValueError, match="order"):
        run_online(
            METHODS["er"], data, np.array([0, 10_000]), seed=0, total_bytes=10**6, model_fn=small_model
        )


def test_digitsdata_is_a_deprecated_alias(data):
    with pytest.warns(DeprecationWarning, match="ImageStreamData"):
        d = DigitsData(data.train_x, data.train_y, data.test_x, data.test_y, 10)
    assert isinstance(d, ImageStreamData) and d.sample_shape == (1, 16, 16)


class Plain(nn.Module):
    """A user's CNN: no .blocks, no .head."""

    def __init__(self, c):
        super().__init__()
        self.net = nn.Sequential(
            OrderedDict(
                stem=nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU()),
                body=nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU()),
                pool=nn.AdaptiveAvgPool2d(1),
                flat=nn.Flatten(),
                fc=nn.Linear(8, c),
            )
        )

    def forward(self, x):
        return self.net(x)


def test_any_module_runs_er_and_counts_its_flops(data, order):
    total = model_bytes(Plain(10)) + 6_000
    r = run_online(METHODS["er"], data, order, seed=0, total_bytes=total, eval_period=20, model_fn=Plain)
    assert r.iterations == 60 and len(r.eval_acc) == 3 and all(0 <= a <= 100 for a in r.eval_acc)
    # one group = the whole model: F and B of every conv / linear / relu / pool leaf
    m = Plain(10)
    x = torch.zeros(1, 1, 16, 16)
    full = count_block_flops(TinyWrap(m), (1, 16, 16))
    assert full.n_blocks == 1 and sum(full.forward) > 0
    n_batches = [min(16, 8 + 8 * i) for i in range(0)]  # ER batches: pending (8) + memory
    del n_batches, x
    assert r.flops >= step_flops(full, 8, 0) * r.iterations  # every step at least b=8 stream samples


class TinyWrap(nn.Module):
    """A view with .blocks = [whole model] and an empty head, to count the whole model's FLOPs."""

    def __init__(self, m):
        super().__init__()
        self.blocks = nn.ModuleList([m])
        self.head = nn.Identity()
        self.m = m

    def forward(self, x):
        return self.m(x)


def test_freezing_needs_blocks_and_sar_needs_basicblocks(data, order):
    kw = dict(seed=0, total_bytes=model_bytes(Plain(10)) + 6_000, model_fn=Plain)
    with pytest.raises(ValueError, match="blocks="):
        run_online(METHODS["al"], data, order, **kw)
    with pytest.raises(ValueError, match="BasicBlock"):
        run_online(METHODS["sar"], data, order, **kw)
    with pytest.raises(ValueError, match="submodule"):
        run_online(METHODS["al"], data, order, blocks=["net.nope"], head="net.fc", **kw)
    # with its blocks named, the user's model freezes
    r = run_online(METHODS["al"], data, order, blocks=["net.stem", "net.body"], head="net.fc", **kw)
    assert r.iterations == 60 and len(r.frozen_blocks) == 60 and max(r.frozen_blocks) <= 2


class Wrapped(nn.Module):
    """TinyResNet hidden inside a user's wrapper: same network, no .blocks/.head on the top module."""

    def __init__(self, c):
        super().__init__()
        self.inner = small_model(c)

    def forward(self, x):
        return self.inner(x)


def test_explicit_blocks_reproduce_the_native_block_structure(data, order):
    m = dataclasses.replace(METHODS["al"], warmup_steps=2)
    total = model_bytes(small_model(10)) + 6_000
    kw = dict(seed=0, total_bytes=total, eval_period=20)
    native = run_online(m, data, order, model_fn=small_model, **kw)
    wrapped = run_online(
        m,
        data,
        order,
        model_fn=Wrapped,
        blocks=lambda mod: list(mod.inner.blocks),
        head=lambda mod: mod.inner.head,
        **kw,
    )
    assert native.flops == wrapped.flops and native.frozen_blocks == wrapped.frozen_blocks
    assert native.eval_acc == wrapped.eval_acc
    # the same freezable groups and per-block FLOPs, parameter for parameter
    a, b = small_model(10), Wrapped(10)
    b.inner.load_state_dict(a.state_dict())
    va = BlockStructure(a)
    vb = BlockStructure(b, blocks=lambda mod: list(mod.inner.blocks), head=lambda mod: mod.inner.head)
    ga, gb = va.parameter_groups(), vb.parameter_groups()
    assert [[tuple(p.shape) for p in g] for g in ga] == [[tuple(p.shape) for p in g] for g in gb]
    assert count_block_flops(a, (1, 16, 16)) == count_block_flops(vb, (1, 16, 16))
