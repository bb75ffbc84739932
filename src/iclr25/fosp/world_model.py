"""World model (SafeDreamer / DreamerV3 structure, compact deterministic-latent version for state observations).

Recurrent state-space model with a deterministic embedding in place of the categorical stochastic latent:

    h_{t+1} = GRU(h_t, [z_t, a_t])          (deterministic path)
    z_t     = enc(o_t)                      (posterior, from the observation)
    ẑ_t     = prior(h_t)                    (prior, used in imagination)
    feat_t  = [h_t, z_t]  (or [h_t, ẑ_t] in imagination)

Heads on feat_{t+1}: decoder ô_{t+1}, reward r̂_t, cost ĉ_t (Bernoulli on c_t > 0, NLL up-weighted by
``cost_weight`` = 10 where c_t ≥ 1, as SafeDreamer/FOSP), continue (1 − terminated_t). Loss: heads on posterior
*and* prior features + ‖ẑ − sg(z)‖² (dynamics, weight 0.5) + 0.1·‖sg(ẑ) − z‖² (representation) — the
deterministic analogue of DreamerV3's KL_dyn / KL_rep balance. ``encoder="cnn"`` takes (H, W, 3) uint8 images,
scaled as the DreamerV3-based official code does: o / 255 − 0.5 for the encoder input *and* the decoder target
(a raw 0–255 target would make the reconstruction MSE ~10³ times the reward/cost terms).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .values import mlp


class ConvEncoder(nn.Module):
    """Tiny CNN for (B, H, W, 3) images already scaled to [−0.5, 0.5] (``WorldModel._norm``; 16×16 or 64×64)."""

    def __init__(self, obs_shape: tuple[int, ...], out: int, depth: int = 16):
        super().__init__()
        if len(obs_shape) != 3 or obs_shape[-1] != 3:
            raise ValueError(f"encoder='cnn' needs (H, W, 3) image observations, got obs_shape={obs_shape}")
        self.conv = nn.Sequential(
            nn.Conv2d(3, depth, 4, 2, 1),
            nn.SiLU(),
            nn.Conv2d(depth, 2 * depth, 4, 2, 1),
            nn.SiLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n = self.conv(torch.zeros(1, 3, obs_shape[0], obs_shape[1])).shape[-1]
        self.out = nn.Linear(n, out)

    def forward(self, o: torch.Tensor) -> torch.Tensor:
        lead = o.shape[:-3]
        x = o.reshape(-1, *o.shape[-3:]).permute(0, 3, 1, 2).float()
        return self.out(self.conv(x)).reshape(*lead, -1)


class WorldModel(nn.Module):
    def __init__(
        self,
        obs_shape: tuple[int, ...],
        act_dim: int,
        deter: int = 64,
        latent: int = 32,
        hidden: int = 64,
        encoder: str = "mlp",
        cost_weight: float = 10.0,
    ):
        super().__init__()
        if encoder not in ("mlp", "cnn"):
            raise ValueError(f"encoder must be 'mlp' or 'cnn', got {encoder!r}")
        if encoder == "mlp" and len(obs_shape) != 1:
            raise ValueError(f"encoder='mlp' needs flat observations (D,), got obs_shape={obs_shape}")
        self.obs_shape, self.act_dim, self.deter, self.latent = tuple(obs_shape), act_dim, deter, latent
        self.encoder_kind, self.cost_weight = encoder, cost_weight
        self.feat_dim = deter + latent
        self.enc = mlp(obs_shape[0], latent, hidden) if encoder == "mlp" else ConvEncoder(obs_shape, latent)
        self.gru = nn.GRUCell(latent + act_dim, deter)
        self.prior = mlp(deter, latent, hidden)
        obs_out = obs_shape[0] if encoder == "mlp" else int(torch.tensor(obs_shape).prod())
        self.dec = mlp(self.feat_dim, obs_out, hidden)
        self.reward = mlp(self.feat_dim, 1, hidden)
        self.cost = mlp(self.feat_dim, 1, hidden)
        self.cont = mlp(self.feat_dim, 1, hidden)
        self.register_buffer("obs_mean", torch.zeros(obs_out))
        self.register_buffer("obs_std", torch.ones(obs_out))

    # ---------------------------------------------------------------------------------------- helpers
    def set_obs_stats(self, obs: torch.Tensor) -> None:
        """Observation standardisation (state inputs) from a data sample; images use the fixed o/255 − 0.5."""
        if self.encoder_kind == "mlp":
            flat = obs.reshape(-1, obs.shape[-1]).float()
            self.obs_mean.copy_(flat.mean(0))
            self.obs_std.copy_(flat.std(0).clamp_min(1e-3))

    def _norm(self, o: torch.Tensor) -> torch.Tensor:
        """Model-space observation: standardised state, or image o / 255 − 0.5 (DreamerV3), shape kept."""
        if self.encoder_kind == "mlp":
            return (o.float() - self.obs_mean) / self.obs_std
        return o.float() / 255.0 - 0.5

    def encode(self, o: torch.Tensor) -> torch.Tensor:
        return self.enc(self._norm(o))

    def initial(self, n: int, device=None) -> torch.Tensor:
        return torch.zeros(n, self.deter, device=device)

    def feat(self, h: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return torch.cat([h, z], -1)

    def img_step(self, feat: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """feat_t, a_t → imagined feat_{t+1} = [h_{t+1}, prior(h_{t+1})]."""
        h_next = self.gru(torch.cat([feat[..., self.deter :], a], -1), feat[..., : self.deter])
        return self.feat(h_next, self.prior(h_next))

    def obs_step(self, feat: torch.Tensor | None, a: torch.Tensor | None, o: torch.Tensor) -> torch.Tensor:
        """Posterior feature after observing o (feat=None at an episode start)."""
        z = self.encode(o)
        if feat is None:
            h = self.initial(z.shape[0], z.device)
        else:
            h = self.gru(torch.cat([feat[..., self.deter :], a], -1), feat[..., : self.deter])
        return self.feat(h, z)

    def heads(self, feat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(reward r̂, cost probability P(c > 0), continue probability) of the transition into ``feat``."""
        return (
            self.reward(feat).squeeze(-1),
            torch.sigmoid(self.cost(feat).squeeze(-1)),
            torch.sigmoid(self.cont(feat).squeeze(-1)),
        )

    # ----------------------------------------------------------------------------------------- training
    def observe(self, obs: torch.Tensor, actions: torch.Tensor, last_obs: torch.Tensor):
        """Posterior features for a batch of windows.

        obs (B, T, ·), actions (B, T, A), last_obs (B, ·) = next observation of the last step →
        post (B, T + 1, F) posterior features of o_0..o_T, prior (B, T, F) = [h_{t+1}, ẑ_{t+1}] for t < T.
        """
        B, T = actions.shape[:2]
        all_obs = torch.cat([obs, last_obs[:, None]], 1)
        z = self.encode(all_obs)  # (B, T+1, L)
        h = self.initial(B, z.device)
        hs = [h]
        for t in range(T):
            h = self.gru(torch.cat([z[:, t], actions[:, t]], -1), h)
            hs.append(h)
        hs = torch.stack(hs, 1)  # (B, T+1, D)
        post = self.feat(hs, z)
        zp = self.prior(hs[:, 1:])
        prior = self.feat(hs[:, 1:], zp)
        return post, prior, z, zp

    def loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
        """World-model loss on windows; returns (loss, logs, posterior features (B, T + 1, F))."""
        obs, act = batch["observations"], batch["actions"]
        post, prior, z, zp = self.observe(obs, act, batch["next_observations"][:, -1])
        target_obs = self._norm(batch["next_observations"]).reshape(*act.shape[:2], -1)
        r, c = batch["rewards"], batch["costs"]
        cont = 1.0 - batch["terminations"].float()
        cw = torch.where(c >= 1.0, self.cost_weight, 1.0)
        l_head = 0.0
        terms = dict.fromkeys(("rec", "rew", "cost", "cont"), 0.0)
        for f in (post[:, 1:], prior):
            rec = F.mse_loss(self.dec(f), target_obs)
            rew = F.mse_loss(self.reward(f).squeeze(-1), r)
            cost = (
                F.binary_cross_entropy_with_logits(
                    self.cost(f).squeeze(-1), (c > 0).float(), reduction="none"
                )
                * cw
            ).mean()
            con = F.binary_cross_entropy_with_logits(self.cont(f).squeeze(-1), cont)
            l_head = l_head + 0.5 * (rec + rew + cost + con)
            for k, v in zip(terms, (rec, rew, cost, con)):
                terms[k] += 0.5 * float(v.detach())
        dyn = (zp - z[:, 1:].detach()).pow(2).sum(-1).mean()
        rep = (zp.detach() - z[:, 1:]).pow(2).sum(-1).mean()
        loss = l_head + 0.5 * dyn + 0.1 * rep
        logs = {"wm_loss": float(loss.detach()), "wm_dyn": float(dyn.detach())}
        logs.update({f"wm_{k}": v for k, v in terms.items()})
        return loss, logs, post

    def imagine(self, start: torch.Tensor, policy, horizon: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Roll the prior from ``start`` (N, F) for ``horizon`` steps with actions from ``policy(feat)``.

        Returns feats (H + 1, N, F) = s_0..s_H and actions (H + 1, N, A) = a_0..a_H (a_H for Q(s_H, a_H)).
        Gradients flow through the actions and dynamics (the caller decides what to detach).
        """
        feats, acts = [start], []
        f = start
        for _ in range(horizon):
            a = policy(f)
            acts.append(a)
            f = self.img_step(f, a)
            feats.append(f)
        acts.append(policy(f))
        return torch.stack(feats), torch.stack(acts)
