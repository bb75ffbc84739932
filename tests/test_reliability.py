"""Reliability of the shared run path, as a stranger would try it: a fuzzer over the CLI, damaged files,
kills in the middle of writes, hostile text in the report, NaN end to end. Each defect of issue #15 has a
regression test here (or in tests/common) that failed before the fix."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import iclr25
from iclr25 import registry
from iclr25.common.claims import validate_claims_document
from iclr25.common.io import atomic_write_json, read_json
from iclr25.common.results import aggregate, values
from iclr25.errors import RunWarning
from iclr25.harness import cli, configs, runs
from iclr25.harness.artefacts import write_run
from iclr25.harness.cli import main
from iclr25.harness.rundir import RunDir

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "common"))
import toy_experiment as toy  # noqa: E402

TOY = registry.System(
    "toy", "A toy experiment", "Test Author", "0000.00000", "ours beats base", runner="toy_experiment"
)


@pytest.fixture
def toy_registered():
    with registry.temporarily(TOY):
        yield


def _err(capsys) -> str:
    return capsys.readouterr().err


# -- NaN ------------------------------------------------------------------------------------------------


def test_nan_metric_survives_the_round_trip_and_makes_the_claim_undefined(
    tmp_path, monkeypatch, toy_registered
):
    """Regression (dst_robustness quick): a NaN seed was stored as null and values() raised on it."""
    monkeypatch.setenv("TOY_NAN", "1")
    doc = iclr25.run("toy", "smoke", tmp_path, seeds=3)
    seed_file = json.loads((tmp_path / "toy" / "seeds" / "seed_1.json").read_text())
    assert seed_file["result"]["ours"]["acc"] == "NaN"
    per_seed = {s: RunDir(tmp_path / "toy", toy.PRESETS["smoke"]).load_seed(s) for s in range(3)}
    v = values(per_seed, "ours/acc")
    assert math.isnan(v[1]) and all(math.isfinite(x) for x in (v[0], v[2]))
    agg = aggregate(per_seed)
    assert math.isnan(agg["ours/acc"]["mean"]) and math.isnan(agg["ours/acc"]["values"][1])
    metrics = read_json(tmp_path / "toy" / "metrics.json")
    assert metrics["aggregate"]["ours/acc"]["mean"] == "NaN"
    gain = next(c for c in doc["claims"] if c["id"] == "gain")
    assert gain["holds"] is False and "1 of 3 method values are NaN" in gain["undefined_reason"]
    validate_claims_document(read_json(tmp_path / "toy" / "claims.json"))
    rerun = iclr25.run("toy", "smoke", tmp_path, seeds=3)  # read back from disk: identical numbers
    assert rerun["claims"] == doc["claims"]
    assert "undefined" in (tmp_path / "toy" / "report.md").read_text()


def test_values_refuses_missing_keys_and_non_numbers_naming_key_and_seed():
    """Regression (issue #34): a missing key, ``true``, ``"abc"`` or ``null`` in a seed's result gave a traceback
    deep in an experiment, or (booleans) silently became 1.0 and flipped a claim."""
    assert (
        values({0: {"a": {"b": 1}}, 1: {"a": {"b": "NaN"}}, 2: {"a": {"b": float("inf")}}}, "a/b")[0] == 1.0
    )
    assert math.isnan(values({1: {"a": "NaN"}}, "a")[0])  # NaN is a number: never dropped
    with pytest.raises(ValueError, match="'b'.*seed 0"):
        values({0: {"a": 1.0}}, "b")
    with pytest.raises(ValueError, match="metric 'a/b' has no 'a' for seed 3"):
        values({0: {"a": {"b": 1.0}}, 3: {}}, "a/b")
    for bad in (True, False, None, "abc", [1.0], {"x": 1.0}):
        with pytest.raises(ValueError, match=r"metric 'a' for seed 1 must be a number"):
            values({0: {"a": 1.0}, 1: {"a": bad}}, "a")


# -- provenance, device, overrides ------------------------------------------------------------------------


def test_claims_json_carries_provenance(tmp_path, toy_registered):
    doc = iclr25.run("toy", "smoke", tmp_path, seeds=1)
    p = doc["provenance"]
    for k in (
        "git_commit",
        "date_utc",
        "wall_s",
        "load_avg_start",
        "load_avg_end",
        "cpu_count",
        "preset",
        "device",
    ):
        assert k in p, k
    assert p["preset"] == "smoke" and p["cpu_count"] == os.cpu_count() and p["date_utc"].endswith("Z")
    assert p["git_commit"] == "unknown" or len(p["git_commit"]) >= 40
    assert read_json(tmp_path / "toy" / "config.json")["run_id"] == p["run_id"]


def test_device_defaults_to_the_presets(monkeypatch):
    """Regression: --device defaulted to cpu and silently overrode device="cuda" of full presets."""
    cfg, _ = configs.effective_config(toy, "smoke")
    assert cfg.device == "cpu"
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(configs.UsageError, match="preset asks for 'cuda'"):
        configs.effective_config(toy, "full")
    assert configs.effective_config(toy, "full", device="auto")[0].device == "cpu"
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert configs.effective_config(toy, "full")[0].device == "cuda"
    assert configs.effective_config(toy, "full", device="auto")[0].device == "cuda"


def test_set_overrides_are_validated_recorded_and_hashed(tmp_path, capsys, toy_registered):
    out = str(tmp_path)
    assert main(["run", "toy", "--preset", "smoke", "--seeds", "1", "--out", out, "--set", "nosuch=1"]) == 2
    err = _err(capsys)
    assert "unknown config field 'nosuch'" in err and "n (int)" in err and "seeds (int)" in err
    assert main(["run", "toy", "--preset", "smoke", "--out", out, "--set", "n=many"]) == 2
    assert "--set n: expected int, got 'many'" in _err(capsys)
    assert main(["run", "toy", "--preset", "smoke", "--out", out, "--set", "n=1"]) == 2
    assert "n must be >= 2" in _err(capsys)
    assert main(["run", "toy", "--preset", "smoke", "--seeds", "1", "--out", out, "--set", "n=77"]) == 0
    cfg = read_json(tmp_path / "toy" / "config.json")
    prov = read_json(tmp_path / "toy" / "claims.json")["provenance"]
    # recorded once (the provenance), shown with the config hash in report.md
    assert cfg["n"] == 77 and "overrides" not in cfg and prov["overrides"] == {"n": 77}
    assert prov["config_hash"] == cfg["config_hash"]
    report = (tmp_path / "toy" / "report.md").read_text()
    assert f"Overrides of the preset: n=77 · config hash `{cfg['config_hash']}`" in report
    capsys.readouterr()
    assert main(["config", "toy", "--preset", "smoke", "--set", "n=77"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["config"]["n"] == 77 and printed["config_hash"] == cfg["config_hash"]
    assert main(["config", "toy", "--preset", "smoke"]) == 0
    assert json.loads(capsys.readouterr().out)["config_hash"] != cfg["config_hash"]


def test_run_builds_the_config_once_and_both_reports_show_the_overrides(
    tmp_path, capsys, monkeypatch, toy_registered
):
    calls = []
    real = configs.effective_config

    def counting(*a, **k):
        calls.append(k.get("overrides"))
        return real(*a, **k)

    monkeypatch.setattr(configs, "effective_config", counting)
    out = tmp_path / "runs"
    assert main(["run", "toy", "--preset", "smoke", "--seeds", "1", "--out", str(out), "--set", "n=77"]) == 0
    assert len(calls) == 1, f"the effective config was built {len(calls)} times"
    h = read_json(out / "toy" / "config.json")["config_hash"]
    assert f"n=77 · config hash `{h}`" in (out / "toy" / "report.md").read_text()
    capsys.readouterr()
    assert main(["report", "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "overrides: n=77" in page and f"config {h}" in page


def test_misspelt_slug_gets_a_suggestion(capsys):
    assert main(["run", "cascadng_kv", "--preset", "smoke"]) == 2
    assert "did you mean 'cascading_kv'" in _err(capsys)


def test_run_all_survives_a_broken_system(tmp_path, capsys, monkeypatch):
    (tmp_path / "broken_experiment_mod.py").write_text("raise RuntimeError('half-written module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = registry.System("broken", "Broken", "A", "0000.00001", "c", runner="broken_experiment_mod")
    with registry.temporarily(TOY, broken):
        monkeypatch.setattr(cli, "_runnable", lambda: ["toy", "broken"])
        assert main(["run", "all", "--preset", "smoke", "--seeds", "1", "--out", str(tmp_path / "o")]) == 1
    err = _err(capsys)
    assert "broken: FAILED to start: RuntimeError: half-written module" in err and "Traceback" not in err
    assert (tmp_path / "o" / "toy" / "claims.json").is_file()


# -- bounds ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--seeds", "1000000000"], "kept in memory"),  # regression: exhausted memory
        (["--seed", str(2**64)], "32-bit seeds"),  # regression: crashed inside an experiment
        (["--seeds", "3", "--seed", str(2**32 - 2)], "32-bit seeds"),
        (["--out", ""], "--out must name a folder"),  # regression: wrote into the cwd
    ],
)
def test_bounds_are_enforced_with_the_reason(argv, needle, tmp_path, capsys, toy_registered, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "toy", "--preset", "smoke", *argv]) == 2
    err = _err(capsys)
    assert needle in err and "Traceback" not in err
    assert not (tmp_path / "toy").exists()


def test_library_bounds(tmp_path, toy_registered):
    with pytest.raises(ValueError, match=r"seeds must be an int in \[1, 1000\]"):
        iclr25.run("toy", "smoke", tmp_path, seeds=10**9)
    with pytest.raises(ValueError, match="2\\*\\*32"):
        iclr25.run("toy", "smoke", tmp_path, seed=2**64)


# -- filesystem errors: one line, non-zero exit -----------------------------------------------------------


def _file(p: Path) -> str:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("x")
    return str(p)


@pytest.mark.parametrize(
    "setup",
    [
        lambda t: _file(t / "afile"),  # --out is a file
        lambda t: (_file(t / "o" / "toy"), str(t / "o"))[1],  # OUT/<slug> is a file
        lambda t: (_file(t / "o" / "toy" / "seeds"), str(t / "o"))[1],  # OUT/<slug>/seeds is a file
        lambda t: str(Path(_file(t / "afile")) / "sub"),  # a parent is a file
        lambda t: "/proc/iclr25-cannot-write-here",  # cannot be created, even by root
    ],
)
def test_unusable_out_is_one_line_and_exit_1(setup, tmp_path, capsys, toy_registered):
    out = setup(tmp_path)
    assert main(["run", "toy", "--preset", "smoke", "--seeds", "1", "--out", out]) == 1
    err = _err(capsys)
    assert err.startswith("iclr25: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_report_errors_are_one_line(tmp_path, capsys):
    f = _file(tmp_path / "afile")
    for argv in (
        ["report", "--out", f],
        ["report", "--out", str(tmp_path / "nope")],
        ["report", "--out", ""],
    ):
        assert main(argv) == 1
        err = _err(capsys)
        assert err.startswith("iclr25: error: ") and err.count("\n") == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only folders")
def test_unwritable_out(tmp_path, capsys, toy_registered):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["run", "toy", "--preset", "smoke", "--seeds", "1", "--out", str(ro)]) == 1
        assert "iclr25: error:" in _err(capsys)
    finally:
        ro.chmod(0o700)


# -- damaged seed files -----------------------------------------------------------------------------------

DAMAGED = {
    "empty list": lambda f, other: f.write_text("[]"),
    "null": lambda f, other: f.write_text("null"),
    "missing keys": lambda f, other: f.write_text('{"seed": 0}'),
    "result not an object": lambda f, other: f.write_text('{"config_hash": "x", "seed": 0, "result": 3}'),
    "not utf-8": lambda f, other: f.write_bytes(b"\xff\xfe\x00garbage"),
    "truncated": lambda f, other: f.write_text('{"config_hash": "'),
    "a folder": lambda f, other: f.mkdir(),
    "copy of another seed": lambda f, other: f.write_bytes(other.read_bytes()),
    "seed as string": lambda f, other: f.write_text(other.read_text().replace('"seed": 1', '"seed": "0"')),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_seed_file_is_moved_aside_and_recomputed(case, tmp_path):
    """Regression: these crashed the run or were silently reused."""
    cfg = toy.PRESETS["smoke"]
    rd = RunDir(tmp_path, cfg)
    good = rd.map_seeds(lambda s: toy.one_seed(cfg, s), [0, 1])
    f, other = rd.seed_file(0), rd.seed_file(1)
    if f.is_dir():
        f.rmdir()
    else:
        f.unlink()
    DAMAGED[case](f, other)
    with pytest.warns(RunWarning, match="recomputing that seed"):
        again = RunDir(tmp_path, cfg).map_seeds(lambda s: toy.one_seed(cfg, s), [0, 1])
    assert again == good
    assert len(list((tmp_path / "seeds" / "rejected").iterdir())) == 1
    assert read_json(f)["seed"] == 0


def test_seed_file_of_another_config_is_recomputed_silently(tmp_path, recwarn):
    rd = RunDir(tmp_path, toy.PRESETS["smoke"])
    rd.save_seed(0, {"x": 1.0})
    assert RunDir(tmp_path, toy.PRESETS["quick"]).load_seed(0) is None
    assert not [w for w in recwarn if issubclass(w.category, RunWarning)]


def test_stale_tmp_files_of_dead_writers_are_removed(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    (tmp_path / "seeds").mkdir()
    stale = tmp_path / "seeds" / f".seed_0.json.pid{pid}.abc.tmp"
    stale.write_text("{")
    live = tmp_path / f".claims.json.pid{os.getpid()}.abc.tmp"
    live.write_text("{")
    stage = tmp_path / f".write.pid{pid}.xyz.tmp"
    stage.mkdir()
    RunDir(tmp_path, toy.PRESETS["smoke"])
    assert not stale.exists() and not stage.exists() and live.exists()


# -- write_run as one unit; kills ------------------------------------------------------------------------


def _result(tag: str):
    from iclr25.common.claims import make_claim
    from iclr25.harness.rundir import RunResult

    return RunResult(
        seeds=[0],
        metrics={"tag": tag},
        claims=[make_claim("c", tag, "m", [1.0], 0.0)],
        slug="toy",
        preset="smoke",
        report_md=f"## {tag}\n" + "x" * 200_000,
    )


def test_failure_midway_leaves_no_mixed_run(tmp_path, monkeypatch):
    """Regression: a failure midway left config.json of one run beside claims.json of another."""
    write_run(_result("A"), toy.Config(n=10), tmp_path)
    real = os.replace
    calls = {"n": 0}

    def flaky(src, dst):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError):
        write_run(_result("B"), toy.Config(n=20), tmp_path)
    monkeypatch.setattr(os, "replace", real)
    assert not (tmp_path / "claims.json").exists()  # no claims.json = no finished run shown beside a mix
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".write")]
    write_run(_result("C"), toy.Config(n=30), tmp_path)
    assert read_json(tmp_path / "config.json")["n"] == 30


def test_unserialisable_result_leaves_the_old_run_untouched(tmp_path):
    write_run(_result("A"), toy.Config(n=10), tmp_path)
    before = {
        n: (tmp_path / n).read_bytes() for n in ("config.json", "metrics.json", "claims.json", "report.md")
    }
    bad = _result("B")
    bad.metrics = {"x": object()}
    with pytest.raises(TypeError):
        write_run(bad, toy.Config(n=20), tmp_path)
    assert {n: (tmp_path / n).read_bytes() for n in before} == before


KILL_SCRIPT = """
import sys, itertools
sys.path.insert(0, {tests!r}); sys.path.insert(0, {here!r})
import toy_experiment as toy
from test_reliability import _result
from iclr25.harness.artefacts import write_run
print("ready", flush=True)
for i in itertools.count():
    write_run(_result("A" if i % 2 else "B"), toy.Config(n=10 + i % 2), {out!r})
"""


@pytest.mark.parametrize("delay", [0.05, 0.13, 0.29])
def test_kill_during_write_leaves_a_consistent_run(tmp_path, delay):
    out = tmp_path / "run"
    script = KILL_SCRIPT.format(tests=str(HERE / "common"), here=str(HERE), out=str(out))
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(delay + 0.3)
    p.send_signal(signal.SIGKILL)
    p.wait()
    if (out / "claims.json").exists():
        doc = read_json(out / "claims.json")
        validate_claims_document(doc)
        cfg = read_json(out / "config.json")
        assert cfg["run_id"] == doc["provenance"]["run_id"]
        assert doc["claims"][0]["statement"] == ("A" if cfg["n"] == 11 else "B")
    RunDir(out)  # reopening cleans what the killed writer left
    assert not [p.name for p in out.rglob("*.tmp")]


def test_forked_workers_die_with_a_killed_parent(tmp_path):
    """Regression: seed workers outlived a killed parent and kept writing."""
    script = (
        "import sys; sys.path.insert(0, %r); import toy_experiment as t;"
        "from iclr25.harness.workers import set_jobs; set_jobs(2);"
        "from iclr25.harness.runs import run_experiment; run_experiment(t, 'toy', 'smoke', %r, seeds=4)"
    ) % (str(HERE / "common"), str(tmp_path))
    env = {**os.environ, "TOY_SLEEP": "3"}
    p = subprocess.Popen([sys.executable, "-c", script], env=env)
    children: set[int] = set()
    deadline = time.time() + 60
    while time.time() < deadline and len(children) < 2:
        try:
            children |= {int(x) for x in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()}
        except OSError:
            pass
        time.sleep(0.05)
    assert len(children) >= 2, "workers did not start"
    time.sleep(0.3)
    p.send_signal(signal.SIGKILL)
    p.wait()
    time.sleep(4)  # longer than a worker's sleep: a surviving worker would have written its seed by now
    for c in children:
        try:
            state = Path(f"/proc/{c}/status").read_text()
            assert "State:\tZ" in state, f"worker {c} still running"
        except FileNotFoundError:
            pass
    assert not list((tmp_path / "toy" / "seeds").glob("seed_*.json"))


# -- hostile text in the report ----------------------------------------------------------------------------

XSS = "<script>alert(1)</script>"


def test_report_escapes_untrusted_text(tmp_path, monkeypatch):
    """Regression: a <script> in a note, report.md or a slug in claims.json ran live in index.html."""
    from iclr25.report import render_report

    monkeypatch.setenv("TOY_NOTE", XSS + " | a note")
    monkeypatch.setenv(
        "TOY_REPORT",
        f"## Toy\n{XSS}\n<img src=x onerror=alert(2)>\n[click](javascript:alert(3))\n"
        "![x](http://example.com/track.png)\n\n| a | b |\n|---|---|\n| <b>1</b> | 2 |\n",
    )
    run_experiment = runs.run_experiment
    run_experiment(toy, "toy", "smoke", tmp_path, seeds=1)
    doc = read_json(tmp_path / "toy" / "claims.json")
    doc["invalid_reason"] = XSS
    doc["valid"] = False
    doc["provenance"]["git_commit"] = XSS
    atomic_write_json(tmp_path / "toy" / "claims.json", doc)
    bad = json.loads(json.dumps(doc))
    bad["slug"] = XSS
    (tmp_path / "evil").mkdir()
    atomic_write_json(tmp_path / "evil" / "claims.json", bad)
    weird = tmp_path / "<script>x"
    weird.mkdir()
    atomic_write_json(weird / "claims.json", {**doc, "slug": "<script>x"})
    (tmp_path / ".no_refs").mkdir()  # an empty reference folder (a missing one is an error)
    html = render_report(tmp_path, tmp_path / ".no_refs")
    low = html.lower()
    assert "<script" not in low
    assert "onerror=alert" not in low.replace("&lt;img src=x onerror=alert(2)&gt;", "")
    assert 'href="javascript:' not in low and "href='javascript:" not in low
    assert "http://example.com" not in low  # no remote image is ever loaded
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;1&lt;/b&gt;" in html  # raw HTML in a Markdown table cell is shown as text


# -- the fuzzer ----------------------------------------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SAFE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\\x00"), max_size=10
).filter(lambda s: s not in (".", "..") and not s.startswith("."))
VALUES = st.one_of(
    st.sampled_from(
        [
            "smoke",
            "quick",
            "full",
            "huge",
            "",
            "1",
            "2",
            "0",
            "-1",
            "3",
            "1001",
            "1000000000",
            str(2**64),
            str(2**32 - 1),
            "x",
            "1e3",
            " 2",
            "cpu",
            "auto",
            "cuda",
            "cuda:0",
            "tpu",
            "n=5",
            "n=x",
            "nosuch=1",
            "n",
            "=",
            "seeds=2",
            "device=cuda",
            "threads=0",
            "n=1",
            "afile",
            "o1",
            "o2/deeper",
            "toy",
            "all",
            "pdss",
            "<script>",
            "--",
            "-",
            "1_0",
        ]
    ),  # fmt: skip
    SAFE_TEXT,
)
FLAGS = st.sampled_from(
    ["--preset", "--seeds", "--seed", "--out", "--device", "--jobs", "--set", "--quiet", "--reference", "-h",
     "--help", "--bogus"]
)  # fmt: skip
COMMANDS = st.sampled_from(["run", "report", "list", "config", "frobnicate", ""])
SLUGS = st.one_of(st.sampled_from(["toy", "all", "pds", "pdss", "fosp", "mofflow", "", "TOY"]), SAFE_TEXT)
ARGV = st.one_of(
    st.lists(st.one_of(COMMANDS, FLAGS, VALUES), max_size=8),
    st.tuples(COMMANDS, SLUGS, st.lists(st.one_of(FLAGS, VALUES), max_size=8)).map(
        lambda t: [t[0], t[1], *t[2]]
    ),
    st.tuples(st.just("run"), SLUGS, st.lists(st.tuples(FLAGS, VALUES), max_size=5)).map(
        lambda t: ["run", t[1], "--preset", "smoke", "--jobs", "1"] + [x for pair in t[2] for x in pair]
    ),
)


@pytest.mark.slow
def test_cli_fuzz_never_tracebacks(tmp_path_factory, monkeypatch):
    """>= 500 random argument lists: every one ends in a clean exit status, never a traceback. Experiments
    are replaced by the toy one (instant), seeds run in-process."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("fuzz")
    monkeypatch.chdir(root)
    (root / "afile").write_text("x")
    monkeypatch.setattr(configs, "experiment_module", lambda slug: registry.runnable(slug) and toy)
    monkeypatch.setattr(RunDir, "_compute_pool", lambda self, *a, **k: None)  # seeds run in-process
    monkeypatch.setattr("iclr25.common.device.set_cpu_threads", lambda n: None)
    seen = {"n": 0, "codes": {}}

    @settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(ARGV)
    def one(argv):
        seen["n"] += 1
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = main(list(argv))
            except SystemExit as e:  # argparse: --help (0) and usage errors (2)
                code = e.code
        assert code in (0, 1, 2), (argv, code, err.getvalue())
        assert "Traceback" not in err.getvalue(), (argv, err.getvalue())
        if code == 1:
            assert (
                err.getvalue().strip().startswith(("iclr25: error:", "toy: FAILED"))
                or "FAILED" in err.getvalue()
            ), (
                argv,
                err.getvalue(),
            )
        seen["codes"][code] = seen["codes"].get(code, 0) + 1

    with registry.temporarily(TOY):
        one()
    assert seen["n"] >= 500
    assert seen["codes"].get(0) and seen["codes"].get(2)  # the fuzzer reached both successes and usage errors
