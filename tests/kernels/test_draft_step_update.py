"""draft_step_update advances the real rows of a padded draft step exactly as vLLM's
eagle_step_update_slot_mapping_and_metadata does (position + 1, its slot, seq_len + 1,
clamping at max_model_len) and leaves padding rows with slot -1 and their seq_len; the real
row count is read from device memory, so one launch serves every batch up to its size.
Kernel against the torch reference, and the reference against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from tests.kernels.bass_kernel_testutils import DEVICES
from vllm_bass.kernels.draft_step_update import (
    PADDING_SLOT,
    draft_step_update,
    draft_step_update_ref,
)


def _inputs(rows, real, block_size, max_len, device, g):
    n_blocks = -(-max_len // block_size)
    positions = torch.randint(0, max_len, (rows,), generator=g, dtype=torch.int64)
    positions[:2] = torch.tensor([max_len - 1, max_len - 2])[: min(2, rows)]  # the clamp
    table = torch.randint(1, 10_000, (rows + 3, n_blocks), generator=g, dtype=torch.int32)
    seq = (positions + 1).to(torch.int32)
    num = torch.tensor([real], dtype=torch.int32)
    slot = torch.full((rows,), 12345, dtype=torch.int64)
    return [t.to(device) for t in (positions, table, seq, slot, num)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows,real", [(1, 1), (7, 7), (8, 5), (33, 1), (16, 0)])
@pytest.mark.parametrize("block_size,max_len", [(16, 1024), (32, 100)])
def test_kernel_matches_reference(device, rows, real, block_size, max_len):
    g = torch.Generator().manual_seed(rows * 31 + real)
    got = _inputs(rows, real, block_size, max_len, device, g)
    want = [t.clone() for t in got]
    draft_step_update(*got, block_size=block_size, max_model_len=max_len)
    draft_step_update_ref(*want, block_size=block_size, max_model_len=max_len)
    for name, a, b in zip(("positions", "table", "seq_lens", "slots"), got, want):
        assert torch.equal(a, b), name


@pytest.mark.cpu
def test_reference_semantics():
    positions = torch.tensor([5, 99, 7, 3], dtype=torch.int64)
    table = torch.tensor([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33],
                          [40, 41, 42, 43]], dtype=torch.int32)
    seq = torch.tensor([6, 100, 8, 4], dtype=torch.int32)
    slot = torch.zeros(4, dtype=torch.int64)
    draft_step_update_ref(positions, table, seq, slot, torch.tensor([3], dtype=torch.int32),
                          block_size=32, max_model_len=100)
    assert positions.tolist() == [6, 0, 8, 3]  # row 1 reached max_model_len: clamped
    assert slot.tolist() == [10 * 32 + 6, PADDING_SLOT, 30 * 32 + 8, PADDING_SLOT]
    assert seq.tolist() == [7, 1, 9, 4]  # padding row 3 untouched


@pytest.mark.cpu
def test_empty_batch_is_a_no_op():
    t = torch.zeros(0, dtype=torch.int64)
    draft_step_update(t, torch.zeros((1, 1), dtype=torch.int32), torch.zeros(0, dtype=torch.int32),
                      torch.zeros(0, dtype=torch.int64), torch.zeros(1, dtype=torch.int32),
                      block_size=16, max_model_len=64)
