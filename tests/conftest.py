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


# ----------------------------------------------------------------------------------------------- real assets
REQUIRE_ASSETS = (
    os.environ.get("ICLR25_REQUIRE_ASSETS", "") == "1"
)  # .ci/run: a missing asset fails, not skips


def _need_asset(*names: str):
    """The cache folder of each asset, fetched when missing (under a lock: xdist workers share the cache). Skips
    only when fetching is impossible here (no registry), and fails instead under ICLR25_REQUIRE_ASSETS=1."""
    from iclr25 import assets

    out = []
    for name in names:
        try:
            out.append(assets.fetch_asset(name))
        except assets.AssetMissingError as e:
            if REQUIRE_ASSETS:
                pytest.fail(f"real asset unavailable under ICLR25_REQUIRE_ASSETS=1: {e}")
            pytest.skip(f"real asset unavailable: {e}")
    return out[0] if len(out) == 1 else out


@pytest.fixture
def need_asset():
    return _need_asset


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct (fp32, from the cached safetensors copy) and its tokenizer, loaded once per worker."""
    _need_asset("smollm2-135m-instruct")
    from iclr25.assets import load_causal_lm

    return load_causal_lm("smollm2-135m-instruct")
