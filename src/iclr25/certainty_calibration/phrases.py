"""Certainty phrases as Beta distributions on [0, 1] (Wang et al., ICLR 2025, §3.1).

A phrase u ("likely") is not one number but a distribution P_u over the probability simplex; in the binary
case P_u = Beta(α, β). This module bundles the paper's derived phrase tables as small constants (facts with
citations, not the raw survey files) and lets users build their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# BWH "diagnostic certainty scale" radiologist survey (https://rad.bwh.harvard.edu/diagnostic-certainty-scale/),
# as transcribed in the paper's code: share of radiologists putting each phrase in each probability range.
RANGES = (
    (0.0, 1e-6),
    (1e-6, 0.05),
    (0.05, 0.25),
    (0.25, 0.75),
    (0.75, 0.9),
    (0.9, 1 - 1e-6),
    (1 - 1e-6, 1.0),
)
RADIOLOGIST_SHARES: dict[str, tuple[float, ...]] = {
    "very unlikely": (0, 0.401, 0.007, 0, 0, 0, 0),
    "unlikely": (0, 0.38, 0.471, 0, 0, 0, 0),
    "question of": (0, 0.042, 0.056, 0, 0, 0, 0),
    "maybe": (0, 0, 0.035, 0.007, 0, 0, 0),
    "possibly": (0, 0.049, 0.176, 0.169, 0.007, 0, 0),
    "other": (0, 0.106, 0.099, 0.014, 0.014, 0.042, 0.049),
    "may represent": (0, 0.014, 0.12, 0.507, 0.028, 0, 0),
    "suggestive of": (0, 0, 0.014, 0.113, 0.056, 0.028, 0),
    "suspicious for": (0, 0, 0.014, 0.028, 0.049, 0.014, 0),
    "probably": (0, 0.007, 0.007, 0.028, 0.056, 0.021, 0),
    "worrisome for": (0, 0, 0, 0.014, 0.014, 0.014, 0),
    "likely": (0, 0, 0, 0.077, 0.218, 0.056, 0),
    "most likely": (0, 0, 0, 0.028, 0.31, 0.204, 0),
    "highly suggestive of": (0, 0, 0, 0, 0.169, 0.465, 0.028),
    "compatible with": (0, 0, 0, 0.007, 0.007, 0.042, 0.091),
    "consistent with": (0, 0, 0, 0.007, 0.07, 0.113, 0.451),
}
NEAR_POINT = 1e4  # "absent" = Beta(1, 1e4), "present"/"diagnostic of" = Beta(1e4, 1), as in the paper's code

# "Perception of Probability Words" social-media poll (W. Fagen-Ulmschneider, 123 respondents): per-phrase
# Beta(α, β) by the method of moments on answers/100 (derived numbers; the raw CSV carries no licence).
SOCIAL_POLL: dict[str, tuple[float, float]] = {
    "Almost No Chance": (0.07, 1.05),
    "Highly Unlikely": (0.24, 2.00),
    "Little Chance": (0.85, 5.73),
    "Chances are Slight": (1.38, 8.18),
    "Improbable": (0.61, 3.01),
    "Unlikely": (1.37, 5.10),
    "We Doubt": (1.14, 3.97),
    "Probably Not": (1.99, 6.08),
    "About Even": (52.3, 50.9),
    "Better than Even": (16.7, 12.1),
    "Probable": (6.23, 2.98),
    "Probably": (8.25, 3.76),
    "Likely": (10.8, 4.43),
    "We Believe": (5.57, 1.85),
    "Very Good Chance": (10.2, 2.46),
    "Highly Likely": (13.0, 1.92),
    "Almost Certain": (4.81, 0.42),
}

# Phrases and Beta parameters GPT-4o gave when asked for K phrases it commonly uses (paper's LLM study).
GPT4O: dict[int, dict[str, tuple[float, float]]] = {
    4: {"Unlikely": (2, 8), "Maybe": (2, 2), "Highly Likely": (8, 2), "Almost Certain": (9, 1)},
    8: {
        "Definitely": (9, 1),
        "Probably": (7, 3),
        "Likely": (6, 4),
        "Unlikely": (3, 7),
        "Highly Unlikely": (2, 8),
        "Maybe": (5, 5),
        "Almost Certain": (8, 2),
        "Doubtful": (4, 6),
    },
    12: {
        "Definitely": (9, 1),
        "Almost certainly": (8, 2),
        "Highly likely": (7, 3),
        "Probably": (6, 4),
        "Likely": (5, 5),
        "Possibly": (4, 6),
        "Maybe": (3, 7),
        "Unlikely": (2, 8),
        "Highly unlikely": (1, 9),
        "Almost impossible": (1, 10),
        "Certainly not": (1, 11),
        "Impossible": (1, 12),
    },
}


def _check_seed(seed) -> int:
    """Seeds are non-negative ints (numpy's generators refuse negative ones)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return int(seed)


@dataclass(frozen=True)
class PhraseSet:
    """K phrases, each a Beta(α_k, β_k), kept sorted by mean (ties keep the given order)."""

    names: tuple[str, ...]
    alpha: np.ndarray  # (K,)
    beta: np.ndarray  # (K,)

    def __post_init__(self) -> None:
        a, b = np.asarray(self.alpha, float), np.asarray(self.beta, float)
        if not (len(self.names) == a.size == b.size) or a.ndim != 1:
            raise ValueError(
                f"names, alpha and beta must have the same length, got {len(self.names)}, {a.size}, {b.size}"
            )
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"names must be unique, got {self.names}")
        if not (np.all(a > 0) and np.all(b > 0) and np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            raise ValueError("alpha and beta must be finite and > 0 for every phrase")
        order = np.argsort(a / (a + b), kind="stable")
        object.__setattr__(self, "names", tuple(self.names[i] for i in order))
        object.__setattr__(self, "alpha", a[order])
        object.__setattr__(self, "beta", b[order])

    @classmethod
    def from_params(cls, table: Mapping[str, tuple[float, float]]) -> PhraseSet:
        """From ``{phrase: (alpha, beta)}``."""
        names = tuple(table)
        return cls(
            names,
            np.array([table[n][0] for n in names], float),
            np.array([table[n][1] for n in names], float),
        )

    @classmethod
    def from_samples(cls, samples: Mapping[str, Sequence[float]]) -> PhraseSet:
        """Fit each phrase's Beta by the method of moments (``scipy.stats.beta.fit(method='MM')``) to numbers
        in [0, 1] that people (or a model) gave for it."""
        params = {}
        for name, x in samples.items():
            x = np.asarray(x, float).ravel()
            if not np.all(np.isfinite(x)) or np.any((x < 0) | (x > 1)):
                bad = x[~(np.isfinite(x) & (x >= 0) & (x <= 1))]
                raise ValueError(
                    f"samples[{name!r}] must be probabilities in [0, 1] (finite), got {bad.size} value(s) outside, "
                    f"e.g. {bad[:3].tolist()}; rescale percentages to [0, 1] first"
                )
            x = np.clip(
                x, 1e-8, 1 - 1e-8
            )  # 0 and 1 themselves are valid answers; the Beta fit needs the open interval
            if x.size < 2:
                raise ValueError(f"samples[{name!r}] needs at least 2 numbers, got {x.size}")
            a, b, _, _ = stats.beta.fit(x, method="MM", floc=0, fscale=1)
            params[name] = (a, b)
        return cls.from_params(params)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def mean(self) -> np.ndarray:
        return self.alpha / (self.alpha + self.beta)

    @property
    def var(self) -> np.ndarray:
        s = self.alpha + self.beta
        return self.alpha * self.beta / (s * s * (s + 1))

    def index(self, phrases: Iterable[str] | np.ndarray) -> np.ndarray:
        """Phrase names (or already indices) → integer indices into this set."""
        arr = np.asarray(list(phrases) if not isinstance(phrases, np.ndarray) else phrases)
        if arr.dtype.kind in "iu":
            if arr.size and (arr.min() < 0 or arr.max() >= len(self)):
                raise ValueError(
                    f"phrase indices must be in [0, {len(self)}), got range [{arr.min()}, {arr.max()}]"
                )
            return arr.astype(np.int64)
        lut = {n: i for i, n in enumerate(self.names)}
        missing = sorted({p for p in arr.tolist() if p not in lut})
        if missing:
            raise ValueError(f"unknown phrase(s) {missing[:5]}; known: {list(self.names)}")
        return np.fromiter((lut[p] for p in arr.tolist()), np.int64, count=arr.size)

    def parse(self, texts: Iterable[str], fallback: str | None = None) -> np.ndarray:
        """A verbaliser hook: model outputs → phrase indices (case-insensitive, stripped of ' ."').

        Unknown text raises ``ValueError`` unless ``fallback`` names a phrase (the paper's code silently falls
        back to a middle phrase; here that is opt-in).
        """
        lut = {n.lower(): i for i, n in enumerate(self.names)}
        if fallback is not None and fallback.lower() not in lut:
            raise ValueError(f"fallback must be one of {list(self.names)}, got {fallback!r}")
        out = []
        for t in texts:
            k = t.strip(" .\"'").lower()
            if k in lut:
                out.append(lut[k])
            elif fallback is not None:
                out.append(lut[fallback.lower()])
            else:
                raise ValueError(f"text {t!r} is not a phrase of this set {list(self.names)}; pass fallback=")
        return np.asarray(out, np.int64)

    def nearest(self, p: np.ndarray) -> np.ndarray:
        """Index of the phrase whose mean is nearest to each probability in ``p``."""
        p = np.asarray(p, float)
        return np.abs(p[..., None] - self.mean).argmin(-1)


def beta_from_moments(mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Method-of-moments Beta: α = m·c, β = (1−m)·c with c = m(1−m)/v − 1."""
    c = mean * (1 - mean) / var - 1
    return mean * c, (1 - mean) * c


def radiologist_survey() -> PhraseSet:
    """The 16 graded radiology phrases plus "absent"/"present"/"diagnostic of" as near-point masses.

    Each phrase is the mixture of uniforms on the survey ranges with the normalised shares; its Beta comes from
    the mixture's closed-form first two moments (the paper's code fits 1,000 unseeded samples instead).
    """
    lo = np.array([r[0] for r in RANGES])
    hi = np.array([r[1] for r in RANGES])
    m1 = (lo + hi) / 2
    m2 = (lo * lo + lo * hi + hi * hi) / 3
    table: dict[str, tuple[float, float]] = {"absent": (1.0, NEAR_POINT)}
    for name, shares in RADIOLOGIST_SHARES.items():
        w = np.asarray(shares, float)
        w = w / w.sum()
        mean = float(w @ m1)
        var = float(w @ m2) - mean * mean
        a, b = beta_from_moments(mean, var)
        table[name] = (float(a), float(b))
    table["diagnostic of"] = (NEAR_POINT, 1.0)
    table["present"] = (NEAR_POINT, 1.0 + 1e-9)  # distinct name, same distribution as "diagnostic of"
    return PhraseSet.from_params(table)


def social_poll() -> PhraseSet:
    return PhraseSet.from_params(SOCIAL_POLL)


def gpt4o(k: int = 12) -> PhraseSet:
    """GPT-4o's own K-phrase table (K ∈ {4, 8, 12})."""
    if k not in GPT4O:
        raise ValueError(f"k must be one of {sorted(GPT4O)}, got {k!r}")
    return PhraseSet.from_params(GPT4O[k])


SOURCES = {
    "radiologist": radiologist_survey,
    "social_poll": social_poll,
    "gpt4o_4": lambda: gpt4o(4),
    "gpt4o_8": lambda: gpt4o(8),
    "gpt4o_12": lambda: gpt4o(12),
}


def phrase_set(source: str) -> PhraseSet:
    """A bundled phrase set by name: radiologist, social_poll, gpt4o_4, gpt4o_8, gpt4o_12."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {sorted(SOURCES)}, got {source!r}")
    return SOURCES[source]()
