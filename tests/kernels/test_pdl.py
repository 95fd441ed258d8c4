"""Programmatic dependent launch (Hopper): the attention starts while the KV-cache write
before it runs, and SPLIT's reduction while the splits run; each must still see what its
predecessor wrote (`paged_attention_common.pdl_enabled`)."""

from __future__ import annotations

import pytest
import torch

from tests.kernels.bass_kernel_testutils import HAS_CUDA, INTERPRET, assert_close, make_batch
from vllm_bass.kernels import paged_attention_common as common
from vllm_bass.kernels.paged_attention import choose_plan, num_sms, paged_attention
from vllm_bass.kernels.reshape_and_cache import reshape_and_cache

HOPPER = HAS_CUDA and not INTERPRET and torch.cuda.get_device_capability()[0] >= 9


@pytest.mark.cpu
def test_pdl_only_where_it_can_run(monkeypatch):
    """Off on the CPU and under the interpreter; the override and the variable switch it."""
    assert not common.pdl_enabled(torch.device("cpu"))
    monkeypatch.setattr(common, "PDL_OVERRIDE", True)
    assert not common.pdl_enabled(torch.device("cpu"))
    if HAS_CUDA:
        monkeypatch.setattr(common, "PDL_OVERRIDE", None)
        common._pdl_supported.cache_clear()
        monkeypatch.setenv("VLLM_BASS_ATTENTION_PDL", "0")
        try:
            assert not common.pdl_enabled(torch.device("cuda"))
        finally:
            common._pdl_supported.cache_clear()


@pytest.mark.gpu
@pytest.mark.skipif(not HOPPER, reason="programmatic dependent launch needs sm_90+")
@pytest.mark.parametrize("strategy", ["pad", "split"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_attention_after_the_cache_write_reads_what_it_wrote(strategy, graph):
    """Every step poisons the new tokens' cache slots (NaN), writes their K/V back with our
    cache-write kernel and attends at once (graph-captured: the launch the engine replays;
    the captured plan's SPLIT also meets more requests than it was made for). An attention
    or reduction that read before its predecessor's writes ended would see NaN or stale
    partials: 20 replays must all match the reference."""
    assert common.pdl_enabled(torch.device("cuda"))
    dtype, heads, kv_heads, hd, page = torch.bfloat16, 32, 8, 128, 16
    qlens = [5, 1, 9, 3] * 4
    ctx = [700, 2000, 40, 1300] * 4
    b = make_batch(qlens, ctx, heads, kv_heads, hd, page, dtype, "cuda", seed=3)
    blk, off = [], []
    for i, (ql, c) in enumerate(zip(qlens, ctx)):
        pos = torch.arange(c, c + ql, device="cuda")
        blk.append(b.block_table[i, pos // page].long())
        off.append(pos % page)
    blk, off = torch.cat(blk), torch.cat(off)
    key, value = b.k_cache[blk, off].clone(), b.v_cache[blk, off].clone()
    slots = blk * page + off
    ref = common.paged_attention_ref(b.q, b.k_cache, b.v_cache, b.cu_seqlens_q, b.seq_lens,
                                     b.block_table, b.scale)
    plan = choose_plan(1 if graph else len(qlens), heads, kv_heads, hd, b.max_query_len,
                       b.max_seq_len, num_sms(), strategy=strategy, any_batch=graph)
    ws = torch.empty(max(1, plan.workspace_numel(b.q.shape[0], heads)), dtype=torch.float32,
                     device="cuda")
    out = torch.empty_like(b.q)
    nan = torch.full((), float("nan"), dtype=dtype, device="cuda")  # no host copy in a capture

    def step():
        b.k_cache.index_put_((blk, off), nan)
        b.v_cache.index_put_((blk, off), nan)
        reshape_and_cache(key, value, b.k_cache, b.v_cache, slots)
        paged_attention(b.q, b.k_cache, b.v_cache, out, b.cu_seqlens_q, b.seq_lens,
                        b.block_table, b.scale, b.max_query_len, b.max_seq_len, plan=plan,
                        workspace=ws)

    step()  # compiles outside the capture
    run = step
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        run = g.replay
    for i in range(20):
        out.fill_(float("nan"))
        ws.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        assert_close(out, ref, dtype, f"{strategy} {'graph' if graph else 'eager'} step {i}")
