"""Full CUDA graphs for the target's ragged verification batches.

vLLM's default FULL_AND_PIECEWISE mode captures full graphs only for uniform decode batches
(every request the same query length) and runs every other batch under piecewise graphs,
with attention and the KV-cache writes eager between the pieces. BASS verification batches
are ragged, and on a Llama-2-7B shape that left the target's verification host-bound on the
H100 (8.4-10.3 ms against 6.9 ms for a full-graph plain step). FA3 declares full-graph
support for any batch (`AttentionCGSupport.ALWAYS`), so where every attention backend of the
target does, we add FULL keys for the mixed batch sizes: they are captured with vLLM's own
mixed-batch dummy runs (as in its FULL mode) and dispatched before the piecewise ones.
vLLM's FULL mode itself is no answer: it gives the drafter no graphs at all (its draft steps
then ran eagerly, 6 ms each).

The piecewise graphs stay (cascade attention excludes FULL and still needs them), so while
vLLM captures a PIECEWISE graph the dispatcher must not answer FULL for the same size:
`BassCudagraphDispatcher.capturing` says which mode is being captured.
"""

from __future__ import annotations

from typing import Any

# CudagraphDispatcher.dispatch as this was written against (tests/test_model_runner.py).
DISPATCH_SIGNATURE = (
    "(self, num_tokens: int, uniform_decode: bool = False, has_lora: bool = False, "
    "num_active_loras: int = 0, valid_modes: collections.abc.Set[vllm.config.compilation."
    "CUDAGraphMode] | None = None, invalid_modes: collections.abc.Set[vllm.config."
    "compilation.CUDAGraphMode] | None = None) -> tuple[vllm.config.compilation."
    "CUDAGraphMode, vllm.forward_context.BatchDescriptor]")


class BassCudagraphDispatcher:
    """Mixed in front of vLLM's CudagraphDispatcher (instance class swap)."""

    capturing: Any = None  # the CUDAGraphMode vLLM is capturing now, else None
    last_mode: Any = None  # the mode of the last dispatch (the runner's phase trace reads it)

    def dispatch(self, num_tokens, uniform_decode=False, has_lora=False, num_active_loras=0,
                 valid_modes=None, invalid_modes=None):
        from vllm.config import CUDAGraphMode

        if self.capturing == CUDAGraphMode.PIECEWISE:
            invalid_modes = set(invalid_modes or ()) | {CUDAGraphMode.FULL}
        mode, descriptor = super().dispatch(num_tokens, uniform_decode, has_lora,
                                            num_active_loras, valid_modes, invalid_modes)
        self.last_mode = mode
        return mode, descriptor


_DISPATCHER_CLASSES: dict[type, type] = {}


def _bass_dispatcher_class(base: type) -> type:
    if issubclass(base, BassCudagraphDispatcher):
        return base
    if base not in _DISPATCHER_CLASSES:
        _DISPATCHER_CLASSES[base] = type(f"Bass{base.__name__}", (BassCudagraphDispatcher, base),
                                         {})
    return _DISPATCHER_CLASSES[base]


def full_graphs_supported(vllm_config, attention_backends, kv_cache_groups) -> bool:
    """Every attention backend of the model supports full graphs for any batch."""
    from vllm.v1.attention.backend import AttentionCGSupport

    for backends, group in zip(attention_backends, kv_cache_groups):
        for backend in backends:
            support = backend.get_builder_cls().get_cudagraph_support(
                vllm_config, group.kv_cache_spec)
            if support != AttentionCGSupport.ALWAYS:
                return False
    return True


def add_full_graphs_for_mixed_batches(runner, attention_backends, kv_cache_groups) -> bool:
    """After vLLM initialised the target's dispatcher keys: FULL keys for the mixed batch
    sizes too (FULL_AND_PIECEWISE mode, no LoRA, full-graph-capable attention). Returns
    whether keys were added."""
    from vllm.config import CUDAGraphMode

    dispatcher = getattr(runner, "cudagraph_dispatcher", None)
    if (dispatcher is None or not dispatcher.keys_initialized
            or dispatcher.cudagraph_mode != CUDAGraphMode.FULL_AND_PIECEWISE
            or getattr(runner, "lora_config", None) is not None
            or not full_graphs_supported(runner.vllm_config, attention_backends,
                                         kv_cache_groups)):
        return False
    dispatcher.__class__ = _bass_dispatcher_class(type(dispatcher))
    for size in runner.compilation_config.cudagraph_capture_sizes or ():
        dispatcher.add_cudagraph_key(
            CUDAGraphMode.FULL,
            dispatcher._create_padded_batch_descriptor(size, False, False, 0))
    return True
