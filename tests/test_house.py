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
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import iclr25

PKG = Path(iclr25.__file__).resolve().parent
RUN_PATH = {"experiment", "real", "report", "config"}
HOUSE = (
    "birdset",
    "budgeted_cl",
    "certainty_calibration",
    "dst_robustness",
    "freevs",
    "hgm",
    "improver",
    "ohio",
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
