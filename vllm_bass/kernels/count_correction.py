"""vLLM's async spec-decode count correction in one launch.

`update_num_computed_tokens_for_batch_change` (vllm/v1/spec_decode/utils.py) fixes the
device copy of each request's computed-token count after a verification: under async
scheduling the host counts every draft as accepted. vLLM wraps it in
`torch.compile(dynamic=True)`, which recompiled inside serving steps (see
`patches/eager_count_correction`); its plain form is ~12 small launches, 0.26 s of the
engine core's 5.2 s of host time in session 41's py-spy of a host-bound batch-4/16 BASS run
on the H200 (~5%). Here it is one program over the whole batch: every row's gathers are
loaded before any row is written (rows gather from rows the same launch overwrites; the
barrier orders them), so the block holds the runner's whole request capacity (a constexpr
per engine, one binary, compiled by `warm_up`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_bass.kernels.warmup import compile_ahead

MAX_BLOCK = 8192  # rows one program holds; a larger request capacity keeps vLLM's function
# the runner's dtypes (vLLM 0.27.1): computed, accepted, prev_positions, valid count,
# prev drafts, the host's counts
DTYPES = (torch.int32, torch.int32, torch.int64, torch.int32, torch.int32, torch.int32)
# values and alignment unspecialised: one binary per block size (Triton's defaults compile
# another variant for n == 1 or n % 16 == 0, inside a serving step)
_RUNTIME_ARGS = ["computed_ptr", "accepted_ptr", "prev_positions_ptr", "valid_ptr",
                 "prev_drafts_ptr", "cpu_ptr", "n"]
_usable = True  # False once a warm-up failed to compile: vLLM's function serves


@triton.jit(do_not_specialize=_RUNTIME_ARGS, do_not_specialize_on_alignment=_RUNTIME_ARGS)
def _count_correction_kernel(
    computed_ptr,  # [>= n] int32: read at gathered rows, written at rows < n
    accepted_ptr,  # [n] int32
    prev_positions_ptr,  # [n] int: this row's index in the previous step, -1 if new
    valid_ptr,  # [previous batch] int: tokens the previous step verified per row
    prev_drafts_ptr,  # [previous batch] int: drafts each previous row carried
    cpu_ptr,  # [n] int32: the host's (optimistic) counts
    n,
    BLOCK: tl.constexpr,
):
    rows = tl.arange(0, BLOCK)
    mask = rows < n
    prev = tl.load(prev_positions_ptr + rows, mask=mask, other=-1)
    had = mask & (prev >= 0)
    gather = tl.maximum(prev, 0)
    valid = tl.load(valid_ptr + gather, mask=had, other=0)
    prev_computed = tl.load(computed_ptr + gather, mask=had, other=0)
    prev_drafts = tl.load(prev_drafts_ptr + gather, mask=had, other=0)
    cpu = tl.load(cpu_ptr + rows, mask=mask, other=0)
    accepted = tl.load(accepted_ptr + rows, mask=mask, other=0)
    participating = had & (prev_drafts > 0)
    corrected = prev_computed + valid.to(prev_computed.dtype)
    tl.debug_barrier()  # every gather read before any row is overwritten
    tl.store(computed_ptr + rows, tl.where(participating, corrected, cpu.to(corrected.dtype)),
             mask=mask)
    tl.store(accepted_ptr + rows, tl.where(participating, valid.to(accepted.dtype), accepted),
             mask=mask)


def block_for(capacity: int) -> int:
    return max(32, triton.next_power_of_2(max(1, capacity)))


def warps_for(block: int) -> int:
    """~8 rows a thread up to 16 warps (the block's six vectors stay in registers)."""
    return max(1, min(16, block // 256))


def _check(computed, accepted, prev_positions, valid, prev_drafts, cpu) -> int:
    n = prev_positions.shape[0]
    for name, t in (("num_computed_tokens", computed), ("num_accepted_tokens", accepted),
                    ("prev_positions", prev_positions), ("valid_sampled_token_count", valid),
                    ("prev_num_draft_tokens", prev_drafts), ("cpu_num_computed_tokens", cpu)):
        assert t.dim() == 1 and (t.numel() == 0 or t.stride(0) == 1), (name, tuple(t.shape))
        assert not t.dtype.is_floating_point, (name, t.dtype)
    assert computed.shape[0] >= n, ("num_computed_tokens", computed.shape[0], n)
    assert accepted.shape[0] == n, ("num_accepted_tokens", accepted.shape[0], n)
    assert cpu.shape[0] == n, ("cpu_num_computed_tokens", cpu.shape[0], n)
    return n


def count_correction_ref(computed, accepted, prev_positions, valid, prev_drafts, cpu) -> None:
    """vLLM's function, plain torch (the CPU path and the tests' reference)."""
    _check(computed, accepted, prev_positions, valid, prev_drafts, cpu)
    gather = prev_positions.clamp(min=0)
    valid_counts = valid[gather]
    prev_computed = computed[gather]
    participating = (prev_positions >= 0) & (prev_drafts[gather] > 0)
    corrected = prev_computed + valid_counts.int()
    n = prev_positions.shape[0]
    computed[:n].copy_(torch.where(participating, corrected, cpu))
    accepted.copy_(torch.where(participating, valid_counts, accepted))


def usable(capacity: int) -> bool:
    """The kernel serves a runner of `capacity` request rows (else vLLM's function does)."""
    return _usable and block_for(capacity) <= MAX_BLOCK


def count_correction(computed, accepted, prev_positions, valid, prev_drafts, cpu) -> None:
    """In place, as `count_correction_ref`; the block holds `computed`'s whole capacity
    (`usable` says whether it may)."""
    n = _check(computed, accepted, prev_positions, valid, prev_drafts, cpu)
    block = block_for(computed.shape[0])
    assert block <= MAX_BLOCK, ("num_computed_tokens", computed.shape)
    if n == 0:
        return
    _count_correction_kernel[(1,)](computed, accepted, prev_positions, valid, prev_drafts,
                                   cpu, n, BLOCK=block, num_warps=warps_for(block))


def warm_up(device: torch.device, capacity: int) -> bool:
    """Compile the engine's one binary without launching (Triton's `warmup`), so no serving
    step compiles; a Triton that cannot compile it switches this process to the torch form
    (never fails the engine)."""
    global _usable
    if block_for(capacity) > MAX_BLOCK:
        return False  # vLLM's function serves this runner (`usable`)
    kernel, args, meta = warm_up_launch(capacity)
    _usable = compile_ahead(kernel, args, device, "count-correction", **meta)
    return _usable


def warm_up_launch(capacity: int) -> tuple:
    """(kernel, arguments with dtypes for tensors, meta) of the one binary a runner of
    `capacity` rows launches: what `warm_up` compiles and the CPU compile test compiles."""
    block = block_for(capacity)
    return (_count_correction_kernel, (*DTYPES, 8),
            dict(BLOCK=block, num_warps=warps_for(block)))


reference = count_correction_ref
