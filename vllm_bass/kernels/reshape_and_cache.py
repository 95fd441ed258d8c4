"""Write the new tokens' K/V into vLLM's paged cache (reshape-and-cache).

Token t goes to slot = slot_mapping[t] = block * block_size + offset of both
caches; a negative slot (padding, rejected drafts of the draft model) is
skipped. One program per (token, group of KV heads) copies whole heads with
contiguous loads/stores; offsets are int64 (block * block stride overflows
int32 on large caches).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from vllm_bass.kernels.paged_attention_common import (
    cdiv,
    gdc_launch_dependents,
    next_pow2,
    pdl_enabled,
)


@triton.jit
def _reshape_and_cache_kernel(
    key_ptr,  # [num_tokens, num_kv_heads, head_size]
    value_ptr,
    k_cache_ptr,  # [num_blocks, block_size, num_kv_heads, head_size]
    v_cache_ptr,
    slot_mapping_ptr,  # [num_tokens] int32/int64
    stride_kt: tl.int64,
    stride_kh,
    stride_vt: tl.int64,
    stride_vh,
    stride_kcb: tl.int64,
    stride_kct: tl.int64,
    stride_kch,
    stride_vcb: tl.int64,
    stride_vct: tl.int64,
    stride_vch,
    num_kv_heads,
    PAGE_SIZE: tl.constexpr,
    HEAD_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    LAUNCH_DEPENDENTS: tl.constexpr,
):
    if LAUNCH_DEPENDENTS:
        # the attention after this may start its prologue (paged_attention_common.pdl_enabled)
        gdc_launch_dependents()
    tok = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + tok).to(tl.int64)
    if slot < 0:
        return
    blk = slot // PAGE_SIZE
    off = slot % PAGE_SIZE
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (heads < num_kv_heads)[:, None] & (offs_d < HEAD_SIZE)[None, :]
    k = tl.load(key_ptr + tok * stride_kt + heads[:, None] * stride_kh + offs_d[None, :], mask=mask)
    v = tl.load(value_ptr + tok * stride_vt + heads[:, None] * stride_vh + offs_d[None, :], mask=mask)
    kc = k_cache_ptr + blk * stride_kcb + off * stride_kct
    vc = v_cache_ptr + blk * stride_vcb + off * stride_vct
    tl.store(kc + heads[:, None] * stride_kch + offs_d[None, :], k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(vc + heads[:, None] * stride_vch + offs_d[None, :], v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """k_cache[slot // bs, slot % bs] = key[t] (same for V) for slot >= 0.

    Only the first ``slot_mapping.shape[0]`` tokens are written (vLLM pads
    key/value beyond the scheduled tokens)."""
    assert key.dim() == 3 and value.shape == key.shape, (key.shape, value.shape)
    assert k_cache.dim() == 4 and v_cache.shape == k_cache.shape, (k_cache.shape, v_cache.shape)
    num_tokens = slot_mapping.shape[0]
    assert slot_mapping.dim() == 1 and key.shape[0] >= num_tokens, (slot_mapping.shape, key.shape)
    assert slot_mapping.dtype in (torch.int32, torch.int64), slot_mapping.dtype
    _, page_size, num_kv_heads, head_size = k_cache.shape
    assert key.shape[1:] == (num_kv_heads, head_size), (key.shape, k_cache.shape)
    assert key.stride(-1) == 1 and value.stride(-1) == 1
    assert k_cache.stride(-1) == 1 and v_cache.stride(-1) == 1
    assert k_cache.dtype == v_cache.dtype and key.dtype == value.dtype
    if num_tokens == 0:
        return
    block_d = next_pow2(head_size)
    block_h = max(1, min(next_pow2(num_kv_heads), 4096 // block_d))
    grid = (num_tokens, cdiv(num_kv_heads, block_h))
    _reshape_and_cache_kernel[grid](
        key, value, k_cache, v_cache, slot_mapping,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        num_kv_heads,
        PAGE_SIZE=page_size, HEAD_SIZE=head_size, BLOCK_H=block_h, BLOCK_D=block_d,
        LAUNCH_DEPENDENTS=pdl_enabled(key.device), num_warps=4,
    )


def reshape_and_cache_ref(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Plain torch: the same writes, in place."""
    num_tokens = slot_mapping.shape[0]
    page_size = k_cache.shape[1]
    slots = slot_mapping.long()
    keep = (slots >= 0).nonzero().flatten()
    s = slots[keep]
    k_cache[s // page_size, s % page_size] = key[:num_tokens][keep].to(k_cache.dtype)
    v_cache[s // page_size, s % page_size] = value[:num_tokens][keep].to(v_cache.dtype)


reference = reshape_and_cache_ref
