import json

import pytest

from iclr25.harness.runs import run as run_system
from iclr25.topic_unlearning import experiment


@pytest.mark.slow
def test_smoke_run_measures_every_claim(tmp_path):
    doc = run_system("topic_unlearning", "smoke", tmp_path)
    assert [c["id"] for c in doc["claims"]] == [
        "newton_vs_nothing",
        "cost_independent_of_n",
        "capacity_vs_noise_only",
        "head_easier_than_base",
    ]
    m = json.loads((tmp_path / "topic_unlearning" / "metrics.json").read_text())
    per = m["per_seed"]["0"]
    # the Newton step is far closer to retraining than doing nothing, and unlearning is cheaper than retraining
    assert per["min_ratio_nothing_over_newton"] > 2
    t = json.loads((tmp_path / "topic_unlearning" / "timings.json").read_text())  # timings live apart
    cost = t["per_seed"]["0"]["cost"]["large"]
    assert cost["unlearn_s"] < cost["retrain_s"]
    assert "cost" not in per or "unlearn_s" not in per["cost"].get(
        "large", {}
    )  # metrics.json stays byte-stable
    assert m["aggregate"]["real_text"]["docs"] == 300
    assert "Real text" in (tmp_path / "topic_unlearning" / "report.md").read_text()


def test_config_validation():
    with pytest.raises(ValueError, match="newton_grid"):
        experiment.Config(newton_grid=(1, 10, 1000))
    with pytest.raises(ValueError, match="m_small"):
        experiment.Config(m=1000, m_small=2000)
