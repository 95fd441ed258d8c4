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

Verification-shaped graphs: vLLM captures a mixed-batch graph with one query as long as the
whole batch (its dummy run's max_query_len is the token count), and FA3 picks its kernel
from that bound at capture: at 65+ tokens the two-warpgroup 128-row tile, which then ran
every replayed verification (queries of 1 + drafts tokens) 23-26% slower than the 64-row
one-warpgroup kernel vLLM's uniform spec-decode graphs get (H100, session 13: 117 vs 95 us
a layer at batch 64, 222 vs 176 at 128; ~0.7 / 1.4 ms a step). So these graphs are captured
with requests of at most 1 + K tokens (`full_max_query_len`; K = the most drafts a request
may carry) and replay only batches whose longest request fits that bound
(`batch_max_query_len`, set by the runner per batch); a batch with a longer query (a prefill
chunk) runs piecewise, as in vLLM.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("vllm.bass")

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
    # FULL mixed-batch graphs hold requests of at most this many tokens (None: any)
    full_max_query_len: int | None = None
    # the longest request of the batch being dispatched (the runner sets it; None: unknown)
    batch_max_query_len: int | None = None
    # capturing a FULL mixed-batch graph from a verification-shaped dummy batch, which
    # vLLM's dummy run builds as a uniform one (model_runner._warmup_and_capture)
    capturing_verification: bool = False
    # ... under this key (`model_runner._warmup_and_capture` sets it with the flag above)
    capturing_descriptor: Any = None
    # VLLM_BASS_SHORT_QUERY_GRAPHS: by token count, the key of the graph planned for a few
    # long verifications, whose num_reqs is the most requests it serves; the size's mixed
    # key is then planned for many short-query requests (`add_short_query_graphs`)
    long_query_keys: dict | None = None
    # the dispatched batch's request count (the runner sets it; None: unknown)
    batch_num_reqs: int | None = None

    def dispatch(self, num_tokens, uniform_decode=False, has_lora=False, num_active_loras=0,
                 valid_modes=None, invalid_modes=None):
        from vllm.config import CUDAGraphMode

        full = CUDAGraphMode.FULL
        if self.capturing == CUDAGraphMode.PIECEWISE:
            invalid_modes = set(invalid_modes or ()) | {full}
        elif (self.capturing_verification and (valid_modes is None or full in valid_modes)
              and not (invalid_modes and full in invalid_modes)):
            descriptor = self.capturing_descriptor  # the runner files each capture
            if descriptor in self.cudagraph_keys[full]:
                self.last_mode = full
                return full, descriptor
        if (not uniform_decode and self.full_max_query_len is not None
                and (self.batch_max_query_len is None
                     or self.batch_max_query_len > self.full_max_query_len)):
            invalid_modes = set(invalid_modes or ()) | {full}
        mode, descriptor = super().dispatch(num_tokens, uniform_decode, has_lora,
                                            num_active_loras, valid_modes, invalid_modes)
        if mode == full and not descriptor.uniform and self.long_query_keys:
            long = self.long_query_keys.get(descriptor.num_tokens)
            if (long is not None and self.batch_num_reqs is not None
                    and self.batch_num_reqs <= long.num_reqs):
                descriptor = long  # a few long verifications: the graph planned for them
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


def verification_query_len(vllm_config) -> int:
    """The most tokens a request brings to a verification: itself plus its drafts."""
    spec = getattr(vllm_config, "speculative_config", None)
    return 1 + int(getattr(spec, "num_speculative_tokens", None) or 0)


def add_full_graphs_for_mixed_batches(runner, attention_backends, kv_cache_groups) -> bool:
    """After vLLM initialised the target's dispatcher keys: FULL keys for the mixed batch
    sizes a verification can fill (at most max_num_seqs requests of 1 + K tokens), for
    batches of requests of at most 1 + K tokens (FULL_AND_PIECEWISE mode, no LoRA,
    full-graph-capable attention). Returns whether keys were added."""
    from vllm.config import CUDAGraphMode

    dispatcher = getattr(runner, "cudagraph_dispatcher", None)
    if (dispatcher is None or not dispatcher.keys_initialized
            or dispatcher.cudagraph_mode != CUDAGraphMode.FULL_AND_PIECEWISE
            or getattr(runner, "lora_config", None) is not None
            or not full_graphs_supported(runner.vllm_config, attention_backends,
                                         kv_cache_groups)):
        return False
    dispatcher.__class__ = _bass_dispatcher_class(type(dispatcher))
    query_len = verification_query_len(runner.vllm_config)
    dispatcher.full_max_query_len = query_len
    most_tokens = runner.vllm_config.scheduler_config.max_num_seqs * query_len
    for size in runner.compilation_config.cudagraph_capture_sizes or ():
        if size > most_tokens:
            continue  # no verification fills it; vLLM's dummy batch could not shape it
        dispatcher.add_cudagraph_key(
            CUDAGraphMode.FULL,
            dispatcher._create_padded_batch_descriptor(size, False, False, 0))
    from vllm_bass import envs

    if envs.flag("VLLM_BASS_SHORT_QUERY_GRAPHS"):
        try:
            add_short_query_graphs(runner, attention_backends, kv_cache_groups)
        except Exception:  # these graphs are for speed: never worth the engine
            logger.exception(
                "vllm-bass: the short-query graphs could not be set up; one graph a size")
    return True


def add_short_query_graphs(runner, attention_backends, kv_cache_groups) -> int:
    """VLLM_BASS_SHORT_QUERY_GRAPHS (session 55; the default since session 57: H200, the
    target's graph time 0.95x at equal step shapes on the mix, `traced_mix`): a
    mixed graph's attention is planned for a few verifications of 1 + PLANNED_DRAFTS tokens
    (its requests are unknown at capture), which at 4-104 tokens is a SPLIT or a wide PAD;
    a batch of many one-draft requests of the same size (batch 16 / 32 at K=1) wants the
    narrow PAD. Where the two plans differ, the size gets a second FULL key (its num_reqs:
    the most requests the long-query plan serves, `attention.backend.long_query_batch_limit`)
    captured as today, and the size's mixed key is captured planned for requests of
    `short_query_len` tokens; the dispatcher replays the first for batches of at most that
    many requests.
    Only where every attention layer is ours and the target's layers share one shape.
    Returns the keys added."""
    import dataclasses

    from vllm.config import CUDAGraphMode

    from vllm_bass.attention.backend import (
        BassAttentionBackend,
        expected_verification_query_len,
        graph_plan_for,
        long_query_batch_limit,
    )
    from vllm_bass.kernels.paged_attention import num_sms

    if not all(issubclass(b, BassAttentionBackend) for backends in attention_backends
               for b in backends):
        return 0
    try:
        spec = target_attention_shape(runner, kv_cache_groups)
    except AttributeError:  # a spec without heads: not a layer of ours to plan
        spec = None
    if spec is None:
        return 0
    num_kv_heads, head_size, dtype = spec
    config = runner.vllm_config
    heads = config.model_config.get_num_attention_heads(config.parallel_config)
    plan_for = graph_plan_for(heads, num_kv_heads, head_size, dtype.itemsize,
                              config.model_config.max_model_len,
                              num_sms(getattr(runner, "device", None)))
    expected = expected_verification_query_len(config)
    dispatcher = runner.cudagraph_dispatcher
    full = CUDAGraphMode.FULL
    long_keys = {}
    for desc in list(dispatcher.cudagraph_keys[full]):
        if desc.uniform or desc.num_reqs is None:
            continue
        limit = long_query_batch_limit(desc.num_tokens, desc.num_reqs, expected, plan_for)
        if limit is not None and limit < desc.num_reqs:
            long_keys[desc.num_tokens] = dataclasses.replace(desc, num_reqs=limit)
    for key in long_keys.values():
        dispatcher.add_cudagraph_key(full, key)
    dispatcher.long_query_keys = long_keys
    if long_keys:
        logger.info(
            "vllm-bass: short-query graphs: %d mixed sizes also captured for one-draft "
            "requests; the long-query graph serves at most {tokens: requests} %s",
            len(long_keys), {t: k.num_reqs for t, k in sorted(long_keys.items())})
    return len(long_keys)


def target_attention_shape(runner, kv_cache_groups) -> tuple | None:
    """(num_kv_heads, head_size, dtype) of the target's attention layers, from the KV-cache
    groups (a draft of another shape shares the target's group as one of its
    `UniformTypeKVCacheSpecs`' layers); None where the target's layers differ."""
    draft = set(getattr(getattr(runner, "drafter", None), "_draft_attn_layer_names", None)
                or ())
    shapes = set()
    for group in kv_cache_groups:
        spec = group.kv_cache_spec
        per_layer = getattr(spec, "kv_cache_specs", None) or dict.fromkeys(
            getattr(group, "layer_names", None) or ["?"], spec)
        for name, layer in per_layer.items():
            if name not in draft:
                shapes.add((layer.num_kv_heads, layer.head_size, layer.dtype))
    return shapes.pop() if len(shapes) == 1 else None
