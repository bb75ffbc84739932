"""The house rules of a system package (CONTRIBUTING, "The house"), checked on the code's imports, not on names.

- ``<slug>/config.py`` holds ``Config`` and ``PRESETS`` (and the arm / claim constants); ``experiment.py`` re-exports
  them (the registry reads them there) as the very same objects.
- ``report.py`` (presentation) imports nothing from ``experiment.py`` or ``real.py``.
- Library modules (every module but ``experiment``, ``real``, ``report``, ``config`` and ``__init__``) import none of
  those run-path modules, so a user's ``from iclr25.<slug>.<module> import …`` never pulls in the reproduction.
- No import circle inside a system package — function-level (deferred) imports count too: deferring an import
  hides a circle from Python, not from a reader.

``HOUSE`` lists the systems moved to this shape so far (issue #48 moves them one by one, after each system's other
open changes have landed); every system in it is held to every rule.

The run path is one package, ``iclr25.harness`` (its rules hold for every module, every system):

- no module under ``iclr25/common/`` imports ``iclr25.harness``, the HTML report, ``assets/`` or a system — not
  even deferred — and the old run-path modules (``iclr25/cli.py``, ``runs.py``, ``launch.py``, ``verify.py``,
  ``common/provenance.py``, ``common/render.py``) are gone, no shim left behind;
- no import circle among the harness modules (function-level imports count);
- a system's library modules and its ``__init__`` import no harness module.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

import iclr25

PKG = Path(iclr25.__file__).resolve().parent
# tuning.py: a reproduction tool (held-out tuning of the arms of a preset; fosp), run path like experiment.py
RUN_PATH = {"experiment", "real", "report", "config", "tuning"}
HOUSE = (
    "birdset",
    "budgeted_cl",
    "cascading_kv",
    "certainty_calibration",
    "dst_robustness",
    "fosp",
    "freevs",
    "hgm",
    "improver",
    "law",
    "mofflow",
    "ohio",
    "pds",
    "pfes_gim",
    "quantum_peft",
    "scope_faithfulness",
    "tool_planner",
    "topic_unlearning",
    "transformer2",
)


def sibling_imports(path: Path, slug: str, siblings: set[str]) -> set[str]:
    """The modules of package ``iclr25.<slug>`` that ``path`` imports, at any depth (function-level too)."""
    out: set[str] = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.ImportFrom):
            if n.level == 1:
                out |= {n.module.split(".")[0]} if n.module else {a.name for a in n.names}
            elif n.level == 0 and n.module == f"iclr25.{slug}":
                out |= {a.name for a in n.names}
            elif n.level == 0 and n.module and n.module.startswith(f"iclr25.{slug}."):
                out.add(n.module.split(".")[2])
        elif isinstance(n, ast.Import):
            out |= {a.name.split(".")[2] for a in n.names if a.name.startswith(f"iclr25.{slug}.")}
    return out & siblings - {path.stem}


def import_graph(slug: str) -> dict[str, set[str]]:
    mods = {p.stem: p for p in (PKG / slug).glob("*.py")}
    return {m: sibling_imports(p, slug, set(mods)) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary circle, each once (rotated to start at its smallest module)."""
    found: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> None:
        for nxt in sorted(graph[path[-1]]):
            if nxt == path[0]:
                i = path.index(min(path))
                found.add(tuple(path[i:] + path[:i]))
            elif nxt not in path and nxt > path[0]:
                walk(path + [nxt])

    for start in sorted(graph):
        walk([start])
    return [list(c) for c in sorted(found)]


def test_cycles_finds_a_deferred_circle():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_sibling_imports_sees_function_level_and_absolute_imports(tmp_path):
    f = tmp_path / "report.py"
    f.write_text(
        "from . import config\nimport iclr25.x.model\n"
        "def f():\n    from .experiment import Config\n    from iclr25.x.real import y\n"
    )
    assert sibling_imports(f, "x", {"config", "model", "experiment", "real", "report"}) == {
        "config",
        "model",
        "experiment",
        "real",
    }


@pytest.mark.parametrize("slug", HOUSE)
def test_config_module_holds_the_presets(slug):
    config = importlib.import_module(f"iclr25.{slug}.config")
    experiment = importlib.import_module(f"iclr25.{slug}.experiment")
    assert experiment.PRESETS is config.PRESETS, (
        "experiment.py must re-export config.PRESETS, not build its own"
    )
    assert experiment.Config is config.Config
    assert {"smoke", "quick", "full"} <= set(config.PRESETS)
    assert all(isinstance(c, config.Config) for c in config.PRESETS.values())


@pytest.mark.parametrize("slug", HOUSE)
def test_report_is_presentation(slug):
    bad = import_graph(slug)["report"] & {"experiment", "real"}
    assert not bad, f"{slug}/report.py imports {sorted(bad)}: it may read config.py and library modules only"


@pytest.mark.parametrize("slug", HOUSE)
def test_library_modules_do_not_import_the_run_path(slug):
    g = import_graph(slug)
    bad = {m: sorted(g[m] & RUN_PATH) for m in g if m not in RUN_PATH | {"__init__"} and g[m] & RUN_PATH}
    assert not bad, f"{slug}: library modules import the run path: {bad}"


@pytest.mark.parametrize("slug", HOUSE)
def test_no_import_circles(slug):
    assert cycles(import_graph(slug)) == [], f"{slug}: import circles {cycles(import_graph(slug))}"


# -- the run path (iclr25.harness) and common/ ----------------------------------------------------------------

HARNESS = "iclr25.harness"
OLD_RUN_PATH = ("iclr25.cli", "iclr25.runs", "iclr25.launch", "iclr25.verify", "iclr25.report")
OLD_RUN_PATH += ("iclr25.common.provenance", "iclr25.common.render")


def module_name(path: Path) -> str:
    rel = path.resolve().relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def absolute_imports(path: Path) -> set[str]:
    """Every module ``path`` imports, as absolute dotted names, at any depth (function-level and
    ``TYPE_CHECKING`` imports too); ``from pkg import name`` counts as both ``pkg`` and ``pkg.name``."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: set[str] = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            base = package[: len(package) - n.level + 1] if n.level else []
            mod = ".".join(base + ([n.module] if n.module else []))
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in n.names}
    return out


def reaches(imported: set[str], targets: tuple[str, ...]) -> set[str]:
    return {m for m in imported for t in targets if m == t or m.startswith(t + ".")}


def test_absolute_imports_resolve_relative_and_deferred_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "iclr25" / "common"
    pkg.mkdir(parents=True)
    f = pkg / "x.py"
    f.write_text("from .io import a\nfrom .. import harness\ndef f():\n    from ..harness.runs import run\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "iclr25")
    got = absolute_imports(f)
    assert {"iclr25.common.io", "iclr25.harness", "iclr25.harness.runs"} <= got
    assert reaches(got, (HARNESS,)) == {"iclr25.harness", "iclr25.harness.runs", "iclr25.harness.runs.run"}


@pytest.mark.parametrize("path", sorted((PKG / "common").glob("*.py")), ids=lambda p: p.stem)
def test_common_imports_no_run_path(path):
    """common/ holds what the systems share; it never imports the run path (not even deferred), a system or
    assets/."""
    from iclr25 import registry

    systems = tuple(f"iclr25.{s}" for s in registry.SLUGS)
    bad = reaches(absolute_imports(path), (HARNESS, *OLD_RUN_PATH, "iclr25.assets", *systems))
    assert not bad, f"common/{path.name} imports {sorted(bad)}: common/ may import only common/ and libraries"


def test_the_old_run_path_modules_are_gone():
    """The run path lives in iclr25/harness/ only: no module left behind at its old place (nor a shim)."""
    left = [m for m in ("cli", "runs", "launch", "verify") if (PKG / f"{m}.py").exists()]
    left += [f"common/{m}" for m in ("provenance", "render") if (PKG / "common" / f"{m}.py").exists()]
    assert not left, f"run-path modules outside iclr25/harness/: {left}"


def harness_graph() -> dict[str, set[str]]:
    mods = {p.stem: p for p in (PKG / "harness").glob("*.py") if p.stem != "__init__"}
    return {
        m: {x.split(".")[2] for x in reaches(absolute_imports(p), (HARNESS,)) if x.count(".") >= 2}
        & set(mods) - {m}
        for m, p in mods.items()
    }


def test_harness_has_no_import_circles():
    g = harness_graph()
    assert {"cli", "runs", "configs", "launch", "rundir", "workers", "verify"} <= set(g)
    assert cycles(g) == [], f"import circles among the harness modules: {cycles(g)}"


def test_harness_init_imports_nothing():
    """``import iclr25.harness.<module>`` pulls in only what that module needs."""
    tree = ast.parse((PKG / "harness" / "__init__.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _library_modules() -> list[Path]:
    from iclr25 import registry

    return sorted(
        p for s in registry.SLUGS for p in (PKG / s).glob("*.py") if p.stem not in RUN_PATH | {"__init__"}
    ) + sorted(PKG / s / "__init__.py" for s in registry.SLUGS)


@pytest.mark.parametrize("path", _library_modules(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_system_library_modules_import_no_harness(path):
    """A system's library modules (and its public ``__init__``) import nothing of the run path: only its
    experiment.py / real.py take ``RunDir`` and ``RunResult`` from iclr25.harness.rundir."""
    bad = reaches(absolute_imports(path), (HARNESS, *OLD_RUN_PATH))
    assert not bad, f"{path.parent.name}/{path.name} imports the run path: {sorted(bad)}"
