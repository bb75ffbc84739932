"""Re-derive the verdicts of committed reference documents under the three-valued rule (issue #50).

``python -m iclr25.report.verdicts [DIR ...]`` (default: ``results/quick`` and, when present, ``results/real``)
prints, per document, every claim and part with its stored ``holds`` (for a document written before the rule,
the point test), the verdict :data:`iclr25.common.claims.DECISION_RULE` gives from the stored per-seed values, the
95 % interval, the threshold and, for a claim that is not decided, the seed count that would decide it; then the
counts per preset (holds / fails / not decided, checks apart) and the claims whose stored values do not cover
every seed. Nothing is written: the documents and their provenance stay as committed, and every reader (``iclr25
report``, ``iclr25 verify``, the CLI) derives the verdict the same way when it reads them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..common.claims import Claim, VerdictCounts, validate_claims_document, verdict_counts
from ..common.fmt import fmt_num
from ..common.io import read_json
from ..harness.render import interval_text


@dataclass
class Rederived:
    """One reference document read under the rule."""

    slug: str
    preset: str
    seeds: list[int]
    claims: list[Claim]
    stored: dict[str, bool]  # claim or part id → the stored holds
    error: str = ""
    short: list[str] = field(default_factory=list)  # ids whose values cover fewer or more values than seeds

    @property
    def counts(self) -> VerdictCounts:
        return verdict_counts(self.claims)


def _walk(claims: Sequence[Claim], depth: int = 0):
    for c in claims:
        yield c, depth
        yield from _walk(c.parts, depth + 1)


def _stored(claims: list[dict]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for c in claims:
        out[c["id"]] = bool(c["holds"])
        out.update(_stored(c.get("parts", [])))
    return out


def rederive(folder: str | Path) -> list[Rederived]:
    """Every ``<folder>/<slug>/claims.json``, validated and re-derived (an unreadable one carries ``error``)."""
    out = []
    for p in sorted(Path(folder).glob("*/claims.json")):
        try:
            doc = read_json(p)
            claims = validate_claims_document(doc)
        except (OSError, ValueError) as e:
            out.append(Rederived(p.parent.name, "?", [], [], {}, error=str(e)))
            continue
        r = Rederived(doc["slug"], doc["preset"], list(doc["seeds"]), claims, _stored(doc["claims"]))
        for c, _ in _walk(claims):
            if not c.parts and len(c.method.values) != len(r.seeds):
                r.short.append(f"{c.id} ({len(c.method.values)} values, {len(r.seeds)} seeds)")
        out.append(r)
    return out


def table(docs: Sequence[Rederived]) -> str:
    """The before/after table (markdown)."""
    lines = [
        "| system | claim | stored holds | verdict | 95 % interval | threshold | seeds to decide |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in docs:
        if d.error:
            lines.append(f"| {d.slug} | — | — | unreadable: {d.error} | | | |")
            continue
        for c, depth in _walk(d.claims):
            verdict = ("check " + ("passes" if c.holds else "FAILS")) if c.is_check else c.verdict
            if not c.decision.decided and not c.is_check:
                need = c.seeds_to_decide
                seeds = str(need) if need is not None else f"> {1000} or n/a"
            else:
                seeds = ""
            iv = "" if c.parts else interval_text(*c.interval)
            thr = "" if c.parts else f"{c.direction} {fmt_num(c.threshold)}"
            name = ("↳ " * min(depth, 1)) + f"`{c.id}`"
            old = "holds" if d.stored.get(c.id) else "fails"
            changed = " **←**" if (old == "holds") != c.holds and not c.is_check else ""
            lines.append(f"| {d.slug} | {name} | {old} | {verdict}{changed} | {iv} | {thr} | {seeds} |")
    return "\n".join(lines)


def counts_by_preset(docs: Sequence[Rederived]) -> dict[str, tuple[VerdictCounts, int]]:
    """preset → (counts, top-level claims whose measured number passes the point test, checks included). The
    point test is computed from the stored values (:attr:`Claim.passes`), not read from a document's stored
    ``holds``: a reference re-made after the three-valued rule stores the new verdict there."""
    out: dict[str, tuple[VerdictCounts, int]] = {}
    for d in docs:
        if d.error:
            continue
        k, old = out.get(d.preset, (VerdictCounts(), 0))
        old += sum(bool(c.passes) for c in d.claims)
        out[d.preset] = (k + d.counts, old)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        root = Path(__file__).resolve().parents[3] / "results"
        args = [str(root / p) for p in ("quick", "real") if (root / p).is_dir()]
    docs = [d for folder in args for d in rederive(folder)]
    print(table(docs))
    print()
    for preset, (k, old) in counts_by_preset(docs).items():
        total = k.claims + k.checks
        print(
            f"{preset}: {k.text()}; the point test alone passes {old} of {total} top-level claims (checks included)"
        )
    short = [f"{d.slug}: {', '.join(d.short)}" for d in docs if d.short]
    missing = [d.slug for d in docs if d.error]
    print("claims whose values do not cover every seed: " + ("; ".join(short) if short else "none"))
    print("references without usable per-seed values: " + (", ".join(missing) if missing else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
