import pytest

from iclr25.quantum_peft import unitary as unitary_mod


@pytest.fixture
def node_builds(monkeypatch) -> dict:
    """Counts calls of ``node_columns`` (building an adapter's U / V) from the layer and model modules:
    ``node_builds["n"]``. Tests use it to show the inference cache reuses U, V instead of rebuilding them."""
    calls = {"n": 0}
    real = unitary_mod.node_columns

    def counting(*a, **k):
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr("iclr25.quantum_peft.layer.node_columns", counting)
    monkeypatch.setattr("iclr25.quantum_peft.model.node_columns", counting)
    return calls
