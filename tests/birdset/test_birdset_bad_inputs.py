"""Public functions refuse bad input with a ValueError naming the parameter."""

import pytest
import torch

from iclr25.birdset.features import power_to_db


@pytest.mark.parametrize("top_db", [-1.0, float("nan"), float("inf"), "80", True])
def test_power_to_db_refuses_a_bad_top_db(top_db):
    with pytest.raises(ValueError, match="top_db"):
        power_to_db(torch.rand(2, 4, 4), top_db=top_db)


def test_power_to_db_refuses_bad_amin_and_scope_and_keeps_its_values():
    x = torch.rand(2, 4, 4) + 1e-3
    for amin in (0.0, -1e-10, float("nan")):
        with pytest.raises(ValueError, match="amin"):
            power_to_db(x, amin=amin)
    with pytest.raises(ValueError, match="scope"):
        power_to_db(x, scope="channel")
    db = power_to_db(x, top_db=None)
    assert torch.allclose(db, 10 * torch.log10(x))
    clipped = power_to_db(x, top_db=3.0)
    assert float(clipped.min()) >= float(db.max()) - 3.0 - 1e-5
