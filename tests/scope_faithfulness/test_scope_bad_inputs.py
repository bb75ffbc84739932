"""Public functions refuse bad input with a ValueError naming the parameter."""

import pytest
import torch

from iclr25.scope_faithfulness.preference import dpo_sigmoid_loss


@pytest.mark.parametrize("beta", [-0.1, 0.0, float("nan"), float("inf"), True])
def test_dpo_loss_refuses_a_bad_beta(beta):
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="beta"):
        dpo_sigmoid_loss(x, x, x, x, beta=beta)


def test_dpo_loss_refuses_mismatched_shapes_and_matches_the_formula():
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="one shape"):
        dpo_sigmoid_loss(x, torch.zeros(2), x, x)
    pc, pr, rc, rr = torch.tensor([1.0]), torch.tensor([-1.0]), torch.tensor([0.0]), torch.tensor([0.0])
    assert float(dpo_sigmoid_loss(pc, pr, rc, rr, beta=0.5)) == pytest.approx(
        -torch.nn.functional.logsigmoid(torch.tensor(1.0)).item()
    )
