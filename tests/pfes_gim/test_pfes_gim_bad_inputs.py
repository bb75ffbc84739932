"""Bad inputs raise ValueError naming the parameter, the value and what was expected (issue #34)."""

import math

import numpy as np
import pytest

from iclr25.harness.configs import effective_config, experiment_module
from iclr25.harness.runs import UsageError
from iclr25.pfes_gim import LossConfig, SpottingTrainConfig, interval_iou, nms, soft_nms
from iclr25.pfes_gim.experiment import PRESETS, Config
from iclr25.pfes_gim.pseudo_labels import gim_duration, reliability_threshold

DET = np.array([[10, 20, 0, 0.9], [12, 22, 0, 0.8]])


@pytest.mark.parametrize(
    "field,value",
    [
        ("a_margin", -1),
        ("loso_videos_per_subject", 0),
        ("thr_grid", (0.1, math.nan)),
        ("iac_grid", (0.0, math.inf)),
    ],
)
def test_config_rejects_non_finite_and_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        Config(**{field: value})


@pytest.mark.parametrize(
    "override,message",
    [
        (
            "train.loss.lambda_iac=Infinity",
            r"train: loss: lambda_iac must be a non-negative number \(finite\), got inf",
        ),
        ("train.loss.lambda_iac=NaN", "train: loss: lambda_iac"),
        ("train.loss.lambda_iac=-1", "train: loss: lambda_iac"),
        ("train.loss.lambda_sparsity=Infinity", "train: loss: lambda_sparsity"),
        ("train.lr=Infinity", r"train: lr must be a positive number \(finite\), got inf"),
        ("train.weight_decay=NaN", "train: weight_decay"),
        ("train.epochs=0", "train: epochs must be a positive int, got 0"),
    ],
)
def test_bad_training_values_are_usage_errors_naming_the_nested_field(override, message):
    with pytest.raises(UsageError, match=message):
        effective_config(experiment_module("pfes_gim"), "quick", overrides=[override])


@pytest.mark.parametrize("field,value", [("pseudo_labels", "hard"), ("device", "cuda")])
def test_per_arm_training_fields_are_refused(field, value):
    with pytest.raises(UsageError, match=rf"train\.{field} is set per arm and run in one_seed"):
        effective_config(experiment_module("pfes_gim"), "quick", overrides=[f"train.{field}={value}"])


def test_flat_training_names_point_to_the_nested_ones():
    with pytest.raises(UsageError, match=r"did you mean train\.loss\.lambda_iac\?"):
        effective_config(experiment_module("pfes_gim"), "quick", overrides=["lambda_iac=0.1"])


def test_loss_and_train_configs_reject_inf():
    with pytest.raises(ValueError, match="lambda_iac"):
        LossConfig(lambda_iac=math.inf)
    with pytest.raises(ValueError, match=r"lr must be a positive number \(finite\), got inf"):
        SpottingTrainConfig(lr=math.inf)
    with pytest.raises(ValueError, match="weight_decay"):
        SpottingTrainConfig(weight_decay=math.inf)


def test_gim_duration_bad_inputs():
    assert gim_duration(0, 0) == 16 and gim_duration(100, 1) == 16  # k/2 floor and the cap (paper §3.2)
    with pytest.raises(ValueError, match="n_reliable must be a frame count"):
        gim_duration(-5, 0)
    with pytest.raises(ValueError, match="n_reliable"):
        gim_duration(2.5, 0)
    with pytest.raises(ValueError, match="cls must be 0 \\(MaE\\) or 1 \\(ME\\), got 2"):
        gim_duration(3, 2)


def test_reliability_threshold_bad_inputs():
    assert reliability_threshold(5) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="itr must be an int"):
        reliability_threshold(math.nan)
    with pytest.raises(ValueError, match="itr must be >= gim_start"):
        reliability_threshold(2)


def test_nms_bad_inputs():
    assert len(nms(DET, 0.5)) == 1
    for thr in (math.nan, -0.1, 1.5, math.inf):
        with pytest.raises(ValueError, match="iou_thr must be a number in \\[0, 1\\]"):
            nms(DET, thr)
    with pytest.raises(ValueError, match="cap must be None or an int >= 0"):
        nms(DET, 0.5, cap=-1)
    with pytest.raises(ValueError, match="start must be <= end"):
        nms(np.array([[20, 10, 0, 0.9]]), 0.5)
    with pytest.raises(ValueError, match="NaN or inf"):
        nms(np.array([[10, 20, 0, math.nan]]), 0.5)
    with pytest.raises(ValueError, match="shape \\(n, 4\\)"):
        nms(np.zeros((2, 3)), 0.5)


def test_soft_nms_bad_inputs():
    assert soft_nms(DET).shape == (2, 4)
    for sigma in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="sigma must be a finite number > 0"):
            soft_nms(DET, sigma)
    with pytest.raises(ValueError, match="start must be <= end"):
        soft_nms(np.array([[30, 10, 1, 0.5]]))


def test_interval_iou_bad_inputs():
    assert interval_iou([[0, 9]], [[5, 14]])[0, 0] == pytest.approx(5 / 15)
    with pytest.raises(ValueError, match="a: start must be <= end"):
        interval_iou([[9, 0]], [[0, 9]])
    with pytest.raises(ValueError, match="b contain NaN"):
        interval_iou([[0, 9]], [[0, math.nan]])
    with pytest.raises(ValueError, match="shape \\(n, 2\\)"):
        interval_iou(np.zeros((2, 3)), [[0, 1]])


def test_damaged_seed_result_raises_instead_of_dropping_a_claim():
    """A seed result without the experiment-A part its position runs must not silently drop the claim: claims()
    raises. (Where every seed runs a part, its keys are also required_keys, so the run path rejects such a seed file
    and recomputes it.)"""
    from iclr25.pfes_gim.experiment import claims, required_keys

    cfg = PRESETS["smoke"]
    with pytest.raises((KeyError, ValueError), match="has no 'A'"):
        claims(cfg, {0: {"B": {}, "hard_variant": {}}})
    assert {"A/gim/pearson", "B/gim/f1", "hard_variant/gim/f1"} <= set(required_keys(cfg))
    assert not any(k.startswith("A/") for k in required_keys(PRESETS["quick"]))  # A runs on 3 of its 5 seeds


def test_a_seed_pins_its_threads_and_restores_them(monkeypatch):
    """A seed's numbers must not depend on the process's thread count (issue #34): one_seed pins torch and
    BLAS to one thread and restores the caller's setting afterwards."""
    from dataclasses import replace

    import torch
    from threadpoolctl import threadpool_info

    from iclr25.pfes_gim import experiment as E

    seen = {}

    def spy(cfg, seed):
        seen["torch"] = torch.get_num_threads()
        seen["blas"] = {p["num_threads"] for p in threadpool_info()}
        return {"ok": 1}

    only_a = replace(PRESETS["smoke"], b_seeds=0, hard_seeds=0, ablation_seeds=0, loso_subjects=0)
    monkeypatch.setattr(E, "experiment_a", spy)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert E.one_seed(only_a, 0) == {"A": {"ok": 1}}
        assert seen == {"torch": 1, "blas": {1}} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(old)


def test_one_seed_refuses_a_seed_outside_the_config():
    """A seed's parts follow its position in ``cfg.seed_list``; a seed outside the list has none (issue #39)."""
    from iclr25.pfes_gim.experiment import one_seed, seed_position

    cfg = PRESETS["quick"]  # seeds 0..4
    assert [seed_position(cfg, s) for s in cfg.seed_list] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="seed must be one of"):
        one_seed(cfg, 5)


def test_train_config_is_a_deprecated_alias():
    from iclr25.pfes_gim import TrainConfig

    with pytest.warns(DeprecationWarning, match="SpottingTrainConfig"):
        old = TrainConfig(epochs=3, lr=1e-3)
    assert (
        isinstance(old, SpottingTrainConfig)
        and old.epochs == 3
        and old.gim_at_rate == SpottingTrainConfig().gim
    )
