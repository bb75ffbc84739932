"""``iclr25 verify SLUG [--seeds K|all] [--isa avx2|native]``: re-run the first K seeds of a committed reference
and compare.

The reference is ``results/quick/<slug>/claims.json`` (or ``--reference DIR``). Its config is rebuilt from what
the document stores — ``preset``, ``provenance.overrides``, ``provenance.device`` and its ``seeds`` — and checked
before anything runs (:func:`reference_mismatches`): the rebuilt config's hash against ``provenance.config_hash``,
the document's ``preset`` against ``provenance.preset``, and its seed list against the seed list the rebuilt
config runs (a reference is made with ``iclr25 run SLUG --preset quick``: the preset's own seeds). Any difference is
a *mismatch*: named, nothing is re-run, exit :data:`EXIT_MISMATCH`. A reference that records no ``config_hash``
cannot be confirmed; that is said, and it is re-run.

The first K seeds (``--seeds all``: every seed) are re-run into a temporary folder (or ``--out``, which must hold
no finished seeds of the system: verify always recomputes) through the ordinary run path, and the two documents
are compared claim by claim:

* **numbers** — each stored per-seed value of the first K seeds against the re-run's:
  ``identical`` (bit for bit, NaN equal to NaN), ``within tolerance`` when
  ``|Δ| <= REL_TOL · max(1, |stored|, |re-run|)`` (:data:`REL_TOL` = 1e-6, float32 rounding noise), otherwise
  ``different`` (both printed).
* **verdict** — the reference's claim restricted to the same K seeds (its verdict recomputed from those values
  with :mod:`iclr25.common.claims`, so like is compared with like) against the re-run's: the three-valued verdict
  (:data:`iclr25.common.claims.DECISION_RULE`: holds / fails / not decided) and the point test (the measured number
  against the threshold), which is what a single seed can say. The verdict of the whole reference is printed
  beside it for context; with ``--seeds all`` the two are the same, so the all-seed verdicts are compared.

A claim's values are taken to belong to the reference's seeds in order; a claim measured on fewer values than
there are seeds (e.g. one measured on the first three seeds only) is taken to cover the first ones, which is
how the systems here build such claims (``values`` over the first seeds of the list). A claim with more values
than seeds is not per-seed and can only be compared when every seed is re-run.

``--isa avx2`` re-runs in a child process whose environment forces the AVX2 kernels before torch is imported
(:data:`ISA_ENV`: ATen's dispatch, oneMKL, oneDNN and OpenBLAS), which on an AVX512 machine reproduces the numbers
of a reference made on an AVX2 one; ``--isa native`` re-runs in a child process with those variables removed (the
machine's own kernels). Without ``--isa`` the re-run happens in this process, with the environment as it is.

Exit status (:meth:`Comparison.exit_code`): 0 when every system-level (top-level claim) verdict and point test is
unchanged and every number identical or within tolerance; :data:`EXIT_CHANGED` (1) when a system-level verdict
changed, a claim is missing on either side or cannot be compared, or validity changed; :data:`EXIT_MISMATCH` (3)
when the reference's config, preset, overrides or seed list does not match the config rebuilt from it;
:data:`EXIT_NUMBERS` (4) when verdicts agree but a number is outside tolerance; 2 for usage errors (unknown system,
no or invalid reference, bad ``--seeds``). The environment of the two runs is compared field by field
(:data:`iclr25.harness.provenance.ENVIRONMENT_KEYS`: commit, CPU model, ISA, thread counts, BLAS, versions) and
every difference is named, as is every field the reference does not record. ``--quiet`` or ``ICLR25_QUIET=1``:
no progress bars.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.claims import Claim, Stat, validate_claims_document
from ..common.io import as_float
from ..errors import UsageError

REL_TOL = 1e-6  # "within tolerance": |Δ| <= REL_TOL · max(1, |stored|, |re-run|)
NUMBER_STATES = ("identical", "within tolerance", "different")
EXIT_OK, EXIT_CHANGED, EXIT_MISMATCH, EXIT_NUMBERS = 0, 1, 3, 4  # 2: usage errors (the CLI's)

# --isa avx2: what the re-run's process gets before torch is imported. ATen's kernel dispatch, oneMKL's code path,
# oneDNN's (convolutions) and OpenBLAS's core type — ATEN_CPU_CAPABILITY alone is not enough for oneDNN convolutions.
ISA_ENV = {
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
    },
    "native": {},
}
ISA_VARS = (
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "OPENBLAS_CORETYPE",
)


def isa_environment(isa: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a re-run under ``isa`` (``avx2`` or ``native``): ``base`` (default ``os.environ``)
    without any variable that picks an instruction set, plus :data:`ISA_ENV` [isa]."""
    if isa not in ISA_ENV:
        raise UsageError(f"--isa must be one of {', '.join(ISA_ENV)}, got {isa!r}")
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in ISA_VARS}
    env.update(ISA_ENV[isa])
    return env


def default_reference_dir() -> Path:
    """``results/quick`` of the repository this package runs from."""
    return Path(__file__).resolve().parents[3] / "results" / "quick"


# -- comparing numbers ------------------------------------------------------------------------------------


def compare_numbers(stored: Any, rerun: Any, rel_tol: float = REL_TOL) -> str:
    """``identical`` (bit-equal; NaN equals NaN), ``within tolerance`` or ``different``."""
    a, b = as_float(stored), as_float(rerun)
    if a.hex() == b.hex() or (math.isnan(a) and math.isnan(b)):
        return "identical"
    if math.isfinite(a) and math.isfinite(b) and abs(a - b) <= rel_tol * max(1.0, abs(a), abs(b)):
        return "within tolerance"
    return "different"


def _worst(states: list[str]) -> str:
    return max(states, key=NUMBER_STATES.index) if states else "identical"


# -- restricting a stored claim to its first K seeds -------------------------------------------------------


def _n_values(claim: Claim) -> int:
    return len(claim.method.values)


def expected_values(n_stored: int, n_seeds: int, k: int) -> int | None:
    """How many values a claim with ``n_stored`` values over ``n_seeds`` seeds has on the first ``k`` seeds
    (``None``: not per-seed, so not restrictable unless every seed is re-run)."""
    if n_stored <= n_seeds:
        return min(k, n_stored)
    return n_stored if k == n_seeds else None


def restrict(claim: Claim, n: int) -> Claim:
    """``claim`` on its first ``n`` values (method and baseline, every part), the verdict recomputed."""

    def cut(st: Stat | None) -> Stat | None:
        return None if st is None else Stat.of(list(st.values[:n]))

    parts = tuple(restrict(p, n) for p in claim.parts)
    if parts:
        p0 = parts[0]
        return dataclasses.replace(claim, parts=parts, method=p0.method, baseline=p0.baseline)
    return dataclasses.replace(claim, method=cut(claim.method), baseline=cut(claim.baseline))


def _flatten(claims: list[Claim]) -> list[Claim]:
    out = []
    for c in claims:
        out.append(c)
        out.extend(_flatten(list(c.parts)))
    return out


# -- the comparison ----------------------------------------------------------------------------------------


@dataclass
class ClaimRow:
    """One claim (or part) of the comparison."""

    id: str
    numbers: str  # one of NUMBER_STATES, or "missing" / "not comparable"
    stored_verdict_all: str = ""  # the reference's verdict on all its seeds
    stored_verdict: str = ""  # the reference's verdict on the re-run seeds
    rerun_verdict: str = ""
    details: list[str] = field(default_factory=list)  # one line per differing value, or why not comparable
    n_values: int = 0
    stored_passes: bool | None = None  # the point test on the re-run seeds (measured vs threshold)
    rerun_passes: bool | None = None

    @property
    def system_level(self) -> bool:
        """A top-level claim (not a part of a compound one)."""
        return "." not in self.id

    @property
    def verdict_unchanged(self) -> bool:
        return (
            bool(self.stored_verdict)
            and self.stored_verdict == self.rerun_verdict
            and self.stored_passes == self.rerun_passes
        )


@dataclass
class Comparison:
    slug: str
    seeds: list[int]  # the re-run seeds
    n_reference_seeds: int
    rows: list[ClaimRow]
    environment: list[str]  # one line per difference in the environment
    not_recorded: list[str]  # environment fields the reference does not record
    ref_valid: bool = True
    rerun_valid: bool = True
    mismatches: list[str] = field(default_factory=list)  # the reference's config vs the rebuilt one

    @property
    def changed(self) -> list[ClaimRow]:
        """The rows that make the exit status :data:`EXIT_CHANGED`: a system-level claim whose verdict or point
        test changed, or any claim or part missing on one side or not comparable."""
        return [
            r
            for r in self.rows
            if r.numbers in ("missing", "not comparable") or (r.system_level and not r.verdict_unchanged)
        ]

    @property
    def verdicts_agree(self) -> bool:
        return bool(self.rows) and not self.changed and self.ref_valid == self.rerun_valid

    @property
    def numbers(self) -> str:
        states = [r.numbers for r in self.rows]
        if any(s not in NUMBER_STATES for s in states):
            return "different"
        return _worst(states)

    @property
    def exit_code(self) -> int:
        """:data:`EXIT_MISMATCH`, else :data:`EXIT_CHANGED`, else :data:`EXIT_NUMBERS`, else :data:`EXIT_OK`."""
        if self.mismatches:
            return EXIT_MISMATCH
        if not self.verdicts_agree:
            return EXIT_CHANGED
        return EXIT_NUMBERS if self.numbers == "different" else EXIT_OK


def _side_states(
    side: str, stored: Stat | None, rerun: Stat | None, seeds: list[int], rel_tol: float
) -> tuple[list[str], list[str]]:
    if stored is None and rerun is None:
        return [], []
    if stored is None or rerun is None:
        return ["different"], [
            f"{side}: stored {'none' if stored is None else 'values'}, re-run "
            f"{'none' if rerun is None else 'values'}"
        ]
    if len(stored.values) != len(rerun.values):
        return ["different"], [
            f"{side}: {len(stored.values)} stored values on these seeds, {len(rerun.values)} re-run"
        ]
    states, details = [], []
    for i, (a, b) in enumerate(zip(stored.values, rerun.values, strict=True)):
        st = compare_numbers(a, b, rel_tol)
        states.append(st)
        if st != "identical":
            where = f"seed {seeds[i]}" if i < len(seeds) else f"value {i}"
            delta = as_float(b) - as_float(a)
            details.append(f"{side} {where}: stored {a!r}, re-run {b!r} (Δ {delta:+.3g}, {st})")
    return states, details


def compare_documents(
    ref: dict, rerun: dict, k: int, rel_tol: float = REL_TOL, env_here: dict | None = None
) -> Comparison:
    """Compare the first ``k`` seeds of reference document ``ref`` with the re-run document ``rerun``.

    Both must be valid claims documents (``ValueError`` otherwise). ``env_here`` is the re-run's environment
    (default: the re-run document's provenance).
    """
    ref_claims = _flatten(validate_claims_document(ref))
    new_claims = {c.id: c for c in _flatten(validate_claims_document(rerun))}
    n_seeds = len(ref["seeds"])
    if not 1 <= k <= n_seeds:
        raise ValueError(f"k must be in [1, {n_seeds}] (the reference's seed count), got {k!r}")
    seeds = list(ref["seeds"][:k])
    rows: list[ClaimRow] = []
    seen = set()
    for c in ref_claims:
        seen.add(c.id)
        row = ClaimRow(c.id, "missing", stored_verdict_all=c.verdict)
        n = expected_values(_n_values(c), n_seeds, k)
        new = new_claims.get(c.id)
        if new is None:
            row.details.append("the re-run has no claim with this id")
            rows.append(row)
            continue
        row.rerun_verdict = new.verdict
        if n is None:
            row.numbers = "not comparable"
            row.details.append(
                f"{_n_values(c)} values over {n_seeds} seeds: not per-seed; re-run all {n_seeds} seeds to compare"
            )
            rows.append(row)
            continue
        cut = restrict(c, n)
        row.stored_verdict, row.n_values = cut.verdict, n
        row.stored_passes, row.rerun_passes = cut.passes, new.passes
        if c.parts:  # a compound claim's numbers are its parts' (rows of their own), filled in below
            row.numbers = "identical"
            rows.append(row)
            continue
        states, details = [], []
        for side in ("method", "baseline"):
            s, d = _side_states(side, getattr(cut, side), getattr(new, side), seeds, rel_tol)
            states += s
            details += d
        row.numbers, row.details = _worst(states), details
        rows.append(row)
    for row in rows:  # compound claims: the worst of their parts
        parts = [r for r in rows if r.id.startswith(row.id + ".")]
        if parts and row.numbers != "missing":
            states = [r.numbers for r in parts]
            row.numbers = _worst(states) if all(s in NUMBER_STATES for s in states) else "different"
    for cid in new_claims:
        if cid not in seen:
            rows.append(
                ClaimRow(
                    cid,
                    "missing",
                    rerun_verdict=new_claims[cid].verdict,
                    details=["the reference has no claim with this id"],
                )
            )
    env_new = env_here if env_here is not None else rerun.get("provenance", {})
    diffs, missing = environment_differences(ref.get("provenance", {}), env_new)
    return Comparison(
        ref["slug"],
        seeds,
        n_seeds,
        rows,
        diffs,
        missing,
        ref_valid=bool(ref.get("valid", True)),
        rerun_valid=bool(rerun.get("valid", True)),
    )


# -- the environment ---------------------------------------------------------------------------------------


def _short(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


def _blas_summary(pools: Any) -> str:
    if not isinstance(pools, list):
        return _short(pools)
    parts = []
    for p in pools:
        if isinstance(p, dict):
            arch = f" {p['architecture']}" if p.get("architecture") else ""
            parts.append(f"{p.get('internal_api')} {p.get('version')}{arch} ×{p.get('num_threads')}")
    return ", ".join(parts) or "none"


def environment_differences(ref_prov: dict, here: dict) -> tuple[list[str], list[str]]:
    """(one line per environment field that differs, the fields the reference does not record).

    Fields: :data:`iclr25.harness.provenance.ENVIRONMENT_KEYS` and ``device``; the commit is compared without
    its ``+dirty`` mark (which is named when either side has it); library versions key by key.
    """
    from .provenance import ENVIRONMENT_KEYS

    ref_prov = ref_prov if isinstance(ref_prov, dict) else {}
    diffs, missing = [], []
    for key in (*ENVIRONMENT_KEYS, "device"):
        if key not in here:
            continue
        if key not in ref_prov:
            missing.append(
                f"{key} (here: {_blas_summary(here[key]) if key == 'blas' else _short(here[key])})"
            )
            continue
        a, b = ref_prov[key], here[key]
        if key == "git_commit":
            ca, cb = str(a).removesuffix("+dirty"), str(b).removesuffix("+dirty")
            if ca != cb:
                diffs.append(f"git_commit: {a} → {b}")
            elif a != b:
                diffs.append(f"git_commit: same commit, {a} → {b} (+dirty: uncommitted changes under src)")
        elif key == "libraries" and isinstance(a, dict) and isinstance(b, dict):
            for lib in sorted(set(a) | set(b)):
                if a.get(lib) != b.get(lib):
                    diffs.append(
                        f"libraries.{lib}: {a.get(lib, 'not imported')} → {b.get(lib, 'not imported')}"
                    )
        elif key == "blas":
            if _short(a) != _short(b):
                diffs.append(f"blas: {_blas_summary(a)} → {_blas_summary(b)}")
        elif _short(a) != _short(b):
            diffs.append(f"{key}: {_short(a)} → {_short(b)}")
    return diffs, missing


# -- the printed table -------------------------------------------------------------------------------------


def _seed_words(seeds: list[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(map(str, seeds))}"


def _pt(x: bool | None) -> str:
    return "—" if x is None else ("pass" if x else "fail")


def format_comparison(cmp: Comparison, rel_tol: float = REL_TOL) -> str:
    """The table ``iclr25 verify`` prints (plain text, one row per claim and part)."""
    k = len(cmp.seeds)
    if cmp.mismatches:
        lines = ["REFERENCE MISMATCH (nothing was re-run):"]
        lines += [f"  {m}" for m in cmp.mismatches]
        return "\n".join(lines) + "\n"
    lines = [
        f"numbers: identical = bit for bit; within tolerance = |Δ| <= {rel_tol:g}·max(1, |stored|, |re-run|)",
        "verdicts: holds / fails / not decided by the 95 % interval over the seeds compared "
        "(iclr25.common.claims.DECISION_RULE); point test: the measured number against the threshold",
        "",
    ]
    head = (
        "claim",
        "numbers",
        f"verdict, all {cmp.n_reference_seeds} stored seeds",
        f"stored on {_seed_words(cmp.seeds)}",
        "re-run",
        "point test",
        "",
    )
    body = []
    for r in cmp.rows:
        if r.verdict_unchanged:
            same = "unchanged"
        elif r.stored_verdict and r.rerun_verdict:
            same = "CHANGED" if r.system_level else "changed (part)"
        else:
            same = "—"
        point = f"{_pt(r.stored_passes)} → {_pt(r.rerun_passes)}" if r.stored_passes is not None else "—"
        body.append(
            (
                r.id,
                r.numbers,
                r.stored_verdict_all or "—",
                r.stored_verdict or "—",
                r.rerun_verdict or "—",
                point,
                same,
            )
        )
    widths = [max(len(str(row[i])) for row in (head, *body)) for i in range(len(head))]
    for row in (head, tuple("-" * w for w in widths), *body):
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    details = [(r.id, d) for r in cmp.rows for d in r.details]
    if details:
        lines += ["", "values that are not identical:"]
        lines += [f"  {cid}: {d}" for cid, d in details]
    if cmp.ref_valid != cmp.rerun_valid:
        lines += ["", f"validity CHANGED: reference valid={cmp.ref_valid}, re-run valid={cmp.rerun_valid}"]
    lines += ["", "environment (reference → here):"]
    if cmp.environment:
        lines += [f"  differs: {d}" for d in cmp.environment]
    else:
        lines.append("  no recorded field differs")
    if cmp.not_recorded:
        lines.append("  not recorded in the reference: " + "; ".join(cmp.not_recorded))
    n_claims = sum(1 for r in cmp.rows if r.system_level)
    if cmp.verdicts_agree:
        verdict = f"every verdict unchanged on {_seed_words(cmp.seeds)} ({n_claims} claims)"
    else:
        bad = [r.id for r in cmp.changed]
        verdict = "VERDICT CHANGED or not comparable: " + ", ".join(bad) if bad else "validity changed"
    lines += ["", f"numbers on {k} of {cmp.n_reference_seeds} seeds: {cmp.numbers}; {verdict}"]
    lines.append(f"exit status {cmp.exit_code}: {EXIT_MEANING[cmp.exit_code]}")
    return "\n".join(lines) + "\n"


EXIT_MEANING = {
    EXIT_OK: "verdicts unchanged, numbers identical or within tolerance",
    EXIT_CHANGED: "a system-level verdict changed (or a claim is missing, not comparable, or validity changed)",
    EXIT_MISMATCH: "the reference's config, preset, overrides or seed list does not match",
    EXIT_NUMBERS: "verdicts unchanged, but numbers differ beyond tolerance",
}


# -- running -----------------------------------------------------------------------------------------------


def load_reference(slug: str, reference: str | Path | None = None) -> tuple[dict, Path]:
    """The reference claims document of ``slug`` (validated) and its path; :class:`UsageError` otherwise."""
    from ..common.io import read_json

    folder = Path(reference) if reference is not None else default_reference_dir()
    path = folder / slug / "claims.json"
    if not path.is_file():
        raise UsageError(f"no reference for {slug!r}: {path} does not exist (pass --reference DIR)")
    try:
        doc = read_json(path)
        validate_claims_document(doc)
    except (OSError, ValueError) as e:
        raise UsageError(f"reference {path} is not a valid claims document: {e}") from None
    if doc["slug"] != slug:
        raise UsageError(f"reference {path} is for system {doc['slug']!r}, not {slug!r}")
    if not doc["seeds"]:
        raise UsageError(f"reference {path} records no seeds")
    return doc, path


def reference_config(doc: dict, path: Path | str = "the reference") -> dict[str, Any]:
    """What the reference's config is rebuilt from: ``preset``, ``overrides``, ``seed`` (first seed), ``device``
    and ``config_hash`` (``None`` when not recorded). :class:`UsageError` naming a missing field."""
    prov = doc.get("provenance")
    if not isinstance(prov, dict):
        raise UsageError(f"{path} has no provenance block: its config cannot be rebuilt")
    if "overrides" not in prov or not isinstance(prov["overrides"], dict):
        raise UsageError(
            f"{path} does not record provenance.overrides: its config cannot be rebuilt (refresh the reference)"
        )
    seeds = doc["seeds"]
    return {
        "preset": doc["preset"],
        "overrides": prov["overrides"],
        "seed": seeds[0],
        "device": prov.get("device", "cpu"),
        "config_hash": prov.get("config_hash"),
    }


def reference_mismatches(doc: dict, exp: Any, path: Path | str = "the reference") -> tuple[list[str], Any]:
    """(one line per way the reference's config, preset, overrides or seed list differs from the config rebuilt
    from it, the rebuilt config with all the reference's seeds — ``None`` when it cannot be built).

    Checked: ``preset`` against ``provenance.preset``; the rebuilt config's hash against ``provenance.config_hash``
    (which covers every field that changes a seed's results, so an edited override or preset shows here); the
    document's seed list against the seed list the rebuilt config runs (the preset's ``seed`` and ``seeds``: a
    reference is made with ``iclr25 run SLUG --preset quick``, without ``--seeds`` or ``--seed``)."""
    from ..common.results import config_hash
    from .configs import effective_config

    rc = reference_config(doc, path)
    prov = doc["provenance"]
    out: list[str] = []
    if "preset" in prov and prov["preset"] != doc["preset"]:
        out.append(f"preset: the document says {doc['preset']!r}, its provenance {prov['preset']!r}")
    try:
        cfg, _ = effective_config(exp, rc["preset"], device=rc["device"], overrides=rc["overrides"])
    except (UsageError, ValueError, TypeError) as e:
        out.append(
            f"config: the preset {rc['preset']!r} with overrides {rc['overrides']} cannot be rebuilt: {e}"
        )
        return out, None
    if rc["config_hash"] is not None and config_hash(cfg) != rc["config_hash"]:
        out.append(
            f"config_hash: the reference records {rc['config_hash']}, the config rebuilt from its preset "
            f"{rc['preset']!r} and overrides {json.dumps(rc['overrides'], sort_keys=True)} hashes to "
            f"{config_hash(cfg)} (the preset, an override or a default differs from the one that ran)"
        )
    seeds, expected = list(doc["seeds"]), list(cfg.seed_list)
    if seeds != expected:
        out.append(f"seeds: the reference lists {seeds}; preset {rc['preset']!r} runs seeds {expected}")
    return out, cfg


def parse_seeds(raw: Any, n_reference: int) -> int:
    """``--seeds``: an integer in [1, n_reference], or ``all`` (= n_reference)."""
    if str(raw).strip().lower() == "all":
        return n_reference
    try:
        k = int(str(raw).strip())
    except ValueError:
        raise UsageError(f"--seeds must be an integer in [1, {n_reference}] or all, got {raw!r}") from None
    if not 1 <= k <= n_reference:
        raise UsageError(
            f"--seeds must be an integer in [1, {n_reference}] (the reference's seed count) or all, got {raw!r}"
        )
    return k


def _check_out(out: Path, slug: str) -> None:
    seeds_dir = out / slug / "seeds"
    if seeds_dir.is_dir() and any(seeds_dir.glob("seed_*.json")):
        raise UsageError(
            f"--out {out} already holds seed results of {slug} ({seeds_dir}); verify recomputes every seed, "
            "so pick an empty folder"
        )


def rerun_in_subprocess(
    slug: str,
    preset: str,
    out: Path,
    seeds: int,
    seed: int,
    device: str,
    overrides: dict,
    isa: str,
    quiet: bool = False,
    timeout: float | None = None,
) -> dict:
    """Run ``slug`` through the ordinary run path in a child Python process whose environment is
    :func:`isa_environment` (``isa``), set before anything imports torch; return the run's claims document.
    ``RunPathError`` (one line, with the end of the child's stderr) when the child fails."""
    from ..common.io import read_json
    from .runs import RunPathError

    env = isa_environment(isa)
    if quiet:
        env["ICLR25_QUIET"] = "1"
    job = {
        "slug": slug,
        "preset": preset,
        "out": os.fsdecode(out),
        "seeds": seeds,
        "seed": seed,
        "device": device,
        "overrides": overrides,
    }
    r = subprocess.run(
        [sys.executable, "-m", "iclr25.harness.verify", "--rerun", json.dumps(job)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout,
    )
    if r.returncode != 0:
        tail = r.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise RunPathError(
            f"the --isa {isa} re-run of {slug} failed (exit {r.returncode}): {' | '.join(tail)}"
        )
    if r.stderr:
        sys.stderr.write(r.stderr.decode("utf-8", "replace"))
    return read_json(out / slug / "claims.json")


def _rerun_main(job_json: str) -> int:
    """The child of :func:`rerun_in_subprocess`: one run through the ordinary run path."""
    from ..common.device import tune_malloc
    from ..common.progress import is_quiet, set_quiet
    from .configs import experiment_module
    from .runs import run_experiment

    job = json.loads(job_json)
    set_quiet(is_quiet())
    tune_malloc()
    exp = experiment_module(job["slug"])
    run_experiment(
        exp,
        job["slug"],
        job["preset"],
        Path(job["out"]),
        job["seeds"],
        job["seed"],
        job["device"],
        job["overrides"],
    )
    return 0


def verify(
    slug: str,
    seeds: int | str = 1,
    reference: str | Path | None = None,
    out: str | Path | None = None,
    isa: str | None = None,
    quiet: bool = False,
) -> tuple[Comparison, str]:
    """Re-run the first ``seeds`` seeds (``"all"``: every one) of ``slug``'s reference and compare (see the module
    docstring). ``isa``: ``None`` (re-run here), ``"avx2"`` or ``"native"`` (re-run in a child process with the
    instruction-set variables of :data:`ISA_ENV`). ``quiet``: no progress bars in a child re-run.

    Returns the comparison and its printed form (a header line, the table, the environment). A reference whose
    config, preset, overrides or seed list does not match is not re-run: the comparison holds the mismatches
    (exit :data:`EXIT_MISMATCH`)."""
    from ..common.results import config_hash
    from .configs import effective_config, experiment_module
    from .provenance import environment
    from .runs import run_experiment

    exp = experiment_module(slug)  # UsageError for an unknown system
    if isa is not None and isa not in ISA_ENV:
        raise UsageError(f"--isa must be one of {', '.join(ISA_ENV)}, got {isa!r}")
    ref, path = load_reference(slug, reference)
    k = parse_seeds(seeds, len(ref["seeds"]))
    rc = reference_config(ref, path)
    mismatches, _ = reference_mismatches(ref, exp, path)
    cfg, _ = (
        effective_config(
            exp, rc["preset"], seeds=k, seed=rc["seed"], device=rc["device"], overrides=rc["overrides"]
        )
        if not mismatches
        else (None, None)
    )
    seed_list = list(ref["seeds"][:k])
    isa_txt = f"; instruction set: {isa}" + (
        f" ({' '.join(f'{a}={b}' for a, b in ISA_ENV[isa].items())})" if isa and ISA_ENV[isa] else ""
    )
    head = (
        f"iclr25 verify {slug}: re-running {_seed_words(seed_list)} ({k} of {len(ref['seeds'])}) of {path}\n"
        f"config: preset {rc['preset']}, overrides {json.dumps(rc['overrides'], sort_keys=True)}, "
        f"device {rc['device'] if cfg is None else cfg.device}{isa_txt if isa else ''}"
    )
    if mismatches:
        cmp = Comparison(slug, seed_list, len(ref["seeds"]), [], [], [], mismatches=mismatches)
        return cmp, head + "\n\n" + format_comparison(cmp)
    if rc["config_hash"] is None:
        head += (
            "; the reference records no config_hash: its config cannot be confirmed (re-make the reference)\n"
        )
    else:
        head += f", config_hash {config_hash(cfg)} (matches)\n"

    def go(folder: Path) -> dict:
        _check_out(folder, slug)
        if isa is not None:
            return rerun_in_subprocess(
                slug, rc["preset"], folder, k, rc["seed"], rc["device"], rc["overrides"], isa, quiet
            )
        return run_experiment(exp, slug, rc["preset"], folder, k, rc["seed"], rc["device"], rc["overrides"])

    if out is None:
        with tempfile.TemporaryDirectory(prefix=f"iclr25-verify-{slug}-") as tmp:
            new = go(Path(tmp))
    else:
        new = go(Path(out))
    prov_new = {k2: v for k2, v in new.get("provenance", {}).items()}
    env_here = prov_new if isa is not None else {**environment(cfg.device), **prov_new}
    cmp = compare_documents(ref, new, k, env_here=env_here)
    return cmp, head + "\n" + format_comparison(cmp)


def cmd_verify(args: argparse.Namespace) -> int:
    """The CLI: print the comparison; exit with :meth:`Comparison.exit_code` (2: usage). ``--quiet`` or
    ``ICLR25_QUIET=1``: no progress bars."""
    from ..common.device import tune_malloc
    from ..common.progress import is_quiet, set_quiet

    quiet = bool(getattr(args, "quiet", False)) or is_quiet()
    set_quiet(quiet)
    tune_malloc()
    cmp, text = verify(
        args.slug, args.seeds, args.reference, args.out, isa=getattr(args, "isa", None), quiet=quiet
    )
    print(text, end="", flush=True)
    return cmp.exit_code


if __name__ == "__main__":  # the child process of rerun_in_subprocess (``--isa``)
    if len(sys.argv) == 3 and sys.argv[1] == "--rerun":
        sys.exit(_rerun_main(sys.argv[2]))
    sys.exit("usage: python -m iclr25.harness.verify --rerun JOB_JSON (internal: use `iclr25 verify`)")
