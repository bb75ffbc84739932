"""Where a result comes from: commit, date, machine, load — stored in every claims.json (``provenance``).

Besides the run's own facts (commit, date, wall/CPU time, load) the block describes the numerical environment,
because the same commit and library versions can still give different floating-point results on another
machine: the CPU model, the instruction set ATen dispatches to (``isa``: AVX2, AVX512 …), torch's intra-/inter-op
thread counts, the BLAS/OpenMP pools numpy and scipy use (threadpoolctl), the BLAS/oneDNN builds inside torch,
the thread and ISA environment variables that were set, and the versions of the libraries the run imported.
:func:`environment` returns that part alone (``iclr25 verify`` compares it with a reference's).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

_COMMIT: str | None = None


def git_commit() -> str:
    """The commit of the checkout this package runs from (``+dirty`` when tracked files under ``src`` differ),
    or ``"unknown"`` (an installed wheel, no git, or git too slow)."""
    global _COMMIT
    if _COMMIT is not None:
        return _COMMIT
    _COMMIT = "unknown"
    here = Path(__file__).resolve()
    root = next((p for p in here.parents if (p / ".git").exists()), None)
    if root is None:
        return _COMMIT
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, env=env
        )
        if head.returncode != 0:
            return _COMMIT
        commit = head.stdout.strip()
        diff = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "HEAD", "--", "src"],
            capture_output=True,
            timeout=20,
            env=env,
        )
        _COMMIT = commit + ("+dirty" if diff.returncode == 1 else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return _COMMIT


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# Libraries whose version is recorded when the run imported them: (module name, distribution name).
LIBRARIES = (
    ("scipy", "scipy"),
    ("sklearn", "scikit-learn"),
    ("transformers", "transformers"),
    ("tokenizers", "tokenizers"),
    ("peft", "peft"),
    ("datasets", "datasets"),
    ("accelerate", "accelerate"),
    ("safetensors", "safetensors"),
    ("torchvision", "torchvision"),
    ("torchaudio", "torchaudio"),
    ("gymnasium", "gymnasium"),
    ("pymatgen", "pymatgen"),
    ("pandas", "pandas"),
    ("matplotlib", "matplotlib"),
    ("threadpoolctl", "threadpoolctl"),
)

# Environment variables that change thread counts, instruction sets or reduction order (recorded when set).
ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "MKL_CBWR",
    "PYTHONHASHSEED",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_VISIBLE_DEVICES",
)

# The keys :func:`environment` fills in, in the order ``iclr25 verify`` lists differences.
ENVIRONMENT_KEYS = (
    "git_commit",
    "cpu_model",
    "isa",
    "cpu_count",
    "torch_threads",
    "torch_interop_threads",
    "blas",
    "torch_backends",
    "env",
    "gpu",
    "python",
    "torch",
    "numpy",
    "libraries",
    "platform",
)


def cpu_model(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere), or ``"unknown"``."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and val.strip():
                    return val.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def blas_pools() -> list[dict[str, Any]]:
    """numpy/scipy's BLAS and OpenMP pools as threadpoolctl sees them: ``internal_api``, ``version``,
    ``num_threads`` (and ``architecture`` where reported), sorted so the list does not depend on load order."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    pools = []
    for info in threadpool_info():
        d = {k: info.get(k) for k in ("user_api", "internal_api", "version", "num_threads")}
        if info.get("architecture"):
            d["architecture"] = info["architecture"]
        if info.get("threading_layer"):
            d["threading_layer"] = info["threading_layer"]
        pools.append(d)
    return sorted(pools, key=lambda d: "|".join(f"{k}={d[k]}" for k in sorted(d)))


def torch_backends() -> dict[str, Any]:
    """The math libraries built into torch (MKL, oneDNN versions and the parallel backend), from
    ``torch.__config__.parallel_info()``; ``{}`` when it cannot be read."""
    import torch

    out: dict[str, Any] = {}
    try:
        info = torch.__config__.parallel_info()
    except Exception:  # an unusual build: nothing recorded rather than a failed run
        return out
    for line in info.splitlines():
        line = line.strip()
        if line.startswith("ATen parallel backend:"):
            out["parallel"] = line.split(":", 1)[1].strip()
        elif "Math Kernel Library Version" in line:
            out["mkl"] = line.split("Version", 1)[1].split("-Product")[0].strip()
        elif line.startswith("Intel(R) MKL-DNN") or line.startswith("oneDNN"):
            out["onednn"] = line.split("(Git")[0].split("MKL-DNN")[-1].strip()
    return out


def library_versions() -> dict[str, str]:
    """Versions of the libraries in :data:`LIBRARIES` this process has imported (cheap: no imports here)."""
    from importlib import metadata

    out = {}
    for mod, dist in LIBRARIES:
        if mod in sys.modules:
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                v = getattr(sys.modules[mod], "__version__", None)
                if isinstance(v, str):
                    out[dist] = v
    return out


def environment(device: str = "cpu") -> dict[str, Any]:
    """The part of the provenance that can change floating-point results with the same code (see the module
    docstring): keys :data:`ENVIRONMENT_KEYS`."""
    import numpy
    import torch

    try:
        isa = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        isa = "unknown"
    gpu = None
    if str(device).startswith("cuda") and torch.cuda.is_available():
        try:
            gpu = torch.cuda.get_device_name(torch.device(device))
        except (RuntimeError, AssertionError, ValueError):
            gpu = "unknown"
    return {
        "git_commit": git_commit(),
        "cpu_model": cpu_model(),
        "isa": isa,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "blas": blas_pools(),
        "torch_backends": torch_backends(),
        "env": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
        "gpu": gpu,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "libraries": library_versions(),
        "platform": f"{sys.platform}-{platform.machine()}",
    }


def collect(
    *,
    preset: str,
    wall_s: float,
    device: str,
    load_start: list[float] | None,
    cpu_s: float | None = None,
    **extra,
) -> dict[str, Any]:
    """The provenance block of a finished run (``load_avg`` = 1/5/15-minute load at the start and the end),
    with the numerical environment of :func:`environment` (threads as they are at the end of the run)."""
    from ..errors import package_version

    env = environment(device)
    prov = {
        "git_commit": env.pop("git_commit"),
        "date_utc": utc_now(),
        "wall_s": round(float(wall_s), 3),
        "cpu_s": None if cpu_s is None else round(float(cpu_s), 3),
        "load_avg_start": load_start,
        "load_avg_end": load_average(),
        "cpu_count": env.pop("cpu_count"),
        "preset": preset,
        "device": device,
        "iclr25": package_version(),
        "python": env.pop("python"),
        "torch": env.pop("torch"),
        "numpy": env.pop("numpy"),
        "platform": env.pop("platform"),
        **env,
    }
    prov.update(extra)
    return prov
