"""Smoke run of the HGM experiment (preset smoke): claims schema, figure, resume, config validation."""

import json

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.common.results import write_run
from iclr25.hgm.experiment import PRESETS, Config, claims, one_seed, run

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
    assert again.figures == [tmp_path / "figures" / "hgm_back_views.png"]
    assert len(claims(cfg, res.per_seed)) == len(CLAIM_IDS)
    # one_seed(cfg, seed) alone builds the shared data itself; a seed's numbers depend on its seed alone
    alone = one_seed(cfg, cfg.seed_list[1])
    assert json.dumps(_no_timings(alone)) == json.dumps(
        _no_timings(res.per_seed[cfg.seed_list[1]])
    )  # NaN too


def _no_timings(d: dict) -> dict:
    return {
        k: _no_timings(v) if isinstance(v, dict) else v for k, v in d.items() if k not in ("time_s", "cpu_s")
    }


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


def test_full_preset_asks_for_cuda_and_prints_without_it(capsys):
    from iclr25.cli import main

    assert PRESETS["full"].device == "cuda"
    main(["config", "hgm", "--preset", "full"])  # printing the config must not need a GPU
    assert '"device": "cuda"' in capsys.readouterr().out.replace("'", '"')


@pytest.mark.parametrize("sup_views", [2, 3, 4, 8])
@pytest.mark.parametrize("in_views", [[0], [0, 6]])
def test_supervision_always_includes_views_that_are_not_inputs(in_views, sup_views):
    import torch

    from iclr25.hgm.experiment import BACK, supervision_views

    gen = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(50):
        sup = supervision_views(in_views, sup_views, gen)
        assert sup[: len(in_views)] == in_views and len(set(sup)) == len(sup)
        extra = [v for v in sup if v not in in_views]
        assert len(extra) >= 1 and len(sup) == max(sup_views, len(in_views) + 1)
        if BACK not in in_views:
            assert BACK in sup  # the single-view models always see the back view
        seen.update(extra)
    if in_views == [0, 6]:  # the two-view model is supervised on random other views, not only its inputs
        assert len(seen) >= 5


def test_supervision_views_and_refinement_threshold_reject_bad_input():
    import torch

    from iclr25.hgm.experiment import supervision_views

    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="in_views"):
        supervision_views([0, 0], 3, gen)
    with pytest.raises(ValueError, match="in_views"):
        supervision_views([12], 3, gen)
    with pytest.raises(ValueError, match="sup_views"):
        supervision_views([0], 0, gen)
    with pytest.raises(ValueError, match="body_refine_threshold"):
        Config(body_refine_threshold=float("nan"))
    with pytest.raises(ValueError, match="body_refine_threshold"):
        Config(body_refine_threshold=1.0)
