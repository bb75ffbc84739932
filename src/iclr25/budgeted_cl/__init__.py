"""aL-SAR: budgeted online continual learning by adaptive layer freezing and frequency-based sampling.

Paper: Minhyuk Seo, Hyunseo Koh, Jonghyun Choi, "Budgeted Online Continual Learning by Adaptive Layer Freezing
and Frequency-based Sampling", ICLR 2025 (https://arxiv.org/abs/2410.15143).

Online class-incremental learners are compared under a total training-FLOPs budget and a memory budget in
bytes (model + exemplars + every extra stored item). aL-SAR spends the FLOPs budget well in two ways: adaptive
layer freezing (aL) freezes, per batch, the leading blocks whose Fisher-information gain per FLOP is lowest given
the batch's informativeness (its last-layer feature gradient), and similarity-aware retrieval (SAR) samples
memory exemplars with probability softmax(−ĉ/T) of their discounted, class-similarity-weighted use frequency, so
under-used samples are replayed. This package implements the budget accounting (cross-checked with
``torch.utils.flop_counter``), the freezer, the sampler with a class-balanced memory, per-sample gradients, the
SDP Gaussian / disjoint streams and an online runner with A_auc / A_last and ER baselines.
"""

from .budget import (
    BlockFlops,
    count_block_flops,
    exemplar_capacity,
    measure_block_flops,
    model_bytes,
    step_flops,
)
from .freezing import AdaptiveLayerFreezer, bfc_decision, bfc_scores, feature_grad_norm, info_per_compute
from .model import BlockStructure, TinyResNet, block_parameters, sar_target_layers
from .persample import PerSampleGradCapture
from .retrieval import (
    ClassBalancedMemory,
    ClassSimilarity,
    FrequencySampler,
    ReservoirMemory,
    balanced_random_indices,
    decay_rate,
    effective_use_frequency,
    retrieval_probabilities,
)
from .runner import (
    METHODS,
    MethodConfig,
    OnlineResult,
    a_auc,
    a_last,
    equal_flops_online_iter,
    frozen_step,
    run_online,
)
from .stream import (
    DigitsData,
    ImageStreamData,
    disjoint_stream,
    gaussian_stream,
    images_to_float,
    load_digits16,
)

__all__ = [
    "AdaptiveLayerFreezer",
    "BlockFlops",
    "ClassBalancedMemory",
    "ClassSimilarity",
    "DigitsData",
    "ImageStreamData",
    "images_to_float",
    "BlockStructure",
    "FrequencySampler",
    "METHODS",
    "MethodConfig",
    "OnlineResult",
    "PerSampleGradCapture",
    "ReservoirMemory",
    "TinyResNet",
    "a_auc",
    "a_last",
    "balanced_random_indices",
    "bfc_decision",
    "bfc_scores",
    "block_parameters",
    "count_block_flops",
    "decay_rate",
    "disjoint_stream",
    "effective_use_frequency",
    "equal_flops_online_iter",
    "exemplar_capacity",
    "feature_grad_norm",
    "frozen_step",
    "gaussian_stream",
    "info_per_compute",
    "load_digits16",
    "measure_block_flops",
    "model_bytes",
    "retrieval_probabilities",
    "run_online",
    "sar_target_layers",
    "step_flops",
]
