"""`iclr25 config` prints any preset without needing its device, and says which systems never use one."""

import json
import sys
from pathlib import Path

import pytest
import torch

from iclr25 import registry
from iclr25.harness.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from test_extras import PKG, third_party_imports  # noqa: E402


@pytest.mark.parametrize("slug", ["pds", "freevs", "cascading_kv"])
def test_full_preset_config_prints_without_cuda_and_names_the_device(slug, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["config", slug, "--preset", "full"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"]["device"] == "cuda"  # what the run will ask for, kept as is
    assert doc["device"].startswith("cuda (asked for; CUDA is not available")
    assert "--device cpu or auto" in doc["device"]


@pytest.mark.parametrize("slug", [s.slug for s in registry.SYSTEMS if s.numpy_only])
def test_numpy_only_systems_say_so_in_config(slug, capsys):
    assert main(["config", slug, "--preset", "full"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "numpy-only system" in doc["device"] and "no accelerator is used" in doc["device"]


def test_numpy_only_flag_matches_the_code():
    """A system marked numpy_only imports no torch anywhere in its package; the others are not marked."""
    flagged = {s.slug for s in registry.SYSTEMS if s.numpy_only}
    assert flagged == {"topic_unlearning", "certainty_calibration"}
    for s in registry.SYSTEMS:
        uses_torch = "torch" in third_party_imports(PKG / s.slug)
        assert s.numpy_only == (not uses_torch), s.slug
