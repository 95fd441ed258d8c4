"""Pieces shared by the PAD and SPLIT paged-attention ops.

* ``attend_kv_range``: the Triton inner loop. One program owns one *query tile*
  of one sequence and one KV head: the query rows of every query head that
  shares that KV head (GQA/MQA) times a run of the sequence's new tokens are
  packed into the M dimension of ``tl.dot``, so even plain decode (1 token)
  with 8 query heads per KV head, or BASS verification (1 + k tokens) with
  MHA, gives M >= 16 rows and uses the tensor cores.
* ``paged_attention_ref``: the plain-torch float64 reference both ops are
  tested against (gather through the block table, causal mask).
* ``AttnTiles`` / ``pick_tiles``: the tile shapes, chosen once per step.

Conventions (same as vLLM's FLASH_ATTN / TRITON_ATTN backends):
  q, out      [num_tokens, num_heads, head_size], tokens of a sequence contiguous
  cu_seqlens_q [batch + 1] int32 (vLLM ``query_start_loc``)
  seq_lens    [batch] int32: context length *including* the new tokens
  block_table [batch, max_blocks] int32 physical block ids
  k/v_cache   [num_blocks, block_size, num_kv_heads, head_size], any strides
              with a unit last stride (vLLM's packed cache split in K and V).
The i-th new token of a sequence sits at position seq_len - q_len + i and
sees keys 0..that position (causal within the new tokens).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from vllm_bass import envs

try:  # Hopper's grid dependency control (Triton >= 3.3)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - older Triton: PDL stays off (pdl_enabled)
    gdc_launch_dependents = gdc_wait = None

LOG2E = 1.4426950408889634


@triton.jit
def attend_kv_range(
    q,  # [BLOCK_M, BLOCK_D] query tile, already loaded (input dtype)
    q_pos,  # [BLOCK_M] absolute position of each row's token (causal limit)
    k_cache_ptr,
    v_cache_ptr,
    bt_row_ptr,  # this sequence's row of the block table
    kv_head,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_vb,
    stride_vt,
    stride_vh,
    kv_lo,
    kv_hi,
    qk_scale,  # softmax scale * log2(e): softmax is done with exp2
    PAGE_SIZE: tl.constexpr,
    HEAD_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr,  # interpreter only: it cannot dot bf16
):
    """Online-softmax attention of a query tile over keys [kv_lo, kv_hi).

    Returns the unnormalised accumulator (fp32), the running max (log2 units)
    and the running sum. Rows that see no key keep m = -1e30, l = 0, acc = 0
    (finite, so a later merge can weight them by zero without NaNs).
    """
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_SIZE
    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    k_head = k_cache_ptr + kv_head * stride_kh
    v_head = v_cache_ptr + kv_head * stride_vh
    for start in range(kv_lo, kv_hi, BLOCK_N):
        kpos = start + offs_n
        kmask = kpos < kv_hi
        # physical block of every key; int64 before the multiply by the block
        # stride, which overflows int32 on large caches
        blk = tl.load(bt_row_ptr + kpos // PAGE_SIZE, mask=kmask, other=0).to(tl.int64)
        slot = kpos % PAGE_SIZE
        ld_mask = kmask[:, None] & d_mask[None, :]
        k = tl.load(
            k_head + (blk * stride_kb + slot * stride_kt)[:, None] + offs_d[None, :],
            mask=ld_mask,
            other=0.0,
        )
        v = tl.load(
            v_head + (blk * stride_vb + slot * stride_vt)[:, None] + offs_d[None, :],
            mask=ld_mask,
            other=0.0,
        )
        if DOT_UPCAST:
            q = q.to(tl.float32)
            k = k.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        visible = (kpos[None, :] <= q_pos[:, None]) & kmask[None, :]
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        p = p.to(v.dtype)  # the PV product runs on the input dtype, as on the GPU
        if DOT_UPCAST:
            p = p.to(tl.float32)
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=DOT_PRECISION)
        m_i = m_new
    return acc, m_i, l_i


# Arguments that follow the batch (request counts, query tiles, splits): Triton would
# specialise each on == 1 and on divisibility by 16 and compile another binary for every new
# combination (1.5-3 s for PAD / SPLIT, sm_90), at graph capture and in any eager step
# that meets a new one (session 31: a PAD compile inside a timed batch-256 repeat). They
# only index tiles and bound loops; strides and head counts, fixed per model, keep theirs.
PAD_BATCH_ARGS = ("num_q_tiles", "num_seqs")
SPLIT_BATCH_ARGS = PAD_BATCH_ARGS + ("num_splits", "min_split_keys", "split_programs")
REDUCE_BATCH_ARGS = ("batch", "num_splits")

# requests a program of an ANY_BATCH grid reads per vector load of the query offsets
SEQ_CHUNK = tl.constexpr(128)


@triton.jit
def locate_tile(cu_seqlens_q_ptr, tile, num_seqs, q_per_tile):
    """(sequence, its query start, its query end, active requests) of query tile `tile` of
    an ANY_BATCH grid.

    The sequence is the last s with cu_seqlens_q[s] // q_per_tile + s <= tile (that start
    index grows strictly with s, so zero-length padding requests get a tile of their own
    too); the active requests are those up to the last one with new tokens (a captured
    batch pads with zero-length requests at its end). One vector load of the offsets per
    SEQ_CHUNK requests and reductions over it, not a binary search: the search's chain
    of dependent loads (two searches, when SPLIT also counted the requests) stood before
    every program's first key load (H100, captured 7B plans at batch 2-8: 3-7% slower,
    session 28)."""
    # explicit int32 scalars (num_seqs may arrive as a constexpr: Triton specialises an int
    # argument equal to 1)
    seq = tl.full([], -1, tl.int32)
    q_start = tl.full([], 0, tl.int32)
    q_end = tl.full([], 0, tl.int32)
    active = tl.full([], 0, tl.int32)
    for chunk in range(0, num_seqs, SEQ_CHUNK):
        s = chunk + tl.arange(0, SEQ_CHUNK)
        ok = s < num_seqs
        lo = tl.load(cu_seqlens_q_ptr + s, mask=ok, other=0)
        hi = tl.load(cu_seqlens_q_ptr + s + 1, mask=ok, other=0)
        # a prefix of the requests: the offsets never decrease, so the maxima over it are
        # the owning request's own values
        owns = ok & (lo // q_per_tile + s <= tile)
        seq = tl.maximum(seq, tl.max(tl.where(owns, s, -1), 0))
        q_start = tl.maximum(q_start, tl.max(tl.where(owns, lo, 0), 0))
        q_end = tl.maximum(q_end, tl.max(tl.where(owns, hi, 0), 0))
        active = tl.maximum(active, tl.max(tl.where(ok & (hi > lo), s + 1, 0), 0))
    return seq, q_start, q_end, active


@triton.jit
def query_tile_ids(cu_seqlens_q_ptr, num_q_tiles, num_seqs, q_per_tile,
                   HEAD_FASTEST: tl.constexpr, ANY_BATCH: tl.constexpr):
    """(sequence, query tile, KV head, query start, query length, active requests) of this
    program (see AttnTiles.head_fastest).

    Direct grid: num_seqs x num_q_tiles tiles (num_q_tiles of the step's longest query);
    every request counts as active.
    ANY_BATCH grid: num_tokens // q_per_tile + num_seqs tiles, sequence s owning those from
    cu_seqlens_q[s] // q_per_tile + s on (enough for ceil(q_len / q_per_tile)); the grid
    then depends on the token and request counts only, so one captured CUDA graph serves
    any split of its tokens into sequences (ragged verification)."""
    seq_tile = tl.program_id(1) if HEAD_FASTEST else tl.program_id(0)
    kv_head = tl.program_id(0) if HEAD_FASTEST else tl.program_id(1)
    if ANY_BATCH:
        seq, q_start, q_end, active = locate_tile(cu_seqlens_q_ptr, seq_tile, num_seqs,
                                                  q_per_tile)
        q_tile = seq_tile - (q_start // q_per_tile + seq)
    else:
        seq = seq_tile // num_q_tiles
        q_tile = seq_tile % num_q_tiles
        q_start = tl.load(cu_seqlens_q_ptr + seq)
        q_end = tl.load(cu_seqlens_q_ptr + seq + 1)
        active = num_seqs
    return seq, q_tile, kv_head, q_start, q_end - q_start, active


def num_seq_tiles(num_tokens: int, batch: int, num_q_tiles: int, q_per_tile: int,
                  any_batch: bool) -> int:
    """Query tiles the launch covers (the grid's sequence-tile dimension; `num_q_tiles`:
    tiles of the step's longest query)."""
    if any_batch:
        return num_tokens // q_per_tile + batch
    return batch * num_q_tiles


@triton.jit
def load_query_tile(
    q_ptr,
    stride_qt,
    stride_qh,
    q_start,
    q_len,
    ctx_len,
    tile_q0,
    kv_head,
    group,
    q_per_tile,
    HEAD_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """The tile's query rows: new tokens tile_q0.. x the query heads of kv_head.

    Returns (q, q_pos = each row's causal limit or -1, token index (int64), query head,
    row_ok)."""
    rows = tl.arange(0, BLOCK_M)
    qi = tile_q0 + rows // group
    head = kv_head * group + rows % group
    row_ok = (rows < q_per_tile * group) & (qi < q_len)
    offs_d = tl.arange(0, BLOCK_D)
    tok = (q_start + qi).to(tl.int64)
    q = tl.load(
        q_ptr + (tok * stride_qt + head * stride_qh)[:, None] + offs_d[None, :],
        mask=row_ok[:, None] & (offs_d < HEAD_SIZE)[None, :],
        other=0.0,
    )
    q_pos = tl.where(row_ok, ctx_len + qi, -1)
    return q, q_pos, tok, head, row_ok


@dataclass(frozen=True)
class AttnTiles:
    """Tile shapes of one launch (host side, chosen once per step)."""

    block_m: int  # rows of the query tile: q_per_tile tokens x group heads
    q_per_tile: int  # new tokens per query tile
    block_n: int  # keys per inner-loop step
    block_d: int  # head size padded to a power of two
    num_warps: int
    num_stages: int
    # program order: KV heads vary fastest (as in FA3), so programs running together
    # read neighbouring heads of the same cache pages instead of one head of many
    # sequences' scattered pages (H100: median 0.999x FA3 against 0.994x seq-major)
    head_fastest: bool = True


@triton.jit
def store_normalised_output(out_ptr, stride_ot, stride_oh, acc, l_i, tok, head, row_ok,
                            HEAD_SIZE: tl.constexpr, BLOCK_D: tl.constexpr):
    """out[tok, head] = acc / l for the tile's valid rows (a row that saw no key: 0)."""
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    o = acc / l_safe[:, None]
    offs_d = tl.arange(0, BLOCK_D)
    tl.store(
        out_ptr + (tok * stride_ot + head * stride_oh)[:, None] + offs_d[None, :],
        o.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & (offs_d < HEAD_SIZE)[None, :],
    )


def next_pow2(x: int) -> int:
    """Host-side: triton.next_power_of_2 and triton.cdiv go through Triton's jit-function
    call path (several microseconds each, several calls a layer in eager steps)."""
    return 1 << max(0, (max(1, x) - 1).bit_length())


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


SMEM_BUDGET = 200 * 1024  # bytes of K/V pipeline stages per program (Hopper: 227 KB max)


def pick_tiles(
    num_heads: int,
    num_kv_heads: int,
    head_size: int,
    max_query_len: int,
    elem_size: int = 2,
    wide: bool = False,
) -> AttnTiles:
    """Pack (new tokens x query heads of one KV head) into M, at least 16 rows
    (tl.dot's minimum) and at most 64 (or the group size, if larger).

    ``wide``: 128 keys per step and 8 warps, for launches with few programs
    (under ~3 per SM), where each program must keep more bytes in flight;
    otherwise 64 keys and 4 warps (two programs per SM). Stages, then the key
    block, shrink until the K/V stages fit ``SMEM_BUDGET``."""
    group = num_heads // num_kv_heads
    block_m = max(16, next_pow2(group * max(1, max_query_len)))
    block_m = min(block_m, max(64, next_pow2(group)))
    block_d = max(16, next_pow2(head_size))
    block_n, num_warps, num_stages = (128, 8, 3) if wide else (64, 4, 3)
    if block_m * block_d > 64 * 128:
        num_warps = 8
    while num_stages * block_n * block_d * 2 * elem_size > SMEM_BUDGET:
        if num_stages > 2:
            num_stages -= 1
        else:
            block_n //= 2
    return AttnTiles(
        block_m=block_m,
        q_per_tile=block_m // group,
        block_n=block_n,
        block_d=block_d,
        num_warps=num_warps,
        num_stages=num_stages,
    )


def dot_precision(dtype: torch.dtype) -> str:
    """fp32 inputs must not silently drop to tf32 on the GPU."""
    return "ieee" if dtype == torch.float32 else "tf32"


def dot_upcast(dtype: torch.dtype) -> bool:
    """Triton's interpreter (CPU tests) keeps bf16 as raw uint16 and its
    tl.dot multiplies those integers; upcast the (already bf16-rounded)
    operands to fp32 there. Compiled kernels always dot in the input dtype."""
    return dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET", "0") == "1"


def launch_args(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, scale, tiles,
                num_q_tiles, any_batch=False, pdl=False):
    """The leading positional arguments shared by the PAD and SPLIT kernels, and the
    launch's meta-parameters (constexprs, warps, stages; ``pdl``: a programmatic dependent
    launch, see pdl_enabled)."""
    args = (
        q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table,
        q.stride(0), q.stride(1), block_table.stride(0),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        scale * LOG2E, num_q_tiles, seq_lens.shape[0], q.shape[1] // k_cache.shape[2],
        tiles.q_per_tile,
    )
    meta = dict(
        PAGE_SIZE=k_cache.shape[1], HEAD_SIZE=q.shape[2],
        BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_D=tiles.block_d,
        DOT_PRECISION=dot_precision(q.dtype), DOT_UPCAST=dot_upcast(q.dtype),
        HEAD_FASTEST=tiles.head_fastest, ANY_BATCH=any_batch, PDL=pdl,
        num_warps=tiles.num_warps, num_stages=tiles.num_stages,
    )
    if pdl:
        meta["launch_pdl"] = True
    return args, meta


# benchmarks' A/B switch: None follows VLLM_BASS_ATTENTION_PDL and the device
PDL_OVERRIDE: bool | None = None


@functools.lru_cache(maxsize=8)
def _pdl_supported(device_index: int, honour_env: bool = True) -> bool:
    """(Cached: the eager launch path asks for every layer.)"""
    return (gdc_wait is not None and os.environ.get("TRITON_INTERPRET", "0") != "1"
            and (not honour_env or envs.flag("VLLM_BASS_ATTENTION_PDL"))
            and torch.cuda.get_device_capability(device_index)[0] >= 9)


def pdl_enabled(device: torch.device) -> bool:
    """Programmatic dependent launch (Hopper): a kernel launched with it starts while the
    one before it still runs, does what needs none of that kernel's writes (finding its
    request, loading its queries and lengths), then waits (gdc_wait) before it reads the
    KV cache. The KV-cache write before attention and SPLIT's reduction after its splits
    then overlap their neighbour's tail instead of paying a launch each."""
    if device.type != "cuda":
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    if PDL_OVERRIDE is not None:
        return PDL_OVERRIDE and _pdl_supported(index, honour_env=False)
    return _pdl_supported(index)


def check_inputs(q, k_cache, v_cache, out, cu_seqlens_q, seq_lens, block_table) -> None:
    """Shape/dtype asserts shared by the launchers."""
    assert q.dim() == 3 and out.shape == q.shape, (q.shape, out.shape)
    assert k_cache.dim() == 4 and v_cache.shape == k_cache.shape, (k_cache.shape, v_cache.shape)
    num_tokens, num_heads, head_size = q.shape
    _, page_size, num_kv_heads, cache_head_size = k_cache.shape
    assert cache_head_size == head_size, (cache_head_size, head_size)
    assert num_heads % num_kv_heads == 0, (num_heads, num_kv_heads)
    assert q.dtype == k_cache.dtype == v_cache.dtype == out.dtype, (q.dtype, k_cache.dtype, out.dtype)
    assert q.dtype in (torch.float16, torch.bfloat16, torch.float32), q.dtype
    assert q.stride(-1) == 1 and out.stride(-1) == 1
    assert k_cache.stride(-1) == 1 and v_cache.stride(-1) == 1
    batch = seq_lens.shape[0]
    assert cu_seqlens_q.shape == (batch + 1,), (cu_seqlens_q.shape, batch)
    assert block_table.dim() == 2 and block_table.shape[0] >= batch, block_table.shape
    assert block_table.dtype == torch.int32 and seq_lens.dtype == torch.int32
    assert cu_seqlens_q.dtype == torch.int32
    assert block_table.stride(1) == 1
    for t in (k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, out):
        assert t.device == q.device


def paged_attention_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Plain torch, float64: gather each sequence's keys through its block
    table, causal mask within the new tokens. Returns float64 [T, H, D]."""
    num_tokens, num_heads, _ = q.shape
    page_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = num_heads // num_kv_heads
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    cu = cu_seqlens_q.tolist()
    lens = seq_lens.tolist()
    for b, seq_len in enumerate(lens):
        q_lo, q_hi = cu[b], cu[b + 1]
        q_len = q_hi - q_lo
        if q_len == 0:
            continue
        pos = torch.arange(seq_len, device=q.device)
        blocks = block_table[b, pos // page_size].long()
        k = k_cache[blocks, pos % page_size].double()  # [S, KVH, D]
        v = v_cache[blocks, pos % page_size].double()
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        qs = q[q_lo:q_hi].double()  # [Q, H, D]
        s = torch.einsum("qhd,khd->hqk", qs, k) * scale
        q_pos = seq_len - q_len + torch.arange(q_len, device=q.device)
        s = s.masked_fill(pos[None, None, :] > q_pos[None, :, None], float("-inf"))
        out[q_lo:q_hi] = torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), v)
    return out
