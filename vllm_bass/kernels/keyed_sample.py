"""Seeded rows' position-keyed sample, argmax_v logits(v) + G(seed, t, v), in one launch
(two when a row's vocabulary is split).

`vllm_bass.sampling.keyed` defines the noise (MurmurHash3 finalisers over (seed, position,
v), Gumbel in float64) and samples with ~40 element-wise torch ops over rows x vocab, each a
launch and a pass over memory: 1.7 ms a step on an H100 for even one seeded row at a 32k
vocabulary, 38 ms for 1024 rows at 128k (session 26, `bench_keyed_sample.py`), against
0.06-1.7 ms for vLLM's unseeded sampler. Here each program hashes, draws and reduces a
stretch of one row's vocabulary in registers: the same integers (uint32 arithmetic wraps
where the torch path masks), the same float64 Gumbel, the first index of the maximum as
torch.argmax takes. With few rows (the drafter samples its seeded rows every draft step)
one program a row leaves most SMs idle (0.27 ms for a 128k vocabulary, call 10), so the
vocabulary is split over programs until the grid has about two per SM, and a second launch
picks each row's winner among its stretches (ties: the first stretch, i.e. the first index).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_bass.kernels.paged_attention import num_sms
from vllm_bass.sampling.keyed import KEYED_KERNEL_DTYPES, keyed_sample_torch

BLOCK_V = 2048


@triton.jit
def _fmix32(h):
    h = h ^ (h >> 16)
    h = h * 0x85EBCA6B
    h = h ^ (h >> 13)
    h = h * 0xC2B2AE35
    return h ^ (h >> 16)


@triton.jit
def _keyed_sample_kernel(
    logits_ptr,  # [rows, vocab] float, row stride below, unit column stride
    logits_stride,
    seeds_ptr,  # [rows] int64
    positions_ptr,  # [rows] int64
    out_ptr,  # [rows, num_chunks] int64: a stretch's first maximising token
    best_ptr,  # [rows, num_chunks] float64: its score (unused when SPLIT is off)
    vocab,
    chunk,  # tokens a stretch (a multiple of BLOCK)
    num_chunks,
    BLOCK: tl.constexpr,
    SPLIT: tl.constexpr,
):
    row = tl.program_id(0)
    part = tl.program_id(1)
    seed = tl.load(seeds_ptr + row)
    lo = (seed & 0xFFFFFFFF).to(tl.uint32)
    hi = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    pos = (tl.load(positions_ptr + row) & 0xFFFFFFFF).to(tl.uint32)
    a = _fmix32(lo ^ 0x9E3779B9)
    a = _fmix32(a ^ hi)
    a = _fmix32(a + pos * 0x632BE5AB)
    b = _fmix32(a ^ 0x5BD1E995)
    offs = tl.arange(0, BLOCK)
    best = tl.full([BLOCK], float("-inf"), tl.float64)
    best_idx = tl.full([BLOCK], 2147483647, tl.int32)
    row_ptr = logits_ptr + row.to(tl.int64) * logits_stride
    begin = part * chunk
    end = tl.minimum(begin + chunk, vocab)
    for start in range(begin, end, BLOCK):
        v = start + offs
        inside = v < end
        h = _fmix32((v.to(tl.uint32) * 0x9E3779B1) ^ a)
        h = _fmix32(h ^ b)
        u = (h.to(tl.float64) + 0.5) / 4294967296.0
        g = -tl.log(-tl.log(u))
        x = tl.load(row_ptr + v, mask=inside, other=float("-inf")).to(tl.float64) + g
        # later tiles take a lane only when strictly larger: each lane keeps its first max
        take = inside & ((x > best) | (best_idx == 2147483647))
        best = tl.where(take, x, best)
        best_idx = tl.where(take, v, best_idx)
    top = tl.max(best, axis=0)
    first = tl.min(tl.where(best == top, best_idx, 2147483647), axis=0)
    at = row.to(tl.int64) * num_chunks + part
    tl.store(out_ptr + at, first.to(tl.int64))
    if SPLIT:
        tl.store(best_ptr + at, top)


@triton.jit
def _keyed_pick_kernel(
    part_idx_ptr,  # [rows, num_chunks] int64
    part_best_ptr,  # [rows, num_chunks] float64
    out_ptr,  # [rows] int64
    num_chunks,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    inside = offs < num_chunks
    at = row.to(tl.int64) * num_chunks + offs
    best = tl.load(part_best_ptr + at, mask=inside, other=float("-inf"))
    # an all -inf row: every stretch ties at -inf and the first one's index wins
    top = tl.max(best, axis=0)
    first = tl.min(tl.where(inside & (best == top), offs, BLOCK), axis=0)
    tl.store(out_ptr + row, tl.load(part_idx_ptr + row.to(tl.int64) * num_chunks + first))


def _programs_wanted(device: torch.device) -> int:
    """About two programs per SM (`num_sms`' stand-in under the interpreter)."""
    return 2 * num_sms(device if device.type == "cuda" else None)


def num_vocab_chunks(rows: int, vocab: int, programs: int) -> int:
    """Stretches a row's vocabulary is split into: enough for `programs` in all, none
    shorter than a tile, at most 64 (the pick kernel's width)."""
    tiles = triton.cdiv(vocab, BLOCK_V)
    return max(1, min(triton.cdiv(programs, max(rows, 1)), tiles, 64))


def keyed_sample_triton(logits: torch.Tensor, seeds: torch.Tensor,
                        positions: torch.Tensor) -> torch.Tensor:
    """[N] token ids as `keyed_sample_torch` draws them, for logits on a CUDA device (or
    under TRITON_INTERPRET=1)."""
    assert logits.dim() == 2 and logits.dtype in KEYED_KERNEL_DTYPES, (logits.shape,
                                                                      logits.dtype)
    rows, vocab = logits.shape
    assert seeds.shape == (rows,) and positions.shape == (rows,), (seeds.shape, positions.shape)
    assert 0 < vocab < 2 ** 31 - 1, vocab
    out = torch.empty(rows, dtype=torch.int64, device=logits.device)
    if rows == 0:
        return out
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    seeds = seeds.to(device=logits.device, dtype=torch.int64)
    positions = positions.to(device=logits.device, dtype=torch.int64)
    chunks = num_vocab_chunks(rows, vocab, _programs_wanted(logits.device))
    chunk = triton.cdiv(triton.cdiv(vocab, chunks), BLOCK_V) * BLOCK_V
    chunks = triton.cdiv(vocab, chunk)  # rounding the stretch up may leave fewer
    if chunks == 1:
        _keyed_sample_kernel[(rows, 1)](logits, logits.stride(0), seeds, positions, out, out,
                                        vocab, chunk, 1, BLOCK=BLOCK_V, SPLIT=False,
                                        num_warps=8)
        return out
    part_idx = torch.empty(rows, chunks, dtype=torch.int64, device=logits.device)
    part_best = torch.empty(rows, chunks, dtype=torch.float64, device=logits.device)
    _keyed_sample_kernel[(rows, chunks)](logits, logits.stride(0), seeds, positions, part_idx,
                                         part_best, vocab, chunk, chunks, BLOCK=BLOCK_V,
                                         SPLIT=True, num_warps=8)
    _keyed_pick_kernel[(rows,)](part_idx, part_best, out, chunks, BLOCK=64, num_warps=1)
    return out


keyed_sample_ref = keyed_sample_torch
