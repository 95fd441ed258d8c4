"""SPLIT strategy (BASS-SPLIT, flash-decoding style): work split per sequence
and across the KV length, then a reduction kernel.

Grid: (batch x query tiles, num_kv_heads, num_splits). Split j of a sequence
covers keys [j * split_len, (j + 1) * split_len) of what its tile may see, so
a batch of a few long sequences still puts hundreds of programs on the GPU.
split_len is the sequence's own (its context over num_splits, rounded up to the
key block, and at least ``min_split_keys``), computed on the device: a launch
stays valid for any context lengths, which CUDA graphs need (one captured launch
serves every step).
Each program writes an unnormalised fp32 partial output plus its running max
and sum; ``_split_reduce_kernel`` merges the splits of each (token, head).
Splits past a sequence's own context length only write (max=-1e30, sum=0).

A sequence that fits one split (short contexts) is attended whole by split 0,
which writes the normalised output itself and marks the row done (sum = -1); its
other splits exit and the reduction skips the row. A captured graph's plan is
chosen before any context is known (for the fewest requests its tokens may hold,
contexts up to max_model_len: SPLIT), and without this the short contexts it
then met were cut into 64-key pieces and reduced (graph-timed 7B layer, batch 8,
context 200, H100: 28.6 us, 22.5 with the minimum, 16.2 under PAD; session 23).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_bass.kernels.paged_attention_common import (
    REDUCE_BATCH_ARGS,
    SPLIT_BATCH_ARGS,
    AttnTiles,
    attend_kv_range,
    cdiv,
    check_inputs,
    gdc_launch_dependents,
    gdc_wait,
    launch_args,
    load_query_tile,
    next_pow2,
    paged_attention_ref,
    num_seq_tiles,
    pdl_enabled,
    pick_tiles,
    query_tile_ids,
    store_normalised_output,
)

reference = paged_attention_ref

MAX_SPLITS = 64


@triton.jit(do_not_specialize=SPLIT_BATCH_ARGS)
def _paged_attention_split_kernel(
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
    ws_ptr,  # fp32 workspace: partial out [num_tokens, num_heads, num_splits, BLOCK_D],
    # then at ml_base the pair (max in log2 units, sum), each [num_tokens, num_heads, num_splits]
    num_heads,
    num_splits,
    ml_base: tl.int64,
    ml_plane: tl.int64,  # num_tokens * num_heads * num_splits
    min_split_keys,  # a multiple of BLOCK_N
    split_programs,  # ANY_BATCH: programs to aim at for the batch met (0: all splits)
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
    if PDL:
        # the reduction may be scheduled once every split program has started
        gdc_launch_dependents()
    seq, q_tile, kv_head, q_start, q_len, active = query_tile_ids(
        cu_seqlens_q_ptr, num_q_tiles, num_seqs, q_per_tile, HEAD_FASTEST, ANY_BATCH)
    split = tl.program_id(2)
    part_o_ptr = ws_ptr
    part_ml_ptr = ws_ptr + ml_base

    tile_q0 = q_tile * q_per_tile
    if tile_q0 >= q_len:
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    ctx_len = seq_len - q_len
    q, q_pos, tok, head, row_ok = load_query_tile(
        q_ptr, stride_qt, stride_qh, q_start, q_len, ctx_len, tile_q0, kv_head, group,
        q_per_tile, HEAD_SIZE, BLOCK_M, BLOCK_D,
    )
    # partial-result row of (token, head, split)
    part_row = (tok * num_heads + head) * num_splits + split

    kv_end = tl.minimum(seq_len, ctx_len + tl.minimum(q_len, tile_q0 + q_per_tile))
    use_splits = num_splits
    if ANY_BATCH:
        if split_programs > 0:
            # a captured graph's plan met more requests than it was made for: fewer,
            # longer splits (the ones past them see no key), as a plan for this batch
            kv_heads = tl.num_programs(0) if HEAD_FASTEST else tl.num_programs(1)
            met = tl.maximum(active, 1) * kv_heads
            use_splits = tl.minimum(tl.maximum(split_programs // met, 1), num_splits)
    split_len = tl.maximum(tl.cdiv(tl.cdiv(seq_len, use_splits), BLOCK_N) * BLOCK_N,
                           min_split_keys)
    whole = seq_len <= split_len  # split 0 attends the whole sequence and writes `out`
    if whole & (split > 0):
        return
    if PDL:
        gdc_wait()  # the KV-cache write of this step's tokens has ended
    kv_lo = split * split_len
    if kv_lo >= kv_end:
        # nothing to see in this split: a zero-weight entry for the reduction
        tl.store(part_ml_ptr + part_row, tl.full([BLOCK_M], -1.0e30, tl.float32), mask=row_ok)
        tl.store(part_ml_ptr + ml_plane + part_row, tl.zeros([BLOCK_M], tl.float32), mask=row_ok)
        return
    kv_hi = tl.minimum(kv_end, kv_lo + split_len)
    acc, m_i, l_i = attend_kv_range(
        q, q_pos, k_cache_ptr, v_cache_ptr,
        block_table_ptr + seq.to(tl.int64) * stride_bt, kv_head,
        stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh,
        kv_lo, kv_hi, qk_scale,
        PAGE_SIZE, HEAD_SIZE, BLOCK_M, BLOCK_N, BLOCK_D, DOT_PRECISION, DOT_UPCAST,
    )
    if whole:
        store_normalised_output(out_ptr, stride_ot, stride_oh, acc, l_i, tok, head, row_ok,
                                HEAD_SIZE, BLOCK_D)
        tl.store(part_ml_ptr + ml_plane + part_row, tl.full([BLOCK_M], -1.0, tl.float32),
                 mask=row_ok)
    else:
        offs_d = tl.arange(0, BLOCK_D)
        tl.store(
            part_o_ptr + part_row[:, None] * BLOCK_D + offs_d[None, :],
            acc,
            mask=row_ok[:, None],
        )
        tl.store(part_ml_ptr + part_row, m_i, mask=row_ok)
        tl.store(part_ml_ptr + ml_plane + part_row, l_i, mask=row_ok)


@triton.jit(do_not_specialize=REDUCE_BATCH_ARGS)
def _split_reduce_kernel(
    ws_ptr,
    out_ptr,
    cu_seqlens_q_ptr,
    stride_ot: tl.int64,
    stride_oh,
    batch,
    num_heads,
    num_splits,
    ml_base: tl.int64,
    ml_plane: tl.int64,
    HEAD_SIZE: tl.constexpr,
    BLOCK_D: tl.constexpr,
    SPLITS_PAD: tl.constexpr,
    PDL: tl.constexpr,
):
    """out[token, head] = sum_j w_j acc_j / sum_j w_j l_j, w_j = 2^(m_j - max m)."""
    if PDL:
        gdc_wait()  # every split has written its partials
    part_o_ptr = ws_ptr
    part_ml_ptr = ws_ptr + ml_base
    tok = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    if tok >= tl.load(cu_seqlens_q_ptr + batch):
        return  # token beyond the last sequence: never written by the split kernel
    if tl.load(part_ml_ptr + ml_plane + (tok * num_heads + head) * num_splits) < 0:
        return  # one split held the whole sequence and wrote the output
    offs_s = tl.arange(0, SPLITS_PAD)
    offs_d = tl.arange(0, BLOCK_D)
    s_mask = offs_s < num_splits
    row = (tok * num_heads + head) * num_splits + offs_s
    m = tl.load(part_ml_ptr + row, mask=s_mask, other=-1.0e30)
    l = tl.load(part_ml_ptr + ml_plane + row, mask=s_mask, other=0.0)
    has = l > 0  # splits that saw at least one key; the others hold no acc
    acc = tl.load(
        part_o_ptr + row[:, None] * BLOCK_D + offs_d[None, :],
        mask=has[:, None],
        other=0.0,
    )
    m_max = tl.max(m, 0)
    w = tl.where(has, tl.exp2(m - m_max), 0.0)
    denom = tl.sum(w * l, 0)
    o = tl.sum(w[:, None] * acc, 0) / tl.where(denom > 0, denom, 1.0)
    tl.store(
        out_ptr + tok * stride_ot + head * stride_oh + offs_d,
        o.to(out_ptr.dtype.element_ty),
        mask=offs_d < HEAD_SIZE,
    )


def split_geometry(max_seq_len: int, num_splits: int, block_n: int) -> tuple[int, int]:
    """(split_len, launched splits) of the longest sequence: equal splits, each a
    multiple of the key block, so the launched count may be lower than asked."""
    split_len = cdiv(cdiv(max(1, max_seq_len), num_splits), block_n) * block_n
    return split_len, cdiv(max(1, max_seq_len), split_len)


ML_ALIGN = 16  # the (max, sum) planes start at multiples of 16 elements


def ml_layout(num_tokens: int, num_heads: int, num_splits: int, block_d: int) -> tuple:
    """(ml_base, ml_plane): where the (max, sum) planes start in the workspace and the
    length of one. The plane is rounded up to ML_ALIGN elements so that its offset is 16-
    aligned at every batch: Triton specialises an int argument on divisibility by 16, and a
    plane of tokens x heads x splits (20 heads, the 5x1280 draft) was aligned at some token
    counts only, so the eager first pass compiled a second SPLIT binary while serving
    (session 42)."""
    ml_plane = -(-num_tokens * num_heads * num_splits // ML_ALIGN) * ML_ALIGN
    return ml_plane * block_d, ml_plane


def split_workspace_numel(num_tokens: int, num_heads: int, num_splits: int, block_d: int) -> int:
    """fp32 elements of the workspace: partial outputs plus (max, sum)."""
    ml_base, ml_plane = ml_layout(num_tokens, num_heads, num_splits, block_d)
    return ml_base + 2 * ml_plane


def paged_attention_split(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    out: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    scale: float,
    max_query_len: int,
    max_seq_len: int,
    num_splits: int,
    tiles: AttnTiles | None = None,
    workspace: torch.Tensor | None = None,
    check: bool = True,
    any_batch: bool = False,
    min_split_keys: int = 0,
    split_programs: int = 0,
) -> torch.Tensor:
    """Split-KV causal paged attention. ``max_seq_len`` (an upper bound is
    fine, e.g. max_model_len for a CUDA graph) and ``num_splits`` are host ints. ``workspace``: an fp32 tensor of at
    least ``split_workspace_numel`` elements (allocated here if None; vLLM's
    builder allocates one per step and all layers reuse it). ``check=False``
    skips the input asserts (the backend checks the first layer of a step). ``any_batch``:
    the grid serves any query lengths (see paged_attention_pad). ``min_split_keys``: the
    fewest keys of a sequence's split (rounded up to the key block): shorter contexts are
    not split (see the module's docstring). ``split_programs`` (``any_batch`` only): the
    programs a launch aims at; each sequence then uses min(num_splits, split_programs //
    (requests met x KV heads)) splits, so a captured plan made for few requests that
    meets many is not cut finer than a plan made for them (0: always num_splits)."""
    if check:
        check_inputs(q, k_cache, v_cache, out, cu_seqlens_q, seq_lens, block_table)
        assert 1 <= num_splits <= MAX_SPLITS, num_splits
    num_tokens, num_heads, head_size = q.shape
    num_kv_heads = k_cache.shape[2]
    batch = seq_lens.shape[0]
    if batch == 0 or num_tokens == 0 or max_seq_len == 0 or (max_query_len == 0
                                                             and not any_batch):
        return out
    if tiles is None:
        tiles = pick_tiles(num_heads, num_kv_heads, head_size, max_query_len)
    group = num_heads // num_kv_heads
    _, num_splits = split_geometry(max_seq_len, num_splits, tiles.block_n)
    num_q_tiles = cdiv(max_query_len, tiles.q_per_tile)
    ml_base, ml_plane = ml_layout(num_tokens, num_heads, num_splits, tiles.block_d)
    if workspace is None:
        workspace = torch.empty(ml_base + 2 * ml_plane, dtype=torch.float32, device=q.device)
    if check:
        assert tiles.block_m >= group and tiles.q_per_tile == tiles.block_m // group
        assert workspace.dtype == torch.float32 and workspace.numel() >= ml_base + 2 * ml_plane
        assert workspace.device == q.device and workspace.is_contiguous()

    seq_tiles = num_seq_tiles(num_tokens, batch, num_q_tiles, tiles.q_per_tile, any_batch)
    grid = (seq_tiles, num_kv_heads, num_splits)
    if tiles.head_fastest:
        grid = (num_kv_heads, seq_tiles, num_splits)
    pdl = pdl_enabled(q.device)
    args, meta = launch_args(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, scale,
                             tiles, num_q_tiles, any_batch, pdl)
    min_keys = cdiv(max(0, min_split_keys), tiles.block_n) * tiles.block_n
    if split_programs // max(1, batch * num_kv_heads) >= num_splits:
        split_programs = 0  # all splits even when every request is real: no count needed
    _paged_attention_split_kernel[grid](
        *args, workspace, num_heads, num_splits, ml_base, ml_plane, min_keys,
        split_programs if any_batch else 0, out, out.stride(0), out.stride(1), **meta)
    _split_reduce_kernel[(num_tokens, num_heads)](
        workspace, out, cu_seqlens_q,
        out.stride(0), out.stride(1), batch, num_heads, num_splits, ml_base, ml_plane,
        HEAD_SIZE=head_size, BLOCK_D=tiles.block_d,
        SPLITS_PAD=max(2, next_pow2(num_splits)), PDL=pdl,
        num_warps=2, **({"launch_pdl": True} if pdl else {}),
    )
    return out
