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
:mod:`iclr25.common.fmt` and claim rows built by :mod:`iclr25.common.render`, as in the CLI and report.md.
"""

from __future__ import annotations

import base64
import html
import importlib.resources
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import registry
from ..common.claims import Claim, validate_claims_document
from ..common.fmt import fmt_seconds
from ..common.io import UnsafeFileError, atomic_write_text, read_bytes_limited, read_json
from ..common.render import PRESET_NOTES, SMOKE_PRECONDITION, claim_rows, overrides_text, smoke_precondition

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif"}
MAX_IMAGE_BYTES = 8 << 20
MAX_REPORT_MD_BYTES = 8 << 20


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
    def held(self) -> int:
        return sum(c.holds for c in self.claims)

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


def _data_uri(path: Path, within: Path) -> str | None:
    """``data:`` URI of an image file inside the folder ``within`` (symlinks resolved), else ``None``."""
    mime = IMAGE_TYPES.get(path.suffix.lower())
    if mime is None:
        return None
    try:
        data = read_bytes_limited(path, MAX_IMAGE_BYTES, within=within)
    except (OSError, ValueError):  # missing, unreadable, too large, not a regular file, or outside `within`
        return None
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def _inside(base: Path, rel: str) -> Path | None:
    try:
        p = (base / rel).resolve()
        return p if p.is_relative_to(base.resolve()) else None
    except (OSError, ValueError):
        return None


def render_markdown(text: str, base: Path, demote: int = 2, shown: dict[str, str] | None = None) -> str:
    """Markdown → HTML with raw HTML shown as text; images embedded when they are files inside ``base``
    (others are dropped, leaving their alt text, so the page never loads anything from elsewhere).

    ``shown`` maps an image path (relative to ``base``) already embedded elsewhere on the page to where it is
    shown; such an image, or one this text mentions twice, becomes a one-line note instead of a second copy
    (paths embedded here are added to ``shown``)."""
    body = _markdown().render(text)
    shown = {} if shown is None else shown

    def img(m: re.Match) -> str:
        tag = m.group(0)
        src = re.search(r'\ssrc="([^"]*)"', tag)
        alt = re.search(r'\salt="([^"]*)"', tag)
        alt_text = alt.group(1) if alt else ""
        rel = _relative(base, html.unescape(src.group(1))) if src else None
        if rel is not None and rel in shown:
            return f'<span class="muted">[figure {html.escape(rel)}: {shown[rel]}]</span>'
        p = _inside(base, rel) if rel is not None else None
        uri = _data_uri(p, base) if p is not None else None
        if uri is None:
            return f'<span class="muted">[image: {alt_text}]</span>'
        shown[rel] = "shown above in this report"
        return f'<img src="{uri}" alt="{alt_text}">'

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


def _figures(d: Path, subdirs: tuple[str, ...] = ("figures",)) -> list[dict[str, str]]:
    """The image files in ``d/<subdir>/`` (``""`` = ``d`` itself), each read once, inside ``d`` only."""
    figs = []
    for sub in subdirs:
        fdir = d / sub if sub else d
        if not fdir.is_dir():
            continue
        for p in sorted(fdir.iterdir()):
            uri = _data_uri(p, d) if p.suffix.lower() in IMAGE_TYPES else None
            if uri:
                rel = f"{sub}/{p.name}" if sub else p.name
                figs.append({"name": p.name, "rel": rel, "stem": p.stem, "uri": uri})
    return figs


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
    """Counts per preset (``by_preset``: preset → [held, total]); ``held``/``total`` add every valid run and
    are only shown when all runs share one preset."""
    valid = [v for v in views if v.valid]
    by_preset: dict[str, list[int]] = {}
    for v in valid:
        h = by_preset.setdefault(v.preset, [0, 0])
        h[0] += v.held
        h[1] += len(v.claims)
    readable = [v for v in views if v.ok]
    return {
        "held": sum(v.held for v in valid),
        "total": sum(len(v.claims) for v in valid),
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
    return f"{v.held}/{len(v.claims)}" + (f" ({v.preset})" if with_preset else "")


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
    out: str | Path, reference: str | Path | None = None, reference_real: str | Path | None = None
) -> dict:
    """Everything the page shows. ``reference``: the folder of quick reference documents (default
    :func:`default_reference_dir`); ``reference_real``: the folder of real reference documents (default
    :func:`default_real_reference_dir`)."""
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
        figs = _figures(d) if f is not None else []
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
        if text is not None:
            report_html = render_markdown(text, d, shown=shown)
        more = [g for g in figs if g["rel"] not in shown]
        ref_figs = _figures(ref_dir / name, ("", "figures")) if r is not None and ref_dir is not None else []
        real_figs = (
            _figures(real_dir / name, ("", "figures")) if rr is not None and real_dir is not None else []
        )
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
                "figures": more,
                "ref_figures": ref_figs,
                "real_figures": real_figs,
                "report_html": report_html,
                "real_inputs": real_inputs(name) if f is not None and f.ok and f.preset == "real" else None,
            }
        )
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
        "out": str(out),
        "ref_dir": str(ref_dir) if refs else "",
        "real_dir": str(real_dir) if reals else "",
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
    out: str | Path, reference: str | Path | None = None, reference_real: str | Path | None = None
) -> str:
    from markupsafe import Markup

    ctx = build_context(out, reference, reference_real)
    for s in ctx["systems"]:
        s["report_html"] = Markup(s["report_html"])  # produced by markdown-it with raw HTML disabled
    return _env().get_template("index.html").render(**ctx)


def write_report(
    out: str | Path, reference: str | Path | None = None, reference_real: str | Path | None = None
) -> Path:
    """Write ``<out>/index.html`` and return its path; :class:`ReportError` (one line) when ``out`` is not a
    folder of runs or a reference folder given does not exist. ``reference``/``reference_real``: the quick and
    real reference folders (defaults: :func:`default_reference_dir`, :func:`default_real_reference_dir`)."""
    if out is None or str(out).strip() == "":
        raise ReportError("--out must name a folder of runs, got an empty string")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ReportError(f"{out} is a file, not a folder of runs")
    if not out.is_dir():
        raise ReportError(f"no such folder: {out} (run `iclr25 run SLUG --out {out}` first)")
    if not any(out.glob("*/claims.json")):
        raise ReportError(
            f"no runs in {out} (no {out}/<slug>/claims.json); run `iclr25 run SLUG --out {out}` first"
        )
    target = out / "index.html"
    if target.is_dir():
        raise ReportError(f"{target} is a folder; cannot write the report there")
    return atomic_write_text(target, render_report(out, reference, reference_real))
