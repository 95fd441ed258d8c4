"""Compile one kernel binary ahead, never failing the engine."""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger("vllm.bass")


def compile_ahead(kernel, args: tuple, device: torch.device, what: str, **meta) -> bool:
    """Triton's `warmup` (compile, no launch) of `kernel` for `args` (dtypes for tensors)
    on `device`, so no serving step compiles it; False, with a warning naming `what`,
    where this Triton cannot compile it (the caller's torch form then serves)."""
    try:
        with torch.cuda.device(device):
            kernel.warmup(*args, grid=(1,), **meta)
        return True
    except Exception as exc:  # a Triton change: say so, keep serving
        logger.warning("vllm-bass: the %s kernel does not compile (%s: %s); its torch form "
                       "serves", what, type(exc).__name__, exc)
        return False
