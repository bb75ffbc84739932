"""Device selection: ``cpu`` by default, ``cuda`` when asked (and present)."""

from __future__ import annotations

import torch

VALID_DEVICES = ("cpu", "cuda", "auto")


def get_device(name: str | torch.device = "cpu") -> torch.device:
    """Resolve ``name`` (``cpu``, ``cuda``, ``cuda:N`` or ``auto``) to a ``torch.device``.

    Raises ``ValueError`` naming the parameter when the device is unknown or not available.
    """
    if isinstance(name, torch.device):
        name = str(name)
    if not isinstance(name, str):
        raise ValueError(f"device must be one of {VALID_DEVICES} (or 'cuda:N'), got {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={name!r} was requested but CUDA is not available on this machine; use 'cpu'"
            )
        return torch.device(name)
    raise ValueError(f"device must be one of {VALID_DEVICES} (or 'cuda:N'), got {name!r}")


def set_cpu_threads(n: int | None) -> None:
    """Use ``n`` CPU threads in torch *and* in numpy/scipy's BLAS and OpenMP pools (threadpoolctl).

    Tiny models run fastest single-threaded on small machines, and with several seeds in worker processes a
    second BLAS thread per process only oversubscribes the cores. ``None`` leaves the libraries' defaults.
    """
    if n is None:
        return
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be an int >= 1 or None, got {n!r}")
    torch.set_num_threads(n)
    from threadpoolctl import threadpool_limits

    _load_blas_pools()
    threadpool_limits(n)  # stays in force for the process (and forked workers)


def _load_blas_pools() -> None:
    """Load the BLAS/OpenMP libraries that scipy and scikit-learn bring (their own OpenBLAS and libgomp) before
    the limit is set: loaded later, inside an experiment, they would run with the machine's core count — and a
    floating-point reduction order that follows the machine instead of the config."""
    for mod in ("scipy.linalg", "sklearn.utils._openmp_helpers"):
        try:
            __import__(mod)
        except ImportError:  # optional here: a system that needs it imports it itself
            pass


def tune_malloc() -> bool:
    """Keep freed memory in glibc's heap instead of returning it to the kernel after every large tensor.

    PyTorch on CPU allocates and frees many large temporaries per step; with glibc's defaults each one is an
    ``mmap``/``munmap`` pair whose pages the kernel must zero again, which showed up as ~25 % system time in
    training loops here. Raising the mmap and trim thresholds removes that. Linux/glibc only; returns whether
    it applied.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = libc.mallopt(m_mmap_threshold, 1 << 30) == 1
    ok &= libc.mallopt(m_trim_threshold, (1 << 31) - 1) == 1
    return bool(ok)


# -- seed workers on GPUs -----------------------------------------------------------------------------------


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` tokens (indices or UUIDs); ``[]`` without CUDA.

    Read from ``CUDA_VISIBLE_DEVICES`` when it is set (an empty value hides every GPU), else counted by torch
    (NVML, without creating a CUDA context)."""
    import os

    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        toks = [t.strip() for t in env.split(",") if t.strip()]
        out = []
        for t in toks:  # CUDA stops at the first invalid entry (e.g. -1)
            if t.startswith("-"):
                break
            out.append(t)
        return out if torch.cuda.is_available() else []
    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def auto_jobs(device: str, gpus: list[str] | None = None, cpus: int | None = None) -> int:
    """``--jobs auto``: one seed worker per visible GPU when the run's device is ``cuda`` (each pinned to its
    own GPU), one per CPU otherwise. A run on one named GPU (``cuda:N``) uses one worker."""
    import os

    if isinstance(device, str) and device.startswith("cuda"):
        if device != "cuda":
            return 1
        g = visible_gpus() if gpus is None else gpus
        return max(1, len(g))
    return max(1, cpus if cpus is not None else (os.cpu_count() or 1))


def worker_gpus(n_workers: int, gpus: list[str]) -> list[str | None]:
    """The GPU (a ``CUDA_VISIBLE_DEVICES`` token) of each of ``n_workers`` seed workers: worker i gets
    ``gpus[i % len(gpus)]`` (more workers than GPUs share them round-robin); ``None`` each without GPUs."""
    if not isinstance(n_workers, int) or isinstance(n_workers, bool) or n_workers < 0:
        raise ValueError(f"n_workers must be an int >= 0, got {n_workers!r}")
    if not gpus:
        return [None] * n_workers
    return [gpus[i % len(gpus)] for i in range(n_workers)]


def pin_gpu(token: str | None) -> None:
    """Make ``token`` this process's only visible GPU (it becomes ``cuda`` / ``cuda:0`` here). Must run before
    CUDA is initialised in the process; ``None`` leaves the GPUs as they are."""
    import os

    if token is None:
        return
    if torch.cuda.is_initialized():
        raise RuntimeError(f"cannot pin this worker to GPU {token}: CUDA is already initialised in it")
    os.environ["CUDA_VISIBLE_DEVICES"] = str(token)


def cuda_in_use() -> bool:
    """Whether CUDA has been initialised in this process (then workers must be spawned, never forked)."""
    import sys

    t = sys.modules.get("torch")
    return bool(t is not None and t.cuda.is_initialized())


# -- torchrun -----------------------------------------------------------------------------------------------

_OWN_GROUP = False


def dist_env() -> tuple[int, int, int]:
    """``(RANK, WORLD_SIZE, LOCAL_RANK)`` as set by ``torchrun`` (``(0, 1, 0)`` outside it)."""
    import os

    def num(name: str, default: int) -> int:
        raw = os.environ.get(name, "")
        try:
            return int(raw) if raw.strip() else default
        except ValueError:
            raise ValueError(f"environment variable {name} must be an integer, got {raw!r}") from None

    return num("RANK", 0), num("WORLD_SIZE", 1), num("LOCAL_RANK", 0)


def init_distributed(device: str = "cpu") -> dict | None:
    """Under ``torchrun`` (``WORLD_SIZE`` > 1): initialise the process group if nobody has (``gloo`` on CPU,
    ``nccl`` on CUDA, each rank on GPU ``LOCAL_RANK``) and return ``{"world_size", "rank", "backend"}``;
    ``None`` for a single process."""
    import torch.distributed as dist

    global _OWN_GROUP
    rank, world, local = dist_env()
    if world <= 1 and not (dist.is_available() and dist.is_initialized()):
        return None
    if not dist.is_initialized():
        cuda = isinstance(device, str) and device.startswith("cuda")
        if cuda:
            torch.cuda.set_device(local)
        dist.init_process_group("nccl" if cuda else "gloo")
        _OWN_GROUP = True
    return {"world_size": dist.get_world_size(), "rank": dist.get_rank(), "backend": str(dist.get_backend())}


def close_distributed() -> None:
    """Destroy the process group if :func:`init_distributed` created it."""
    global _OWN_GROUP
    if _OWN_GROUP:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        _OWN_GROUP = False


def dist_info() -> tuple[int, int]:
    """``(rank, world size)`` of the initialised process group, ``(0, 1)`` without one."""
    import sys

    d = sys.modules.get("torch.distributed")
    if d is not None and d.is_available() and d.is_initialized():
        return d.get_rank(), d.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    """Rank 0 of a ``torchrun`` job (of the process group, else of ``RANK``), or a plain single process."""
    rank, world = dist_info()
    if world > 1:
        return rank == 0
    return dist_env()[0] == 0
