"""Smoke run of the reproduction: claim ids, finite numbers, resume from disk."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from iclr25.common.io import sha256_json
from iclr25.dst_robustness import experiment as exp_mod
from iclr25.dst_robustness.corruptions import COMMON_CORRUPTIONS
from iclr25.dst_robustness.experiment import PRESETS, Config, arm_name, one_sided_bound95, run
from iclr25.harness.artefacts import write_run


def _check_preregistered_arm_and_bounds(cfg, res):
    arm = arm_name(cfg.claim_method, cfg.claim_sparsity)
    by_id = {c.id: c for c in res.claims}
    for key, cid in (
        ("robust", "robust_not_worse"),
        ("noise_ladder", "noise_group_gain"),
        ("clean", "clean_parity"),
    ):
        assert list(by_id[cid].method.values) == [res.per_seed[s][arm][key] for s in cfg.seed_list]
        assert f"pre-registered DST arm = {arm}" in by_id[cid].note and "one-sided 95 %" in by_id[cid].note
    grid = res.per_seed[0]["dense"]["noise_ladder_grid"]
    assert res.per_seed[0]["dense"]["noise_ladder"] == pytest.approx(np.mean([np.mean(g) for g in grid]))


def test_smoke_run_and_resume(tmp_path, monkeypatch):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    _check_preregistered_arm_and_bounds(cfg, res)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    assert [c["id"] for c in doc["claims"]] == ["robust_not_worse", "noise_group_gain", "clean_parity"]
    for c in doc["claims"]:
        assert all(
            v is not None and math.isfinite(v) for v in c["method"]["values"] + c["baseline"]["values"]
        )
    ps = res.per_seed[0]
    assert set(ps) >= {"dense", "set_s50", "rigl_s50"}
    assert abs(ps["set_s50"]["density"] - 0.5) < 0.01 and ps["dense"]["density"] == 1.0
    assert len(ps["dense"]["acc_grid"]) == 15 and len(ps["dense"]["acc_grid"][0]) == 5
    assert (tmp_path / "figures" / "dst_robustness.png").exists()
    # resume: the finished seed is read back, the numbers are identical and nothing is retrained (counted, not timed)
    calls = []
    real = exp_mod.one_seed
    monkeypatch.setattr(exp_mod, "one_seed", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    res2 = run(cfg, tmp_path)
    assert calls == []
    for arm in ("dense", "set_s50", "rigl_s50"):
        assert res2.per_seed[0][arm]["acc_grid"] == ps[arm]["acc_grid"]
    # regression: a seed whose dense reference makes no error on a corruption has mCE vs dense = NaN (stored as
    # null by older versions); the report crashed on it. It must say NaN and why, and the run must still finish.
    f = tmp_path / "seeds" / "seed_0.json"
    d = json.loads(f.read_text())
    d["result"]["dense"]["acc_grid"][0] = [100.0] * 5
    for arm in ("dense", "set_s50", "rigl_s50"):
        d["result"][arm]["mce_vs_dense"] = "NaN"  # how a NaN is stored (older versions stored null)
    d["result_sha256"] = sha256_json(d["result"])  # a deliberate edit, not damage: keep the file trusted
    f.write_text(json.dumps(d))
    res3 = run(cfg, tmp_path)
    assert calls == []  # read back, not recomputed
    assert "mCE vs dense is undefined (NaN) for 1/1 seeds" in res3.report_md
    assert f"seed 0: {COMMON_CORRUPTIONS[0]}" in res3.report_md
    res3.preset = "smoke"
    write_run(res3, cfg, tmp_path)
    assert [c["id"] for c in json.loads((tmp_path / "claims.json").read_text())["claims"]][
        0
    ] == "robust_not_worse"


def test_one_sided_bound_matches_scipy():
    d = np.array([2.1, -0.4, 0.1, 0.5, 0.3])
    t = stats.t.ppf(0.95, 4) * d.std(ddof=1) / np.sqrt(5)
    assert one_sided_bound95(d, "lower") == pytest.approx(d.mean() - t)
    assert one_sided_bound95(d, "upper") == pytest.approx(d.mean() + t)
    # the lower one-sided 95 % bound equals the lower end of the two-sided 90 % interval
    lo, _ = stats.t.interval(0.90, 4, loc=d.mean(), scale=stats.sem(d))
    assert one_sided_bound95(d, "lower") == pytest.approx(lo)
    assert math.isnan(one_sided_bound95([1.0], "lower"))
    with pytest.raises(ValueError, match="side"):
        one_sided_bound95(d, "both")


def test_config_validation():
    with pytest.raises(ValueError, match="claim_method"):
        Config(methods=("set",), claim_method="rigl")
    with pytest.raises(ValueError, match="noise_impulse"):
        Config(noise_impulse=(0.5, 1.5))
    with pytest.raises(ValueError, match="noise_gaussian"):
        Config(noise_gaussian=(float("nan"),))
    with pytest.raises(ValueError, match="methods"):
        Config(methods=("snip",))
    with pytest.raises(ValueError, match="claim_sparsity"):
        Config(sparsities=(0.3,), claim_sparsity=0.5)


def test_dotted_overrides_reach_every_arm_and_the_training():
    """``--set dst.delta_t=… dst.p0=… train.lr=…`` reach each DST arm's DSTConfig (method, sparsity and regrow
    still from the arm) and the SGD recipe every arm trains with; bad values name the nested field."""
    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.harness.runs import UsageError

    mod = experiment_module("dst_robustness")
    cfg = effective_config(
        mod, "quick", overrides=["dst.delta_t=7", "dst.p0=0.3", "dst.mest_lambda=0.5", "train.lr=0.01"]
    )[0]
    arms = dict(cfg.arms())
    assert arms["dense"] is None and set(arms) == {"dense", "rigl_s50", "set_s50"}
    for name, method in (("rigl_s50", "rigl"), ("set_s50", "set")):
        d = arms[name]
        assert (d.method, d.sparsity, d.regrow, d.delta_t, d.p0, d.mest_lambda) == (
            method,
            0.5,
            None,
            7,
            0.3,
            0.5,
        )
    assert (cfg.train.lr, cfg.train.epochs, cfg.train.momentum) == (0.01, 12, 0.9)
    with pytest.raises(UsageError, match="dst: delta_t must be a positive int, got 0"):
        effective_config(mod, "quick", overrides=["dst.delta_t=0"])
    with pytest.raises(UsageError, match=r"train: momentum must be a number in \[0, 1\)"):
        effective_config(mod, "quick", overrides=["train.momentum=1.0"])
    with pytest.raises(UsageError, match="dst.sparsity is set per arm"):
        effective_config(mod, "quick", overrides=["dst.sparsity=0.9"])
    with pytest.raises(UsageError, match=r"did you mean dst\.delta_t\?"):
        effective_config(mod, "quick", overrides=["delta_t=7"])
