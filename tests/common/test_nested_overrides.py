"""A library config nested in an experiment config is set field by field with dotted ``--set`` names (issue #39:
``--set agent.hidden=128`` instead of re-packing the library config field by field)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from iclr25.common.fields import apply_overrides, bounded, check_fields
from iclr25.common.results import ExperimentConfig, config_hash
from iclr25.errors import UsageError
from iclr25.harness.configs import effective_config, experiment_module, parse_overrides


@dataclasses.dataclass(frozen=True)
class Inner:
    width: int = bounded(8, lo=1)
    rate: float = bounded(0.1, kind=float, lo=0, hi=1)
    api_token: str = ""

    def __post_init__(self):
        check_fields(self)


@dataclasses.dataclass(frozen=True)
class Middle:
    inner: Inner = Inner()
    name: str = "m"


@dataclasses.dataclass(frozen=True)
class Outer(ExperimentConfig):
    steps: int = bounded(10, lo=1)
    mid: Middle = Middle()
    agent: Inner = Inner(width=16)

    def __post_init__(self):
        super().__post_init__()
        if self.steps < self.agent.width // 4:  # a cross-field rule over the nested config
            raise ValueError(f"steps must be >= agent.width // 4 = {self.agent.width // 4}, got {self.steps}")


def test_dotted_names_are_typed_against_the_nested_class_and_applied():
    ov = parse_overrides(Outer, ["agent.width=32", "mid.inner.rate=0.5", "steps=12", "mid.name=x"])
    assert ov == {"agent.width": 32, "mid.inner.rate": 0.5, "steps": 12, "mid.name": "x"}
    assert isinstance(ov["mid.inner.rate"], float)
    cfg = apply_overrides(Outer(), ov)
    assert cfg.agent == Inner(width=32) and cfg.mid.inner == Inner(rate=0.5) and cfg.mid.name == "x"
    assert cfg.steps == 12 and Outer().agent.width == 16  # the default instance is untouched
    # the same dict (as launch workers receive it) parses to the same values
    assert parse_overrides(Outer, dict(ov)) == ov


def test_a_nested_bad_value_names_the_nested_field():
    with pytest.raises(ValueError, match=r"^agent: width must be a positive int, got 0$"):
        apply_overrides(Outer(), parse_overrides(Outer, ["agent.width=0"]))
    with pytest.raises(
        ValueError, match=r"^mid: inner: rate must be a number in \[0, 1\] \(finite\), got nan$"
    ):
        apply_overrides(Outer(), {"mid.inner.rate": math.nan})
    # a cross-field rule of the outer config sees the rebuilt nested config
    with pytest.raises(ValueError, match="steps must be >= agent.width // 4 = 25"):
        apply_overrides(Outer(), {"agent.width": 100})
    with pytest.raises(UsageError, match=r"--set agent.width: expected int, got 'wide'"):
        parse_overrides(Outer, ["agent.width=wide"])


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("width=3", r"unknown config field 'width' \(did you mean mid.inner.width or agent.width\?\)"),
        ("agent.wdth=3", r"unknown config field 'agent.wdth'; fields of Inner: agent.width \(int\)"),
        (
            "agent=3",
            r"--set agent: agent is a nested Inner; set its fields one by one, as agent.<field>=value",
        ),
        ("steps.x=3", r"--set steps.x: steps is not a nested config"),
        ("agent..width=3", r"--set takes field=value \(or nested.field=value\), got field 'agent..width'"),
        ("agent.api_token=abc", r"--set agent.api_token=... is refused: API keys are never passed"),
    ],
)
def test_bad_dotted_names_are_refused_with_the_valid_ones(item, message):
    with pytest.raises(UsageError, match=message):
        parse_overrides(Outer, [item])


def test_the_config_hash_sees_nested_fields():
    assert config_hash(Outer()) != config_hash(apply_overrides(Outer(), {"agent.rate": 0.2}))
    assert config_hash(Outer()) == config_hash(apply_overrides(Outer(), {"agent.rate": 0.1}))


def test_fosp_agent_fields_reach_every_arm_that_shares_them():
    exp = experiment_module("fosp")
    cfg, applied = effective_config(exp, "smoke", overrides=["agent.hidden=48", "agent.tau_r=0.3"])
    assert applied == {"agent.hidden": 48, "agent.tau_r": 0.3}
    # sizes are shared by every arm; tau_r is an algorithm switch of the FOSP arms only
    for arm in ("fosp", "fosp_noref", "safedreamer", "dreamerv3", "official"):
        assert cfg.agent_config(arm).hidden == 48
    assert cfg.agent_config("fosp").tau_r == cfg.agent_config("fosp_noref").tau_r == 0.3
    assert cfg.agent_config("safedreamer").tau_r == 0.5 and cfg.agent_config("official").tau_r == 0.2
    assert cfg.agent_config("fosp_noref").ref is False and cfg.agent_config("fosp").ref is True
    with pytest.raises(
        UsageError,
        match=r"agent.device is the run's device \(the config's device / --device\); leave it at 'cpu'",
    ):
        effective_config(exp, "smoke", overrides=["agent.device=cuda"])


def test_check_nested_names_the_type_and_the_fixed_field():
    """The one validator for nested library configs: the type, then each fixed field against the class default."""
    from dataclasses import dataclass

    from iclr25.common.fields import check_nested

    @dataclass(frozen=True)
    class Lib:
        lr: float = 0.1
        seed: int = 0
        mode: str = "a"

    @dataclass(frozen=True)
    class Exp:
        lib: object = Lib()

    check_nested(Exp(), "lib", Lib, ("seed", "mode"), "set per arm")  # defaults pass
    check_nested(Exp(Lib(lr=0.5)), "lib", Lib, ("seed",), "set per arm")  # a free field may change
    with pytest.raises(ValueError, match=r"^lib must be of type Lib, got dict$"):
        check_nested(Exp({"lr": 0.5}), "lib", Lib)
    with pytest.raises(ValueError, match=r"^lib\.seed is set per seed; leave it at 0, got 3$"):
        check_nested(Exp(Lib(seed=3)), "lib", Lib, ("seed", "mode"), {"seed": "set per seed", "mode": "x"})
    with pytest.raises(ValueError, match=r"^lib\.mode is set per arm; leave it at 'a', got 'b'$"):
        check_nested(Exp(Lib(mode="b")), "lib", Lib, ("seed", "mode"), "set per arm")
