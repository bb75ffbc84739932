"""A run's documents: ``config.json, metrics.json, timings.json, report.md, claims.json``, written as one unit.

metrics.json is byte-identical across reruns of the same config and seeds: wall/CPU timings, which differ
from run to run, are moved to timings.json (:func:`iclr25.common.results.is_timing_key` says which keys are
timings). :func:`write_run` takes the folder's run lock (:func:`iclr25.harness.locks.lock_run_folder`), so a
run's documents are one set; :func:`read_run_documents` reads claims.json, config.json and timings.json and
checks their ``run_id``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ..common.claims import claims_document
from ..common.io import TMP_SUFFIX, tmp_prefix, to_jsonable
from ..common.results import config_hash, split_timings
from .interrupts import check_interrupt, deferred_interrupts
from .locks import lock_run_folder
from .rundir import RunResult

ARTEFACTS = (
    "config.json",
    "metrics.json",
    "timings.json",
    "report.md",
    "claims.json",
)  # claims.json last: marks a run


def write_run(
    result: RunResult,
    cfg: Any,
    out: str | Path,
    *,
    provenance: dict | None = None,
) -> dict:
    """Write ``config.json, metrics.json, timings.json, report.md, claims.json`` into ``out`` as one unit;
    return claims.json.

    All five are written into a temporary folder first (a failure there leaves ``out`` untouched), then moved
    in with ``claims.json`` — the file that marks a finished run — removed first and moved in last, so a reader
    never sees a ``claims.json`` beside artefacts of another run. The folder's run lock (:func:`lock_run_folder`,
    waited for up to :data:`WRITE_LOCK_WAIT_S`) makes two writers take turns, and SIGINT/SIGTERM wait for the
    renames (milliseconds). config.json, timings.json and claims.json's
    provenance carry the same ``run_id``. metrics.json holds no run id and no timing (:func:`split_timings`
    moves every timing key of the aggregate and the per-seed results to timings.json), so it is byte-identical
    across reruns of the same config and seeds.
    """
    from .render import run_report_md

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex
    prov = {"run_id": run_id, **(provenance or {})}
    # the overrides are recorded once, in the provenance (claims.json), which both reports show with the hash
    config = {"preset": result.preset, "run_id": run_id, **to_jsonable(dataclasses.asdict(cfg))}
    config["config_hash"] = config_hash(cfg)
    per_seed = {str(k): v for k, v in sorted(result.per_seed.items())}
    agg, agg_t = split_timings(to_jsonable(result.metrics))
    per_seed, per_seed_t = split_timings(to_jsonable(per_seed))
    head = {"slug": result.slug, "preset": result.preset, "seeds": result.seeds}
    metrics = {
        **head,
        "valid": result.valid,
        "invalid_reason": result.invalid_reason,
        "aggregate": agg,
        "per_seed": per_seed,
    }
    timings = {**head, "run_id": run_id, "aggregate": agg_t, "per_seed": per_seed_t}
    doc = claims_document(result.slug, result.preset, result.seeds, result.runtime_s, result.claims, prov)
    doc["valid"] = bool(result.valid)
    doc["invalid_reason"] = result.invalid_reason
    report = run_report_md(doc, result.claims, result.report_md, result.figures)
    texts = {
        "config.json": _dumps(config),
        "metrics.json": _dumps(metrics),
        "timings.json": _dumps(timings),
        "report.md": report,
        "claims.json": _dumps(doc),
    }
    with lock_run_folder(out, wait=WRITE_LOCK_WAIT_S):  # one writer: never a set mixed from two writers
        stage = Path(tempfile.mkdtemp(prefix=tmp_prefix("write"), suffix=TMP_SUFFIX, dir=out))
        try:
            for name in ARTEFACTS:
                try:
                    with open(stage / name, "w", encoding="utf-8") as f:
                        f.write(texts[name])
                        f.flush()
                        os.fsync(f.fileno())
                except OSError as e:  # a full disk fails in write(), which names no file
                    if e.filename is None and e.errno is not None:
                        raise OSError(e.errno, e.strerror, str(out / name)) from e
                    raise
                os.chmod(stage / name, 0o644)
            marker = out / "claims.json"
            if marker.is_dir() and not marker.is_symlink():
                raise IsADirectoryError(f"{marker} is a folder; remove it to write this run")
            check_interrupt()  # an interrupted run writes nothing
            with deferred_interrupts():  # the renames are one unit: a Ctrl-C waits for them (milliseconds)
                marker.unlink(missing_ok=True)
                for name in ARTEFACTS:
                    os.replace(stage / name, out / name)
                _fsync_dir(out)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return json.loads(texts["claims.json"])


WRITE_LOCK_WAIT_S = 60.0  # write_run waits this long for another writer of the same folder


def read_run_documents(folder: str | os.PathLike, attempts: int = 20) -> dict[str, Any]:
    """``{"claims.json": ..., "config.json": ..., "timings.json": ...}`` of one finished run in ``folder``, read
    so that all three belong to the same run: their ``run_id`` must agree (claims.json's is in its provenance).
    A reader that raced a writer reads again (up to ``attempts`` times); documents that never agree raise
    ``ValueError`` naming the run ids. ``FileNotFoundError`` when the folder holds no finished run."""
    from ..common.io import read_json

    folder = Path(folder)
    seen: dict[str, Any] = {}
    for _ in range(max(1, attempts)):
        docs = {n: read_json(folder / n) for n in ("claims.json", "config.json", "timings.json")}
        ids = {
            "claims.json": (docs["claims.json"].get("provenance") or {}).get("run_id"),
            "config.json": docs["config.json"].get("run_id"),
            "timings.json": docs["timings.json"].get("run_id"),
        }
        if len(set(ids.values())) == 1 and None not in ids.values():
            return docs
        seen = ids
        time.sleep(0.05)
    raise ValueError(
        f"the documents in {folder} belong to different runs (run ids {seen}); rerun to rewrite them"
    )


def _dumps(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
