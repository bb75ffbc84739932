"""Installs per field: every extra declares what its systems import, and a missing extra is one clear line.

The extras table is pyproject.toml's ``[project.optional-dependencies]`` (read from the checkout; from the
installed distribution's ``importlib.metadata`` requirements when there is no checkout). Each system's third-party
imports are found by an AST scan of ``src/iclr25/<slug>/**`` (imports inside ``try: ... except ImportError`` are
optional and not required) and must be provided by a distribution declared in the core dependencies or in the
system's extra (``registry.System.extra``): a direct declaration, not a transitive one that a later release of
some other package may drop (``pip install 'iclr25[audio]'`` could not import birdset: pandas was transitive).
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest

from iclr25 import registry
from iclr25.harness.cli import main

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "iclr25"
SHARED = ("common", "report")  # imported by every system's run path: covered by the core dependencies
NOT_EXTRAS = ("dev", "all")


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _req_name(req: str) -> str:
    return _canon(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req).group(1))


def declared() -> tuple[set[str], dict[str, list[str]]]:
    """(core distribution names, extra -> its requirement strings)."""
    py = ROOT / "pyproject.toml"
    if py.is_file() and sys.version_info >= (3, 11):
        import tomllib

        project = tomllib.loads(py.read_text())["project"]
        return {_req_name(r) for r in project["dependencies"]}, project["optional-dependencies"]
    from packaging.requirements import Requirement

    core, extras = set(), {}
    for raw in md.requires("iclr25") or []:
        r = Requirement(raw)
        m = re.search(r'extra\s*==\s*"([^"]+)"', str(r.marker or ""))
        if m:
            extras.setdefault(m.group(1), []).append(raw.split(";")[0])
        else:
            core.add(_canon(r.name))
    return core, extras


def _catches_import_error(node: ast.Try) -> bool:
    for h in node.handlers:
        if h.type is None:
            return True
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        names = {getattr(t, "id", getattr(t, "attr", "")) for t in types}
        if names & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}:
            return True
    return False


def third_party_imports(folder: Path) -> dict[str, str]:
    """Top-level third-party modules imported outside ``try/except ImportError`` → one place that imports it."""
    found: dict[str, str] = {}
    std = set(sys.stdlib_module_names)

    def visit(node: ast.AST, guarded: bool, where: str) -> None:
        if isinstance(node, ast.Try):
            inner = guarded or _catches_import_error(node)
            for b in node.body:
                visit(b, inner, where)
            for b in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(b, guarded, where)
            return
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        for n in names:
            top = n.split(".")[0]
            if top not in std and top != "iclr25" and not guarded:
                found.setdefault(top, f"{where}:{node.lineno}")
        for c in ast.iter_child_nodes(node):
            visit(c, guarded, where)

    for f in sorted(folder.rglob("*.py")):
        visit(ast.parse(f.read_text(), str(f)), False, str(f.relative_to(PKG)))
    return found


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return md.packages_distributions()


def providers(module: str) -> set[str]:
    """The installed distributions that provide the top-level ``module``."""
    return {_canon(d) for d in _distributions().get(module, [])}


def test_extras_table_matches_pyproject():
    _, extras = declared()
    field_extras = set(extras) - set(NOT_EXTRAS)
    assert set(registry.EXTRAS) == field_extras
    everything = {e.strip() for e in re.search(r"\[(.*)\]", extras["all"][0]).group(1).split(",")}
    # [safety] (Safety-Gymnasium) is the one extra left out of [all]: its pinned pygame does not build on 3.11
    assert everything == field_extras - {"safety"}, "[all] must include every field extra (cluster included)"
    assert any(_req_name(r) == "submitit" for r in extras["cluster"])
    for s in registry.SYSTEMS:
        assert s.extra == "" or s.extra in field_extras, (s.slug, s.extra)
    for extra, modules in registry.EXTRAS.items():
        names = {_req_name(r) for r in extras[extra]}
        for m in modules:
            have = providers(m)
            if extra == "safety" and not have:
                continue  # Safety-Gymnasium does not install on 3.11 (pygame); fosp refuses its full preset then
            assert have, f"module {m!r} of [{extra}] is not installed here, cannot check it"
            assert have & names, (
                f"registry.EXTRAS[{extra!r}] lists {m!r} ({have}) but [{extra}] declares {names}"
            )


@pytest.mark.parametrize("slug", [s.slug for s in registry.SYSTEMS])
def test_every_third_party_import_of_a_system_is_declared(slug):
    core, extras = declared()
    system = registry.get(slug)
    allowed = core | {_req_name(r) for r in extras.get(system.extra, [])}
    imports = third_party_imports(PKG / slug)
    for shared in SHARED:
        imports.update({m: w for m, w in third_party_imports(PKG / shared).items() if m not in imports})
    missing = {}
    for module, where in sorted(imports.items()):
        have = providers(module)
        if not have or not have & allowed:
            missing[module] = (where, sorted(have) or "not installed")
    extra = f"core + [{system.extra}]" if system.extra else "the core dependencies"
    assert not missing, f"{slug} imports modules that {extra} do(es) not declare: {missing}"


def test_the_shared_code_needs_only_the_core_dependencies():
    core, _ = declared()
    for shared in SHARED:
        for module, where in third_party_imports(PKG / shared).items():
            assert providers(module) & core, f"{where} imports {module!r}, not a core dependency"


# -- a missing extra: one line, exit 1; `iclr25 list` says what it needs -----------------------------------------


@pytest.fixture
def no_gymnasium(monkeypatch):
    """Make ``gymnasium`` (the [rl] extra) unimportable, as Python itself treats a ``None`` in sys.modules."""
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    for name in [n for n in sys.modules if n.startswith(("iclr25.fosp", "iclr25.ohio"))]:
        monkeypatch.delitem(sys.modules, name)


def test_run_with_a_missing_extra_prints_one_line_naming_it(no_gymnasium, tmp_path, capsys):
    assert main(["run", "fosp", "--preset", "smoke", "--out", str(tmp_path)]) == 1
    cap = capsys.readouterr()
    assert (
        cap.err
        == "iclr25: error: fosp needs the [rl] extra (no module 'gymnasium'): pip install 'iclr25[rl]'\n"
    )
    assert "Traceback" not in cap.out + cap.err and not any(tmp_path.iterdir())
    assert main(["config", "ohio"]) == 1
    assert "pip install 'iclr25[rl]'" in capsys.readouterr().err


def test_list_shows_needs_extra_instead_of_ready(no_gymnasium, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert rows["fosp"].split()[1:3] == ["needs", "[rl]"] and rows["ohio"].split()[1:3] == ["needs", "[rl]"]
    assert rows["cascading_kv"].split()[1] == "ready"
    assert "pip install 'iclr25[rl]'" in out
    assert registry.get("fosp").missing_modules == ("gymnasium",)


def test_a_missing_extra_is_refused_before_the_experiment_is_imported(no_gymnasium):
    """The check is find_spec on the extra's top-level modules: nothing heavy is imported to find out."""
    fosp = registry.get("fosp")
    with pytest.raises(registry.MissingExtraError, match=r"pip install 'iclr25\[rl\]'"):
        fosp.experiment()
    assert "iclr25.fosp.experiment" not in sys.modules


def test_an_import_error_met_while_importing_is_reported_as_the_extra(tmp_path, monkeypatch):
    """A module of the extra that find_spec cannot see coming (a dependency of a dependency) is still one line."""
    pkg = tmp_path / "fakepkg_extra"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "experiment.py").write_text("import no_such_module_iclr25_test\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = registry.System("fake_extra", "t", "a", "", "c", runner="fakepkg_extra.experiment", extra="rl")
    with registry.temporarily(fake):
        with pytest.raises(registry.MissingExtraError) as e:
            fake.experiment()
    assert str(e.value) == (
        "fake_extra needs the [rl] extra (no module 'no_such_module_iclr25_test'): pip install 'iclr25[rl]'"
    )


def test_readme_extras_table_matches_the_registry():
    readme = ROOT / "README.md"
    if not readme.is_file():
        pytest.skip("no checkout")
    text = readme.read_text()
    table = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\|\s*(`\[(\w+)\]`|\*\(core\)\*)\s*\|[^|]*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(2) or ""] = set(re.findall(r"`(\w+)`", m.group(3).split("(", 1)[0]))
    _, extras = declared()
    assert set(rows) == {""} | (set(extras) - set(NOT_EXTRAS))
    for extra, slugs in rows.items():
        assert slugs == {s.slug for s in registry.SYSTEMS if s.extra == extra}, extra
