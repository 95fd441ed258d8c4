"""Shared helpers of the kernel tests: device params, the tolerance table,
random paged-cache batches.

Importing this sets TRITON_INTERPRET=1 when there is no CUDA device, so the
``cpu`` tests run the real Triton kernels through the interpreter in CI. It
must be imported before any ``vllm_bass.kernels`` module (Triton decides
interpreter vs compiler when a kernel is decorated); conftest.py does that.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

# One place for all tolerances: relative L2 error ||out - ref|| / ||ref||
# against a float64 reference computed from the same (rounded) inputs, and
# the max elementwise error. bf16/fp16 error comes from rounding P to the
# input dtype before the PV product and from the output rounding.
TOLERANCES = {
    torch.float32: dict(rel=2e-5, max_abs=2e-4),
    torch.float16: dict(rel=3e-3, max_abs=1e-2),
    torch.bfloat16: dict(rel=1.6e-2, max_abs=6e-2),
}

CPU = pytest.param(
    "cpu",
    marks=[
        pytest.mark.cpu,
        pytest.mark.skipif(
            not INTERPRET, reason="CPU kernel tests run under TRITON_INTERPRET=1 (set automatically without CUDA)"
        ),
    ],
    id="cpu",
)
GPU = pytest.param(
    "cuda",
    marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (gpu marker: run on the GPU host)"),
        pytest.mark.skipif(INTERPRET, reason="TRITON_INTERPRET=1 is set: GPU tests need compiled kernels"),
    ],
    id="gpu",
)
DEVICES = [CPU, GPU]


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str = "") -> None:
    tol = TOLERANCES[dtype]
    out = out.double()
    ref = ref.double()
    assert torch.isfinite(out).all(), f"{what}: non-finite output (unwritten rows?)"
    rel = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    max_abs = (out - ref).abs().max().item()
    assert rel <= tol["rel"] and max_abs <= tol["max_abs"], (
        f"{what}: rel L2 {rel:.3e} (tol {tol['rel']:.1e}), max abs {max_abs:.3e} (tol {tol['max_abs']:.1e})"
    )


@dataclass
class PagedBatch:
    q: torch.Tensor  # [T, H, D]
    kv_cache: torch.Tensor  # vLLM's logical packed cache (num_blocks, KVH, P, 2D)
    k_cache: torch.Tensor  # (num_blocks, P, KVH, D) views
    v_cache: torch.Tensor
    cu_seqlens_q: torch.Tensor
    seq_lens: torch.Tensor
    block_table: torch.Tensor
    max_query_len: int
    max_seq_len: int
    scale: float


def make_batch(
    query_lens: list[int],
    context_lens: list[int],
    num_heads: int,
    num_kv_heads: int,
    head_size: int,
    page_size: int,
    dtype: torch.dtype,
    device: str,
    layout: str = "NHD",
    extra_blocks: int = 7,
    seed: int = 0,
) -> PagedBatch:
    """Random batch: sequence b has context_lens[b] old tokens plus
    query_lens[b] new ones, all already in the cache; blocks are drawn from a
    shuffled pool (so block tables are random, non-contiguous); unused
    block-table entries and blocks hold garbage that must not be read."""
    g = torch.Generator().manual_seed(seed)
    seq_lens = [c + q for c, q in zip(context_lens, query_lens)]
    nblk = [(s + page_size - 1) // page_size for s in seq_lens]
    num_blocks = sum(nblk) + extra_blocks
    max_blocks = max(nblk) + 2
    perm = torch.randperm(num_blocks, generator=g)
    bt = torch.randint(0, num_blocks, (len(seq_lens), max_blocks), generator=g, dtype=torch.int32)
    i = 0
    for b, n in enumerate(nblk):
        bt[b, :n] = perm[i : i + n].int()
        i += n
    if layout == "NHD":  # physical (blocks, P, KVH, 2D), vLLM's default
        phys = torch.randn(num_blocks, page_size, num_kv_heads, 2 * head_size, generator=g)
        kv_cache = phys.permute(0, 2, 1, 3)
    else:  # HND: physical == logical
        kv_cache = torch.randn(num_blocks, num_kv_heads, page_size, 2 * head_size, generator=g)
    kv_cache = kv_cache.to(dtype=dtype, device=device)
    k_cache, v_cache = kv_cache.transpose(1, 2).split(head_size, dim=-1)
    q = torch.randn(sum(query_lens), num_heads, head_size, generator=g).to(dtype=dtype, device=device)
    cu = [0]
    for ql in query_lens:
        cu.append(cu[-1] + ql)
    return PagedBatch(
        q=q,
        kv_cache=kv_cache,
        k_cache=k_cache,
        v_cache=v_cache,
        cu_seqlens_q=torch.tensor(cu, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        block_table=bt.to(device),
        max_query_len=max(query_lens),
        max_seq_len=max(seq_lens),
        scale=head_size**-0.5,
    )


def random_lengths(n: int, lo: int, hi: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(lo, hi) for _ in range(n)]
