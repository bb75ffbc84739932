"""Training MOFFlow (x1-prediction flow matching with self-conditioning) and checkpoint I/O."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from iclr25.common.fields import bounded, check_fields
from iclr25.common.io import atomic_torch_save
from iclr25.common.progress import progress
from iclr25.common.schedule import warmup_cosine_schedule

from .building_blocks import MOF, MOFBatch, collate
from .flow import MIN_T, LatticePrior, flow_matching_loss, interpolate, sample_prior
from .network import MOFFlowConfig, MOFFlowNet


@dataclass(frozen=True)
class FlowTrainConfig:
    """Optimiser settings. Paper: AdamW lr 1e-4, betas (0.9, 0.98), wd 0.01, clip 0.5, batch 160."""

    steps: int = bounded(1000, lo=1)
    batch_size: int = bounded(32, lo=1)
    lr: float = bounded(1e-3, lo=0, lo_open=True)
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 0.01
    grad_clip: float = 0.5
    self_condition: float = bounded(0.5, lo=0, hi=1)  # probability of a self-conditioning pass
    warmup: int = 20
    min_lr_ratio: float = 0.1

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above


def index_batch(full: MOFBatch, idx: torch.Tensor) -> MOFBatch:
    """Rows ``idx`` of a pre-collated batch, trimmed to the largest block / atom count present."""
    bm = full.block_mask[idx]
    M = int(bm.sum(1).max())
    am = full.atom_mask[idx][:, :M]
    A = int(am.sum(-1).max())
    return MOFBatch(
        full.atom_types[idx][:, :M, :A],
        full.local[idx][:, :M, :A],
        am[:, :, :A],
        bm[:, :M],
        full.rots[idx][:, :M],
        full.trans[idx][:, :M],
        full.lattice[idx],
    )


def size_buckets(mofs: list[MOF]) -> list[torch.Tensor]:
    """Indices of the MOFs grouped by block count (batches drawn from one bucket pad less)."""
    sizes = torch.tensor([m.n_blocks for m in mofs])
    return [(sizes == s).nonzero().squeeze(-1) for s in sizes.unique()]


def size_bucketed_indices(buckets: list[torch.Tensor], batch_size: int, g: torch.Generator) -> torch.Tensor:
    """Pick a bucket with probability ∝ its size, then ``batch_size`` indices from it (with replacement)."""
    w = torch.tensor([len(b) for b in buckets], dtype=torch.float)
    b = buckets[int(torch.multinomial(w, 1, generator=g))]
    return b[torch.randint(len(b), (batch_size,), generator=g)]


def size_batches(
    mofs: list[MOF],
    batch_size: int,
    steps: int,
    g: torch.Generator,
    steps_per_size: Mapping[int, int] | None = None,
) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield ``(M, indices)`` for each optimiser step: one batch of ``batch_size`` cells (with replacement)
    drawn from a single size bucket.

    Without ``steps_per_size`` each step picks its bucket with probability ∝ the bucket's size (``steps``
    steps in all). With it, the bucket of every step is fixed in advance: ``steps_per_size[M]`` steps on
    M-block cells, in a random order drawn from ``g`` — so a stated per-size budget (e.g. equal CPU time per
    size, converted to steps with the per-step cost of each size) is met exactly and deterministically.
    """
    buckets = size_buckets(mofs)
    sizes = [int(mofs[int(b[0])].n_blocks) for b in buckets]
    if steps_per_size is None:
        for _ in range(steps):
            idx = size_bucketed_indices(buckets, batch_size, g)
            yield int(mofs[int(idx[0])].n_blocks), idx
        return
    bad = {M: n for M, n in steps_per_size.items() if M not in sizes or not isinstance(n, int) or n < 0}
    if bad:
        raise ValueError(
            f"steps_per_size must map block counts present in the data {sizes} to ints >= 0, got {bad}"
        )
    if sum(steps_per_size.values()) != steps:
        raise ValueError(
            f"steps_per_size must sum to steps={steps}, got {dict(steps_per_size)} "
            f"(sum {sum(steps_per_size.values())})"
        )
    plan = torch.cat([torch.full((n,), sizes.index(M)) for M, n in steps_per_size.items()])
    for k in plan[torch.randperm(len(plan), generator=g)].tolist():
        b = buckets[k]
        yield sizes[k], b[torch.randint(len(b), (batch_size,), generator=g)]


def make_optimizer(model: torch.nn.Module, cfg: FlowTrainConfig) -> torch.optim.AdamW:
    """AdamW with the paper's betas / weight decay (fused kernel: one call for all parameters)."""
    return torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, fused=True
    )


def make_scheduler(opt: torch.optim.Optimizer, cfg: FlowTrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over ``cfg.warmup`` steps (step s at lr·(s+1)/warmup), then cosine decay to
    ``min_lr_ratio · lr`` at ``cfg.steps`` — transformers' schedule via :mod:`iclr25.common.schedule`; call
    ``.step()`` after each optimiser step."""
    return warmup_cosine_schedule(opt, cfg.warmup, cfg.steps, cfg.min_lr_ratio)


def train_mofflow(
    model: MOFFlowNet,
    mofs: list[MOF],
    lattice_prior: LatticePrior,
    cfg: FlowTrainConfig = FlowTrainConfig(),
    seed: int = 0,
    device: str | torch.device = "cpu",
    steps_per_size: Mapping[int, int] | None = None,
) -> list[dict[str, float]]:
    """Train ``model`` on ``mofs``; returns the loss history (one dict per step, with the step's block count
    ``n_blocks`` and its process CPU time ``cpu_s``). ``steps_per_size``: see :func:`size_batches`."""
    g = torch.Generator().manual_seed(int(seed))
    model.to(device).train()
    full = collate(mofs, device)
    opt = make_optimizer(model, cfg)
    sched = make_scheduler(opt, cfg)
    hist = []
    batches = size_batches(mofs, cfg.batch_size, cfg.steps, g, steps_per_size)
    for M, idx in progress(batches, total=cfg.steps, desc="train mofflow"):
        c0 = time.process_time()
        batch = index_batch(full, idx.to(device))
        t = (MIN_T + (1 - 2 * MIN_T) * torch.rand(batch.size, generator=g)).to(device)
        prior = sample_prior(batch, lattice_prior, g)
        trans_t, rots_t, lat_t = interpolate(batch, t, prior)
        bb = model.embed_blocks(batch)
        sc = None
        if float(torch.rand(1, generator=g)) < cfg.self_condition:
            with torch.no_grad():
                sc = model(batch, t, trans_t, rots_t, lat_t, None, bb_emb=bb)["trans"].detach()
        pred = model(batch, t, trans_t, rots_t, lat_t, sc, bb_emb=bb)
        losses = flow_matching_loss(pred, batch, t, rots_t)
        opt.zero_grad(set_to_none=True)
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        sched.step()
        hist.append({**{k: float(v.detach()) for k, v in losses.items()}, "n_blocks": M})
        hist[-1]["cpu_s"] = time.process_time() - c0
    model.eval()
    return hist


def save_checkpoint(model: MOFFlowNet, path: str | Path, lattice_prior: LatticePrior | None = None) -> Path:
    """Atomically save weights + network config (+ lattice prior)."""
    return atomic_torch_save(
        {
            "config": asdict(model.cfg),
            "state_dict": model.state_dict(),
            "lattice_prior": None if lattice_prior is None else asdict(lattice_prior),
        },
        path,
    )


def load_checkpoint(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[MOFFlowNet, LatticePrior | None]:
    """Inverse of :func:`save_checkpoint`."""
    ck = torch.load(path, map_location=device, weights_only=True)
    model = MOFFlowNet(MOFFlowConfig(**ck["config"])).to(device)
    model.load_state_dict(ck["state_dict"])
    model.eval()
    lp = ck.get("lattice_prior")
    if lp is not None:
        lp = LatticePrior(**{k: tuple(v) if isinstance(v, list) else v for k, v in lp.items()})
    return model, lp
