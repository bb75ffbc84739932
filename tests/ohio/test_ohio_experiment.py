"""Smoke run of the experiment (preset smoke), claims schema, resume, config validation."""

import json
import math

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.harness.artefacts import write_run
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


def test_ablation_claims_take_only_the_numerical_arms_from_the_variant():
    from iclr25.ohio.experiment import ABLATION, ablation_claims, build_claims
    from iclr25.ohio.report import _ablation_md

    def seed(num, hr_num, me_num):
        r = {
            "e2e_bc": 0.8,
            "ohio_numerical": 0.9,
            "hr_ohio_numerical": 0.9,
            "hr_observed_state": 0.3,
            "me_ohio_numerical": 0.9,
            "me_ohio_analytic": 0.5,
        }
        r["ablation"] = {
            "lm_lambda_0": {"ohio_numerical": num, "hr_ohio_numerical": hr_num, "me_ohio_numerical": me_num}
        }
        return {"reacher": r, "network": {"ohio_loss": 0.0, "e2e_loss": 0.4}}

    per_seed = {0: seed(0.5, 0.4, 0.52), 1: seed(0.5, 0.4, 0.52)}
    base = {
        c.id: c
        for c in build_claims(lambda k: [per_seed[s][k.split("/")[0]][k.split("/")[1]] for s in (0, 1)])
    }
    abl = {c.id: c for c in ablation_claims(per_seed, "lm_lambda_0")}
    assert all(base[i].holds for i in base)  # defaults: every claim holds on these numbers
    assert not abl["ohio_parity"].holds and abl["ohio_parity"].parts[0].measured == pytest.approx(0.5)
    assert not abl["observed_state_fails"].holds  # 0.3 / 0.4 = 0.75 > 0.5
    assert abl["observed_state_fails"].measured == pytest.approx(0.75)
    assert not abl["model_error_robust"].holds  # 0.52 − 0.5 = 0.02 < 0.05
    assert abl["network_transfer"].holds  # untouched by the inverse
    md = _ablation_md({"lm_lambda_0": list(abl.values())})
    assert "| lm_lambda_0 |" in md and "✗" in md
    assert set(ABLATION) == {"adam_official", "lm_lambda_0", "lm_lambda_1e-6", "lm_lambda_1e-4"}


def test_config_rejects_bad_inverse_settings():
    with pytest.raises(ValueError, match="solver"):
        Config(solver="sgd")
    with pytest.raises(ValueError, match="prior"):
        Config(prior=float("nan"))
    with pytest.raises(ValueError, match="adam_lr"):
        Config(adam_lr=0.0)
    assert Config().solver == "adam" and Config().prior == 0.0  # the documented default (issue #16)


def test_learners_take_a_device_and_return_cpu_policies():
    """Issue #35: ``Config.device`` reaches the BC / IQL learners; on the CPU the default and an explicit
    ``device="cpu"`` train the same weights, and the policy comes back on the CPU for the numpy rollouts."""
    import numpy as np
    import torch

    from iclr25.ohio.learners import IQLConfig, train_bc, train_iql
    from iclr25.ohio.relabel import OfflineDataset

    rng = np.random.default_rng(0)
    n = 64
    ds = OfflineDataset(
        rng.normal(size=(n, 3)), rng.normal(size=(n, 2)), rng.normal(size=n), rng.normal(size=(n, 3)),
        np.zeros(n, bool), np.zeros(n, bool),
    )  # fmt: skip
    a = train_bc(ds, steps=5, batch_size=8, hidden=8, seed=1)
    b = train_bc(ds, steps=5, batch_size=8, hidden=8, seed=1, device="cpu")
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert p.device.type == "cpu" and torch.equal(p, q)
    pi, _ = train_iql(ds, IQLConfig(steps=3, batch_size=8, hidden=8), seed=1, device=torch.device("cpu"))
    assert all(p.device.type == "cpu" for p in pi.parameters())
    assert pi.act(ds.observations[:2]).shape == (2, 2)
    assert PRESETS["full"].device == "auto" and PRESETS["quick"].device == "cpu"


class _Reached(Exception):
    """Raised by a monkeypatched step to stop one_seed once the object under test was built."""


def test_dotted_overrides_reach_the_arm_the_iql_arm_and_the_city(monkeypatch):
    """Issue #39: ``--set arm.m1=1.2 --set iql.expectile=0.9 --set network.cheap=0.4`` reach the ArmParams the data
    are collected with, the IQLConfig ``train_iql`` gets and the NetworkParams of network-lite; the IQL arm keeps
    the BC learners' width, batch size and learning rate."""
    import dataclasses

    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.ohio import experiment, lite

    ov = ["arm.m1=1.2", "iql.expectile=0.9", "iql.steps=7", "network.cheap=0.4"]
    ov += ["horizon=10", "n_expert=2", "n_noisy=1", "bc_steps=1", "eval_episodes=1", "adam_iters=2"]
    cfg, applied = effective_config(experiment_module("ohio"), "smoke", overrides=ov)
    assert applied["arm.m1"] == 1.2 and applied["iql.expectile"] == 0.9 and applied["network.cheap"] == 0.4
    smoke = PRESETS["smoke"]
    assert cfg.arm == dataclasses.replace(smoke.arm, m1=1.2) and cfg.arm.m2 == 1.0
    assert cfg.iql == dataclasses.replace(smoke.iql, expectile=0.9, steps=7)
    seen = {}
    flat = lite.collect_flat_dataset

    def spy_flat(n_expert, n_noisy, p, rng, **kw):
        seen["arm"] = p
        return flat(n_expert, n_noisy, p, rng, **kw)

    def fake_iql(ds, icfg, **kw):
        seen["iql"] = icfg
        raise _Reached

    def fake_net(P, *a, **kw):
        seen["network"] = P
        raise _Reached

    monkeypatch.setattr(lite, "collect_flat_dataset", spy_flat)
    monkeypatch.setattr(lite, "train_iql", fake_iql)
    monkeypatch.setattr(lite, "collect_network_dataset", fake_net)
    with pytest.raises(_Reached):
        experiment.one_seed(cfg, 0)
    assert seen["arm"] == cfg.arm and seen["arm"].m1 == 1.2
    i = seen["iql"]
    assert (i.expectile, i.beta, i.steps) == (0.9, 3.0, 7)
    assert (i.hidden, i.batch_size, i.lr) == (cfg.bc_hidden, cfg.batch_size, cfg.bc_lr) == (64, 256, 1e-3)
    with pytest.raises(_Reached):
        lite.network_lite(cfg, 0)
    assert seen["network"] == cfg.network and seen["network"].cheap == 0.4


def test_a_bad_nested_value_names_the_nested_field():
    from iclr25.errors import UsageError
    from iclr25.harness.configs import effective_config, experiment_module

    exp = experiment_module("ohio")
    with pytest.raises(UsageError, match=r"iql: expectile must be a number in \(0, 1\).*got 1.0"):
        effective_config(exp, "smoke", overrides=["iql.expectile=1.0"])
    with pytest.raises(UsageError, match=r"arm: m1 must be a positive number.*got 0.0"):
        effective_config(exp, "smoke", overrides=["arm.m1=0"])
    with pytest.raises(UsageError, match=r"network: n_nodes must be"):
        effective_config(exp, "smoke", overrides=["network.n_nodes=5"])
    # the IQL arm shares the BC learners' width / batch / lr: one without the other is refused, both together work
    with pytest.raises(UsageError, match=r"iql.hidden must equal bc_hidden = 128 .*set both\), got 64"):
        effective_config(exp, "smoke", overrides=["bc_hidden=128"])
    with pytest.raises(UsageError, match=r"iql.lr must equal bc_lr = 0.001 .*got 0.0003"):
        effective_config(exp, "smoke", overrides=["iql.lr=3e-4"])
    cfg, _ = effective_config(exp, "smoke", overrides=["bc_hidden=128", "iql.hidden=128"])
    assert cfg.iql.hidden == cfg.bc_hidden == 128
    with pytest.raises(UsageError, match=r"'expectile' \(did you mean iql.expectile"):
        effective_config(exp, "smoke", overrides=["expectile=0.9"])
