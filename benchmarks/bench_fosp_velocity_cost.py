"""FOSP on the velocity task: CPU cost per 1K updates and env steps (fosp's card, "Real inputs").

    python -m benchmarks.bench_fosp_velocity_cost --out DIR [--wm 20 --offline 5 --env-steps 200 --sizes full,quick]

For each agent size (the ``full`` and ``quick`` presets' ``agent``), one thread, process CPU time after a warm-up
update: world-model updates (``train_world_model``), offline updates with the world model trained too
(``train_offline(train_wm=True)``: world model + critics + actor), and the deterministic policy acting in 1 and in 16
vectorised ``SafetyHalfCheetahVelocity-v1`` environments (``evaluate``: act + step, no update). The dataset is one
1,000-step episode of each scripted behaviour (``collect_velocity_dataset``); the wrapped environment alone is timed
on uniform random actions. A measurement, not a claim: CPU time still moves with other load on the machine. Ratios in the same run: the
``full`` sizes' cost over the ``quick`` sizes', and one environment's cost per env step over 16 vectorised ones'.
Writes ``DIR/results.json`` and ``DIR/results.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

SIZES = ("full", "quick")


def measure(wm_updates: int, offline_updates: int, env_steps: int, sizes=SIZES) -> dict:
    import numpy as np
    import torch

    from iclr25.fosp.agent import FOSPAgent, evaluate, train_offline, train_world_model
    from iclr25.fosp.config import PRESETS
    from iclr25.fosp.velocity import collect_velocity_dataset, make_velocity_env, make_velocity_vec

    for name, v in (
        ("wm_updates", wm_updates),
        ("offline_updates", offline_updates),
        ("env_steps", env_steps),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    bad = [s for s in sizes if s not in SIZES]
    if bad or not sizes:
        raise ValueError(f"sizes must be a non-empty subset of {SIZES}, got {tuple(sizes)!r}")
    torch.set_num_threads(1)
    env_id = PRESETS["full"].env_id
    t = time.process_time()
    data = collect_velocity_dataset(env_id, episodes_per_policy=1, seed=0, max_steps=1000, batch_envs=3)
    n_rows = len(data.observations)
    out: dict = {"env_id": env_id, "dataset_rows": n_rows,
                 "collect_cpu_s_per_1k_steps": 1000 * (time.process_time() - t) / n_rows}  # fmt: skip
    space = make_velocity_env(env_id).action_space
    for name in sizes:
        acfg = dataclasses.replace(PRESETS[name].agent, device="cpu")
        ag = FOSPAgent(data.obs_shape, data.act_dim, acfg, seed=0, action_space=space)
        train_world_model(ag, data, 1)  # warm-up
        t = time.process_time()
        train_world_model(ag, data, wm_updates)
        wm = (time.process_time() - t) / wm_updates
        ag = FOSPAgent(data.obs_shape, data.act_dim, acfg, seed=1, action_space=space)
        train_offline(ag, data, 1, train_wm=True)  # warm-up
        t = time.process_time()
        train_offline(ag, data, 1 + offline_updates, train_wm=True)
        off = (time.process_time() - t) / offline_updates
        acts = {}
        for n in (1, 16):
            env = make_velocity_vec(env_id, n, env_steps)
            t = time.process_time()
            evaluate(ag, env=env, seed=0, max_steps=env_steps)
            acts[n] = (time.process_time() - t) / (n * env_steps)
        out[name] = {
            "wm_cpu_s_per_1k": 1000 * wm,
            "offline_cpu_s_per_1k": 1000 * off,
            "act_step_1env_cpu_s_per_1k": 1000 * acts[1],
            "act_step_16envs_cpu_s_per_1k": 1000 * acts[16],
        }
    env = make_velocity_vec(env_id, 16, env_steps)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    acts = rng.uniform(-1, 1, (env_steps, 16, 6)).astype(np.float32)
    t = time.process_time()
    for a in acts:
        env.step(a)
    out["env_alone_16envs_cpu_s_per_1k"] = 1000 * (time.process_time() - t) / (16 * env_steps)
    out["counts"] = {"wm_updates": wm_updates, "offline_updates": offline_updates, "env_steps": env_steps}
    for name in sizes:
        r = out[name]
        r["act_step_1env_over_16envs"] = r["act_step_1env_cpu_s_per_1k"] / r["act_step_16envs_cpu_s_per_1k"]
    if set(SIZES) <= set(sizes):
        out["full_over_quick"] = {
            k: out["full"][k] / out["quick"][k] for k in ("wm_cpu_s_per_1k", "offline_cpu_s_per_1k")
        }
    return out


def markdown(res: dict) -> str:
    lines = [
        f"# FOSP on {res['env_id']}: CPU cost (one thread)",
        "",
        "| agent sizes | per 1K world-model updates | per 1K offline updates | per 1K env steps: 1 env / 16 envs |",
        "|---|---|---|---|",
    ]
    for name in SIZES:
        if name in res:
            r = res[name]
            lines.append(
                f"| {name} | {r['wm_cpu_s_per_1k']:.4g} CPU-s | {r['offline_cpu_s_per_1k']:.4g} CPU-s | "
                f"{r['act_step_1env_cpu_s_per_1k']:.3g} / {r['act_step_16envs_cpu_s_per_1k']:.3g} CPU-s |"
            )
    lines.append(f"| env alone (16 envs) | — | — | {res['env_alone_16envs_cpu_s_per_1k']:.3g} CPU-s |")
    lines += [
        "",
        f"Collecting the offline data: {res['collect_cpu_s_per_1k_steps']:.3g} CPU-s per 1K steps.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_fosp_velocity_cost", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--wm", type=int, default=20, help="world-model updates timed (default 20)")
    ap.add_argument("--offline", type=int, default=5, help="offline updates timed (default 5)")
    ap.add_argument("--env-steps", type=int, default=200, help="steps per environment timed (default 200)")
    ap.add_argument("--sizes", default="full,quick", help="agent sizes: full, quick or both (default)")
    ap.add_argument("--out", type=Path, default=Path("bench-fosp-velocity-cost"), help="output folder")
    a = ap.parse_args(argv)
    try:
        res = measure(a.wm, a.offline, a.env_steps, tuple(s for s in a.sizes.split(",") if s))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from iclr25.common.io import atomic_write_json, atomic_write_text

    a.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(a.out / "results.json", res)
    md = markdown(res)
    atomic_write_text(a.out / "results.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
