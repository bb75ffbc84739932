"""Smoke run of the reproduction: claims.json has the fixed ids and finite numbers; a rerun resumes."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.harness.artefacts import write_run
from iclr25.pds.experiment import PRESETS, Config, run

CLAIM_IDS = {"clean_scores_highest", "scorer_fidelity", "final_loss", "acceleration"}


@pytest.mark.slow
def test_smoke_run_claims_and_resume(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    validate_claims_document(doc)
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for c in doc["claims"]:
        assert all(v is not None and math.isfinite(v) for v in c["method"]["values"])
    seed = res.per_seed[0]
    assert {"random", "pds", "dsir", "pds_t1"} <= set(seed)
    assert seed["pmp"]["dev_loss_T"] < seed["pmp"]["dev_loss_T0"]  # the PMP trajectory lowers J
    assert seed["pds"]["mix"]["clean"] > seed["random"]["mix"]["clean"]  # PDS keeps more target-like data
    assert (tmp_path / "figures" / "pds_curves.png").exists()
    again = run(cfg, tmp_path)  # finished seeds are read back from disk
    assert again.per_seed == res.per_seed


@pytest.mark.parametrize(
    "field, value",
    [("ratio", 0.0), ("scorer", "bert"), ("proxy_size", 10**6), ("tau", -1.0), ("mix", (0.5, 0.5, 0.2, 0.2))],
)
def test_config_validation(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(PRESETS["smoke"], **{field: value})


def test_presets_are_configs():
    assert set(PRESETS) == {"smoke", "quick", "real", "full"} and all(
        isinstance(c, Config) for c in PRESETS.values()
    )
    assert PRESETS["quick"].ratio == 0.4 and PRESETS["quick"].tau == 0.1 and PRESETS["quick"].seeds == 3
