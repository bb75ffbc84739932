"""SCOPE's preference stage (the second stage of the paper's Fig. 1): D₁/D₂ split, (x, y, y⁻) pairs, DPO with
π_ref = p_θ₀.

``build_preference_pairs`` turns the second half D₂ into a ``datasets.Dataset`` in TRL's preference format —
``prompt`` (the input built from x), ``chosen`` (the reference y) and ``rejected`` (a noisy sample y⁻ from
:func:`~.noisy_generation.generate_unfaithful`). ``scope_dpo`` tunes the SFT model on them with TRL's
``DPOTrainer`` (``loss_type="sigmoid"``, β = 0.1, dropout off, frozen reference = the initial policy)::

    L(θ) = − E log σ( β [ (log π_θ(y|x) − log π_ref(y|x)) − (log π_θ(y⁻|x) − log π_ref(y⁻|x)) ] )

with sequence log-probabilities summed over the response tokens (prompt masked, EOS appended to both responses).
``sequence_logps`` / ``dpo_sigmoid_loss`` are a plain re-statement of that formula, used to check the trainer.

Where the math comes from: Duong et al., ICLR 2025 (arXiv 2502.13674), Fig. 1 — the split of D into D₁ (SFT of
p_LM into p_θ₀) and D₂ (noisy samples and preference fine-tuning). The loss above is the DPO objective of Rafailov
et al., NeurIPS 2023 (arXiv 2305.18290), with π_ref = p_θ₀. Paper location: Fig. 1 only (its caption and number
as reproduced on third-party paper pages). The SCOPE paper's own section/equation numbers for the split, the SFT
stage and the preference loss are not cited: none was seen in the paper's text or in any page searched for issue
#39 (the paper's §3 is named, by a third-party re-implementation, only for the noisy generation — see
:mod:`.noisy_generation`).
"""

from __future__ import annotations

import copy
import functools
import math
import tempfile
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .noisy_generation import _check_alpha, check_same_vocabulary, generate_unfaithful


def _as_rows(dataset) -> list[dict]:
    try:
        from datasets import Dataset
    except ImportError:  # pragma: no cover - datasets is a declared dependency of the llm extra
        Dataset = ()  # noqa: N806
    if isinstance(dataset, Dataset):
        return dataset.to_list()
    if isinstance(dataset, Mapping):
        keys = list(dataset)
        n = {len(dataset[k]) for k in keys}
        if len(n) > 1:
            raise ValueError(f"dataset: columns have different lengths {sorted(n)}")
        return [{k: dataset[k][i] for k in keys} for i in range(n.pop() if n else 0)]
    if isinstance(dataset, Sequence) and all(isinstance(r, Mapping) for r in dataset):
        return [dict(r) for r in dataset]
    raise ValueError(
        f"dataset must be a datasets.Dataset, a dict of columns or a list of dicts, got {type(dataset).__name__}"
    )


def split_halves(dataset, seed: int = 0):
    """Disjoint halves (D₁, D₂) of ``dataset`` after a seeded shuffle; ``|D₁| = ⌈|D|/2⌉``.

    The paper's split (Fig. 1): D₁ is for supervised fine-tuning of p_LM into p_θ₀, D₂ for the unfaithful samples
    and the preference stage.
    Returns two objects of the input's kind (``datasets.Dataset`` or list of rows).
    """
    if not hasattr(dataset, "__len__"):
        raise ValueError(
            f"dataset must be a sized collection (list or datasets.Dataset), got {type(dataset).__name__}"
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    n = len(dataset)
    if n < 2:
        raise ValueError(f"dataset must hold at least 2 examples to be split in halves, got {n}")
    perm = np.random.default_rng(seed).permutation(n)
    k = math.ceil(n / 2)
    i1, i2 = sorted(perm[:k].tolist()), sorted(perm[k:].tolist())
    if hasattr(dataset, "select"):
        return dataset.select(i1), dataset.select(i2)
    rows = list(dataset)
    return [rows[i] for i in i1], [rows[i] for i in i2]


def build_preference_pairs(
    model,
    lm,
    dataset,
    alpha: float = 0.5,
    *,
    tokenizer,
    prompt_column: str = "prompt",
    reference_column: str = "reference",
    batch_size: int = 64,
    seed: int = 0,
    n_untouched: int = 2,
    temperature: float = 0.6,
    top_p: float = 0.9,
    max_new_tokens: int = 90,
    lm_prompt_ids=None,
    lm_tokenizer=None,
    **generate_kwargs,
):
    """SCOPE preference pairs for every (x, y) of ``dataset`` (normally D₂): ``prompt, chosen=y, rejected=y⁻``
    — the paper's synthetic preference dataset (Fig. 1), y⁻ from :func:`~.noisy_generation.generate_unfaithful`.

    ``model`` is the SFT model p_θ₀, ``lm`` the context-free base LM p_LM (same tokenizer). The prompt text is
    what the SFT model was trained to continue; ``chosen`` is the reference exactly as given, and ``rejected`` the
    decoded noisy continuation (rendered as the tokenizer renders it after the prompt), so that
    ``prompt + chosen`` / ``prompt + rejected`` are the strings TRL tokenizes. Returns a ``datasets.Dataset``.
    """
    from datasets import Dataset

    alpha = _check_alpha(alpha)
    if tokenizer is None or not hasattr(tokenizer, "padding_side"):
        raise ValueError(f"tokenizer must be a Hugging Face tokenizer, got {type(tokenizer).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an int, got {seed!r}")
    check_same_vocabulary(model, lm, tokenizer, lm_tokenizer)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    rows = _as_rows(dataset)
    if not rows:
        raise ValueError("dataset is empty; it must hold (prompt, reference) examples")
    for col in (prompt_column, reference_column):
        if col not in rows[0]:
            raise ValueError(
                f"{'prompt' if col == prompt_column else 'reference'}_column {col!r} not in dataset "
                f"columns {sorted(rows[0])}"
            )
    prompts = [r[prompt_column] for r in rows]
    refs = [r[reference_column] for r in rows]
    for i, (p, y) in enumerate(zip(prompts, refs, strict=True)):
        if not isinstance(y, str) or not y.strip():
            raise ValueError(f"{reference_column}: example {i} has an empty or non-string reference {y!r}")
        if not isinstance(p, str) or not p.strip():
            raise ValueError(f"{prompt_column}: example {i} has an empty or non-string prompt {p!r}")
    side, pad_tok = tokenizer.padding_side, tokenizer.pad_token
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dev = next(model.parameters()).device
    rejected: list[str] = []
    try:
        for b0 in range(0, len(prompts), batch_size):
            batch = prompts[b0 : b0 + batch_size]
            enc = tokenizer(batch, return_tensors="pt", padding=True).to(dev)
            new = generate_unfaithful(
                model,
                lm,
                enc,
                alpha,
                n_untouched=n_untouched,
                lm_prompt_ids=lm_prompt_ids,
                temperature=temperature,
                top_p=top_p,
                max_new_tokens=max_new_tokens,
                seed=int(seed) * 1_000_003 + b0,
                pad_token_id=tokenizer.pad_token_id,
                tokenizer=tokenizer,  # checked above (and warned there once if lm_tokenizer is None)
                lm_tokenizer=tokenizer if lm_tokenizer is None else lm_tokenizer,
                **generate_kwargs,
            )
            rejected.extend(_continuations(tokenizer, enc, new))
    finally:
        tokenizer.padding_side, tokenizer.pad_token = side, pad_tok
    return Dataset.from_dict({"prompt": prompts, "chosen": refs, "rejected": rejected})


def _continuations(tokenizer, enc, new: torch.Tensor) -> list[str]:
    """Text of each generated continuation as it reads after its prompt (cut at the first EOS)."""
    eos = tokenizer.eos_token_id
    ids = new.cpu()
    is_eos = ids == eos if eos is not None else torch.zeros_like(ids, dtype=torch.bool)
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1), torch.full((ids.shape[0],), ids.shape[1]))
    mask = enc["attention_mask"].cpu().bool()
    prompt_ids = [row[m].tolist() for row, m in zip(enc["input_ids"].cpu(), mask, strict=True)]
    gen_ids = [row[: int(k)].tolist() for row, k in zip(ids, first, strict=True)]
    p_txt = tokenizer.batch_decode(prompt_ids, skip_special_tokens=True)
    full = tokenizer.batch_decode(
        [p + g for p, g in zip(prompt_ids, gen_ids, strict=True)], skip_special_tokens=True
    )
    out = []
    for p, f, g in zip(p_txt, full, gen_ids, strict=True):
        out.append(f[len(p) :] if f.startswith(p) else tokenizer.decode(g, skip_special_tokens=True))
    return out


# ----------------------------------------------------------------------------------------------------------------
# DPO (TRL) and the formula it must match
# ----------------------------------------------------------------------------------------------------------------
def dpo_config(output_dir: str | None = None, **overrides):
    """``trl.DPOConfig`` with SCOPE's defaults (paper / authors' ``pref_llama`` config) for a local run.

    β = 0.1, sigmoid loss, lr 1e-6, 1 epoch, batch 4, linear schedule with 10% warm-up, seed 12357, dropout
    disabled, no checkpoints or loggers; ``overrides`` win. CPU is used when CUDA is absent.
    """
    from trl import DPOConfig

    kw = dict(
        output_dir=output_dir or tempfile.mkdtemp(prefix="scope_dpo_"),
        beta=0.1,
        loss_type=["sigmoid"],
        learning_rate=1e-6,
        num_train_epochs=1,
        per_device_train_batch_size=4,
        lr_scheduler_type="linear",
        warmup_steps=0.1,
        seed=12357,
        disable_dropout=True,
        activation_checkpointing=False,  # tiny models; the authors enable it for 7B
        report_to=[],
        save_strategy="no",
        logging_steps=10,
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
        max_length=None,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    import dataclasses

    known = {f.name for f in dataclasses.fields(DPOConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"overrides {unknown} are not trl.DPOConfig fields")
    kw.update(overrides)
    for name in ("beta", "learning_rate"):
        v = kw[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite float > 0, got {v!r}")
    return DPOConfig(**kw)


def _foreign_forward(fn, own: set[int]) -> bool:
    """True when ``fn`` (an instance-level ``forward``) reaches — through bound methods, closures, ``__wrapped__``
    and ``functools.partial`` — a module outside ``own`` (e.g. TRL's fused head over the original's forward,
    wrapped again by accelerate's autocast)."""
    stack, seen = [fn], set()
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if isinstance(f, torch.nn.Module):
            if id(f) not in own:
                return True
            continue
        if isinstance(f, functools.partial):
            stack.extend([f.func, *f.args, *f.keywords.values()])
            continue
        owner = getattr(f, "__self__", None)
        if owner is not None:
            stack.append(owner)
        func = getattr(f, "__func__", f)
        if callable(func):
            if hasattr(func, "__wrapped__"):
                stack.append(func.__wrapped__)
            for cell in getattr(func, "__closure__", None) or ():
                try:
                    stack.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    continue
    return False


def independent_copy(model):
    """``copy.deepcopy`` that is safe after TRL has patched ``model``.

    TRL's trainers (``SFTTrainer``, ``DPOTrainer``, …) replace ``model.forward`` by a closure over the *original*
    object's forward (their fused LM head). ``copy.deepcopy`` copies the parameters but not that closure, so the copy
    keeps computing with the original's weights — and follows them as the original trains. The copy drops every
    instance-level ``forward`` that closes over a module outside the copy, so it runs its own class ``forward`` (TRL
    patches it again when it trains it); instance forwards that refer to the copy itself (e.g. ``accelerate``
    device hooks, re-bound by ``deepcopy``) are kept.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    new = copy.deepcopy(model)
    own = {id(m) for m in new.modules()}
    for m in new.modules():
        fn = m.__dict__.get("forward")
        if fn is not None and _foreign_forward(fn, own):
            del m.__dict__["forward"]
    return new


def _is_peft_model(model) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a declared dependency of the llm extra
        return False
    return isinstance(model, PeftModel)


def make_dpo_trainer(
    model, pairs, tokenizer, *, ref_model=None, peft_config=None, args=None, **config_overrides
):
    """A ``trl.DPOTrainer`` for SCOPE: policy = ``model`` (p_θ₀), reference π_ref = p_θ₀ frozen.

    - default: π_ref = :func:`independent_copy` of ``model``, frozen (safe after TRL's ``SFTTrainer`` or an earlier
      ``DPOTrainer`` patched ``model.forward``; a plain ``deepcopy`` would follow the policy's weights);
    - ``peft_config`` (a ``peft.PeftConfig``, e.g. ``LoraConfig``): TRL wraps ``model`` in that adapter and trains
      only the adapter; π_ref = the same network with the adapter disabled, i.e. p_θ₀ itself (no copy is made);
    - ``model`` already a ``PeftModel``: TRL adds a frozen copy of its adapter as the reference (adapter ``"ref"``);
    - a given ``ref_model`` is used as is (TRL runs it under ``no_grad``).
    """
    from datasets import Dataset
    from trl import DPOTrainer

    if not isinstance(pairs, Dataset):
        raise ValueError(
            f"pairs must be a datasets.Dataset (build_preference_pairs' output), got {type(pairs).__name__}"
        )
    for col in ("prompt", "chosen", "rejected"):
        if col not in pairs.column_names:
            raise ValueError(f"pairs must have columns prompt/chosen/rejected (TRL format), missing {col!r}")
    if len(pairs) == 0:
        raise ValueError("pairs is empty")
    if peft_config is not None:
        from peft import PeftConfig

        if not isinstance(peft_config, PeftConfig):
            raise ValueError(
                f"peft_config must be a peft.PeftConfig (e.g. peft.LoraConfig(r=8, target_modules=...)), "
                f"got {type(peft_config).__name__}"
            )
        if _is_peft_model(model):
            raise ValueError(
                "peft_config was given but model is already a peft.PeftModel; pass the base model with "
                "peft_config, or the PeftModel without it (its adapter is then trained against a frozen copy)"
            )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if ref_model is None and peft_config is None and not _is_peft_model(model):
        # π_ref = a frozen copy of the initial policy p_θ₀ (with PEFT, TRL disables the adapter instead)
        ref_model = independent_copy(model).eval().requires_grad_(False)
    args = args if args is not None else dpo_config(**config_overrides)
    return DPOTrainer(
        model=model,
        ref_model=ref_model,
        args=args,
        train_dataset=pairs,
        processing_class=tokenizer,
        peft_config=peft_config,
    )


def scope_dpo(model, pairs, tokenizer, *, ref_model=None, peft_config=None, **config_overrides):
    """Preference-tune the SFT model on SCOPE pairs with TRL's DPO; returns ``(model, log_history)``.

    The preference fine-tuning stage of the paper's Fig. 1 (loss: DPO, Rafailov et al. 2023; see the module docstring).

    Keyword overrides go to :func:`dpo_config` (e.g. ``learning_rate=1e-4, num_train_epochs=2`` at toy scale).
    With ``peft_config`` the returned model is TRL's ``peft.PeftModel`` (only the adapter trained; π_ref = the
    adapter disabled), ready for ``merge_and_unload()`` or ``save_pretrained`` of the adapter alone.
    """
    from transformers.trainer_callback import PrinterCallback

    trainer = make_dpo_trainer(
        model, pairs, tokenizer, ref_model=ref_model, peft_config=peft_config, **config_overrides
    )
    trainer.remove_callback(PrinterCallback)  # logs stay in the returned history instead of stdout
    with warnings.catch_warnings():  # TRL 1.x reads the deprecated alias; nothing the caller can act on
        warnings.filterwarnings(
            "ignore", message=r"`is_gradient_checkpointing` is deprecated", category=FutureWarning
        )
        trainer.train()
    out = trainer.model if peft_config is not None else model
    out.eval()
    return out, list(trainer.state.log_history)


def sequence_logps(model, prompt_ids: Sequence[int], response_ids: Sequence[int]) -> torch.Tensor:
    """log π(y|x) = Σ_t log π(y_t | x, y_<t) over the response tokens only (one example, no padding)."""
    from .noisy_generation import _vocab_size

    vocab = _vocab_size(model)
    for name, ids in (("prompt_ids", prompt_ids), ("response_ids", response_ids)):
        ids = list(ids)
        if not ids:
            raise ValueError(f"{name} must hold at least one token id")
        if any(
            isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < vocab for i in ids
        ):
            raise ValueError(f"{name} must be int token ids in [0, {vocab}), got {ids[:8]!r}")
    ids = torch.tensor([list(prompt_ids) + list(response_ids)], device=next(model.parameters()).device)
    logits = model(input_ids=ids).logits[0, :-1].float()  # predicts ids[1:]
    lp = F.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]
    return lp[len(prompt_ids) - 1 :].sum()


def dpo_sigmoid_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float = 0.1,
) -> torch.Tensor:
    """Per-pair DPO loss −log σ(β[(log π_θ(y) − log π_ref(y)) − (log π_θ(y⁻) − log π_ref(y⁻))]): the objective of
    SCOPE's preference fine-tuning (paper Fig. 1) with π_ref = p_θ₀, preferred y, dispreferred y⁻.

    The formula is DPO's (Rafailov et al. 2023, arXiv 2305.18290); see the module docstring for what is cited."""
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not (math.isfinite(beta) and beta > 0):
        raise ValueError(
            f"beta must be a finite number > 0 (DPO's KL strength; the paper uses 0.1), got {beta!r}"
        )
    ts = {"policy_chosen": policy_chosen, "policy_rejected": policy_rejected, "ref_chosen": ref_chosen,
          "ref_rejected": ref_rejected}  # fmt: skip
    for name, t in ts.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor of sequence log-probabilities, got {type(t).__name__}")
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} must hold finite log-probabilities, got NaN/inf")
    shapes = {tuple(t.shape) for t in (policy_chosen, policy_rejected, ref_chosen, ref_rejected)}
    if len(shapes) != 1:
        raise ValueError(
            f"the four log-probability tensors must have one shape (pairs,), got {sorted(shapes)}"
        )
    return -F.logsigmoid(beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)))
