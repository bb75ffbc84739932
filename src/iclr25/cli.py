"""``iclr25 list | run SLUG|all [...] | report [...]``."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from . import registry
from .common.progress import log, set_quiet
from .common.results import PRESET_NAMES, set_jobs, write_run

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with a message that lists valid values
        self.print_usage(sys.stderr)
        sys.stderr.write(f"iclr25: error: {message}\n")
        sys.exit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="iclr25", description="ICLR 2025 systems: run reproductions and build the report.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    sub.add_parser("list", help="print the table of the 19 systems")
    r = sub.add_parser("run", help="run a system's reproduction (or all implemented ones)")
    r.add_argument("slug", help=f"one of: all, {', '.join(registry.SLUGS)}")
    r.add_argument("--preset", default="quick", help=f"one of: {', '.join(PRESET_NAMES)} (default quick)")
    r.add_argument("--seeds", default=None, help="number of seeds (int >= 1; default: the preset's)")
    r.add_argument("--seed", default=None, help="first seed (int >= 0; default: the preset's, usually 0)")
    r.add_argument("--out", default="runs", help="output folder (default runs)")
    r.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default cpu)")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.add_argument(
        "--jobs",
        default="auto",
        help="seeds computed at once in worker processes (int >= 1, or auto = CPU count)",
    )
    rep = sub.add_parser("report", help="write OUT/index.html from the runs in OUT")
    rep.add_argument("--out", default="runs", help="runs folder (default runs)")
    return p


def _usage_error(msg: str) -> int:
    sys.stderr.write(f"iclr25: error: {msg}\n")
    return EXIT_USAGE


def _int_arg(name: str, raw: str | None, minimum: int) -> int | None:
    if raw is None:
        return None
    try:
        v = int(raw)
    except ValueError:
        raise ValueError(f"--{name} must be an integer >= {minimum}, got {raw!r}") from None
    if v < minimum:
        raise ValueError(f"--{name} must be an integer >= {minimum}, got {raw!r}")
    return v


def cmd_list() -> int:
    rows = [("slug", "status", "arXiv", "paper")]
    rows += [(s.slug, s.status, s.arxiv, s.title) for s in registry.SYSTEMS]
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]}")
    n_impl = len(registry.implemented())
    print(f"\n{len(registry.SYSTEMS)} systems, {n_impl} implemented.")
    return 0


def run_system(
    slug: str,
    preset: str = "quick",
    out: str | Path = "runs",
    seeds: int | None = None,
    seed: int | None = None,
    device: str = "cpu",
) -> dict:
    """Run one registered system's experiment into ``out/<slug>``. Returns claims.json's content."""
    return run_experiment(registry.get(slug).experiment(), slug, preset, out, seeds, seed, device)


def run_experiment(
    exp,
    slug: str,
    preset: str = "quick",
    out: str | Path = "runs",
    seeds: int | None = None,
    seed: int | None = None,
    device: str = "cpu",
) -> dict:
    """Run an experiment module (``PRESETS``, ``run(cfg, out)``) and write its artefacts into ``out/<slug>``."""
    from .common.device import get_device, set_cpu_threads
    from .common.io import read_json

    if preset not in exp.PRESETS:
        raise ValueError(f"preset must be one of {sorted(exp.PRESETS)}, got {preset!r}")
    changes: dict = {"device": get_device(device).type if device == "auto" else str(get_device(device))}
    if seeds is not None:
        changes["seeds"] = seeds
    if seed is not None:
        changes["seed"] = seed
    cfg = dataclasses.replace(exp.PRESETS[preset], **changes)
    set_cpu_threads(getattr(cfg, "threads", None))
    dest = Path(out) / slug
    dest.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result = exp.run(cfg, dest)
    result.runtime_s = time.perf_counter() - t0
    result.preset = preset
    result.slug = slug
    write_run(result, cfg, dest)
    return read_json(dest / "claims.json")


def cmd_run(args: argparse.Namespace) -> int:
    if args.slug != "all" and args.slug not in registry.SLUGS:
        return _usage_error(f"unknown system {args.slug!r}; valid: all, {', '.join(registry.SLUGS)}")
    if args.preset not in PRESET_NAMES:
        return _usage_error(f"unknown preset {args.preset!r}; valid: {', '.join(PRESET_NAMES)}")
    try:
        seeds = _int_arg("seeds", args.seeds, 1)
        seed = _int_arg("seed", args.seed, 0)
        jobs = (os.cpu_count() or 1) if args.jobs == "auto" else _int_arg("jobs", args.jobs, 1)
        from .common.device import get_device

        get_device(args.device)
    except ValueError as e:
        return _usage_error(str(e))
    set_quiet(args.quiet)
    set_jobs(jobs)
    from .common.device import tune_malloc

    tune_malloc()
    if args.slug == "all":
        slugs = []
        for s in registry.SYSTEMS:
            if s.implemented:
                slugs.append(s.slug)
            else:
                print(f"skip {s.slug}: planned (no runner yet)")
    else:
        system = registry.get(args.slug)
        if not system.implemented:
            return _usage_error(
                f"system {args.slug!r} is planned, not implemented yet; implemented: "
                f"{', '.join(s.slug for s in registry.implemented()) or '(none)'}"
            )
        slugs = [args.slug]
    failed = []
    for slug in slugs:
        log(f"== {slug} ({args.preset})")
        t0 = time.perf_counter()
        try:
            doc = run_system(slug, args.preset, args.out, seeds, seed, args.device)
        except Exception as e:  # keep going with the other systems under `all`
            if args.slug != "all":
                raise
            print(f"{slug}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(slug)
            continue
        held = sum(c["holds"] for c in doc["claims"])
        valid = "" if doc.get("valid", True) else " [RUN INVALID]"
        print(
            f"{slug}: {held}/{len(doc['claims'])} claims hold{valid} ({time.perf_counter() - t0:.1f} s) "
            f"-> {Path(args.out) / slug}"
        )
        for c in doc["claims"]:
            for part, indent in [(c, "  ")] + [(p, "      ") for p in c.get("parts", [])]:
                mark = "✓" if part["holds"] else "✗"
                if part.get("parts"):
                    print(f"{indent}{mark} {part['id']}: all of {len(part['parts'])} parts")
                else:
                    print(
                        f"{indent}{mark} {part['id']}: measured {part['measured']} {part['direction']} {part['threshold']}"
                    )
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    from .common.report import write_report

    path = write_report(args.out)
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "list":
        return cmd_list()
    if args.cmd == "run":
        return cmd_run(args)
    return cmd_report(args)


if __name__ == "__main__":
    sys.exit(main())
