"""Learning-rate schedules from transformers, shared by every training loop in the package.

``warmup_cosine_schedule(opt, warmup_steps, total_steps, min_lr_ratio)`` is transformers'
``get_cosine_with_min_lr_schedule_with_warmup`` with the warm-up counting the current step — the schedule the
package's training loops have always used: at step ``s`` the learning rate is ``lr·(s+1)/W`` during warm-up,
then a cosine from ``lr`` at ``s = W`` down to ``lr·min_lr_ratio`` at ``s = total_steps``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def warmup_cosine_factor(
    warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0
) -> Callable[[int], float]:
    """The learning-rate multiplier of transformers' ``get_cosine_with_min_lr_schedule_with_warmup``, with the
    warm-up counting the current step: ``(s + 1) / W`` for ``s < W`` (step 0 already trains), then cosine from 1
    at ``s = W`` to ``min_lr_ratio`` at ``s = total_steps``."""
    from transformers import get_cosine_with_min_lr_schedule_with_warmup

    probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    hf = get_cosine_with_min_lr_schedule_with_warmup(
        probe, warmup_steps, total_steps, min_lr_rate=min_lr_ratio
    ).lr_lambdas[0]
    return lambda s: float(hf(s + 1) if s < warmup_steps else hf(min(s, total_steps)))


def warmup_cosine_schedule(
    optimizer: torch.optim.Optimizer,
    warmup_steps: int,
    total_steps: int,
    min_lr_ratio: float = 0.0,
    start_step: int = 0,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` following :func:`warmup_cosine_factor` (call ``.step()`` after each optimiser step);
    ``start_step`` resumes it (the optimiser's learning rate becomes that of ``start_step``)."""
    if start_step:
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", g["lr"])
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine_factor(warmup_steps, total_steps, min_lr_ratio), last_epoch=start_step - 1
    )
