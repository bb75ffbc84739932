"""Provenance: the numerical environment (CPU model, ISA, threads, BLAS, versions) is recorded."""

import sys

import torch

from iclr25.harness import provenance as P


def test_collect_records_the_numerical_environment(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    prov = P.collect(preset="quick", wall_s=1.5, device="cpu", load_start=None, cpu_s=2.0, overrides={})
    for key in P.ENVIRONMENT_KEYS:
        assert key in prov, key
    assert prov["isa"] == torch.backends.cpu.get_cpu_capability()
    assert prov["torch_threads"] == torch.get_num_threads()
    assert isinstance(prov["cpu_model"], str) and prov["cpu_model"]
    assert prov["env"].get("OMP_NUM_THREADS") == "1"  # (pytest-xdist also sets PYTHONHASHSEED)
    assert "ATEN_CPU_CAPABILITY" not in prov["env"]
    assert prov["gpu"] is None and prov["device"] == "cpu" and prov["overrides"] == {}
    assert prov["wall_s"] == 1.5 and prov["cpu_s"] == 2.0 and prov["preset"] == "quick"
    for pool in prov["blas"]:
        assert {"user_api", "internal_api", "version", "num_threads"} <= set(pool)


def test_blas_pools_follow_the_thread_limit():
    import numpy  # noqa: F401  (numpy's OpenBLAS is loaded)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        pools = P.blas_pools()
    assert any(p["user_api"] == "blas" for p in pools)
    assert all(p["num_threads"] == 1 for p in pools)
    assert pools == sorted(pools, key=lambda d: "|".join(f"{k}={d[k]}" for k in sorted(d)))


def test_library_versions_only_for_imported_libraries(monkeypatch):
    import scipy

    monkeypatch.delitem(sys.modules, "pymatgen", raising=False)
    v = P.library_versions()
    assert v["scipy"] == scipy.__version__ and "pymatgen" not in v


def test_cpu_model_reads_cpuinfo(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338\n")
    assert P.cpu_model(f) == "Intel(R) Xeon(R) Gold 6338"
    assert P.cpu_model(tmp_path / "missing")  # falls back to platform.processor() / machine()


def test_torch_backends_names_the_builds():
    tb = P.torch_backends()
    assert isinstance(tb, dict)
    assert all(isinstance(v, str) for v in tb.values())
