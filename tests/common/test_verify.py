"""``iclr25 verify``: the comparison logic on synthetic documents, usage errors, and one real re-run."""

import copy
import json
import shutil
from pathlib import Path

import pytest

from iclr25 import verify as V
from iclr25.cli import main
from iclr25.common.claims import all_of, claims_document, make_claim
from iclr25.runs import UsageError

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
    # the stored claim fails on all 5 seeds but holds on the first 2: like is compared with like
    assert rows["gain"].stored_verdict_all == "fails" and rows["gain"].stored_verdict == "holds"
    assert rows["gain"].rerun_verdict == "holds" and rows["gain"].verdict_unchanged
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
    assert row.numbers == "different" and row.verdict_unchanged and cmp.exit_code == 0
    text = V.format_comparison(cmp)
    assert "stored 0.9, re-run 0.95" in text and "seeds: different;" in text


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
    with pytest.raises(UsageError, match="config_hash"):
        V.verify("certainty_calibration", 1, _ref_copy(tmp_path / "b", config_hash="0123456789abcdef"))
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
    from iclr25.runs import effective_config, experiment_module

    cfg, _ = effective_config(experiment_module("certainty_calibration"), "quick", seeds=1)
    ref = _ref_copy(tmp_path / "ref", config_hash=config_hash(cfg))
    shutil.rmtree(tmp_path / "certainty_calibration")
    cmp, text = V.verify("certainty_calibration", 1, ref, tmp_path)
    assert cmp.exit_code == 0 and "(matches)" in text
