"""RL training of experts: REINFORCE with a KL penalty to the base model (Sec. 3.2, Eq. 1).

    J(θ_z) = E[ log π_{W'}(ŷ | x) · r(ŷ, y) ] − λ · KL

Per sample j (official ``Reinforce.step_optimization``): ``pg_j = −r_j Σ_t log π(ŷ_t)`` (token sum, no baseline,
no length normalisation), ``kl_j = Σ_t Σ_v KL`` over the full vocabulary, loss = mean_j (pg_j + λ kl_j); rewards are
±1; gradient-norm clipped to 1e-3; Adam lr 2e-3. The official code computes ``KL(π_ref ‖ π)``
(``kl_direction="ref_policy"``, default); the paper writes ``KL(π ‖ π_ref)`` (``"policy_ref"``). Rollouts are greedy
in the official code (``greedy=True``) or sampled. The trainer is generic over the trainable tensors and the
reference policy, so the same loss trains SVF experts and the PEFT LoRA baseline.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common.fields import bounded, check_fields
from iclr25.common.progress import progress
from iclr25.common.schedule import warmup_cosine_schedule
from iclr25.common.seeding import derive_seed, torch_generator

KL_DIRECTIONS = ("ref_policy", "policy_ref")
# prompt_fn(step, generator) -> (input_ids (B, P), attention_mask (B, P) | None, targets: anything reward_fn reads)
PromptFn = Callable[[int, torch.Generator], tuple]
# reward_fn(completion_ids (B, T), completion_mask (B, T), targets) -> rewards (B,) in {-1, +1}
RewardFn = Callable[[torch.Tensor, torch.Tensor, object], torch.Tensor]


@dataclass(frozen=True)
class ReinforceConfig:
    # official script: 200 iterations (config default 2000), best-validation checkpoint kept
    steps: int = bounded(200, lo=1)
    batch_size: int = bounded(256, lo=1)
    lr: float = bounded(2e-3, lo=0, lo_open=True)
    max_grad_norm: float = bounded(1e-3, lo=0, lo_open=True)
    kl_coef: float = bounded(0.1, lo=0)  # λ; repo default 0, the maintainers' real runs 0.1–0.3
    kl_direction: str = bounded("ref_policy", choices=KL_DIRECTIONS)
    greedy: bool = True  # official: vLLM temperature 0
    temperature: float = bounded(1.0, lo=0, lo_open=True)
    max_new_tokens: int = bounded(1, lo=1)
    # "adam" (official code, constant lr) | "adamw_cosine" (paper)
    optimizer: str = bounded("adam", choices=("adam", "adamw_cosine"))
    eval_every: int = bounded(10, lo=1)
    reward_norm: bool = False  # rw_norm (off by default)
    reward_clip: float | None = None  # rw_clip
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above


def _last_logits(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    # prompts are left-padded (or unpadded): the next-token distribution sits at the last position
    return model(input_ids=input_ids, attention_mask=attention_mask).logits[:, -1].float()  # (B, V)


@torch.no_grad()
def rollout(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    max_new_tokens: int = 1,
    greedy: bool = True,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Completions ``(ids (B, T), mask (B, T))`` from left-padded prompts; the mask keeps tokens up to the first eos.

    One-token answers use a single forward pass; longer ones use HF ``generate`` (sampling seeded from
    ``generator`` so the same seed gives the same rollouts).
    """
    if max_new_tokens == 1:
        logits = _last_logits(model, input_ids, attention_mask)
        if greedy:
            tok = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, -1)
            tok = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(input_ids.device)
        return tok[:, None], torch.ones_like(tok[:, None], dtype=torch.bool)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator)) if generator is not None else 0
    devices = [input_ids.device] if input_ids.is_cuda else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            do_sample=not greedy,
            temperature=temperature if not greedy else None,
            top_p=None,
            top_k=None,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id if pad_token_id is not None else eos_token_id,
        )
    comp = out[:, input_ids.shape[1] :]  # (B, T)
    if eos_token_id is None:
        return comp, torch.ones_like(comp, dtype=torch.bool)
    is_eos = comp == eos_token_id
    before = torch.cumsum(is_eos.long(), 1) - is_eos.long()  # eos tokens strictly before t
    return comp, before == 0


def completion_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
) -> torch.Tensor:
    """Full-vocabulary log-probabilities ``log π(· | x, ŷ_<t)`` at every completion position: (B, T, V)."""
    B, P = input_ids.shape
    T = completion_ids.shape[1]
    ids = torch.cat([input_ids, completion_ids], 1)
    am = None
    if attention_mask is not None:
        am = torch.cat([attention_mask, completion_mask.to(attention_mask.dtype)], 1)
    logits = model(input_ids=ids, attention_mask=am).logits[
        :, P - 1 : P + T - 1
    ]  # predicts completion token t
    return F.log_softmax(logits.float(), -1)


def kl_per_sample(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, direction: str = "ref_policy"
):
    """Σ_t Σ_v KL over completion tokens: ``KL(π_ref‖π)`` (official code) or ``KL(π‖π_ref)`` (paper). (B,)"""
    if direction == "ref_policy":
        kl = (ref_logp.exp() * (ref_logp - logp)).sum(-1)  # (B, T)
    elif direction == "policy_ref":
        kl = (logp.exp() * (logp - ref_logp)).sum(-1)
    else:
        raise ValueError(f"direction must be one of {KL_DIRECTIONS}, got {direction!r}")
    return (kl * mask).sum(-1)


def reinforce_loss(
    logp: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    rewards: torch.Tensor,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_direction: str = "ref_policy",
) -> tuple[torch.Tensor, dict[str, float]]:
    """``mean_j [ −r_j Σ_t log π(ŷ_jt) + λ Σ_t KL_jt ]`` from full log-probs ``logp`` (B, T, V)."""
    mask = completion_mask.to(logp.dtype)
    tok_logp = logp.gather(-1, completion_ids[..., None]).squeeze(-1)  # (B, T) log π(ŷ_t)
    pg = -(tok_logp * mask).sum(-1) * rewards.to(logp.dtype)  # (B,)
    kl = torch.zeros_like(pg)
    if ref_logp is not None and kl_coef > 0:
        kl = kl_per_sample(logp, ref_logp, mask, kl_direction)
    loss = (pg + kl_coef * kl).mean()
    return loss, {"pg": float(pg.detach().mean()), "kl": float(kl.detach().mean())}


def _shape_rewards(r: torch.Tensor, cfg: ReinforceConfig) -> torch.Tensor:
    if cfg.reward_norm:
        r = (r - r.mean()) / r.std().clamp_min(1e-8)
    if cfg.reward_clip is not None:
        r = r.clamp(-cfg.reward_clip, cfg.reward_clip)
    return r


def _pick(logp: torch.Tensor, cfg: ReinforceConfig, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    if cfg.greedy:
        tok = logp.argmax(-1)
    else:
        probs = torch.softmax(logp / cfg.temperature, -1)
        tok = torch.multinomial(probs.cpu(), 1, generator=g).squeeze(1).to(logp.device)
    return tok[:, None], torch.ones_like(tok[:, None], dtype=torch.bool)


def make_optimizer(params: Sequence[torch.Tensor], cfg: ReinforceConfig):
    """``(optimizer, scheduler or None)``: Adam at a constant lr (official code), or AdamW with cosine decay to 0
    over ``cfg.steps`` (the paper; transformers' schedule without warm-up, :mod:`iclr25.common.schedule`)."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr), None
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    return opt, warmup_cosine_schedule(opt, 0, cfg.steps, 0.0)


def train_reinforce(
    model: nn.Module,
    params: Sequence[torch.Tensor],
    prompt_fn: PromptFn,
    reward_fn: RewardFn,
    cfg: ReinforceConfig = ReinforceConfig(),
    reference: Callable[[], contextlib.AbstractContextManager] | None = None,
    val_fn: Callable[[], float] | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    desc: str = "reinforce",
) -> dict:
    """Train ``params`` (SVF z vectors or LoRA matrices) with the RL loss; keep the best-validation state.

    ``reference()`` returns a context in which ``model`` is the frozen base policy (``svf_disabled(model)`` for SVF,
    ``peft_model.disable_adapter()`` for LoRA). Returns ``{"history", "best_step", "best_val"}``; when ``val_fn``
    is given the params are restored to the best-validation state (the official checkpoint choice).
    """
    params = list(params)
    if not params or not all(p.requires_grad for p in params):
        raise ValueError("params must be a non-empty list of tensors with requires_grad=True")
    if cfg.kl_coef > 0 and reference is None:
        raise ValueError(f"kl_coef={cfg.kl_coef} > 0 needs a reference() context giving the base policy")
    opt, sched = make_optimizer(params, cfg)
    history: list[dict] = []
    best_val, best_step = -float("inf"), 0
    best_state = [p.detach().clone() for p in params]
    if val_fn is not None:
        best_val = float(val_fn())
    was = model.training
    model.eval()  # no dropout in rollouts; LoRA dropout stays off for a deterministic policy gradient
    for step in progress(range(cfg.steps), desc=desc):
        g = torch_generator(derive_seed(cfg.seed, "rl", step))
        input_ids, attention_mask, targets = prompt_fn(step, g)
        if cfg.max_new_tokens == 1:
            # one-token answers: the rollout distribution is the training forward's last position (one pass)
            logp = F.log_softmax(_last_logits(model, input_ids, attention_mask), -1)[:, None]  # (B, 1, V)
            comp, cmask = _pick(logp[:, 0].detach(), cfg, g)
        else:
            comp, cmask = rollout(
                model,
                input_ids,
                attention_mask,
                cfg.max_new_tokens,
                cfg.greedy,
                cfg.temperature,
                g,
                eos_token_id,
                pad_token_id,
            )
            logp = completion_logprobs(model, input_ids, attention_mask, comp, cmask)
        raw_r = reward_fn(comp, cmask, targets).float()
        r = _shape_rewards(raw_r, cfg)
        ref = None
        if cfg.kl_coef > 0:
            with torch.no_grad(), reference():
                ref = completion_logprobs(model, input_ids, attention_mask, comp, cmask)
        loss, st = reinforce_loss(logp, comp, cmask, r, ref, cfg.kl_coef, cfg.kl_direction)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        opt.step()
        if sched is not None:
            sched.step()
        rec = {
            "step": step + 1,
            "loss": float(loss.detach()),
            "reward": float(raw_r.mean()),
            "grad_norm": float(gnorm),
            **st,
        }
        if val_fn is not None and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            v = float(val_fn())
            rec["val"] = v
            if v > best_val:
                best_val, best_step = v, step + 1
                best_state = [p.detach().clone() for p in params]
        history.append(rec)
    if val_fn is not None:
        with torch.no_grad():
            for p, b in zip(params, best_state):
                p.copy_(b)
    model.train(was)
    return {"history": history, "best_step": best_step, "best_val": best_val}
