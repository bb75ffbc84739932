"""``iclr25 report``: one self-contained ``index.html`` (images embedded) for every run in a folder.

It shows the claims scoreboard (system, statement, method and baseline mean ± std, threshold, verdict,
runtime), the status of all 19 systems, and each system's own report with its figures.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import markdown

from .. import registry
from .claims import Claim
from .fmt import fmt_num, fmt_seconds, fmt_stat_json
from .io import atomic_write_text, read_json

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1400px;padding:0 1rem;color:#222}
.scroll{overflow-x:auto}
h1{margin-bottom:.2rem} h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem;width:100%}
th,td{border:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f6} tr.ok td.v{color:#0a7a2f;font-weight:700} tr.no td.v{color:#b00020;font-weight:700}
tr.invalid td{background:#fff4e5} tr.sub td{font-size:.85rem;border-top:none} .muted{color:#777} img{max-width:100%;border:1px solid #eee;margin:.5rem 0}
code{background:#f4f4f6;padding:0 .2rem;border-radius:3px} details{margin:.6rem 0}
.pill{display:inline-block;padding:0 .5rem;border-radius:1rem;font-size:.8rem}
.impl{background:#e3f5e8;color:#0a7a2f} .plan{background:#eee;color:#666}
"""


def _img_data_uri(path: Path) -> str:
    mime = {"png": "image/png", "svg": "image/svg+xml", "jpg": "image/jpeg", "jpeg": "image/jpeg"}.get(
        path.suffix.lower().lstrip("."), "application/octet-stream"
    )
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


def _embed_images(html_text: str, base: Path) -> str:
    def sub(m: re.Match) -> str:
        src = m.group(2)
        p = base / src
        if src.startswith("data:") or not p.is_file():
            return m.group(0)
        return f'{m.group(1)}"{_img_data_uri(p)}"'

    return re.sub(r'(<img[^>]*?src=)"([^"]+)"', sub, html_text)


def _fmt(stat: dict | None) -> str:
    return fmt_stat_json(stat)


def _claim_cells(c: dict) -> str:
    measured = c.get("measured")
    every = ", every seed" if c.get("reduce") == "all" else ""
    shown = fmt_num(measured)
    return (
        f"<td>{_fmt(c.get('method'))}</td><td>{_fmt(c.get('baseline'))}</td>"
        f"<td>{html.escape(str(c.get('compare', 'value')))}{every}: {shown}</td>"
        f"<td>{html.escape(c['direction'])} {_num(c['threshold'])}</td>"
    )


def _num(x) -> str:
    return fmt_num(x)


def _demote_headings(body: str, by: int = 2) -> str:
    """Embedded reports sit under the page's own h2: shift their h1..h4 down by ``by`` levels."""
    return re.sub(r"<(/?)h([1-4])>", lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + by)}>", body)


def collect_runs(out: str | Path) -> list[dict]:
    """Every ``<out>/<slug>/claims.json`` (known slugs first, in registry order)."""
    out = Path(out)
    runs = []
    order = {s: i for i, s in enumerate(registry.SLUGS)}
    for f in sorted(out.glob("*/claims.json"), key=lambda p: (order.get(p.parent.name, 999), p.parent.name)):
        try:
            doc = read_json(f)
        except Exception:  # a broken file must not break the report; it is listed as unreadable
            doc = {"slug": f.parent.name, "claims": [], "unreadable": True}
        doc["_dir"] = f.parent
        runs.append(doc)
    return runs


def render_report(out: str | Path) -> str:
    out = Path(out)
    runs = collect_runs(out)
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>iclr25 report</title>"
        f"<style>{CSS}</style></head><body>",
        "<h1>iclr25 — claims report</h1>",
        f"<p class='muted'>Runs read from <code>{html.escape(str(out))}</code>. Every verdict is computed from "
        "the measured numbers (mean ± std over seeds) in each run's <code>claims.json</code>.</p>",
    ]
    # -- scoreboard
    n_claims = sum(len(r.get("claims", [])) for r in runs)
    n_hold = sum(bool(c.get("holds")) for r in runs for c in r.get("claims", []))
    parts.append(f"<h2 id='scoreboard'>Claims scoreboard — {n_hold}/{n_claims} hold</h2>")
    if not runs:
        parts.append("<p class='muted'>No runs yet: <code>iclr25 run SLUG</code> writes them.</p>")
    else:
        parts.append(
            "<table><tr><th>system</th><th>preset</th><th>claim</th><th>statement</th><th>method</th>"
            "<th>baseline</th><th>compared</th><th>threshold</th><th>verdict</th><th>runtime</th></tr>"
        )
        for r in runs:
            invalid = r.get("valid") is False
            for c in r.get("claims", []):
                ok = Claim.from_json(c).holds if "method" in c else bool(c.get("holds"))
                cls = "invalid" if invalid else ("ok" if ok else "no")
                subs = c.get("parts") or []
                head = _claim_cells(c) if not subs else f"<td colspan='4'>all of {len(subs)} parts</td>"
                parts.append(
                    f"<tr class='{cls}'><td><a href='#sys-{r['slug']}'>{html.escape(r['slug'])}</a></td>"
                    f"<td>{html.escape(str(r.get('preset', '')))}</td><td><code>{html.escape(c['id'])}</code></td>"
                    f"<td>{html.escape(c['statement'])}</td>{head}"
                    f"<td class='v'>{'✓' if ok else '✗'}{' (run invalid)' if invalid else ''}</td>"
                    f"<td>{fmt_seconds(r.get('runtime_s'))}</td></tr>"
                )
                for p in subs:
                    pok = Claim.from_json(p).holds
                    parts.append(
                        f"<tr class='{'ok' if pok else 'no'} sub'><td></td><td></td>"
                        f"<td class='muted'>↳ <code>{html.escape(p['id'])}</code></td>"
                        f"<td class='muted'>{html.escape(p['statement'])}</td>{_claim_cells(p)}"
                        f"<td class='v'>{'✓' if pok else '✗'}</td><td></td></tr>"
                    )
        parts.append("</table></div>")
    # -- status of all systems
    ran = {r["slug"] for r in runs}
    parts.append(
        "<h2 id='systems'>Systems</h2><table><tr><th>#</th><th>slug</th><th>paper</th><th>status</th>"
        "<th>claims held</th></tr>"
    )
    by = {r["slug"]: r for r in runs}
    for i, s in enumerate(registry.SYSTEMS, 1):
        pill = f"<span class='pill {'impl' if s.implemented else 'plan'}'>{s.status}</span>"
        held = "—"
        if s.slug in by:
            cl = by[s.slug].get("claims", [])
            held = f"{sum(bool(c.get('holds')) for c in cl)}/{len(cl)}"
        link = f"<a href='#sys-{s.slug}'>{s.slug}</a>" if s.slug in ran else s.slug
        paper = f"<a href='{s.url}'>{html.escape(s.title)}</a>" if s.url else html.escape(s.title)
        parts.append(
            f"<tr><td>{i}</td><td>{link}</td><td>{paper}<br><span class='muted'>"
            f"{html.escape(s.authors)}</span></td><td>{pill}</td><td>{held}</td></tr>"
        )
    parts.append("</table>")
    # -- each system's report
    for r in runs:
        d: Path = r["_dir"]
        parts.append(f"<h2 id='sys-{r['slug']}'>{html.escape(r['slug'])}</h2>")
        rep = d / "report.md"
        if rep.is_file():
            body = markdown.markdown(rep.read_text(encoding="utf-8"), extensions=["tables", "fenced_code"])
            parts.append(_embed_images(_demote_headings(body), d))
        listed = (
            set(re.findall(r"figures/([^)\s]+)", rep.read_text(encoding="utf-8"))) if rep.is_file() else set()
        )
        extra = [p for p in sorted((d / "figures").glob("*.png")) if p.name not in listed]
        for p in extra:
            parts.append(
                f"<figure><img alt='{html.escape(p.stem)}' src='{_img_data_uri(p)}'>"
                f"<figcaption class='muted'>{html.escape(p.name)}</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(out: str | Path) -> Path:
    """Write ``<out>/index.html`` and return its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out / "index.html", render_report(out))
