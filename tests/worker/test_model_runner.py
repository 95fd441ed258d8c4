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


def _runner_with_dispatcher():
    from types import SimpleNamespace

    from vllm.config import CompilationConfig, CUDAGraphMode, VllmConfig
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher

    vllm_config = VllmConfig(compilation_config=CompilationConfig())
    cc = vllm_config.compilation_config
    cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size = [1, 2, 4, 8, 16], 16
    dispatcher = CudagraphDispatcher(vllm_config)
    dispatcher.initialize_cudagraph_keys(CUDAGraphMode.FULL_AND_PIECEWISE, 1)
    return SimpleNamespace(cudagraph_dispatcher=dispatcher, vllm_config=vllm_config,
                           compilation_config=cc, lora_config=None)


@pytest.mark.parametrize("support", ["ALWAYS", "UNIFORM_BATCH"])
def test_full_graphs_for_ragged_verification_only_where_attention_allows(support):
    """FULL keys for mixed batches when the attention backend supports full graphs for any
    batch; piecewise captures still get piecewise answers; uniform decode is unchanged."""
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
    mode, desc = d.dispatch(6, False)  # e.g. 2 requests verifying 2 drafts each
    if added:
        assert mode == CUDAGraphMode.FULL and (desc.num_tokens, desc.uniform) == (8, False)
        d.capturing = CUDAGraphMode.PIECEWISE
        assert d.dispatch(6, False)[0] == CUDAGraphMode.PIECEWISE
        d.capturing = None
    else:
        assert mode == CUDAGraphMode.PIECEWISE
    mode, desc = d.dispatch(4, True)  # one-token decode of 4 requests
    assert mode == CUDAGraphMode.FULL and desc.uniform and desc.num_reqs == 4
    assert d.dispatch(40, False)[0] == CUDAGraphMode.NONE  # above the largest capture size


@pytest.mark.parametrize("uniform", [True, False])
def test_graph_capture_tells_attention_whether_its_batches_are_uniform(uniform):
    """While vLLM captures a graph, the attention builders can read whether it is a
    uniform decode graph (exact request count) or a mixed one; never outside a capture."""
    from types import SimpleNamespace

    from vllm_bass.attention import capturing_uniform_batch
    from vllm_bass.worker.model_runner import bass_runner_class

    class _Runner:
        def _warmup_and_capture(self, desc, cudagraph_runtime_mode, *args, **kwargs):
            return capturing_uniform_batch.get(), self.cudagraph_dispatcher.capturing

    runner = bass_runner_class(_Runner)()
    runner.cudagraph_dispatcher = SimpleNamespace(capturing=None)
    seen = runner._warmup_and_capture(SimpleNamespace(uniform=uniform), "FULL")
    assert seen == (uniform, "FULL")
    assert capturing_uniform_batch.get() is False and runner.cudagraph_dispatcher.capturing is None
