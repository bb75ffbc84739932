"""The transformers lower bound: an older release is refused at import, naming the installed version."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import transformers

from iclr25.cascading_kv import _compat
from iclr25.registry import DependencyVersionError

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.parametrize("version", ["5.23.0", "5.17.0", "4.57.6", "5.23.9.dev0"])
def test_older_transformers_is_refused_naming_the_installed_version(monkeypatch, version):
    # the module object ``check_transformers`` will import now (another test may have re-imported transformers, so
    # this file's own ``transformers`` binding can be a stale module object)
    monkeypatch.setattr(importlib.import_module("transformers"), "__version__", version)
    with pytest.raises(DependencyVersionError) as e:
        _compat.check_transformers()
    msg = str(e.value)
    assert (
        f"transformers {version} is installed" in msg and f"transformers>={_compat.MIN_TRANSFORMERS}" in msg
    )


@pytest.mark.parametrize("version", ["5.24.0", "5.24", "5.30.1", "6.0.0rc1"])
def test_the_bound_and_newer_releases_pass(version):
    assert _compat.check_transformers(version) == version


def test_installed_version_satisfies_the_bound_and_pyproject_declares_it():
    assert _compat.check_transformers() == transformers.__version__
    py = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if py.is_file():
        assert f'"transformers>={_compat.MIN_TRANSFORMERS.removesuffix(".0")}"' in py.read_text()


def test_import_of_the_package_is_refused_with_one_clear_error(tmp_path):
    """Importing iclr25.cascading_kv under a faked older version raises at import, before the cache is built;
    the CLI turns it into one line (exit 1)."""
    code = (
        "import sys, transformers; transformers.__version__ = '5.17.0'\n"
        "from iclr25.harness.cli import main\n"
        "sys.exit(main(['run', 'cascading_kv', '--preset', 'smoke', '--out', sys.argv[1]]))\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC, "ICLR25_QUIET": "1"}
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stderr[-2000:]
    err = [line for line in r.stderr.splitlines() if line.startswith("iclr25: error:")]
    assert len(err) == 1 and "transformers 5.17.0 is installed" in err[0] and "Traceback" not in r.stderr
