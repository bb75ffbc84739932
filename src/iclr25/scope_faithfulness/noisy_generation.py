"""SCOPE's self-supervised unfaithful samples (the paper's "noisy generation" of negatives: the mixture of p_LM and
p_θ₀ in its Fig. 1 that builds the synthetic preference dataset).

At every decoding step a per-sample coin ``z_t ~ Bernoulli(α)`` decides which model picks the next token::

    y⁻_t ~ p_LM(· | y⁻_<t)        if z_t = 1      (the context-free pre-trained LM: never sees x)
    y⁻_t ~ p_θ₀(· | x, y⁻_<t)     if z_t = 0      (the fine-tuned, grounded model)

so that, when sampling, y⁻_t follows the per-token mixture ``(1 − α)·p_θ₀(·|x, y<t) + α·p_LM(·|y<t)``.
The first ``n_untouched`` generated tokens always come from p_θ₀ (as in the authors' decoding code), tokens that
are −inf in the grounded branch (``suppress_tokens``, ``min_new_tokens`` …) stay −inf in the LM branch, and the
sampling warpers (temperature, top-p) act after the switch, on the chosen branch's log-probabilities.

The LM branch is Hugging Face's :class:`~transformers.UnbatchedClassifierFreeGuidanceLogitsProcessor` machinery:
the noise model keeps its own KV cache and is advanced with the token actually chosen at each step.

Where the math comes from: Duong et al., ICLR 2025 (arXiv 2502.13674), Fig. 1 (the mixture of p_LM and p_θ₀ that
generates the synthetic preference dataset). The per-step switch with a binary α_t is written out as
``y_t ~ p_θ(·|y<t, x) + α_t p_LM(·|y<t)``, α_t ∈ {0, 1}, in the authors' ``flbbb/scope-decoding`` README.
Paper location: Fig. 1 (as above) and (paper §3, Algorithm 1) — the §3 / Algorithm 1 number comes from the
comments of a third-party SCOPE re-implementation, not from the paper's own text (only its abstract and the start
of its introduction could be read), so it is the weaker kind of citation; no equation number is cited. See the
method card's "Paper locations cited in the code".
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from transformers import UnbatchedClassifierFreeGuidanceLogitsProcessor


def _check_alpha(alpha: float) -> float:
    """α as a float in [0, 1]; a string, a bool, NaN or a tensor with more than one value is refused."""
    if isinstance(alpha, torch.Tensor) and alpha.numel() == 1 and alpha.dtype.is_floating_point:
        alpha = float(alpha)
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise ValueError(f"alpha must be a float in [0, 1], got {alpha!r} ({type(alpha).__name__})")
    a = float(alpha)
    if not (math.isfinite(a) and 0.0 <= a <= 1.0):
        raise ValueError(f"alpha must be a float in [0, 1], got {alpha!r}")
    return a


def _token_ids(name: str, ids, vocab: int | None = None) -> torch.Tensor:
    """``ids`` (a tensor, array or nested list of token ids) as a long tensor; fractional, boolean or
    out-of-vocabulary ids raise a ``ValueError`` naming ``name`` (they are never truncated to integers)."""
    if isinstance(ids, (str, bytes)):
        raise ValueError(f"{name} must be token ids (ints), got a string {ids!r:.60}")
    try:
        t = ids if isinstance(ids, torch.Tensor) else torch.as_tensor(np.asarray(ids))
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"{name} must be a rectangular array of int token ids, got {ids!r:.80} ({e})"
        ) from None
    if t.dtype == torch.bool:
        raise ValueError(f"{name} must be int token ids, got a bool tensor")
    if t.dtype.is_floating_point or t.dtype.is_complex:
        frac = t.numel() and not bool(torch.isfinite(t).all() and (t == t.round()).all())
        raise ValueError(
            f"{name} must be int token ids, got {t.dtype} values"
            + (f" with fractional/non-finite entries (e.g. {t.flatten()[:4].tolist()})" if frac else "")
        )
    t = t.long()
    if vocab is not None and t.numel() and (t.min() < 0 or t.max() >= vocab):
        raise ValueError(
            f"{name} must be token ids in [0, {vocab}) (the vocabulary), got range [{int(t.min())}, {int(t.max())}]"
        )
    return t


def _vocab_size(model, name: str = "model") -> int:
    if not hasattr(model, "get_output_embeddings") or not hasattr(model, "config"):
        raise ValueError(f"{name} must be a Hugging Face causal LM, got {type(model).__name__}")
    emb = model.get_output_embeddings()
    if emb is not None and getattr(emb, "weight", None) is not None:
        return int(emb.weight.shape[0])
    return int(model.config.vocab_size)


def vocabulary_fingerprint(tokenizer) -> str:
    """SHA-256 of a tokenizer's token→id map (sorted) and its special tokens: equal only for one vocabulary.

    Two tokenizers of the same size (Llama-2 and Mistral both have 32 000 tokens) get different fingerprints."""
    if not callable(getattr(tokenizer, "get_vocab", None)):
        raise ValueError(
            f"tokenizer must be a Hugging Face tokenizer (with get_vocab()), got {type(tokenizer).__name__}"
        )
    h = hashlib.sha256()
    for tok, i in sorted(tokenizer.get_vocab().items(), key=lambda kv: (kv[1], kv[0])):
        h.update(f"{i}\t{tok}\n".encode("utf-8", "surrogatepass"))
    for k in ("bos_token_id", "eos_token_id", "unk_token_id"):
        h.update(f"{k}={getattr(tokenizer, k, None)}\n".encode())
    return h.hexdigest()


def _tok_name(tokenizer) -> str:
    return repr(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)


def check_same_vocabulary(model, lm, tokenizer=None, lm_tokenizer=None) -> None:
    """Raise ``ValueError`` when the grounded model and the noise LM cannot share token ids.

    The mixture is taken token by token, so both models must index one vocabulary. Checked: equal output sizes,
    equal ``bos``/``eos`` ids in the two model configs, and — when both tokenizers are given — equal
    :func:`vocabulary_fingerprint` (the whole token→id map, so Llama-2 and Mistral tokenisers, both of 32 000
    tokens, cannot be mixed) and a tokenizer no larger than the models' output. Sizes alone cannot tell two
    vocabularies apart: without ``lm_tokenizer`` (and ``lm`` not the same object as ``model``) a
    ``UserWarning`` says the identity was not verified; pass the LM's own tokenizer (or the shared one) to
    verify it.
    """
    v_main, v_lm = _vocab_size(model, "model"), _vocab_size(lm, "lm")
    if v_main != v_lm:
        raise ValueError(
            f"lm: tokenizer/vocabulary mismatch — the model scores {v_main} tokens but the noise LM scores {v_lm}; "
            "SCOPE mixes the two distributions token by token, so both must use the same tokenizer"
        )
    for k in ("bos_token_id", "eos_token_id"):
        a, b = getattr(model.config, k, None), getattr(lm.config, k, None)
        if a is not None and b is not None and a != b:
            raise ValueError(
                f"lm: config {k} differs ({a} for the model, {b} for the noise LM): the two models do not share "
                "a tokenizer"
            )
    if tokenizer is not None and lm_tokenizer is not None:
        if tokenizer is not lm_tokenizer:
            fa, fb = vocabulary_fingerprint(tokenizer), vocabulary_fingerprint(lm_tokenizer)
            if fa != fb:
                va, vb = tokenizer.get_vocab(), lm_tokenizer.get_vocab()
                diff = next((t for t in sorted(va) if vb.get(t) != va[t]), None)
                raise ValueError(
                    f"lm_tokenizer: its vocabulary ({_tok_name(lm_tokenizer)}, {len(vb)} tokens, fingerprint "
                    f"{fb[:12]}) differs from tokenizer's ({_tok_name(tokenizer)}, {len(va)} tokens, fingerprint "
                    f"{fa[:12]})"
                    + (
                        f", e.g. token {diff!r} is id {va[diff]} vs {vb.get(diff)}"
                        if diff is not None
                        else ""
                    )
                    + "; both models must share one tokenizer"
                )
        n = len(tokenizer)
        if n > v_main:
            raise ValueError(
                f"tokenizer: {_tok_name(tokenizer)} has {n} tokens but the models score only {v_main}; "
                "it is not their tokenizer"
            )
    elif lm is not model:
        warnings.warn(
            "check_same_vocabulary: only the vocabulary sizes and bos/eos ids were compared; pass tokenizer= and "
            "lm_tokenizer= (the noise LM's own tokenizer) to verify that both models share one vocabulary",
            UserWarning,
            stacklevel=3,
        )


class ScopeNoiseProcessor(UnbatchedClassifierFreeGuidanceLogitsProcessor):
    r"""Per-token switch between the grounded model's scores and a context-free noise LM (SCOPE's noisy generation).

    The paper's mixture of p_θ₀ and p_LM (arXiv 2502.13674, Fig. 1; paper §3, Algorithm 1 — number from a
    third-party re-implementation, see the module docstring; the formula as in the authors' ``scope-decoding``
    README): at each step a coin z_t ~ Bernoulli(α) picks
    p_LM(·|y⁻<t) (z_t = 1) or p_θ₀(·|x, y⁻<t) (z_t = 0), so sampling follows (1 − α)·p_θ₀ + α·p_LM per token.

    Use one instance per ``generate`` call (it keeps the LM branch's KV cache). Greedy or sampling decoding with
    ``num_beams=1``; ``num_return_sequences`` works (every row gets its own coins).

    Args:
        lm: the context-free noise model p_LM (usually the pre-trained base model), same vocabulary as the model.
        alpha: noise level α ∈ [0, 1] (paper default 0.5).
        n_untouched: the first generated tokens always taken from the grounded model (authors' code: 2).
        lm_prompt_ids: what p_LM is conditioned on before the generated tokens, shape ``(1, P)`` or ``(B, P)``;
            default ``[[bos_token_id]]`` of ``lm`` (the paper's empty prompt). A generic style prompt such as
            "Write a seamless short sentence." is allowed; it must never contain the context x.
        generator: a ``torch.Generator`` (on the scores' device) for the coins; ``seed`` builds one.

    After decoding, :attr:`lm_steps` holds the coins actually applied, ``(B, T)`` bool (True = LM branch).
    """

    def __init__(
        self,
        lm,
        alpha: float = 0.5,
        n_untouched: int = 2,
        lm_prompt_ids: torch.Tensor | Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        seed: int | None = None,
        use_cache: bool = True,
    ):
        self.alpha = _check_alpha(alpha)
        if isinstance(n_untouched, bool) or not isinstance(n_untouched, int) or n_untouched < 0:
            raise ValueError(f"n_untouched must be an int >= 0, got {n_untouched!r}")
        self.n_untouched = n_untouched
        if lm_prompt_ids is None:
            bos = getattr(lm.config, "bos_token_id", None)
            if bos is None:
                raise ValueError(
                    "lm_prompt_ids: the noise LM has no bos_token_id; pass lm_prompt_ids explicitly"
                )
            lm_prompt_ids = [int(bos)]
        v = _vocab_size(lm, "lm")
        ids = _token_ids("lm_prompt_ids", lm_prompt_ids, v)
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or ids.shape[1] == 0:
            raise ValueError(
                f"lm_prompt_ids must be a non-empty (P,) or (B, P) id tensor, got shape {tuple(ids.shape)}"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be None or an int, got {seed!r}")
        super().__init__(guidance_scale=1.0, model=lm, unconditional_ids=None, use_cache=use_cache)
        self._lm_prompt = ids
        self._prompt_len: int | None = None
        self._generator = generator
        self._seed = seed
        self._coins: list[torch.Tensor] = []

    @property
    def lm_steps(self) -> torch.Tensor:
        """``(B, T)`` bool: True where the token at step t was drawn from the LM branch."""
        if not self._coins:
            return torch.zeros(0, 0, dtype=torch.bool)
        return torch.stack(self._coins, dim=1)

    def _start(self, input_ids: torch.Tensor) -> None:
        b = input_ids.shape[0]
        ids = self._lm_prompt.to(input_ids.device)
        if ids.shape[0] == 1:
            ids = ids.expand(b, -1)
        elif ids.shape[0] != b:
            raise ValueError(f"lm_prompt_ids has {ids.shape[0]} rows but the batch has {b}")
        self.unconditional_context["input_ids"] = ids.contiguous()
        self.unconditional_context["attention_mask"] = torch.ones_like(ids)
        self._prompt_len = input_ids.shape[1]
        if self._generator is None:
            self._generator = torch.Generator(device=input_ids.device)
            if self._seed is not None:
                self._generator.manual_seed(int(self._seed))
            else:
                self._generator.seed()

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._prompt_len is None:
            self._start(input_ids)
        t = input_ids.shape[1] - self._prompt_len  # index of the token being chosen
        lp_main = F.log_softmax(scores.float(), dim=-1)  # (B, V)
        b = scores.shape[0]
        if self.alpha == 0.0:
            self._coins.append(torch.zeros(b, dtype=torch.bool, device=scores.device))
            return lp_main.to(scores.dtype)
        lm_logits = self.get_unconditional_logits(input_ids)[:, -1].float()  # (B, V), advances p_LM's cache
        if lm_logits.shape != lp_main.shape:
            raise ValueError(
                f"lm: noise LM scores shape {tuple(lm_logits.shape)} != model scores {tuple(lp_main.shape)}; "
                "both models must share one tokenizer"
            )
        blocked = torch.isneginf(lp_main)  # the grounded branch's −inf mask
        lp_lm = F.log_softmax(lm_logits.masked_fill(blocked, float("-inf")), dim=-1)
        z = torch.rand(b, generator=self._generator, device=scores.device) < self.alpha  # per-sample coins
        if t < self.n_untouched:
            z = torch.zeros_like(z)
        self._coins.append(z)
        return torch.where(z[:, None], lp_lm, lp_main).to(scores.dtype)


def _check_decoding(max_new_tokens, min_new_tokens, temperature, top_p, do_sample) -> None:
    for name, v, lo in (("max_new_tokens", max_new_tokens, 1), ("min_new_tokens", min_new_tokens, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if min_new_tokens > max_new_tokens:
        raise ValueError(f"min_new_tokens must be <= max_new_tokens = {max_new_tokens}, got {min_new_tokens}")
    if do_sample:
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not 0 < temperature < math.inf
        ):
            raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")


def _as_inputs(inputs, vocab: int | None = None) -> dict[str, torch.Tensor]:
    if isinstance(inputs, torch.Tensor):
        ids = inputs if inputs.ndim == 2 else inputs[None]
        out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    elif isinstance(inputs, Mapping) and "input_ids" in inputs:
        ids = inputs["input_ids"]
        if not isinstance(ids, torch.Tensor):
            ids = _token_ids("inputs: input_ids", ids)
        out = {"input_ids": ids}
        if inputs.get("attention_mask") is not None:
            out["attention_mask"] = torch.as_tensor(inputs["attention_mask"])
        else:
            out["attention_mask"] = torch.ones_like(out["input_ids"])
    else:
        out = None
    if out is not None:
        ids = out["input_ids"]
        if ids.ndim != 2 or ids.shape[1] == 0 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(
                f"inputs: input_ids must be a non-empty (B, L) integer tensor, got {ids.dtype} {tuple(ids.shape)}"
            )
        if vocab is not None and (ids.min() < 0 or ids.max() >= vocab):
            raise ValueError(
                f"inputs: input_ids must be token ids in [0, {vocab}), got range [{int(ids.min())}, {int(ids.max())}]"
            )
        if out["attention_mask"].shape != ids.shape:
            raise ValueError(
                f"inputs: attention_mask must have the shape of input_ids {tuple(ids.shape)}, "
                f"got {tuple(out['attention_mask'].shape)}"
            )
        return out
    raise ValueError(
        f"inputs must be an input_ids tensor or a mapping with 'input_ids', got {type(inputs).__name__}"
    )


@torch.no_grad()
def generate_unfaithful(
    model,
    lm,
    inputs,
    alpha: float = 0.5,
    *,
    n_untouched: int = 2,
    lm_prompt_ids: torch.Tensor | Sequence[int] | None = None,
    do_sample: bool = True,
    temperature: float = 0.6,
    top_p: float = 0.9,
    max_new_tokens: int = 90,
    min_new_tokens: int = 1,
    seed: int | None = None,
    tokenizer=None,
    lm_tokenizer=None,
    return_processor: bool = False,
    **generate_kwargs,
):
    """Sample unfaithful continuations y⁻ of ``inputs`` with SCOPE's noisy decoding (the paper's mixture of p_θ₀
    = ``model`` and p_LM = ``lm``, Fig. 1; paper §3, Algorithm 1 per a third-party re-implementation; see
    :class:`ScopeNoiseProcessor`).

    ``inputs``: a *left-padded* batch (``BatchEncoding`` / dict with ``input_ids`` and ``attention_mask``, or an
    id tensor) of prompts built from the contexts x. Returns the generated ids ``(B, T)`` (padding after EOS), and
    the :class:`ScopeNoiseProcessor` (for its coins) when ``return_processor``. Defaults follow the authors'
    generation config: T = 0.6, top-p 0.9, 90 new tokens, first 2 tokens untouched. Both models are decoded in
    eval mode (dropout off) and restored afterwards. Any other ``generate`` keyword (``suppress_tokens`` …) passes
    through; its −inf mask is respected by the LM branch.
    """
    alpha = _check_alpha(alpha)
    check_same_vocabulary(model, lm, tokenizer, lm_tokenizer)
    if generate_kwargs.get("num_beams", 1) != 1:
        raise ValueError(f"num_beams must be 1 for noisy generation, got {generate_kwargs['num_beams']!r}")
    _check_decoding(max_new_tokens, min_new_tokens, temperature, top_p, do_sample)
    enc = _as_inputs(inputs, _vocab_size(model))
    dev = next(model.parameters()).device
    enc = {k: v.to(dev) for k, v in enc.items()}
    if (enc["attention_mask"][:, -1] == 0).any():
        raise ValueError(
            "inputs: batch must be left-padded (attention_mask[:, -1] == 0 found) for generation"
        )
    proc = ScopeNoiseProcessor(lm, alpha, n_untouched=n_untouched, lm_prompt_ids=lm_prompt_ids, seed=seed)
    was = (model.training, lm.training)
    model.eval()
    lm.eval()
    pad = generate_kwargs.pop("pad_token_id", None)
    if pad is None:
        pad = model.generation_config.pad_token_id
        if pad is None:
            pad = model.config.eos_token_id
    sample_kw = {"temperature": temperature, "top_p": top_p} if do_sample else {}
    try:
        # HF's sampler draws from the global RNG: with a seed, fork it so the caller's stream is untouched
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else [], enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(int(seed))
            out = model.generate(
                **enc,
                logits_processor=[proc],
                do_sample=do_sample,
                max_new_tokens=max_new_tokens,
                min_new_tokens=min_new_tokens,
                pad_token_id=pad,
                **sample_kw,
                **generate_kwargs,
            )
    finally:
        model.train(was[0])
        lm.train(was[1])
    new = out[:, enc["input_ids"].shape[1] :]
    return (new, proc) if return_processor else new


@torch.no_grad()
def context_aware_generate(model, inputs, alpha: float = 0.5, *, lm_prompt_ids=None, **generate_kwargs):
    """Context-aware decoding (CAD, Shi et al. 2024), a decoding-time baseline of the SCOPE paper's experiments.

    ``(1 + α)·log p(y|x, y<t) − α·log p(y|y<t)`` through HF ``generate``'s classifier-free guidance
    (``guidance_scale = 1 + α``, ``negative_prompt_ids`` = the context-free prompt, default BOS). Returns new ids.
    """
    if (
        isinstance(alpha, (bool, np.bool_))
        or not isinstance(alpha, (int, float, np.integer, np.floating))
        or not (math.isfinite(alpha) and alpha >= 0)
    ):
        raise ValueError(f"alpha must be a finite float >= 0, got {alpha!r} ({type(alpha).__name__})")
    if "max_new_tokens" in generate_kwargs:
        v = generate_kwargs["max_new_tokens"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"max_new_tokens must be an int >= 1, got {v!r}")
    enc = _as_inputs(inputs, _vocab_size(model))
    dev = next(model.parameters()).device
    enc = {k: v.to(dev) for k, v in enc.items()}
    b = enc["input_ids"].shape[0]
    if lm_prompt_ids is None:
        lm_prompt_ids = [model.config.bos_token_id]
    neg = _token_ids("lm_prompt_ids", lm_prompt_ids, _vocab_size(model)).to(dev)
    if neg.ndim not in (1, 2) or neg.shape[-1] == 0:
        raise ValueError(
            f"lm_prompt_ids must be a non-empty (P,) or (B, P) id list, got shape {tuple(neg.shape)}"
        )
    neg = (neg[None] if neg.ndim == 1 else neg).expand(b, -1).contiguous()
    was = model.training
    model.eval()
    try:
        pad = generate_kwargs.pop("pad_token_id", None)
        if pad is None:
            pad = model.generation_config.pad_token_id
            if pad is None:
                pad = model.config.eos_token_id
        out = model.generate(
            **enc, guidance_scale=1.0 + alpha, negative_prompt_ids=neg, pad_token_id=pad, **generate_kwargs
        )
    finally:
        model.train(was)
    return out[:, enc["input_ids"].shape[1] :]
