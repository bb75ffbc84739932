"""Tests run quiet and single-threaded (tiny models are fastest with one thread on small machines)."""

import os

os.environ.setdefault("ICLR25_QUIET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

from iclr25.common.device import tune_malloc  # noqa: E402
from iclr25.common.progress import set_quiet  # noqa: E402

torch.set_num_threads(1)
set_quiet(True)
tune_malloc()


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield
