"""The BASS attention backend satisfies vLLM 0.27.1's backend interface, and
its builder + impl compute the same attention as the reference (on CPU through
the Triton interpreter, on GPU compiled)."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from tests.kernels.bass_kernel_testutils import DEVICES, assert_close, make_batch

pytest.importorskip("vllm")

from vllm.platforms.interface import DeviceCapability  # noqa: E402
from vllm.v1.attention.backend import (  # noqa: E402
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
)
from vllm.v1.attention.backends.registry import AttentionBackendEnum  # noqa: E402
from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec  # noqa: E402

from vllm_bass.attention import BACKEND_CLASS_PATH, register_bass_attention_backend  # noqa: E402
from vllm_bass.attention.backend import (  # noqa: E402
    PLANNED_DRAFTS,
    BassAttentionBackend,
    BassAttentionImpl,
    BassAttentionMetadataBuilder,
)
from vllm_bass.kernels.paged_attention_common import paged_attention_ref  # noqa: E402

# The device-independent interface tests run everywhere; the end-to-end test takes its
# cpu / gpu marks from DEVICES.


@pytest.mark.cpu
@pytest.mark.gpu
def test_register_is_idempotent_and_resolves():
    assert register_bass_attention_backend() is True
    assert register_bass_attention_backend() is True
    assert AttentionBackendEnum.CUSTOM.get_path() == BACKEND_CLASS_PATH
    assert AttentionBackendEnum.CUSTOM.get_class() is BassAttentionBackend
    assert AttentionBackendEnum[BassAttentionBackend.get_name()] is AttentionBackendEnum.CUSTOM


@pytest.mark.cpu
@pytest.mark.gpu
def test_register_does_not_import_triton_or_the_backend():
    code = (
        "import sys, vllm_bass.attention as a; "
        "assert 'vllm_bass.attention.backend' not in sys.modules; "
        "assert not any(m.startswith('vllm_bass.kernels') for m in sys.modules); "
        "print('ok')"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


@pytest.mark.cpu
@pytest.mark.gpu
def test_backend_class_interface():
    B = BassAttentionBackend
    assert issubclass(B, AttentionBackend)
    assert B.get_name() == "CUSTOM"
    assert issubclass(B.get_impl_cls(), AttentionImpl)
    assert issubclass(B.get_builder_cls(), AttentionMetadataBuilder)
    assert B.forward_includes_kv_cache_update is False
    for args in [(100, 16, 32, 128), (7, 32, 8, 64), (3, 64, 1, 80)]:
        assert B.get_kv_cache_shape(*args) == TritonAttentionBackend.get_kv_cache_shape(*args)
    with pytest.raises(ValueError):
        B.get_kv_cache_shape(10, 8, 2, 64)
    from vllm.config import VllmConfig, set_current_vllm_config

    with set_current_vllm_config(VllmConfig()):
        assert B.get_kv_cache_stride_order() == TritonAttentionBackend.get_kv_cache_stride_order()
        assert B.get_kv_cache_stride_order(True) == TritonAttentionBackend.get_kv_cache_stride_order(True)
    assert set(B.supported_dtypes) == {torch.float16, torch.bfloat16, torch.float32}
    for hs in (64, 80, 96, 128, 256):
        assert B.supports_head_size(hs)
    assert not B.supports_head_size(100) and not B.supports_head_size(512)
    for bs in (16, 32, 64, 128):
        assert B.supports_block_size(bs)
    assert not B.supports_block_size(8)


def _validate(**over):
    kw = dict(
        head_size=128, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=16, use_mla=False,
        has_sink=False, use_sparse=False, use_mm_prefix=False, use_per_head_quant_scales=False,
        device_capability=DeviceCapability(9, 0), attn_type=AttentionType.DECODER,
    )
    kw.update(over)
    return BassAttentionBackend.validate_configuration(**kw)


@pytest.mark.cpu
@pytest.mark.gpu
def test_validate_configuration():
    assert _validate() == []
    assert _validate(dtype=torch.float16, head_size=64, block_size=32) == []
    assert any("sliding" in r for r in _validate(has_sliding_window=True))
    assert any("kv_cache_dtype" in r for r in _validate(kv_cache_dtype="fp8"))
    assert any("sink" in r for r in _validate(has_sink=True))
    assert any("MLA" in r for r in _validate(use_mla=True))
    assert any("attention type" in r for r in _validate(attn_type=AttentionType.ENCODER_ONLY))
    assert any("compute capability" in r for r in _validate(device_capability=DeviceCapability(7, 5)))


@pytest.mark.cpu
@pytest.mark.gpu
@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(alibi_slopes=[0.5] * 4), "ALiBi"),
        (dict(sliding_window=128), "sliding window"),
        (dict(logits_soft_cap=30.0), "soft-cap"),
        (dict(attn_type=AttentionType.ENCODER), "attention type"),
        (dict(kv_cache_dtype="fp8"), "kv_cache_dtype"),
        (dict(sinks=torch.zeros(4)), "sinks"),
    ],
)
def test_impl_rejects_unsupported(kwargs, needle):
    base = dict(num_heads=4, head_size=64, scale=0.125, num_kv_heads=2)
    with pytest.raises(NotImplementedError, match=needle):
        BassAttentionImpl(**base, **kwargs)


def _fake_vllm_config(num_heads, num_kv_heads):
    model_config = SimpleNamespace(
        get_num_attention_heads=lambda parallel_config: num_heads,
        get_num_kv_heads=lambda parallel_config: num_kv_heads,
        max_model_len=4096,
    )
    return SimpleNamespace(
        model_config=model_config,
        parallel_config=SimpleNamespace(),
        compilation_config=SimpleNamespace(static_forward_context={}),
    )


@pytest.mark.cpu
@pytest.mark.gpu
def test_cache_views_follow_a_replaced_cache_tensor():
    """The impl keeps its layer's K/V views between steps; a new cache tensor (vLLM
    reallocating the KV cache) must get views of its own, never the old storage."""
    impl = BassAttentionImpl(4, 16, 0.25, 2)
    first = torch.randn(3, 2, 16, 32)
    k1, v1 = impl._split_cache(first)
    assert impl._split_cache(first)[0] is k1  # made once
    assert torch.equal(k1, first.transpose(1, 2)[..., :16])
    assert torch.equal(v1, first.transpose(1, 2)[..., 16:])
    second = torch.randn(5, 2, 16, 32)
    k2, v2 = impl._split_cache(second)
    assert k2.data_ptr() == second.data_ptr() and k2.shape == (5, 16, 2, 16)
    assert torch.equal(v2, second.transpose(1, 2)[..., 16:])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("strategy", ["pad", "split"])
def test_builder_and_impl_end_to_end(device, dtype, strategy, monkeypatch):
    """Build metadata from vLLM's CommonAttentionMetadata, write the new
    tokens with do_kv_cache_update, run forward (twice: checked, then the
    unchecked per-layer path); compare with the reference."""
    from vllm_bass.kernels import paged_attention as pa

    # steer the chooser: tiny split threshold and many programs wanted -> SPLIT
    monkeypatch.setattr(pa, "MIN_SPLIT_TOKENS", 16 if strategy == "split" else 1 << 30)
    monkeypatch.setattr(pa, "SHORT_CONTEXT", 0)
    monkeypatch.setattr(pa, "num_sms", lambda device=None: 64)
    heads, kv_heads, hd, page = 4, 2, 32, 16
    qlens, ctx = [1, 3, 6, 2], [20, 0, 45, 9]
    b = make_batch(qlens, ctx, heads, kv_heads, hd, page, dtype, device, seed=11)
    # the new tokens' K/V: take them out of the cache, poison their slots,
    # and let do_kv_cache_update put them back
    T = b.q.shape[0]
    slot_mapping = torch.empty(T + 2, dtype=torch.int64, device=device)  # 2 padded tokens
    slot_mapping[T:] = -1
    key = torch.empty(T + 2, kv_heads, hd, dtype=dtype, device=device)
    value = torch.randn(T + 2, kv_heads, hd, device=device).to(dtype)
    t = 0
    for i, (ql, c) in enumerate(zip(qlens, ctx)):
        for j in range(ql):
            pos = c + j
            blk = b.block_table[i, pos // page].long()
            slot_mapping[t] = blk * page + pos % page
            key[t] = b.k_cache[blk, pos % page]
            value[t] = b.v_cache[blk, pos % page]
            b.k_cache[blk, pos % page] = float("nan")
            b.v_cache[blk, pos % page] = float("nan")
            t += 1

    spec = FullAttentionSpec(block_size=page, num_kv_heads=kv_heads, head_size=hd, dtype=dtype)
    builder = BassAttentionMetadataBuilder(spec, ["layers.0.attn"], _fake_vllm_config(heads, kv_heads), torch.device(device))
    cm = CommonAttentionMetadata(
        query_start_loc=b.cu_seqlens_q,
        query_start_loc_cpu=b.cu_seqlens_q.cpu(),
        seq_lens=b.seq_lens,
        num_reqs=len(qlens),
        num_actual_tokens=T,
        max_query_len=b.max_query_len,
        max_seq_len=b.max_seq_len,
        block_table_tensor=b.block_table,
        slot_mapping=slot_mapping,
    )
    md = builder.build(0, cm)
    assert md.plan.strategy == strategy and (md.workspace is not None) == (strategy == "split")
    impl = BassAttentionImpl(heads, hd, b.scale, kv_heads, None, None, "auto", None, AttentionType.DECODER, None)
    layer = SimpleNamespace()
    impl.do_kv_cache_update(layer, key, value, b.kv_cache, slot_mapping)
    query = torch.cat([b.q, torch.randn(2, heads, hd, device=device).to(dtype)])
    output = torch.full((T + 2, heads * hd), float("nan"), dtype=dtype, device=device)
    ref = paged_attention_ref(b.q, b.k_cache, b.v_cache, b.cu_seqlens_q, b.seq_lens, b.block_table, b.scale)
    for layer_no in range(2):
        impl.forward(layer, query, key, value, b.kv_cache, md, output)
        assert md.checked
        assert_close(output[:T].view(T, heads, hd), ref, dtype, f"backend forward, layer {layer_no}")
        output.fill_(float("nan"))
    # profiling run (no metadata) fills zeros
    assert impl.forward(layer, query, key, value, b.kv_cache, None, output).abs().sum() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_prefill_steps_run_fa3_where_vllm_has_it(device, monkeypatch):
    """A step with a query of PREFILL_QUERY_LEN+ tokens (prefill chunks beside decodes and
    a short verification) runs FA3 over our cache layout on the GPU host, our kernels on
    CPU; either way the reference's answer. Captured (any-batch) metadata never does."""
    from vllm_bass.attention import backend

    calls = []
    real = backend.fa3_for_prefill

    def counted(dtype):
        fn = real(dtype)
        return None if fn is None else (lambda **kw: calls.append(1) or fn(**kw))

    monkeypatch.setattr(backend, "fa3_for_prefill", counted)
    monkeypatch.setattr(backend, "_fa3_prefill_checked", False)  # this process's first check
    dtype, heads, kv_heads, hd, page = torch.bfloat16, 4, 2, 64, 16
    qlens, ctx = [70, 1, 4, backend.PREFILL_QUERY_LEN], [0, 20, 9, 17]
    b = make_batch(qlens, ctx, heads, kv_heads, hd, page, dtype, device, seed=5)
    T = b.q.shape[0]
    spec = FullAttentionSpec(block_size=page, num_kv_heads=kv_heads, head_size=hd, dtype=dtype)
    builder = BassAttentionMetadataBuilder(spec, ["layers.0.attn"],
                                           _fake_vllm_config(heads, kv_heads),
                                           torch.device(device))
    cm = CommonAttentionMetadata(
        query_start_loc=b.cu_seqlens_q, query_start_loc_cpu=b.cu_seqlens_q.cpu(),
        seq_lens=b.seq_lens, num_reqs=len(qlens), num_actual_tokens=T,
        max_query_len=b.max_query_len, max_seq_len=b.max_seq_len,
        block_table_tensor=b.block_table,
        slot_mapping=torch.full((T,), -1, dtype=torch.int64, device=device))
    impl = BassAttentionImpl(heads, hd, b.scale, kv_heads, None, None, "auto", None,
                             AttentionType.DECODER, None)
    ref = paged_attention_ref(b.q, b.k_cache, b.v_cache, b.cu_seqlens_q, b.seq_lens,
                              b.block_table, b.scale)
    output = torch.full((T, heads * hd), float("nan"), dtype=dtype, device=device)
    impl.forward(SimpleNamespace(), b.q, None, None, b.kv_cache, builder.build(0, cm), output)
    assert_close(output.view(T, heads, hd), ref, dtype,
                 f"prefill step ({'FA3' if calls else 'our kernels'})")
    assert len(calls) == (1 if device == "cuda" else 0), (
        f"FA3 calls {len(calls)}; unusable because: {backend.fa3_unusable_reason}")
    # the first FA3 prefill was checked against our kernels and kept
    assert backend._fa3_prefill_checked == (device == "cuda")
    assert bool(backend._fa3_prefill) == (device == "cuda"), backend.fa3_unusable_reason
    output.fill_(float("nan"))
    captured = builder.build(0, cm, plan_seq_len=b.max_seq_len, any_batch=True,
                             expected_batch=len(qlens), expected_query_len=b.max_query_len)
    impl.forward(SimpleNamespace(), b.q, None, None, b.kv_cache, captured, output)
    assert_close(output.view(T, heads, hd), ref, dtype, "captured prefill-shaped step")
    assert len(calls) == (1 if device == "cuda" else 0), "a captured step took FA3's path"


@pytest.mark.cpu
@pytest.mark.gpu
def test_fa3_prefill_is_dropped_when_it_disagrees_with_our_kernels(monkeypatch):
    """The first FA3 prefill's check: agreement keeps FA3; a disagreement (or a non-finite
    answer) turns it off for the process and says why."""
    from vllm_bass.attention import backend

    monkeypatch.setattr(backend, "_fa3_prefill", "fa3")
    monkeypatch.setattr(backend, "_fa3_prefill_checked", False)
    monkeypatch.setattr(backend, "fa3_unusable_reason", None)
    ours = torch.randn(6, 4, 8)
    assert backend.check_fa3_prefill(ours + 1e-4 * torch.randn_like(ours), ours)
    assert backend._fa3_prefill == "fa3" and backend._fa3_prefill_checked
    assert not backend.check_fa3_prefill(ours.flip(0), ours)
    assert backend._fa3_prefill is False and "disagreed" in backend.fa3_unusable_reason
    monkeypatch.setattr(backend, "_fa3_prefill", "fa3")
    bad = ours.clone()
    bad[0, 0, 0] = float("nan")
    assert not backend.check_fa3_prefill(bad, ours) and backend._fa3_prefill is False


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", ["pad", "split"])
@pytest.mark.parametrize("replay", ["decode", "ragged"])
def test_captured_metadata_serves_any_batch(device, strategy, replay, monkeypatch):
    """A batch is captured the way vLLM captures full CUDA graphs (16 token rows, 8
    requests, dummy context lengths, plans for max_model_len); the same launch -- replayed
    from a real CUDA graph on the GPU -- then computes attention for another batch written
    into the same tensors: decode over longer, ragged contexts, or ragged verification
    with a sequence longer than a query tile; padding requests and token rows included."""
    from vllm.v1.attention.backend import AttentionCGSupport

    from vllm_bass.kernels import paged_attention as pa

    assert BassAttentionMetadataBuilder.get_cudagraph_support(None, None) == (
        AttentionCGSupport.ALWAYS)
    monkeypatch.setattr(pa, "MIN_SPLIT_TOKENS", 16 if strategy == "split" else 1 << 30)
    monkeypatch.setattr(pa, "SHORT_CONTEXT", 0)
    monkeypatch.setattr(pa, "num_sms", lambda device=None: 64)
    heads, kv_heads, hd, page, dtype = 4, 2, 32, 16, torch.float16
    num_tokens, num_reqs = 16, 8  # the graph's sizes
    qlens = {"decode": [1] * 6 + [0, 0], "ragged": [3, 1, 11, 0, 0, 0, 0, 0]}[replay]
    ctx = [200, 5, 130, 61, 17, 90, 0, 0]
    b = make_batch(qlens, [c if q else 0 for c, q in zip(ctx, qlens)], heads, kv_heads, hd,
                   page, dtype, device, seed=5)
    real = b.q.shape[0]
    q = torch.cat([b.q, torch.randn(num_tokens - real, heads, hd, device=device).to(dtype)])
    # what the capture sees: 2 tokens per request, contexts of 2
    query_start_loc = torch.arange(0, num_tokens + 1, 2, dtype=torch.int32, device=device)
    seq_lens = torch.full((num_reqs,), 2, dtype=torch.int32, device=device)
    config = _fake_vllm_config(heads, kv_heads)
    config.model_config.max_model_len = 256
    spec = FullAttentionSpec(block_size=page, num_kv_heads=kv_heads, head_size=hd, dtype=dtype)
    builder = BassAttentionMetadataBuilder(spec, ["layers.0.attn"], config, torch.device(device))
    cm = CommonAttentionMetadata(
        query_start_loc=query_start_loc, query_start_loc_cpu=query_start_loc.cpu(),
        seq_lens=seq_lens, num_reqs=num_reqs, num_actual_tokens=num_tokens, max_query_len=2,
        max_seq_len=2, block_table_tensor=b.block_table,
        slot_mapping=torch.zeros(num_tokens, dtype=torch.int64, device=device))
    md = builder.build_for_cudagraph_capture(cm)
    assert md.plan.strategy == strategy and md.plan_seq_len == 256 and md.plan.any_batch
    assert md.plan.tiles.q_per_tile < 11, "the ragged replay must span query tiles"
    assert builder._captured_plans[-1] is md.plans, "the graph's workspaces stay referenced"
    impl = BassAttentionImpl(heads, hd, b.scale, kv_heads, None, None, "auto", None,
                             AttentionType.DECODER, None)
    output = torch.full((num_tokens, heads * hd), float("nan"), dtype=dtype, device=device)

    def step():
        impl.forward(SimpleNamespace(), q, q, q, b.kv_cache, md, output)

    step()  # warm-up (Triton compiles outside the capture)
    if device == "cuda":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        run = graph.replay
    else:
        run = step
    # the real step's batch, in place (vLLM refills its persistent buffers)
    query_start_loc.copy_(b.cu_seqlens_q)
    seq_lens.copy_(b.seq_lens)
    output.fill_(7.0)
    run()
    ref = paged_attention_ref(b.q, b.k_cache, b.v_cache, b.cu_seqlens_q, b.seq_lens,
                              b.block_table, b.scale)
    assert_close(output[:real].view(real, heads, hd), ref, dtype, f"replayed {strategy} launch")


def _dummy_capture_batch(bound: int, n: int, dummy_query_len: int, max_model_len: int = 4096):
    """A 7B layer's builder (32 heads, head 128, bf16) of an engine with draft bound `bound`,
    and the metadata of a graph capture's dummy batch: `n` tokens in requests of
    `dummy_query_len`."""
    config = _fake_vllm_config(32, 32)
    config.model_config.max_model_len = max_model_len
    config.speculative_config = SimpleNamespace(num_speculative_tokens=bound)
    spec = FullAttentionSpec(block_size=16, num_kv_heads=32, head_size=128,
                             dtype=torch.bfloat16)
    builder = BassAttentionMetadataBuilder(spec, ["layers.0.attn"], config, torch.device("cpu"))
    starts = torch.clamp(torch.arange(n + 1, dtype=torch.int32) * dummy_query_len, max=n)
    cm = CommonAttentionMetadata(
        query_start_loc=starts, query_start_loc_cpu=starts,
        seq_lens=torch.ones(n, dtype=torch.int32), num_reqs=n, num_actual_tokens=n,
        max_query_len=dummy_query_len, max_seq_len=dummy_query_len,
        block_table_tensor=torch.zeros(n, 256, dtype=torch.int32),
        slot_mapping=torch.zeros(n, dtype=torch.int64))
    return builder, cm


@pytest.mark.cpu
@pytest.mark.gpu
@pytest.mark.parametrize("uniform,bound,dummy_query_len", [
    (True, 7, 1), (False, 7, 1), (False, 7, 8), (False, 16, 17), (False, 16, 1)])
def test_capture_plans_for_the_batches_the_graph_will_replay(uniform, bound, dummy_query_len,
                                                            monkeypatch):
    """A uniform decode graph (the BASS runner says so while capturing) replays exactly its
    requests: planned for all 32 (PAD). A mixed graph of 32 tokens more likely holds 4
    verifications of 1 + 7 tokens: planned for 4 (SPLIT, safe if it meets more), whatever
    queries the dummy batch held. A bound past PLANNED_DRAFTS plans as PLANNED_DRAFTS."""
    from vllm_bass.attention import capturing_uniform_batch
    from vllm_bass.kernels import paged_attention as pa

    monkeypatch.setattr(pa, "num_sms", lambda device=None: 132)
    n = 32
    builder, cm = _dummy_capture_batch(bound, n, dummy_query_len)
    token = capturing_uniform_batch.set(uniform)
    try:
        md = builder.build_for_cudagraph_capture(cm)
    finally:
        capturing_uniform_batch.reset(token)
    assert md.plan.any_batch and md.plan_seq_len == 4096
    if uniform:
        assert (md.expected_batch, md.expected_query_len) == (32, 1)
        assert md.plan.strategy == "pad"
    else:
        planned = 1 + min(bound, PLANNED_DRAFTS)
        assert (md.expected_batch, md.expected_query_len) == (-(-n // planned), planned)
        assert md.plan.strategy == "split"
        assert md.plan.tiles.block_m == 16  # 16-row tiles for MHA, not 32 for 1 + 16
    assert builder.build(0, cm).plan.any_batch is False  # eager steps: the direct grid


@pytest.mark.cpu
@pytest.mark.gpu
def test_long_query_batch_limit_splits_the_sizes_where_the_plans_differ(monkeypatch):
    """Session 55: a 7B layer (32 heads, head 128, bf16) on 132 SMs, max_model_len 2048, a
    default engine's graphs planned for 1 + 8 tokens a request. At 64 tokens that plan (8
    requests) is a wide PAD and a batch of 32 one-draft requests wants the narrow one: the
    split lies between, and past it each batch's own plan is the short one. At 128 tokens
    one plan serves both; an engine whose verifications are short already has no split."""
    from vllm_bass.attention.backend import (
        SHORT_QUERY_LEN,
        graph_plan_for,
        long_query_batch_limit,
    )

    plan_for = graph_plan_for(32, 32, 128, 2, 2048, 132)
    short = plan_for(32, SHORT_QUERY_LEN)
    assert plan_for(8, 9) != short and short[0] == "pad"
    limit = long_query_batch_limit(64, 64, 9, plan_for)
    assert limit is not None and 8 <= limit < 32
    assert plan_for(limit + 1, -(-64 // (limit + 1))) == short
    assert plan_for(limit, -(-64 // limit)) != short
    assert long_query_batch_limit(128, 128, 9, plan_for) is None
    assert long_query_batch_limit(64, 64, SHORT_QUERY_LEN, plan_for) is None
    assert long_query_batch_limit(64, 1, 9, plan_for) is None

    def fake(batch, query_len):  # the short plan from 5 requests on: the limit is 4
        return "short" if batch >= 5 else "long"
    assert long_query_batch_limit(20, 20, 9, fake) == 4
    assert long_query_batch_limit(20, 20, 9, lambda b, q: "long") is None


@pytest.mark.cpu
@pytest.mark.gpu
def test_a_short_query_graph_is_planned_for_one_draft_requests(monkeypatch):
    """While the runner captures a size's short-query graph (`planned_query_len` set), the
    mixed graph's plan is the one for requests of SHORT_QUERY_LEN tokens (batch 32 of 64
    tokens: the narrow PAD), not the default's few long verifications (a wide PAD)."""
    from vllm_bass.attention import planned_query_len
    from vllm_bass.attention.backend import SHORT_QUERY_LEN, graph_plan_for
    from vllm_bass.kernels import paged_attention as pa

    monkeypatch.setattr(pa, "num_sms", lambda device=None: 132)
    builder, cm = _dummy_capture_batch(16, 64, SHORT_QUERY_LEN, max_model_len=2048)
    plan_for = graph_plan_for(32, 32, 128, 2, 2048, 132)
    default = builder.build_for_cudagraph_capture(cm)
    assert (default.expected_batch, default.expected_query_len) == (8, 9)
    token = planned_query_len.set(SHORT_QUERY_LEN)
    try:
        short = builder.build_for_cudagraph_capture(cm)
    finally:
        planned_query_len.reset(token)
    assert (short.expected_batch, short.expected_query_len) == (32, SHORT_QUERY_LEN)
    key = lambda p: (p.strategy, p.num_splits, p.tiles)  # noqa: E731
    assert key(short.plan) == plan_for(32, SHORT_QUERY_LEN) != key(default.plan)
    assert planned_query_len.get() == 0
