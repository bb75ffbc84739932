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
