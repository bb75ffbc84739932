"""A compact causal-LM training loop: AdamW, linear warm-up + cosine decay (transformers' scheduler), gradient clipping, periodic
evaluation, atomic checkpoints with exact resume — and the same code under ``torchrun`` (DDP).

Batches are drawn for the *global* batch from a generator seeded by ``(seed, step)``; each rank takes its
slice. The loss is the sum over the global batch's target tokens divided by their global count, so a
2-process run follows the 1-process run on the same global batch (up to float rounding).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .fields import bounded, check_fields
from .io import atomic_torch_save
from .progress import progress
from .schedule import warmup_cosine_factor, warmup_cosine_schedule  # noqa: F401  (re-exported)
from .seeding import derive_seed, torch_generator

BatchFn = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]
IGNORE = -100


@dataclass(frozen=True)
class LMTrainConfig:
    """Optimisation of :func:`train_lm`: AdamW (β1, β2, weight decay) with linear warm-up and a cosine decay to
    ``lr * min_lr_ratio``, global grad-norm clipping, periodic evaluation and checkpoints."""

    steps: int = bounded(500, lo=1)
    batch_size: int = bounded(16, lo=1)  # global batch (split across DDP ranks)
    seq_len: int = bounded(
        128, lo=1
    )  # the window of the token stream (unused when a batch_fn gives the batches)
    lr: float = bounded(3e-3, lo=0, lo_open=True)
    warmup_steps: int = bounded(50, lo=0)
    min_lr_ratio: float = bounded(0.1, lo=0, hi=1)  # cosine decays to lr * min_lr_ratio
    weight_decay: float = bounded(0.1, lo=0)
    beta1: float = bounded(0.9, lo=0, hi=1, hi_open=True)
    beta2: float = bounded(0.95, lo=0, hi=1, hi_open=True)
    grad_clip: float = bounded(1.0, lo=0)  # max global grad-norm; 0 disables
    eval_every: int = bounded(
        100, lo=0
    )  # 0 disables periodic evaluation (a final one still runs with val data)
    eval_batches: int = bounded(8, lo=1)
    checkpoint_every: int = bounded(0, lo=0)  # 0: checkpoint only at the end (when a checkpoint_dir is given)
    seed: int = bounded(0, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above


def stream_batch(tokens: torch.Tensor, batch_size: int, seq_len: int, generator: torch.Generator):
    """Random windows of ``seq_len`` tokens from a 1-D token stream: ``(input_ids, labels)``, both (B, L)."""
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be a 1-D LongTensor, got shape {tuple(tokens.shape)}")
    if tokens.numel() <= seq_len:
        raise ValueError(f"token stream ({tokens.numel()} tokens) must be longer than seq_len={seq_len}")
    starts = torch.randint(0, tokens.numel() - seq_len, (batch_size,), generator=generator)
    idx = starts[:, None] + torch.arange(seq_len)[None, :]  # (B, L)
    x = tokens[idx]
    return x, x.clone()


def causal_lm_loss_sum(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor):
    """Sum of next-token cross-entropies over target positions, and their count."""
    logits = model(input_ids=input_ids).logits  # (B, L, V)
    tgt = labels[:, 1:]
    loss = F.cross_entropy(
        logits[:, :-1].flatten(0, 1).float(), tgt.flatten(), ignore_index=IGNORE, reduction="sum"
    )
    return loss, (tgt != IGNORE).sum()


def _dist_info() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def maybe_init_distributed(device: str | torch.device | None = None) -> tuple[int, int]:
    """Initialise the process group when launched by ``torchrun`` and nobody has (gloo for a CPU ``device``,
    nccl for a CUDA one; without a device, nccl when CUDA is present). ``iclr25 run`` under ``torchrun`` has
    initialised it already (:func:`iclr25.common.device.init_distributed`)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        from .device import init_distributed

        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        init_distributed(str(device))
    return _dist_info()


@torch.no_grad()
def evaluate_lm(
    model,
    tokens: torch.Tensor | None = None,
    cfg: LMTrainConfig = LMTrainConfig(),
    batch_fn: BatchFn | None = None,
    device: str | torch.device = "cpu",
) -> float:
    """Mean next-token loss (nats/token) on ``eval_batches`` fixed batches (same batches every call)."""
    was = model.training
    model.eval()
    tot = torch.zeros((), dtype=torch.float64)
    cnt = torch.zeros((), dtype=torch.float64)
    for b in range(cfg.eval_batches):
        g = torch_generator(derive_seed(cfg.seed, "eval", b))
        x, y = (
            batch_fn(b, g) if batch_fn is not None else stream_batch(tokens, cfg.batch_size, cfg.seq_len, g)
        )
        s, n = causal_lm_loss_sum(model, x.to(device), y.to(device))
        tot += s.double().cpu()
        cnt += n.double().cpu()
    model.train(was)
    return float(tot / cnt.clamp_min(1))


def train_lm(
    model: torch.nn.Module,
    train_tokens: torch.Tensor | None = None,
    val_tokens: torch.Tensor | None = None,
    cfg: LMTrainConfig = LMTrainConfig(),
    batch_fn: BatchFn | None = None,
    val_batch_fn: BatchFn | None = None,
    checkpoint_dir: str | Path | None = None,
    device: str | torch.device = "cpu",
    desc: str = "train",
) -> dict:
    """Train ``model`` (an HF causal LM or anything returning ``.logits``) and return its history.

    Data: either a 1-D ``train_tokens`` stream (random windows) or ``batch_fn(step, generator)`` returning the
    global batch ``(input_ids, labels)`` with ``-100`` for ignored labels. Under ``torchrun`` the model is
    wrapped in DDP and every rank takes its slice of the global batch. With ``checkpoint_dir`` the state is
    saved atomically every ``checkpoint_every`` steps and at the end, and a restarted call resumes from it.
    """
    if train_tokens is None and batch_fn is None:
        raise ValueError("give train_tokens (a 1-D token stream) or batch_fn(step, generator)")
    rank, world = maybe_init_distributed(device)
    if cfg.batch_size % world:
        raise ValueError(f"batch_size ({cfg.batch_size}) must be divisible by the world size ({world})")
    model.to(device).train()
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
    )
    history: list[dict] = []
    start = 0
    ckpt = Path(checkpoint_dir) / "checkpoint.pt" if checkpoint_dir is not None else None
    if ckpt is not None and ckpt.exists():
        state = torch.load(ckpt, map_location=device, weights_only=True)  # tensors and plain data only
        if state.get("config") == asdict(cfg):
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            start, history = state["step"], state["history"]
    for group in opt.param_groups:
        group["initial_lr"] = cfg.lr
    sched = warmup_cosine_schedule(opt, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio, start_step=start)
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=None if str(device) == "cpu" else [device]
        )
    vfn = val_batch_fn
    has_val = val_tokens is not None or val_batch_fn is not None
    per = cfg.batch_size // world

    def save(step: int) -> None:
        if ckpt is not None and rank == 0:
            atomic_torch_save(
                {
                    "model": model.state_dict(),
                    "optimizer": opt.state_dict(),
                    "step": step,
                    "history": history,
                    "config": asdict(cfg),
                },
                ckpt,
            )

    for step in progress(range(start, cfg.steps), desc=desc, total=cfg.steps - start):
        g = torch_generator(derive_seed(cfg.seed, "train", step))
        if batch_fn is not None:
            x, y = batch_fn(step, g)
        else:
            x, y = stream_batch(train_tokens, cfg.batch_size, cfg.seq_len, g)
        n_global = (y[:, 1:] != IGNORE).sum().clamp_min(1)
        x, y = x[rank * per : (rank + 1) * per].to(device), y[rank * per : (rank + 1) * per].to(device)
        lr = sched.get_last_lr()[0]
        loss_sum, _ = causal_lm_loss_sum(net, x, y)
        # DDP averages gradients over ranks, hence the factor `world`: the result is d(global mean)/dθ.
        (loss_sum * world / n_global).backward()
        gnorm = torch.nn.utils.clip_grad_norm_(
            model.parameters(), cfg.grad_clip if cfg.grad_clip > 0 else float("inf")
        )
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        train_loss = loss_sum.detach() / n_global
        if world > 1:
            dist.all_reduce(train_loss)
        rec = {
            "step": step + 1,
            "lr": lr,
            "train_loss": float(train_loss),
            "grad_norm": float(gnorm),
        }
        last = step + 1 == cfg.steps
        if has_val and ((cfg.eval_every and (step + 1) % cfg.eval_every == 0) or last):
            rec["val_loss"] = evaluate_lm(model, val_tokens, cfg, vfn, device)
        history.append(rec)
        if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and not last:
            save(step + 1)
    save(cfg.steps)
    vals = [h["val_loss"] for h in history if "val_loss" in h]
    return {
        "history": history,
        "final_train_loss": history[-1]["train_loss"] if history else float("nan"),
        "final_val_loss": vals[-1] if vals else float("nan"),
        "world_size": world,
    }
