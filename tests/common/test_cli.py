import subprocess
import sys
from pathlib import Path

import pytest

from iclr25 import registry
from iclr25.cli import main


def test_registry_has_all_19_systems():
    assert len(registry.SYSTEMS) == 19 and len(set(registry.SLUGS)) == 19
    for s in registry.SYSTEMS:
        assert s.title and s.authors and s.claim and s.status in registry.STATUSES
        assert s.arxiv.count(".") == 1, s.arxiv


def test_status_follows_the_package():
    """A system is implemented exactly when its package has an experiment module (found without importing)."""
    import pkgutil

    import iclr25

    pkgs = {m.name: m for m in pkgutil.iter_modules(iclr25.__path__) if m.ispkg}
    for s in registry.SYSTEMS:
        has = s.slug in pkgs and any(
            m.name == "experiment" for m in pkgutil.iter_modules([str(Path(iclr25.__path__[0]) / s.slug)])
        )
        assert s.implemented == has, s.slug


def test_list_prints_19_rows(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(slug in out for slug in registry.SLUGS)
    assert "19 systems" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["run", "nosuch"], "runnable: all, pds"),
        (["run", "pds", "--preset", "huge"], "valid: smoke, quick, full"),
        (["run", "pds", "--seeds", "0"], "--seeds must be an integer in [1, 1000]"),
        (["run", "pds", "--seeds", "three"], "--seeds must be an integer in [1, 1000]"),
        (["run", "pds", "--seed", "-1"], "--seed must be an integer in [0, "),
        (["run", "pds", "--device", "tpu"], "device must be one of"),
        (["run", "pds", "--jobs", "0"], "--jobs must be an integer in [1, 512]"),
    ],
)
def test_bad_arguments_exit_2_and_list_valid_values(argv, needle, capsys):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_unknown_command_exits_2():
    r = subprocess.run([sys.executable, "-m", "iclr25", "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_planned_system_is_refused_with_exit_2(capsys):
    planned = [s.slug for s in registry.SYSTEMS if not s.implemented]
    if not planned:
        pytest.skip("every system is implemented")
    assert main(["run", planned[0], "--preset", "smoke"]) == 2
    assert "planned" in capsys.readouterr().err


def test_console_script_nosuch_exits_2():
    r = subprocess.run([sys.executable, "-m", "iclr25", "run", "nosuch"], capture_output=True, text=True)
    assert r.returncode == 2 and "mofflow" in r.stderr
