import subprocess
import sys
from pathlib import Path

import pytest

from iclr25 import registry
from iclr25.harness.cli import main


def test_registry_has_all_19_systems():
    assert len(registry.SYSTEMS) == 19 and len(set(registry.SLUGS)) == 19
    for s in registry.SYSTEMS:
        assert s.title and s.authors and s.claim
        assert s.arxiv.count(".") == 1, s.arxiv


def test_every_registered_system_has_an_experiment_module():
    """Every registered system's package has an experiment module (found without importing)."""
    import pkgutil

    import iclr25

    pkgs = {m.name: m for m in pkgutil.iter_modules(iclr25.__path__) if m.ispkg}
    for s in registry.SYSTEMS:
        has = s.slug in pkgs and any(
            m.name == "experiment" for m in pkgutil.iter_modules([str(Path(iclr25.__path__[0]) / s.slug)])
        )
        assert has, s.slug


def test_list_prints_19_rows(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(slug in out for slug in registry.SLUGS)
    assert "19 systems" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["run", "nosuch"], "runnable: all, pds"),
        (["run", "pds", "--preset", "huge"], "valid: smoke, quick, real, full"),
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


def test_console_script_nosuch_exits_2():
    r = subprocess.run([sys.executable, "-m", "iclr25", "run", "nosuch"], capture_output=True, text=True)
    assert r.returncode == 2 and "mofflow" in r.stderr


def test_version_flag_and_list_header(capsys):
    from importlib.metadata import version

    from iclr25.harness.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"iclr25 {version('iclr25')}"
    assert main(["list"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(f"iclr25 {version('iclr25')}")


def test_run_header_is_printed_before_the_experiment_is_imported(tmp_path):
    """The header (system, preset, seeds, folder) comes before the heavy imports of the experiment module."""
    import subprocess

    code = (
        "import sys, iclr25.harness.configs as r\n"
        "def boom(slug):\n"
        "    print('IMPORTING', flush=True); raise SystemExit(3)\n"
        "r.experiment_module = boom\n"
        "from iclr25.harness.cli import main\n"
        f"main(['run', 'law', '--preset', 'smoke', '--seeds', '2', '--out', {str(tmp_path)!r}])\n"
    )
    env = {**__import__("os").environ, "ICLR25_QUIET": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    lines = (out.stdout + out.stderr).splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("iclr25 run law"))
    assert head < lines.index("IMPORTING")
    assert (
        "preset smoke" in lines[head] and "seeds 0..1" in lines[head] and str(tmp_path / "law") in lines[head]
    )


@pytest.mark.parametrize(
    "slug, override, needle",
    [
        ("certainty_calibration", "ot.solver=bogus", "ot: solver must be one of"),
        ("certainty_calibration", "ot.tau=0", "ot: tau must be a number > 0"),
        ("pds", "proxy_heads=4000000", "must be divisible by proxy_heads"),
        ("fosp", "agent.latent=100000000000", "agent.latent must be <= 65536"),
        ("mofflow", "test_per_size=100000000000", "test_per_size must be an int in [1, 10000000]"),
        ("dst_robustness", "ra_points=100000000000", "ra_points must be an int in [2, 10000]"),
        ("tool_planner", "llm_api_key=sk-secret", "environment"),
    ],
)
def test_set_values_the_experiment_would_reject_exit_2_in_one_line(slug, override, needle, tmp_path, capsys):
    """Caught by the config, before anything runs: one line, exit 2, no traceback, nothing written."""
    assert main(["run", slug, "--preset", "smoke", "--set", override, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    assert "sk-secret" not in err
    assert not (tmp_path / slug / "config.json").exists()


def test_config_of_a_cuda_preset_prints_without_cuda(capsys):
    """Printing a config never needs the device: it names the device the run will ask for."""
    import json

    import torch

    assert main(["config", "pds", "--preset", "full"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"]["device"] == "cuda"
    if not torch.cuda.is_available():
        assert "CUDA is not available" in doc["device"]
    assert main(["config", "pds", "--preset", "full", "--device", "cuda:x"]) == 2


def test_out_with_a_nul_byte_is_a_usage_error(capsys):
    assert main(["run", "certainty_calibration", "--preset", "smoke", "--out", "/tmp/x\x00y"]) == 2
    err = capsys.readouterr().err
    assert "NUL byte" in err and "Traceback" not in err
