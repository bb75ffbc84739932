"""The report page (issue #35): overview first, headline counted per preset, each figure embedded once, reference
figures for the reference column, and reference documents found in an installed wheel."""

import base64
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from iclr25.common.io import atomic_write_json, read_json
from iclr25.harness.runs import run_experiment
from iclr25.report import build_context, render_report

sys.path.insert(0, str(Path(__file__).parent))
import toy_experiment as toy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_refs(tmp_path):
    d = tmp_path / "no_refs"
    d.mkdir()
    return str(d)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def test_overview_table_comes_before_the_system_sections(tmp_path, no_refs):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    html = render_report(tmp_path, no_refs)
    body = html.split("<body>", 1)[1]
    assert body.index('<h2 id="systems">') < body.index('<h2 id="scoreboard">') < body.index('id="sys-toy"')
    assert body.index('class="headline"') < body.index('<h2 id="systems">')


def test_headline_counts_per_preset_and_never_adds_smoke_to_quick(tmp_path, no_refs):
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)  # 1/2 hold
    run_experiment(toy, "toy2", "smoke", tmp_path, seeds=2)
    doc = read_json(tmp_path / "toy2" / "claims.json")
    doc["preset"] = "quick"  # a valid quick run: 1/2 hold
    atomic_write_json(tmp_path / "toy2" / "claims.json", doc)
    ctx = build_context(tmp_path, no_refs)
    by = ctx["fresh"]["by_preset"]
    assert list(by) == ["quick", "smoke"]
    assert [(c.holds, c.fails, c.not_decided) for c in by.values()] == [(1, 1, 0), (1, 1, 0)]
    html = render_report(tmp_path, no_refs)
    card = html.split('class="headline"', 1)[1].split('<h2 id="systems">', 1)[0]
    assert "2/4" not in card  # the old headline summed the smoke run's toy claims into the quick run's
    one = "1 holds · 1 fails · 0 not decided (of 2 claims)"
    assert card.index(f'{one} <span class="tag quick">') < card.index(f'{one} <span class="tag smoke">')
    assert "never added" in card


def test_each_figure_is_embedded_once(tmp_path, no_refs):
    """Regression: the main figure sat beside the table and again in the run's report (548 KB for 2 figures)."""
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=2)
    acc = tmp_path / "toy" / "figures" / "acc.png"
    shutil.copy(acc, tmp_path / "toy" / "figures" / "extra.png")  # same bytes, another figure: its own copy
    md = (tmp_path / "toy" / "report.md").read_text()
    assert "](figures/acc.png)" in md
    (tmp_path / "toy" / "report.md").write_text(
        md + "\nAgain: ![acc](figures/acc.png) ![x](./figures/extra.png)\n"
    )
    html = render_report(tmp_path, no_refs)
    assert html.count(_b64(acc)) == 2  # acc.png once + extra.png once
    section = html.split('id="sys-toy"', 1)[1].split("</section>", 1)[0]
    grid = section.split('class="sys-grid', 1)[1].split("<details>", 1)[0]
    assert '<figure><img src="data:image/png;base64,' in grid  # the main figure beside the rows
    assert "[figure figures/acc.png: shown beside the claims table]" in section


def test_reference_figures_are_shown_for_the_reference_column(tmp_path, no_refs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_experiment(toy, "toy", "smoke", tmp_path / "runs", seeds=2)
    ref = tmp_path / "ref" / "toy"
    (ref / "figures").mkdir(parents=True)
    doc = read_json(tmp_path / "runs" / "toy" / "claims.json")
    doc["preset"] = "quick"
    (ref / "claims.json").write_text(json.dumps(doc))
    for name, where in (("main.png", ref), ("second.png", ref / "figures")):
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [1, len(name)])
        fig.savefig(where / name)
        plt.close(fig)
    (ref / "leak.png").symlink_to(tmp_path / "runs" / "toy" / "figures" / "acc.png")  # outside the ref folder
    html = render_report(tmp_path / "runs", tmp_path / "ref")
    section = html.split('id="sys-toy"', 1)[1].split("</section>", 1)[0]
    assert (
        section.count(_b64(ref / "main.png")) == 1
        and section.count(_b64(ref / "figures" / "second.png")) == 1
    )
    assert "reference figures" in section and "figures/second.png (reference)" in section
    assert (
        html.count(_b64(tmp_path / "runs" / "toy" / "figures" / "acc.png")) == 1
    )  # the link is not embedded
    # no fresh run of the system: the reference's figure sits beside the table, labelled as the reference's
    shutil.rmtree(tmp_path / "runs" / "toy")
    run_experiment(toy, "toy2", "smoke", tmp_path / "runs", seeds=2)
    html = render_report(tmp_path / "runs", tmp_path / "ref")
    section = html.split('id="sys-toy"', 1)[1].split("</section>", 1)[0]
    grid = section.split('class="sys-grid', 1)[1].split("<details>", 1)[0]
    assert section.count(_b64(ref / "main.png")) == 1 and "main.png (reference)</figcaption>" in grid


@pytest.mark.slow
def test_wheel_ships_the_reference_documents_and_report_finds_them(tmp_path):
    """Builds the wheel (no network: the installed setuptools), lists its files and runs `iclr25 report` from the
    unpacked wheel, away from the checkout: the reference column is there, and the real reference column from
    results/real (a copy of one quick document relabelled real when the checkout has none yet)."""
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("no checkout to build from")
    committed = sorted(
        p.relative_to(ROOT / "results" / "quick") for p in (ROOT / "results" / "quick").glob("*/claims.json")
    )
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(".git", ".venv", "runs", "build", "*.egg-info", "__pycache__", ".whl"),
    )
    real = src / "results" / "real"
    if not any(real.glob("*/claims.json")):
        (real / committed[0].parent).mkdir(parents=True)
        doc = read_json(ROOT / "results" / "quick" / committed[0])
        doc["preset"] = "real"
        (real / committed[0]).write_text(json.dumps(doc))
    committed_real = sorted(p.relative_to(real) for p in real.glob("*/claims.json"))
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "w"), str(src)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = (tmp_path / "w").glob("iclr25-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    assert {f"iclr25/_reference/{p.as_posix()}" for p in committed} <= names
    quick = ROOT / "results" / "quick"
    pngs = {
        p.relative_to(quick).as_posix() for pat in ("*/*.png", "*/figures/*.png") for p in quick.glob(pat)
    }
    assert {f"iclr25/_reference/{p}" for p in pngs} <= names  # the reference column's figures travel too
    assert {f"iclr25/_reference_real/{p.as_posix()}" for p in committed_real} <= names
    assert "iclr25/report/templates/index.html" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta and 'Requires-Dist: submitit>=1.5; extra == "cluster"' in meta
    site = tmp_path / "site"
    zipfile.ZipFile(whl).extractall(site)
    runs = tmp_path / "runs"
    slug = committed[0].parent.name  # a "fresh" run: a copy of one committed document
    (runs / slug).mkdir(parents=True)
    shutil.copy(ROOT / "results" / "quick" / slug / "claims.json", runs / slug / "claims.json")
    code = (
        "import sys; from iclr25.report import default_reference_dir, collect_runs; "
        "d = default_reference_dir(); print(d); print(len(collect_runs(d, 'reference'))); "
        "from iclr25.report import default_real_reference_dir as real; print(real()); "
        "from iclr25.harness.cli import main; sys.exit(main(['report', '--out', sys.argv[1]]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)  # the unpacked wheel, not the checkout (cwd is elsewhere too)
    r = subprocess.run(
        [sys.executable, "-c", code, str(runs)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr[-3000:]
    where, count, where_real = r.stdout.splitlines()[:3]
    assert Path(where).is_relative_to(site / "iclr25" / "_reference") and int(count) == len(committed)
    assert Path(where_real) == site / "iclr25" / "_reference_real"
    html = (runs / "index.html").read_text()
    assert "committed results" in html and f"from <code>{site / 'iclr25' / '_reference'}</code>" in html
    assert f"real reference results from <code>{site / 'iclr25' / '_reference_real'}</code>" in html
