"""Public functions refuse bad input with a ValueError naming the parameter (no broadcast or shape surprise)."""

import pytest
import torch

from iclr25.law.washing import c_ratio, wash_objective


def test_c_ratio_and_objective_refuse_mismatched_shapes():
    delta, C, K = torch.randn(6, 4), torch.eye(4), torch.randn(4, 5)
    assert c_ratio(delta, C) == pytest.approx(float((delta**2).sum() / 4))
    assert wash_objective(delta, K) == pytest.approx(float((delta @ K).pow(2).sum()))
    with pytest.raises(ValueError, match=r"C must have shape \(4, 4\)"):
        c_ratio(delta, torch.eye(6))
    with pytest.raises(ValueError, match="delta must be a"):
        c_ratio(torch.randn(4), C)
    with pytest.raises(ValueError, match="positive trace"):
        c_ratio(delta, torch.zeros(4, 4))
    with pytest.raises(ValueError, match=r"K must have shape \(4, n\)"):
        wash_objective(delta, torch.randn(6, 5))
