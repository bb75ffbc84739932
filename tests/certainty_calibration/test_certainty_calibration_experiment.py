import json

import pytest

from iclr25.certainty_calibration import experiment
from iclr25.certainty_calibration.evaluation import digits_split_sweep
from iclr25.harness.runs import run as run_system


def test_smoke_run_measures_every_claim(tmp_path):
    doc = run_system("certainty_calibration", "smoke", tmp_path)
    ids = [c["id"] for c in doc["claims"]]
    assert ids == ["synthetic_gece_drop", "digits_gece_drop", "bin_robustness"]
    m = json.loads((tmp_path / "certainty_calibration" / "metrics.json").read_text())
    a = m["aggregate"]
    # OT must at least halve the synthetic speaker's error, even at smoke size
    assert a["A/ot/gece"]["mean"] < 0.5 * a["A/before/gece"]["mean"]
    assert a["A/bin_gap"]["mean"] < 0.01
    assert (
        tmp_path / "certainty_calibration" / "figures" / "reliability_and_map.png"
    ).stat().st_size > 10_000


def test_config_validation():
    import pytest

    with pytest.raises(ValueError, match="n_items"):
        experiment.Config(n_items=5)
    with pytest.raises(ValueError, match="source"):
        experiment.Config(phrases="tarot")


def _digits_reference(seed, scale=3.0):
    """Data B as the protocol states it, written out independently: the rest in train_test_split's order."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    X, d = load_digits(return_X_y=True)
    keep = np.isin(d, [3, 5, 8, 9])
    X, lab = X[keep], np.isin(d[keep], [3, 5]).astype(int)
    Xtr, Xrest, ytr, yrest = train_test_split(X, lab, train_size=0.4, random_state=seed, stratify=lab)
    pca = PCA(2, random_state=seed).fit(Xtr)
    lr = LogisticRegression().fit(pca.transform(Xtr), ytr)
    dec = lr.decision_function(pca.transform(Xrest))
    correct = ((dec >= 0).astype(int) == yrest).astype(float)
    conf = 1.0 / (1.0 + np.exp(-scale * np.abs(dec)))  # max(p, 1 − p)
    return conf, correct


def test_digits_speaker_keeps_the_protocol_split_order():
    """No extra permutation: item i of the rest is train_test_split's item i, so cal = its first half."""
    import numpy as np

    from iclr25.certainty_calibration import gpt4o

    ps = gpt4o(12)
    for seed in (0, 1):
        idx, y = experiment.digits_speaker(ps, 3.0, seed)
        conf, correct = _digits_reference(seed)
        np.testing.assert_array_equal(y, correct)
        np.testing.assert_array_equal(idx, ps.nearest(conf))


def test_digits_split_sweep_flags_follow_the_claim_thresholds():
    import numpy as np

    from iclr25.certainty_calibration import gpt4o

    ps = gpt4o(12)
    cfg = experiment.Config(seeds=1, alt_splits=4)
    idx, y = experiment.digits_speaker(ps, cfg.digits_scale, 1)
    kw = dict(
        alt_splits=cfg.alt_splits,
        ot=cfg.ot,
        bins=cfg.bins,
        seed=1,
        min_drop=experiment.DIGITS_MIN_DROP,
        max_brier_delta=experiment.DIGITS_MAX_BRIER_DELTA,
    )
    sw = digits_split_sweep(ps, idx, y, **kw)
    d, b = np.array(sw["drops"]), np.array(sw["brier_delta"])
    assert d.shape == b.shape == (4,)
    want = (d >= experiment.DIGITS_MIN_DROP) & (b <= experiment.DIGITS_MAX_BRIER_DELTA)
    assert sw["passed"] == want.astype(int).tolist()
    assert sw["pass_rate"] == want.mean()
    # the alternative splits are different halvings: the drops are not all equal, and re-running is identical
    assert np.ptp(d) > 0
    assert digits_split_sweep(ps, idx, y, **kw) == sw
    with pytest.raises(ValueError, match="alt_splits"):
        experiment.Config(alt_splits=-1)


def test_dotted_ot_overrides_reach_the_calibrator(monkeypatch):
    """The OT solve is the nested OTConfig (``--set ot.n_bootstrap=3 --set ot.eps=0.01``): one_seed fits its
    calibrators with exactly those settings."""
    from iclr25.certainty_calibration.transport import OTConfig
    from iclr25.harness.configs import effective_config, experiment_module

    cfg, applied = effective_config(
        experiment_module("certainty_calibration"), "smoke", overrides=["ot.n_bootstrap=3", "ot.eps=0.01"]
    )
    assert applied == {"ot.n_bootstrap": 3, "ot.eps": 0.01}
    assert cfg.ot == OTConfig(eps=0.01, n_bootstrap=3)
    seen = []

    class _Reached(Exception):
        pass

    def fake(ps, idx_cal, y_cal, idx_test, y_test, *, ot, bins, seed):
        seen.append(ot.calibrator(ps, bins, seed))
        raise _Reached

    monkeypatch.setattr(experiment, "evaluate_split", fake)
    with pytest.raises(_Reached):
        experiment.one_seed(cfg, 0)
    c = seen[0]
    assert (c.eps, c.tau, c.solver, c.n_bootstrap, c.bins, c.seed) == (
        0.01,
        1e-3,
        "sinkhorn_unbalanced",
        3,
        100,
        0,
    )


def test_a_bad_nested_ot_value_names_the_dotted_field():
    from iclr25.certainty_calibration.transport import OTConfig
    from iclr25.errors import UsageError
    from iclr25.harness.configs import effective_config, experiment_module

    exp = experiment_module("certainty_calibration")
    with pytest.raises(UsageError, match=r"ot: eps must be a number > 0, got 0"):
        effective_config(exp, "smoke", overrides=["ot.eps=0"])
    with pytest.raises(UsageError, match=r"ot: solver must be one of"):
        effective_config(exp, "smoke", overrides=["ot.solver=greedy"])
    with pytest.raises(UsageError, match=r"ot: n_bootstrap must be an int >= 0, got -1"):
        effective_config(exp, "smoke", overrides=["ot.n_bootstrap=-1"])
    with pytest.raises(UsageError, match=r"ot\.eps"):  # the old flat name is refused, naming the dotted one
        effective_config(exp, "smoke", overrides=["eps=0.01"])
    with pytest.raises(ValueError, match="ot must be of type OTConfig"):
        experiment.Config(ot={"eps": 0.01})
    assert experiment.PRESETS["full"].ot == OTConfig(n_bootstrap=100)
