"""The draft's first-pass KV slots in one launch.

vLLM's `compute_new_slot_mapping` (vllm/v1/spec_decode/utils.py) maps each token of the
drafter's first pass (the target's scheduled tokens plus N new slots a request) to its KV
slot: the request's block-table entry for the position, -1 past max_model_len or for a
rejected token. As torch it is ~10 small launches: 0.41 s of the engine core's 5.2 s of
host time in session 41's py-spy of a host-bound H200 BASS run (batch 4 / 16), 8%. Here one
program per request walks its tokens (request r's start at query_start_loc[r] + r * N).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_bass.kernels.warmup import compile_ahead

PADDING_SLOT = -1  # vLLM's PADDING_SLOT_ID: no KV write
_PAD = tl.constexpr(PADDING_SLOT)  # what a kernel may read of a global
BLOCK = 64  # tokens a program handles per iteration
# values and alignment unspecialised: one binary for every batch (Triton's defaults compile
# another variant for an argument == 1 or % 16 == 0, inside a serving step)
_RUNTIME_ARGS = ["query_start_loc_ptr", "positions_ptr", "rejected_ptr", "block_table_ptr",
                 "block_table_stride", "out_ptr", "num_new", "block_size", "max_model_len"]
# the drafter's dtypes (vLLM 0.27.1): query_start_loc, positions, the rejected mask, the
# block table, the slots
DTYPES = (torch.int32, torch.int64, torch.bool, torch.int32, torch.int64)
_usable = True  # False once a warm-up failed to compile: vLLM's torch form serves


@triton.jit(do_not_specialize=_RUNTIME_ARGS, do_not_specialize_on_alignment=_RUNTIME_ARGS)
def _first_pass_slot_mapping_kernel(
    query_start_loc_ptr,  # [batch + 1] int32: the target's query offsets
    positions_ptr,  # [tokens] int64: each first-pass token's position
    rejected_ptr,  # [tokens] bool: a rejected draft's slot (no KV write)
    block_table_ptr,  # [batch, blocks] int32
    block_table_stride,
    out_ptr,  # [tokens] int64
    num_new,  # slots each request gains (N)
    block_size,
    max_model_len,
    BLOCK: tl.constexpr,
):
    req = tl.program_id(0)
    start = tl.load(query_start_loc_ptr + req) + req * num_new
    end = tl.load(query_start_loc_ptr + req + 1) + (req + 1) * num_new
    row = block_table_ptr + req.to(tl.int64) * block_table_stride
    for first in range(start, end, BLOCK):
        idx = first + tl.arange(0, BLOCK)
        mask = idx < end
        pos = tl.load(positions_ptr + idx, mask=mask, other=0)
        clamped = tl.minimum(pos, max_model_len - 1)
        block = tl.load(row + clamped // block_size, mask=mask, other=0).to(tl.int64)
        slot = block * block_size + clamped % block_size
        rejected = tl.load(rejected_ptr + idx, mask=mask, other=0)
        slot = tl.where((pos >= max_model_len) | (rejected != 0), _PAD, slot)
        tl.store(out_ptr + idx, slot, mask=mask)


def _check(query_start_loc, positions, rejected, block_table) -> None:
    assert query_start_loc.dim() == 1 and query_start_loc.dtype == torch.int32, (
        "query_start_loc", query_start_loc.dtype)
    assert positions.dim() == 1 and positions.stride(0) == 1, ("positions", positions.shape)
    assert rejected.shape == positions.shape and rejected.dtype == torch.bool, (
        "is_rejected_token_mask", rejected.shape, rejected.dtype)
    assert block_table.dim() == 2 and block_table.stride(1) == 1, (
        "block_table", block_table.shape)
    assert block_table.shape[0] == query_start_loc.shape[0] - 1, (
        "block_table rows", block_table.shape[0], query_start_loc.shape[0] - 1)


def first_pass_slot_mapping(query_start_loc: torch.Tensor, positions: torch.Tensor,
                            rejected: torch.Tensor, block_table: torch.Tensor, block_size: int,
                            num_new: int, max_model_len: int) -> torch.Tensor:
    """The slots of `positions` (one launch; `reference` is vLLM's torch form)."""
    _check(query_start_loc, positions, rejected, block_table)
    out = torch.empty(positions.shape[0], dtype=torch.int64, device=positions.device)
    batch = block_table.shape[0]
    if batch == 0 or positions.shape[0] == 0:
        return out
    _first_pass_slot_mapping_kernel[(batch,)](
        query_start_loc, positions, rejected, block_table, block_table.stride(0), out,
        num_new, block_size, max_model_len, BLOCK=BLOCK, num_warps=1)
    return out


def reference(query_start_loc, positions, rejected, block_table, block_size, num_new,
              max_model_len) -> torch.Tensor:
    """vLLM's `compute_new_slot_mapping`, over the same arguments."""
    _check(query_start_loc, positions, rejected, block_table)
    batch, blocks_per_req = block_table.shape
    counts = query_start_loc[1:] - query_start_loc[:-1] + num_new
    req = torch.repeat_interleave(torch.arange(batch, device=positions.device), counts,
                                  output_size=positions.shape[0])
    clamped = torch.clamp(positions, max=max_model_len - 1)
    blocks = block_table.reshape(-1)[req * blocks_per_req + clamped // block_size]
    slots = blocks * block_size + clamped % block_size
    slots.masked_fill_(positions >= max_model_len, PADDING_SLOT)
    slots.masked_fill_(rejected, PADDING_SLOT)
    return slots


def usable() -> bool:
    return _usable


def warm_up(device: torch.device) -> bool:
    """Compile the one binary without launching (Triton's `warmup`), so no serving step
    compiles; a Triton that cannot compile it switches this process to vLLM's torch form
    (never fails the engine)."""
    global _usable
    kernel, args, meta = warm_up_launch()
    _usable = compile_ahead(kernel, args, device, "first-pass slot-mapping", **meta)
    return _usable


def warm_up_launch() -> tuple:
    """(kernel, arguments with dtypes for tensors, meta) of the engine's one binary: what
    `warm_up` compiles and the CPU compile test compiles for sm_90."""
    return (_first_pass_slot_mapping_kernel, (*DTYPES[:4], 8, DTYPES[4], 1, 16, 4096),
            dict(BLOCK=BLOCK, num_warps=1))
