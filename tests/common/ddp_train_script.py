"""Run by tests/common/test_train.py, with and without torchrun: trains a tiny LM and writes the losses."""

import json
import sys

import torch

from iclr25.common.lm import tiny_causal_lm
from iclr25.common.train import LMTrainConfig, train_lm

torch.set_num_threads(1)
out = sys.argv[1]
torch.manual_seed(0)
tokens = torch.randint(4, 60, (4000,), generator=torch.Generator().manual_seed(1))
tokens[1::2] = (tokens[0::2] * 7) % 56 + 4  # a learnable pattern
model = tiny_causal_lm("llama", seed=0, vocab_size=64, hidden=32, layers=2, heads=4, kv_heads=2)
res = train_lm(
    model,
    tokens,
    tokens[:1000],
    LMTrainConfig(steps=12, batch_size=8, seq_len=32, lr=1e-2, warmup_steps=2, eval_every=6, eval_batches=2),
)
if torch.distributed.is_initialized():
    rank = torch.distributed.get_rank()
else:
    rank = 0
if rank == 0:
    with open(out, "w") as f:
        json.dump(
            {
                "world": res["world_size"],
                "train": [h["train_loss"] for h in res["history"]],
                "val": res["final_val_loss"],
            },
            f,
        )
if torch.distributed.is_initialized():
    torch.distributed.destroy_process_group()
