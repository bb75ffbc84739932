"""``iclr25 report`` on odd paths and many runs (issue #50): a non-UTF-8 or (under ``LC_ALL=C PYTHONUTF8=0``) a
unicode path is shown escaped instead of crashing the write, and figures beyond a size budget are linked, not
inlined into one giant page."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iclr25.harness.runs import run_experiment
from iclr25.report import INLINE_BUDGET, build_context, display_path, render_report, safe_text, write_report

sys.path.insert(0, str(Path(__file__).parent))
import toy_experiment as toy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_refs(tmp_path):
    d = tmp_path / "no_refs"
    d.mkdir()
    return str(d)  # an empty folder: neither the quick nor the real references (passed as both)


def test_display_path_and_safe_text_always_encode():
    raw = os.fsdecode(b"/tmp/runs-\xff\xfe")
    assert display_path(raw) == "/tmp/runs-\\xff\\xfe"
    assert display_path(os.fsdecode("/tmp/é".encode())) == "/tmp/é"
    s = safe_text("a " + raw + " \ud800 b")  # a surrogate no file name produces (a JSON "\ud800" escape)
    s.encode("utf-8")
    assert "runs-\\xff\\xfe" in s and "\\ud800" in s


@pytest.mark.skipif(sys.platform != "linux", reason="byte file names: Linux")
def test_report_on_a_non_utf8_path_writes_the_page(tmp_path, no_refs):
    """Regression: UnicodeEncodeError writing "Fresh runs read from <path>"."""
    out = Path(os.fsdecode(os.fsencode(tmp_path) + b"/runs-\xff\xfe"))
    run_experiment(toy, "toy", "smoke", out, seeds=2)
    page = write_report(out, no_refs)
    text = page.read_bytes().decode("utf-8")  # valid UTF-8 throughout
    assert "runs-\\xff\\xfe" in text and "<code>gain</code>" in text


@pytest.mark.skipif(sys.platform != "linux", reason="byte file names: Linux")
def test_report_on_a_unicode_path_under_the_c_locale(tmp_path, no_refs):
    """Regression: with LC_ALL=C PYTHONUTF8=0 Python decodes file names as ASCII (é arrives as two surrogates)."""
    out = tmp_path / "runs-é"
    run_experiment(toy, "toy", "smoke", out, seeds=2)
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "ICLR25_QUIET": "1"}
    env.pop("LANG", None)
    r = subprocess.run(
        [sys.executable, "-m", "iclr25.harness.cli", "report", "--out", os.fsencode(out), "--reference", no_refs],
        env=env, capture_output=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in r.stderr
    text = (out / "index.html").read_bytes().decode("utf-8")
    assert "runs-é" in text


def _many_runs(root: Path, n: int, fig_bytes: int) -> Path:
    """``n`` copies of one toy run, each with a main figure and one extra figure of ``fig_bytes`` bytes."""
    runs = root / "runs"
    run_experiment(toy, "toy", "smoke", runs, seeds=2)
    for i in range(n):
        d = runs / f"toy{i:03d}"
        shutil.copytree(runs / "toy", d)
        doc = (d / "claims.json").read_text().replace('"slug": "toy"', f'"slug": "toy{i:03d}"')
        (d / "claims.json").write_text(doc)
        (d / "figures" / "acc.png").write_bytes(b"\x89PNG" + bytes([i % 251]) * fig_bytes)
        (d / "figures" / "extra.png").write_bytes(b"\x89PNG" + bytes([(i + 7) % 251]) * fig_bytes)
    shutil.rmtree(runs / "toy")
    return runs


def test_figures_beyond_the_budget_are_linked_main_figures_first(tmp_path, no_refs):
    runs = _many_runs(tmp_path, 6, 30_000)  # 12 figures of ~40 000 base64 characters each
    budget = 5 * 40_100  # room for 5 figures: the main figures of the first 5 systems
    ctx = build_context(runs, no_refs, no_refs, inline_budget=budget)
    systems = {s["name"]: s for s in ctx["systems"]}
    mains = [systems[f"toy{i:03d}"]["main_figure"] for i in range(6)]
    assert [m["inline"] for m in mains] == [True] * 5 + [False]  # every main figure before any other figure
    extras = [f for s in ctx["systems"] for f in s["figures"]]
    assert extras and not any(f["inline"] for f in extras)
    assert ctx["figures_linked"] == 7
    assert mains[5]["uri"] == "toy005/figures/acc.png"  # relative to index.html, which sits in runs/
    assert (runs / mains[5]["uri"]).is_file()
    page = write_report(runs, no_refs, no_refs, inline_budget=budget)
    html = page.read_text()
    assert html.count("data:image/png;base64,") == 5
    assert 'href="toy005/figures/acc.png"' in html and 'href="toy000/figures/extra.png"' in html
    assert "7 figures linked rather than embedded" in html
    assert len(html) < budget + 200_000  # the page is the budget plus text, not every figure


def test_the_default_budget_keeps_a_report_over_many_runs_small(tmp_path, no_refs):
    """The issue's case at small scale: 40 runs × 2 figures × 300 kB would be a 32 MB page inlined."""
    assert INLINE_BUDGET == 8 << 20
    runs = _many_runs(tmp_path, 40, 300_000)
    html = render_report(runs, no_refs, no_refs)
    assert len(html) < INLINE_BUDGET + 1_000_000
    assert "linked rather than embedded" in html
    assert html.count("data:image/png;base64,") == 20  # 20 × ~400 000 characters fit in 8 MiB


def test_a_linked_figure_is_still_confined_to_its_run_folder(tmp_path, no_refs):
    runs = _many_runs(tmp_path, 1, 1000)
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG secret")
    (runs / "toy000" / "figures" / "leak.png").symlink_to(secret)
    html = render_report(runs, no_refs, no_refs, inline_budget=0)  # everything linked
    assert "leak.png" not in html and "secret" not in html
    assert 'href="toy000/figures/acc.png"' in html
