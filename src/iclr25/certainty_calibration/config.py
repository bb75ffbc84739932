"""The certainty-calibration reproduction's settings: :class:`Config`, its :data:`PRESETS` and the fixed
thresholds of the data-B claim (read by ``experiment.py`` and ``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..common.fields import bounded, check_nested
from ..common.results import ExperimentConfig
from .phrases import phrase_set
from .transport import OTConfig


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: int = 5
    n_items: int = bounded(2000, lo=100)  # data A, per seed
    overconfidence: float = 0.3  # data A: speaker's shift of p before choosing the nearest phrase
    noise: float = 0.05
    phrases: str = "gpt4o_12"
    bins: int = bounded(100, lo=1)  # the paper's M for all LLM results
    # the OT solve (eps, tau, solver, n_bootstrap; the paper's defaults), set with `--set ot.n_bootstrap=100`
    ot: OTConfig = OTConfig()
    digits_scale: float = 3.0  # data B: overconfidence factor on the logistic decision function
    # gECE by M; non-empty (its min and max are compared)
    bins_sweep: tuple[int, ...] = bounded((10, 100), lo=1, each=True)
    # data B: alternative cal/test halvings per seed (diagnostic, not the claim)
    alt_splits: int = bounded(20, lo=0)

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (bins_sweep element-wise); below: lookups, delegated checks
        ps = phrase_set(self.phrases)  # validates the name
        check_nested(self, "ot", OTConfig)  # OTConfig checks its own fields (eps, tau, solver, n_bootstrap)
        self.ot.calibrator(ps, self.bins)._validate_params()  # the calibrator's own checks (bins), up front


# data B thresholds of the `digits_gece_drop` claim (fixed), shared by the claim and the split sweep
DIGITS_MIN_DROP = 0.50
DIGITS_MAX_BRIER_DELTA = 0.0

PRESETS = {
    "smoke": Config(seeds=2, n_items=600, alt_splits=3),
    "quick": Config(),
    "full": Config(n_items=50_000, bins_sweep=(5, 10, 20, 50, 100), ot=OTConfig(n_bootstrap=100)),
}
