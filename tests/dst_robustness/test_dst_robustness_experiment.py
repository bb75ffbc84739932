"""Smoke run of the reproduction: claim ids, finite numbers, resume from disk."""

import json
import math
import time

from iclr25.common.results import write_run
from iclr25.dst_robustness.corruptions import COMMON_CORRUPTIONS
from iclr25.dst_robustness.experiment import PRESETS, Config, run


def test_smoke_run_and_resume(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
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
    # resume: the finished seed is read back, the numbers are identical and nothing is retrained
    t = time.perf_counter()
    res2 = run(cfg, tmp_path)
    assert time.perf_counter() - t < 10
    for arm in ("dense", "set_s50", "rigl_s50"):
        assert res2.per_seed[0][arm]["acc_grid"] == ps[arm]["acc_grid"]
    # regression: a seed whose dense reference makes no error on a corruption has mCE vs dense = NaN (stored as
    # null by older versions); the report crashed on it. It must say NaN and why, and the run must still finish.
    f = tmp_path / "seeds" / "seed_0.json"
    d = json.loads(f.read_text())
    d["result"]["dense"]["acc_grid"][0] = [100.0] * 5
    for arm in ("dense", "set_s50", "rigl_s50"):
        d["result"][arm]["mce_vs_dense"] = None
    f.write_text(json.dumps(d))
    res3 = run(cfg, tmp_path)
    assert "mCE vs dense is undefined (NaN) for 1/1 seeds" in res3.report_md
    assert f"seed 0: {COMMON_CORRUPTIONS[0]}" in res3.report_md
    res3.preset = "smoke"
    write_run(res3, cfg, tmp_path)
    assert [c["id"] for c in json.loads((tmp_path / "claims.json").read_text())["claims"]][
        0
    ] == "robust_not_worse"


def test_config_validation():
    import pytest

    with pytest.raises(ValueError, match="methods"):
        Config(methods=("snip",))
    with pytest.raises(ValueError, match="claim_sparsity"):
        Config(sparsities=(0.3,), claim_sparsity=0.5)
