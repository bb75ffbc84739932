"""Smoke run of the experiment (preset smoke), claims schema, resume, config validation."""

import json
import math

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.common.results import write_run
from iclr25.ohio.experiment import PRESETS, Config, run

CLAIM_IDS = {"ohio_parity", "observed_state_fails", "model_error_robust", "network_transfer"}


@pytest.mark.slow
def test_smoke_run_writes_claims_and_resumes(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    validate_claims_document(doc)
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for c in doc["claims"]:
        for part in c.get("parts", [c]):
            assert all(math.isfinite(v) for v in part["method"]["values"])
    d = res.per_seed[0]
    assert d["network"]["kept_frac"] == 1.0  # the exact LP inverse never fails its re-simulation check
    assert (tmp_path / "figures" / "ohio_returns.png").exists()
    again = run(cfg, tmp_path)  # resume: the seed is read back from disk, same numbers
    assert again.per_seed == res.per_seed


def test_config_validation():
    with pytest.raises(ValueError, match="horizon"):
        Config(horizon=201)
    with pytest.raises(ValueError, match="bc_steps"):
        Config(bc_steps=0)
    with pytest.raises(ValueError, match="prior"):
        Config(prior=-1.0)
