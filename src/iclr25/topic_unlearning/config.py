"""The topic-unlearning reproduction's settings (README, "Reproduction"): :class:`Config` and its :data:`PRESETS`
(read by ``experiment.py`` and ``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..common.fields import bounded, check_nested
from ..common.results import ExperimentConfig
from .corpus import RealCorpusConfig


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: int = 5
    data: str = bounded("synthetic", choices=("synthetic", "real"))
    corpus: RealCorpusConfig = RealCorpusConfig()  # the real corpus and its vocabulary filters (data="real")
    # the synthetic generator (data="synthetic"; on real text the vocabulary and documents come from `corpus`)
    n_words: int = bounded(200, lo=1)
    n_topics: int = bounded(8, lo=1)
    anchor_mass: float = bounded(0.15, lo=0, hi=1, lo_open=True, hi_open=True)
    topic_beta: float = bounded(0.1, lo=0, lo_open=True)
    doc_alpha: float = bounded(0.5, lo=0, lo_open=True)
    doc_len: int = bounded(30, lo=1)
    # training documents (real: the pretraining set S, drawn from the corpus less the 2 × task_docs task documents)
    m: int = bounded(80_000, lo=1)
    m_small: int = bounded(10_000, lo=1)  # the smaller corpus of the cost comparison
    min_doc_freq: float = 0.01  # candidate anchors: document frequency ≥ 1 % of m
    # documents deleted m_f (positive ints): ≤ 0.5 % of m
    newton_grid: tuple[int, ...] = bounded((1, 10, 100, 400), lo=1, each=True)
    capacity_grid: tuple[int, ...] = bounded((1, 3, 10, 30, 100, 300, 1000, 3000), lo=1, each=True)
    # up to the corpus size (m − 1000 documents deleted): the head capacity must be able to fall inside the grid
    head_grid: tuple[int, ...] = bounded(
        (1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 20000, 40000, 79000), lo=1, each=True
    )
    epsilon: float = bounded(1.0, lo=0, lo_open=True)
    delta: float = bounded(1e-5, lo=0, hi=1, lo_open=True, hi_open=True)
    utility_threshold: float = 0.10  # max-column-L1(Ã, A_ref)
    head_tolerance: float = 0.02  # accuracy within 2 points of the noise-free model
    noise_draws: int = bounded(20, lo=1)
    sensitivity_trials: int = bounded(5, lo=1)
    sensitivity_safety: float = 2.0
    task_docs: int = bounded(5000, lo=1)  # labelled documents to fit the head, and as many to test it
    timing_reps: int = bounded(5, lo=1)
    timing_forget: int = bounded(100, lo=1)

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (grids element-wise); below: rules across fields
        check_nested(self, "corpus", RealCorpusConfig)
        if self.m_small >= self.m:
            raise ValueError(f"m_small must be < m, got {self.m_small} >= {self.m}")
        if self.timing_forget >= self.m_small:
            raise ValueError(f"timing_forget must be < m_small={self.m_small}, got {self.timing_forget}")
        if max(self.newton_grid) > 0.005 * self.m + 1e-9:
            raise ValueError(
                f"newton_grid must stay within 0.5% of m={self.m}, got max {max(self.newton_grid)}"
            )
        if max(self.head_grid) >= self.m or max(self.capacity_grid) >= self.m:
            raise ValueError("capacity_grid and head_grid must stay below m")


PRESETS = {
    "smoke": Config(
        seeds=2,
        m=20_000,
        m_small=5_000,
        newton_grid=(1, 10, 100),
        capacity_grid=(1, 10, 100, 1000),
        head_grid=(1, 10, 100, 1000, 19000),
        noise_draws=10,
        sensitivity_trials=2,
        task_docs=2000,
        timing_reps=3,
    ),
    "quick": Config(),
    # real text: 1,210 documents (README, "Real inputs"): 2 × 240 task documents, the other 730 pretrain; the grids
    # are the quick preset's scaled to m (m_small = m/8; m_f ≤ 0.5 % of m; head grid to 600 of 730 documents)
    "real": Config(
        data="real",
        n_topics=10,
        min_doc_freq=0.05,
        m=730,
        m_small=91,
        newton_grid=(1, 2, 3),
        capacity_grid=(1, 3, 10, 30, 100, 300),
        head_grid=(1, 3, 10, 30, 100, 300, 600),
        task_docs=240,
        timing_forget=3,
    ),
    "full": Config(
        n_words=2000,
        n_topics=50,
        m=1_000_000,
        m_small=125_000,
        doc_len=100,
        seeds=10,
        newton_grid=(1, 10, 100, 1000, 5000),
        capacity_grid=(1, 10, 100, 1000, 10000, 30000),
        head_grid=(1, 10, 100, 1000, 10000, 30000, 100000, 300000, 999000),
        task_docs=20000,
    ),
}
