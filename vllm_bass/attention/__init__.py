"""The BASS attention backend for vLLM (registered in vLLM's CUSTOM slot).

``register_bass_attention_backend()`` is what the plugin entry point calls in
every vLLM process. It is cheap and idempotent, and imports neither Triton
nor the backend module: vLLM resolves the class path only when a model asks
for ``attention_config={"backend": "CUSTOM"}`` / ``--attention-backend CUSTOM``.
"""

from __future__ import annotations

BACKEND_CLASS_PATH = "vllm_bass.attention.backend.BassAttentionBackend"


def register_bass_attention_backend() -> bool:
    """Point vLLM's CUSTOM attention backend at ours. Returns False (and does
    nothing) when vLLM is not importable."""
    try:
        from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend
    except ImportError:
        return False
    register_backend(AttentionBackendEnum.CUSTOM, BACKEND_CLASS_PATH)
    return True


__all__ = ["BACKEND_CLASS_PATH", "register_bass_attention_backend"]
