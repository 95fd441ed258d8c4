"""PAD strategy (BASS-PAD): one launch over the batch, every sequence's new
tokens padded to the longest query of the step.

Grid: (batch x query tiles of the longest query, num_kv_heads), or with
``any_batch`` (CUDA graphs) one tile per q_per_tile tokens plus one per sequence,
each program finding its sequence by binary search. Each program
walks all keys its tile may see and writes normalised output directly: no
workspace, no second launch. Tiles past a sequence's own query length exit at
once, so padding only costs idle rows inside a tile (masked in the dot).
Best when batch x KV heads already fills the GPU or contexts are short.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_bass.kernels.paged_attention_common import (
    PAD_BATCH_ARGS,
    AttnTiles,
    attend_kv_range,
    cdiv,
    check_inputs,
    gdc_wait,
    launch_args,
    load_query_tile,
    paged_attention_ref,
    num_seq_tiles,
    pdl_enabled,
    pick_tiles,
    query_tile_ids,
    store_normalised_output,
)

reference = paged_attention_ref


@triton.jit(do_not_specialize=PAD_BATCH_ARGS)
def _paged_attention_pad_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    cu_seqlens_q_ptr,
    seq_lens_ptr,
    block_table_ptr,
    stride_qt: tl.int64,
    stride_qh,
    stride_bt: tl.int64,
    stride_kb: tl.int64,
    stride_kt,
    stride_kh,
    stride_vb: tl.int64,
    stride_vt,
    stride_vh,
    qk_scale,
    num_q_tiles,
    num_seqs,
    group,  # query heads per KV head
    q_per_tile,  # new tokens per tile (BLOCK_M // group)
    out_ptr,
    stride_ot: tl.int64,
    stride_oh,
    PAGE_SIZE: tl.constexpr,
    HEAD_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr,
    HEAD_FASTEST: tl.constexpr,
    ANY_BATCH: tl.constexpr,
    PDL: tl.constexpr,
):
    seq, q_tile, kv_head, q_start, q_len, _ = query_tile_ids(
        cu_seqlens_q_ptr, num_q_tiles, num_seqs, q_per_tile, HEAD_FASTEST, ANY_BATCH)
    tile_q0 = q_tile * q_per_tile
    if tile_q0 >= q_len:
        return  # padding tile of a shorter sequence
    seq_len = tl.load(seq_lens_ptr + seq)
    ctx_len = seq_len - q_len
    q, q_pos, tok, head, row_ok = load_query_tile(
        q_ptr, stride_qt, stride_qh, q_start, q_len, ctx_len, tile_q0, kv_head, group,
        q_per_tile, HEAD_SIZE, BLOCK_M, BLOCK_D,
    )
    kv_hi = tl.minimum(seq_len, ctx_len + tl.minimum(q_len, tile_q0 + q_per_tile))
    if PDL:
        gdc_wait()  # the KV-cache write of this step's tokens has ended

    acc, m_i, l_i = attend_kv_range(
        q, q_pos, k_cache_ptr, v_cache_ptr,
        block_table_ptr + seq.to(tl.int64) * stride_bt, kv_head,
        stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh,
        0, kv_hi, qk_scale,
        PAGE_SIZE, HEAD_SIZE, BLOCK_M, BLOCK_N, BLOCK_D, DOT_PRECISION, DOT_UPCAST,
    )
    store_normalised_output(out_ptr, stride_ot, stride_oh, acc, l_i, tok, head, row_ok,
                            HEAD_SIZE, BLOCK_D)


def paged_attention_pad(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    out: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    scale: float,
    max_query_len: int,
    tiles: AttnTiles | None = None,
    check: bool = True,
    any_batch: bool = False,
) -> torch.Tensor:
    """out[t] = causal paged attention of q[t]; see paged_attention_common
    for the layouts. ``max_query_len`` is a host int (grid size, unless ``any_batch``:
    then the grid follows the token and request counts and serves any query lengths, as
    a CUDA graph captured once needs). ``check=False`` skips the input asserts
    (per-layer launch overhead)."""
    if check:
        check_inputs(q, k_cache, v_cache, out, cu_seqlens_q, seq_lens, block_table)
    num_tokens, num_heads, head_size = q.shape
    num_kv_heads = k_cache.shape[2]
    batch = seq_lens.shape[0]
    if batch == 0 or num_tokens == 0 or (max_query_len == 0 and not any_batch):
        return out
    if tiles is None:
        tiles = pick_tiles(num_heads, num_kv_heads, head_size, max_query_len)
    group = num_heads // num_kv_heads
    if check:
        assert tiles.block_m >= group and tiles.q_per_tile == tiles.block_m // group
    num_q_tiles = cdiv(max_query_len, tiles.q_per_tile)
    grid = (num_seq_tiles(num_tokens, batch, num_q_tiles, tiles.q_per_tile, any_batch),
            num_kv_heads)
    if tiles.head_fastest:
        grid = grid[::-1]
    args, meta = launch_args(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, scale,
                             tiles, num_q_tiles, any_batch, pdl_enabled(q.device))
    _paged_attention_pad_kernel[grid](*args, out, out.stride(0), out.stride(1), **meta)
    return out
