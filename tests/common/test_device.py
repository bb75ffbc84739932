import sys

import pytest
import torch

from iclr25.common.device import get_device, set_cpu_threads, tune_malloc
from iclr25.common.seeding import derive_seed, numpy_rng, seed_everything, torch_generator


def test_device_selection_and_errors():
    assert get_device("cpu") == torch.device("cpu")
    assert get_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="device"):
        get_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            get_device("cuda")


def test_thread_settings_cover_torch_and_blas():
    from threadpoolctl import threadpool_info

    set_cpu_threads(1)
    assert torch.get_num_threads() == 1
    assert all(p["num_threads"] == 1 for p in threadpool_info())
    with pytest.raises(ValueError, match="threads"):
        set_cpu_threads(0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_tune_malloc_applies_on_linux():
    assert tune_malloc() is True


def test_seeding_is_reproducible():
    seed_everything(3)
    a = torch.rand(3)
    seed_everything(3)
    assert torch.equal(a, torch.rand(3))
    assert torch.equal(
        torch.rand(2, generator=torch_generator(5)), torch.rand(2, generator=torch_generator(5))
    )
    assert numpy_rng(1).random() == numpy_rng(1).random()
    assert derive_seed(0, "data") == derive_seed(0, "data") != derive_seed(0, "init")
    with pytest.raises(ValueError, match="seed"):
        seed_everything(-1)


def test_thread_limit_covers_the_blas_pools_scipy_and_sklearn_load_later():
    """scipy and scikit-learn bring their own OpenBLAS / libgomp; loaded after the limit they used to run with
    the machine's core count (a result that moves with the machine)."""
    import subprocess
    import sys

    code = (
        "from iclr25.common.device import set_cpu_threads\n"
        "set_cpu_threads(1)\n"
        "import scipy.linalg, sklearn.cluster\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({i['num_threads'] for i in threadpool_info()}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-1000:]
    assert r.stdout.strip().splitlines()[-1] == "[1]"
