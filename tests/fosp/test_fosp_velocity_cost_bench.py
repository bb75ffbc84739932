"""The velocity-task cost benchmark behind the card's table: finite positive costs, the 16-env batch cheaper per
env step than one env, bad counts refused."""

import math

import pytest


def _bench():
    # imported in the test (the repository root is on sys.path under `python -m pytest`, as `make test` runs it)
    from benchmarks import bench_fosp_velocity_cost

    return bench_fosp_velocity_cost


def test_cost_measurement_on_quick_sizes():
    measure, markdown = _bench().measure, _bench().markdown
    r = measure(1, 1, 3, sizes=("quick",))
    assert r["dataset_rows"] == 3000 and r["env_id"] == "SafetyHalfCheetahVelocity-v1"
    q = r["quick"]
    for k in (
        "wm_cpu_s_per_1k",
        "offline_cpu_s_per_1k",
        "act_step_1env_cpu_s_per_1k",
        "act_step_16envs_cpu_s_per_1k",
    ):
        assert math.isfinite(q[k]) and q[k] > 0, k
    assert r["env_alone_16envs_cpu_s_per_1k"] > 0
    assert "full" not in r and "full_over_quick" not in r
    assert q["act_step_1env_over_16envs"] > 0
    md = markdown(r)
    assert "| quick |" in md and "| full |" not in md


def test_cost_benchmark_writes_its_table(tmp_path):
    main = _bench().main
    assert (
        main(["--wm", "1", "--offline", "1", "--env-steps", "2", "--sizes", "quick", "--out", str(tmp_path)])
        == 0
    )
    assert (tmp_path / "results.md").read_text().startswith("# FOSP on SafetyHalfCheetahVelocity-v1")
    assert "quick" in __import__("json").loads((tmp_path / "results.json").read_text())


@pytest.mark.parametrize(
    "args, match",
    [((0, 1, 1), "wm_updates"), ((1, True, 1), "offline_updates"), ((1, 1, -2), "env_steps")],
)
def test_cost_bad_counts(args, match):
    measure = _bench().measure
    with pytest.raises(ValueError, match=match):
        measure(*args, sizes=("quick",))


def test_cost_bad_sizes(capsys):
    measure, main = _bench().measure, _bench().main
    with pytest.raises(ValueError, match="sizes"):
        measure(1, 1, 1, sizes=("paper",))
    assert main(["--sizes", "paper"]) == 2
    assert "sizes" in capsys.readouterr().err
