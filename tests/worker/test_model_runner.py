"""The BASS runner mixin overrides methods of vLLM's V1 runner by name; if vLLM changes one
of their signatures, this fails and names it (then re-read vllm_bass/worker/model_runner.py)."""

import inspect

import pytest
import torch

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def test_overridden_runner_methods_keep_their_signatures():
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    from vllm_bass.worker.model_runner import OVERRIDDEN_RUNNER_METHODS, BassModelRunnerMixin

    for name, expected in OVERRIDDEN_RUNNER_METHODS.items():
        assert name in BassModelRunnerMixin.__dict__, name
        assert str(inspect.signature(getattr(GPUModelRunner, name))) == expected, (
            f"GPUModelRunner.{name} changed in this vLLM; review vllm_bass/worker/model_runner.py")
    overridden = {n for n in BassModelRunnerMixin.__dict__
                  if not n.startswith("__") and callable(getattr(GPUModelRunner, n, None))}
    assert overridden == set(OVERRIDDEN_RUNNER_METHODS), overridden


class _Builder:
    support = None

    @classmethod
    def get_cudagraph_support(cls, vllm_config, kv_cache_spec):
        return cls.support


class _Backend:
    @staticmethod
    def get_builder_cls():
        return _Builder


def _runner_with_dispatcher(num_speculative_tokens=3, max_num_seqs=4,
                            capture_sizes=(1, 2, 4, 8, 16), dispatcher_max_num_seqs=None,
                            **config_fields):
    """A runner stand-in with vLLM's real dispatcher (capture sizes 1-16; its keys' request
    counts capped at `dispatcher_max_num_seqs`, else vLLM's default) and the config fields
    the FULL-key setup reads (`config_fields`: more of them)."""
    from types import SimpleNamespace

    from vllm.config import CompilationConfig, CUDAGraphMode, VllmConfig
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher

    vllm_config = VllmConfig(compilation_config=CompilationConfig())
    cc = vllm_config.compilation_config
    cc.cudagraph_capture_sizes = list(capture_sizes)
    cc.max_cudagraph_capture_size = max(capture_sizes)
    if dispatcher_max_num_seqs:
        vllm_config.scheduler_config.max_num_seqs = dispatcher_max_num_seqs
    dispatcher = CudagraphDispatcher(vllm_config)
    dispatcher.initialize_cudagraph_keys(CUDAGraphMode.FULL_AND_PIECEWISE, 1)
    config = SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=num_speculative_tokens),
        scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs), **config_fields)
    return SimpleNamespace(cudagraph_dispatcher=dispatcher, vllm_config=config,
                           compilation_config=cc, lora_config=None, device=None)


def _seven_b_runner(num_speculative_tokens, max_num_seqs, capture_sizes,
                    dispatcher_max_num_seqs=None):
    """A runner stand-in for a 7B target (32 heads of 128, bf16, max_model_len 2048) with
    vLLM's real dispatcher, and its one KV-cache group: what the short-query graphs plan."""
    from types import SimpleNamespace

    from vllm.v1.kv_cache_interface import FullAttentionSpec

    runner = _runner_with_dispatcher(
        num_speculative_tokens, max_num_seqs, capture_sizes,
        dispatcher_max_num_seqs=dispatcher_max_num_seqs,
        model_config=SimpleNamespace(get_num_attention_heads=lambda parallel: 32,
                                     max_model_len=2048),
        parallel_config=SimpleNamespace())
    spec = FullAttentionSpec(block_size=16, num_kv_heads=32, head_size=128,
                             dtype=torch.bfloat16)
    return runner, [SimpleNamespace(kv_cache_spec=spec)]


def _capturing_runner(dispatcher, seen: list, max_num_seqs: int = 1 << 20):
    """A BASS runner over a stand-in of vLLM's whose capture runs vLLM's dummy batch (a
    uniform batch of uniform_decode_query_len-token requests, at most `max_num_seqs` of
    them, with `_dummy_run`'s check that they hold the key's tokens) through the dispatcher
    twice, the eager warm-up then the capture, recording (query length, warm-up mode, the
    capture's (mode, key), `capturing_uniform_batch`, `planned_query_len`)."""
    from vllm.config import CUDAGraphMode

    from vllm_bass.attention import capturing_uniform_batch, planned_query_len
    from vllm_bass.worker.model_runner import bass_runner_class

    class _Runner:
        uniform_decode_query_len = 1

        def _determine_batch_execution_and_padding(self, num_tokens, num_reqs, sched,
                                                   max_num_scheduled_tokens, *args,
                                                   force_eager=False,
                                                   force_uniform_decode=None, **kwargs):
            return self.cudagraph_dispatcher.dispatch(
                num_tokens, bool(force_uniform_decode),
                valid_modes={CUDAGraphMode.NONE} if force_eager else None)

        def _warmup_and_capture(self, desc, cudagraph_runtime_mode, *args, **kwargs):
            q = self.uniform_decode_query_len if desc.uniform else desc.num_tokens
            reqs = min(max_num_seqs, -(-desc.num_tokens // q))
            tokens = [q] * reqs  # vLLM's _dummy_run, uniform branch
            if desc.num_tokens % q:
                tokens[-1] = desc.num_tokens % q
            assert sum(tokens) == desc.num_tokens, "vLLM's dummy run asserts this"
            warm = self._determine_batch_execution_and_padding(
                desc.num_tokens, reqs, None, q, False, force_eager=True,
                force_uniform_decode=desc.uniform)
            cap = self._determine_batch_execution_and_padding(
                desc.num_tokens, reqs, None, q, False, force_uniform_decode=desc.uniform)
            seen.append((q, warm[0], cap, capturing_uniform_batch.get(),
                         planned_query_len.get()))

    runner = bass_runner_class(_Runner)()
    runner.cudagraph_dispatcher = dispatcher
    return runner


@pytest.mark.parametrize("support", ["ALWAYS", "UNIFORM_BATCH"])
def test_full_graphs_for_ragged_verification_only_where_attention_allows(support):
    """FULL keys for mixed batches when the attention backend supports full graphs for any
    batch, for batches whose requests bring at most 1 + K tokens; piecewise captures still
    get piecewise answers; uniform decode is unchanged."""
    from types import SimpleNamespace

    from vllm.config import CUDAGraphMode
    from vllm.v1.attention.backend import AttentionCGSupport

    from vllm_bass.worker.cuda_graphs import DISPATCH_SIGNATURE, add_full_graphs_for_mixed_batches
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher

    assert str(inspect.signature(CudagraphDispatcher.dispatch)) == DISPATCH_SIGNATURE
    _Builder.support = getattr(AttentionCGSupport, support)
    runner = _runner_with_dispatcher()
    d = runner.cudagraph_dispatcher
    assert d.dispatch(6, False)[0] == CUDAGraphMode.PIECEWISE  # vLLM's default
    added = add_full_graphs_for_mixed_batches(
        runner, [{_Backend}], [SimpleNamespace(kv_cache_spec=None)])
    assert added == (support == "ALWAYS")
    d.batch_max_query_len = 3  # e.g. 2 requests verifying 2 drafts each
    mode, desc = d.dispatch(6, False)
    if added:
        assert d.full_max_query_len == 4
        assert mode == CUDAGraphMode.FULL and (desc.num_tokens, desc.uniform) == (8, False)
        d.capturing = CUDAGraphMode.PIECEWISE
        assert d.dispatch(6, False)[0] == CUDAGraphMode.PIECEWISE
        d.capturing = None
        for longest in (5, None):  # a prefill chunk past 1 + K, or a batch not described
            d.batch_max_query_len = longest
            assert d.dispatch(6, False)[0] == CUDAGraphMode.PIECEWISE
    else:
        assert mode == CUDAGraphMode.PIECEWISE
    mode, desc = d.dispatch(4, True)  # one-token decode of 4 requests
    assert mode == CUDAGraphMode.FULL and desc.uniform and desc.num_reqs == 4
    assert d.dispatch(40, False)[0] == CUDAGraphMode.NONE  # above the largest capture size


def test_no_full_key_a_verification_cannot_fill():
    """At most max_num_seqs requests of 1 + K tokens: larger capture sizes keep vLLM's
    piecewise graph (its dummy run could not shape such a verification batch either)."""
    from types import SimpleNamespace

    from vllm.config import CUDAGraphMode
    from vllm.v1.attention.backend import AttentionCGSupport

    from vllm_bass.worker.cuda_graphs import add_full_graphs_for_mixed_batches

    _Builder.support = AttentionCGSupport.ALWAYS
    runner = _runner_with_dispatcher(num_speculative_tokens=3, max_num_seqs=2)  # <= 8
    assert add_full_graphs_for_mixed_batches(
        runner, [{_Backend}], [SimpleNamespace(kv_cache_spec=None)])
    d = runner.cudagraph_dispatcher
    d.batch_max_query_len = 4
    assert d.dispatch(8, False)[0] == CUDAGraphMode.FULL
    assert d.dispatch(12, False)[0] == CUDAGraphMode.PIECEWISE


def test_verification_graphs_are_captured_from_verification_shaped_batches():
    """A FULL mixed-batch capture runs vLLM's dummy batch as uniform requests of 1 + K
    tokens (max_query_len 1 + K, what FA3 picks its kernel from) under the mixed key;
    the warm-up runs stay eager; everything is restored afterwards."""
    from types import SimpleNamespace

    from vllm.config import CUDAGraphMode
    from vllm.v1.attention.backend import AttentionCGSupport

    from vllm_bass.worker.cuda_graphs import add_full_graphs_for_mixed_batches

    _Builder.support = AttentionCGSupport.ALWAYS
    stand_in = _runner_with_dispatcher()
    assert add_full_graphs_for_mixed_batches(
        stand_in, [{_Backend}], [SimpleNamespace(kv_cache_spec=None)])
    seen = []
    runner = _capturing_runner(stand_in.cudagraph_dispatcher, seen)
    d = runner.cudagraph_dispatcher
    mixed = d._create_padded_batch_descriptor(8, False, False, 0)
    runner._warmup_and_capture(mixed, CUDAGraphMode.FULL)
    q, warm_mode, (mode, desc), uniform_seen, _ = seen[-1]
    assert q == 4 and warm_mode == CUDAGraphMode.NONE
    assert mode == CUDAGraphMode.FULL and desc == mixed and uniform_seen is False
    assert runner.uniform_decode_query_len == 1 and not d.capturing_verification
    assert d.capturing is None and d.batch_max_query_len is None
    # a PIECEWISE capture of the same size is vLLM's, untouched
    runner._warmup_and_capture(mixed, CUDAGraphMode.PIECEWISE)
    q, _, (mode, _), _, _ = seen[-1]
    assert q == 8 and mode == CUDAGraphMode.PIECEWISE


@pytest.mark.parametrize("mode", ["FULL", "PIECEWISE"])
@pytest.mark.parametrize("uniform", [True, False])
def test_graph_capture_tells_attention_whether_its_batches_are_uniform(uniform, mode):
    """While vLLM captures a graph, the attention builders can read whether it is a
    uniform decode graph (exact request count) or a mixed one, and whether it is a FULL
    graph (whose eager warm-up then plans as its capture); never outside a capture."""
    from types import SimpleNamespace

    from vllm.config import CUDAGraphMode

    from vllm_bass.attention import capturing_uniform_batch, warming_full_graph
    from vllm_bass.worker.model_runner import bass_runner_class

    class _Runner:
        def _warmup_and_capture(self, desc, cudagraph_runtime_mode, *args, **kwargs):
            return (capturing_uniform_batch.get(), warming_full_graph.get(),
                    self.cudagraph_dispatcher.capturing)

    runner = bass_runner_class(_Runner)()
    runner.cudagraph_dispatcher = SimpleNamespace(capturing=None)
    mode = CUDAGraphMode[mode]
    seen = runner._warmup_and_capture(SimpleNamespace(uniform=uniform), mode)
    assert seen == (uniform, mode == CUDAGraphMode.FULL, mode)
    assert capturing_uniform_batch.get() is False and warming_full_graph.get() is False
    assert runner.cudagraph_dispatcher.capturing is None


def test_short_query_graphs_split_a_size_by_its_request_count(monkeypatch):
    """VLLM_BASS_SHORT_QUERY_GRAPHS (session 55): where our attention's plan for a few long
    verifications differs from the plan for many one-draft requests (64 tokens on a 7B
    layer), the size gets a second FULL key; a batch of at most its num_reqs requests
    replays it, a larger one the size's mixed key. Each is captured under its own key from
    its own dummy batch: the long one from requests of 1 + K tokens, the short one from
    requests of two tokens with the attention planned for them. Sizes whose plans agree
    (128 tokens) keep one graph; the default since session 57, =0 one graph a size."""
    from vllm.config import CUDAGraphMode

    from vllm_bass.attention import planned_query_len
    from vllm_bass.attention.backend import BassAttentionBackend
    from vllm_bass.kernels import paged_attention as pa
    from vllm_bass.worker.cuda_graphs import add_full_graphs_for_mixed_batches

    monkeypatch.setattr(pa, "num_sms", lambda device=None: 132)
    full = CUDAGraphMode.FULL

    monkeypatch.setenv("VLLM_BASS_SHORT_QUERY_GRAPHS", "0")
    plain, groups = _seven_b_runner(16, 128, (8, 16, 32, 64, 128))
    assert add_full_graphs_for_mixed_batches(plain, [{BassAttentionBackend}], groups)
    assert not plain.cudagraph_dispatcher.long_query_keys
    monkeypatch.delenv("VLLM_BASS_SHORT_QUERY_GRAPHS", raising=False)  # the default: on
    runner_in, groups = _seven_b_runner(16, 128, (8, 16, 32, 64, 128))
    assert add_full_graphs_for_mixed_batches(runner_in, [{BassAttentionBackend}], groups)
    d = runner_in.cudagraph_dispatcher
    assert 64 in d.long_query_keys and 128 not in d.long_query_keys
    long = d.long_query_keys[64]
    short = d._create_padded_batch_descriptor(64, False, False, 0)
    assert long in d.cudagraph_keys[full] and short in d.cudagraph_keys[full]
    assert long.num_tokens == 64 and 8 <= long.num_reqs < 32 < short.num_reqs
    d.batch_max_query_len = 2
    for reqs, expected in ((32, short), (long.num_reqs + 1, short), (long.num_reqs, long),
                           (4, long)):
        d.batch_num_reqs = reqs
        assert d.dispatch(64, False) == (full, expected), reqs
    d.batch_num_reqs = None  # a batch not described: the size's mixed key, as before
    assert d.dispatch(64, False) == (full, short)
    d.batch_num_reqs = 100
    assert d.dispatch(128, False)[1] == d._create_padded_batch_descriptor(128, False, False, 0)

    seen = []
    runner = _capturing_runner(d, seen)
    none = CUDAGraphMode.NONE
    runner._warmup_and_capture(long, full)
    assert seen[-1] == (17, none, (full, long), False, 0)
    runner._warmup_and_capture(short, full)
    assert seen[-1] == (2, none, (full, short), False, 2)
    big = d._create_padded_batch_descriptor(128, False, False, 0)
    runner._warmup_and_capture(big, full)
    assert seen[-1] == (17, none, (full, big), False, 0)
    assert d.capturing_descriptor is None and not d.capturing_verification
    assert runner.uniform_decode_query_len == 1 and planned_query_len.get() == 0


def test_short_query_graphs_fit_vllms_dummy_batch_at_few_requests(monkeypatch):
    """Session 56's first GPU run: an engine of max_num_seqs 32 failed its capture at 104
    tokens, vLLM's dummy run making 32 requests of two tokens (64, not 104). A size's short
    graph is now planned and captured for the shortest query its request limit allows
    (104 tokens: 4 a request), its long graph's limit computed against that plan; every
    key of every size captures."""
    from vllm.config import CUDAGraphMode

    from vllm_bass.attention.backend import (
        BassAttentionBackend,
        short_query_len,
        short_query_plan_len,
    )
    from vllm_bass.kernels import paged_attention as pa
    from vllm_bass.worker.cuda_graphs import add_full_graphs_for_mixed_batches

    monkeypatch.setattr(pa, "num_sms", lambda device=None: 132)
    monkeypatch.setenv("VLLM_BASS_SHORT_QUERY_GRAPHS", "1")
    assert short_query_len(64, 32) == 2 and short_query_len(104, 32) == 4
    assert short_query_len(104, 12) == 9
    sizes = (8, 16, 32, 48, 64, 72, 88, 104, 128)
    runner_in, groups = _seven_b_runner(8, 32, sizes, dispatcher_max_num_seqs=32)
    assert add_full_graphs_for_mixed_batches(runner_in, [{BassAttentionBackend}], groups)
    d = runner_in.cudagraph_dispatcher
    assert {64, 104} <= set(d.long_query_keys)
    seen = []
    runner = _capturing_runner(d, seen, max_num_seqs=32)
    full = CUDAGraphMode.FULL
    for tokens, long in sorted(d.long_query_keys.items()):
        short = d._create_padded_batch_descriptor(tokens, False, False, 0)
        runner._warmup_and_capture(long, full)
        assert seen[-1][0] == 9 and seen[-1][4] == 0
        runner._warmup_and_capture(short, full)
        planned = short_query_plan_len(d, short)
        assert planned == short_query_len(tokens, 32) < 9
        assert seen[-1][0] == planned == seen[-1][4], tokens
    assert seen[-1][0] == 4  # 104 tokens


def test_short_query_graphs_plan_the_targets_layers_only():
    """A draft of another shape shares the target's KV-cache group (vLLM's
    `UniformTypeKVCacheSpecs`): the plans follow the target's layers, not the draft's; a
    target whose layers differ, or a spec without heads, gets no short-query graphs."""
    from types import SimpleNamespace

    from vllm.v1.kv_cache_interface import FullAttentionSpec, UniformTypeKVCacheSpecs

    from vllm_bass.worker.cuda_graphs import add_short_query_graphs, target_attention_shape

    target = FullAttentionSpec(block_size=16, num_kv_heads=32, head_size=128,
                               dtype=torch.bfloat16)
    draft = FullAttentionSpec(block_size=16, num_kv_heads=16, head_size=64,
                              dtype=torch.bfloat16)
    layers = {"model.layers.0.self_attn.attn": target, "model.layers.1.self_attn.attn": target,
              "draft_model.layers.0.self_attn.attn": draft}
    group = SimpleNamespace(kv_cache_spec=UniformTypeKVCacheSpecs(block_size=16,
                                                                  kv_cache_specs=layers),
                            layer_names=list(layers))
    runner = SimpleNamespace(drafter=SimpleNamespace(
        _draft_attn_layer_names={"draft_model.layers.0.self_attn.attn"}))
    assert target_attention_shape(runner, [group]) == (32, 128, torch.bfloat16)
    assert target_attention_shape(SimpleNamespace(drafter=None), [group]) is None
    plain = SimpleNamespace(kv_cache_spec=target, layer_names=["model.layers.0.self_attn.attn"])
    assert target_attention_shape(SimpleNamespace(), [plain]) == (32, 128, torch.bfloat16)
    from vllm_bass.attention.backend import BassAttentionBackend

    odd = SimpleNamespace(kv_cache_spec=SimpleNamespace(), layer_names=["x"])
    assert add_short_query_graphs(SimpleNamespace(), [{BassAttentionBackend}], [odd]) == 0
