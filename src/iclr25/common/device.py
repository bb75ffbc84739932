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
    """Tiny models on small machines run fastest single-threaded; ``None`` leaves torch's default."""
    if n is not None:
        torch.set_num_threads(int(n))
