"""Smoke run of the HGM experiment (preset smoke): claims schema, figure, resume, config validation."""

import json

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.common.results import write_run
from iclr25.hgm.experiment import PRESETS, Config, run

CLAIM_IDS = {"dual_branch_psnr", "dual_branch_chamfer", "refine_helps"}


def test_smoke_run_writes_claims_and_resumes(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    validate_claims_document(doc)
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for s in cfg.seed_list:  # every arm measured on every seed; PSNR is a real number
        for arm in ("image_only", "dual", "refined", "oracle"):
            assert 0 < res.per_seed[s][arm]["psnr_back"] < 60
    assert (tmp_path / "figures" / "hgm_back_views.png").exists()
    again = run(cfg, tmp_path)  # resume: seeds read back from disk, same numbers
    assert again.per_seed == res.per_seed


def test_config_validation():
    with pytest.raises(ValueError, match="steps"):
        Config(steps=0)
    with pytest.raises(ValueError, match="sup_views"):
        Config(sup_views=1)
    with pytest.raises(ValueError, match="lr"):
        Config(lr=-1.0)
    with pytest.raises(ValueError, match="budget_s"):
        Config(budget_s=float("nan"))
    with pytest.raises(ValueError, match="chamfer_frac"):
        Config(chamfer_frac=0.0)


def test_full_preset_builds_and_its_model_runs_at_toy_batch():
    import torch

    from iclr25.hgm.experiment import _model
    from iclr25.hgm.toyhumans import make_toyhumans

    cfg = PRESETS["full"]
    quick = PRESETS["quick"]
    assert cfg.n_train > quick.n_train and cfg.steps >= 1000 and cfg.budget_s is None  # step-limited, long
    assert quick.budget_s is not None and quick.budget_s > 0  # quick: equal CPU-time budget per arm
    data = make_toyhumans(1, seed=0, size=cfg.image_size, num_points=2000)
    m = _model(cfg, True, data.prior_vertices.shape[1])
    out = m(data.images[:, [0]], data.camera[[0]], data.prior_vertices)
    assert out.merged.num == cfg.splat_size**2 and torch.isfinite(out.merged.means).all()
