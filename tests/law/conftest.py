import pytest
import torch

from iclr25.common.lm import tiny_causal_lm
from iclr25.law.world import World, WorldConfig


@pytest.fixture(scope="session")
def world():
    return World(WorldConfig(subjects=12, first_names=3, relations=2, objects=6, recall_keys=4, recall_values=4,
                             recall_pairs=2, generic_states=6, generic_len=8, seed=0))  # fmt: skip


def make_model(arch: str, vocab: int, seed: int = 0):
    if arch == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(vocab_size=vocab, n_embd=32, n_layer=3, n_head=2, n_positions=32, bos_token_id=1,
                         eos_token_id=2, pad_token_id=0)  # fmt: skip
        torch.manual_seed(seed)
        m = GPT2LMHeadModel(cfg)
    else:
        m = tiny_causal_lm(arch, seed=seed, vocab_size=vocab, hidden=32, layers=3, heads=2, intermediate=64,
                           max_positions=32)  # fmt: skip
    return m.eval()


@pytest.fixture(params=["llama", "gpt2"])
def arch(request):
    return request.param


@pytest.fixture(scope="session")
def mk():
    return make_model
