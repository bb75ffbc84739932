"""The LoRA baseline (App. A.2) through Hugging Face PEFT: ``LoraConfig`` + ``get_peft_model``.

Paper defaults: rank 16, α 32, dropout 0.05 on ``q_proj``/``v_proj``, trained by next-token prediction (SFT) on
prompt + solution; it is also trained here with the same RL loss as SVF (``train_reinforce`` with the adapter
disabled as the reference policy), as in the paper's Table 4 ablation.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn


def make_lora(
    model: nn.Module,
    r: int = 16,
    alpha: float = 32,
    dropout: float = 0.05,
    target_modules: str | Sequence[str] = ("q_proj", "v_proj"),
    seed: int | None = None,
):
    """Wrap ``model`` with a PEFT LoRA adapter (``init_lora_weights=True``: B = 0, so it starts at the base model)."""
    import torch
    from peft import LoraConfig, get_peft_model

    if not isinstance(r, int) or r < 1:
        raise ValueError(f"r must be a positive int, got {r!r}")
    cfg = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=target_modules if isinstance(target_modules, str) else list(target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    if seed is None:
        return get_peft_model(model, cfg)
    with torch.random.fork_rng(devices=[]):  # LoRA A is drawn from the global RNG: pin it to `seed`
        torch.manual_seed(int(seed))
        return get_peft_model(model, cfg)


def lora_trainable_params(peft_model: nn.Module) -> int:
    return sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
