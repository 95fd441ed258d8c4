"""The BASS attention backend for vLLM (registered in vLLM's CUSTOM slot).

``register_bass_attention_backend()`` is what the plugin entry point calls in
every vLLM process. It is cheap and idempotent, and imports neither Triton
nor the backend module: vLLM resolves the class path only when a model asks
for ``attention_config={"backend": "CUSTOM"}`` / ``--attention-backend CUSTOM``.
"""

from __future__ import annotations

import contextvars

BACKEND_CLASS_PATH = "vllm_bass.attention.backend.BassAttentionBackend"

# True while the BASS runner captures a CUDA graph of uniform decode batches (vLLM's
# BatchDescriptor.uniform): every replayed batch then has exactly the captured requests and
# query length, so the builder plans for them; a mixed-batch graph's requests are unknown.
capturing_uniform_batch: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "bass_capturing_uniform_batch", default=False)

# True while the BASS runner captures a FULL CUDA graph: vLLM first runs the graph's dummy
# batch eagerly (`cudagraph_num_of_warmups`, 1 with graphs on), building its metadata with
# `build`; the builder then plans as the capture will, so the warm-up runs (and compiles)
# the binaries the graph bakes in, not eager plans of a dummy batch (3 PAD binaries, ~6 s
# of a 7B start-up's capture, session 35).
warming_full_graph: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "bass_warming_full_graph", default=False)


# The query length a FULL mixed-batch graph being captured is planned for (0: the builder's
# expected verification, 1 + min(K, PLANNED_DRAFTS)). Set to `backend.short_query_len` while
# the BASS runner captures a graph of the short-query family (`worker.cuda_graphs`, session
# 55): its batches hold many requests of one token and one draft (or as few more as the
# size's request limit allows).
planned_query_len: contextvars.ContextVar[int] = contextvars.ContextVar(
    "bass_planned_query_len", default=0)


def register_bass_attention_backend() -> bool:
    """Point vLLM's CUSTOM attention backend at ours. Returns False (and does
    nothing) when vLLM is not importable."""
    try:
        from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend
    except ImportError:
        return False
    register_backend(AttentionBackendEnum.CUSTOM, BACKEND_CLASS_PATH)
    return True


__all__ = ["BACKEND_CLASS_PATH", "capturing_uniform_batch", "planned_query_len",
           "register_bass_attention_backend", "warming_full_graph"]
