"""Videos with point labels: the data type, validation, the synthetic generator, and the released-file loader.

Class codes used everywhere in this package: ``MAE = 0`` (macro-expression), ``ME = 1`` (micro-expression).
Intervals are inclusive frame indices ``[start, end]``.

* :class:`Video` — per-frame features ``(T, D)`` or ROI-flow windows ``(T, W, R, 2)``, the point labels
  (one frame inside every instance plus its class) and, when known, the ground-truth intervals and the
  true per-frame intensity.
* :func:`make_synthetic_video` / :func:`make_synthetic_dataset` — videos of "ROI-flow" channels where every
  expression instance has a recorded intensity profile, so pseudo-labels can be scored against the truth.
* :func:`load_released` — the authors' layout: ``<DS>-SLopticalflow.npy`` (object array of per-video
  ``(T, W, R, 2)`` arrays) and ``<DS>-Annotations/{segments,labels,labels_gau_frame,videoname}.npy``. Those
  files are numpy object arrays (pickled); they are read with a restricted unpickler that only rebuilds
  numpy arrays, numpy scalars and plain Python containers — never arbitrary objects.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..common.fields import bounded, check_fields

MAE, ME = 0, 1
CLASS_NAMES = ("MaE", "ME")


@dataclass
class Video:
    """One untrimmed video with point supervision.

    ``features``: ``(T, D)`` or ``(T, W, R, 2)`` float array; ``points``: ``(n,)`` frame index inside each
    instance; ``classes``: ``(n,)`` in {0 = MaE, 1 = ME}; ``segments``: optional ``(n_gt, 2)`` inclusive GT
    intervals with ``gt_classes`` ``(n_gt,)``; ``intensity``: optional ``(T,)`` true intensity in [0, 1].
    """

    name: str
    features: np.ndarray
    points: np.ndarray
    classes: np.ndarray
    segments: np.ndarray | None = None
    gt_classes: np.ndarray | None = None
    intensity: np.ndarray | None = None
    subject: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.features = np.asarray(self.features, dtype=np.float32)
        if self.features.ndim not in (2, 4) or self.features.shape[0] == 0:
            raise ValueError(
                f"features of video {self.name!r} must be a non-empty (T, D) or (T, W, R, 2) array, "
                f"got shape {self.features.shape}"
            )
        if not np.isfinite(self.features).all():
            raise ValueError(f"features of video {self.name!r} contain NaN or inf values")
        T = self.n_frames
        self.points = _frame_indices(self.points, f"points of video {self.name!r}")
        self.classes = _frame_indices(self.classes, f"classes of video {self.name!r}")
        if self.points.shape != self.classes.shape:
            raise ValueError(
                f"points and classes of video {self.name!r} must have the same length, "
                f"got {self.points.shape[0]} and {self.classes.shape[0]}"
            )
        check_points(self.points, T, name=f"points of video {self.name!r}")
        if not np.isin(self.classes, (MAE, ME)).all():
            raise ValueError(
                f"classes of video {self.name!r} must be 0 (MaE) or 1 (ME), got {self.classes.tolist()}"
            )
        if self.segments is not None:
            self.segments = check_segments(self.segments, T, name=f"segments of video {self.name!r}")
            if self.gt_classes is None:
                raise ValueError(f"video {self.name!r}: gt_classes is required when segments are given")
            self.gt_classes = np.asarray(self.gt_classes, dtype=np.int64).reshape(-1)
            if self.gt_classes.shape[0] != self.segments.shape[0]:
                raise ValueError(
                    f"video {self.name!r}: gt_classes has {self.gt_classes.shape[0]} entries for "
                    f"{self.segments.shape[0]} segments"
                )
        if self.intensity is not None:
            inten = np.asarray(self.intensity)
            if inten.shape != (T,) or not np.issubdtype(inten.dtype, np.number) or inten.dtype == np.bool_:
                raise ValueError(
                    f"intensity of video {self.name!r} must be a numeric (T,) = ({T},) array, got shape "
                    f"{inten.shape} dtype {inten.dtype}"
                )
            inten = inten.astype(np.float32)
            if not np.isfinite(inten).all() or inten.min() < 0 or inten.max() > 1:
                bad = inten[~(np.isfinite(inten) & (inten >= 0) & (inten <= 1))]
                raise ValueError(
                    f"intensity of video {self.name!r} must hold finite values in [0, 1] (the true expression "
                    f"intensity), got {bad[:5].tolist()}"
                )
            self.intensity = inten

    @property
    def n_frames(self) -> int:
        return int(self.features.shape[0])

    def flat_features(self) -> np.ndarray:
        """``(T, D)``: ROI-flow windows ``(T, W, R, 2)`` are flattened per frame."""
        return self.features.reshape(self.n_frames, -1)


def _frame_indices(values, name: str) -> np.ndarray:
    """A 1-D int64 array of integer labels: integral floats (``3.0``, as numpy files often store them) are
    accepted, fractional ones (``3.7``), NaN, bools and non-numbers raise instead of being truncated."""
    a = np.asarray(values)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
        raise ValueError(f"{name} must be integer frame indices / class codes, got dtype {a.dtype}")
    a = a.reshape(-1)
    if not np.issubdtype(a.dtype, np.integer):
        bad = a[~np.isfinite(a) | (a != np.round(a))]
        if bad.size:
            raise ValueError(f"{name} must be integers (no fractional frame labels), got {bad[:5].tolist()}")
    return a.astype(np.int64)


def check_points(points: np.ndarray, n_frames: int, name: str = "points") -> np.ndarray:
    """Points must be integer frame indices in ``[0, n_frames)`` (fractional values raise, never truncated)."""
    p = _frame_indices(points, name)
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1 (empty video), got {n_frames}")
    if p.size and (p.min() < 0 or p.max() >= n_frames):
        bad = p[(p < 0) | (p >= n_frames)]
        raise ValueError(f"{name} must lie inside the video [0, {n_frames - 1}], got {bad.tolist()}")
    return p.astype(np.int64)


def check_segments(segments: np.ndarray, n_frames: int | None = None, name: str = "segments") -> np.ndarray:
    """``(n, 2)`` inclusive intervals with ``start <= end`` (and inside the video when ``n_frames`` is given)."""
    s = np.asarray(segments, dtype=np.float64)
    if s.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if s.ndim != 2 or s.shape[1] < 2:
        raise ValueError(f"{name} must have shape (n, 2) [start, end], got {s.shape}")
    s = s[:, :2]
    if not np.isfinite(s).all():
        raise ValueError(f"{name} contain NaN or inf values")
    bad = s[:, 0] > s[:, 1]
    if bad.any():
        raise ValueError(f"{name}: onset must be <= offset, got rows {s[bad].astype(int).tolist()}")
    if n_frames is not None and (s.min() < 0 or s.max() >= n_frames):
        raise ValueError(
            f"{name} must lie inside the video [0, {n_frames - 1}], got range [{s.min():g}, {s.max():g}]"
        )
    return s.astype(np.int64)


# ---------------------------------------------------------------------------------------------------------------
# Synthetic "ROI-flow" videos with true per-frame intensity
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyntheticSpec:
    """Generator parameters. ``hard()`` gives the harder variant (points uniform in the instance, ME near noise)."""

    n_frames: int = 600
    n_channels: int = bounded(12, lo=12)  # 4 MaE, 4 ME, 4 distractor channels
    noise: float = bounded(0.25, lo=0)
    gap: tuple[int, int] = (25, 90)
    mae_len: tuple[int, int] = (15, 120)
    me_len: tuple[int, int] = (6, 15)
    mae_amp: tuple[float, float] = (1.2, 2.5)
    me_amp: tuple[float, float] = (0.8, 1.4)
    p_me: float = 0.4
    apex_pos: tuple[float, float] = (0.3, 0.6)
    distractors: tuple[int, int] = (2, 5)
    distractor_len: tuple[int, int] = (3, 8)
    distractor_amp: tuple[float, float] = (1.5, 3.0)
    # "gaussian": N(centre, (len/6)^2) clipped inside; "uniform": anywhere inside
    point_mode: str = bounded("gaussian", choices=("gaussian", "uniform"))

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the rule across fields
        if self.n_frames < self.gap[1] + self.mae_len[1] + 10:
            raise ValueError(
                f"n_frames={self.n_frames} is too short for gap={self.gap} and mae_len={self.mae_len}"
            )

    @classmethod
    def hard(cls, **kw) -> SyntheticSpec:
        """Point labels uniform in the instance, ME amplitude near the noise level, longer MaE."""
        base = dict(point_mode="uniform", me_amp=(0.3, 0.5), mae_len=(30, 150))
        base.update(kw)
        return cls(**base)


def _profile(length: int, apex_frac: float) -> np.ndarray:
    """sin(π/2 · ramp) rising to 1 at the apex and falling back: ``(length,)`` in (0, 1]."""
    t = np.arange(length, dtype=np.float64)
    a = round(apex_frac * (length - 1))  # the apex frame (intensity exactly 1)
    up = np.clip((t + 1) / (a + 1), 0, 1)
    down = np.clip((length - t) / (length - a), 0, 1)
    return np.sin(np.pi / 2 * np.where(t <= a, up, down))


def make_synthetic_video(
    rng: np.random.Generator, spec: SyntheticSpec = SyntheticSpec(), name: str = "v"
) -> Video:
    """One video; ``intensity`` holds the true expression profile (0 on neutral frames)."""
    T, D = spec.n_frames, spec.n_channels
    x = rng.normal(0.0, spec.noise, size=(T, D))
    intensity = np.zeros(T)
    segs, cls, points, apexes = [], [], [], []
    t = int(rng.integers(spec.gap[0], spec.gap[1] + 1))
    while True:
        c = ME if rng.random() < spec.p_me else MAE
        lo, hi = spec.me_len if c == ME else spec.mae_len
        length = int(rng.integers(lo, hi + 1))
        if t + length >= T - 5:
            break
        prof = _profile(length, float(rng.uniform(*spec.apex_pos)))
        amp = float(rng.uniform(*(spec.me_amp if c == ME else spec.mae_amp)))
        ch = int(rng.integers(4, 8) if c == ME else rng.integers(0, 4))
        x[t : t + length, ch] += amp * prof
        intensity[t : t + length] = prof
        s, e = t, t + length - 1
        if spec.point_mode == "gaussian":
            p = int(np.clip(np.round(rng.normal((s + e) / 2, length / 6)), s, e))
        else:
            p = int(rng.integers(s, e + 1))
        segs.append((s, e))
        cls.append(c)
        points.append(p)
        apexes.append(s + int(np.argmax(prof)))
        t = e + 1 + int(rng.integers(spec.gap[0], spec.gap[1] + 1))
    for _ in range(int(rng.integers(spec.distractors[0], spec.distractors[1] + 1))):
        length = int(rng.integers(spec.distractor_len[0], spec.distractor_len[1] + 1))
        s = int(rng.integers(0, T - length))
        ch = int(rng.integers(8, 12))
        x[s : s + length, ch] += float(rng.uniform(*spec.distractor_amp)) * np.sin(
            np.pi * (np.arange(length) + 0.5) / length
        )
    segs_a = np.asarray(segs, dtype=np.int64).reshape(-1, 2)
    return Video(
        name=name,
        features=x.astype(np.float32),
        points=np.asarray(points),
        classes=np.asarray(cls),
        segments=segs_a,
        gt_classes=np.asarray(cls),
        intensity=intensity.astype(np.float32),
        subject=name.rsplit("_", 1)[0],
        meta={"apexes": np.asarray(apexes)},
    )


def make_synthetic_dataset(
    n_videos: int,
    seed: int,
    spec: SyntheticSpec = SyntheticSpec(),
    prefix: str = "syn",
    videos_per_subject: int = 1,
) -> list[Video]:
    """``n_videos`` independent videos (deterministic in ``seed``); names ``<prefix><subject>_<k>``."""
    if n_videos < 1:
        raise ValueError(f"n_videos must be >= 1, got {n_videos}")
    rng = np.random.default_rng(seed)
    return [
        make_synthetic_video(
            rng, spec, name=f"{prefix}{i // videos_per_subject:03d}_{i % videos_per_subject}"
        )
        for i in range(n_videos)
    ]


# ---------------------------------------------------------------------------------------------------------------
# The authors' released feature / annotation files
# ---------------------------------------------------------------------------------------------------------------

_SAFE_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("builtins", "list"),
    ("builtins", "tuple"),
    ("builtins", "dict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("_codecs", "encode"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name}: only numpy arrays and containers are allowed"
        )


def safe_load_npy(path: str | Path) -> np.ndarray:
    """``np.load`` for ``.npy`` files that may hold object arrays, without executing arbitrary pickles."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"path {str(path)!r} does not exist")
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read_header = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        _shape, _fortran, dtype = read_header(f)
        if not dtype.hasobject:
            f.seek(0)
            return np.load(f, allow_pickle=False)
        arr = _NumpyOnlyUnpickler(io.BytesIO(f.read()), encoding="latin1").load()
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{str(path)!r} does not hold a numpy array")
    return arr


def default_subject(video_name: str) -> str:
    """Subject id of a released video name: ``casme_015_0401`` → ``casme_015`` (the LOSO grouping of the code)."""
    parts = str(video_name).split("_")
    return "_".join(parts[:2]) if len(parts) >= 3 else parts[0]


def load_released(
    root: str | Path, dataset: str, subject_fn=default_subject, load_features: bool = True
) -> list[Video]:
    """Videos from ``root/<dataset>-SLopticalflow.npy`` and ``root/<dataset>-Annotations/``.

    Per video: features ``(T, W, R, 2)``; ``segments.npy`` rows ``[start, end(, apex)]`` (inclusive);
    ``labels.npy`` class names ``'Macro'`` / ``'Micro'`` per instance; ``labels_gau_frame.npy`` the point frame
    per instance; ``videoname.npy`` the names. Rows with onset > offset and points outside a video raise
    ``ValueError``.
    """
    root = Path(root)
    ann = root / f"{dataset}-Annotations"
    if not ann.is_dir():
        raise ValueError(f"annotation folder {str(ann)!r} does not exist (dataset={dataset!r})")
    segments = safe_load_npy(ann / "segments.npy")
    labels = safe_load_npy(ann / "labels.npy")
    points = safe_load_npy(ann / "labels_gau_frame.npy")
    names = safe_load_npy(ann / "videoname.npy")
    feats = safe_load_npy(root / f"{dataset}-SLopticalflow.npy") if load_features else None
    n = len(names)
    for nm, arr in (("segments", segments), ("labels", labels), ("labels_gau_frame", points)):
        if len(arr) != n:
            raise ValueError(f"{nm}.npy has {len(arr)} videos but videoname.npy has {n}")
    if feats is not None and len(feats) != n:
        raise ValueError(f"{dataset}-SLopticalflow.npy has {len(feats)} videos but videoname.npy has {n}")
    out = []
    for i in range(n):
        name = str(names[i])
        cls = np.asarray(
            [_class_code(lab, name) for lab in np.asarray(labels[i]).reshape(-1)], dtype=np.int64
        )
        seg = (
            np.asarray(segments[i], dtype=np.float64).reshape(len(cls), -1) if len(cls) else np.zeros((0, 2))
        )
        f = (
            np.asarray(feats[i], dtype=np.float32)
            if feats is not None
            else np.zeros((int(seg.max(initial=0)) + 2, 1))
        )
        out.append(
            Video(
                name=name,
                features=f,
                points=np.asarray(points[i]).reshape(-1),
                classes=cls,
                segments=seg[:, :2],
                gt_classes=cls,
                subject=subject_fn(name),
            )
        )
    return out


def _class_code(label, video: str) -> int:
    s = label.decode() if isinstance(label, bytes) else str(label)
    if s.lower().startswith("macro"):
        return MAE
    if s.lower().startswith("micro"):
        return ME
    raise ValueError(f"labels.npy of video {video!r}: class must be 'Macro' or 'Micro', got {s!r}")


def with_points(video: Video, points: np.ndarray) -> Video:
    """A copy of ``video`` with other point labels (same classes)."""
    return replace(video, points=np.asarray(points))
