"""``iclr25 report``: one self-contained ``index.html`` (images embedded) for the runs in a folder.

Every ``<out>/<slug>/claims.json`` is validated (:func:`iclr25.common.claims.validate_claims_document`) and each
verdict recomputed from its numbers; a document that cannot be read or does not follow the schema is shown as
such, with the reason, and left out of the headline count, as are runs marked invalid. The committed reference
results (``results/quick/<slug>/claims.json``) are shown beside the fresh runs and labelled as such; smoke runs
are labelled as plumbing checks. From a pip install (no repository checkout) the reference documents are the
copies shipped in the wheel as ``iclr25/_reference/<slug>/`` (:func:`default_reference_dir`).

A second reference, the committed ``real``-preset runs (real pretrained models and real data:
``results/real/<slug>/claims.json``, in a wheel ``iclr25/_reference_real/<slug>/``;
:func:`default_real_reference_dir`), is shown as its own **real reference** column beside the quick one, only where
there is such a document: with none the page is the one without it. A fresh ``real`` run's section lists the real
inputs that system uses (:func:`iclr25.assets.for_system`: title, pinned source, licence) and whether each is in
this machine's asset cache.

The page opens with the headline (counted per preset: a smoke run's toy-size claims are never added to a quick
run's) and the per-system overview table; then one section per system. Each figure is embedded once: the main
figure beside the claims table, the others in the run's report (a second mention there says where it is shown).
Figures committed beside a reference document (``results/quick/<slug>/*.png`` or ``.../figures/*.png``) are shown
for the reference column.

Nothing is read from outside a run's own folder: a ``claims.json``, ``report.md`` or figure that is (or sits
behind) a symlink resolving outside ``<out>/<slug>/`` is refused, reads are size-limited (a link to
``/dev/zero`` cannot exhaust memory) and JSON nested too deeply is refused before anything recurses on it.

Everything is rendered by Jinja2 with autoescaping; each run's ``report.md`` goes through markdown-it with raw
HTML disabled (it is shown as text), so no text from a run folder can become live HTML. Numbers are formatted by
:mod:`iclr25.common.fmt` and claim rows built by :mod:`iclr25.harness.render`, as in the CLI and report.md.
"""

from __future__ import annotations

import base64
import html
import importlib.resources
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import registry
from ..common.claims import DECISION_RULE, Claim, VerdictCounts, validate_claims_document, verdict_counts
from ..common.fmt import fmt_seconds
from ..common.io import UnsafeFileError, atomic_write_text, read_bytes_limited, read_json
from ..harness.render import PRESET_NOTES, SMOKE_PRECONDITION, claim_rows, overrides_text, smoke_precondition

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif"}
MAX_IMAGE_BYTES = 8 << 20
MAX_REPORT_MD_BYTES = 8 << 20
INLINE_BUDGET = 8 << 20  # characters of embedded figures (data: URIs) per page; figures beyond it are linked


def display_path(p: str | os.PathLike) -> str:
    """A path as text that can always be written as UTF-8: its bytes decoded as UTF-8, an undecodable byte shown
    as ``\\xNN`` (a non-UTF-8 file name, or a unicode one read under ``LC_ALL=C PYTHONUTF8=0``, reaches Python
    as lone surrogates, which no UTF-8 writer accepts)."""
    try:
        raw = os.fsencode(p)
    except (UnicodeError, TypeError):
        return safe_text(str(p))
    return raw.decode("utf-8", "backslashreplace")


_SURROGATES = re.compile("[\ud800-\udfff]+")


def safe_text(text: str) -> str:
    """``text`` with every run of lone surrogates replaced by what it stands for: the bytes a file-system name
    smuggled in (``\\udcXX``, decoded as UTF-8, undecodable bytes as ``\\xNN``), or ``\\udXXX`` for any other
    surrogate (e.g. one a JSON ``\\ud800`` escape put into a statement). The result always encodes as UTF-8."""

    def fix(m: re.Match) -> str:
        run = m.group(0)
        try:
            return run.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            return run.encode("utf-8", "backslashreplace").decode("ascii")

    return _SURROGATES.sub(fix, text)


class ReportError(OSError):
    """The report cannot be written (no such folder, nothing to report, a file in the way)."""


REFERENCE_PACKAGE_DIR = "_reference"  # iclr25/_reference/<slug>/claims.json in a wheel (see setup.py)
REAL_REFERENCE_PACKAGE_DIR = "_reference_real"  # iclr25/_reference_real/<slug>/claims.json in a wheel


def packaged_reference_dir(name: str = REFERENCE_PACKAGE_DIR) -> Path | None:
    """The reference documents shipped as package data (``iclr25/<name>``: ``_reference`` for the quick runs,
    ``_reference_real`` for the real ones), when this install has them."""
    try:
        d = importlib.resources.files("iclr25") / name
        if d.is_dir():
            return Path(str(d))
    except (ModuleNotFoundError, OSError, TypeError):
        pass
    return None


def _repository_results(preset: str) -> Path | None:
    d = Path(__file__).resolve().parents[3] / "results" / preset
    return d if d.is_dir() and any(d.glob("*/claims.json")) else None


def default_reference_dir() -> Path | None:
    """``results/quick`` of the repository this package runs from, when there is one; otherwise the copies
    shipped in the wheel (:func:`packaged_reference_dir`); ``None`` when neither exists."""
    return _repository_results("quick") or packaged_reference_dir()


def default_real_reference_dir() -> Path | None:
    """``results/real`` of the repository this package runs from, when it holds a document; otherwise the
    copies shipped in the wheel (``iclr25/_reference_real``); ``None`` when neither exists."""
    return _repository_results("real") or packaged_reference_dir(REAL_REFERENCE_PACKAGE_DIR)


@dataclass
class RunView:
    """One claims document as the report shows it."""

    folder: str  # the folder name under OUT (the system's slug for a well-formed run)
    kind: str  # "fresh", "reference" (the quick reference) or "reference_real"
    path: Path
    doc: dict | None = None
    claims: list[Claim] = field(default_factory=list)
    error: str = ""  # why the document cannot be used ("" when it is a valid document)

    @property
    def slug(self) -> str:
        return self.folder

    @property
    def label(self) -> str:
        """How the page names this document's column at the start of a sentence."""
        return {"fresh": "This run", "reference_real": "Real reference"}.get(self.kind, "Reference")

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def valid(self) -> bool:
        """A readable, schema-valid document of a run that did not mark itself invalid."""
        return self.ok and self.doc is not None and self.doc.get("valid", True) is True

    @property
    def smoke_precondition(self) -> bool:
        """A smoke run whose toy-size model did not reach the experiment's precondition (expected; not counted,
        but not labelled invalid either: the quick preset checks the precondition)."""
        return self.ok and smoke_precondition(self.doc)

    @property
    def preset(self) -> str:
        p = (self.doc or {}).get("preset")
        return p if isinstance(p, str) else "?"

    @property
    def counts(self) -> VerdictCounts:
        """The top-level claims by verdict (checks apart): :func:`iclr25.common.claims.verdict_counts`."""
        return verdict_counts(self.claims)

    @property
    def held(self) -> int:
        return self.counts.holds

    @property
    def provenance(self) -> dict:
        p = (self.doc or {}).get("provenance")
        return p if isinstance(p, dict) else {}


def _load(path: Path, folder: str, kind: str) -> RunView:
    v = RunView(folder=folder, kind=kind, path=path)
    try:
        v.doc = read_json(path, within=path.parent)
    except UnsafeFileError as e:
        v.error = f"claims.json is refused ({e})"
        return v
    except UnicodeDecodeError:
        v.error = "claims.json is not UTF-8 text"
        return v
    except ValueError as e:
        v.error = f"claims.json is not valid JSON ({e})"
        return v
    except OSError as e:
        v.error = f"claims.json cannot be read ({e.strerror or e})"
        return v
    try:
        v.claims = validate_claims_document(v.doc)
    except ValueError as e:
        v.error = f"invalid claims document: {e}"
        v.claims = []
        return v
    if v.doc.get("slug") not in (folder, ""):
        v.error = f"the document names system {v.doc.get('slug')!r} but sits in folder {folder!r}"
    elif kind == "reference_real" and v.doc.get("preset") != "real":
        v.error = f"the real reference is a {v.doc.get('preset')!r}-preset run, not a 'real'-preset one"
    return v


def _order(name: str) -> tuple[int, str]:
    order = {s: i for i, s in enumerate(registry.SLUGS)}
    return order.get(name, len(order)), name


def collect_runs(out: str | Path, kind: str = "fresh") -> list[RunView]:
    """Every ``<out>/<folder>/claims.json`` (registry order first), loaded and validated."""
    out = Path(out)
    if not out.is_dir():
        return []
    views = []
    for d in sorted(
        (p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: _order(p.name)
    ):
        f = d / "claims.json"
        if f.exists() or f.is_symlink():
            views.append(_load(f, d.name, kind))
    return views


# -- report.md and figures --------------------------------------------------------------------------------


def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


class FigureBudget:
    """Embeds figures as ``data:`` URIs until ``limit`` characters of them are on the page; every figure after
    that is linked instead (a path relative to ``page_dir``, the folder ``index.html`` is written to), so a report
    over hundreds of runs stays a page a browser opens. ``limit=None``: no limit."""

    def __init__(self, page_dir: Path | None = None, limit: int | None = INLINE_BUDGET) -> None:
        self.page_dir = page_dir
        self.limit = limit
        self.used = 0
        self.linked = 0

    def link(self, path: Path) -> str:
        """An ``href`` for ``path``: relative to the page's folder (percent-encoded bytes), else a file URI."""
        try:
            if self.page_dir is not None:
                rel = os.path.relpath(path, self.page_dir)
                return urllib.parse.quote(os.fsencode(rel).replace(os.sep.encode(), b"/"))
            return urllib.parse.quote(os.fsencode(path.resolve()))
        except (ValueError, OSError):
            return ""

    def figure(self, path: Path, within: Path) -> tuple[str, bool] | None:
        """``(src, inline)`` for an image file inside the folder ``within`` (symlinks resolved): a ``data:`` URI
        while the budget lasts, else a link; ``None`` for a file that is missing, not an image, not a regular
        file, unreadable or outside ``within``."""
        mime = IMAGE_TYPES.get(path.suffix.lower())
        if mime is None:
            return None
        try:
            real = path.resolve(strict=True)
            if not real.is_relative_to(within.resolve()) or not real.is_file():
                return None
            size = real.stat().st_size
        except (OSError, ValueError, RuntimeError):
            return None
        encoded = 4 * ((size + 2) // 3) + len(f"data:{mime};base64,")
        fits = size <= MAX_IMAGE_BYTES and (self.limit is None or self.used + encoded <= self.limit)
        if fits:
            try:
                data = read_bytes_limited(path, MAX_IMAGE_BYTES, within=within)
            except (
                OSError,
                ValueError,
            ):  # changed under us, too large, not a regular file, or outside `within`
                return None
            uri = f"data:{mime};base64," + base64.b64encode(data).decode()
            self.used += len(uri)
            return uri, True
        href = self.link(path)
        if not href:
            return None
        self.linked += 1
        return href, False


def _data_uri(path: Path, within: Path, budget: FigureBudget | None = None) -> str | None:
    """``data:`` URI of an image file inside the folder ``within`` (symlinks resolved), else ``None``."""
    got = (budget or FigureBudget(limit=None)).figure(path, within)
    return got[0] if got is not None and got[1] else None


def _inside(base: Path, rel: str) -> Path | None:
    try:
        p = (base / rel).resolve()
        return p if p.is_relative_to(base.resolve()) else None
    except (OSError, ValueError):
        return None


def render_markdown(
    text: str,
    base: Path,
    demote: int = 2,
    shown: dict[str, str] | None = None,
    budget: FigureBudget | None = None,
) -> str:
    """Markdown → HTML with raw HTML shown as text; images embedded when they are files inside ``base``
    (others are dropped, leaving their alt text, so the page never loads anything from elsewhere); once
    ``budget`` is spent, an image is a link to its file instead.

    ``shown`` maps an image path (relative to ``base``) already embedded elsewhere on the page to where it is
    shown; such an image, or one this text mentions twice, becomes a one-line note instead of a second copy
    (paths embedded here are added to ``shown``)."""
    body = _markdown().render(text)
    shown = {} if shown is None else shown
    budget = budget or FigureBudget(limit=None)

    def img(m: re.Match) -> str:
        tag = m.group(0)
        src = re.search(r'\ssrc="([^"]*)"', tag)
        alt = re.search(r'\salt="([^"]*)"', tag)
        alt_text = alt.group(1) if alt else ""
        rel = _relative(base, html.unescape(src.group(1))) if src else None
        if rel is not None and rel in shown:
            return f'<span class="muted">[figure {html.escape(rel)}: {shown[rel]}]</span>'
        p = _inside(base, rel) if rel is not None else None
        got = budget.figure(p, base) if p is not None else None
        if got is None:
            return f'<span class="muted">[image: {alt_text}]</span>'
        shown[rel] = "shown above in this report"
        if not got[1]:
            return (
                f'<a class="linked" href="{html.escape(got[0])}">[figure: {alt_text or html.escape(rel)}]</a>'
            )
        return f'<img src="{got[0]}" alt="{alt_text}">'

    body = re.sub(r"<img\b[^>]*>", img, body)
    body = re.sub(r"<(/?)h([1-6])>", lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + demote)}>", body)
    return body.replace("<table>", '<div class="scroll"><table>').replace("</table>", "</table></div>")


def _relative(base: Path, src: str) -> str | None:
    """``src`` (a figure link of a report.md) as a normalised path relative to ``base``; ``None`` when it is a
    URL or leaves ``base`` (symlinks are not followed here: that is :func:`_inside`'s job)."""
    if not src or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", src) or src.startswith(("/", "\\")):
        return None
    parts: list[str] = []
    for part in src.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) or None


def _figures(d: Path, subdirs: tuple[str, ...] = ("figures",)) -> list[dict[str, Any]]:
    """The image files in ``d/<subdir>/`` (``""`` = ``d`` itself), not read yet (:func:`_embed` reads them)."""
    figs = []
    for sub in subdirs:
        fdir = d / sub if sub else d
        if not fdir.is_dir():
            continue
        for p in sorted(fdir.iterdir()):
            if p.suffix.lower() in IMAGE_TYPES:
                rel = f"{sub}/{p.name}" if sub else p.name
                figs.append(
                    {"name": display_path(p.name), "rel": display_path(rel), "stem": display_path(p.stem),
                     "path": p, "within": d, "uri": "", "inline": False}
                )  # fmt: skip
    return figs


def _safe_image(fig: dict[str, Any]) -> bool:
    """A figure candidate that is a regular file inside its folder (symlinks resolved) — checked without
    reading it."""
    try:
        real = Path(fig["path"]).resolve(strict=True)
        return real.is_relative_to(Path(fig["within"]).resolve()) and real.is_file()
    except (OSError, ValueError, RuntimeError):
        return False


def _embed(figs: list[dict[str, Any]], budget: FigureBudget) -> list[dict[str, Any]]:
    """``figs`` with ``uri`` (a ``data:`` URI, or a link once the budget is spent) and ``inline`` filled in; a
    figure that cannot be read safely is dropped."""
    out = []
    for f in figs:
        got = budget.figure(f["path"], f["within"])
        if got is not None:
            out.append({**f, "uri": got[0], "inline": got[1]})
    return out


# -- the page ----------------------------------------------------------------------------------------------


def _side(v: RunView | None, cid: str) -> dict | None:
    if v is None or not v.ok:
        return None
    for r in claim_rows(v.claims):
        if r["id"] == cid:
            return r
    return None


def _system_rows(fresh: RunView | None, ref: RunView | None, real: RunView | None = None) -> list[dict]:
    """Claim rows matched by id: the reference's, the real reference's and the fresh run's numbers side by
    side."""
    ids: list[str] = []
    info: dict[str, dict] = {}
    for v in (ref, real, fresh):
        if v is None or not v.ok:
            continue
        for r in claim_rows(v.claims):
            if r["id"] not in info:
                ids.append(r["id"])
                info[r["id"]] = r
    return [
        {
            "id": cid,
            "depth": info[cid]["depth"],
            "statement": info[cid]["statement"],
            "threshold": info[cid]["threshold"],
            "ref": _side(ref, cid),
            "real": _side(real, cid),
            "fresh": _side(fresh, cid),
        }
        for cid in ids
    ]


def _preset_order(preset: str) -> tuple[int, str]:
    order = {"full": 0, "real": 1, "quick": 2, "smoke": 3}
    return order.get(preset, len(order)), preset


def _headline(views: list[RunView]) -> dict:
    """Counts per preset (``by_preset``: preset → :class:`VerdictCounts`: holds / fails / not decided, checks
    apart); ``counts`` adds every valid run and is only shown when all runs share one preset."""
    valid = [v for v in views if v.valid]
    by_preset: dict[str, VerdictCounts] = {}
    for v in valid:
        by_preset[v.preset] = by_preset.get(v.preset, VerdictCounts()) + v.counts
    total = sum((v.counts for v in valid), VerdictCounts())
    readable = [v for v in views if v.ok]
    return {
        "counts": total,
        "held": total.holds,
        "total": total.claims,
        "runs": len(valid),
        "expected": [v for v in views if v.smoke_precondition],
        "excluded": [v for v in views if not v.valid and not v.smoke_precondition],
        "by_preset": dict(sorted(by_preset.items(), key=lambda kv: _preset_order(kv[0]))),
        "only_smoke": bool(readable) and all(v.preset == "smoke" for v in readable),
    }


def _prov_line(v: RunView) -> str:
    p = v.provenance
    bits = []
    if p.get("date_utc"):
        bits.append(str(p["date_utc"])[:10])
    if p.get("git_commit"):
        bits.append(f"commit {str(p['git_commit'])[:10]}")
    wall = p.get("wall_s", (v.doc or {}).get("runtime_s"))
    bits.append(fmt_seconds(wall))
    if isinstance(p.get("load_avg_start"), list) and p["load_avg_start"]:
        bits.append(f"load {p['load_avg_start'][0]}")
    if p.get("cpu_count"):
        bits.append(f"{p['cpu_count']} CPUs")
    if p.get("device"):
        bits.append(str(p["device"]))
    if "overrides" in p:  # what changed from the preset (`--set`), and the hash of the config that ran
        bits.append(f"overrides: {overrides_text(p['overrides'])}")
    if p.get("config_hash"):
        bits.append(f"config {p['config_hash']}")
    return " · ".join(str(b) for b in bits)


def _status(v: RunView | None, with_preset: bool) -> str:
    if v is None:
        return "—"
    if not v.ok:
        return "invalid document"
    if v.smoke_precondition:
        return "precondition not reached at smoke size (expected)"
    if not v.valid:
        return "run invalid"
    return v.counts.text() + (f" ({v.preset})" if with_preset else "")


def _check_reference(reference: str | Path | None, option: str) -> None:
    if reference is None:
        return
    if str(reference).strip() == "":
        raise ReportError(f"{option} must name a folder of <slug>/claims.json, got an empty string")
    if not Path(reference).is_dir():
        what = "a file, not a folder" if Path(reference).exists() else "no such folder"
        raise ReportError(
            f"no such reference folder: {reference} ({what}; {option} must name a folder of <slug>/claims.json)"
        )


def _collect_refs(ref_dir: Path | None, out: Path, kind: str) -> list[RunView]:
    if ref_dir is None or ref_dir.resolve() == out.resolve():
        return []
    return collect_runs(ref_dir, kind)


def real_inputs(slug: str) -> list[dict[str, str]]:
    """The real assets system ``slug`` uses (:func:`iclr25.assets.for_system`), each with its title, pinned
    source, licence, what it is and its state in this machine's asset cache (``present``, ``missing``,
    ``damaged``, or ``unknown`` with the reason when it cannot be checked). Plain text: the template escapes it."""
    try:
        from .. import assets
        from ..assets.store import fetch_command

        declared = assets.for_system(slug)
    except Exception as e:  # noqa: BLE001 — the report is still written; the block says why it is empty
        what = f"{type(e).__name__}: {e}"
        title = "(the asset catalogue cannot be read)"
        return [
            dict(name="", title=title, source="", licence="", what=what, state="unknown", detail="", fetch="")
        ]
    rows = []
    for a in declared:
        try:
            st = assets.status(a, deep=False)
            state, detail = st.state, st.detail
        except Exception as e:  # noqa: BLE001 — one unreadable cache entry does not stop the page
            state, detail = "unknown", f"{type(e).__name__}: {e}"
        try:
            fetch = fetch_command(a) if state != "present" else ""
        except Exception:  # noqa: BLE001 — the command is a hint only
            fetch = ""
        rows.append(
            {
                "name": str(a.name),
                "title": str(a.title),
                "source": str(a.source),
                "licence": str(a.licence),
                "what": str(a.what),
                "state": state,
                "detail": str(detail or ""),
                "fetch": fetch,
            }
        )
    return rows


def build_context(
    out: str | Path,
    reference: str | Path | None = None,
    reference_real: str | Path | None = None,
    inline_budget: int | None = INLINE_BUDGET,
) -> dict:
    """Everything the page shows. ``reference``: the folder of quick reference documents (default
    :func:`default_reference_dir`); ``reference_real``: the folder of real reference documents (default
    :func:`default_real_reference_dir`). ``inline_budget``: characters of figures embedded in the page (the
    main figures of every system first, then the others in page order); the rest are linked (``None``: embed
    every figure)."""
    out = Path(out)
    fresh = collect_runs(out, "fresh")
    _check_reference(reference, "--reference")
    _check_reference(reference_real, "--reference-real")
    ref_dir = Path(reference) if reference is not None else default_reference_dir()
    real_dir = Path(reference_real) if reference_real is not None else default_real_reference_dir()
    refs = _collect_refs(ref_dir, out, "reference")
    reals = _collect_refs(real_dir, out, "reference_real")
    fresh_by = {v.folder: v for v in fresh}
    ref_by = {v.folder: v for v in refs}
    real_by = {v.folder: v for v in reals}
    names = sorted(set(fresh_by) | set(ref_by) | set(real_by), key=_order)
    systems = []
    for name in names:
        f, r, rr = fresh_by.get(name), ref_by.get(name), real_by.get(name)
        sysinfo = registry.find(name)
        d = out / name
        figs = [g for g in _figures(d) if _safe_image(g)] if f is not None else []
        rep = d / "report.md"
        text = None
        report_html = ""
        if f is not None and (rep.exists() or rep.is_symlink()):
            try:
                text = read_bytes_limited(rep, MAX_REPORT_MD_BYTES, within=d).decode(
                    "utf-8", errors="replace"
                )
            except UnsafeFileError as e:
                report_html = f"<p>report.md is refused ({html.escape(str(e))})</p>"
            except OSError as e:
                report_html = f"<p>report.md cannot be read ({html.escape(str(e.strerror or e))})</p>"
        if text is not None:
            first = re.search(
                r"\]\(figures/([^)\s]+)\)", text
            )  # the experiment's first figure is its main one
            if first:
                figs.sort(key=lambda g: g["name"] != first.group(1))
        main = figs[0] if figs else None
        # every figure once: the main one beside the table, the rest in report.md (or the grid below it)
        shown = {main["rel"]: "shown beside the claims table"} if main else {}
        ref_figs = _figures(ref_dir / name, ("", "figures")) if r is not None and ref_dir is not None else []
        real_figs = (
            _figures(real_dir / name, ("", "figures")) if rr is not None and real_dir is not None else []
        )
        ref_figs = [g for g in ref_figs if _safe_image(g)]
        real_figs = [g for g in real_figs if _safe_image(g)]
        ref_main, main_kind = None, "this run"
        if main is None and ref_figs:  # no fresh figure: the reference's plot sits beside the table
            ref_main, ref_figs, main_kind = ref_figs[0], ref_figs[1:], "reference"
        elif main is None and real_figs:  # nor a quick reference's: the real reference's
            ref_main, real_figs, main_kind = real_figs[0], real_figs[1:], "real reference"
        notes = []
        for v in (f, r, rr):
            if v is not None and v.ok:
                for c in v.claims:
                    if c.note and (c.id, c.note) not in notes:
                        notes.append((c.id, c.note))
        systems.append(
            {
                "name": name,
                "anchor": "sys-" + re.sub(r"[^A-Za-z0-9_-]", "-", name),
                "title": sysinfo.title if sysinfo else "",
                "url": sysinfo.url if sysinfo else "",
                "fresh": f,
                "ref": r,
                "real": rr,
                "fresh_prov": _prov_line(f) if f is not None and f.ok else "",
                "ref_prov": _prov_line(r) if r is not None and r.ok else "",
                "real_prov": _prov_line(rr) if rr is not None and rr.ok else "",
                "rows": _system_rows(f, r, rr),
                "notes": notes,
                "main_figure": main or ref_main,
                "main_kind": main_kind,
                "figures": figs,
                "_markdown": (text, d, shown),
                "ref_figures": ref_figs,
                "real_figures": real_figs,
                "report_html": report_html,
                "real_inputs": real_inputs(name) if f is not None and f.ok and f.preset == "real" else None,
            }
        )
    budget = FigureBudget(out, inline_budget)
    for sys_ in systems:  # the main figures first: the budget goes to them before any other figure
        if sys_["main_figure"] is not None:
            got = _embed([sys_["main_figure"]], budget)
            sys_["main_figure"] = got[0] if got else None
    for sys_ in systems:  # then in page order: report.md's figures, the others, the references'
        text, d, shown = sys_.pop("_markdown")
        if text is not None:
            sys_["report_html"] = render_markdown(text, d, shown=shown, budget=budget)
        sys_["figures"] = _embed([g for g in sys_["figures"] if g["rel"] not in shown], budget)
        sys_["ref_figures"] = _embed(sys_["ref_figures"], budget)
        sys_["real_figures"] = _embed(sys_["real_figures"], budget)
    status = []
    for i, s in enumerate(registry.SYSTEMS, 1):
        f, r, rr = fresh_by.get(s.slug), ref_by.get(s.slug), real_by.get(s.slug)
        status.append(
            {
                "i": i,
                "system": s,
                "has_section": f is not None or r is not None,
                "anchor": "sys-" + s.slug,
                "ref": _status(r, with_preset=False),
                "real": _status(rr, with_preset=False),
                "fresh": _status(f, with_preset=True),
            }
        )
    return {
        "out": display_path(out),
        "ref_dir": display_path(ref_dir) if refs and ref_dir is not None else "",
        "real_dir": display_path(real_dir) if reals and real_dir is not None else "",
        "figures_linked": budget.linked,
        "inline_budget": inline_budget,
        "decision_rule": DECISION_RULE,
        "has_real": bool(reals),  # the real reference column is shown only when there is a document for it
        "fresh": _headline(fresh),
        "reference": _headline(refs),
        "reference_real": _headline(reals),
        "systems": systems,
        "status": status,
        "preset_notes": PRESET_NOTES,
        "smoke_precondition_note": SMOKE_PRECONDITION,
    }


def _env() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("iclr25.report", "templates"),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def render_report(
    out: str | Path,
    reference: str | Path | None = None,
    reference_real: str | Path | None = None,
    inline_budget: int | None = INLINE_BUDGET,
) -> str:
    """The page as text that always encodes as UTF-8 (:func:`safe_text`: a path or name with bytes that are not
    UTF-8 is shown with ``\\xNN`` escapes instead of crashing the write)."""
    from markupsafe import Markup

    ctx = build_context(out, reference, reference_real, inline_budget)
    for s in ctx["systems"]:
        s["report_html"] = Markup(s["report_html"])  # produced by markdown-it with raw HTML disabled
    return safe_text(_env().get_template("index.html").render(**ctx))


def write_report(
    out: str | Path,
    reference: str | Path | None = None,
    reference_real: str | Path | None = None,
    inline_budget: int | None = INLINE_BUDGET,
) -> Path:
    """Write ``<out>/index.html`` and return its path; :class:`ReportError` (one line) when ``out`` is not a
    folder of runs or a reference folder given does not exist. ``reference``/``reference_real``: the quick and
    real reference folders (defaults: :func:`default_reference_dir`, :func:`default_real_reference_dir`).
    ``inline_budget``: characters of embedded figures (default :data:`INLINE_BUDGET`, 8 MiB); figures beyond it
    are linked by their path relative to ``out``."""
    if out is None or str(out).strip() == "":
        raise ReportError("--out must name a folder of runs, got an empty string")
    out = Path(out)
    shown = display_path(out)
    if out.exists() and not out.is_dir():
        raise ReportError(f"{shown} is a file, not a folder of runs")
    if not out.is_dir():
        raise ReportError(f"no such folder: {shown} (run `iclr25 run SLUG --out {shown}` first)")
    if not any(out.glob("*/claims.json")):
        raise ReportError(
            f"no runs in {shown} (no {shown}/<slug>/claims.json); run `iclr25 run SLUG --out {shown}` first"
        )
    target = out / "index.html"
    if target.is_dir():
        raise ReportError(f"{display_path(target)} is a folder; cannot write the report there")
    return atomic_write_text(target, render_report(out, reference, reference_real, inline_budget))
