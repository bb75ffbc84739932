"""Smoke run of the HGM experiment (preset smoke): claims schema, figure, resume, config validation."""

import json

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.harness.artefacts import write_run
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

    from iclr25.hgm.toyhumans import make_toyhumans
    from iclr25.hgm.training import build_model

    cfg = PRESETS["full"]
    quick = PRESETS["quick"]
    assert cfg.n_train > quick.n_train and cfg.steps >= 1000 and cfg.budget_s is None  # step-limited, long
    # quick: a step budget per arm (equal in expectation to 50 idle CPU-s each), no CPU-time budget (issue #50)
    assert quick.budget_s is None and quick.refiner_budget_s is None and quick.arm_steps is not None
    assert [quick.steps_for(a) for a in ("image_only", "dual", "two_view")] == list(quick.arm_steps)
    data = make_toyhumans(1, seed=0, size=cfg.model.image_size, num_points=2000)
    m = build_model(cfg, True, data.prior_vertices.shape[1])
    out = m(data.images[:, [0]], data.camera[[0]], data.prior_vertices)
    assert out.merged.num == cfg.model.splat_size**2 and torch.isfinite(out.merged.means).all()


def test_full_preset_asks_for_cuda_and_prints_without_it(capsys):
    from iclr25.harness.cli import main

    assert PRESETS["full"].device == "cuda"
    main(["config", "hgm", "--preset", "full"])  # printing the config must not need a GPU
    assert '"device": "cuda"' in capsys.readouterr().out.replace("'", '"')


@pytest.mark.parametrize("sup_views", [2, 3, 4, 8])
@pytest.mark.parametrize("in_views", [[0], [0, 6]])
def test_supervision_always_includes_views_that_are_not_inputs(in_views, sup_views):
    import torch

    from iclr25.hgm.training import BACK, supervision_views

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

    from iclr25.hgm.training import supervision_views

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


class _Reached(Exception):
    pass


def test_dotted_overrides_reach_the_models_one_seed_builds(monkeypatch):
    """``--set model.heads=2 --set model.grid=8`` (issue #39: the model is the nested HGMConfig) reach the HGMConfig
    each trained model is built from; one_seed sets the vertex count and the arm (image-only, then dual)."""
    import dataclasses

    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.hgm import experiment, training

    cfg, applied = effective_config(
        experiment_module("hgm"), "smoke", overrides=["model.heads=2", "model.grid=8", "model.code_dim=8"]
    )
    assert applied == {"model.heads": 2, "model.grid": 8, "model.code_dim": 8}
    assert cfg.model == dataclasses.replace(PRESETS["smoke"].model, heads=2, grid=8, code_dim=8)
    seen = []
    real = training.HGM

    def fake_hgm(mcfg):
        seen.append(mcfg)
        if len(seen) == 2:
            raise _Reached
        return real(mcfg)

    monkeypatch.setattr(training, "HGM", fake_hgm)
    monkeypatch.setattr(experiment, "train_model", lambda *a, **k: {"steps": 0, "cpu_s": 0.0, "wall_s": 0.0})
    with pytest.raises(_Reached):
        experiment.one_seed(cfg, 0)
    nv = training.make_data(cfg)[0].prior_vertices.shape[1]
    for mcfg, use_body in zip(seen, (False, True)):
        assert mcfg == dataclasses.replace(cfg.model, num_vertices=nv, use_body=use_body)
        assert (mcfg.heads, mcfg.grid, mcfg.code_dim, mcfg.image_size, mcfg.feat_dim) == (2, 8, 8, 16, 16)


def test_a_bad_nested_value_names_the_nested_field():
    from iclr25.errors import UsageError
    from iclr25.harness.configs import effective_config, experiment_module

    exp = experiment_module("hgm")
    with pytest.raises(UsageError, match=r"model: heads must be a positive int, got 0"):
        effective_config(exp, "smoke", overrides=["model.heads=0"])
    with pytest.raises(UsageError, match=r"model: feat_dim \(16\) must be divisible by heads \(3\)"):
        effective_config(exp, "smoke", overrides=["model.heads=3"])
    with pytest.raises(UsageError, match=r"model: channels must each be a multiple of 4"):
        effective_config(exp, "smoke", overrides=["model.channels=8,16,18"])
    for name, value in (("use_body", "false"), ("num_vertices", "100")):
        with pytest.raises(UsageError, match=rf"model.{name} is set per body model and arm"):
            effective_config(exp, "smoke", overrides=[f"model.{name}={value}"])
    with pytest.raises(UsageError, match=r"aux_downscale must divide model.image_size/2; got 3 for 16"):
        effective_config(exp, "smoke", overrides=["aux_downscale=3"])


def test_arm_steps_is_a_step_budget_per_trained_arm_and_a_rerun_repeats_it():
    """issue #50: the quick preset's CPU-second budgets made the step count (and so the numbers) depend on the
    machine and its load. ``arm_steps`` caps each trained arm at its own step count, with no CPU budget: every arm
    takes exactly its steps, and a second computation of the seed is identical."""
    import dataclasses

    cfg = dataclasses.replace(PRESETS["smoke"], arm_steps=(1, 2, 3), refiner_steps=2)
    a = one_seed(cfg, 0)
    assert a["steps"] == {"image_only": 1, "dual": 2, "refiner": 2, "two_view": 3}
    b = one_seed(cfg, 0)

    def numbers(r):  # NaN (an empty α > 0.5 set) compares equal as text
        return json.dumps({k: v for k, v in r.items() if k not in ("time_s", "cpu_s")}, sort_keys=True)

    assert numbers(a) == numbers(b)
    assert cfg.steps_for("dual") == 2 and PRESETS["smoke"].steps_for("dual") == PRESETS["smoke"].steps
    with pytest.raises(ValueError, match="arm_steps must be None or a tuple of 3"):
        dataclasses.replace(cfg, arm_steps=(1, 2))
    with pytest.raises(ValueError, match="arm must be one of image_only, dual, two_view, got 'refined'"):
        cfg.steps_for("refined")
