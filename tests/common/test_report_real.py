"""The report's real preset (issue #47): a second reference column from results/real (real pretrained models and
real data), shown only where there is such a document, and a "Real inputs" block for fresh real runs."""

import json
import shutil
from pathlib import Path

import pytest

from iclr25 import report
from iclr25.report import PRESET_NOTES, ReportError, build_context, render_report

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "results" / "quick"
SLUG = "law"  # a committed quick reference whose system declares real assets (iclr25.assets.for_system)


def _doc(preset: str, slug: str = SLUG) -> dict:
    """A valid claims document: the committed quick reference with its preset set to ``preset``
    (validate_claims_document checks the schema and that every number and verdict follows from the per-seed
    values; the preset is a label it does not tie to anything else)."""
    doc = json.loads((QUICK / slug / "claims.json").read_text())
    doc["preset"] = preset
    if isinstance(doc.get("provenance"), dict):
        doc["provenance"]["preset"] = preset
    return doc


def _write(folder: Path, doc: dict) -> Path:
    (folder / doc["slug"]).mkdir(parents=True, exist_ok=True)
    (folder / doc["slug"] / "claims.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """runs/ (a fresh quick run of SLUG), ref/ (a fake quick reference), real/ (a fake real reference), none/
    (an empty folder); the asset cache is an empty folder, so every cached asset reads as missing."""
    if not (QUICK / SLUG / "claims.json").is_file():
        pytest.skip(f"no committed reference results/quick/{SLUG}")
    monkeypatch.setenv("ICLR25_ASSETS", str(tmp_path / "asset-cache"))
    f = {k: tmp_path / k for k in ("runs", "ref", "real", "none")}
    f["none"].mkdir()
    _write(f["runs"], _doc("quick"))
    _write(f["ref"], _doc("quick"))
    _write(f["real"], _doc("real"))
    return f


def _section(html: str, slug: str = SLUG) -> str:
    return html.split(f'id="sys-{slug}"', 1)[1].split("</section>", 1)[0]


def test_both_reference_columns_are_shown(folders):
    ctx = build_context(folders["runs"], folders["ref"], folders["real"])
    assert ctx["has_real"] and ctx["real_dir"] == str(folders["real"])
    assert ctx["reference_real"]["by_preset"] == {"real": ctx["reference"]["by_preset"]["quick"]}
    row = next(r for r in ctx["status"] if r["system"].slug == SLUG)
    assert row["real"] == row["ref"] != "—"
    html = render_report(folders["runs"], folders["ref"], folders["real"])
    table = html.split('<h2 id="systems">', 1)[1].split('<h2 id="scoreboard">', 1)[0]
    header = table.split("</tr>", 1)[0]
    assert header.index(">reference<") < header.index(">real reference<") < header.index(">this run<")
    section = _section(html)
    assert (
        'real reference</span> <span class="tag real">real</span>' in section
    )  # claims table and provenance
    claims_header = section.split("<table>", 1)[1].split("</tr>", 1)[0]
    assert claims_header.count("<th") == 6  # claim, statement, threshold, reference, real reference, this run
    first_row = section.split("<table>", 1)[1].split("</tr>", 2)[1]
    assert first_row.count('<td class="side">') == 3
    assert f"real reference results from <code>{folders['real']}</code>" in html
    assert "committed results with real pretrained models and real data" in html  # the real reference's card
    assert "Real inputs" not in html  # the fresh run is a quick one


def test_without_real_references_the_page_has_no_real_reference(folders, monkeypatch):
    with_empty = render_report(folders["runs"], folders["ref"], folders["none"])
    assert "real reference" not in with_empty.lower()
    assert 'class="tag real"' not in with_empty and "Real inputs" not in with_empty
    ctx = build_context(folders["runs"], folders["ref"], folders["none"])
    assert not ctx["has_real"] and ctx["real_dir"] == ""
    # the default (no results/real in the checkout, none in the install) gives the same page
    monkeypatch.setattr(report, "default_real_reference_dir", lambda: None)
    assert render_report(folders["runs"], folders["ref"]) == with_empty
    # a real reference for another system only: the column is there, this system's section has none
    other = next(p.parent.name for p in sorted(QUICK.glob("*/claims.json")) if p.parent.name != SLUG)
    _write(folders["none"], _doc("real", other))
    html = render_report(folders["runs"], folders["ref"], folders["none"])
    assert "real reference" in html.split('<h2 id="scoreboard">', 1)[0]
    assert "real reference" not in _section(html)
    assert "real reference" in _section(html, other)


def test_default_real_reference_is_results_real_else_the_wheel_copy(folders, monkeypatch):
    monkeypatch.setattr(
        report, "_repository_results", lambda preset: folders[{"quick": "ref", "real": "real"}[preset]]
    )
    assert report.default_real_reference_dir() == folders["real"]
    assert report.default_reference_dir() == folders["ref"]
    assert build_context(folders["runs"])["real_dir"] == str(folders["real"])
    monkeypatch.setattr(report, "_repository_results", lambda preset: None)
    seen = []
    monkeypatch.setattr(report, "packaged_reference_dir", lambda name="_reference": seen.append(name))
    assert report.default_real_reference_dir() is None and seen == ["_reference_real"]


def test_a_real_reference_of_another_preset_is_an_invalid_document(folders):
    _write(folders["real"], _doc("quick"))
    html = render_report(folders["runs"], folders["ref"], folders["real"])
    assert "Real reference: claims.json cannot be used." in html
    assert "a &#39;quick&#39;-preset run, not a &#39;real&#39;-preset one" in html
    ctx = build_context(folders["runs"], folders["ref"], folders["real"])
    assert ctx["reference_real"]["runs"] == 0 and [v.folder for v in ctx["reference_real"]["excluded"]] == [
        SLUG
    ]


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_a_bad_real_reference_folder_is_an_error(kind, folders):
    bad = {
        "missing": str(folders["none"] / "nope"),
        "file": str(folders["real"] / SLUG / "claims.json"),
        "empty": " ",
    }
    with pytest.raises(ReportError, match="--reference-real"):
        report.write_report(folders["runs"], folders["ref"], bad[kind])
    assert not (folders["runs"] / "index.html").exists()


def test_fresh_real_run_shows_its_real_inputs(folders):
    from iclr25.assets import for_system

    _write(folders["runs"], _doc("real"))
    declared = for_system(SLUG)
    assert declared, f"{SLUG} declares no real assets"
    html = report.write_report(folders["runs"], folders["ref"], folders["none"]).read_text()
    section = _section(html)
    block = section.split("<strong>Real inputs</strong>", 1)[1].split("</table>", 1)[0]
    for a in declared:
        for text in (a.title, a.source, a.licence):
            assert text.replace("'", "&#39;") in block, text
    assert block.count('<span class="no">missing</span>') == len(declared)  # the cache is an empty folder
    assert f"iclr25 assets fetch {declared[0].name}" in block
    assert PRESET_NOTES["real"] in section
    # the headline counts the real run apart from a quick one, real before quick
    _write(folders["runs"], _doc("quick", next(p.parent.name for p in sorted(QUICK.glob("*/claims.json")))))
    ctx = build_context(folders["runs"], folders["ref"], folders["none"])
    assert list(ctx["fresh"]["by_preset"]) == ["real", "quick"]
    card = render_report(folders["runs"], folders["ref"], folders["none"]).split('class="headline"', 1)[1]
    assert card.index('<span class="tag real">real</span>') < card.index(
        '<span class="tag quick">quick</span>'
    )


def test_real_inputs_are_escaped_and_a_failing_status_does_not_stop_the_page(folders, monkeypatch):
    import iclr25.assets as assets

    class Fake:
        name = "evil"
        title = "<script>alert('t')</script>"
        source = "pip: <b>pkg</b>==1"
        licence = "<img src=x onerror=alert(1)>"
        what = "a & b"
        kind = "wheel"

    class Ok(Fake):
        name, title = "fine", "Fine asset"

    def status(a, deep=True):
        assert deep is False  # sizes only: the report does not hash gigabytes
        if a.name == "evil":
            raise OSError("<cache unreadable>")
        return type("S", (), {"state": "present", "detail": ""})()

    monkeypatch.setattr(assets, "for_system", lambda slug: (Fake(), Ok()))
    monkeypatch.setattr(assets, "status", status)
    _write(folders["runs"], _doc("real"))
    html = render_report(folders["runs"], folders["ref"], folders["none"])
    block = _section(html).split("<strong>Real inputs</strong>", 1)[1].split("</table>", 1)[0]
    assert "<script" not in html and "<b>pkg" not in html and "<img src=x" not in html
    assert (
        "&lt;script&gt;alert(&#39;t&#39;)&lt;/script&gt;" in block
        and "&lt;img src=x onerror=alert(1)&gt;" in block
    )
    assert "a &amp; b" in block and "&lt;cache unreadable&gt;" in block
    assert '<span class="na">unknown</span>' in block and '<span class="ok">present</span>' in block
    # a catalogue that cannot be read: the block says so, the page is still written
    monkeypatch.setattr(assets, "for_system", lambda slug: 1 / 0)
    html = render_report(folders["runs"], folders["ref"], folders["none"])
    assert "the asset catalogue cannot be read" in _section(html) and "ZeroDivisionError" in html


def test_real_reference_figures_are_embedded_for_its_column(folders):
    import base64

    src = next((p for p in sorted(QUICK.glob("*/*.png")) + sorted(QUICK.glob("*/figures/*.png"))), None)
    if src is None:
        pytest.skip("no committed reference figure to copy")
    (folders["real"] / SLUG / "figures").mkdir()
    shutil.copy(src, folders["real"] / SLUG / "figures" / "real.png")
    html = render_report(folders["runs"], folders["none"], folders["real"])
    section = _section(html)
    grid = section.split('class="sys-grid', 1)[1].split("</figure>", 1)[0]
    assert (
        base64.b64encode(src.read_bytes()).decode() in grid
    )  # no fresh or quick figure: the real one beside
    assert "real.png (real reference)</figcaption>" in grid
