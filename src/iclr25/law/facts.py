"""Facts to wash: ``Fact(prompt, target, subject)`` records and a JSONL / CSV loader (paper §3, §6).

A fact is a triplet (s, r, o) rendered as a prompt that contains the subject s, with the object o as the answer
the model currently produces. The key of a fact is read at the subject's last token (MEMIT's ``subject_last``
convention, used by LaW); without a subject the prompt's last token is used.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Fact:
    """One fact: ``prompt`` → ``target`` (the answer to wash). ``subject`` must occur in ``prompt`` if given.

    ``target`` is tokenised on its own and appended to the prompt's tokens, so for byte-level BPE tokenisers
    (GPT-2, Llama-3, Qwen2) give it its leading space: ``Fact("The capital of France is", " Paris")``.
    """

    prompt: str
    target: str
    subject: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ValueError(f"Fact.prompt must be a non-empty string, got {self.prompt!r}")
        if not isinstance(self.target, str) or not self.target.strip():
            raise ValueError(f"Fact.target must be a non-empty string, got {self.target!r}")
        if self.subject is not None:
            if not isinstance(self.subject, str) or not self.subject.strip():
                raise ValueError(f"Fact.subject must be a non-empty string or None, got {self.subject!r}")
            if self.subject not in self.prompt:
                raise ValueError(f"Fact.subject {self.subject!r} must occur in Fact.prompt {self.prompt!r}")

    @property
    def subject_end(self) -> int:
        """Character offset just after the subject's last occurrence (the prompt's end without a subject)."""
        if self.subject is None:
            return len(self.prompt)
        return self.prompt.rindex(self.subject) + len(self.subject)


def facts_from_triplets(
    rows: Iterable[dict], template: str = "{subject} {relation}", target_prefix: str = " "
) -> list[Fact]:
    """Facts from ``subject/relation/object`` rows.

    A row may carry its own ``prompt`` template (with ``{}`` or ``{subject}`` for the subject, as in
    CounterFact / zsRE); otherwise ``template`` (formatted with ``subject`` and ``relation``) is used.
    ``target_prefix`` (default a space) is put before the object.
    """
    if not isinstance(template, str):
        raise ValueError(f"template must be a str with {{subject}} and {{relation}} fields, got {template!r}")
    if not isinstance(target_prefix, str):
        raise ValueError(f"target_prefix must be a str, got {target_prefix!r}")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(
                f"rows[{i}] must be a dict with subject, relation, object, got {type(row).__name__}"
            )
        missing = [k for k in ("subject", "object") if not str(row.get(k, "")).strip()]
        if missing:
            raise ValueError(f"row {i} lacks {missing} (expected subject, relation, object): {row!r}")
        s = str(row["subject"]).strip()
        rel = str(row.get("relation", "")).strip()
        tpl = row.get("prompt") or row.get("template")
        if tpl:
            tpl = str(tpl).replace("{subject}", "{}")
            if tpl.count("{}") != 1:
                raise ValueError(
                    f"row {i}: its prompt template must hold the subject once as {{}}, got {tpl!r}"
                )
            prompt = tpl.format(s)
        else:
            if not rel:
                raise ValueError(f"row {i} has neither a relation nor a prompt template: {row!r}")
            try:
                prompt = template.format(subject=s, relation=rel)
            except (KeyError, IndexError, ValueError) as e:
                raise ValueError(
                    f"template {template!r} may only use the fields {{subject}} and {{relation}} ({e!r})"
                ) from None
        out.append(Fact(prompt=prompt, target=target_prefix + str(row["object"]).strip(), subject=s))
    return out


def load_facts(
    path: str | Path, template: str = "{subject} {relation}", target_prefix: str = " "
) -> list[Fact]:
    """Read facts from a ``.jsonl`` (one object per line) or ``.csv`` (header row) file of
    ``subject, relation, object`` (optionally ``prompt``) rows. See :func:`facts_from_triplets`."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"path {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{path}:{n} is not valid JSON: {e}") from None
    elif suffix == ".csv":
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    else:
        raise ValueError(f"path must end in .jsonl or .csv, got {str(path)!r}")
    if not rows:
        raise ValueError(f"{path} holds no facts")
    return facts_from_triplets(rows, template=template, target_prefix=target_prefix)


def check_facts(facts: Sequence[Fact], name: str = "facts") -> list[Fact]:
    if isinstance(facts, (str, bytes, Fact)) or not hasattr(facts, "__iter__"):
        raise ValueError(f"{name} must be a sequence of Fact, got {type(facts).__name__}")
    facts = list(facts)
    for i, f in enumerate(facts):
        if not isinstance(f, Fact):
            raise ValueError(f"{name}[{i}] must be a Fact, got {type(f).__name__}")
    return facts
