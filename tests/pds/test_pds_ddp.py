"""select_corpus under torchrun: 2 gloo processes each score their shards and agree with one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent


@pytest.mark.distributed
def test_select_corpus_torchrun_two_processes(tmp_path):
    script = HERE / "ddp_select_script.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    subprocess.run([sys.executable, str(script), str(tmp_path / "one")], check=True, env=env, cwd=tmp_path)
    port = str(29600 + os.getpid() % 1000)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        f"--master_port={port}",
        str(script),
        str(tmp_path / "two"),
    ]
    subprocess.run(cmd, check=True, env=env, cwd=tmp_path, capture_output=True)
    one = json.loads((tmp_path / "one" / "rank0.json").read_text())
    r0 = json.loads((tmp_path / "two" / "rank0.json").read_text())
    r1 = json.loads((tmp_path / "two" / "rank1.json").read_text())
    assert one["rows_scored"] == 1000
    assert (
        0 < r0["rows_scored"] < 1000 and r0["rows_scored"] + r1["rows_scored"] == 1000
    )  # each rank: its shards
    assert r0["indices"] == one["indices"] == r1["indices"] and len(one["indices"]) == 400
    assert np.allclose(r0["scores"], one["scores"]) and np.allclose(r1["scores"], one["scores"])
    assert np.array_equal(np.load(tmp_path / "two" / "sel" / "indices.npy"), np.asarray(one["indices"]))
