"""The one claims renderer: rows built once (:func:`claim_rows`), printed by the CLI (:func:`claims_text`),
written into each run's ``report.md`` (:func:`claims_markdown`, :func:`run_report_md`) and shown in the HTML
report (its Jinja2 template iterates over the same rows). Numbers go through :mod:`iclr25.common.fmt`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..common.claims import Claim, verdict_counts, with_declared_checks
from ..common.fmt import fmt_num, fmt_seconds, md_cell

MARKS = {"holds": "✓", "fails": "✗", "not decided": "?", "undefined": "?"}
VERDICT_WORDS = {"holds": "holds", "fails": "fails", "not decided": "not decided", "undefined": "undefined"}
PRESET_NOTES = {
    "smoke": "smoke preset: a plumbing check at toy size (it tests that the code runs end to end); its numbers "
    "are not results and its verdicts are not meaningful",
    "quick": "quick preset: the small-scale CPU reproduction",
    "real": "real preset: real pretrained models and real data from the package registries (pinned versions, "
    "verified by SHA-256), on CPU in at most 15 minutes per system; its committed references are in results/real",
    "full": "full preset: the paper-scale run",
}


RULE_SHORT = (
    "✓ holds when the 95 % interval over seeds (paired Student-t; Fieller for a ratio) clears the threshold, ✗ fails "
    "when it lies on the wrong side, ? not decided otherwise; a check (fixed by construction or saturated) is shown, "
    "never counted"
)

SMOKE_PRECONDITION = "precondition not reached at smoke size — expected; the quick preset checks it"


def smoke_precondition(doc: dict[str, Any] | None) -> bool:
    """A smoke run that marked itself invalid: its toy-size model did not reach the experiment's precondition.

    That is what a plumbing check at toy size is expected to do for some systems (the precondition is checked
    for real by the quick preset), so it is labelled as such rather than as an invalid run. A quick or full run
    that misses its precondition stays invalid."""
    return isinstance(doc, dict) and doc.get("valid") is False and doc.get("preset") == "smoke"


def validity_label(doc: dict[str, Any]) -> str:
    """How a run marked ``valid: false`` is labelled: ``RUN INVALID``, or the smoke-precondition phrase."""
    return SMOKE_PRECONDITION if smoke_precondition(doc) else "RUN INVALID"


def interval_text(lo: float, hi: float) -> str:
    """``[lo, hi]`` of a claim's 95 % interval (``—`` when there is none: one seed, a NaN, a compound claim)."""
    if lo != lo or hi != hi:  # NaN
        return "—"
    return f"[{fmt_num(lo)}, {fmt_num(hi)}]"


def seeds_text(n: int | None) -> str:
    """What the power estimate says for a claim that is not decided."""
    if n is None:
        return "no seed count estimated to decide it"
    return f"≈ {n} seeds would decide it"


def claim_rows(claims: Sequence[Claim], depth: int = 0) -> list[dict[str, Any]]:
    """One row per claim and, under a compound claim, one indented row per part (recursively)."""
    rows: list[dict[str, Any]] = []
    for c in claims:
        dec = c.decision
        verdict = dec.verdict
        lo, hi = dec.interval
        row = {
            "id": c.id,
            "depth": depth,
            "statement": c.statement,
            "metric": c.metric,
            "n_parts": len(c.parts),
            "method": c.method.fmt() if not c.parts else "",
            "baseline": (c.baseline.fmt() if c.baseline else "—") if not c.parts else "",
            "compared": f"{c.compare}{', every seed' if c.reduce == 'all' else ''}: {fmt_num(c.measured)}"
            if not c.parts
            else f"all of {len(c.parts)} parts",
            "threshold": f"{c.direction} {fmt_num(c.threshold)}" if not c.parts else "",
            "interval": interval_text(lo, hi) if not c.parts and not c.check else "",
            "verdict": verdict,
            "mark": MARKS[verdict],
            "holds": c.holds,
            "passes": c.passes,
            "check": c.check if c.check else ("all parts are checks" if c.is_check else ""),
            "is_check": c.is_check,
            "decided": dec.decided,
            "seeds_to_decide": dec.seeds_to_decide,
            "undecided": "" if dec.decided or verdict == "undefined" else seeds_text(dec.seeds_to_decide),
            "why": c.undefined_reason if verdict == "undefined" else "",
            "note": c.note,
        }
        rows.append(row)
        rows += claim_rows(c.parts, depth + 1)
    return rows


def verdict_label(row: dict[str, Any]) -> str:
    """``✓ holds``, ``✗ fails``, ``? not decided (≈ 9 seeds would decide it)``, ``? undefined (why)``, or for a
    check ``check ✓`` / ``check ✗``."""
    if row["is_check"]:
        return f"check {row['mark']}"
    if row["verdict"] == "undefined":
        return f"{row['mark']} undefined ({row['why']})"
    if row["verdict"] == "not decided":
        return f"{row['mark']} not decided ({row['undecided']})"
    return f"{row['mark']} {row['verdict']}"


def counts_text(claims: Sequence[Claim]) -> str:
    """``3 hold · 1 fails · 2 not decided (of 6 claims) · 1 check`` over the top-level ``claims``."""
    return verdict_counts(claims).text()


def claims_text(claims: Sequence[Claim]) -> list[str]:
    """Indented terminal lines: ``✓ id: compared direction threshold · 95 % CI [lo, hi] — verdict``."""
    lines = []
    for r in claim_rows(claims):
        indent = "  " + "    " * r["depth"]
        mark = f"check {r['mark']}" if r["is_check"] else r["mark"]
        if r["n_parts"]:
            tail = f" — {r['verdict']}" if not r["is_check"] else ""
            if r["verdict"] == "not decided":
                tail += f" ({r['undecided']})"
            lines.append(f"{indent}{mark} {r['id']}: all of {r['n_parts']} parts{tail}")
            continue
        ci = f" · 95 % CI {r['interval']}" if r["interval"] and r["interval"] != "—" else ""
        if r["why"]:
            tail = f" — undefined: {r['why']}"
        elif r["is_check"]:
            tail = f" — check: {r['check']}"
        elif r["verdict"] == "not decided":
            tail = f" — not decided ({r['undecided']})"
        else:
            tail = f" — {r['verdict']}"
        lines.append(f"{indent}{mark} {r['id']}: {r['compared']} {r['threshold']}{ci}{tail}")
    return lines


def claims_markdown(claims: Sequence[Claim]) -> str:
    """Markdown table (every cell escaped: a ``|`` in a statement cannot break a row), then the notes."""
    out = [
        "| claim | statement | method | baseline | compared | threshold | 95 % interval | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in claim_rows(claims):
        cid = ("↳ " * min(r["depth"], 1)) + f"`{md_cell(r['id'])}`"
        out.append(
            "| "
            + " | ".join(
                md_cell(x) if i else x
                for i, x in enumerate(
                    [
                        cid,
                        r["statement"],
                        r["method"],
                        r["baseline"],
                        r["compared"],
                        r["threshold"],
                        r["interval"],
                        verdict_label(r),
                    ]
                )
            )
            + " |"
        )
    notes = [f"- `{md_cell(c.id)}`: {md_cell(c.note)}" for c in claims if c.note]
    checks = [
        f"- `{md_cell(r['id'])}` is a check: {md_cell(r['check'])}" for r in claim_rows(claims) if r["check"]
    ]
    tail = notes + checks
    return "\n".join(out) + ("\n\n" + "\n".join(tail) if tail else "")


def overrides_text(overrides: Any) -> str:
    """``n_items=400, lr=0.001`` — a run's ``--set`` overrides as typed on the command line (``none`` when empty)."""
    if not isinstance(overrides, dict) or not overrides:
        return "none"
    return ", ".join(
        f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in sorted(overrides.items())
    )


def config_line(prov: dict[str, Any]) -> str:
    """The report.md line that says which config ran: the preset's overrides and the config hash."""
    h = prov.get("config_hash")
    ov = prov.get("overrides")
    return (
        f"Overrides of the preset: {md_cell(overrides_text(ov)) if ov else 'none'} · config hash "
        f"`{md_cell(str(h)) if h else '?'}`"
    )


def run_report_md(
    doc: dict[str, Any], claims: Sequence[Claim], body: str = "", figures: Sequence[Path] = ()
) -> str:
    """A run's ``report.md``: header (preset, seeds, wall time), validity, the claims table, the experiment's
    own section and its figures."""
    slug = doc.get("slug") or "run"
    preset = doc.get("preset") or "?"
    claims = with_declared_checks(str(doc.get("slug") or ""), claims)
    head = f"# {slug} — preset `{preset}`, seeds {doc.get('seeds')}, {fmt_seconds(doc.get('runtime_s'))}\n\n"
    head += config_line(doc.get("provenance") or {}) + "\n\n"
    if preset in PRESET_NOTES and preset == "smoke":
        head += f"*{PRESET_NOTES[preset]}.*\n\n"
    if doc.get("valid") is False:
        head += f"**{validity_label(doc)}:** {md_cell(doc.get('invalid_reason', ''))}\n\n"
    k = verdict_counts(claims)
    checks = f", {k.checks} check{'' if k.checks == 1 else 's'} not counted" if k.checks else ""
    head += (
        f"**Claims held: {k.holds}/{k.claims}** ({k.fails} fail{'s' if k.fails == 1 else ''}, {k.not_decided} not "
        f"decided{checks})\n\n" + claims_markdown(claims) + "\n\n"
    )
    head += f"*Verdicts: {RULE_SHORT}*\n\n"
    figs = "".join(f"![{Path(p).stem}](figures/{Path(p).name})\n\n" for p in figures)
    return head + (body or "").strip() + "\n\n" + figs
