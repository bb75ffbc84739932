"""Run folders: artefacts, resume after a kill, determinism, and the config hash guarding resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iclr25.cli import run_experiment
from iclr25.common.claims import validate_claims_document
from iclr25.common.io import atomic_write_json, read_json
from iclr25.common.results import RunDir

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
        "from iclr25.cli import run_experiment; run_experiment(t, 'toy', 'smoke', %r, seeds=4)"
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
    from iclr25.common.results import set_jobs

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
