"""The draft sampler's seeded rows (`sample_draft(keyed=...)`): the draft token at position t
is argmax(processed draft logits + G(seed, t, .)), the noise the target's sample at t uses,
so a draft equal to the target agrees with the target's keyed sample every time; q stays the
draft distribution; unseeded and greedy rows are untouched."""

from types import SimpleNamespace

import pytest
import torch

from vllm_bass.sampling.keyed import keyed_sample
from vllm_bass.worker.drafter.draft_model import sample_draft

pytestmark = pytest.mark.cpu


def _meta(temps):
    return SimpleNamespace(temperature=torch.tensor(temps), top_k=None, top_p=None,
                           generators={})


def test_seeded_draft_rows_take_the_keyed_sample():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(0))
    temps = [0.8, 0.0, 1.2, 0.8]
    rows, seeds, pos = torch.tensor([0, 2]), torch.tensor([5, 6]), torch.tensor([17, 40])
    torch.manual_seed(0)
    plain_tokens, plain_q = sample_draft(logits, _meta(temps))
    torch.manual_seed(0)
    tokens, q = sample_draft(logits, _meta(temps), (rows, seeds, pos))
    scaled = logits / torch.tensor([0.8, 1.0, 1.2, 0.8])[:, None]
    assert tokens[[0, 2]].tolist() == keyed_sample(scaled[[0, 2]], seeds, pos).tolist()
    assert tokens[[1, 3]].tolist() == plain_tokens[[1, 3]].tolist()
    assert int(tokens[1]) == int(logits[1].argmax())
    assert torch.equal(q, plain_q)


def test_a_draft_equal_to_the_target_is_always_accepted():
    """Gumbel coupling: q == p makes the draft's keyed token the target's keyed sample."""
    logits = torch.randn(64, 30, generator=torch.Generator().manual_seed(1))
    seeds, pos = torch.arange(64), torch.arange(64) + 100
    tokens, _ = sample_draft(logits, _meta([0.7] * 64), (torch.arange(64), seeds, pos))
    assert tokens.tolist() == keyed_sample(logits / 0.7, seeds, pos).tolist()
    other = keyed_sample(logits / 0.7, seeds, pos + 1)
    assert tokens.tolist() != other.tolist(), "another position gives other tokens"
