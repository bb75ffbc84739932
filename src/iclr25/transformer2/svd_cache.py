"""The singular value decomposition SVF needs, computed once per weight and cached.

SVF (``svf.py``) keeps, for a frozen weight ``A = U diag(σ) Vᵀ`` of shape (rows, cols), only ``σ`` and the *square*
singular-vector factor ``Q`` of the smaller side: ``Q = U`` (rows × rows) when rows ≤ cols, else ``Q = V``
(cols × cols). The other factor is redundant given ``A`` itself (``Vᵀ = diag(1/σ) Uᵀ A``), so it is never stored.

:class:`SVDCache` keys ``(σ, Q)`` by the SHA-256 of the weight's bytes (with its shape, dtype, the compute dtype and
the device type, so a hit gives the numbers a fresh SVD on this device would give), like the official code's
``{model}_decomposed_params.pt`` file but keyed by content rather than by model name — a changed weight can never
pick up a stale decomposition.

* **memory** (always): entries are held *weakly* — they live exactly as long as some :class:`~.svf.SVFLinear` uses
  those tensors (a second ``apply_svf`` on another copy of the same weights shares them: no recomputation and no
  extra memory), and vanish with the last model that uses them, so the cache never keeps a deleted model's
  factors alive.
* **folder** (opt-in, ``SVDCache("~/.cache/iclr25/svf")`` or ``apply_svf(..., svd_cache=folder)``): one
  ``<sha256>.safetensors`` file per matrix (``S``, ``Q``; written atomically), reused across processes. Nothing is
  written unless a folder is given: the library writes no files on its own.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from pathlib import Path

import torch

FORMAT = "iclr25.transformer2.svd/1"


def compute_dtype(weight_dtype: torch.dtype) -> torch.dtype:
    """The dtype the SVD and the SVF factors use: float64 stays, everything else (fp32, bf16, fp16) is float32."""
    return torch.float64 if weight_dtype == torch.float64 else torch.float32


class SVDCache:
    """Where :func:`~.svf.apply_svf` finds ``(σ, Q)`` of a weight (see the module docstring).

    ``folder`` (optional): a directory for persistent ``<sha256>.safetensors`` files (created on first write).
    Counters ``computed`` (SVDs run through this cache), ``memory_hits`` and ``disk_hits`` say what happened.
    """

    def __init__(self, folder: str | os.PathLike | None = None) -> None:
        if folder is not None and not isinstance(folder, (str, os.PathLike)):
            raise ValueError(
                f"folder must be a path (str or os.PathLike) or None, got {type(folder).__name__}"
            )
        self.folder = None if folder is None else Path(folder).expanduser()
        if self.folder is not None and self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"folder must be a directory, got the file {str(self.folder)!r}")
        self._memory: weakref.WeakValueDictionary = (
            weakref.WeakValueDictionary()
        )  # (key, device, name) → tensor
        self.computed = 0
        self.memory_hits = 0
        self.disk_hits = 0

    def __len__(self) -> int:
        """Matrices whose factors are held in memory now (by some live SVF layer)."""
        return sum(1 for k in list(self._memory.keys()) if k[2] == "S")

    def __bool__(self) -> bool:  # an empty cache is still a cache (``if svd_cache:`` must not skip it)
        return True

    def __repr__(self) -> str:
        where = "memory" if self.folder is None else f"memory + {str(self.folder)!r}"
        return f"SVDCache({where}, computed={self.computed}, hits={self.memory_hits}+{self.disk_hits})"

    @staticmethod
    def key(weight: torch.Tensor) -> str:
        """SHA-256 of the weight's bytes, shape, dtype, compute dtype and device type (hex)."""
        w = weight.detach()
        h = hashlib.sha256(
            f"{FORMAT}|{tuple(w.shape)}|{w.dtype}|{compute_dtype(w.dtype)}|{w.device.type}".encode()
        )
        raw = w.contiguous().cpu().reshape(-1).view(torch.uint8)
        h.update(memoryview(raw.numpy()))
        return h.hexdigest()

    def path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{key}.safetensors"

    def get(self, key: str, rows: int, cols: int, dtype: torch.dtype, device: torch.device):
        """``(S, Q)`` for a (rows, cols) weight, or ``None``. A file of the wrong shape/dtype or unreadable is a miss
        (it is overwritten by the next :meth:`put`)."""
        r = min(rows, cols)
        dev = str(device)
        S, Q = self._memory.get((key, dev, "S")), self._memory.get((key, dev, "Q"))
        if S is not None and Q is not None:
            self.memory_hits += 1
            return S, Q
        p = self.path(key)
        if p is None or not p.is_file():
            return None
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            t = load_file(str(p), device="cpu")
        except (OSError, SafetensorError, ValueError, RuntimeError):
            return None
        S, Q = t.get("S"), t.get("Q")
        if (
            S is None
            or Q is None
            or S.shape != (r,)
            or Q.shape != (r, r)
            or S.dtype != dtype
            or Q.dtype != dtype
        ):
            return None
        S, Q = S.to(device), Q.to(device)
        self._remember(key, dev, S, Q)
        self.disk_hits += 1
        return S, Q

    def put(self, key: str, S: torch.Tensor, Q: torch.Tensor, meta: dict[str, str] | None = None) -> None:
        self._remember(key, str(S.device), S, Q)
        p = self.path(key)
        if p is None:
            return
        from safetensors.torch import save_file

        from iclr25.common.io import atomic_write_with

        tensors = {"S": S.detach().cpu().contiguous(), "Q": Q.detach().cpu().contiguous()}
        md = {"format": FORMAT, **(meta or {})}
        atomic_write_with(p, lambda tmp: save_file(tensors, tmp, metadata=md))

    def _remember(self, key: str, dev: str, S: torch.Tensor, Q: torch.Tensor) -> None:
        self._memory[(key, dev, "S")] = S
        self._memory[(key, dev, "Q")] = Q

    def clear_memory(self) -> None:
        self._memory.clear()


#: the cache ``apply_svf`` uses by default: memory only (weak), shared by the whole process
MEMORY_SVD_CACHE = SVDCache()


def as_svd_cache(svd_cache: SVDCache | str | os.PathLike | None) -> SVDCache | None:
    """``SVDCache`` as given, a folder path → ``SVDCache(folder)``, ``None`` → no caching."""
    if svd_cache is None or isinstance(svd_cache, SVDCache):
        return svd_cache
    if isinstance(svd_cache, (str, os.PathLike)):
        return SVDCache(svd_cache)
    raise ValueError(
        f"svd_cache must be an SVDCache, a folder path or None, got {type(svd_cache).__name__}: {svd_cache!r}"
    )


def decompose(weight: torch.Tensor, cache: SVDCache | None = None) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """``(σ, Q, left)`` of ``weight`` (rows, cols): σ descending (r,), ``Q`` the square factor of the smaller side,
    ``left = rows <= cols`` (``Q = U``; else ``Q = V``). Uses/fills ``cache`` when given; a meta weight gets empty
    tensors of the right shapes (no SVD)."""
    rows, cols = weight.shape
    r, left = min(rows, cols), rows <= cols
    cdtype = compute_dtype(weight.dtype)
    if weight.is_meta:
        return (
            torch.empty(r, device="meta", dtype=cdtype),
            torch.empty(r, r, device="meta", dtype=cdtype),
            left,
        )
    key = cache.key(weight) if cache is not None else None
    if cache is not None:
        hit = cache.get(key, rows, cols, cdtype, weight.device)
        if hit is not None:
            return hit[0], hit[1], left
    U, S, Vh = torch.linalg.svd(weight.detach().to(cdtype), full_matrices=False)  # A = U diag(S) Vh
    Q = (U if left else Vh.mT).contiguous()  # the square factor; the other one is dropped here
    del U, Vh
    if cache is not None:
        cache.computed += 1
        cache.put(
            key,
            S,
            Q,
            {"shape": f"{rows},{cols}", "side": "U" if left else "V", "weight_dtype": str(weight.dtype)},
        )
    return S, Q, left
