"""Faithfulness metrics: SacreBLEU, and a hook for model-based scores (NLI / AlignScore-style) from local weights.

The synthetic task's exact hallucination rate and field recall live in :mod:`.biographies`. For real data the
paper reports PARENT, NLI and AlignScore; those need downloaded checkpoints, so :func:`nli_faithfulness` loads any
local sequence-classification NLI model (e.g. a saved ``cross-encoder/nli-deberta-v3-large``) with
``local_files_only=True`` and scores P(entailment | source ⇒ output), as in Dušek & Kasner's hallucination check.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def corpus_bleu(outputs: Sequence[str], references: Sequence[str]) -> float:
    """Corpus SacreBLEU (default 13a tokenisation) of ``outputs`` against one reference each."""
    import sacrebleu

    for name, xs in (("outputs", outputs), ("references", references)):
        if isinstance(xs, str) or not isinstance(xs, Sequence):
            raise ValueError(f"{name} must be a list of strings, got {type(xs).__name__}")
    if len(outputs) != len(references):
        raise ValueError(f"outputs has {len(outputs)} items but references has {len(references)}")
    if any(not isinstance(o, str) for o in outputs):
        raise ValueError("outputs: every output must be a string")
    if not references:
        raise ValueError("references is empty")
    if any(not isinstance(r, str) or not r.strip() for r in references):
        raise ValueError("references: every reference must be a non-empty string")
    return float(sacrebleu.corpus_bleu(list(outputs), [list(references)], force=True).score)


@torch.no_grad()
def nli_faithfulness(
    sources: Sequence[str],
    outputs: Sequence[str],
    model_path: str,
    batch_size: int = 32,
    entailment_label: str = "entailment",
    device: str = "cpu",
) -> torch.Tensor:
    """P(entailment) of each output given its source, from a *local* NLI model (no download).

    ``model_path``: a folder with an ``AutoModelForSequenceClassification`` + tokenizer whose ``id2label`` names
    an ``entailment_label`` class. Returns a float tensor ``(N,)`` in [0, 1] (higher = more faithful).
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if len(sources) != len(outputs):
        raise ValueError(f"sources has {len(sources)} items but outputs has {len(outputs)}")
    if len(sources) == 0:
        raise ValueError("sources and outputs are empty; nothing to score")
    from pathlib import Path

    if not Path(model_path).is_dir():
        raise ValueError(f"model_path must be a local model folder (no download), got {str(model_path)!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    model = (
        AutoModelForSequenceClassification.from_pretrained(model_path, local_files_only=True)
        .to(device)
        .eval()
    )
    labels = {str(v).lower(): int(k) for k, v in model.config.id2label.items()}
    if entailment_label.lower() not in labels:
        raise ValueError(
            f"entailment_label {entailment_label!r} is not a class of the model at {model_path!r} "
            f"(id2label: {model.config.id2label})"
        )
    ent = labels[entailment_label.lower()]
    probs = []
    for b0 in range(0, len(sources), batch_size):
        enc = tok(
            list(sources[b0 : b0 + batch_size]),
            list(outputs[b0 : b0 + batch_size]),
            return_tensors="pt",
            padding=True,
            truncation=True,
        ).to(device)
        probs.append(model(**enc).logits.float().softmax(-1)[:, ent].cpu())
    return torch.cat(probs) if probs else torch.zeros(0)
