"""BirdSet — training and evaluating bird-sound classifiers the benchmark's way.

Paper: L. Rauch, R. Schwinger, M. Wirth, R. Heinrich, D. Huseljic, M. Herde, J. Lange, S. Kahl, B. Sick,
S. Tomforde, C. Scholz, "BirdSet: A Large-Scale Dataset for Audio Classification in Avian Bioacoustics",
ICLR 2025 — https://arxiv.org/abs/2403.10380.

BirdSet trains on weakly labelled *focal* Xeno-canto recordings and tests on strongly labelled passive acoustic
monitoring *soundscapes* cut into 5-s windows, in three scenarios: dedicated training (DT) on one test set's
species, and medium / large training (MT on XCM, LT on XCL) evaluated through a class mask. Training windows are
centred on detected vocalisation events (event mapping → smart sampling → event decoding), augmented with
mixing, background noise, coloured noise and no-call replacement, and turned into normalised log-mel images;
evaluation uses class-wise mean average precision (cmAP), AUROC and top-1 accuracy with the benchmark's
exclusions. This package implements that protocol on the hub's file layout, the metrics, the front end, the
models, and a procedural bird-audio generator for an offline reproduction of the covariate-shift finding.
"""

from .audio import AudioCache, decode_window, load_audio, read_wav_from_zip, resample, window_frames
from .augment import AugmentConfig, augment_batch
from .data import BirdSetSplit, class_list, load_birdset, write_birdset_layout
from .events import event_mapping, event_window, event_windows, map_events, smart_sampling, soundscape_windows
from .features import MelConfig, MelFrontend, mel_filterbank, power_to_db, spec_augment
from .metrics import (
    apply_class_mask,
    auroc,
    class_mask,
    cmap,
    cmap5,
    evaluate_scores,
    micro_map,
    pcmap,
    topk_accuracy,
)
from .models import SmallCNN, hf_audio_model
from .synthetic import (
    background_bank,
    detect_events,
    make_focal_recordings,
    make_soundscapes,
    make_species,
    xeno_canto_duration,
)
from .train import BirdTrainConfig, evaluate, predict, train

__all__ = [
    "AudioCache",
    "AugmentConfig",
    "BirdSetSplit",
    "BirdTrainConfig",
    "MelConfig",
    "MelFrontend",
    "SmallCNN",
    "apply_class_mask",
    "augment_batch",
    "auroc",
    "background_bank",
    "class_list",
    "class_mask",
    "cmap",
    "cmap5",
    "decode_window",
    "detect_events",
    "evaluate",
    "evaluate_scores",
    "event_mapping",
    "event_window",
    "event_windows",
    "hf_audio_model",
    "load_audio",
    "load_birdset",
    "make_focal_recordings",
    "xeno_canto_duration",
    "make_soundscapes",
    "make_species",
    "map_events",
    "mel_filterbank",
    "micro_map",
    "pcmap",
    "power_to_db",
    "predict",
    "read_wav_from_zip",
    "resample",
    "smart_sampling",
    "soundscape_windows",
    "spec_augment",
    "topk_accuracy",
    "train",
    "write_birdset_layout",
    "window_frames",
]
