import dataclasses

import pytest

from iclr25.errors import UsageError
from iclr25.harness.artefacts import write_run
from iclr25.harness.configs import effective_config, experiment_module
from iclr25.law import experiment, setting
from iclr25.law.experiment import PRESETS, Config, run


class _Reached(Exception):
    pass


def test_config_validation():
    with pytest.raises(ValueError, match="edit_layers"):
        Config(layers=2, edit_layers=(0, 5))
    with pytest.raises(ValueError, match="wash_fraction"):
        Config(wash_fraction=0.0)
    with pytest.raises(ValueError, match="ft_lrs"):
        Config(ft_lrs=())
    with pytest.raises(ValueError, match="lam_grid"):
        Config(lam_grid=(10.0, float("nan")))
    with pytest.raises(ValueError, match="sweep_fractions"):
        Config(sweep_fractions=(0.95,))  # the tuning subjects are held out of every washed subset
    assert set(PRESETS) == {"smoke", "quick", "real", "full"}


def test_dotted_overrides_reach_the_world_and_the_z_config(monkeypatch):
    """``--set world.subjects=30 --set z.steps=7`` (issue #39: the world and MEMIT's target-vector optimisation are
    the nested WorldConfig / ZConfig) reach the World one_seed builds (its seed the run's seed) and the ZConfig that
    LaW and MEMIT→EOS receive."""
    cfg, applied = effective_config(
        experiment_module("law"),
        "smoke",
        overrides=["world.subjects=30", "world.relation_first=false", "z.steps=7", "z.clamp=2.5", "seed=3"],
    )
    assert applied == {
        "world.subjects": 30, "world.relation_first": False, "z.steps": 7, "z.clamp": 2.5, "seed": 3
    }  # fmt: skip
    smoke = PRESETS["smoke"]
    assert cfg.world == dataclasses.replace(smoke.world, subjects=30, relation_first=False)
    assert cfg.z == dataclasses.replace(smoke.z, steps=7, clamp=2.5)
    seen = {}

    def fake_train_model(cfg_, world, cache, device="cpu"):
        seen["world"] = world
        raise _Reached

    monkeypatch.setattr(setting, "train_model", fake_train_model)
    with pytest.raises(_Reached):
        experiment.one_seed(cfg, 0)
    w = seen["world"].cfg
    assert w == dataclasses.replace(cfg.world, seed=3)  # world.seed is the run's seed
    assert (w.subjects, w.first_names, w.objects, w.recall_keys, w.recall_values) == (30, 6, 12, 8, 8)
    assert len(seen["world"].facts()) == 30 * 4 and seen["world"]._prompt("f0 u0", "r0") == "f0 u0 r0"

    # the ZConfig LaW (wash) and MEMIT→EOS receive is cfg.z
    st = object.__new__(setting.Setting)
    st.cfg, st.model, st.tok, st.cov, st.facts, st.lam = cfg, None, None, {}, [], 10.0
    got = []
    monkeypatch.setattr(setting, "wash", lambda *a, z, **k: got.append(z))
    monkeypatch.setattr(setting, "memit_to_eos", lambda *a, z, **k: got.append(z))
    st.law([])
    st.memit([])
    assert got == [cfg.z, cfg.z] and (got[0].steps, got[0].clamp, got[0].kl_factor) == (7, 2.5, 0.0)


def test_a_bad_nested_value_names_the_nested_field():
    exp = experiment_module("law")
    with pytest.raises(UsageError, match=r"world: subjects must be a positive int, got 0"):
        effective_config(exp, "smoke", overrides=["world.subjects=0"])
    with pytest.raises(UsageError, match=r"z: lr must be a .*number.*got -0.5"):
        effective_config(exp, "smoke", overrides=["z.lr=-0.5"])
    with pytest.raises(UsageError, match=r"world.seed is the run's seed .*set seed instead, got 2"):
        effective_config(exp, "smoke", overrides=["world.seed=2"])
    with pytest.raises(UsageError, match=r"world.recall_values must equal world.recall_keys .*got 8 and 16"):
        effective_config(exp, "smoke", overrides=["world.recall_keys=16"])
    assert effective_config(exp, "smoke", overrides=["world.recall_keys=16", "world.recall_values=16"])
    with pytest.raises(UsageError, match=r"z.kl_factor must stay 0"):
        effective_config(exp, "smoke", overrides=["z.kl_factor=0.1"])
    with pytest.raises(UsageError, match=r"wash_fraction × world.subjects must be ≥ 1, got 0.1 × 4"):
        effective_config(exp, "smoke", overrides=["world.subjects=4"])
    with pytest.raises(UsageError, match=r"'subjects' \(did you mean world.subjects"):
        effective_config(exp, "smoke", overrides=["subjects=30"])


@pytest.mark.slow
def test_smoke_run_and_resume(tmp_path):
    cfg = dataclasses.replace(PRESETS["smoke"], seeds=1)
    res = run(cfg, tmp_path)
    assert [c.id for c in res.claims] == ["washed", "retained", "reasoning_kept"]
    ps = res.per_seed[0]
    model = res.metrics["model"]
    assert model["lam"] in cfg.lam_grid  # λ chosen from the grid on the held-out tuning subjects
    assert not set(model["tune_subjects"]) & set(ps["washed_subjects"])  # tuning subjects never evaluated
    assert set(ps["ablation"]) == {"no_elimination", "random_init"}  # the paper's ablations, report only
    for sweep_key in ps["sweep"]:
        assert 0 <= ps["sweep"][sweep_key]["law"]["retained"] <= 1
    for m in ("before", "law", "memit", "ft_ul", "ft_eos"):
        assert 0 <= ps[m]["retained"] <= 1 and 0 <= ps[m]["recall"] <= 1
    for layer in ps["law_layers"]:  # the C-norm constraint held on the real run
        assert layer["ratio"] <= layer["beta"] * (1 + 1e-9)
    # FT baselines stop at LaW's forgetting level (or run out of their step budget)
    for k in ("ft_ul", "ft_eos"):
        assert ps[k]["reached_target"] == 1.0 or ps[k]["steps"] == cfg.ft_max_steps
        if ps[k]["reached_target"]:
            assert ps[k]["washed"] <= ps["law"]["washed"] + 1e-12
    res.slug, res.preset = "law", "smoke"
    write_run(res, cfg, tmp_path)
    assert (tmp_path / "claims.json").exists() and res.figures[0].exists()
    res2 = run(cfg, tmp_path)  # resumes: the model and the seed are read back from disk
    assert res2.per_seed[0] == res.per_seed[0]


def test_training_stops_early_once_known(tmp_path, monkeypatch):
    """Early stopping: once facts and recall are known at an evaluation, training ends there; with an
    unreachable stop level it runs the full step budget. The trained model is cached with its training record."""
    import iclr25.law.setting as ex

    base = dataclasses.replace(PRESETS["smoke"], train_steps=40, eval_every=20)
    w = ex.make_world(base)
    with monkeypatch.context() as mp:  # every accuracy reads 0.995: the stop level 0.99 is met at step 20
        mp.setattr(ex, "fact_accuracy", lambda *a, **k: 0.995)
        _, info = ex.train_model(dataclasses.replace(base, train_stop_at=0.99), w, tmp_path / "a")
    assert info["steps"] == 20 and [t["step"] for t in info["trace"]] == [20]
    train_model = ex.train_model
    m, info2 = train_model(dataclasses.replace(base, train_stop_at=1.0), w, tmp_path / "b")
    assert info2["steps"] == 40 and [t["step"] for t in info2["trace"]] == [20, 40]
    _, again = train_model(dataclasses.replace(base, train_stop_at=1.0), w, tmp_path / "b")  # read back
    assert again == info2


@pytest.mark.slow
def test_full_preset_is_the_papers_model_on_the_gpu():
    """The GPU preset names the paper's model (GPT2-XL) and runs on cuda; tests/law/test_law_real.py runs the same
    config path end to end on a local GPT-2 miniature (nothing is downloaded in tests)."""
    full = PRESETS["full"]
    assert full.model == "gpt2-xl" and full.device == "cuda"
