"""Patch: the Triton kernels of vLLM's drafter input preparation
(`vllm.v1.spec_decode.utils`: copy_and_expand_eagle_inputs_kernel,
eagle_prepare_inputs_padded_kernel, eagle_prepare_next_token_padded_kernel,
eagle_step_slot_mapping_metadata_kernel) compile once per constexpr combination instead of
once per value class of every integer and pointer argument.

What: their non-constexpr parameters get Triton's `do_not_specialize` and
`do_not_specialize_on_alignment` (the flags `@triton.jit(do_not_specialize=...)` sets),
before the worker's first launch.
Why: Triton specialises an integer argument on == 1 and on divisibility by 16, and a pointer
on 16-byte alignment, and compiles a new binary (~100-250 ms) for each new combination.
With fixed K vLLM's drafter meets few combinations; with BASS's per-step and per-request
draft lengths the token counts and offsets take new classes for a long time, and the H100
runner traces of session 8 showed 100-250 ms draft phases every ~10-15 steps (vLLM's
JIT monitor: "Triton kernel JIT compilation during inference" for these kernels). These are
tiny bookkeeping kernels: the specialisations buy nothing measurable.
When it can go: when vLLM warms these kernels up for every shape it may launch, or marks
the arguments itself. `VLLM_BASS_UNSPECIALIZE_DRAFT_KERNELS=0` turns it off.
"""

from __future__ import annotations

import logging

from vllm_bass import envs

logger = logging.getLogger("vllm.bass")

KERNELS = (
    "vllm.v1.spec_decode.utils.copy_and_expand_eagle_inputs_kernel",
    "vllm.v1.spec_decode.utils.eagle_prepare_inputs_padded_kernel",
    "vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel",
    "vllm.v1.spec_decode.utils.eagle_step_slot_mapping_metadata_kernel",
)
PATCHED_SYMBOLS = {k: "triton JITFunction with .params (KernelParam.do_not_specialize)"
                   for k in KERNELS}


def unspecialize(kernel) -> bool:
    """Turn off value/alignment specialisation of every runtime parameter; True if done."""
    params = getattr(kernel, "params", None)
    if not params or getattr(kernel, "device_caches", None):
        return False  # not a Triton JITFunction, or launched already (binder built)
    for p in params:
        if not p.is_constexpr:
            p.do_not_specialize = True
            p.do_not_specialize_on_alignment = True
    return True


def apply_in_worker() -> None:
    if envs.get("VLLM_BASS_UNSPECIALIZE_DRAFT_KERNELS").strip() == "0":
        return
    from vllm_bass.patches import resolve

    done = []
    for dotted in KERNELS:
        try:
            _, _, kernel = resolve(dotted)
        except (ImportError, AttributeError, KeyError):
            continue
        if unspecialize(kernel):
            done.append(dotted.rsplit(".", 1)[1])
    if done:
        logger.info("vllm-bass: Triton specialisation off for %s", ", ".join(done))
