"""The velocity-task cost measurement behind the card's table: finite positive costs, the 16-env batch cheaper per
env step than one env, bad counts refused."""

import math

import pytest

from iclr25.fosp.cost import main, measure


def test_cost_measurement_on_quick_sizes():
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
    assert "full" not in r


@pytest.mark.parametrize(
    "args, match",
    [((0, 1, 1), "wm_updates"), ((1, True, 1), "offline_updates"), ((1, 1, -2), "env_steps")],
)
def test_cost_bad_counts(args, match):
    with pytest.raises(ValueError, match=match):
        measure(*args, sizes=("quick",))


def test_cost_bad_sizes(capsys):
    with pytest.raises(ValueError, match="sizes"):
        measure(1, 1, 1, sizes=("paper",))
    assert main(["--sizes", "paper"]) == 2
    assert "sizes" in capsys.readouterr().err
