"""Seed workers and launchers: GPU assignment, spawned workers that replay run() up to their map_seeds call,
and submitit jobs (LocalExecutor: real subprocesses, real pickling of the job) assembled by the resume."""

import json
import os
import sys
from pathlib import Path

import pytest

from iclr25.common.device import auto_jobs, worker_gpus
from iclr25.harness.rundir import RunDir
from iclr25.harness.runs import run_experiment
from iclr25.harness.workers import set_jobs, set_start_method

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import toy_experiment as toy  # noqa: E402
import toy_workers as toyw  # noqa: E402


def test_worker_gpus_round_robin_over_a_faked_device_list():
    assert worker_gpus(2, ["0", "1", "2", "3"]) == ["0", "1"]
    assert worker_gpus(4, ["0", "1"]) == ["0", "1", "0", "1"]  # more workers than GPUs: shared in turn
    assert worker_gpus(3, ["GPU-aa", "GPU-bb", "GPU-cc"]) == ["GPU-aa", "GPU-bb", "GPU-cc"]
    assert worker_gpus(2, []) == [None, None]
    with pytest.raises(ValueError, match="n_workers"):
        worker_gpus(-1, ["0"])


def test_jobs_auto_is_the_gpu_count_on_cuda_and_the_cpu_count_otherwise():
    assert auto_jobs("cuda", gpus=["0", "1", "2"]) == 3
    assert auto_jobs("cuda", gpus=[]) == 1
    assert auto_jobs("cuda:1", gpus=["0", "1", "2"]) == 1  # one named GPU: one worker
    assert auto_jobs("cpu", gpus=["0", "1"], cpus=5) == 5


def test_visible_gpus_follows_cuda_visible_devices(monkeypatch):
    import torch

    from iclr25.common import device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5,GPU-x")
    assert device.visible_gpus() == ["2", "5", "GPU-x"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,-1,3")  # CUDA stops at the first invalid entry
    assert device.visible_gpus() == ["1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert device.visible_gpus() == []


@pytest.fixture
def spawned(monkeypatch):
    set_jobs(2)
    set_start_method("spawn")  # on CPU the default is fork; this runs the CUDA path's spawn workers
    yield
    set_jobs(1)
    set_start_method(None)


@pytest.mark.slow
def test_spawned_workers_are_pinned_to_their_own_gpu_and_give_identical_numbers(
    tmp_path, monkeypatch, spawned
):
    """Spawned workers (the start method used whenever CUDA is involved), pinned to a faked device list: every
    worker process sees exactly one GPU, no two workers the same, and metrics.json is byte-identical to a
    sequential run; both map_seeds calls (the grid, then the seeds that use the tuned value) are replayed."""
    log = tmp_path / "calls.txt"
    monkeypatch.setenv("TOYW_LOG", str(log))
    set_jobs(1)
    run_experiment(toyw, "toyw", "smoke", tmp_path / "seq", seeds=4)
    seq_calls = toyw.read_log(log)
    log.unlink()
    set_jobs(2)
    monkeypatch.setattr(RunDir, "_worker_gpus", lambda self, n: worker_gpus(n, ["7", "9"]))
    run_experiment(toyw, "toyw", "smoke", tmp_path / "par", seeds=4)
    a = (tmp_path / "seq/toyw/metrics.json").read_bytes()
    assert a == (tmp_path / "par/toyw/metrics.json").read_bytes()
    calls = toyw.read_log(log)
    assert sorted((p, i) for p, i, _, _ in calls) == sorted((p, i) for p, i, _, _ in seq_calls)  # each once
    assert len(calls) == 3 + 4
    gpu_of: dict[int, set[str]] = {}
    for _, _, pid, gpu in calls:
        gpu_of.setdefault(pid, set()).add(gpu)
    assert all(len(g) == 1 for g in gpu_of.values())  # a worker stays on its GPU
    assert os.getpid() not in gpu_of  # every missing seed ran in a worker
    for part in ("grid", "seed"):  # one pool per map_seeds call: its workers hold distinct GPUs
        pids = {pid for p, _, pid, _ in calls if p == part}
        gpus = [next(iter(gpu_of[pid])) for pid in pids]
        assert set(gpus) <= {"7", "9"} and len(set(gpus)) == len(gpus), (part, gpus)
    prov = json.loads((tmp_path / "par/toyw/claims.json").read_text())["provenance"]
    assert prov["world_size"] == 1 and prov["launcher"] == "local" and prov["jobs"] == 2


def test_without_the_run_path_spawn_falls_back_to_sequential(tmp_path, spawned):
    with pytest.warns(UserWarning, match="spawn"):
        out = toy.run(toy.Config(n=20, seeds=2), tmp_path)  # not through run_experiment: no worker can replay
    assert out.seeds == [0, 1]


submitit = pytest.importorskip("submitit")


@pytest.fixture
def job_env(monkeypatch):
    """submitit's local jobs are fresh interpreters: they find iclr25 and the toy module through PYTHONPATH."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), src, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("ICLR25_QUIET", "1")


@pytest.mark.slow
def test_submitit_local_jobs_assemble_into_the_same_run_and_a_rerun_resubmits_only_missing_seeds(
    tmp_path, monkeypatch, job_env
):
    from iclr25.harness.launch import LaunchError, make_launcher

    log = tmp_path / "calls.txt"
    monkeypatch.setenv("TOYW_LOG", str(log))
    run_experiment(toyw, "toyw", "smoke", tmp_path / "seq", seeds=3)
    log.unlink()
    monkeypatch.setenv("TOYW_FAIL", "1")  # the job of seed 1 dies
    first = make_launcher("submitit-local")
    with pytest.raises(LaunchError, match=r"1 of 3 job\(s\) failed: seed 1 .*run the same command again"):
        run_experiment(toyw, "toyw", "smoke", tmp_path / "par", seeds=3, launcher=first)
    assert len(first.submitted) == 3 + 3  # the grid (3 points), then one job per seed
    seeds_dir = tmp_path / "par/toyw/seeds"
    assert {p.name for p in seeds_dir.glob("seed_?.json")} == {"seed_0.json", "seed_2.json"}
    assert not (tmp_path / "par/toyw/claims.json").exists()
    monkeypatch.delenv("TOYW_FAIL")
    again = make_launcher("submitit-local")
    doc = run_experiment(toyw, "toyw", "smoke", tmp_path / "par", seeds=3, launcher=again)
    assert len(again.submitted) == 1  # only seed 1 was missing
    assert (tmp_path / "seq/toyw/metrics.json").read_bytes() == (
        tmp_path / "par/toyw/metrics.json"
    ).read_bytes()
    assert doc["provenance"]["launcher"] == "submitit:local"
    parent = os.getpid()
    assert all(pid != parent for part, _, pid, _ in toyw.read_log(log))  # every seed ran in a job


def test_submitit_missing_names_the_extra(monkeypatch):
    from iclr25.harness.launch import LaunchError, make_launcher

    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit -> ImportError
    with pytest.raises(LaunchError, match=r"pip install 'iclr25\[cluster\]'"):
        make_launcher("submitit")


def test_cli_submitit_missing_is_one_line_exit_1(monkeypatch, capsys):
    from iclr25.harness.cli import main

    monkeypatch.setitem(sys.modules, "submitit", None)
    assert (
        main(["run", "ohio", "--preset", "smoke", "--launcher", "submitit", "--out", "/nonexistent/x"]) == 1
    )
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "iclr25: error: --launcher submitit needs the submitit package, which is not installed: "
        "pip install 'iclr25[cluster]'"
    ]


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["--slurm-time", "5"], "--slurm-time: Slurm options apply only with --launcher submitit"),
        (["--launcher", "submitit", "--slurm-time", "0"], "--slurm-time must be an integer in [1,"),
        (["--launcher", "submitit", "--slurm-mem", "lots"], "mem must be None or a Slurm size"),
        (
            ["--launcher", "submitit", "--slurm-gpus-per-task", "x"],
            "--slurm-gpus-per-task must be an integer",
        ),
        (["--launcher", "slurm"], "invalid choice: 'slurm'"),
    ],
)
def test_cli_rejects_bad_launcher_options(argv, msg, capsys):
    from iclr25.harness.cli import main

    with pytest.raises(SystemExit) if "invalid choice" in msg else _nothing():
        code = main(["run", "ohio", "--preset", "smoke", "--out", "/nonexistent/x", *argv])
        assert code == 2
    assert msg in capsys.readouterr().err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_slurm_options_map_to_submitit_parameters():
    from iclr25.harness.launch import SlurmOptions

    p = SlurmOptions(partition="gpu", gpus_per_task=1, time_min=90, cpus_per_task=8, mem="16g")
    assert p.executor_parameters() == {
        "timeout_min": 90,
        "cpus_per_task": 8,
        "slurm_partition": "gpu",
        "slurm_gpus_per_task": 1,
        "slurm_mem": "16G",
    }
    with pytest.raises(ValueError, match="cpus_per_task"):
        SlurmOptions(cpus_per_task=0)


def test_slurm_resources_reach_the_slurm_executor(tmp_path, monkeypatch):
    """On a Slurm cluster (a stand-in `srun` on PATH), the --slurm-* options become the sbatch parameters."""
    from iclr25.harness.launch import SlurmOptions, SubmititLauncher

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    opts = SlurmOptions(partition="gpu", gpus_per_task=1, time_min=240, cpus_per_task=8, mem="32G")
    ex = SubmititLauncher(opts, cluster="slurm").executor(tmp_path / ".submitit", "pds")
    assert ex.cluster == "slurm"
    p = ex._executor.parameters
    assert (p["partition"], p["gpus_per_task"], p["time"], p["cpus_per_task"], p["mem"]) == (
        "gpu",
        1,
        240,
        8,
        "32G",
    )
    assert p["job_name"] == "iclr25-pds"
    local = SubmititLauncher(opts, cluster="local").executor(tmp_path / ".submitit", "pds")
    assert local.cluster == "local"  # the Slurm-only options are dropped, the generic ones kept
    assert local._executor.parameters["timeout_min"] == 240
