"""Dynamic Sparse Training versus Dense Training: The Unexpected Winner in Image Corruption Robustness.

Boqian Wu, Qiao Xiao, Shunxin Wang, Nicola Strisciuglio, Mykola Pechenizkiy, Maurice van Keulen,
Decebal Constantin Mocanu, Elena Mocanu — ICLR 2025, https://arxiv.org/abs/2410.03030.

The paper's "DSCR hypothesis": dynamic sparse training (DST) at low sparsity (≈10–50 %) gives higher
accuracy on corrupted images than dense training of the same network. This package provides

* a plug-in DST engine (:class:`DynamicSparseTraining`) for any PyTorch model + optimiser: ERK / uniform
  layer densities, magnitude drop and random / gradient regrow on a cosine-decayed schedule every ΔT
  steps, with the four methods of the paper's unified framework (``set``, ``rigl``, ``mest``, ``granet``);
* the 15 common corruptions × 5 severities with CIFAR-10-C and ImageNet-C constants (:func:`corrupt`,
  :func:`corrupted_test_set`), batched and seeded;
* robustness metrics (robust accuracy, relative gain, mCE) and the frequency-filter RA curves of Sec. 5.2.

Example::

    engine = DynamicSparseTraining(model, optimizer, DSTConfig("rigl", sparsity=0.5, delta_t=100), total_steps)
    loss.backward(); engine.step()          # instead of optimizer.step()
"""

from .corruptions import (
    CIFAR_C,
    COMMON_CORRUPTIONS,
    IMAGENET_C,
    NOISE_CORRUPTIONS,
    SEVERITIES,
    corrupt,
    corrupted_test_set,
    noise_at_level,
    psnr,
)
from .data import digits32
from .models import ResNet18, SmallVGG, build_model
from .robustness import (
    corruption_accuracy,
    corruption_errors,
    mce,
    relative_gain,
    relative_mce,
    robust_accuracy,
    zero_error_corruptions,
)
from .sparsity import (
    DSTConfig,
    DynamicSparseTraining,
    drop_count,
    drop_fraction,
    erk_densities,
    granet_density,
    uniform_densities,
)
from .spectral import frequency_filter, ra_curve
from .training import ClassifierTrainConfig, train_classifier

__all__ = [
    "CIFAR_C",
    "COMMON_CORRUPTIONS",
    "IMAGENET_C",
    "NOISE_CORRUPTIONS",
    "SEVERITIES",
    "DSTConfig",
    "DynamicSparseTraining",
    "ResNet18",
    "SmallVGG",
    "ClassifierTrainConfig",
    "build_model",
    "corrupt",
    "corrupted_test_set",
    "corruption_accuracy",
    "corruption_errors",
    "digits32",
    "drop_count",
    "drop_fraction",
    "erk_densities",
    "frequency_filter",
    "granet_density",
    "mce",
    "noise_at_level",
    "psnr",
    "ra_curve",
    "relative_gain",
    "relative_mce",
    "robust_accuracy",
    "train_classifier",
    "uniform_densities",
    "zero_error_corruptions",
]
