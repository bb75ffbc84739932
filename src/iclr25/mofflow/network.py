"""The MOFFlow network (paper §4.2, Fig. 3): block embedder → node/edge features → trunk of
[MOF point attention (IPA with lattice) → transformer → rigid update] → lattice head.

Dense padded tensors: ``B`` MOFs, ``M`` blocks (``block_mask``), ``A`` atoms per block (``atom_mask``).
Internally translations are in nm (Å / 10) and lattice features in (nm, rad), as in the paper's code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..common.fields import bounded, check_fields
from .so3 import quat_to_rotmat

NM = 10.0  # Å per nm


@dataclass(frozen=True)
class MOFFlowConfig:
    """Widths of the network. Defaults = MOFFlow-tiny; :meth:`paper` gives the official widths."""

    c_s: int = bounded(64, lo=1)
    c_z: int = bounded(32, lo=1)
    n_trunk: int = bounded(2, lo=1)
    ipa_heads: int = bounded(4, lo=1)
    ipa_hidden: int = bounded(16, lo=1)
    qk_points: int = bounded(4, lo=1)
    v_points: int = bounded(4, lo=1)
    tfmr_layers: int = 1
    tfmr_heads: int = bounded(4, lo=1)
    egnn_layers: int = 2
    egnn_hidden: int = 32
    n_rbf: int = 32
    radius: float = bounded(5.0, lo=0, lo_open=True)  # Å
    dist_bins: int = 22
    max_atom_type: int = 100

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the rule across fields
        if self.c_s % self.tfmr_heads or self.c_s % 2:
            raise ValueError(
                f"c_s must be even and divisible by tfmr_heads={self.tfmr_heads}, got {self.c_s}"
            )

    @classmethod
    def paper(cls) -> MOFFlowConfig:
        """Official widths (configs/model.yaml): c_s 256, c_z 128, 6 blocks, 24 heads, 8/12 points, EGNN 4×64."""
        return cls(256, 128, 6, 24, 64, 8, 12, 2, 4, 4, 64, 64, 5.0, 22)


def final_linear(i: int, o: int, bias: bool = True) -> nn.Linear:
    """Linear layer with zero init (OpenFold ``init="final"``): residual branches start as identity."""
    lin = nn.Linear(i, o, bias=bias)
    nn.init.zeros_(lin.weight)
    if bias:
        nn.init.zeros_(lin.bias)
    return lin


def time_embedding(t: torch.Tensor, dim: int, max_positions: float = 2056.0) -> torch.Tensor:
    """Sinusoidal embedding of ``t·max_positions`` with frequencies ``exp(−k ln(max_positions)/(dim/2 − 1))``."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_positions) * torch.arange(half, device=t.device, dtype=t.dtype) / (half - 1)
    )
    x = (t * max_positions)[..., None] * freqs
    return torch.cat([torch.sin(x), torch.cos(x)], -1)


def distogram(d: torch.Tensor, n_bins: int, lo: float = 1e-3, hi: float = 20.0) -> torch.Tensor:
    """One-hot distance bins on ``linspace(lo, hi, n_bins)`` (last bin open-ended), distances in Å."""
    lower = torch.linspace(lo, hi, n_bins, device=d.device, dtype=d.dtype)
    upper = torch.cat([lower[1:], lower.new_tensor([1e8])])
    return ((d[..., None] > lower) & (d[..., None] < upper)).to(d.dtype)


def gaussian_rbf(d: torch.Tensor, n: int, hi: float) -> torch.Tensor:
    """Gaussian smearing of distances on ``n`` centres in [0, hi] (SchNet style)."""
    mu = torch.linspace(0.0, hi, n, device=d.device, dtype=d.dtype)
    gamma = 0.5 / (mu[1] - mu[0]) ** 2
    return torch.exp(-gamma * (d[..., None] - mu) ** 2)


class EGCL(nn.Module):
    """E(n)-GNN layer with the coordinate update disabled (E(3)-invariant): ``h_i += φ_h(LN[h_i, Σ_j φ_e(h_i,h_j,rbf(d_ij))])``."""

    def __init__(self, h: int, n_rbf: int):
        super().__init__()
        self.e_i, self.e_j, self.e_d = (
            nn.Linear(h, h),
            nn.Linear(h, h, bias=False),
            nn.Linear(n_rbf, h, bias=False),
        )
        self.e_out = nn.Linear(h, h)
        self.ln = nn.LayerNorm(2 * h)
        self.node = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, h))

    def forward(self, h: torch.Tensor, rbf: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        # h (N,A,h), rbf (N,A,A,r), adj (N,A,A)
        m = F.relu(self.e_i(h)[:, :, None] + self.e_j(h)[:, None] + self.e_d(rbf))
        m = F.relu(self.e_out(m)) * adj[..., None]
        agg = m.sum(2)
        return h + self.node(self.ln(torch.cat([h, agg], -1)))


class BlockEmbedder(nn.Module):
    """Invariant embedding of each rigid block: atom types + radius graph (``radius`` Å) + EGNN + mean pool."""

    def __init__(self, cfg: MOFFlowConfig):
        super().__init__()
        self.cfg = cfg
        self.atom_emb = nn.Embedding(cfg.max_atom_type + 1, cfg.egnn_hidden, padding_idx=0)
        self.layers = nn.ModuleList(EGCL(cfg.egnn_hidden, cfg.n_rbf) for _ in range(cfg.egnn_layers))

    def embed_dense(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Mean-pooled EGNN features of ``G`` unpadded blocks with ``n`` atoms each: z (G,n), x (G,n,3) Å."""
        n = z.shape[1]
        d = torch.cdist(x, x)
        eye = torch.eye(n, dtype=torch.bool, device=x.device)
        adj = ((d < self.cfg.radius) & ~eye).to(x.dtype)
        rbf = gaussian_rbf(d, self.cfg.n_rbf, self.cfg.radius)
        h = self.atom_emb(z.clamp(max=self.cfg.max_atom_type))
        for layer in self.layers:
            h = layer(h, rbf, adj)
        return h.mean(1)

    def forward(self, atom_types: torch.Tensor, local: torch.Tensor, atom_mask: torch.Tensor, block_mask):
        B, M, A = atom_types.shape
        out = local.new_zeros(B, M, self.cfg.egnn_hidden)
        idx = block_mask.reshape(-1).nonzero().squeeze(-1)  # only real blocks
        z = atom_types.reshape(B * M, A)[idx]
        x = local.reshape(B * M, A, 3)[idx]
        # the embedding is a function of the block's content only: embed each distinct block once
        key = torch.cat([z.to(x.dtype)[..., None], torch.round(x.detach() * 1e4)], -1).reshape(len(idx), -1)
        uniq, inv = torch.unique(key, dim=0, return_inverse=True)
        first = torch.full((len(uniq),), len(idx), dtype=torch.long, device=x.device)
        first = first.scatter_reduce(0, inv, torch.arange(len(idx), device=x.device), reduce="amin")
        z, x = z[first], x[first]
        counts = (z > 0).sum(1)
        pooled = x.new_zeros(len(first), self.cfg.egnn_hidden)
        # blocks of equal atom count are embedded together without padding (a loop over the few distinct
        # sizes, not over blocks); atoms are stored first-n in each padded row
        for n in counts.unique().tolist():
            sel = (counts == n).nonzero().squeeze(-1)
            pooled = pooled.index_copy(0, sel, self.embed_dense(z[sel, :n], x[sel, :n]))
        pooled = pooled[inv]
        return out.reshape(B * M, -1).index_copy(0, idx, pooled).reshape(B, M, -1)


class MOFPointAttention(nn.Module):
    """Invariant-point-attention variant with lattice input (paper Eq. for MOFAttention).

    ``a_ij = softmax_j( √(1/4c) q_i·k_j + √(1/4) b_ij + √(1/4) w_l·l − ½ γ_h √(1/(4·P·9/2)) Σ_p |T_i q_p − T_j k_p|² )``;
    output = Linear([Σ_j a_ij v_j, Σ_j a_ij T_j v_p (kept in the global frame), l]). The lattice logit is the same
    for every edge of a MOF (it cancels in the softmax); the lattice enters through the output concatenation.
    """

    def __init__(self, cfg: MOFFlowConfig):
        super().__init__()
        H, c, P, V = cfg.ipa_heads, cfg.ipa_hidden, cfg.qk_points, cfg.v_points
        self.H, self.c, self.P, self.V = H, c, P, V
        self.qkv = nn.Linear(cfg.c_s, 3 * H * c)
        self.qk_pts = nn.Linear(cfg.c_s, 2 * H * P * 3)
        self.v_pts = nn.Linear(cfg.c_s, H * V * 3)
        self.b = nn.Linear(cfg.c_z, H)
        self.lat = nn.Linear(6, H)
        self.head_w = nn.Parameter(torch.full((H,), math.log(math.e - 1.0)))  # softplus⁻¹(1)
        self.out = final_linear(H * c + H * V * 3 + 6, cfg.c_s)

    def forward(self, s, z, R, t, lat_feat, mask):
        # s (B,M,c_s), z (B,M,M,c_z), R (B,M,3,3), t (B,M,3) [nm], lat_feat (B,6), mask (B,M)
        B, M, _ = s.shape
        H, c, P, V = self.H, self.c, self.P, self.V
        q, k, v = self.qkv(s).view(B, M, 3, H, c).unbind(2)
        pts = self.qk_pts(s).view(B, M, 2 * H * P, 3)
        pts = torch.einsum("bmij,bmpj->bmpi", R, pts) + t[:, :, None]  # T_i ∘ p (global)
        qp, kp = pts.view(B, M, 2, H, P, 3).unbind(2)
        vp = torch.einsum("bmij,bmpj->bmpi", R, self.v_pts(s).view(B, M, H * V, 3)) + t[:, :, None]
        vp = vp.view(B, M, H, V, 3)
        logits = math.sqrt(1.0 / (4 * c)) * torch.einsum("bihc,bjhc->bhij", q, k)
        logits = logits + math.sqrt(1.0 / 4) * self.b(z).permute(0, 3, 1, 2)
        logits = logits + math.sqrt(1.0 / 4) * self.lat(lat_feat)[:, :, None, None]
        d2 = ((qp[:, :, None] - kp[:, None]) ** 2).sum(-1).sum(-1)  # (B,i,j,H)
        gamma = F.softplus(self.head_w) * math.sqrt(1.0 / (4 * P * 9.0 / 2))
        logits = logits - 0.5 * gamma[None, :, None, None] * d2.permute(0, 3, 1, 2)
        logits = logits.masked_fill(~mask[:, None, None, :], float("-inf"))
        a = torch.softmax(logits, -1)
        o = torch.einsum("bhij,bjhc->bihc", a, v).reshape(B, M, H * c)
        o_pt = torch.einsum("bhij,bjhpx->bihpx", a, vp).reshape(B, M, H * V * 3)
        return self.out(torch.cat([o, o_pt, lat_feat[:, None].expand(B, M, 6)], -1))


class EdgeTransition(nn.Module):
    """``z_ij ← LN(z_ij + MLP([z_ij, W s_i, W s_j]))``."""

    def __init__(self, c_s: int, c_z: int):
        super().__init__()
        self.proj = nn.Linear(c_s, c_z // 2)
        h = c_z + 2 * (c_z // 2)
        self.mlp = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, c_z))
        self.ln = nn.LayerNorm(c_z)

    def forward(self, s, z):
        p = self.proj(s)
        M = s.shape[1]
        x = torch.cat([z, p[:, :, None].expand(-1, -1, M, -1), p[:, None].expand(-1, M, -1, -1)], -1)
        return self.ln(z + self.mlp(x))


class StructureModuleTransition(nn.Module):
    """``s ← LN(s + MLP(s))`` (3 linear layers, ReLU)."""

    def __init__(self, c: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(c, c), nn.ReLU(), nn.Linear(c, c), nn.ReLU(), final_linear(c, c))
        self.ln = nn.LayerNorm(c)

    def forward(self, s):
        return self.ln(s + self.mlp(s))


class BackboneUpdate(nn.Module):
    """Rigid update from node features: quaternion ``(1, b, c, d)`` (normalised) and a translation in the block's
    local frame (nm), composed as ``R ← R R_u``, ``t ← t + R t_u``."""

    def __init__(self, c_s: int):
        super().__init__()
        self.lin = final_linear(c_s, 6)

    def forward(self, s, R, t, mask):
        u = self.lin(s) * mask[..., None]
        q = torch.cat([torch.ones_like(u[..., :1]), u[..., :3]], -1)
        Ru = quat_to_rotmat(q)
        t_new = t + torch.einsum("bmij,bmj->bmi", R, u[..., 3:])
        return R @ Ru, t_new


class MOFFlowNet(nn.Module):
    """x1-prediction network: ``(blocks, t, T_t, l_t, trans_sc) -> (t̂_1 [Å], R̂_1, l̂_1 [Å, deg])``."""

    def __init__(self, cfg: MOFFlowConfig = MOFFlowConfig()):
        super().__init__()
        self.cfg = cfg
        cs, cz = cfg.c_s, cfg.c_z
        self.embedder = BlockEmbedder(cfg)
        self.bb_proj = nn.Linear(cfg.egnn_hidden, cs // 2, bias=False)
        self.node_in = nn.Linear(cs // 2 + 2 * (cs // 2), cs)
        self.edge_proj = nn.Linear(cs, cz // 2)
        e_in = 2 * (cz // 2) + 2 * cfg.dist_bins
        self.edge_in = nn.Sequential(
            nn.Linear(e_in, cz), nn.ReLU(), nn.Linear(cz, cz), nn.ReLU(), nn.Linear(cz, cz), nn.LayerNorm(cz)
        )
        self.ipa = nn.ModuleList(MOFPointAttention(cfg) for _ in range(cfg.n_trunk))
        self.ipa_ln = nn.ModuleList(nn.LayerNorm(cs) for _ in range(cfg.n_trunk))
        self.tfmr = nn.ModuleList(
            nn.TransformerEncoder(
                nn.TransformerEncoderLayer(cs, cfg.tfmr_heads, cs, 0.0, batch_first=True, norm_first=True),
                cfg.tfmr_layers,
                enable_nested_tensor=False,
            )
            for _ in range(cfg.n_trunk)
        )
        self.post_tfmr = nn.ModuleList(final_linear(cs, cs) for _ in range(cfg.n_trunk))
        self.node_tr = nn.ModuleList(StructureModuleTransition(cs) for _ in range(cfg.n_trunk))
        self.bb_update = nn.ModuleList(BackboneUpdate(cs) for _ in range(cfg.n_trunk))
        self.edge_tr = nn.ModuleList(EdgeTransition(cs, cz) for _ in range(cfg.n_trunk - 1))
        self.lattice_head = nn.Sequential(nn.Linear(cs, cs), nn.ReLU(), nn.Linear(cs, 6))
        with torch.no_grad():  # start the head near typical cells (2 nm, 90°) instead of softplus(0)
            inv = lambda y: math.log(math.expm1(y))  # noqa: E731
            self.lattice_head[-1].bias.copy_(torch.tensor([inv(2.0)] * 3 + [inv(math.pi / 2)] * 3))

    def embed_blocks(self, batch) -> torch.Tensor:
        """Block embeddings (B, M, egnn_hidden); depend only on the blocks, so samplers compute them once."""
        return self.embedder(batch.atom_types, batch.local, batch.atom_mask, batch.block_mask)

    def forward(
        self, batch, t, trans_t, rots_t, lat_t, trans_sc=None, bb_emb=None
    ) -> dict[str, torch.Tensor]:
        mask = batch.block_mask
        fm = mask.to(trans_t.dtype)
        B, M = mask.shape
        if bb_emb is None:
            bb_emb = self.embed_blocks(batch)
        if trans_sc is None:
            trans_sc = torch.zeros_like(trans_t)
        temb = time_embedding(t, self.cfg.c_s // 2)[:, None].expand(B, M, -1)
        # one shared t for SO(3) and R^3 (both embeddings concatenated, as in the paper)
        s = self.node_in(torch.cat([self.bb_proj(bb_emb), temb, temb], -1)) * fm[..., None]
        p = self.edge_proj(s)
        d = torch.cdist(trans_t, trans_t)
        d_sc = torch.cdist(trans_sc, trans_sc)
        e = torch.cat(
            [
                p[:, :, None].expand(-1, -1, M, -1),
                p[:, None].expand(-1, M, -1, -1),
                distogram(d, self.cfg.dist_bins),
                distogram(d_sc, self.cfg.dist_bins),
            ],
            -1,
        )
        z = self.edge_in(e)
        R, tr = rots_t, trans_t / NM
        lat_feat = torch.cat([lat_t[:, :3] / NM, torch.deg2rad(lat_t[:, 3:])], -1)
        for i in range(self.cfg.n_trunk):
            s = self.ipa_ln[i](s + self.ipa[i](s, z, R, tr, lat_feat, mask)) * fm[..., None]
            s = s + self.post_tfmr[i](self.tfmr[i](s, src_key_padding_mask=~mask))
            s = self.node_tr[i](s) * fm[..., None]
            R, tr = self.bb_update[i](s, R, tr, fm)
            if i < self.cfg.n_trunk - 1:
                z = self.edge_tr[i](s, z)
        trans = tr * NM
        trans = (
            trans - (trans * fm[..., None]).sum(1, keepdim=True) / fm.sum(1).clamp_min(1)[:, None, None]
        ) * fm[..., None]
        pooled = (s * fm[..., None]).sum(1) / fm.sum(1, keepdim=True).clamp_min(1)
        lat = F.softplus(self.lattice_head(pooled))  # (nm, rad)
        lattice = torch.cat([lat[:, :3] * NM, torch.rad2deg(lat[:, 3:])], -1)
        return {"trans": trans, "rots": R, "lattice": lattice}
