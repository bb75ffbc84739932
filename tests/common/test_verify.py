"""``iclr25 verify``: the comparison logic on synthetic documents, usage errors, and one real re-run."""

import copy
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from iclr25.common.claims import Stat, all_of, claims_document, make_claim
from iclr25.harness import verify as V
from iclr25.harness.cli import main
from iclr25.harness.runs import UsageError

REF_DIR = Path(__file__).resolve().parents[2] / "results" / "quick"


def _doc(gain, base, prov=None, seeds=None):
    """A claims document with one paired claim (gain − base >= 0.1 on every seed) and a compound one."""
    seeds = list(range(len(gain))) if seeds is None else seeds
    c1 = make_claim("gain", "g", "acc", gain, 0.1, ">=", base, "difference", "all")
    c2 = all_of(
        "both",
        "b",
        [
            make_claim("mean_ok", "m", "acc", gain, 0.5, ">="),
            make_claim("first3", "f", "r", gain[:3], 0.0, ">="),  # measured on the first 3 seeds only
        ],
    )
    p = {"git_commit": "abc", "isa": "AVX2", "torch_threads": 1, "overrides": {}, "device": "cpu"}
    return claims_document("toy", "quick", seeds, 1.0, [c1, c2], p if prov is None else prov)


REF = _doc([0.9, 0.8, 0.7, 0.2, 0.9], [0.5, 0.5, 0.5, 0.5, 0.5])  # seed 3 fails "gain" (0.2 − 0.5 < 0.1)


def _rows(cmp):
    return {r.id: r for r in cmp.rows}


def test_identical_numbers_and_restricted_verdict():
    new = _doc([0.9, 0.8], [0.5, 0.5])
    cmp = V.compare_documents(REF, new, 2, env_here=dict(REF["provenance"]))
    rows = _rows(cmp)
    assert {r.numbers for r in cmp.rows} == {"identical"}
    # the stored claim fails on all 5 seeds (seed 3 is a counterexample) but passes on the first 2, where two
    # seeds do not decide it: like is compared with like
    assert rows["gain"].stored_verdict_all == "fails" and rows["gain"].stored_verdict == "not decided"
    assert rows["gain"].stored_passes is True and rows["gain"].rerun_passes is True
    assert rows["gain"].rerun_verdict == "not decided" and rows["gain"].verdict_unchanged
    assert rows["both.first3"].n_values == 2
    assert cmp.exit_code == 0 and cmp.numbers == "identical" and cmp.environment == []
    text = V.format_comparison(cmp)
    assert "every verdict unchanged on seeds 0, 1" in text and "no recorded field differs" in text


def test_within_tolerance_is_stated_and_different_is_printed():
    new = _doc([0.9 * (1 + 1e-9), 0.8], [0.5, 0.5])
    cmp = V.compare_documents(REF, new, 2, env_here=dict(REF["provenance"]))
    assert _rows(cmp)["gain"].numbers == "within tolerance"
    assert _rows(cmp)["both"].numbers == "within tolerance"  # the worst of its parts
    assert cmp.exit_code == 0
    new = _doc([0.95, 0.8], [0.5, 0.5])  # a different number, same verdict
    cmp = V.compare_documents(REF, new, 2, env_here=dict(REF["provenance"]))
    row = _rows(cmp)["gain"]
    assert row.numbers == "different" and row.verdict_unchanged
    assert cmp.exit_code == V.EXIT_NUMBERS == 4  # a number outside tolerance has its own exit status
    text = V.format_comparison(cmp)
    assert "stored 0.9, re-run 0.95" in text and "seeds: different;" in text
    assert "exit status 4: verdicts unchanged, but numbers differ beyond tolerance" in text


def test_flipped_verdict_exits_1():
    new = _doc([0.9, 0.55], [0.5, 0.5])  # seed 1: 0.05 < 0.1
    cmp = V.compare_documents(REF, new, 2, env_here=dict(REF["provenance"]))
    assert not _rows(cmp)["gain"].verdict_unchanged and cmp.exit_code == 1
    assert "VERDICT CHANGED" in V.format_comparison(cmp) and "gain" in V.format_comparison(cmp)


def test_missing_claim_exits_1():
    new = _doc([0.9], [0.5])
    new["claims"] = new["claims"][:1]
    cmp = V.compare_documents(REF, new, 1, env_here=dict(REF["provenance"]))
    assert _rows(cmp)["both"].numbers == "missing" and cmp.exit_code == 1


def test_number_classes():
    assert V.compare_numbers(0.1, 0.1) == "identical"
    assert V.compare_numbers("NaN", float("nan")) == "identical"
    assert V.compare_numbers(1.0, 1.0 + 5e-7) == "within tolerance"
    assert V.compare_numbers(1e-9, 2e-9) == "within tolerance"  # absolute floor max(1, |x|)
    assert V.compare_numbers(1.0, 1.0 + 2e-6) == "different"
    assert V.compare_numbers(float("inf"), 1e308) == "different"
    assert V.compare_numbers(float("nan"), 0.0) == "different"


def test_environment_differences_are_named():
    here = {
        "git_commit": "abc+dirty",
        "isa": "AVX512",
        "torch_threads": 1,
        "cpu_model": "Xeon",
        "device": "cpu",
    }
    diffs, missing = V.environment_differences(REF["provenance"], here)
    assert "isa: AVX2 → AVX512" in diffs
    assert any(d.startswith("git_commit: same commit") for d in diffs)
    assert missing == ["cpu_model (here: Xeon)"]
    diffs, _ = V.environment_differences(
        {
            "libraries": {"scipy": "1.0"},
            "blas": [{"internal_api": "openblas", "version": "1", "num_threads": 2}],
        },
        {
            "libraries": {"scipy": "1.1"},
            "blas": [{"internal_api": "openblas", "version": "1", "num_threads": 1}],
        },
    )
    assert "libraries.scipy: 1.0 → 1.1" in diffs and "blas: openblas 1 ×2 → openblas 1 ×1" in diffs


def test_not_per_seed_claim_is_not_comparable():
    ref = copy.deepcopy(REF)
    ref["claims"][0]["method"] = {
        "mean": 0.9,
        "std": 0.0,
        "values": [0.9] * 7,
    }  # 7 values over 5 seeds: pooled
    ref["claims"][0]["baseline"] = {"mean": 0.5, "std": 0.0, "values": [0.5] * 7}
    ref["claims"][0]["measured"] = 0.4
    ref["claims"][0]["holds"] = True
    for k in ("verdict", "passes", "interval", "seeds_to_decide"):  # an old document: holds = the point test
        ref["claims"][0].pop(k, None)
    cmp = V.compare_documents(ref, _doc([0.9], [0.5]), 1, env_here={})
    assert _rows(cmp)["gain"].numbers == "not comparable" and cmp.exit_code == 1


def _ref_copy(tmp_path, slug="certainty_calibration", **prov):
    doc = json.loads((REF_DIR / slug / "claims.json").read_text())
    doc["provenance"].update(prov)
    for k, v in list(prov.items()):
        if v is None:
            del doc["provenance"][k]
    (tmp_path / slug).mkdir(parents=True)
    (tmp_path / slug / "claims.json").write_text(json.dumps(doc))
    return tmp_path


@pytest.mark.parametrize("seeds", ["0", "6", "x", "-1"])
def test_bad_seeds_is_a_usage_error(seeds, capsys):
    assert main(["verify", "certainty_calibration", "--seeds", seeds]) == 2
    assert "--seeds must be an integer in [1, 5]" in capsys.readouterr().err


def test_usage_errors(tmp_path, capsys):
    assert main(["verify", "no_such_system"]) == 2
    assert main(["verify", "certainty_calibration", "--reference", str(tmp_path)]) == 2
    assert "no reference" in capsys.readouterr().err
    with pytest.raises(UsageError, match="provenance.overrides"):
        V.verify("certainty_calibration", 1, _ref_copy(tmp_path / "a", overrides=None))
    cmp, text = V.verify(
        "certainty_calibration", 1, _ref_copy(tmp_path / "b", config_hash="0123456789abcdef")
    )
    assert cmp.exit_code == V.EXIT_MISMATCH and "config_hash: the reference records 0123456789abcdef" in text
    out = tmp_path / "out"
    (out / "certainty_calibration" / "seeds").mkdir(parents=True)
    (out / "certainty_calibration" / "seeds" / "seed_0.json").write_text("{}")
    with pytest.raises(UsageError, match="verify recomputes"):
        V.verify("certainty_calibration", 1, None, out)
    bad = tmp_path / "c" / "certainty_calibration"
    bad.mkdir(parents=True)
    (bad / "claims.json").write_text('{"slug": "certainty_calibration"}')
    with pytest.raises(UsageError, match="not a valid claims document"):
        V.verify("certainty_calibration", 1, tmp_path / "c")


def test_verify_certainty_calibration_first_seed(tmp_path, capsys):
    """The real thing: re-run seed 0 of the committed reference (~4 CPU-s) and compare."""
    if not (REF_DIR / "certainty_calibration" / "claims.json").is_file():
        pytest.skip("no committed reference")
    assert main(["verify", "certainty_calibration", "--seeds", "1", "--out", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "every verdict unchanged on seed 0" in out
    assert (
        "different" not in out.split("values that are not identical")[0]
    )  # the table: identical / tolerance
    table = [
        ln for ln in out.splitlines() if ln.startswith(("synthetic_gece_drop", "digits_gece_drop", "bin_"))
    ]
    assert len(table) == 8 and all(("identical" in ln or "within tolerance" in ln) for ln in table)
    assert "unchanged" in table[0] and "environment (reference → here):" in out
    assert (tmp_path / "certainty_calibration" / "claims.json").is_file()
    # the same re-run is found again: with the hash recorded in the reference, the rebuilt config must match it
    from iclr25.common.results import config_hash
    from iclr25.harness.configs import effective_config, experiment_module

    cfg, _ = effective_config(experiment_module("certainty_calibration"), "quick", seeds=1)
    ref = _ref_copy(tmp_path / "ref", config_hash=config_hash(cfg))
    shutil.rmtree(tmp_path / "certainty_calibration")
    cmp, text = V.verify("certainty_calibration", 1, ref, tmp_path)
    assert cmp.exit_code == 0 and "(matches)" in text


# -- issue #50: all seeds, tampered references, exit codes, the ISA switch, ICLR25_QUIET -----------------------


def _hashed_ref(tmp_path, edit=None):
    """A copy of the certainty_calibration reference with the config_hash it lacks, then ``edit(doc)``."""
    from iclr25.common.results import config_hash
    from iclr25.harness.configs import effective_config, experiment_module

    cfg, _ = effective_config(experiment_module("certainty_calibration"), "quick")
    folder = _ref_copy(tmp_path, config_hash=config_hash(cfg))
    if edit is not None:
        f = folder / "certainty_calibration" / "claims.json"
        doc = json.loads(f.read_text())
        edit(doc)
        f.write_text(json.dumps(doc))
    return folder


def test_seeds_all_compares_every_seed():
    assert V.parse_seeds("all", 5) == 5 and V.parse_seeds(" ALL ", 3) == 3
    cmp = V.compare_documents(REF, copy.deepcopy(REF), 5, env_here=dict(REF["provenance"]))
    assert cmp.seeds == [0, 1, 2, 3, 4] and cmp.exit_code == 0
    assert _rows(cmp)["gain"].stored_verdict == _rows(cmp)["gain"].stored_verdict_all == "fails"
    # the same numbers but a seed the re-run no longer fails: the all-seed verdict changes → exit 1
    new = _doc([0.9, 0.8, 0.7, 0.7, 0.9], [0.5] * 5)
    cmp = V.compare_documents(REF, new, 5, env_here=dict(REF["provenance"]))
    assert _rows(cmp)["gain"].rerun_verdict == "holds" and cmp.exit_code == V.EXIT_CHANGED


def test_only_system_level_verdicts_set_the_exit_status():
    """A part that changes while its compound claim keeps its verdict is shown, but is not a system-level change."""

    def doc(a):
        parts = [make_claim("a", "a", "m", a, 0.5, ">="), make_claim("b", "b", "m", [0.0] * 3, 0.5, ">=")]
        return claims_document(
            "toy", "quick", [0, 1, 2], 1.0, [all_of("both", "s", parts)], {"overrides": {}}
        )

    ref, new = doc([1.0, 1.0, 1.0]), doc([0.45, 0.45, 0.45])  # part a: holds → fails; 'both' fails either way
    cmp = V.compare_documents(ref, new, 3, env_here={})
    rows = _rows(cmp)
    assert rows["both.a"].stored_verdict == "holds" and rows["both.a"].rerun_verdict == "fails"
    assert rows["both"].verdict_unchanged and rows["both"].stored_verdict == "fails"
    assert cmp.exit_code == V.EXIT_NUMBERS  # the numbers differ; no system-level verdict changed
    assert "changed (part)" in V.format_comparison(cmp)


@pytest.mark.parametrize(
    "what,edit,match",
    [
        (
            "seed list",
            lambda d: d.update(seeds=[1, 2, 3, 4, 5]),
            "seeds: the reference lists [1, 2, 3, 4, 5]",
        ),
        (
            "seed count",
            lambda d: d.update(seeds=[0, 1, 2, 3, 4, 5]),
            "preset 'quick' runs seeds [0, 1, 2, 3, 4]",
        ),
        ("preset", lambda d: d.update(preset="smoke"), "preset: the document says 'smoke'"),
        (
            "overrides",
            lambda d: d["provenance"]["overrides"].update({"ot.n_bootstrap": 7}),
            "config_hash: the reference records",
        ),
        ("config hash", lambda d: d["provenance"].update(config_hash="0" * 16), "config_hash"),
    ],
)
def test_a_tampered_reference_is_a_mismatch_not_a_pass(what, edit, match, tmp_path):
    """Regression: a seed list, preset or overrides edited in the reference passed when verdicts did not change."""
    ref = _hashed_ref(tmp_path, edit)
    doc = json.loads((ref / "certainty_calibration" / "claims.json").read_text())
    try:
        V.validate_claims_document(doc)
    except ValueError:
        pytest.skip("this edit already makes the document invalid")
    cmp, text = V.verify("certainty_calibration", 1, ref)
    assert cmp.exit_code == V.EXIT_MISMATCH == 3, text
    assert "REFERENCE MISMATCH (nothing was re-run)" in text and match in text
    assert main(["verify", "certainty_calibration", "--reference", str(ref), "--quiet"]) == 3


def test_an_untampered_hashed_reference_has_no_mismatch(tmp_path):
    from iclr25.harness.configs import experiment_module

    doc = json.loads((_hashed_ref(tmp_path) / "certainty_calibration" / "claims.json").read_text())
    mism, cfg = V.reference_mismatches(doc, experiment_module("certainty_calibration"))
    assert mism == [] and cfg.seed_list == doc["seeds"]


def test_verify_honours_iclr25_quiet(tmp_path, monkeypatch, capsys):
    """Regression: cmd_verify reset quiet to --quiet's value, so ICLR25_QUIET=1 printed progress anyway."""
    import argparse

    from iclr25.common import progress

    monkeypatch.setattr(progress, "_QUIET", True)  # what ICLR25_QUIET=1 sets at import
    ref = _hashed_ref(tmp_path, lambda d: d.update(seeds=[1, 2, 3, 4, 5]))
    ns = argparse.Namespace(
        slug="certainty_calibration", seeds="1", reference=str(ref), out=None, quiet=False
    )
    assert V.cmd_verify(ns) == V.EXIT_MISMATCH
    assert progress.is_quiet()


def test_isa_environment_forces_the_avx2_kernels():
    env = V.isa_environment(
        "avx2", {"PATH": "/bin", "ATEN_CPU_CAPABILITY": "avx512", "DNNL_MAX_CPU_ISA": "x"}
    )
    assert env == {
        "PATH": "/bin",
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
    }
    assert V.isa_environment("native", {"PATH": "/bin", "ATEN_CPU_CAPABILITY": "avx2"}) == {"PATH": "/bin"}
    with pytest.raises(UsageError, match="--isa must be one of avx2, native"):
        V.isa_environment("sse2")


def _capability(isa):
    import subprocess
    import sys

    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    r = subprocess.run(
        [sys.executable, "-c", code], env=V.isa_environment(isa), capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_isa_avx2_changes_what_aten_dispatches_to():
    """On an AVX512 machine the avx2 environment makes ATen dispatch to its AVX2 kernels (checked, not timed)."""
    native = _capability("native")
    if native in ("AVX2", "DEFAULT", "NO AVX"):
        pytest.skip(f"this CPU's own kernels are {native}: nothing to force")
    assert _capability("avx2") == "AVX2" and native != "AVX2"


def test_verify_isa_avx2_reruns_in_a_child_process_with_the_avx2_kernels(tmp_path):
    """The --isa re-run: a child process with the ISA variables; its provenance records them and AVX2."""
    if not (REF_DIR / "certainty_calibration" / "claims.json").is_file():
        pytest.skip("no committed reference")
    cmp, text = V.verify("certainty_calibration", 1, None, tmp_path, isa="avx2", quiet=True)
    doc = json.loads((tmp_path / "certainty_calibration" / "claims.json").read_text())
    assert doc["provenance"]["isa"] == "AVX2"
    assert doc["provenance"]["env"]["ATEN_CPU_CAPABILITY"] == "avx2"
    assert doc["provenance"]["env"]["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert "instruction set: avx2 (ATEN_CPU_CAPABILITY=avx2" in text
    assert cmp.exit_code in (V.EXIT_OK, V.EXIT_NUMBERS)  # certainty_calibration is numpy: verdicts stay
    assert all(r.verdict_unchanged for r in cmp.rows)


def test_a_number_edited_with_its_mean_recomputed_is_caught_by_the_rerun(tmp_path):
    """Regression: an edited per-seed value (mean/std/measured recomputed, so the document is valid) passed."""
    from iclr25.common.claims import Claim, claims_document

    def edit(doc):
        c = Claim.from_json(doc["claims"][2])  # bin_robustness: a value on every seed
        vals = list(c.method.values)
        vals[0] += 1e-4
        c2 = dataclasses.replace(c, method=Stat.of(vals))
        fresh = claims_document(doc["slug"], doc["preset"], doc["seeds"], 1.0, [c2])["claims"][0]
        fresh.pop("verdict"), fresh.pop("passes"), fresh.pop("interval"), fresh.pop("seeds_to_decide", None)
        fresh["holds"] = c2.passes  # written as an old document would be
        doc["claims"][2] = fresh

    ref = _hashed_ref(tmp_path / "ref", edit)
    V.validate_claims_document(json.loads((ref / "certainty_calibration" / "claims.json").read_text()))
    cmp, text = V.verify("certainty_calibration", 1, ref, tmp_path / "out")
    assert _rows(cmp)["bin_robustness"].numbers == "different"
    assert cmp.exit_code == V.EXIT_NUMBERS and "exit status 4" in text
