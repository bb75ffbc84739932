"""``torchrun --nproc_per_node=2`` on CPU (gloo): the run path is rank-aware — every rank trains (DDP), one run
folder is written, only rank 0 prints, and the provenance records the world size and the backend."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"
torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")


def _env(**kw):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1"
    )
    env.pop("ICLR25_QUIET", None)  # the output is what we check
    env.update(kw)
    return env


@pytest.mark.slow
@pytest.mark.skipif(torchrun is None, reason="torchrun not found")
def test_torchrun_two_ranks_write_one_run_folder_and_print_once(tmp_path):
    out = tmp_path / "ddp"
    p = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node=2", str(HERE / "torchrun_script.py"), str(out)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    text = p.stdout + p.stderr
    assert p.returncode == 0, text[-4000:]
    assert text.count("toy_ddp: trained every seed") == 1  # rank 1 is silent
    assert text.count("claims: [('learns',") == 1
    assert [d.name for d in out.iterdir()] == ["toy_ddp"]
    run = out / "toy_ddp"
    assert sorted(f.name for f in (run / "seeds").iterdir()) == ["seed_0.json", "seed_1.json"]
    assert not [f for f in run.rglob("*") if ".tmp" in f.name]
    doc = json.loads((run / "claims.json").read_text())
    assert doc["provenance"]["world_size"] == 2 and doc["provenance"]["backend"] == "gloo"
    m = json.loads((run / "metrics.json").read_text())
    assert all(m["per_seed"][s]["world"] == 2 for s in ("0", "1"))  # the seeds really trained under DDP

    # the same experiment in one process: the same losses (DDP on the same global batch), up to float rounding
    single = subprocess.run(
        [sys.executable, str(HERE / "torchrun_script.py"), str(tmp_path / "one")],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert single.returncode == 0, single.stderr[-4000:]
    m1 = json.loads((tmp_path / "one/toy_ddp/metrics.json").read_text())
    d1 = json.loads((tmp_path / "one/toy_ddp/claims.json").read_text())
    assert d1["provenance"]["world_size"] == 1 and d1["provenance"]["backend"] is None
    for s in ("0", "1"):
        assert m1["per_seed"][s]["loss"] == pytest.approx(m["per_seed"][s]["loss"], rel=1e-4)


@pytest.mark.slow
@pytest.mark.skipif(torchrun is None, reason="torchrun not found")
def test_torchrun_cli_pds_smoke_prints_once_and_records_the_world(tmp_path):
    """`torchrun --nproc_per_node=2 -m iclr25 run pds --preset smoke`: pds trains through train_lm (DDP); the
    header and the summary appear once, one run folder, world size 2 and gloo in the provenance."""
    out = tmp_path / "runs"
    p = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node=2", "-m", "iclr25", "run", "pds", "--preset", "smoke"]
        + ["--out", str(out)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    text = p.stdout + p.stderr
    assert p.returncode == 0, text[-4000:]
    assert text.count("iclr25 run pds · preset smoke") == 1 and text.count("pds: ") == 1
    assert [d.name for d in out.iterdir()] == ["pds"]
    prov = json.loads((out / "pds/claims.json").read_text())["provenance"]
    assert (prov["world_size"], prov["backend"]) == (2, "gloo")
