"""Local loaders for the paper's data-to-text sets (ToTTo, WebNLG) and plain prompt/reference JSONL files.

Nothing is downloaded: point :func:`load_data_to_text` at a JSON / JSONL export you already have (e.g. the
``GEM/totto`` or ``GEM/web_nlg`` splits saved with ``datasets``' ``to_json``). Each row becomes
``{"prompt", "reference", "source"}``: the prompt is ``template.format(source=...)`` and the reference starts
with a space so that ``prompt + reference`` is the training string (TRL's preference format concatenates them).
"""

from __future__ import annotations

import json
from pathlib import Path

FORMATS = ("auto", "totto", "webnlg", "jsonl")
DEFAULT_TEMPLATE = "Describe the following data in one sentence.\nData: {source}\nSentence:"


def _reference(row: dict) -> str | None:
    for key in ("reference", "target", "text"):
        v = row.get(key)
        if isinstance(v, str) and v.strip():
            return v
    refs = row.get("references")
    if isinstance(refs, list) and refs and isinstance(refs[0], str):
        return refs[0]
    ann = row.get("sentence_annotations")  # original ToTTo release
    if isinstance(ann, list) and ann and isinstance(ann[0], dict):
        return ann[0].get("final_sentence")
    lex = row.get("lex")  # original WebNLG release
    if isinstance(lex, dict) and isinstance(lex.get("text"), list) and lex["text"]:
        return lex["text"][0]
    return None


def _source(row: dict, fmt: str) -> str | None:
    if fmt in ("totto", "auto") and isinstance(row.get("linearized_input"), str):
        return row["linearized_input"]
    if fmt in ("webnlg", "auto"):
        triples = row.get("input")
        if triples is None and isinstance(row.get("modified_triple_sets"), dict):
            sets = row["modified_triple_sets"].get("mtriple_set") or [[]]
            triples = sets[0]
        if isinstance(triples, list) and all(isinstance(t, str) for t in triples) and triples:
            return " ; ".join(t.strip() for t in triples)
    for key in ("source", "input", "prompt", "document"):
        if isinstance(row.get(key), str) and row[key].strip():
            return row[key]
    return None


def load_data_to_text(
    path: str | Path, format: str = "auto", template: str = DEFAULT_TEMPLATE, limit: int | None = None
) -> list[dict]:
    """Read a local ToTTo / WebNLG / generic JSON(L) file into ``[{"prompt", "reference", "source"}]``.

    ``format``: ``totto`` (``linearized_input`` → ``target``), ``webnlg`` (list of "s | p | o" triples in
    ``input`` → ``target``), ``jsonl`` (``source``/``prompt`` → ``reference``/``target``) or ``auto``.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if "{source}" not in template:
        raise ValueError(f"template must contain '{{source}}', got {template!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path {str(p)!r} is not a file")
    text = p.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        rows = json.loads(text)
    else:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"path {str(p)!r}: line {i} is not valid JSON ({e.msg})") from None
    out = []
    for i, row in enumerate(rows[:limit] if limit else rows):
        if not isinstance(row, dict):
            raise ValueError(f"path {str(p)!r}: row {i} is not a JSON object")
        src, ref = _source(row, format), _reference(row)
        if not src:
            raise ValueError(
                f"path {str(p)!r}: row {i} has no source field for format {format!r} (keys {sorted(row)})"
            )
        if not ref or not ref.strip():
            raise ValueError(f"path {str(p)!r}: row {i} has an empty reference (keys {sorted(row)})")
        out.append({"prompt": template.format(source=src), "reference": " " + ref.strip(), "source": src})
    if not out:
        raise ValueError(f"path {str(p)!r} holds no examples")
    return out
