"""Run by tests/common/test_torchrun.py under ``torchrun --nproc_per_node=2``: the toy DDP experiment through
the run path into argv[1]."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import toy_ddp  # noqa: E402

from iclr25.harness.runs import run_experiment  # noqa: E402

doc = run_experiment(toy_ddp, "toy_ddp", "smoke", sys.argv[1])
from iclr25.common.device import close_distributed, is_main_process  # noqa: E402

if is_main_process():
    print("claims:", [(c["id"], c["holds"]) for c in doc["claims"]])
close_distributed()
