"""Run by tests/pds/test_pds_ddp.py under ``torchrun --nproc_per_node=2``: sharded scoring + selection."""

import json
import os
import sys

import numpy as np
import torch.distributed as dist

from iclr25.pds.selection import select_corpus


class CountingScorer:
    def __init__(self) -> None:
        self.rows = 0

    def predict(self, x: np.ndarray) -> np.ndarray:
        self.rows += len(x)
        return (x % 7).sum(1) / 10.0


if __name__ == "__main__":
    out = sys.argv[1]
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    corpus = np.random.default_rng(0).integers(0, 50, size=(1000, 17))
    sc = CountingScorer()
    res = select_corpus(
        corpus, sc, ratio=0.4, tau=0.1, seed=5, out_dir=os.path.join(out, "sel"), shard_size=64
    )
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"indices": res.indices.tolist(), "scores": res.scores.tolist(), "rows_scored": sc.rows}, f)
    if dist.is_initialized():
        dist.destroy_process_group()
