"""Run folders: artefacts, resume after a kill, determinism, and the config hash guarding resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.common.io import atomic_write_json, read_json
from iclr25.harness.rundir import RunDir
from iclr25.harness.runs import run_experiment

sys.path.insert(0, str(Path(__file__).parent))
import toy_experiment as toy  # noqa: E402

HERE = Path(__file__).parent


def test_run_writes_every_artefact(tmp_path):
    doc = run_experiment(toy, "toy", "smoke", tmp_path, seeds=3)
    d = tmp_path / "toy"
    for f in ("config.json", "metrics.json", "claims.json", "report.md", "figures/acc.png"):
        assert (d / f).is_file(), f
    validate_claims_document(read_json(d / "claims.json"))
    assert doc["seeds"] == [0, 1, 2]
    verdicts = {c["id"]: c["holds"] for c in doc["claims"]}
    assert verdicts == {"gain": True, "too_good": False}
    m = read_json(d / "metrics.json")
    assert set(m["per_seed"]) == {"0", "1", "2"} and "ours/acc" in m["aggregate"]
    assert read_json(d / "config.json")["n"] == 50
    assert "Claims held: 1/2" in (d / "report.md").read_text()


def test_same_seed_gives_identical_metrics(tmp_path):
    run_experiment(toy, "toy", "smoke", tmp_path / "a", seeds=2)
    run_experiment(toy, "toy", "smoke", tmp_path / "b", seeds=2)
    assert (tmp_path / "a/toy/metrics.json").read_bytes() == (tmp_path / "b/toy/metrics.json").read_bytes()


def test_resume_skips_finished_seeds(tmp_path, monkeypatch):
    log = tmp_path / "calls.txt"
    monkeypatch.setenv("TOY_CALL_LOG", str(log))
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=3)  # seeds 0 and 1 are on disk already
    assert log.read_text().split() == ["0", "1", "2"]


def test_changed_config_recomputes(tmp_path, monkeypatch):
    log = tmp_path / "calls.txt"
    monkeypatch.setenv("TOY_CALL_LOG", str(log))
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=1)
    run_experiment(toy, "toy", "quick", tmp_path, seeds=1)  # other n: the cached seed is stale
    assert log.read_text().split() == ["0", "0"]


def test_corrupt_seed_file_is_recomputed(tmp_path):
    rd = RunDir(tmp_path, toy.Config())
    rd.seed_file(0).parent.mkdir(parents=True, exist_ok=True)
    rd.seed_file(0).write_text("{ truncated")
    assert rd.load_seed(0) is None


def test_kill_and_restart_skips_finished_seeds(tmp_path):
    """A real SIGKILL mid-run: the restarted run recomputes only the seeds that had not finished."""
    log = tmp_path / "calls.txt"
    script = (
        "import sys; sys.path.insert(0, %r); import toy_experiment as t;"
        "from iclr25.harness.runs import run_experiment; run_experiment(t, 'toy', 'smoke', %r, seeds=4)"
    ) % (str(HERE), str(tmp_path))
    env = {**os.environ, "TOY_CALL_LOG": str(log), "TOY_SLEEP": "1.0"}
    p = subprocess.Popen([sys.executable, "-c", script], env=env)
    seed_dir = tmp_path / "toy" / "seeds"
    deadline = time.time() + 60
    while time.time() < deadline and not (seed_dir / "seed_1.json").exists():
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    done = sorted(f.name for f in seed_dir.glob("seed_*.json"))
    assert "seed_1.json" in done and "seed_3.json" not in done
    before = log.read_text().split()
    subprocess.run([sys.executable, "-c", script], env={**env, "TOY_SLEEP": "0"}, check=True)
    after = log.read_text().split()[len(before) :]
    finished = {int(n[5:-5]) for n in done}
    assert set(after) == {str(s) for s in range(4) if s not in finished}
    assert json.loads((tmp_path / "toy" / "claims.json").read_text())["seeds"] == [0, 1, 2, 3]


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    f = tmp_path / "x.json"
    atomic_write_json(f, {"a": 1})

    class Boom:
        pass

    with pytest.raises(TypeError):
        atomic_write_json(f, {"a": Boom()})
    assert read_json(f) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_parallel_seeds_give_identical_results(tmp_path, monkeypatch):
    from iclr25.harness.workers import set_jobs

    log = tmp_path / "calls.txt"
    monkeypatch.setenv("TOY_CALL_LOG", str(log))
    run_experiment(toy, "toy", "smoke", tmp_path / "seq", seeds=4)
    set_jobs(2)
    try:
        run_experiment(toy, "toy", "smoke", tmp_path / "par", seeds=4)
    finally:
        set_jobs(1)
    assert (tmp_path / "seq/toy/metrics.json").read_bytes() == (
        tmp_path / "par/toy/metrics.json"
    ).read_bytes()
    assert sorted(log.read_text().split()) == sorted(
        ["0", "1", "2", "3"] * 2
    )  # each seed computed once per run


def test_first_seed_does_not_invalidate_cached_seeds(tmp_path, monkeypatch):
    log = tmp_path / "calls.txt"
    monkeypatch.setenv("TOY_CALL_LOG", str(log))
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=3)  # seeds 0, 1, 2
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2, seed=1)  # seeds 1, 2: both on disk
    assert log.read_text().split() == ["0", "1", "2"]


_BLOCKED_NET = r"""
import os, socket, sys, threading, time
for k in ("HF_HUB_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.pop(k, None)  # the run path must set these itself
attempts = []
def _refuse(what):
    def f(*a, **k):
        attempts.append((what, repr(a[1:] if what == "connect" else a)[:120]))
        raise OSError(101, "network blocked by the test")
    return f
socket.socket.connect = _refuse("connect")
socket.socket.connect_ex = _refuse("connect")
socket.create_connection = _refuse("create_connection")
socket.getaddrinfo = _refuse("getaddrinfo")
import iclr25
doc = iclr25.run("scope_faithfulness", preset="smoke", out=sys.argv[1])
for t in threading.enumerate():  # telemetry is sent from a daemon thread: let it try
    if t is not threading.current_thread() and t.daemon:
        t.join(timeout=2)
time.sleep(0.5)
print("ATTEMPTS", len(attempts), attempts[:3], "CLAIMS", len(doc["claims"]))
"""


@pytest.mark.slow
def test_a_smoke_run_with_trl_makes_no_connection_attempt(tmp_path):
    """scope_faithfulness trains with TRL's DPOTrainer, which reports its use through the hub's telemetry:
    with every socket call refused, the run finishes and nothing tried to connect."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_OFFLINE"))}
    env["ICLR25_QUIET"] = "1"
    r = subprocess.run(
        [sys.executable, "-c", _BLOCKED_NET, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("ATTEMPTS"))
    assert line.startswith("ATTEMPTS 0 "), line
    assert "CLAIMS 0" not in line
