"""The HTML report: validated documents, recomputed verdicts, escaping, references beside fresh runs."""

import json
import re
import sys
from pathlib import Path

import pytest

from iclr25 import registry
from iclr25.common.claims import make_claim
from iclr25.common.io import atomic_write_json, read_json
from iclr25.harness.cli import main
from iclr25.harness.runs import run_experiment
from iclr25.report import render_report
from iclr25.report.screenshot import find_chromium, screenshot

sys.path.insert(0, str(Path(__file__).parent))
import toy_experiment as toy  # noqa: E402


@pytest.fixture
def no_refs(tmp_path):
    d = tmp_path / "no_refs"
    d.mkdir()
    return str(d)


def test_report_on_a_folder_without_runs_is_an_error(tmp_path, capsys):
    """Regression: it used to write an empty page silently."""
    assert main(["report", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no runs in" in err and "Traceback" not in err
    assert not (tmp_path / "index.html").exists()


def test_report_lists_19_systems_and_embeds_figures(tmp_path, no_refs):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    assert main(["report", "--out", str(tmp_path), "--reference", no_refs]) == 0
    html = (tmp_path / "index.html").read_text()
    for s in registry.SYSTEMS:
        assert s.slug in html
    assert (
        "toy-size verdicts 1 holds · 1 fails · 0 not decided (of 2 claims)" in html
    )  # smoke only: counted as plumbing checks
    assert "<code>gain</code>" in html and "<code>too_good</code>" in html
    assert "data:image/png;base64," in html  # self-contained
    assert 'src="figures/' not in html
    assert "plumbing check" in html  # smoke runs are labelled as such


def test_headline_excludes_invalid_and_unreadable_runs(tmp_path, no_refs):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    run_experiment(toy, "toy2", "smoke", tmp_path, seeds=2)
    doc = read_json(tmp_path / "toy2" / "claims.json")
    doc["preset"] = "quick"  # a quick run that misses its precondition is invalid (a smoke run: see below)
    doc["valid"], doc["invalid_reason"] = False, "baseline did not train"
    atomic_write_json(tmp_path / "toy2" / "claims.json", doc)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "claims.json").write_bytes(b"\xff\xfe not utf-8")
    html = render_report(tmp_path, no_refs)
    assert "1 holds · 1 fails · 0 not decided (of 2 claims)" in html  # toy only
    assert "baseline did not train" in html and "marked invalid" in html
    assert "not UTF-8" in html


def test_tampered_verdict_is_shown_as_invalid_document(tmp_path, no_refs):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    doc = read_json(tmp_path / "toy" / "claims.json")
    doc["claims"][1]["holds"] = True  # too_good does not hold by its numbers
    atomic_write_json(tmp_path / "toy" / "claims.json", doc)
    html = render_report(tmp_path, no_refs)
    assert "invalid claims document" in html and "disagrees with the measured numbers" in html
    assert "no valid runs" in html


def test_zero_over_zero_is_not_infinity_and_pipes_do_not_break_tables(tmp_path, no_refs):
    from iclr25.harness.render import claims_markdown

    c = make_claim("r", "a | b", "m", [0.0], 1.0, ">=", baseline=[0.0], compare="ratio")
    md = claims_markdown([c])
    row = md.splitlines()[2]
    assert "a \\| b" in row and row.count(" | ") == 7  # 8 cells, the statement's pipe is escaped
    assert "∞" not in md and "NaN" in md and "zero baseline" in md


def test_reference_results_are_shown_beside_fresh_runs(tmp_path):
    run_experiment(toy, "toy", "smoke", tmp_path / "runs", seeds=2)
    ref = tmp_path / "ref" / "toy"
    ref.mkdir(parents=True)
    doc = read_json(tmp_path / "runs" / "toy" / "claims.json")
    doc["preset"] = "quick"
    (ref / "claims.json").write_text(json.dumps(doc))
    html = render_report(tmp_path / "runs", tmp_path / "ref")
    assert "committed results" in html and 'class="tag ref"' in html
    body = html.split('id="sys-toy"', 1)[1]
    assert "reference" in body and "this run" in body


@pytest.mark.skipif(find_chromium() is None, reason="Debian chromium is not installed")
@pytest.mark.parametrize("width", [1400, 600])
def test_report_renders_without_page_level_sideways_scroll(tmp_path, width):
    """Rendered in headless Chromium: something is drawn, and at 600 px only the table containers scroll."""
    import subprocess

    from iclr25.report.screenshot import find_chromium as chromium

    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    main(["report", "--out", str(tmp_path)])
    png = screenshot(tmp_path / "index.html", tmp_path / "index.png", width=width, height=800)
    from PIL import Image

    img = Image.open(png).convert("L")
    assert img.size == (width, 800)
    lo, hi = img.getextrema()
    assert hi - lo > 100
    probe = tmp_path / "probe.html"
    text = (tmp_path / "index.html").read_text()
    js = "<script>document.title='SW='+document.documentElement.scrollWidth+' CW='+document.documentElement.clientWidth</script>"
    probe.write_text(text.replace("</body>", js + "</body>"))
    r = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},800", "--dump-dom",
         probe.as_uri()],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    m = re.search(r"SW=(\d+) CW=(\d+)", r.stdout)
    assert m, r.stdout[-500:]
    assert int(m.group(1)) <= int(m.group(2)), m.group(0)


def test_main_figure_sits_beside_its_systems_rows(tmp_path, no_refs):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    html = render_report(tmp_path, no_refs)
    section = html.split('id="sys-toy"', 1)[1].split("</section>", 1)[0]
    grid = section.split('class="sys-grid', 1)[1].split("<details>", 1)[0]
    assert "<table>" in grid and '<figure><img src="data:image/png;base64,' in grid


def test_one_number_format_everywhere(tmp_path, no_refs):
    """The same value prints the same way in the CLI lines, report.md and the HTML."""
    from iclr25.common.claims import validate_claims_document
    from iclr25.harness.render import claims_text

    doc = run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    claims = validate_claims_document(doc)
    shown = claims_text(claims)[0].split(": ", 2)[-1].split(" ")[0]  # the compared number
    assert shown in (tmp_path / "toy" / "report.md").read_text()
    assert shown in render_report(tmp_path, no_refs)


def _ref_folder(tmp_path: Path, tmp_runs: Path) -> Path:
    """A reference folder holding one valid quick-preset document (1/2 claims hold)."""
    ref = tmp_path / "ref" / "toy"
    ref.mkdir(parents=True)
    doc = read_json(tmp_runs / "toy" / "claims.json")
    doc["preset"] = "quick"
    (ref / "claims.json").write_text(json.dumps(doc))
    return tmp_path / "ref"


def test_smoke_precondition_is_expected_not_invalid(tmp_path, monkeypatch, capsys):
    """A smoke run whose toy model misses the precondition is labelled as expected (CLI, report.md, HTML);
    the same document from a quick run stays invalid."""
    runs = tmp_path / "runs"
    run_experiment(toy, "toy", "smoke", runs, seeds=2)
    ref = _ref_folder(tmp_path, runs)
    monkeypatch.setenv("TOY_INVALID", "the toy model knows 0.5 of the facts < 0.98")
    doc = run_experiment(toy, "toy2", "smoke", runs, seeds=2)
    assert doc["valid"] is False  # the document keeps the truth; only its label changes
    from iclr25.harness.cli import _print_summary
    from iclr25.harness.render import SMOKE_PRECONDITION

    _print_summary("toy2", doc, 1.0, runs)
    line = capsys.readouterr().out.splitlines()[0]
    assert SMOKE_PRECONDITION in line and "INVALID" not in line and "0.98" in line
    md = (runs / "toy2" / "report.md").read_text()
    assert SMOKE_PRECONDITION in md and "INVALID" not in md
    html = render_report(runs, ref)
    # no validity label anywhere (a claim's own text may say when a run would be invalid, e.g. a precondition
    # check of a committed reference: "below it the run is invalid")
    low = html.lower()
    assert "run invalid" not in low and "marked invalid" not in low
    assert SMOKE_PRECONDITION in html
    # the headline's first line says these are plumbing checks and gives the reference's measured number first
    body = html.split("<body>", 1)[1]
    lead = body.split("</h1>", 1)[1].split("</p>", 1)[0]
    assert (
        "plumbing checks" in lead
        and "1 holds · 1 fails · 0 not decided (of 2 claims)" in lead
        and "reference" in lead
    )
    cards = body.split('class="headline"', 1)[1]
    assert cards.index('tag ref">reference') < cards.index('tag fresh">this run')
    # the same toy2 document from a quick run: invalid exactly as before
    d2 = read_json(runs / "toy2" / "claims.json")
    d2["preset"] = "quick"
    atomic_write_json(runs / "toy2" / "claims.json", d2)
    html = render_report(runs, ref)
    head = html.split('<h2 id="scoreboard">', 1)[0]  # the headline (report.md below keeps the smoke label)
    assert "(run invalid)" in head and SMOKE_PRECONDITION not in head
    assert "marked invalid" in html
    from iclr25.harness.render import validity_label

    assert validity_label(d2) == "RUN INVALID"


# -- file safety (issue #34) -------------------------------------------------------------------------------


def test_figure_and_report_md_symlinks_out_of_the_run_folder_are_not_embedded(tmp_path, no_refs):
    """Regression: a figures/ link to /etc/passwd ended up base64 in index.html."""
    import base64

    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    d = tmp_path / "toy"
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG top secret bytes")
    (d / "figures" / "leak.png").symlink_to(secret)
    (d / "figures" / "passwd.png").symlink_to("/etc/passwd")
    (d / "figures" / "zero.png").symlink_to("/dev/zero")
    (d / "figures" / "same.png").symlink_to(d / "figures" / "acc.png")  # inside the run folder: fine
    html = render_report(tmp_path, no_refs)
    assert base64.b64encode(secret.read_bytes()).decode() not in html
    assert base64.b64encode(Path("/etc/passwd").read_bytes()[:30]).decode()[:40] not in html
    acc = base64.b64encode((d / "figures" / "acc.png").read_bytes()).decode()
    assert html.count(acc) >= 2  # acc.png and its in-folder link
    (d / "report.md").unlink()
    (d / "report.md").symlink_to("/etc/passwd")
    html = render_report(tmp_path, no_refs)
    assert "root:" not in html and "report.md is refused" in html and "outside" in html


@pytest.mark.parametrize("target", ["/dev/zero", "outside", "deep"])
def test_unsafe_claims_json_is_an_invalid_document_not_a_crash(target, tmp_path, no_refs):
    """Regression: a claims.json linked to /dev/zero exhausted memory; deeply nested JSON gave RecursionError."""
    run_experiment(toy, "toy", "smoke", tmp_path / "runs", seeds=2)
    run_experiment(toy, "toy2", "smoke", tmp_path / "runs", seeds=2)
    f = tmp_path / "runs" / "toy2" / "claims.json"
    if target == "deep":
        f.write_text('{"slug": "toy2", "claims": ' + "[" * 200_000 + "]" * 200_000 + "}")
    else:
        other = tmp_path / "elsewhere.json"
        other.write_bytes(f.read_bytes())
        f.unlink()
        f.symlink_to("/dev/zero" if target == "/dev/zero" else other)
    html = render_report(tmp_path / "runs", no_refs)
    assert (
        "claims.json is refused" in html
        and "toy-size verdicts 1 holds · 1 fails · 0 not decided (of 2 claims)" in html
    )
    assert ("nested" if target == "deep" else "outside") in html


def test_nested_parts_deeper_than_the_limit_are_refused(tmp_path, no_refs):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    doc = read_json(tmp_path / "toy" / "claims.json")
    c = doc["claims"][0]
    for _ in range(40):  # parts inside parts: 40 * 2 JSON levels
        c = {**c, "parts": [c]}
    doc["claims"][0] = c
    (tmp_path / "toy" / "claims.json").write_text(json.dumps(doc))
    assert "nested deeper than 64 levels" in render_report(tmp_path, no_refs)


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_a_bad_reference_is_an_error_not_ignored(kind, tmp_path, capsys):
    """Regression: `--reference /no/such/dir` silently showed no reference."""
    from iclr25.report import ReportError

    run_experiment(toy, "toy", "smoke", tmp_path / "runs", seeds=2)
    bad = {
        "missing": str(tmp_path / "nope"),
        "file": str(tmp_path / "runs" / "toy" / "claims.json"),
        "empty": "",
    }[kind]
    with pytest.raises(ReportError, match="no such reference folder|empty string"):
        render_report(tmp_path / "runs", bad)
    assert main(["report", "--out", str(tmp_path / "runs"), "--reference", bad]) == 1
    err = capsys.readouterr().err
    assert err.startswith("iclr25: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "runs" / "index.html").exists()
