import dataclasses

import pytest

from iclr25.common.results import write_run
from iclr25.law.experiment import PRESETS, Config, run


def test_config_validation():
    with pytest.raises(ValueError, match="edit_layers"):
        Config(layers=2, edit_layers=(0, 5))
    with pytest.raises(ValueError, match="wash_fraction"):
        Config(wash_fraction=0.0)
    with pytest.raises(ValueError, match="ft_lrs"):
        Config(ft_lrs=())
    assert set(PRESETS) == {"smoke", "quick", "full"}


@pytest.mark.slow
def test_smoke_run_and_resume(tmp_path):
    cfg = dataclasses.replace(PRESETS["smoke"], seeds=1)
    res = run(cfg, tmp_path)
    assert [c.id for c in res.claims] == ["washed", "retained", "reasoning_kept"]
    ps = res.per_seed[0]
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
