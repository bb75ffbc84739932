"""BirdNET v2.4 (the global 6K classifier): its labels and model file. Running the TFLite model needs
``ai-edge-litert``, which is not a dependency of iclr25."""

from __future__ import annotations

from pathlib import Path

from .store import path

MODEL = "BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite"
LABELS = "BirdNET_GLOBAL_6K_V2.4_Labels.txt"


def birdnet_model_path() -> Path:
    return path("birdnet-v2.4") / MODEL


def load_birdnet_labels() -> list[tuple[str, str]]:
    """The 6,522 output classes as ``(scientific name, common name)``, in the model's output order."""
    out = []
    for line in (path("birdnet-v2.4") / LABELS).read_text(encoding="utf-8").splitlines():
        if line.strip():
            sci, _, common = line.partition("_")
            out.append((sci, common))
    return out
