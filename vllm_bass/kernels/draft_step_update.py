"""Advance a one-token draft step's inputs: position + 1, its KV slot, seq_len + 1.

vLLM's drafter does this with `eagle_step_update_slot_mapping_and_metadata`, whose
real batch size is a launch argument; inside a CUDA graph captured for a padded batch
that argument is frozen, so one graph could not serve every real batch of its size. Here
the real batch size is read from device memory (`num_reqs_ptr`), so the launch can live
inside the drafter's captured step (`vllm_bass.worker.drafter.draft_graphs`): rows at or past
it are padding, get the padding slot (-1, no KV write) and keep their seq_len. The
arithmetic is vLLM's: a position that reaches max_model_len is clamped to 0, writes no
KV and restarts its seq_len at 1 (such drafts are cut by the scheduler anyway).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

PADDING_SLOT = -1


@triton.jit
def _draft_step_update_kernel(
    positions_ptr,  # [rows] int64, read and written
    block_table_ptr,  # [rows, n_blocks] int32
    block_table_stride,
    seq_lens_ptr,  # [rows] int32, read and written
    slot_mapping_ptr,  # [rows] int64, written
    num_reqs_ptr,  # [1] int32: rows below this are real
    BLOCK_SIZE: tl.constexpr,
    MAX_MODEL_LEN: tl.constexpr,
    N_BLOCKS: tl.constexpr,
    PAD: tl.constexpr,
):
    row = tl.program_id(0)
    if row >= tl.load(num_reqs_ptr):
        tl.store(slot_mapping_ptr + row, PAD)
        return
    new_pos = tl.load(positions_ptr + row) + 1
    exceeds = new_pos >= MAX_MODEL_LEN
    pos = tl.where(exceeds, 0, new_pos)
    block = tl.minimum(pos // BLOCK_SIZE, N_BLOCKS - 1)
    block_id = tl.load(block_table_ptr + row.to(tl.int64) * block_table_stride + block)
    slot = tl.where(exceeds, PAD, block_id.to(tl.int64) * BLOCK_SIZE + pos % BLOCK_SIZE)
    seq_len = tl.load(seq_lens_ptr + row)
    new_len = tl.minimum(tl.where(exceeds, 1, seq_len + 1), MAX_MODEL_LEN)
    tl.store(positions_ptr + row, pos)
    tl.store(slot_mapping_ptr + row, slot)
    tl.store(seq_lens_ptr + row, new_len)


def _check(positions, block_table, seq_lens, slot_mapping, num_reqs) -> None:
    rows = positions.shape[0]
    assert positions.dim() == 1 and positions.dtype == torch.int64, positions.dtype
    assert block_table.dim() == 2 and block_table.shape[0] >= rows, block_table.shape
    assert block_table.stride(1) == 1 and block_table.dtype == torch.int32
    assert seq_lens.shape == (rows,) and seq_lens.dtype == torch.int32, seq_lens.dtype
    assert slot_mapping.shape == (rows,) and slot_mapping.dtype == torch.int64
    assert num_reqs.shape == (1,) and num_reqs.dtype == torch.int32


def draft_step_update(positions: torch.Tensor, block_table: torch.Tensor,
                      seq_lens: torch.Tensor, slot_mapping: torch.Tensor,
                      num_reqs: torch.Tensor, block_size: int, max_model_len: int) -> None:
    """In place over `positions.shape[0]` rows (the padded batch): see the module doc."""
    _check(positions, block_table, seq_lens, slot_mapping, num_reqs)
    rows = positions.shape[0]
    if rows == 0:
        return
    _draft_step_update_kernel[(rows,)](
        positions, block_table, block_table.stride(0), seq_lens, slot_mapping, num_reqs,
        BLOCK_SIZE=block_size, MAX_MODEL_LEN=max_model_len, N_BLOCKS=block_table.shape[1],
        PAD=PADDING_SLOT, num_warps=1)


def draft_step_update_ref(positions: torch.Tensor, block_table: torch.Tensor,
                          seq_lens: torch.Tensor, slot_mapping: torch.Tensor,
                          num_reqs: torch.Tensor, block_size: int,
                          max_model_len: int) -> None:
    """Plain torch, the same writes (also the CPU path: no host sync there)."""
    _check(positions, block_table, seq_lens, slot_mapping, num_reqs)
    rows = positions.shape[0]
    if rows == 0:
        return
    real = torch.arange(rows, device=positions.device) < num_reqs.to(positions.device)
    new_pos = positions + 1
    exceeds = new_pos >= max_model_len
    pos = torch.where(exceeds, torch.zeros_like(new_pos), new_pos)
    block = torch.clamp(pos // block_size, max=block_table.shape[1] - 1)
    block_id = block_table[:rows].gather(1, block.unsqueeze(1)).squeeze(1).to(torch.int64)
    slot = torch.where(exceeds, torch.full_like(pos, PADDING_SLOT),
                       block_id * block_size + pos % block_size)
    new_len = torch.clamp(torch.where(exceeds, torch.ones_like(seq_lens), seq_lens + 1),
                          max=max_model_len)
    positions.copy_(torch.where(real, pos, positions))
    seq_lens.copy_(torch.where(real, new_len, seq_lens))
    slot_mapping.copy_(torch.where(real, slot, torch.full_like(slot, PADDING_SLOT)))


reference = draft_step_update_ref
