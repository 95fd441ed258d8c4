"""Compiling our attention for the CUDA graphs ahead of their capture (`attention.precompile`):
the batches it replays are the ones the captures build, each graph is planned as its
capture plans it, the batch counts no longer split a plan into several binaries, and the
compiles go to Triton's AsyncCompileMode without ever failing the engine.

The compiles themselves need a GPU (Triton's warmup binds to the active driver); here the
kernels are fakes, and the specialisation keys come from Triton's own `specialize_impl` in a
subprocess without the interpreter (the kernel tests turn it on for this process)."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytestmark = pytest.mark.cpu
REPO = Path(__file__).resolve().parents[2]
ATTENTION = ("_paged_attention_pad_kernel", "_paged_attention_split_kernel")


def _builder(heads, kv_heads, head_size=128, drafts=4, max_model_len=4096, device="cpu"):
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    from vllm_bass.attention.backend import BassAttentionMetadataBuilder

    config = SimpleNamespace(
        model_config=SimpleNamespace(get_num_attention_heads=lambda p: heads,
                                     get_num_kv_heads=lambda p: kv_heads,
                                     max_model_len=max_model_len),
        parallel_config=SimpleNamespace(),
        compilation_config=SimpleNamespace(static_forward_context={}),
        speculative_config=SimpleNamespace(num_speculative_tokens=drafts))
    spec = FullAttentionSpec(block_size=16, num_kv_heads=kv_heads, head_size=head_size,
                             dtype=torch.bfloat16)
    builder = BassAttentionMetadataBuilder(spec, ["layers.0.attn"], config, torch.device(device))
    builder._sms = 132  # an H100's, for the plans (CPU has none)
    return builder


def _kv_cache(kv_heads, head_size=128, blocks=4):
    """A layer's cache as vLLM allocates it for our backend under the NHD layout: logical
    (B, H, N, 2*hs) over a physical (B, N, H, 2*hs) buffer."""
    return torch.empty(blocks, 16, kv_heads, 2 * head_size, dtype=torch.bfloat16).permute(
        0, 2, 1, 3)


def _runner(keys, max_num_seqs, full_max_query_len):
    from vllm.config import CUDAGraphMode

    return SimpleNamespace(
        cudagraph_dispatcher=SimpleNamespace(cudagraph_keys={CUDAGraphMode.FULL: keys},
                                             full_max_query_len=full_max_query_len),
        scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs),
        uniform_decode_query_len=1)


def _key(tokens, uniform, max_num_seqs):
    """A FULL key as vLLM's dispatcher makes it (`_create_padded_batch_descriptor`, one
    token a request for BASS's uniform decode graphs)."""
    from vllm.forward_context import BatchDescriptor

    return BatchDescriptor(num_tokens=tokens, num_reqs=min(tokens, max_num_seqs),
                           uniform=uniform)


def test_target_graph_batches_are_vllms_dummy_batches():
    from vllm.forward_context import BatchDescriptor

    from vllm_bass.attention.precompile import GraphBatch, target_graph_batches

    keys = [_key(t, True, 8) for t in (1, 2, 8)] + [_key(t, False, 8) for t in (8, 16, 40)]
    got = set(target_graph_batches(_runner(keys, 8, 5)))
    # uniform decode: one token a request; verification-shaped: the key's requests (the
    # builder plans them for requests of 1 + K = 5 tokens) and queries of 5
    assert got == {GraphBatch(1, 1, 1, 1, True, True), GraphBatch(2, 2, 1, 1, True, True),
                   GraphBatch(8, 8, 1, 1, True, True), GraphBatch(8, 8, 5, 1, True, False),
                   GraphBatch(8, 16, 5, 1, True, False), GraphBatch(8, 40, 5, 1, True, False)}
    # without BASS's verification graphs: vLLM's mixed dummy batch (query = the batch);
    # a key without a request count: vLLM's dummy run's own
    plain = target_graph_batches(_runner([BatchDescriptor(num_tokens=40)], 8, None))
    assert plain == [GraphBatch(8, 40, 40, 1, True, False)]


def test_target_graph_batches_plan_a_short_query_graph_for_one_draft_requests():
    """VLLM_BASS_SHORT_QUERY_GRAPHS (session 55): a size with two mixed keys compiles both
    plans: its long-query key as a verification graph (1 + K tokens a request, the default
    plan), its mixed key from requests of two tokens, planned for them; the replay launches
    each as its capture will (a wide PAD and the narrow one at 64 tokens, bound 16)."""
    import dataclasses

    from vllm_bass.attention.backend import SHORT_QUERY_LEN
    from vllm_bass.attention.precompile import GraphBatch, replay_launches, target_graph_batches

    short = _key(64, False, 128)
    long = dataclasses.replace(short, num_reqs=12)
    runner = _runner([short, long, _key(128, False, 128)], 128, 17)
    runner.cudagraph_dispatcher.long_query_keys = {64: long}
    got = target_graph_batches(runner)
    assert got == [GraphBatch(64, 64, SHORT_QUERY_LEN, 1, True, False,
                              planned_query_len=SHORT_QUERY_LEN),
                   GraphBatch(12, 64, 17, 1, True, False),
                   GraphBatch(128, 128, 17, 1, True, False)]
    builder = _builder(32, 32, drafts=16, max_model_len=2048)
    launches = replay_launches(builder, got[:2], torch.zeros(128, 128, dtype=torch.int32),
                               _kv_cache(32), torch.device("cpu"))
    attention = [x for x in launches if x.kernel.fn.__name__ in ATTENTION]
    assert [x.meta["BLOCK_N"] for x in attention] == [64, 128], \
        "the short-query graph's narrow PAD, the long-query graph's wide one"


def test_draft_graph_batches_are_the_drafters_captures():
    from vllm_bass.attention.precompile import GraphBatch, draft_graph_batches
    from vllm_bass.worker.drafter.draft_graphs import DraftStepGraphs
    from vllm_bass.worker.drafter.first_pass_graphs import FirstPassGraphs

    steps = DraftStepGraphs.__new__(DraftStepGraphs)
    steps.max_rows, steps.use_graphs = 6, True
    first = FirstPassGraphs.__new__(FirstPassGraphs)
    first.max_rows, first.max_tokens, first.max_query_len, first.use_graphs = 6, 24, 6, True
    first.graphs_supported = lambda: True
    drafter = SimpleNamespace(bass_step_graphs=steps, bass_first_pass_graphs=first,
                              max_model_len=512)
    got = draft_graph_batches(drafter, [1, 2, 4, 8, 16, 24, 32])
    # step graphs: the sizes up to 6 rows, and 6 (the batches between 4 and max_num_seqs)
    assert [b for b in got if not b.for_capture] == [
        GraphBatch(r, r, 1, 512, False, True) for r in (6, 4, 2, 1)]
    # first pass: token counts 2..24, rows_for(tokens) rows, queries up to 6 tokens
    assert [b for b in got if b.for_capture] == [
        GraphBatch(min(t // 2, 6), t, 6, 512, True, False) for t in (24, 16, 8, 4, 2)]
    first.use_graphs = False
    assert all(not b.for_capture for b in draft_graph_batches(drafter, [1, 2, 4]))
    steps.use_graphs = False
    assert draft_graph_batches(drafter, [1, 2, 4]) == []


def test_replay_plans_each_graph_as_its_capture_does():
    """GQA (group 4): a uniform decode graph gets 16-row tiles (one token x 4 heads), a
    verification graph planned for 1 + K = 5 tokens 32-row ones; the replay launches what
    the capture would, and leaves the builder's captured plans alone."""
    from vllm_bass.attention.precompile import GraphBatch, replay_launches

    builder = _builder(32, 8, drafts=4)
    table = torch.zeros(64, 256, dtype=torch.int32)
    batches = [GraphBatch(t, t, 1, 1, True, True) for t in (1, 8, 64)] + [
        GraphBatch(min(t, 64), t, 5, 1, True, False) for t in (5, 40, 320)]
    launches = replay_launches(builder, batches, table, _kv_cache(8), torch.device("cpu"))
    assert builder._captured_plans == []
    attention = [x for x in launches if x.kernel.fn.__name__ in ATTENTION]
    assert len(attention) == len(batches), "one attention launch a graph"
    writes = [x for x in launches if x.kernel.fn.__name__ == "_reshape_and_cache_kernel"]
    assert len(writes) == 1 and writes[0].meta["HEAD_SIZE"] == 128, "the layer's KV write"
    assert [x.meta["BLOCK_M"] for x in attention] == [16] * 3 + [32] * 3
    assert all(x.meta["ANY_BATCH"] for x in attention), "captured launches serve any batch"
    assert not any(isinstance(a, torch.Tensor) for x in launches for a in x.args), \
        "recorded launches hold dtypes, no tensors (no workspace kept alive)"
    splits = sum(x.kernel.fn.__name__ == "_paged_attention_split_kernel" for x in attention)
    reduces = sum(x.kernel.fn.__name__ == "_split_reduce_kernel" for x in launches)
    assert splits >= 1 and reduces == splits, "every SPLIT launch brings its reduction"
    # the same graphs built directly through the capture path: the same plans
    for batch, launch in zip(batches, attention):
        from vllm_bass.attention import capturing_uniform_batch

        token = capturing_uniform_batch.set(batch.uniform)
        try:
            cm = SimpleNamespace(num_reqs=batch.num_reqs, num_actual_tokens=batch.num_tokens,
                                 max_query_len=batch.max_query_len, max_seq_len=1,
                                 query_start_loc=torch.zeros(batch.num_reqs + 1,
                                                             dtype=torch.int32),
                                 seq_lens=torch.ones(batch.num_reqs, dtype=torch.int32),
                                 block_table_tensor=table[:batch.num_reqs],
                                 slot_mapping=torch.zeros(batch.num_tokens, dtype=torch.int64))
            plan = builder.build_for_cudagraph_capture(cm).plan
        finally:
            capturing_uniform_batch.reset(token)
        assert launch.meta["BLOCK_M"] == plan.tiles.block_m
        assert (launch.kernel.fn.__name__ == "_paged_attention_split_kernel") == (
            plan.strategy == "split")


def test_a_full_graphs_eager_warmup_plans_as_its_capture():
    """vLLM runs each FULL graph's dummy batch eagerly once before capturing it, through
    `build`: under `warming_full_graph` the builder plans that run as the capture will
    (session 35: eager plans of the dummy batches were 3 PAD binaries the precompile had not
    compiled, met inside the capture), and keeps no plan for it; outside, eager plans."""
    from vllm_bass.attention import capturing_uniform_batch, warming_full_graph

    builder = _builder(32, 32, drafts=4)
    table = torch.zeros(64, 256, dtype=torch.int32)
    for uniform, reqs, tokens, query_len in ((True, 48, 48, 1), (False, 64, 320, 5)):
        cm = SimpleNamespace(num_reqs=reqs, num_actual_tokens=tokens, max_query_len=query_len,
                             max_seq_len=query_len,
                             query_start_loc=torch.zeros(reqs + 1, dtype=torch.int32),
                             seq_lens=torch.ones(reqs, dtype=torch.int32),
                             block_table_tensor=table[:reqs],
                             slot_mapping=torch.zeros(tokens, dtype=torch.int64))
        uniform_token = capturing_uniform_batch.set(uniform)
        try:
            eager = builder.build(0, cm)
            warming = warming_full_graph.set(True)
            try:
                warm = builder.build(0, cm)
            finally:
                warming_full_graph.reset(warming)
            assert builder._captured_plans == [], "the warm-up's plans belong to no graph"
            captured = builder.build_for_cudagraph_capture(cm)
        finally:
            capturing_uniform_batch.reset(uniform_token)
        assert not eager.any_batch and warm.any_batch
        assert (warm.plan, warm.plan_seq_len, warm.expected_batch) == (
            captured.plan, captured.plan_seq_len, captured.expected_batch)
        builder._captured_plans.clear()


def test_draft_step_graphs_replay_through_the_drafting_build():
    """The draft step graphs are built by `build_for_drafting` (plans for exactly their
    rows, not any batch): their launches are not ANY_BATCH ones."""
    from vllm_bass.attention.precompile import GraphBatch, replay_launches

    launches = replay_launches(_builder(16, 16, 64), [GraphBatch(4, 4, 1, 512, False, True)],
                               torch.zeros(8, 32, dtype=torch.int32), _kv_cache(16, 64),
                               torch.device("cpu"))
    attention = [x for x in launches if x.kernel.fn.__name__ in ATTENTION]
    assert len(attention) == 1 and not attention[0].meta["ANY_BATCH"]


def test_eager_batches_one_per_plan_each_replayed_as_its_step_plans():
    """Steps outside the graphs (prefill chunks, the drafter's uncaptured first passes) plan
    for their own batch (ANY_BATCH off): one batch per distinct plan, the fewest tokens that
    choose it, within the request, token and context bounds; each replays to the plan
    `build` chooses for it."""
    from vllm_bass.attention.precompile import eager_batches, replay_launches
    from vllm_bass.kernels.paged_attention import choose_plan

    for heads, kv_heads, head_size in ((32, 32, 128), (32, 8, 128), (20, 20, 64)):
        builder = _builder(heads, kv_heads, head_size)
        batches = eager_batches(builder, max_reqs=64, max_tokens=2048, max_seq_len=4096,
                                sms=132)
        plans = [choose_plan(b.num_reqs, heads, kv_heads, head_size, b.max_query_len,
                             b.max_seq_len, 132) for b in batches]
        assert len({(p.strategy, p.tiles) for p in plans}) == len(batches) >= 8
        assert {p.strategy for p in plans} == {"pad", "split"}
        assert {p.tiles.block_m for p in plans} == {16, 32, 64}
        assert all(b.eager and b.num_reqs <= 64 and b.num_tokens <= 2048
                   and b.max_query_len <= b.max_seq_len <= 4096 for b in batches)
        launches = replay_launches(builder, batches, torch.zeros(64, 256, dtype=torch.int32),
                                   _kv_cache(kv_heads, head_size), torch.device("cpu"))
        attention = [x for x in launches if x.kernel.fn.__name__ in ATTENTION]
        assert len(attention) == len(batches)
        assert not any(x.meta["ANY_BATCH"] for x in attention), "eager plans: own binaries"
        for plan, launch in zip(plans, attention):
            assert launch.meta["BLOCK_M"] == plan.tiles.block_m
            assert launch.meta["BLOCK_N"] == plan.tiles.block_n
            assert launch.meta["num_stages"] == plan.tiles.num_stages
            assert (launch.kernel.fn.__name__ == "_paged_attention_split_kernel") == (
                plan.strategy == "split")
    # a small budget keeps to small steps, and the bounds hold
    small = eager_batches(_builder(32, 32), max_reqs=4, max_tokens=64, max_seq_len=512,
                          sms=132)
    assert small and all(b.num_reqs <= 4 and b.num_tokens <= 64 and b.max_seq_len <= 512
                         for b in small)


class _FakeKernel:
    def __init__(self, fails=False):
        self.calls, self.fails = [], fails
        self.fn = SimpleNamespace(__name__="fake")

    def warmup(self, *args, grid, **meta):
        from triton.runtime import _async_compile

        self.calls.append((args, grid, meta, _async_compile.active_mode.get() is not None))
        if self.fails:
            raise RuntimeError("no compiler here")


def test_compile_launches_warms_every_launch_in_async_compile_mode():
    from vllm_bass.attention.precompile import compile_launches
    from vllm_bass.kernels.paged_attention import KernelLaunch

    good, bad = _FakeKernel(), _FakeKernel(fails=True)
    launches = [KernelLaunch(good, (3, 2), (1, 2), {"BLOCK_M": 16}),
                KernelLaunch(bad, (1,), (), {}), KernelLaunch(good, (5,), (7,), {"PDL": True})]
    result = compile_launches(launches, torch.device("cpu"), threads=2)
    assert result["launches"] == 3 and result["errors"] == 1, result
    assert [(args, grid, meta) for args, grid, meta, _ in good.calls] == [
        ((1, 2), (3, 2), {"BLOCK_M": 16}), ((7,), (5,), {"PDL": True})]
    assert all(in_mode for *_, in_mode in good.calls + bad.calls), "compiles go async"


def test_a_failed_async_compile_leaves_no_placeholder_behind():
    """Older Tritons' FutureKernel has no attribute fallback: one left in a kernel's cache
    would fail the launch that finds it. Each is finished, or dropped if it cannot be."""
    from vllm_bass.attention.precompile import _drop_unfinished

    cache = {}

    class FutureKernel:
        def __init__(self, key, fails):
            self.key, self.fails = key, fails

        def result(self):
            if self.fails:
                raise RuntimeError("compile failed")
            cache[self.key] = f"binary {self.key}"  # Triton's finalize

    cache.update(a=FutureKernel("a", True), b=FutureKernel("b", False), c="binary c")
    kernel = SimpleNamespace(device_caches={0: (cache, {}, None, None, None)})
    _drop_unfinished([kernel], torch.device("cuda:0"))
    assert cache == {"b": "binary b", "c": "binary c"}


def test_precompile_threads_and_when_it_runs(monkeypatch):
    from vllm_bass.attention import precompile

    monkeypatch.setenv("VLLM_BASS_PRECOMPILE_THREADS", "3")
    assert precompile.precompile_threads() == 3
    monkeypatch.setenv("VLLM_BASS_PRECOMPILE_THREADS", "auto")
    assert 1 <= precompile.precompile_threads() <= 8
    assert precompile.precompile_for_capture(SimpleNamespace(device="cpu")) is None
    monkeypatch.setenv("VLLM_BASS_PRECOMPILE_THREADS", "-2")
    with pytest.raises(ValueError, match="VLLM_BASS_PRECOMPILE_THREADS='-2'"):
        precompile.precompile_threads()
    monkeypatch.setenv("VLLM_BASS_PRECOMPILE_THREADS", "0")
    assert precompile.precompile_for_capture(SimpleNamespace(device="cuda:0")) is None
    assert precompile.report_capture_misses(None, "cpu") is None


def test_capture_misses_are_counted_and_named(monkeypatch):
    """The log names each binary the captures compiled unforeseen, beside what was compiled
    ahead for the same kernel (how session 35's 3 misses at max_num_seqs 64 get found)."""
    from vllm_bass.attention import precompile

    ahead = {("_pad", "key-a"), ("_split", "key-s")}
    now = ahead | {("_pad", "key-b")}
    monkeypatch.setattr(precompile, "attention_binaries", lambda device: len(now))
    monkeypatch.setattr(precompile, "attention_binary_keys", lambda device: now)
    result = {"binaries_after": len(ahead), "keys_after": ahead,
              "watch": SimpleNamespace(met={("_pad", "key-b"): "runner.py:7 capture"},
                                       remove=lambda: None)}
    messages = []
    monkeypatch.setattr(precompile.logger, "info",
                        lambda msg, *args: messages.append(msg % args))
    assert precompile.report_capture_misses(result, "cuda:0") == 1
    assert [m for m in messages if "not foreseen" in m] == [
        "vllm-bass: not foreseen: _pad key-b; met at runner.py:7 capture; "
        "compiled ahead for it: ['key-a']"]
    now, messages[:] = set(ahead), []
    assert precompile.report_capture_misses(result, "cuda:0") == 0
    assert messages and not [m for m in messages if "not foreseen" in m]


def test_capture_compile_watch_records_where_and_chains(monkeypatch):
    """The hook installed for the captures records where our kernels compiled (vLLM and
    vllm-bass frames), passes every call on to the hook it found, and gives it back."""
    from triton import knobs

    from vllm_bass.attention import precompile

    calls = []
    monkeypatch.setattr(knobs.runtime, "jit_post_compile_hook",
                        lambda **kwargs: calls.append(kwargs["key"]))
    monkeypatch.setattr(precompile, "STACK_FROM", ("tests",))
    previous = knobs.runtime.jit_post_compile_hook
    watch = precompile.CaptureCompileWatch.install()
    assert knobs.runtime.jit_post_compile_hook is watch
    ours = sorted(watch.names)[0]
    watch(key="k1", fn=SimpleNamespace(name=f"module.{ours}"))
    watch(key="k2", fn=SimpleNamespace(name="someone_elses_kernel"))
    assert calls == ["k1", "k2"]
    assert list(watch.met) == [(ours, "k1")]
    assert "test_capture_compile_watch_records_where_and_chains" in watch.met[(ours, "k1")]
    watch.remove()
    assert knobs.runtime.jit_post_compile_hook is previous


def test_compile_watch_logs_serving_compiles_bounded(monkeypatch):
    """After the captures the watch stays: each compile of our kernels is then a stalled
    request, logged with its specialisation and where it was met for the first
    SERVING_NAMED, counted after that, and still passed on to the hook it found."""
    from triton import knobs

    from vllm_bass.attention import precompile

    calls = []
    monkeypatch.setattr(knobs.runtime, "jit_post_compile_hook",
                        lambda **kwargs: calls.append(kwargs["key"]))
    monkeypatch.setattr(precompile, "STACK_FROM", ("tests",))
    monkeypatch.setattr(precompile, "SERVING_NAMED", 2)
    monkeypatch.setattr(precompile, "attention_binaries", lambda device: 0)
    warnings = []
    monkeypatch.setattr(precompile.logger, "warning",
                        lambda msg, *args: warnings.append(msg % args))
    watch = precompile.CaptureCompileWatch.install()
    ours = sorted(watch.names)[0]
    watch(key="during-capture", fn=SimpleNamespace(name=ours))
    assert not warnings and list(watch.met) == [(ours, "during-capture")]
    result = {"binaries_after": 0, "keys_after": set(), "watch": watch}
    assert precompile.report_capture_misses(result, "cuda:0") == 0
    assert knobs.runtime.jit_post_compile_hook is watch  # stays for serving
    for key in ("s1", "s2", "s3"):
        watch(key=key, fn=SimpleNamespace(name=ours))
    watch(key="theirs", fn=SimpleNamespace(name="someone_elses_kernel"))
    assert watch.serving_compiles == 3
    assert len(warnings) == 2 and "(1 so far" in warnings[0] and f"{ours} s1" in warnings[0]
    assert "test_compile_watch_logs_serving_compiles_bounded" in warnings[1]
    assert list(watch.met) == [(ours, "during-capture")]  # the capture's record unchanged
    assert calls == ["during-capture", "s1", "s2", "s3", "theirs"]
    watch.remove()


def distinct_binaries() -> dict[str, dict[str, tuple[int, int]]]:
    """Per kernel: (Triton cache keys, distinct constexpr sets) of the replayed launches,
    keys from Triton's own specialisation of each argument, as its launcher computes them.
    `graphs`: every FULL graph a 7B-shape BASS target captures (max_num_seqs 256, K = 4);
    `eager_draft`: steps outside the graphs on the 5x1280 draft's layers (20 heads of 64:
    the eager first pass meets any request count and query length), every combination of
    1-13 requests, 1-9 query tokens and four contexts, not only `eager_batches`' one each."""
    from vllm_bass.attention.precompile import GraphBatch, replay_launches, target_graph_batches
    from vllm_bass.engine_config import bass_capture_sizes

    sizes = bass_capture_sizes(256, 4096)
    keys = [_key(t, True, 256) for t in sizes if t <= 256] + [
        _key(t, False, 256) for t in sizes if t <= 256 * 5]
    batches = target_graph_batches(_runner(keys, 256, 5))
    graphs = replay_launches(_builder(32, 32), batches,
                             torch.zeros(256, 256, dtype=torch.int32), _kv_cache(32),
                             torch.device("cpu"))
    eager = [GraphBatch(reqs, reqs * query, query, seq, False, eager=True)
             for reqs in range(1, 14) for query in range(1, 10) for seq in (64, 300, 1500, 4000)]
    draft = replay_launches(_builder(20, 20, head_size=64), eager,
                            torch.zeros(16, 256, dtype=torch.int32), _kv_cache(20, 64),
                            torch.device("cpu"))
    return {"graphs": _count_binaries(graphs), "eager_draft": _count_binaries(draft)}


def _count_binaries(launches) -> dict[str, tuple[int, int]]:
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    found = collections.defaultdict(lambda: (set(), set()))
    for launch in launches:
        params = [p for p in launch.kernel.params if not p.is_constexpr]
        spec = tuple(
            (str(a),) if isinstance(a, torch.dtype) else native_specialize_impl(
                BaseBackend, a, False, not p.do_not_specialize,
                not p.do_not_specialize_on_alignment)
            for p, a in zip(params, launch.args))
        meta = tuple(sorted((k, str(v)) for k, v in launch.meta.items()))
        cache_keys, metas = found[launch.kernel.fn.__name__]
        cache_keys.add((spec, meta))
        metas.add(meta)
    return {name: (len(k), len(m)) for name, (k, m) in found.items()}


def test_batch_counts_do_not_split_a_plan_into_binaries():
    """Request counts, query tiles and split counts vary from graph to graph; specialised,
    each new ==1 / multiple-of-16 combination was another 1.5-3 s compile (here, before
    session 34: 4 SPLIT binaries for one constexpr set, 4 PAD for 2, 6 reductions for 4).
    Token counts vary from eager step to eager step: the SPLIT workspace's plane offset was
    16-aligned at some only (20 heads), and the 5x1280 draft's first pass compiled a second
    SPLIT binary while serving (session 42's H200 run)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, __file__], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    found = eval(run.stdout.strip().splitlines()[-1])  # noqa: S307 - our own dict literal
    for where, counts in found.items():
        assert set(counts) >= {"_paged_attention_pad_kernel", "_paged_attention_split_kernel",
                               "_split_reduce_kernel", "_reshape_and_cache_kernel"}, (where,
                                                                                     counts)
        for name, (binaries, plans) in counts.items():
            assert binaries == plans, f"{where}, {name}: {binaries} binaries for {plans} plans"


if __name__ == "__main__":
    print(distinct_binaries())


def test_our_builders_walks_the_targets_groups_then_the_drafters():
    """One walk over the attention groups on our backend, for the graph and the eager
    replays alike: the target's groups (the draft's own layers left out, they come with the
    drafter), then the drafter's; other backends' groups skipped."""
    from vllm_bass.attention.precompile import our_builders

    ours, other = _builder(32, 32), object()

    def group(names, builder):
        return SimpleNamespace(layer_names=names, get_metadata_builder=lambda: builder)

    target = group(["model.layers.0.attn"], ours)
    draft_in_target = group(["draft_model.layers.0.attn"], ours)
    foreign = group(["model.layers.1.attn"], other)
    drafter_group = group(["draft_model.layers.0.attn"], ours)
    runner = SimpleNamespace(attn_groups=[[target, draft_in_target, foreign]])
    drafter = SimpleNamespace(draft_attn_groups=[drafter_group])
    walked = list(our_builders(runner, drafter, {"draft_model.layers.0.attn"}))
    assert walked == [(target, ours, False), (drafter_group, ours, True)]
    assert list(our_builders(runner, None, set())) == [(target, ours, False),
                                                       (draft_in_target, ours, False)]
