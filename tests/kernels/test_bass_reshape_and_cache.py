"""reshape_and_cache writes exactly the slots it is given (negative = skip)."""

from __future__ import annotations

import pytest
import torch

from tests.kernels.bass_kernel_testutils import DEVICES, HAS_CUDA
from vllm_bass.kernels.reshape_and_cache import reshape_and_cache, reshape_and_cache_ref


def _cache(num_blocks, page, kv_heads, hd, dtype, device, layout, g):
    if layout == "NHD":
        kv = torch.randn(num_blocks, page, kv_heads, 2 * hd, generator=g).permute(0, 2, 1, 3)
    else:
        kv = torch.randn(num_blocks, kv_heads, page, 2 * hd, generator=g)
    return kv.to(dtype=dtype, device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kv_heads,hd,page", [(2, 32, 16), (3, 48, 32), (8, 128, 16), (1, 64, 64)])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_reshape_and_cache(device, dtype, kv_heads, hd, page, layout):
    g = torch.Generator().manual_seed(hd + page)
    num_blocks, num_tokens, padded = 11, 37, 5
    kv = _cache(num_blocks, page, kv_heads, hd, dtype, device, layout, g)
    k_cache, v_cache = kv.transpose(1, 2).split(hd, dim=-1)
    key = torch.randn(num_tokens + padded, kv_heads, hd, generator=g).to(dtype=dtype, device=device)
    value = torch.randn(num_tokens + padded, kv_heads, hd, generator=g).to(dtype=dtype, device=device)
    slots = torch.randperm(num_blocks * page, generator=g)[:num_tokens]
    slots[::4] = -1  # padding / rejected tokens: not written
    slot_mapping = slots.to(device=device, dtype=torch.int64 if hd == 48 else torch.int32)

    expected = kv.clone()
    ek, ev = expected.transpose(1, 2).split(hd, dim=-1)
    reshape_and_cache_ref(key, value, ek, ev, slot_mapping)
    reshape_and_cache(key, value, k_cache, v_cache, slot_mapping)
    assert torch.equal(kv, expected)  # written slots exact, all others untouched


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (gpu marker): a >2^31-element KV cache")
def test_reshape_and_cache_int64_slots():
    dtype, kv_heads, hd, page = torch.float16, 1, 64, 16
    block_elems = page * kv_heads * 2 * hd
    num_blocks = 2**31 // block_elems + 8
    kv = torch.zeros(num_blocks, kv_heads, page, 2 * hd, dtype=dtype, device="cuda")
    k_cache, v_cache = kv.transpose(1, 2).split(hd, dim=-1)
    key = torch.randn(4, kv_heads, hd, dtype=dtype, device="cuda")
    value = torch.randn(4, kv_heads, hd, dtype=dtype, device="cuda")
    slots = torch.tensor([(num_blocks - 1) * page + 3, -1, 5, (num_blocks - 2) * page], device="cuda")
    reshape_and_cache(key, value, k_cache, v_cache, slots)
    assert torch.equal(k_cache[num_blocks - 1, 3], key[0]) and torch.equal(v_cache[num_blocks - 1, 3], value[0])
    assert torch.equal(k_cache[0, 5], key[2]) and torch.equal(v_cache[num_blocks - 2, 0], value[3])
    assert kv.abs().sum().item() == pytest.approx(
        (key[[0, 2, 3]].abs().sum() + value[[0, 2, 3]].abs().sum()).item(), rel=1e-3
    )
