"""``iclr25 list | run SLUG|all [...] | config SLUG [...] | report [...]`` — a thin shell over
:mod:`iclr25.harness.runs`.

Exit status: 0 success; 1 a run failed or a folder cannot be used (one line on stderr, no traceback), or the
output could not be written (``> /dev/full``); 2 a usage error (unknown system, preset, field or value out of
range — the message lists the valid ones); 130 interrupted by SIGINT (Ctrl-C), 143 terminated by SIGTERM (rerun
the same command to resume: finished seeds are kept, nothing is half-written).

A reader that leaves early (``iclr25 run ... | head -1``) does not stop a run: standard output is silenced and
the run goes on to its own exit status.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def _interrupted_while_loading(signum, frame):  # noqa: ANN001
    """Ctrl-C while the CLI is still importing its modules: one line, exit 130 (nothing has been written)."""
    try:
        os.write(2, b"iclr25: interrupted while starting; nothing was run\n")
    finally:
        os._exit(128 + signum)


_LOADING = (
    os.path.basename(sys.argv[0] or "") == "iclr25" and threading.current_thread() is threading.main_thread()
)
if _LOADING:  # only as the console script: a library import of this module leaves signals alone
    _SIGINT_BEFORE = signal.signal(signal.SIGINT, _interrupted_while_loading)

import argparse  # noqa: E402
import errno  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

from .. import registry  # noqa: E402
from ..common.progress import is_quiet, log, set_quiet  # noqa: E402
from ..common.results import MAX_SEEDS, PRESET_NAMES, SEED_LIMIT  # noqa: E402
from ..errors import RunWarning, UsageError, package_version  # noqa: E402
from .interrupts import Interrupted  # noqa: E402
from .launch import LAUNCHERS, LaunchError  # noqa: E402
from .runs import RunPathError, run_experiment  # noqa: E402

if _LOADING:
    signal.signal(signal.SIGINT, _SIGINT_BEFORE)

EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 1, 2, 130, 143
MAX_JOBS = 512


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with a message that lists valid values
        self.print_usage(sys.stderr)
        sys.stderr.write(f"iclr25: error: {message}\n")
        sys.exit(EXIT_USAGE)


def _runnable() -> list[str]:
    return list(registry.SLUGS)


def version() -> str:
    """The installed distribution's version (``importlib.metadata``)."""
    return package_version()


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="iclr25", description="ICLR 2025 systems: run reproductions and build the report.")
    p.add_argument("--version", action="version", version=f"iclr25 {version()}")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    sub.add_parser("list", help="print the table of the 19 systems")
    runnable = ", ".join(_runnable()) or "(none yet)"

    def run_args(r: argparse.ArgumentParser, out: bool) -> None:
        r.add_argument("slug", help=f"a system: {runnable}" + (", or all" if out else ""))
        r.add_argument("--preset", default="quick", help=f"one of: {', '.join(PRESET_NAMES)} (default quick)")
        r.add_argument(
            "--seeds", default=None, help=f"number of seeds, 1..{MAX_SEEDS} (default: the preset's)"
        )
        r.add_argument("--seed", default=None, help="first seed, >= 0 (default: the preset's, usually 0)")
        r.add_argument(
            "--device", default=None, help="cpu, cuda, cuda:N or auto (default: the preset's device)"
        )
        r.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="FIELD=VALUE",
            help="override a config field (repeatable); `iclr25 config SLUG` lists the fields",
        )

    r = sub.add_parser("run", help="run a system's reproduction (or all of them)")
    run_args(r, out=True)
    r.add_argument("--out", default="runs", help="output folder (default runs)")
    r.add_argument("--quiet", action="store_true", help="no progress bars")
    r.add_argument(
        "--jobs",
        default="auto",
        help=f"seeds computed at once in worker processes (1..{MAX_JOBS}, or auto = one per GPU when the "
        "device is cuda, else one per CPU)",
    )
    r.add_argument(
        "--launcher",
        default="local",
        choices=LAUNCHERS,
        help="where missing seeds run: local (worker processes here, default) or submitit (one Slurm job per "
        "seed; needs iclr25[cluster]); submitit-local runs the same jobs through submitit's local executor",
    )
    r.add_argument("--slurm-partition", default=None, help="Slurm partition of each seed job")
    r.add_argument("--slurm-gpus-per-task", default=None, help="GPUs per seed job (Slurm --gpus-per-task)")
    r.add_argument("--slurm-time", default=None, help="time limit of each seed job, in minutes")
    r.add_argument("--slurm-cpus-per-task", default=None, help="CPUs per seed job (Slurm --cpus-per-task)")
    r.add_argument("--slurm-mem", default=None, help="memory per seed job (Slurm --mem, e.g. 16G)")
    c = sub.add_parser(
        "config", help="print the effective config of SLUG under a preset (and --set overrides)"
    )
    run_args(c, out=False)
    v = sub.add_parser(
        "verify",
        help="re-run the first K seeds of a committed reference with its config; compare numbers and verdicts",
    )
    v.add_argument("slug", help=f"a system with a committed reference: {runnable}")
    v.add_argument(
        "--seeds",
        default="1",
        help="how many of the reference's seeds to re-run: an integer, or all (compares the all-seed verdicts; "
        "default 1)",
    )
    v.add_argument(
        "--isa",
        choices=("avx2", "native"),
        default=None,
        help="re-run in a child process with the AVX2 kernels forced (ATEN_CPU_CAPABILITY=avx2 "
        "MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell) or with those variables "
        "removed (native); default: in this process",
    )
    v.add_argument(
        "--reference",
        default=None,
        help="folder of reference claims documents (<slug>/claims.json); default: the repository's results/quick",
    )
    v.add_argument("--out", default=None, help="where the re-run goes (default: a new temporary folder)")
    v.add_argument("--quiet", action="store_true", help="no progress bars")
    a = sub.add_parser("assets", help="the real models and data: list, fetch, path")
    asub = a.add_subparsers(dest="assets_cmd", required=True, parser_class=_Parser)
    al = asub.add_parser(
        "list", help="every asset: present / missing / damaged, size, licence, source, systems"
    )
    al.add_argument("--quick", action="store_true", help="check sizes only, not SHA-256 digests")
    af = asub.add_parser(
        "fetch", help="fetch assets into the cache (verified by SHA-256; a damaged copy is replaced)"
    )
    af.add_argument("names", nargs="*", default=["all"], help="asset names, or all (default)")
    af.add_argument("--force", action="store_true", help="fetch again even when present")
    ap = asub.add_parser("path", help="print the cache folder of an asset (exit 1 when missing or damaged)")
    ap.add_argument("name", help="an asset name (iclr25 assets list)")
    rep = sub.add_parser("report", help="write OUT/index.html from the runs in OUT")
    rep.add_argument("--out", default="runs", help="runs folder (default runs)")
    rep.add_argument(
        "--reference",
        default=None,
        help="folder of reference claims documents (<slug>/claims.json); default: the repository's results/quick, else the copy shipped in the package",
    )
    rep.add_argument(
        "--reference-real",
        default=None,
        help="folder of real-preset reference claims documents (<slug>/claims.json); default: the repository's "
        "results/real, else the copy shipped in the package",
    )
    return p


def _fail(msg: str, code: int) -> int:
    sys.stderr.write(f"iclr25: error: {msg}\n")
    return code


def _int_arg(name: str, raw: str | None, lo: int, hi: int, why: str = "") -> int | None:
    if raw is None:
        return None
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise UsageError(f"--{name} must be an integer in [{lo}, {hi}], got {raw!r}") from None
    if not lo <= v <= hi:
        raise UsageError(f"--{name} must be an integer in [{lo}, {hi}], got {raw!r}{why}")
    return v


def _seed_args(args: argparse.Namespace) -> tuple[int | None, int | None]:
    seeds = _int_arg(
        "seeds",
        args.seeds,
        1,
        MAX_SEEDS,
        " (each seed is a full run kept in memory; sweep in batches with --seed)",
    )
    seed = _int_arg(
        "seed",
        args.seed,
        0,
        SEED_LIMIT - (seeds or 1),
        " (seeds feed numpy/torch/CUDA generators that take 32-bit seeds: seed + seeds <= 2**32)",
    )
    return seeds, seed


def _check_preset(preset: str, slug: str | None = None) -> None:
    """An unknown preset is a usage error listing the valid ones (a registered system's own: ``real`` only where
    it has one)."""
    if preset not in PRESET_NAMES:
        system = registry.find(slug) if slug else None
        valid = [p for p in PRESET_NAMES if p != "real" or system is None or system.real_preset]
        raise UsageError(f"unknown preset {preset!r}; valid: {', '.join(valid)}")


def cmd_list() -> int:
    print(f"iclr25 {version()} — {len(registry.SYSTEMS)} ICLR 2025 systems\n")
    rows = [("slug", "status", "real preset", "arXiv", "paper")]
    rows += [(s.slug, s.availability, s.real_status, s.arxiv, s.title) for s in registry.SYSTEMS]
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]:<{w[3]}}  {r[4]}")
    needs = sorted({s.missing_extra for s in registry.SYSTEMS if s.missing_extra})
    ready = sum(not s.missing_extra for s in registry.SYSTEMS)
    print(f"\n{len(registry.SYSTEMS)} systems, {ready} ready to run here.")
    if needs:
        print(f"Missing extras: {', '.join(needs)} — pip install 'iclr25[{','.join(needs)}]'")
    print("Real models and data: iclr25 assets list (fetch them with `iclr25 assets fetch all`)")
    return 0


def _print_summary(slug: str, doc: dict, seconds: float, out: str | Path) -> None:
    from ..common.claims import validate_claims_document
    from .render import PRESET_NOTES, claims_text, validity_label

    claims = validate_claims_document(doc)
    held = sum(c.holds for c in claims)
    valid = "" if doc.get("valid", True) else f" [{validity_label(doc)}: {doc.get('invalid_reason', '')}]"
    print(f"{slug}: {held}/{len(claims)} claims hold{valid} ({seconds:.1f} s) -> {Path(out) / slug}")
    if doc.get("preset") == "smoke":
        print(f"  ({PRESET_NOTES['smoke']})")
    for line in claims_text(claims):
        print(line)


def _header(args: argparse.Namespace, slugs: list[str], seeds: int | None, seed: int | None) -> str:
    """``iclr25 run``'s first line: what runs, with which seeds, into which folder."""
    what = args.slug if args.slug != "all" else f"all ({len(slugs)} systems)"
    if seeds is None and seed is None:
        seed_txt = "the preset's seeds"
    else:
        first = 0 if seed is None else seed
        seed_txt = f"seeds from {first}" if seeds is None else f"seeds {first}..{first + seeds - 1}"
    where = Path(args.out) / (args.slug if args.slug != "all" else "<slug>")
    return f"iclr25 run {what} · preset {args.preset} · {seed_txt} · -> {where} (loading…)"


def cmd_run(args: argparse.Namespace) -> int:
    from .configs import effective_config, experiment_module
    from .runs import check_out

    _check_preset(args.preset, args.slug)
    seeds, seed = _seed_args(args)
    jobs = "auto" if args.jobs == "auto" else _int_arg("jobs", args.jobs, 1, MAX_JOBS)
    launcher = _launcher(args)
    main_rank = os.environ.get("RANK", "0").strip() in ("", "0")  # under torchrun only rank 0 prints
    if args.slug == "all":
        slugs = _runnable()
    else:
        system = registry.runnable(args.slug)  # unknown: exit 2 before anything heavy is imported
        if system.missing_extra:  # one line naming the extra to install, exit 1, before the header
            raise registry.MissingExtraError(system.slug, system.extra, system.missing_modules)
        slugs = [args.slug]
    set_quiet(
        args.quiet or is_quiet() or not main_rank
    )  # ICLR25_QUIET=1 in the environment counts as --quiet
    log(_header(args, slugs, seeds, seed))  # before the heavy imports (torch, transformers: seconds)
    from ..common.device import get_device, tune_malloc
    from .workers import set_jobs

    if args.device is not None:
        try:
            get_device(args.device)
        except ValueError as e:
            raise UsageError(str(e)) from None
    exps, configs, failed = {}, {}, []
    for s in slugs:  # build and validate every system's config before running any of them (built once)
        try:
            exps[s] = experiment_module(s)
            configs[s] = effective_config(
                exps[s], args.preset, seeds=seeds, seed=seed, device=args.device, overrides=args.overrides
            )
        except Exception as e:  # a broken module or an argument it rejects: under `all`, run the others
            if args.slug != "all":
                raise
            what = str(e) if isinstance(e, UsageError) else f"{type(e).__name__}: {e}"
            print(f"{s}: FAILED to start: {what}", file=sys.stderr)
            failed.append(s)
            exps.pop(s, None)
    check_out(args.out)
    set_jobs(jobs)
    tune_malloc()
    for slug in [s for s in slugs if s in exps]:
        log(f"== {slug} ({args.preset})")
        t0 = time.perf_counter()
        try:
            doc = run_experiment(
                exps[slug],
                slug,
                args.preset,
                args.out,
                seeds,
                seed,
                args.device,
                args.overrides or None,
                launcher=launcher,
                config=configs[slug],
            )
        except (RunPathError, UsageError, LaunchError):
            raise
        except Exception as e:  # keep going with the other systems under `all`
            if args.slug != "all":
                raise
            print(f"{slug}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(slug)
            continue
        if main_rank:
            _print_summary(slug, doc, time.perf_counter() - t0, args.out)
    from ..common.device import close_distributed

    close_distributed()
    if failed:
        print(f"{len(failed)} system(s) failed: {', '.join(failed)}", file=sys.stderr)
    return EXIT_FAIL if failed else 0


def _launcher(args: argparse.Namespace):  # noqa: ANN202
    """``--launcher`` and the ``--slurm-*`` options → ``None`` (local) or a submitit launcher."""
    from .launch import SlurmOptions, make_launcher

    slurm = {
        "partition": args.slurm_partition,
        "gpus_per_task": _int_arg("slurm-gpus-per-task", args.slurm_gpus_per_task, 0, 64),
        "time_min": _int_arg("slurm-time", args.slurm_time, 1, 60 * 24 * 365),
        "cpus_per_task": _int_arg("slurm-cpus-per-task", args.slurm_cpus_per_task, 1, 4096),
        "mem": args.slurm_mem,
    }
    if args.launcher == "local":
        flags = {"partition": "--slurm-partition", "gpus_per_task": "--slurm-gpus-per-task"}
        flags.update(time_min="--slurm-time", cpus_per_task="--slurm-cpus-per-task", mem="--slurm-mem")
        given = [flags[k] for k, v in slurm.items() if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: Slurm options apply only with --launcher submitit")
        return None
    try:
        options = SlurmOptions(**slurm)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return make_launcher(args.launcher, options)


def _device_note(device: str, numpy_only: bool = False) -> str:
    """What ``iclr25 config`` says about the device: the one the run asks for, and whether it is here (never
    initialises CUDA when the run would not ask for it)."""
    if numpy_only:
        return f"{device} (numpy-only system: it computes on the CPU whatever the device; no accelerator is used)"
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return (
                f"{device} (asked for; CUDA is not available on this machine, so `iclr25 run` here would exit 2: "
                "pass --device cpu or auto)"
            )
    return device


def cmd_config(args: argparse.Namespace) -> int:
    import dataclasses

    from ..common.io import to_jsonable
    from ..common.results import config_hash
    from .configs import effective_config, experiment_module

    _check_preset(args.preset, args.slug)
    seeds, seed = _seed_args(args)
    exp = experiment_module(args.slug)
    cfg, applied = effective_config(
        exp,
        args.preset,
        seeds=seeds,
        seed=seed,
        device=args.device,
        overrides=args.overrides,
        check_device=False,
    )
    doc = {
        "slug": args.slug,
        "preset": args.preset,
        "config_class": type(cfg).__name__,
        "overrides": to_jsonable(applied),
        "config_hash": config_hash(cfg),
        "device": _device_note(getattr(cfg, "device", "cpu"), registry.get(args.slug).numpy_only),
        "config": to_jsonable(dataclasses.asdict(cfg)),
    }
    dl = downloads_of(exp, cfg)
    if dl is not None:
        doc["downloads"] = dl
        doc["download_bytes"] = sum(d["bytes"] for d in dl if isinstance(d.get("bytes"), int))
    print(json.dumps(doc, indent=2))
    return 0


DOWNLOAD_KEYS = ("what", "source", "bytes")


def downloads_of(exp, cfg) -> list[dict] | None:
    """What a run of ``cfg`` would download (the ``full`` presets name the papers' models and data by hub id and
    ``datasets`` name): ``cfg.downloads()`` or the experiment module's ``downloads(cfg)``, a list of dicts with
    ``what`` (model / dataset / split), ``source`` (hub id or ``datasets`` name) and ``bytes`` (int, or ``None``
    when unknown without the network); ``None`` when the system declares nothing. Nothing is fetched."""
    fn = getattr(cfg, "downloads", None)
    items = (
        fn() if callable(fn) else (exp.downloads(cfg) if callable(getattr(exp, "downloads", None)) else None)
    )
    if items is None:
        return None
    out = []
    for d in items:
        d = dict(d)
        missing = [k for k in DOWNLOAD_KEYS if k not in d]
        if missing:
            raise ValueError(
                f"downloads(): each item needs keys {DOWNLOAD_KEYS}, got {sorted(d)} (missing {missing})"
            )
        out.append(d)
    return out


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n else "—"


def cmd_assets(args: argparse.Namespace) -> int:
    from .. import assets

    if args.assets_cmd == "list":
        print(f"asset cache: {assets.cache_root()}  (set ICLR25_ASSETS to move it)\n")
        rows = [("name", "state", "size", "licence", "source", "systems")]
        bad = 0
        for st in assets.all_status(deep=not args.quick):
            a = st.asset
            state = st.state + (f": {st.detail}" if st.state == "damaged" else "")
            bad += st.state != "present"
            rows.append((a.name, state, _mb(a.size), a.licence, a.source, ", ".join(a.systems)))
        w = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            print("  ".join(f"{c:<{w[i]}}" for i, c in enumerate(r[:5])) + "  " + r[5])
        if bad:
            print(f"\n{bad} not present: iclr25 assets fetch all")
        return 0
    if args.assets_cmd == "path":
        try:
            assets.get(args.name)
        except KeyError as e:
            raise UsageError(str(e.args[0])) from None
        try:
            print(assets.path(args.name))
        except assets.AssetMissingError as e:
            return _fail(str(e), EXIT_FAIL)
        return 0
    names = list(assets.NAMES) if "all" in args.names else list(dict.fromkeys(args.names))
    for n in names:
        try:
            assets.get(n)
        except KeyError as e:
            raise UsageError(str(e.args[0])) from None
    failed = []
    for n in names:
        a = assets.get(n)
        t0 = time.perf_counter()
        before = assets.status(a, deep=False).state
        try:
            where = assets.fetch_asset(a, force=args.force)
            if n == "smollm2-135m-instruct" and registry._module_present("gguf"):
                from ..assets.lm import derived_fp32

                derived_fp32(n)  # the fp32 safetensors copy: later loads read it instead of de-quantising
        except (assets.AssetError, OSError) as e:
            failed.append(n)
            sys.stderr.write(f"iclr25: {e}\n")
            continue
        verb = "present" if before == "present" and not args.force else "fetched"
        shown = a.source if a.kind == "python" else where
        print(f"{n:<24} {verb:<8} {_mb(a.size):>9}  {time.perf_counter() - t0:6.1f} s  {shown}")
    if failed:
        return _fail(f"{len(failed)} asset(s) not fetched: {', '.join(failed)}", EXIT_FAIL)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import ReportError, write_report

    try:
        path = write_report(args.out, reference=args.reference, reference_real=args.reference_real)
    except ReportError as e:
        return _fail(str(e), EXIT_FAIL)
    print(f"wrote {path}")
    return 0


def _show_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
    if issubclass(category, RunWarning):
        sys.stderr.write(f"iclr25: warning: {message}\n")
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _safe_streams() -> None:
    """Never crash on printing a path or message the terminal cannot encode."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):
            pass


class _GuardedStream:
    """``sys.stdout`` / ``sys.stderr`` as the CLI writes them: a write or flush that fails — the reader of a pipe
    left (``| head -1``), ``> /dev/full`` — silences the stream (its file descriptor then points at
    ``/dev/null``, so no later flush fails either) instead of aborting the command, and is remembered in
    ``error``. Everything else is the wrapped stream's."""

    def __init__(self, stream):  # noqa: ANN001
        self._stream = stream
        self.error: OSError | None = None

    def _broken(self, e: OSError) -> None:
        if self.error is None:
            self.error = e
        try:
            fd = self._stream.fileno()
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
        except (OSError, ValueError, AttributeError):
            pass
        try:  # what is still buffered goes to /dev/null now
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def write(self, text: str) -> int:
        if self.error is None:
            try:
                return self._stream.write(text)
            except OSError as e:
                self._broken(e)
        return len(text)

    def writelines(self, lines) -> None:  # noqa: ANN001
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.error is None:
            try:
                self._stream.flush()
            except OSError as e:
                self._broken(e)

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._stream, name)


def _stop_message(e: KeyboardInterrupt) -> tuple[str, int]:
    if isinstance(e, Interrupted) and e.signum == signal.SIGTERM:
        return "terminated (SIGTERM)", EXIT_TERMINATED
    return "interrupted", EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    from .interrupts import interrupt_handlers

    _safe_streams()
    saved = sys.stdout, sys.stderr
    out, err = _GuardedStream(sys.stdout), _GuardedStream(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        with interrupt_handlers():  # SIGINT/SIGTERM: one line, exit 130/143, nothing half-written
            try:
                args = _parser().parse_args(argv)
                code = _dispatch(args)
                sys.stdout.flush()
            except KeyboardInterrupt as e:  # outside a command's own handling (argument parsing, the summary)
                what, code = _stop_message(e)
                sys.stderr.write(f"iclr25: {what}\n")
    finally:
        sys.stdout, sys.stderr = saved
    if out.error is not None and out.error.errno != errno.EPIPE and code == 0:
        # `> /dev/full`: the command did its work but its output is lost — not the run folder's disk
        reason = out.error.strerror or str(out.error)
        sys.stderr.write(f"iclr25: error: cannot write to standard output ({reason}); its output is lost\n")
        return EXIT_FAIL
    return code


def _dispatch(args: argparse.Namespace) -> int:
    old = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        if args.cmd == "list":
            return cmd_list()
        if args.cmd == "run":
            return cmd_run(args)
        if args.cmd == "config":
            return cmd_config(args)
        if args.cmd == "assets":
            return cmd_assets(args)
        if args.cmd == "verify":
            from .verify import cmd_verify

            return cmd_verify(args)
        return cmd_report(args)
    except UsageError as e:
        return _fail(str(e), EXIT_USAGE)
    except (
        RunPathError,
        LaunchError,
        registry.MissingExtraError,
        registry.DependencyVersionError,
    ) as e:  # one line
        return _fail(str(e), EXIT_FAIL)
    except OSError as e:  # a filesystem problem met mid-run: one line, not a traceback
        return _fail(_os_error_text(e), EXIT_FAIL)
    except KeyboardInterrupt as e:
        what, code = _stop_message(e)
        sys.stderr.write(f"iclr25: {what}; run the same command again to resume (finished seeds are kept)\n")
        return code
    finally:
        warnings.showwarning = old


def _os_error_text(e: OSError) -> str:
    """One line for a filesystem error: what went wrong and the file (a full disk names the file it was writing)."""
    what = e.strerror or str(e)
    if not getattr(e, "filename", None) and e.errno == errno.ENOENT:
        try:
            os.getcwd()
        except OSError:  # relative paths resolve against a folder that no longer exists
            return f"the working folder was deleted while the command ran ({what}); rerun from an existing folder"
    if getattr(e, "filename", None):
        what = f"{what}: {e.filename}"
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            what += " (free some space there, then run the same command again to resume)"
    return what


if __name__ == "__main__":
    sys.exit(main())
