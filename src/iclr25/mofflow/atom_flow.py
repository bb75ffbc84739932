"""Baseline: an atom-level flow (DiffCSP-like, no rigidity) on the same data, lattice flow and loss normalisation.

Every atom gets its own Cartesian flow: prior ``x_0 = 10 Å · (ξ − mean ξ)``, path ``x_t = (1−t) x_0 + t x_1``, the
network predicts ``x̂_1`` per atom. The network is a transformer over all atoms of a cell (pre-LN, distance-RBF
attention bias), with the same information MOFFlow receives: atom types, block membership and the block's local
coordinates and embedding — only the rigid parameterisation is missing, so the state has 3N instead of 6M
dimensions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common.fields import bounded, check_fields
from iclr25.common.progress import progress

from .building_blocks import MOF
from .flow import MIN_T, TRANS_SCALE, LatticePrior, loss_scale
from .network import NM, BlockEmbedder, MOFFlowConfig, final_linear, gaussian_rbf, time_embedding
from .training import FlowTrainConfig, make_optimizer, make_scheduler, size_batches


@dataclass
class AtomBatch:
    """Flattened atoms per cell: ``types`` (B,N), ``x1`` (B,N,3) Å, ``block`` (B,N), ``local`` (B,N,3),
    ``mask`` (B,N), ``lattice`` (B,6); ``block_types``/``block_local``/``block_mask`` for the block embedder."""

    types: torch.Tensor
    x1: torch.Tensor
    block: torch.Tensor
    local: torch.Tensor
    mask: torch.Tensor
    lattice: torch.Tensor
    block_types: torch.Tensor
    block_local: torch.Tensor
    block_mask: torch.Tensor

    @property
    def size(self) -> int:
        return self.types.shape[0]

    def index(self, idx: torch.Tensor) -> AtomBatch:
        m = self.mask[idx]
        N = int(m.sum(1).max())
        bm = self.block_mask[idx]
        M = int(bm.sum(1).max())
        A = int((self.block_types[idx][:, :M] > 0).sum(-1).max())
        return AtomBatch(
            self.types[idx][:, :N], self.x1[idx][:, :N], self.block[idx][:, :N], self.local[idx][:, :N], m[:, :N],
            self.lattice[idx], self.block_types[idx][:, :M, :A], self.block_local[idx][:, :M, :A], bm[:, :M],
        )  # fmt: skip


def atom_collate(mofs: list[MOF], device: str | torch.device = "cpu") -> AtomBatch:
    """Pad MOFs into an :class:`AtomBatch`; ``x1`` = rigidly assembled coordinates, centred per cell."""
    B = len(mofs)
    N = max(m.n_atoms for m in mofs)
    M = max(m.n_blocks for m in mofs)
    A = max(len(z) for m in mofs for z in m.atom_types)
    types = np.zeros((B, N), np.int64)
    x1 = np.zeros((B, N, 3), np.float32)
    block = np.zeros((B, N), np.int64)
    loc = np.zeros((B, N, 3), np.float32)
    btypes = np.zeros((B, M, A), np.int64)
    bloc = np.zeros((B, M, A, 3), np.float32)
    for b, m in enumerate(mofs):
        X = np.concatenate(m.block_coords(), 0)
        n = len(X)
        x1[b, :n] = X - X.mean(0)
        types[b, :n] = np.concatenate(m.atom_types)
        block[b, :n] = np.concatenate([np.full(len(z), i) for i, z in enumerate(m.atom_types)])
        loc[b, :n] = np.concatenate(m.local_coords)
        for i, (z, x) in enumerate(zip(m.atom_types, m.local_coords)):
            btypes[b, i, : len(z)] = z
            bloc[b, i, : len(z)] = x
    t = torch.from_numpy
    lat = t(np.stack([m.lattice for m in mofs]).astype(np.float32))
    bmask = t(np.array([[i < m.n_blocks for i in range(M)] for m in mofs]))
    ab = AtomBatch(t(types), t(x1), t(block), t(loc), t(types > 0), lat, t(btypes), t(bloc), bmask)
    return AtomBatch(*(getattr(ab, f).to(device) for f in ab.__dataclass_fields__))


@dataclass(frozen=True)
class AtomFlowConfig:
    """Widths of the atom-level flow baseline (a transformer over all atoms with distance/same-block biases)."""

    width: int = bounded(64, lo=1)
    layers: int = bounded(3, lo=1)
    heads: int = bounded(4, lo=1)
    n_rbf: int = bounded(16, lo=1)
    rbf_max: float = bounded(20.0, lo=0, lo_open=True)  # Å

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the rule across fields
        if self.width % self.heads:
            raise ValueError(f"width must be divisible by heads={self.heads}, got {self.width}")


class AtomLayer(nn.Module):
    """Pre-LN multi-head attention with a per-head distance/same-block bias, then a feed-forward block."""

    def __init__(self, c: int, heads: int, n_rbf: int):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.o = final_linear(c, c)
        self.ff = nn.Sequential(nn.Linear(c, 2 * c), nn.GELU(), final_linear(2 * c, c))

    def forward(self, h, bias, mask):
        B, N, C = h.shape
        q, k, v = self.qkv(self.ln1(h)).view(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        h = h + self.o(a.transpose(1, 2).reshape(B, N, C))
        return h + self.ff(self.ln2(h))


class AtomFlowNet(nn.Module):
    """``(atoms, t, x_t, l_t) -> (x̂_1, l̂_1)``."""

    def __init__(self, cfg: AtomFlowConfig = AtomFlowConfig(), block_cfg: MOFFlowConfig | None = None):
        super().__init__()
        block_cfg = block_cfg or MOFFlowConfig()
        self.cfg = cfg
        c = cfg.width
        self.embedder = BlockEmbedder(block_cfg)
        self.type_emb = nn.Embedding(block_cfg.max_atom_type + 1, c, padding_idx=0)
        self.bb = nn.Linear(block_cfg.egnn_hidden, c)
        self.inp = nn.Linear(3 + 3 + 6 + c, c)
        self.layers = nn.ModuleList(AtomLayer(c, cfg.heads, cfg.n_rbf) for _ in range(cfg.layers))
        self.pair_bias = nn.Linear(cfg.n_rbf + 1, cfg.layers * cfg.heads)
        self.ln = nn.LayerNorm(c)
        self.out = final_linear(c, 3)
        self.lattice_head = nn.Sequential(nn.Linear(c, c), nn.ReLU(), nn.Linear(c, 6))
        with torch.no_grad():
            inv = lambda y: math.log(math.expm1(y))  # noqa: E731
            self.lattice_head[-1].bias.copy_(torch.tensor([inv(2.0)] * 3 + [inv(math.pi / 2)] * 3))

    def embed_blocks(self, ab: AtomBatch) -> torch.Tensor:
        bb = self.embedder(ab.block_types, ab.block_local, ab.block_types > 0, ab.block_mask)  # (B,M,e)
        return torch.gather(bb, 1, ab.block[..., None].expand(-1, -1, bb.shape[-1]))  # per atom

    def forward(self, ab: AtomBatch, t, x_t, lat_t, bb_atom=None):
        if bb_atom is None:
            bb_atom = self.embed_blocks(ab)
        fm = ab.mask.to(x_t.dtype)[..., None]
        B, N = ab.mask.shape
        lat_feat = torch.cat([lat_t[:, :3] / NM, torch.deg2rad(lat_t[:, 3:])], -1)
        temb = time_embedding(t, self.cfg.width)[:, None]
        h = self.type_emb(ab.types) + self.bb(bb_atom) + temb
        h = self.inp(torch.cat([x_t / NM, ab.local / NM, lat_feat[:, None].expand(B, N, 6), h], -1))
        d = torch.cdist(x_t, x_t)
        same = (ab.block[:, :, None] == ab.block[:, None, :]).to(x_t.dtype)[..., None]
        pair = torch.cat([gaussian_rbf(d, self.cfg.n_rbf, self.cfg.rbf_max), same], -1)
        # per-layer, per-head attention biases from one linear map of the pair features (B, L·H, N, N)
        H = self.cfg.heads
        bias = self.pair_bias(pair).permute(0, 3, 1, 2).masked_fill(~ab.mask[:, None, None, :], float("-inf"))
        for i, layer in enumerate(self.layers):
            h = layer(h, bias[:, i * H : (i + 1) * H], ab.mask)
        h = self.ln(h) * fm
        x1 = (x_t + NM * self.out(h)) * fm
        x1 = (x1 - x1.sum(1, keepdim=True) / fm.sum(1, keepdim=True)) * fm
        pooled = h.sum(1) / fm.sum(1)
        lat = F.softplus(self.lattice_head(pooled))
        return {"x": x1, "lattice": torch.cat([lat[:, :3] * NM, torch.rad2deg(lat[:, 3:])], -1)}


def atom_prior(ab: AtomBatch, lattice_prior: LatticePrior, generator=None):
    fm = ab.mask.to(torch.float64)[..., None]
    xi = torch.randn(*ab.mask.shape, 3, generator=generator, dtype=torch.float64)
    xi = (xi - (xi * fm).sum(1, keepdim=True) / fm.sum(1, keepdim=True)) * fm
    return (TRANS_SCALE * xi).float(), lattice_prior.sample(ab.size, generator)


def atom_loss(pred, ab: AtomBatch, t):
    """Same normalisation as MOFFlow's translation/lattice losses, per atom instead of per block."""
    fm = ab.mask.to(t.dtype)[..., None]
    s = loss_scale(t)
    dx = (0.1 * (ab.x1 - pred["x"]) / s[:, None, None]) ** 2
    l_x = torch.clamp(2.0 * (dx * fm).sum((1, 2)) / (3 * fm.sum((1, 2))), max=5.0)
    err = ab.lattice - pred["lattice"]
    err = torch.cat([0.1 * err[:, :3], torch.deg2rad(err[:, 3:])], -1) / s[:, None]
    l_lat = 0.1 * (err**2).mean(-1)
    return {"loss": l_x.mean() + l_lat.mean(), "x": l_x.mean(), "lattice": l_lat.mean()}


def train_atom_flow(
    model: AtomFlowNet,
    mofs: list[MOF],
    lattice_prior: LatticePrior,
    cfg: FlowTrainConfig,
    seed: int = 0,
    device="cpu",
    steps_per_size: Mapping[int, int] | None = None,
) -> list[dict[str, float]]:
    """Train the atom-level flow; same batching (incl. ``steps_per_size``) and history format as
    :func:`iclr25.mofflow.training.train_mofflow`."""
    g = torch.Generator().manual_seed(int(seed))
    model.to(device).train()
    full = atom_collate(mofs, device)
    opt = make_optimizer(model, cfg)
    sched = make_scheduler(opt, cfg)
    hist = []
    batches = size_batches(mofs, cfg.batch_size, cfg.steps, g, steps_per_size)
    for M, idx in progress(batches, total=cfg.steps, desc="train atom flow"):
        c0 = time.process_time()
        ab = full.index(idx.to(device))
        t = (MIN_T + (1 - 2 * MIN_T) * torch.rand(ab.size, generator=g)).to(device)
        x0, l0 = atom_prior(ab, lattice_prior, g)
        tb = t[:, None, None]
        x_t = (1 - tb) * x0.to(device) + tb * ab.x1
        lat_t = (1 - t[:, None]) * l0.to(device) + t[:, None] * ab.lattice
        losses = atom_loss(model(ab, t, x_t, lat_t), ab, t)
        opt.zero_grad(set_to_none=True)
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        sched.step()
        hist.append({**{k: float(v.detach()) for k, v in losses.items()}, "n_blocks": M})
        hist[-1]["cpu_s"] = time.process_time() - c0
    model.eval()
    return hist


@torch.no_grad()
def sample_atom_flow(
    model: AtomFlowNet, ab: AtomBatch, lattice_prior: LatticePrior, n_steps: int = 50, generator=None
) -> dict[str, torch.Tensor]:
    """Euler on ``linspace(0.01, 1, n_steps)`` + final prediction at t = 1 (same grid as MOFFlow)."""
    x, lat = atom_prior(ab, lattice_prior, generator)
    x, lat = x.to(ab.x1.device), lat.to(ab.x1.device)
    fm = ab.mask.to(x.dtype)[..., None]
    bb = model.embed_blocks(ab)
    ts = torch.linspace(MIN_T, 1.0, n_steps, dtype=torch.float64)
    for i in range(n_steps - 1):
        t, dt = float(ts[i]), float(ts[i + 1] - ts[i])
        out = model(ab, torch.full((ab.size,), t, device=x.device), x, lat, bb)
        x = (x + dt * (out["x"] - x) / (1 - t)) * fm
        lat = lat + dt * (out["lattice"] - lat) / (1 - t)
    out = model(ab, torch.ones(ab.size, device=x.device), x, lat, bb)
    return {"x": out["x"] * fm, "lattice": out["lattice"]}
