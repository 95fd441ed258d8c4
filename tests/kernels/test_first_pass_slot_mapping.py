"""first_pass_slot_mapping (one launch) gives the draft's first-pass tokens the KV slots
vLLM's compute_new_slot_mapping gives them: request r's tokens start at
query_start_loc[r] + r * N, each maps through its request's block-table row, and a position
at or past max_model_len or a rejected token gets -1. Kernel against the torch reference,
the reference against vLLM's own function and against hand-computed values."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.kernels.bass_kernel_testutils import DEVICES
from vllm_bass.kernels.first_pass_slot_mapping import (
    PADDING_SLOT,
    first_pass_slot_mapping,
    reference,
)


def _inputs(query_lens, num_new, block_size, max_len, device, g):
    batch = len(query_lens)
    qsl = torch.zeros(batch + 1, dtype=torch.int32)
    qsl[1:] = torch.cumsum(torch.tensor(query_lens, dtype=torch.int32), 0)
    tokens = int(qsl[-1]) + batch * num_new
    blocks = -(-max_len // block_size)
    table = torch.randint(1, 50_000, (batch, blocks + 3), generator=g, dtype=torch.int32)
    positions = torch.randint(0, max_len + 5, (tokens,), generator=g, dtype=torch.int64)
    rejected = torch.rand(tokens, generator=g) < 0.2
    return [t.to(device) for t in (qsl, positions, rejected, table)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("query_lens,num_new", [([1], 1), ([3, 1, 4, 1, 5], 1),
                                                ([0, 2, 0], 1), ([70, 1, 129], 2),
                                                ([1] * 33, 1)])
@pytest.mark.parametrize("block_size,max_len", [(16, 1024), (32, 100)])
def test_kernel_matches_reference(device, query_lens, num_new, block_size, max_len):
    g = torch.Generator().manual_seed(len(query_lens) * 7 + num_new)
    args = _inputs(query_lens, num_new, block_size, max_len, device, g)
    got = first_pass_slot_mapping(*args, block_size, num_new, max_len)
    want = reference(*args, block_size, num_new, max_len)
    assert torch.equal(got.cpu(), want.cpu())


@pytest.mark.cpu
def test_reference_is_vllms_function():
    from vllm.v1.spec_decode.utils import compute_new_slot_mapping

    g = torch.Generator().manual_seed(5)
    qsl, positions, rejected, table = _inputs([4, 1, 9, 2], 1, 16, 512, "cpu", g)
    cad = SimpleNamespace(block_table_tensor=table, query_start_loc=qsl,
                          naive_query_lens=lambda: qsl[1:] - qsl[:-1])
    theirs = compute_new_slot_mapping(cad, positions, rejected, 16, 1, 512)
    assert torch.equal(reference(qsl, positions, rejected, table, 16, 1, 512), theirs)


@pytest.mark.cpu
def test_reference_semantics():
    qsl = torch.tensor([0, 2, 3], dtype=torch.int32)  # request 0: 2 tokens, request 1: 1
    table = torch.tensor([[7, 8], [9, 10]], dtype=torch.int32)
    positions = torch.tensor([3, 4, 5, 17, 40], dtype=torch.int64)  # N = 1 each
    rejected = torch.tensor([False, True, False, False, False])
    out = reference(qsl, positions, rejected, table, 16, 1, 32)
    assert out.tolist() == [7 * 16 + 3, PADDING_SLOT, 7 * 16 + 5, 10 * 16 + 1, PADDING_SLOT]


@pytest.mark.cpu
def test_shape_checks_name_the_tensor():
    g = torch.Generator().manual_seed(1)
    qsl, positions, rejected, table = _inputs([2, 2], 1, 16, 64, "cpu", g)
    with pytest.raises(AssertionError, match="is_rejected_token_mask"):
        first_pass_slot_mapping(qsl, positions, rejected[:-1], table, 16, 1, 64)
    with pytest.raises(AssertionError, match="block_table rows"):
        first_pass_slot_mapping(qsl, positions, rejected, table[:1], 16, 1, 64)
