"""Patch: vLLM's async spec-decode count correction
(`update_num_computed_tokens_for_batch_change`, a `torch.compile(dynamic=True)` function
called in `_prepare_inputs`) runs without dynamo in BASS engines: one Triton launch on CUDA
(`kernels/count_correction.py`), the plain function under the wrapper elsewhere.

What: the runner module's name for it is pointed at a function that launches our kernel for
CUDA tensors and otherwise calls the function dynamo compiled (its
`_torchdynamo_orig_callable`), in BASS worker processes only (vLLM's own engines keep it).
Why: dynamo recompiles it whenever its inputs meet a new size relation (0/1
specialisation, the previous batch's size equal to or different from this one's, ...):
~0.4-1 s of host time (dynamo, inductor, Triton) inside a serving step. On the H100
(session 13, call 1) BASS's profiled batch-64 run recompiled it at the step where 63
prompts joined one decoding request, and a timed batch-128 run compiled two of its Triton
kernels: 18.6 ms/token against 11.3 for the same shapes without. Plain, it is ~12 small
launches over the batch: 5% of the engine core's host time in session 41's py-spy of a
host-bound H200 run (batch 4 / 16), which the one launch saves.
When it can go: when vLLM warms the function up for every size relation, marks its sizes
unspecialised, or replaces it with a kernel. `VLLM_BASS_EAGER_COUNT_CORRECTION=0` keeps
vLLM's compiled version.
"""

from __future__ import annotations

import logging

from vllm_bass import envs

logger = logging.getLogger("vllm.bass")

SYMBOL = "vllm.v1.worker.gpu_model_runner.update_num_computed_tokens_for_batch_change"
PATCHED_SYMBOLS = {SYMBOL: (
    "(num_computed_tokens: torch.Tensor, num_accepted_tokens: torch.Tensor, "
    "prev_positions: torch.Tensor, valid_sampled_token_count: torch.Tensor, "
    "prev_num_draft_tokens: torch.Tensor, cpu_num_computed_tokens: torch.Tensor) -> None")}


def eager_version(compiled):
    """The Python function under a `torch.compile` wrapper (the function itself if it is
    not one)."""
    return getattr(compiled, "_torchdynamo_orig_callable", compiled)


def enabled() -> bool:
    return envs.get("VLLM_BASS_EAGER_COUNT_CORRECTION").strip() != "0"


def apply_in_worker() -> bool:
    """Point the runner at the kernel / plain function; True when this call did
    (idempotent)."""
    if not enabled():
        return False
    from vllm_bass.patches import wrap_once

    def make(compiled):
        eager = eager_version(compiled)

        def count_correction_eager(*args, **kwargs):
            if not kwargs and len(args) == 6 and args[0].device.type == "cuda":
                from vllm_bass.kernels import count_correction as kernel

                if kernel.usable(args[0].shape[0]):
                    return kernel.count_correction(*args)
            return eager(*args, **kwargs)
        return count_correction_eager

    if not wrap_once(SYMBOL, make):
        return False
    logger.info("vllm-bass: vLLM's async draft-count correction runs without dynamo "
                "(one launch on CUDA; no runtime recompiles)")
    return True
