import json

from iclr25.certainty_calibration import experiment
from iclr25.cli import run_system


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
