import sys
from pathlib import Path

import pytest

from iclr25 import registry
from iclr25.cli import main, run_experiment
from iclr25.common.screenshot import find_chromium, screenshot

sys.path.insert(0, str(Path(__file__).parent))
import toy_experiment as toy  # noqa: E402


def test_report_without_runs_lists_19_systems(tmp_path):
    assert main(["report", "--out", str(tmp_path)]) == 0
    html = (tmp_path / "index.html").read_text()
    assert html.count("<tr><td>") == 19  # one status row per system
    assert "No runs yet" in html
    for s in registry.SYSTEMS:
        assert s.slug in html


def test_report_shows_claims_and_embeds_figures(tmp_path):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    assert main(["report", "--out", str(tmp_path)]) == 0
    html = (tmp_path / "index.html").read_text()
    assert "Claims scoreboard — 1/2 hold" in html
    assert "<code>gain</code>" in html and "<code>too_good</code>" in html
    assert "data:image/png;base64," in html  # self-contained
    assert 'src="figures/' not in html and "src='figures/" not in html


@pytest.mark.skipif(
    find_chromium() is None, reason="Debian chromium is not installed (make screenshot installs none)"
)
def test_report_renders_in_headless_chromium(tmp_path):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    main(["report", "--out", str(tmp_path)])
    png = screenshot(tmp_path / "index.html", tmp_path / "index.png", width=1000, height=800)
    from PIL import Image

    img = Image.open(png).convert("L")
    assert img.size == (1000, 800)
    lo, hi = img.getextrema()
    assert hi - lo > 100  # something was drawn: not a blank page
