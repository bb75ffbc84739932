"""The ``real`` preset's inputs: Fashion-MNIST as a Si-Blurry online stream (issue #53).

Si-Blurry ("stochastic incremental blurry", Moon et al., ICCV 2023, Sec. 3), :func:`si_blurry_stream`: the classes
are shuffled; ``disjoint_ratio`` of them (N, rounded down to a multiple of the task count) are *disjoint* classes,
cut into ``n_tasks`` tasks at random sorted cut points (so tasks hold uneven, possibly zero, numbers of new
classes); the others (rounded down to a multiple of the task count) are *blurry* classes, split evenly over the
tasks. Every sample joins its class's task; then ``blurry_ratio`` (M) of the blurry classes' samples are taken out
(per task a random share, the shares cut at random sorted points), pooled, shuffled and dealt back to the tasks in
the same per-task counts, so a blurry class also shows up in other tasks. Each task is shuffled and the stream is
the tasks in order — no task boundary is told to the learner.

Data (``iclr25.assets.load_fashion_mnist``, fixed; the seed varies the sample and the stream):

* **stream** (train): per seed ``n_train_per_class`` images of each class drawn without replacement from the
  60,000-image train split by ``derive_seed(seed, "fashion_stream")``;
* **test**: the first ``n_test_per_class`` images of each class of the 10,000-image test split in file order (the
  same for every seed); anytime accuracy is measured on the test images of the classes seen so far.
"""

from __future__ import annotations

import numpy as np
import torch

from iclr25.common.seeding import derive_seed

from .stream import ImageStreamData

N_CLASSES = 10


def si_blurry_stream(
    labels: np.ndarray,
    n_tasks: int = 5,
    disjoint_ratio: float = 0.5,
    blurry_ratio: float = 0.1,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Si-Blurry order of ``labels``' indices: ``(order, task_of_position, info)``.

    ``info``: ``disjoint_classes`` / ``blurry_classes`` (lists per task), ``n_moved`` (blurry samples dealt to
    a random task), ``dropped_classes`` (classes left out by rounding to a multiple of ``n_tasks``; their samples
    are not in the stream)."""
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be a non-empty 1-D integer array, got {y.dtype} {y.shape}")
    classes = np.unique(y)
    if not 1 <= int(n_tasks) <= classes.size:
        raise ValueError(f"n_tasks must be in [1, {classes.size}] (the number of classes), got {n_tasks!r}")
    for name, v in (("disjoint_ratio", disjoint_ratio), ("blurry_ratio", blurry_ratio)):
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v!r}")
    t = int(n_tasks)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(classes)
    n_dis = int(classes.size * disjoint_ratio) // t * t
    n_blu = (classes.size - n_dis) // t * t
    dis, blu = perm[:n_dis], perm[n_dis : n_dis + n_blu]
    cuts = (
        np.concatenate([[0], np.sort(rng.integers(0, n_dis + 1, t - 1)), [n_dis]])
        if n_dis
        else np.zeros(t + 1, int)
    )
    dis_tasks = [dis[cuts[i] : cuts[i + 1]].tolist() for i in range(t)]
    blu_tasks = np.split(blu, t) if n_blu else [np.array([], int)] * t
    task_of_class = {int(c): i for i, cs in enumerate(dis_tasks) for c in cs}
    task_of_class.update({int(c): i for i, cs in enumerate(blu_tasks) for c in cs})
    members: list[list[int]] = [[] for _ in range(t)]
    blurry_members: list[list[int]] = [[] for _ in range(t)]
    blurry_set = {int(c) for c in blu}
    for i in rng.permutation(y.size):
        k = task_of_class.get(int(y[i]))
        if k is None:
            continue
        (blurry_members if int(y[i]) in blurry_set else members)[k].append(int(i))
    n_blurry = sum(len(b) for b in blurry_members)
    n_moved = int(n_blurry * blurry_ratio)
    share = np.diff(np.concatenate([[0], np.sort(rng.integers(0, n_moved + 1, t - 1)), [n_moved]]))
    share = np.minimum(share, [len(b) for b in blurry_members])  # a task cannot give more than it has
    pool: list[int] = []
    for k in range(t):
        pool += blurry_members[k][: share[k]]
        blurry_members[k] = blurry_members[k][share[k] :]
    pool = [pool[j] for j in rng.permutation(len(pool))]
    start = 0
    for k in range(t):
        blurry_members[k] += pool[start : start + share[k]]
        start += share[k]
    order, task = [], []
    for k in range(t):
        idx = np.asarray(members[k] + blurry_members[k], dtype=np.int64)
        idx = idx[rng.permutation(idx.size)]
        order.append(idx)
        task.append(np.full(idx.size, k, dtype=np.int64))
    info = {
        "disjoint_classes": [[int(c) for c in cs] for cs in dis_tasks],
        "blurry_classes": [[int(c) for c in cs] for cs in blu_tasks],
        "n_moved": int(sum(share)),
        "dropped_classes": sorted(int(c) for c in perm[n_dis + n_blu :]),
    }
    return np.concatenate(order), np.concatenate(task), info


def load_split(split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST ``split``: uint8 ``(N, 1, 28, 28)`` and int64 labels."""
    from iclr25.assets import load_fashion_mnist

    x, y = load_fashion_mnist(split)
    return x[:, None].contiguous(), y


def balanced_first(y: np.ndarray, per_class: int) -> np.ndarray:
    """Indices of the first ``per_class`` examples of each class, in file order (sorted)."""
    idx = [np.flatnonzero(y == c)[:per_class] for c in range(N_CLASSES)]
    if any(len(i) < per_class for i in idx):
        raise ValueError(f"per_class must be <= the smallest class count, got {per_class}")
    return np.sort(np.concatenate(idx))


def balanced_sample(y: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """``per_class`` indices of each class drawn without replacement by ``derive_seed(seed, "fashion_stream")``."""
    rng = np.random.default_rng(derive_seed(seed, "fashion_stream"))
    out = []
    for c in range(N_CLASSES):
        pool = np.flatnonzero(y == c)
        if per_class > pool.size:
            raise ValueError(f"per_class must be <= {pool.size} (class {c}), got {per_class}")
        out.append(rng.choice(pool, size=per_class, replace=False))
    return np.sort(np.concatenate(out))


def fashion_stream_data(seed: int, n_train_per_class: int, n_test_per_class: int) -> ImageStreamData:
    """This seed's Fashion-MNIST sample (module docstring) as uint8 ``ImageStreamData`` at 1×28×28."""
    xtr, ytr = load_split("train")
    xte, yte = load_split("test")
    tr = torch.from_numpy(balanced_sample(ytr.numpy(), n_train_per_class, seed))
    te = torch.from_numpy(balanced_first(yte.numpy(), n_test_per_class))
    return ImageStreamData(xtr[tr], ytr[tr], xte[te], yte[te], N_CLASSES)
