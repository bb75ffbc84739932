"""Episodic memories and Similarity-Aware Retrieval (SAR, paper §3.2 Eq. 5–7).

* :class:`ClassBalancedMemory` — aL-SAR's memory: when full, overwrite a random slot of the class with the most
  samples (counting the incoming one; ties → lowest class index). The new slot's use count is reset to 0.
* :class:`ReservoirMemory` — ER's memory (reservoir sampling, Vitter's algorithm R).
* :class:`ClassSimilarity` — per-class EMA of subsampled per-sample gradients ḡ_c, self-similarity σ_c and
  warm-up coefficient a_c, giving S_ab = cos(ḡ_a, ḡ_b)·√(σ_a σ_b)·a_a a_b (diag S_aa = σ_a a_a²), Eq. 5.
* :class:`FrequencySampler` — discounted use counts u_i (per sample) and U_c (per class), effective use frequency
  ĉ_i = [Σ_c S_{y_i c} U_c + u_i (1 − S_{y_i y_i})] / |M| (Eq. 6, clipped at 0) and retrieval probabilities
  p_i = softmax_i(−ĉ_i / T) (Eq. 7); before each retrieval u, U decay by r = b / (|M|·k).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

__all__ = [
    "ClassBalancedMemory",
    "ReservoirMemory",
    "ClassSimilarity",
    "FrequencySampler",
    "effective_use_frequency",
    "retrieval_probabilities",
    "decay_rate",
    "balanced_random_indices",
]


class _Memory:
    def __init__(self, capacity: int, sample_shape: tuple[int, ...], dtype: torch.dtype = torch.uint8):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.x = torch.zeros((self.capacity, *sample_shape), dtype=dtype)
        self.y = torch.full((self.capacity,), -1, dtype=torch.long)
        self.size = 0

    def __len__(self) -> int:
        return self.size

    @property
    def labels(self) -> torch.Tensor:
        return self.y[: self.size]

    def class_counts(self, n_classes: int) -> torch.Tensor:
        return torch.bincount(self.labels, minlength=n_classes)

    @property
    def bytes(self) -> int:
        """Stored exemplar bytes (images at their storage dtype; labels are not charged, as in MEMO)."""
        return int(self.size * self.x[0].numel() * self.x.element_size())


class ClassBalancedMemory(_Memory):
    """Class-balanced replacement (official aL-SAR memory). ``insert`` returns the slot written, or -1."""

    def insert(self, x: torch.Tensor, y: int, generator: torch.Generator | None = None) -> int:
        if self.size < self.capacity:
            slot = self.size
            self.size += 1
        else:
            n_cls = int(max(int(self.y.max()), int(y))) + 1
            counts = self.class_counts(n_cls)
            counts[int(y)] += 1  # count the incoming sample
            c = int(torch.argmax(counts))  # first maximum → lowest class index on ties
            cand = torch.nonzero(self.labels == c).flatten()
            if cand.numel() == 0:  # incoming class is the largest and not stored yet: cannot happen when full
                return -1
            slot = int(cand[torch.randint(cand.numel(), (1,), generator=generator)])
        self.x[slot] = x
        self.y[slot] = int(y)
        return slot


class ReservoirMemory(_Memory):
    """Reservoir sampling: the t-th stream sample (0-based) replaces a uniform slot with probability M/(t+1)."""

    def __init__(self, capacity: int, sample_shape: tuple[int, ...], dtype: torch.dtype = torch.uint8):
        super().__init__(capacity, sample_shape, dtype)
        self.seen = 0

    def insert(self, x: torch.Tensor, y: int, generator: torch.Generator | None = None) -> int:
        t = self.seen
        self.seen += 1
        if self.size < self.capacity:
            slot = self.size
            self.size += 1
        else:
            j = int(torch.randint(t + 1, (1,), generator=generator))
            if j >= self.capacity:
                return -1
            slot = j
        self.x[slot] = x
        self.y[slot] = int(y)
        return slot


def decay_rate(mem_size: int, batch: int, k_coeff: float) -> float:
    """r = b / (|M|·k) when |M| > b, else 0 (no decay)."""
    if k_coeff <= 0:
        raise ValueError(f"k_coeff must be > 0, got {k_coeff}")
    return batch / (mem_size * k_coeff) if mem_size > batch else 0.0


def effective_use_frequency(
    S: torch.Tensor, labels: torch.Tensor, u: torch.Tensor, U: torch.Tensor
) -> torch.Tensor:
    """ĉ_i = [Σ_c S_{y_i c} U_c + u_i (1 − S_{y_i y_i})] / |M|, clipped at 0 (Eq. 6)."""
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] != U.shape[0]:
        raise ValueError(f"S must be (C, C) and U (C,), got {tuple(S.shape)} and {tuple(U.shape)}")
    if labels.shape != u.shape:
        raise ValueError(
            f"labels and u must have the same shape, got {tuple(labels.shape)} and {tuple(u.shape)}"
        )
    m = max(int(u.numel()), 1)
    c = (S[labels] @ U) + u * (1.0 - S[labels, labels])
    return (c / m).clamp_min(0.0)


def retrieval_probabilities(c_hat: torch.Tensor, temperature: float) -> torch.Tensor:
    """p_i = softmax_i(−ĉ_i / T) (Eq. 7)."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return torch.softmax(-c_hat / temperature, dim=0)


def balanced_random_indices(
    labels: torch.Tensor, k: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """k distinct indices drawn with every class getting equal total probability (SAR's warm-up retrieval)."""
    counts = torch.bincount(labels)
    w = 1.0 / counts[labels].double()
    return torch.multinomial(w, min(k, labels.numel()), replacement=False, generator=generator)


class ClassSimilarity:
    """Class gradient similarity S (Eq. 5) from EMAs of subsampled per-sample gradients (rate r_S).

    Sequential per-sample updates for sample j of label y (batch order):
        ḡ_y ← ḡ_y + r(v_j − ḡ_y);  σ_y ← σ_y + r(cos(v_j, ḡ_y) − σ_y);  a_y ← a_y + r(1 − a_y)
    computed in closed form for the whole batch (no loop over samples): with k_j the 1-based rank of j among the
    batch's samples of its class, ḡ after j's update is (1−r)^{k_j} ḡ⁰ + Σ_{i≤j, same class} r(1−r)^{k_j−k_i} v_i.
    """

    def __init__(self, n_classes: int, dim: int, rate: float = 1e-3, device: str | torch.device = "cpu"):
        if n_classes < 1:
            raise ValueError(f"n_classes must be >= 1, got {n_classes}")
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if not 0 < rate <= 1:
            raise ValueError(f"rate must be in (0, 1], got {rate}")
        self.dim, self.rate, self.device = dim, rate, torch.device(device)
        self.n_classes = int(n_classes)
        self.g = torch.zeros(n_classes, dim, dtype=torch.float64, device=self.device)  # ḡ_c
        self.sigma = torch.zeros(n_classes, dtype=torch.float64, device=self.device)  # σ_c
        self.a = torch.zeros(n_classes, dtype=torch.float64, device=self.device)  # a_c (0 until seen)
        self.active = torch.zeros(n_classes, dtype=torch.bool, device=self.device)

    def add_class(self, c: int) -> None:
        """New class c: ḡ = 0, σ = mean of the seen classes' σ (1.0 for the first), a = 0."""
        if not 0 <= c < self.n_classes:
            raise ValueError(f"class index must be in [0, {self.n_classes}), got {c}")
        if bool(self.active[c]):
            return
        self.sigma[c] = float(self.sigma[self.active].mean()) if bool(self.active.any()) else 1.0
        self.g[c] = 0.0
        self.a[c] = 0.0
        self.active[c] = True

    def update(self, v: torch.Tensor, y: torch.Tensor) -> None:
        """Apply the sequential EMA updates of a batch of per-sample gradient vectors v (batch, dim), labels y."""
        v = v.to(self.g)
        if v.ndim != 2 or v.shape[1] != self.dim or v.shape[0] != y.shape[0]:
            raise ValueError(
                f"v must be (batch, {self.dim}) matching y, got {tuple(v.shape)} and {tuple(y.shape)}"
            )
        if not bool(self.active[y].all()):
            raise ValueError(
                f"labels {sorted(set(y[~self.active[y]].tolist()))} have no class state; call add_class"
            )
        r = self.rate
        n = y.shape[0]
        same = y[:, None] == y[None, :]  # (n, n)
        tril = torch.ones(n, n, dtype=torch.bool, device=y.device).tril()
        mask = (same & tril).to(self.g)
        k = mask.sum(1)  # rank of j within its class (1-based)
        q = 1.0 - r
        # weights W[j, i] = r (1−r)^{k_j − k_i} for same-class i ≤ j
        W = r * q ** (k[:, None] - k[None, :]).clamp_min(0) * mask
        g_after = q ** k[:, None] * self.g[y] + W @ v  # ḡ_{y_j} right after sample j
        cos = F.cosine_similarity(v, g_after, dim=1, eps=1e-12)  # (n,)
        # final per-class values: the last sample of each class carries the full update
        n_c = torch.bincount(y, minlength=self.n_classes).to(self.g)
        last_idx = torch.full((self.n_classes,), -1, dtype=torch.long, device=y.device)
        last_idx.scatter_reduce_(0, y, torch.arange(n, device=y.device), reduce="amax")
        has = last_idx >= 0
        self.g[has] = g_after[last_idx[has]]
        # σ_y after its n_c updates: (1−r)^{n_c} σ⁰ + Σ_j r (1−r)^{n_c − k_j} cos_j
        wj = r * q ** (n_c[y] - k)
        self.sigma = q**n_c * self.sigma + torch.zeros_like(self.sigma).index_add_(0, y, wj * cos)
        self.a = 1.0 - q**n_c * (1.0 - self.a)

    def matrix(self) -> torch.Tensor:
        """S_ab = cos(ḡ_a, ḡ_b) √(σ_a σ_b) a_a a_b, diag σ_a a_a² (cosine 0 for a zero ḡ)."""
        gn = F.normalize(self.g, dim=1, eps=1e-12)
        cos = gn @ gn.T
        root = (self.sigma[:, None] * self.sigma[None, :]).clamp_min(0).sqrt()  # √(σ_a σ_b)
        S = cos * root * self.a[:, None] * self.a[None, :]
        S.diagonal().copy_(self.sigma * self.a**2)
        return S

    @property
    def state_bytes(self) -> int:
        """ḡ (C·dim) + σ (C) + a (C) + S (C²), fp32 accounting."""
        C = self.n_classes
        return 4 * (C * self.dim + 2 * C + C * C)


class FrequencySampler:
    """SAR retrieval: discounted use counts + class similarity → softmax sampling of b distinct memory slots.

    ``memory_labels`` are the labels of the memory slots. Call :meth:`on_insert` whenever a slot is written
    (its u is reset to 0), :meth:`sample` to retrieve a batch (decay, probabilities, draw, count the use).
    """

    def __init__(
        self,
        capacity: int,
        n_classes: int,
        temperature: float = 0.125,
        k_coeff: float = 4.0,
        warmup_samples: int = 50,
        device: str | torch.device = "cpu",
    ):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if not k_coeff > 0:
            raise ValueError(f"k_coeff must be > 0, got {k_coeff}")
        if warmup_samples < 0:
            raise ValueError(f"warmup_samples must be >= 0, got {warmup_samples}")
        self.temperature, self.k_coeff, self.warmup_samples = temperature, k_coeff, warmup_samples
        self.u = torch.zeros(capacity, dtype=torch.float64, device=device)  # u_i per slot
        self.U = torch.zeros(n_classes, dtype=torch.float64, device=device)  # U_c per class

    def on_insert(self, slot: int) -> None:
        if slot >= 0:
            self.u[slot] = 0.0

    def probabilities(self, S: torch.Tensor, memory_labels: torch.Tensor) -> torch.Tensor:
        m = memory_labels.numel()
        c = effective_use_frequency(S.to(self.u), memory_labels, self.u[:m], self.U)
        return retrieval_probabilities(c, self.temperature)

    def sample(
        self,
        batch: int,
        S: torch.Tensor,
        memory_labels: torch.Tensor,
        n_seen_samples: int,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Indices of b distinct memory slots (balanced-random during warm-up), counting their use."""
        m = memory_labels.numel()
        b = min(batch, m)
        r = decay_rate(m, batch, self.k_coeff)
        self.u[:m] *= 1.0 - r
        self.U *= 1.0 - r
        if n_seen_samples < self.warmup_samples:
            idx = balanced_random_indices(memory_labels, b, generator)
        else:
            p = self.probabilities(S, memory_labels)
            idx = torch.multinomial(p, b, replacement=False, generator=generator)
        self.u[idx] += 1.0
        self.U.index_add_(0, memory_labels[idx], torch.ones(b, dtype=self.U.dtype, device=self.U.device))
        return idx

    def state_bytes(self, n_classes: int) -> tuple[int, int]:
        """(bytes per exemplar, fixed bytes): one fp32 use count per slot, one per class."""
        return 4, 4 * n_classes
