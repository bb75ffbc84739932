"""Hard stage, medium stage and GIM pseudo-labels: the released code's outputs on known bumps, τ schedule, bounds."""

import numpy as np
import pytest
import torch

from iclr25.pfes_gim import (
    GIMConfig,
    gim_duration,
    gim_pseudo_labels,
    hard_pseudo_labels,
    medium_pseudo_labels,
    pseudo_labels_for_epoch,
    reliability_threshold,
)

T = 200


def _labelled(col: torch.Tensor) -> list[int]:
    return torch.nonzero(col > 0).reshape(-1).tolist()


def test_hard_stage_windows():
    pl = hard_pseudo_labels([48, 119], [0, 1], T)
    assert _labelled(pl.soft[:, 0]) == list(range(43, 53))  # MaE [p-5, p+5)
    assert _labelled(pl.soft[:, 1]) == list(range(116, 122))  # ME [p-3, p+3)
    assert set(pl.soft.unique().tolist()) == {0.0, 1.0}
    assert pl.windows.tolist() == [[43, 52], [116, 121]]


def test_hard_stage_clips_like_released_code():
    pl = hard_pseudo_labels([2, T - 2], [0, 0], T)
    assert _labelled(pl.soft[:, 0]) == list(range(0, 7)) + list(range(T - 7, T - 1))  # never the last frame


def _bumps():
    t = torch.arange(T, dtype=torch.float32)
    a = 0.9 * torch.exp(-((t - 52) ** 2) / 72) + 0.7 * torch.exp(-((t - 121) ** 2) / 8)
    g = torch.randn(T, 8, generator=torch.Generator().manual_seed(0))
    return a, g


def test_gim_matches_released_outputs_on_bumps():
    a, g = _bumps()
    pl = gim_pseudo_labels(a, g, [48, 119], [0, 1], itr=10)
    assert pl.centres.tolist() == [52, 121]  # pseudo-apex
    assert _labelled(pl.soft[:, 0]) == list(range(44, 61))  # window 44-60
    assert _labelled(pl.apex[:, 0]) == list(range(50, 55))  # apex positives 50-54
    assert _labelled(pl.soft[:, 1]) == list(range(117, 126))  # window 117-125
    assert _labelled(pl.apex[:, 1]) == list(range(120, 123))  # apex positives 120-122
    assert pl.soft[52, 0] == pytest.approx(1.0) and pl.soft[121, 1] == pytest.approx(1.0)
    inside = pl.soft[44:61, 0]
    assert (inside > 0).all() and (inside <= 1).all()


def test_gim_soft_label_is_the_feature_space_gaussian():
    a, g = _bumps()
    pl = gim_pseudo_labels(a, g, [48], [0], itr=10)
    idx = torch.arange(44, 61)
    d2 = ((g[idx] - g[52]) ** 2).sum(-1)
    ref = torch.exp(-d2 / (2 * d2.mean() + 1e-6))
    torch.testing.assert_close(pl.soft[idx, 0], ref)


def test_tau_schedule():
    assert reliability_threshold(5) == pytest.approx(0.8)
    assert reliability_threshold(28) == pytest.approx(0.5125)
    assert reliability_threshold(29) == pytest.approx(0.5)
    assert reliability_threshold(100) == pytest.approx(0.5)
    taus = [reliability_threshold(i) for i in range(5, 60)]
    assert all(x >= y for x, y in zip(taus, taus[1:], strict=False))
    with pytest.raises(ValueError, match="itr"):
        reliability_threshold(4)


@pytest.mark.parametrize("cls", [0, 1])
def test_duration_always_within_bounds(cls):
    cfg = GIMConfig()
    for n in range(0, 60):
        d = gim_duration(n, cls, cfg)
        assert cfg.k[cls] // 2 <= d <= cfg.cap[cls]
    assert gim_duration(7, 0) == 16 and gim_duration(20, 0) == 24 and gim_duration(40, 0) == 36


def test_gim_window_grows_with_a_wider_intensity():
    t = torch.arange(T, dtype=torch.float32)
    g = torch.randn(T, 4, generator=torch.Generator().manual_seed(1))
    widths = []
    for s2 in (8.0, 200.0, 2000.0):
        pl = gim_pseudo_labels(torch.exp(-((t - 100) ** 2) / s2), g, [100], [0], itr=29)
        widths.append(int(pl.windows[0, 1] - pl.windows[0, 0] + 1))
    assert widths[0] == 17 and widths[0] < widths[1] < widths[2] == 37


def test_medium_stage_windows():
    g = torch.randn(T, 4, generator=torch.Generator().manual_seed(2))
    pl = medium_pseudo_labels(g, [48, 119], [0, 1], itr=1)
    assert _labelled(pl.soft[:, 0]) == list(range(46, 51)) and _labelled(pl.soft[:, 1]) == [118, 119, 120]
    pl = medium_pseudo_labels(g, [48, 119], [0, 1], itr=3)
    assert _labelled(pl.soft[:, 0]) == list(range(44, 53)) and pl.soft[48, 0] == pytest.approx(1.0)


def test_schedule_dispatch():
    a, g = _bumps()
    stages = [pseudo_labels_for_epoch(i, a, g, [48], [0]).stage for i in (0, 1, 4, 5, 50)]
    assert stages == ["hard", "medium", "medium", "gim", "gim"]
    assert pseudo_labels_for_epoch(50, a, g, [48], [0], mode="hard").stage == "hard"
    with pytest.raises(ValueError, match="mode"):
        pseudo_labels_for_epoch(10, a, g, [48], [0], mode="soft")


def test_bad_inputs():
    a, g = _bumps()
    with pytest.raises(ValueError, match="inside the video"):
        hard_pseudo_labels([T], [0], T)
    with pytest.raises(ValueError, match="inside the video"):
        gim_pseudo_labels(a, g, [-1], [0], itr=5)
    with pytest.raises(ValueError, match="empty video"):
        hard_pseudo_labels([], [], 0)
    with pytest.raises(ValueError, match="classes"):
        hard_pseudo_labels([5], [2], T)
    bad = a.clone()
    bad[3] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        gim_pseudo_labels(bad, g, [48], [0], itr=5)
    with pytest.raises(ValueError, match="features"):
        gim_pseudo_labels(a, g[:10], [48], [0], itr=5)


def test_order_maps_rows_back_to_points():
    a, g = _bumps()
    pl = gim_pseudo_labels(a, g, [119, 48], [1, 0], itr=10)
    assert pl.order.tolist() == [1, 0] and pl.classes.tolist() == [0, 1]
    assert np.array_equal(pl.centres, [52, 121])
