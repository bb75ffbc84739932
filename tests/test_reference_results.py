"""The committed reference results (``results/quick/<slug>/claims.json``) are valid claims documents with
provenance, and their claim ids are exactly those the code produces today (part ids: same naming scheme;
their number can depend on the preset)."""

from __future__ import annotations

from pathlib import Path

import pytest

import iclr25
from iclr25 import registry
from iclr25.common.claims import validate_claims_document
from iclr25.common.io import read_json

RESULTS = Path(__file__).resolve().parents[1] / "results" / "quick"
DOCS = sorted(p.parent.name for p in RESULTS.glob("*/claims.json")) if RESULTS.is_dir() else []
IMPLEMENTED = list(registry.SLUGS)


def _ids(claims: list[dict]) -> list[str]:
    out = []
    for c in claims:
        out.append(c["id"])
        out += _ids(c.get("parts", []))
    return out


@pytest.mark.parametrize("slug", DOCS)
def test_reference_document_is_valid_and_self_describing(slug):
    doc = read_json(RESULTS / slug / "claims.json")
    validate_claims_document(doc)  # schema, and every stored verdict agrees with its numbers
    assert doc["slug"] == slug and doc["preset"] == "quick"
    assert slug in registry.SLUGS, f"{slug} is not a registered system"
    prov = doc.get("provenance", {})
    missing = [k for k in ("git_commit", "date_utc", "wall_s", "cpu_count") if k not in prov]
    assert not missing, f"reference {slug} lacks provenance {missing}: rerun it with the current CLI"
    assert len(set(_ids(doc["claims"]))) == len(_ids(doc["claims"])), "claim ids must be distinct"


@pytest.mark.slow
@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_reference_claim_ids_match_the_code(slug, tmp_path):
    if slug not in DOCS:
        pytest.skip(f"no committed reference result for {slug} yet")
    ref = read_json(RESULTS / slug / "claims.json")
    fresh = iclr25.run(slug, "smoke", tmp_path)
    # top-level claim ids are fixed; the parts of a compound claim may depend on the preset (e.g. one part per
    # layer width, and the smoke preset has fewer widths), so only their naming is checked
    assert [c["id"] for c in fresh["claims"]] == [c["id"] for c in ref["claims"]]
    for c in fresh["claims"] + ref["claims"]:
        assert all(p["id"].startswith(c["id"] + ".") for p in c.get("parts", []))


def test_readme_counts_are_the_references_re_derived():
    """The measured counts in README.md and results/README.md are the committed references read under the
    three-valued rule (issue #50): re-make a reference, and these numbers must follow."""
    from iclr25.report.verdicts import counts_by_preset, rederive, table

    docs = rederive(RESULTS)
    assert not [d.slug for d in docs if d.error]
    k, old = counts_by_preset(docs)["quick"]
    readme = (RESULTS.parents[1] / "README.md").read_text()
    assert f"**quick preset: {k.text()}**" in readme
    assert f"point test alone said {old} of {k.claims + k.checks} held" in readme
    results_readme = (RESULTS.parent / "README.md").read_text()
    row = f"| quick ({len(docs)} systems) | {k.holds} | {k.fails} | {k.not_decided} | {k.checks}"
    assert row in results_readme and f"{old} of {k.claims + k.checks} held" in results_readme
    assert "| birdset | `noise_aug_helps` | holds | not decided **←** |" in table(docs)


REAL = Path(__file__).resolve().parents[1] / "results" / "real"
REAL_DOCS = sorted(p.parent.name for p in REAL.glob("*/claims.json")) if REAL.is_dir() else []


@pytest.mark.parametrize("slug", REAL_DOCS)
def test_real_reference_is_valid_and_matches_a_real_preset(slug):
    """results/real/<slug>/claims.json: a valid document of the system's real preset, made from committed code
    (a clean tree) with the machine load recorded, and the registry says the system has a real preset."""
    doc = read_json(REAL / slug / "claims.json")
    validate_claims_document(doc)
    assert doc["slug"] == slug and doc["preset"] == "real"
    assert registry.get(slug).real_preset, f"{slug} has a real reference but registry.real_preset is False"
    prov = doc.get("provenance", {})
    for k in ("git_commit", "date_utc", "wall_s", "cpu_count", "load_avg_start", "load_avg_end"):
        assert k in prov, f"real reference {slug} lacks provenance {k!r}"
    assert "dirty" not in str(prov["git_commit"]), f"real reference {slug} was made from uncommitted code"
