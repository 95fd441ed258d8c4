"""PAD with the KV-cache write fused into its launch (`new_kv`): the same cache as
`reshape_and_cache` leaves and the same attention as the reference over that cache.

The step's new tokens start out *not* in the cache (their slots hold garbage), so a tile
that read another tile's tokens from the cache before that tile wrote them would fail.
Each body runs on ``cpu`` (Triton interpreter, CI) and ``gpu``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.kernels.bass_kernel_testutils import (
    DEVICES,
    assert_close,
    make_batch,
    new_token_slots,
)
from vllm_bass.kernels.paged_attention import choose_plan, paged_attention
from vllm_bass.kernels.paged_attention_common import AttnTiles, paged_attention_ref, pick_tiles
from vllm_bass.kernels.paged_attention_pad import paged_attention_pad
from vllm_bass.kernels.reshape_and_cache import reshape_and_cache

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _new_kv(b, slots: torch.Tensor, seed: int):
    """Fresh keys / values for the new tokens; their cache slots poisoned with garbage
    unlike them (what the cache holds before the step's write)."""
    g = torch.Generator().manual_seed(seed)
    n, kvh, d = slots.shape[0], b.k_cache.shape[2], b.k_cache.shape[3]
    key = torch.randn(n, kvh, d, generator=g).to(b.q.dtype).to(b.q.device)
    value = torch.randn(n, kvh, d, generator=g).to(b.q.dtype).to(b.q.device)
    page = b.k_cache.shape[1]
    for cache in (b.k_cache, b.v_cache):
        cache[slots // page, slots % page] = 100.0
    return key, value


def _expected(b, key, value, slots):
    """The two-launch path's result: reshape_and_cache on a copy, then the reference."""
    kv = b.kv_cache.clone()
    k_cache, v_cache = kv.transpose(1, 2).split(b.k_cache.shape[3], dim=-1)
    reshape_and_cache(key, value, k_cache, v_cache, slots)
    ref = paged_attention_ref(b.q, k_cache, v_cache, b.cu_seqlens_q, b.seq_lens,
                              b.block_table, b.scale)
    return kv, ref


def _small(tiles: AttnTiles, block_n: int = 16) -> AttnTiles:
    return dataclasses.replace(tiles, block_n=block_n)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads,kv_heads,head_size", [(4, 2, 32), (3, 3, 40), (8, 1, 64)])
def test_fused_write_matches_write_then_attend(device, dtype, heads, kv_heads, head_size):
    """Decode rows, verification rows longer than a query tile (several programs of one
    request, each writing its own tokens), a request with no context, odd head sizes;
    the cache afterwards equals reshape_and_cache's and the output the reference's."""
    page = 16
    qlens, ctx = [1, 5, 19, 3, 1], [37, 0, 50, 16, 70]
    b = make_batch(qlens, ctx, heads, kv_heads, head_size, page, dtype, device, seed=3)
    slots = new_token_slots(b)
    key, value = _new_kv(b, slots, seed=4)
    kv_expected, ref = _expected(b, key, value, slots)
    tiles = _small(pick_tiles(heads, kv_heads, head_size, 1))  # 16 rows: the fewest tokens
    # several tiles per request where a tile holds fewer tokens than the longest query
    assert tiles.q_per_tile < max(qlens)
    out = torch.full_like(b.q, float("nan"))
    paged_attention_pad(b.q, b.k_cache, b.v_cache, out, b.cu_seqlens_q, b.seq_lens,
                        b.block_table, b.scale, b.max_query_len, tiles,
                        new_kv=(key, value, slots))
    assert_close(out, ref, dtype, "fused")
    assert torch.equal(b.kv_cache, kv_expected), "cache differs from reshape_and_cache's"


@pytest.mark.parametrize("device", DEVICES)
def test_negative_slots_are_not_written_and_padding_rows_left_alone(device):
    """A token with slot -1 (padding, a draft's rejected token) is not written; rows past
    the last request are neither read nor written."""
    dtype, heads, kv_heads, hd, page = torch.float16, 4, 2, 32, 8
    b = make_batch([2, 3], [9, 4], heads, kv_heads, hd, page, dtype, device, seed=5)
    slots = new_token_slots(b)
    key, value = _new_kv(b, slots, seed=6)
    slots = slots.clone()
    slots[-1] = -1  # the last token of the last request: attended from the inputs only
    pad = 3
    q = torch.cat([b.q, torch.randn(pad, heads, hd, device=device).to(dtype)])
    key = torch.cat([key, torch.randn(pad, kv_heads, hd, device=device).to(dtype)])
    value = torch.cat([value, torch.randn(pad, kv_heads, hd, device=device).to(dtype)])
    slots = torch.cat([slots, torch.full((pad,), -1, dtype=slots.dtype, device=device)])
    kv_expected, _ = _expected(b, key[:-pad], value[:-pad], slots[:-pad])
    before = b.kv_cache.clone()
    out = torch.full_like(q, 7.0)
    paged_attention_pad(q, b.k_cache, b.v_cache, out, b.cu_seqlens_q, b.seq_lens,
                        b.block_table, b.scale, b.max_query_len,
                        _small(pick_tiles(heads, kv_heads, hd, 3)), new_kv=(key, value, slots))
    assert torch.equal(b.kv_cache, kv_expected)
    last = b.seq_lens[-1].item() - 1
    blk, off = b.block_table[-1, last // page].item(), last % page
    assert torch.equal(b.kv_cache[blk, :, off], before[blk, :, off]), "slot -1 was written"
    # the reference over a cache that holds every new token (as the inputs do)
    full = b.kv_cache.clone()
    fk, fv = full.transpose(1, 2).split(hd, dim=-1)
    fk[blk, off], fv[blk, off] = key[b.q.shape[0] - 1], value[b.q.shape[0] - 1]
    ref = paged_attention_ref(b.q, fk, fv, b.cu_seqlens_q, b.seq_lens, b.block_table, b.scale)
    assert_close(out[: b.q.shape[0]], ref, dtype, "fused, slot -1")
    assert (out[b.q.shape[0]:] == 7.0).all(), "wrote padding rows"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", ["pad", "split"])
def test_any_batch_plan_with_new_kv(device, strategy):
    """The entry point with ``new_kv`` under a captured (any_batch) plan: PAD fuses, SPLIT
    writes first; ragged verification with a padding request and padded token rows."""
    dtype, heads, kv_heads, hd, page = torch.float32, 4, 2, 32, 16
    qlens, ctx = [4, 1, 6, 0, 3], [20, 55, 8, 0, 31]
    b = make_batch(qlens, ctx, heads, kv_heads, hd, page, dtype, device, seed=7)
    slots = new_token_slots(b)
    key, value = _new_kv(b, slots, seed=8)
    kv_expected, ref = _expected(b, key, value, slots)
    plan = choose_plan(len(qlens), heads, kv_heads, hd, 2, 128, 8, strategy=strategy,
                       any_batch=True)
    plan = dataclasses.replace(plan, tiles=_small(plan.tiles))
    pad = 4
    q = torch.cat([b.q, torch.zeros(pad, heads, hd, device=device, dtype=dtype)])
    key = torch.cat([key, torch.zeros(pad, kv_heads, hd, device=device, dtype=dtype)])
    value = torch.cat([value, torch.zeros(pad, kv_heads, hd, device=device, dtype=dtype)])
    slots = torch.cat([slots, torch.full((pad,), -1, dtype=slots.dtype, device=device)])
    ws = torch.empty(max(1, plan.workspace_numel(q.shape[0], heads)), dtype=torch.float32,
                     device=device)
    out = torch.full_like(q, 7.0)
    paged_attention(q, b.k_cache, b.v_cache, out, b.cu_seqlens_q, b.seq_lens, b.block_table,
                    b.scale, 1, 128, plan=plan, workspace=ws, new_kv=(key, value, slots))
    assert_close(out[: b.q.shape[0]], ref, dtype, strategy)
    assert torch.equal(b.kv_cache, kv_expected)
    assert (out[b.q.shape[0]:] == 7.0).all()


def test_bad_new_kv_is_refused_before_launch():
    b = make_batch([2], [5], 4, 2, 32, 16, torch.float32, "cpu", seed=1)
    slots = new_token_slots(b)
    key = torch.zeros(2, 4, 32)  # 4 KV heads where the cache has 2
    out = torch.empty_like(b.q)
    with pytest.raises(AssertionError):
        paged_attention_pad(b.q, b.k_cache, b.v_cache, out, b.cu_seqlens_q, b.seq_lens,
                            b.block_table, b.scale, 2, new_kv=(key, key, slots))
    with pytest.raises(AssertionError):  # slot mapping shorter than the tokens
        key = torch.zeros(2, 2, 32)
        paged_attention_pad(b.q, b.k_cache, b.v_cache, out, b.cu_seqlens_q, b.seq_lens,
                            b.block_table, b.scale, 2, new_kv=(key, key, slots[:1]))
