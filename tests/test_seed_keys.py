"""Every experiment declares the per-seed keys its claims read (issue #34), and a seed file whose declared key
was damaged — with a result_sha256 recomputed so that only the required-key check can catch it — is moved to
``seeds/rejected/`` and recomputed, giving the same claims."""

from __future__ import annotations

import ast
import importlib
import json
import warnings
from pathlib import Path

import pytest

from iclr25.common.io import sha256_json
from iclr25.errors import RunWarning
from iclr25.harness.runs import run_experiment
from iclr25.registry import SYSTEMS

OTHERS: tuple[str, ...] = ()  # systems whose declaration another open change makes (none now)
SLUGS = sorted(s.slug for s in SYSTEMS if s.slug not in OTHERS)


def _declarations(slug: str) -> list[ast.expr]:
    """The ``required=`` arguments passed to ``RunDir(...)`` or ``.map_seeds(...)`` in the experiment module."""
    tree = ast.parse((Path(__file__).parents[1] / "src" / "iclr25" / slug / "experiment.py").read_text())
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in ("RunDir", "map_seeds"):
            out += [k.value for k in node.keywords if k.arg == "required"]
    return out


def test_every_system_is_covered():
    assert len(SLUGS) >= 17, SLUGS


@pytest.mark.parametrize("slug", SLUGS)
def test_experiment_declares_required_keys(slug):
    decl = _declarations(slug)
    assert decl, f"{slug}: no RunDir(..., required=...) or map_seeds(..., required=...) in experiment.py"
    for d in decl:  # not an empty literal: a declaration that declares nothing is no declaration
        assert not (isinstance(d, (ast.Tuple, ast.List)) and not d.elts), f"{slug}: empty required"
        assert not (isinstance(d, ast.Constant) and not d.value), f"{slug}: empty required"
        if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "required_keys":
            # required=required_keys(cfg): the declaration is that function; it declares keys for every preset
            exp = importlib.import_module(f"iclr25.{slug}.experiment")
            for name, cfg in exp.PRESETS.items():
                keys = exp.required_keys(cfg)
                assert keys and all(isinstance(k, str) and k for k in keys), f"{slug} {name}: empty required"


def _damage(seed_file: Path, key: str, value) -> None:
    """Replace (``value`` given) or delete (``value is ...``) ``key`` in the stored result and recompute its hash."""
    d = json.loads(seed_file.read_text())
    *head, last = key.split("/")
    node = d["result"]
    for p in head:
        node = node[p]
    assert last in node, f"{key} not in {seed_file}"
    if value is ...:
        del node[last]
    else:
        node[last] = value
    d["result_sha256"] = sha256_json(d["result"])
    seed_file.write_text(json.dumps(d))


def _claims(doc: dict, skip: tuple[str, ...] = ()) -> list[dict]:
    return [c for c in doc["claims"] if c["id"] not in skip]


def _check_rerun(slug: str, tmp_path: Path, damages: list[tuple[str, str, object]], skip=(), strip=()):
    exp = next(s for s in SYSTEMS if s.slug == slug).experiment()
    first = run_experiment(exp, slug, "smoke", tmp_path)
    seeds = tmp_path / slug / "seeds"
    for name, key, value in damages:
        _damage(seeds / name, key, value)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        again = run_experiment(exp, slug, "smoke", tmp_path)
    msgs = [str(w.message) for w in rec if issubclass(w.category, RunWarning)]
    for name, key, _ in damages:
        assert any(name in m and repr(key) in m for m in msgs), (name, key, msgs)
        assert list((seeds / "rejected").glob(f"{name}.*")), f"{name} was not moved to seeds/rejected/"
        fresh = json.loads((seeds / name).read_text())["result"]  # recomputed: the key is back, a number
        node = fresh
        for p in key.split("/"):
            node = node[p]
        assert isinstance(node, (int, float)) and not isinstance(node, bool)

    def clean(cs):  # drop per-claim fields that quote run timings (they differ from run to run)
        if not strip:
            return cs
        out = []
        for c in cs:
            c = {k: v for k, v in c.items() if k not in strip}
            if c.get("parts"):
                c["parts"] = clean(c["parts"])
            out.append(c)
        return out

    assert clean(_claims(again, skip)) == clean(_claims(first, skip))


def test_certainty_calibration_damaged_key_is_recomputed(tmp_path):
    _check_rerun("certainty_calibration", tmp_path, [("seed_1.json", "A/ot/drop", "0.9")])


def test_tool_planner_damaged_keys_are_recomputed(tmp_path):
    # one per-seed result and the tuning part (declared by its own map_seeds call)
    _check_rerun(
        "tool_planner",
        tmp_path,
        [("seed_0.json", "methods/tool_planner/pass", None), ("seed_0_tuning.json", "sim/react/best", ...)],
    )


@pytest.mark.slow
def test_mofflow_damaged_key_is_recomputed(tmp_path):
    # the speed claim and the budget notes quote measured times, which a recomputed seed does not repeat
    _check_rerun(
        "mofflow",
        tmp_path,
        [("seed_0.json", "atom/match_rate_M16", True)],
        skip=("speed",),
        strip=("note",),
    )
