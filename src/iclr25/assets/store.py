"""The asset cache: where assets live, whether each is present, missing or damaged, and fetching them.

Layout: ``$ICLR25_ASSETS`` (default ``~/.cache/iclr25/assets``, or ``$XDG_CACHE_HOME/iclr25/assets``) holds one
folder per asset, ``<name>-<version>/``, with the pinned files at their paths and ``ASSET.json`` (what was
fetched, from where, when). A fetch builds the folder under a temporary name (``.<name>.fetch.w<host/boot tag>.pid<pid>.…``, as ``common.io.tmp_prefix`` names temp files)
and renames it into place only after every file's SHA-256 matched its pin, so a killed fetch never leaves
anything that looks complete; a later fetch removes such leftovers once their writer is gone. A folder whose
files do not match their pins is *damaged*: it is never used, and fetching again replaces it.

Fetching uses the ordinary clients — ``pip download`` for registry packages and ``apt-get download`` for Debian
packages — and nothing else reaches the network. Without a registry, :class:`AssetMissingError` says in one
line what is missing and the command that fetches it.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..common.io import is_stale_tmp, tmp_prefix
from .catalog import ASSETS, PINS_FILE, Asset, get

ENV = "ICLR25_ASSETS"
MANIFEST = "ASSET.json"
_CHUNK = 1 << 20


class AssetError(RuntimeError):
    """An asset could not be fetched or verified (the message says which and why)."""


class AssetMissingError(AssetError, FileNotFoundError):
    """An asset is not in the cache; the message is one line with the command that fetches it."""


def cache_root() -> Path:
    """The asset cache folder: ``$ICLR25_ASSETS``, else ``$XDG_CACHE_HOME/iclr25/assets``, else
    ``~/.cache/iclr25/assets``."""
    env = os.environ.get(ENV, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "iclr25" / "assets"


def asset_dir(asset: Asset | str) -> Path:
    a = get(asset) if isinstance(asset, str) else asset
    return cache_root() / f"{a.name}-{a.version.replace(':', '_')}"


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


# (path, size, mtime_ns, inode) -> digest: a file is hashed once per process unless it changes on disk
_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def _digest_cached(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _DIGESTS:
        _DIGESTS[key] = sha256_file(path)
    return _DIGESTS[key]


@dataclass(frozen=True)
class Status:
    asset: Asset
    state: str  # "present", "missing" or "damaged"
    detail: str = ""  # for "damaged": the first file that is missing or does not match
    path: Path | None = None


def _python_status(a: Asset) -> Status:
    from importlib import metadata

    try:
        version = metadata.version(a.package)
    except metadata.PackageNotFoundError:
        return Status(a, "missing", f"{a.package} is not installed")
    if version != a.version:
        return Status(a, "damaged", f"{a.package} {version} is installed, the pinned version is {a.version}")
    return Status(a, "present")


def status(asset: Asset | str, *, deep: bool = True) -> Status:
    """Whether ``asset`` is present (every pinned file there with its size and, when ``deep``, its SHA-256),
    missing (no folder) or damaged (a file missing, of another size or another digest)."""
    a = get(asset) if isinstance(asset, str) else asset
    if a.kind == "python":
        return _python_status(a)
    d = asset_dir(a)
    if not d.is_dir():
        return Status(a, "missing")
    if not a.files:
        return Status(a, "damaged", f"no pinned files for {a.name} in {PINS_FILE.name}", d)
    for rel, (size, digest) in a.files.items():
        p = d / rel
        if not p.is_file():
            return Status(a, "damaged", f"{rel} is missing", d)
        if p.stat().st_size != size:
            return Status(a, "damaged", f"{rel} has {p.stat().st_size} bytes, expected {size}", d)
        if deep and _digest_cached(p) != digest:
            return Status(a, "damaged", f"{rel} does not match its pinned sha256", d)
    return Status(a, "present", path=d)


def fetch_command(a: Asset) -> str:
    if a.kind == "python":
        return f"pip install 'iclr25[{a.extra}]'"
    return f"iclr25 assets fetch {a.name}"


def path(asset: Asset | str, *, fetch: bool = False) -> Path:
    """The verified cache folder of ``asset``. Missing or damaged: fetched when ``fetch`` is true, otherwise
    :class:`AssetMissingError` with the command that fetches it."""
    a = get(asset) if isinstance(asset, str) else asset
    st = status(a)
    if st.state == "present" and st.path is not None:
        return st.path
    if a.kind == "python":
        if st.state == "present":
            return Path()
        raise AssetMissingError(f"asset {a.name} is {st.state} ({st.detail}): {fetch_command(a)}")
    if fetch:
        return fetch_asset(a)
    why = f"damaged ({st.detail})" if st.state == "damaged" else f"not in the asset cache {cache_root()}"
    raise AssetMissingError(f"asset {a.name} is {why}: run `{fetch_command(a)}` (needs the package registry)")


def file(asset: Asset | str, rel: str) -> Path:
    """One pinned file of ``asset`` (verified with the rest of the folder)."""
    a = get(asset) if isinstance(asset, str) else asset
    if rel not in a.files:
        raise KeyError(f"asset {a.name} has no pinned file {rel!r}")
    return path(a) / rel


# ----------------------------------------------------------------------------------------------- fetching
@contextlib.contextmanager
def _lock(name: str) -> Iterator[None]:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _clean_leftovers(a: Asset) -> None:
    """Remove temporary folders of earlier fetches of ``a`` whose writer is gone (``common.io.is_stale_tmp``: a
    dead pid on this host + boot + PID namespace, or older than a day elsewhere). Called under the asset's lock,
    so no live fetch of this asset on this host owns one."""
    for p in cache_root().glob(f".{a.name}.fetch.w*"):
        if is_stale_tmp(p):
            shutil.rmtree(p, ignore_errors=True)


def _run(cmd: list[str], what: str, cwd: Path) -> None:
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
    except FileNotFoundError:
        raise AssetMissingError(f"{what}: `{cmd[0]}` is not available on this machine") from None
    except subprocess.TimeoutExpired:
        raise AssetMissingError(f"{what}: `{' '.join(cmd)}` did not finish in 30 min") from None
    if r.returncode != 0:
        last = [
            ln.strip() for ln in (r.stderr or r.stdout).splitlines() if ln.strip() and "WARNING" not in ln
        ]
        tail = last[-1] if last else f"exit {r.returncode}"
        raise AssetMissingError(
            f"{what} (`{' '.join(cmd[-2:] if cmd[0] == 'apt-get' else cmd[-1:])}`: {tail[:200]})"
        )


def _download(a: Asset, into: Path) -> Path:
    """Download the package archive of ``a`` into ``into``; returns its path."""
    what = (
        f"asset {a.name} could not be fetched from {a.source}; run `{fetch_command(a)}` where the package "
        "registry is reachable, or point ICLR25_ASSETS at a cache that holds it"
    )
    if a.kind == "deb":
        cmd = ["apt-get", "download", f"{a.package}={a.version}"]
        try:
            _run(cmd, what, into)
        except AssetMissingError:
            if not hasattr(os, "geteuid") or os.geteuid() != 0:
                raise
            # stale package lists on a fresh machine: refresh them (root only) and try once more
            _run(["apt-get", "update", "-q"], what, into)
            _run(cmd, what, into)
        found = sorted(into.glob("*.deb"))
    else:
        binary = ["--only-binary", ":all:"] if a.kind == "wheel" else ["--no-binary", ":all:"]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q"]
        _run([*cmd, *binary, "-d", str(into), f"{a.package}=={a.version}"], what, into)
        found = sorted(p for p in into.iterdir() if p.is_file())
    if len(found) != 1:
        raise AssetError(f"{what}: expected one archive, found {[p.name for p in found]}")
    return found[0]


def _deb_data(deb: Path) -> tarfile.TarFile:
    """The data archive of a Debian package (an ``ar`` archive holding ``data.tar.*``)."""
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise AssetError(f"{deb.name} is not a Debian package (no ar header)")
    pos = 8
    while pos + 60 <= len(raw):
        header = raw[pos : pos + 60]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        body = raw[pos + 60 : pos + 60 + size]
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
        pos += 60 + size + (size & 1)
    raise AssetError(f"{deb.name} holds no data.tar member")


def _members(archive: Path) -> Iterator[tuple[str, Callable[[], io.BufferedIOBase]]]:
    """(member name, opener) for every regular file of a wheel, sdist or .deb."""
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.is_dir():
                    yield info.filename, (lambda i=info: z.open(i))
        return
    tf = _deb_data(archive) if archive.suffix == ".deb" else tarfile.open(archive, mode="r:*")
    with tf:
        for m in tf.getmembers():
            if m.isfile():
                yield m.name.removeprefix("./"), (lambda m=m: tf.extractfile(m))


def _rel(a: Asset, member: str) -> str | None:
    """The cache path of an archive member of ``a`` (``None`` when it is not one of the asset's files)."""
    if not any(fnmatch.fnmatchcase(member, p) for p in a.patterns):
        return None
    rel = member.removeprefix(a.strip) if a.strip else member
    parts = Path(rel).parts
    if not parts or rel.startswith("/") or ".." in parts:
        raise AssetError(f"asset {a.name}: refusing archive member with an unsafe path {member!r}")
    return rel


def _copy_stream(src: io.BufferedIOBase, dest: Path) -> str:
    dest.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(dest, "wb") as out:
        while chunk := src.read(_CHUNK):
            h.update(chunk)
            out.write(chunk)
    return h.hexdigest()


def _installed_copy(a: Asset, staging: Path) -> bool:
    """Copy the pinned files from an installed distribution of the same package and version (a wheel's files in
    site-packages, a Debian package's under /), when every one is there with its pinned digest."""
    files = a.files
    if not files:
        return False
    if a.kind == "deb":
        sources = {rel: Path("/") / (a.strip + rel) for rel in files}
    elif a.kind == "wheel":
        from importlib import metadata

        try:
            dist = metadata.distribution(a.package)
        except metadata.PackageNotFoundError:
            return False
        if dist.version != a.version:
            return False
        sources = {rel: Path(str(dist.locate_file(a.strip + rel))) for rel in files}
    else:
        return False
    for rel, (size, digest) in files.items():
        p = sources[rel]
        if not p.is_file() or p.stat().st_size != size or sha256_file(p) != digest:
            return False
    for rel, p in sources.items():
        with open(p, "rb") as src:
            _copy_stream(src, staging / rel)
    return True


def _extract(a: Asset, archive: Path, staging: Path) -> None:
    pins = a.files
    got: dict[str, str] = {}
    for member, opener in _members(archive):
        rel = _rel(a, member)
        if rel is None or rel not in pins:
            continue
        with opener() as src:
            got[rel] = _copy_stream(src, staging / rel)
    missing = sorted(set(pins) - set(got))
    if missing:
        raise AssetError(f"asset {a.name}: {archive.name} lacks pinned files {missing[:3]}")
    bad = sorted(rel for rel, d in got.items() if d != pins[rel][1])
    if bad:
        raise AssetError(
            f"asset {a.name}: {bad[0]} from {archive.name} does not match its pinned sha256 "
            f"({len(bad)} file(s)); the registry's package differs from the one pinned — refused"
        )


def fetch_asset(
    asset: Asset | str, *, force: bool = False, progress: Callable[[str], None] | None = None
) -> Path:
    """Fetch ``asset`` into the cache (atomically; a damaged copy is replaced) and return its folder."""
    a = get(asset) if isinstance(asset, str) else asset
    if a.kind == "python":
        return path(a)
    say = progress or (lambda _msg: None)
    with _lock(a.name):
        st = status(a)
        if st.state == "present" and not force and st.path is not None:
            return st.path
        _clean_leftovers(a)
        root = cache_root()
        staging_root = Path(tempfile.mkdtemp(prefix=tmp_prefix(f"{a.name}.fetch"), dir=root))
        try:
            files = staging_root / "files"
            files.mkdir()
            source = "installed copy"
            if force or not _installed_copy(a, files):
                shutil.rmtree(files)
                files.mkdir()
                dl = staging_root / "download"
                dl.mkdir()
                say(f"downloading {a.source}")
                archive = _download(a, dl)
                source = archive.name
                _extract(a, archive, files)
            manifest = {
                "name": a.name,
                "source": a.source,
                "from": source,
                "fetched_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": {rel: {"size": s, "sha256": d} for rel, (s, d) in sorted(a.files.items())},
            }
            (files / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
            final = asset_dir(a)
            if final.exists():  # damaged (or forced): move aside first, then remove
                aside = staging_root / "replaced"
                os.replace(final, aside)
            os.replace(files, final)
        finally:
            shutil.rmtree(staging_root, ignore_errors=True)
    st = status(a)
    if st.state != "present" or st.path is None:
        raise AssetError(f"asset {a.name}: fetched but not verified ({st.detail})")
    return st.path


def all_status(deep: bool = True) -> list[Status]:
    return [status(a, deep=deep) for a in ASSETS]


# ------------------------------------------------------------------------------------------- pinning (maintainers)
def pin_archive(asset: Asset | str, archive: str | os.PathLike) -> dict[str, list]:
    """``{rel: [size, sha256]}`` of the files of ``archive`` that ``asset``'s patterns select — what
    ``pins.json`` records. Run by a maintainer on the pinned package; never at fetch time."""
    a = get(asset) if isinstance(asset, str) else asset
    out: dict[str, list] = {}
    for member, opener in _members(Path(archive)):
        rel = _rel(a, member)
        if rel is None:
            continue
        h, n = hashlib.sha256(), 0
        with opener() as src:
            while chunk := src.read(_CHUNK):
                h.update(chunk)
                n += len(chunk)
        out[rel] = [n, h.hexdigest()]
    return dict(sorted(out.items()))
