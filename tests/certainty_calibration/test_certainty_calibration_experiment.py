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
        bins=cfg.bins,
        eps=cfg.eps,
        tau=cfg.tau,
        solver=cfg.solver,
        n_bootstrap=cfg.n_bootstrap,
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
