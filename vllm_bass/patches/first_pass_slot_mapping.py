"""Patch: the drafter's first-pass slot mapping (`compute_new_slot_mapping`, called from
`SpecDecodeBaseProposer.set_inputs_first_pass`) runs as one Triton launch in BASS engines.

What: the proposer module's name for it is pointed at a function that launches
`kernels/first_pass_slot_mapping.py` for CUDA tensors and otherwise calls vLLM's function,
in BASS worker processes only (vLLM's own engines keep it).
Why: as torch it is ~10 small launches a drafting step, 8% of the engine core's host time
in session 41's py-spy of a host-bound H200 run (batch 4 / 16), where a drafting step's time
is the host's.
When it can go: when vLLM computes these slots in one kernel (it does already for the
draft's later steps, `eagle_step_update_slot_mapping_and_metadata`).
`VLLM_BASS_FIRST_PASS_SLOT_KERNEL=0` keeps vLLM's function.
"""

from __future__ import annotations

import logging

from vllm_bass import envs

logger = logging.getLogger("vllm.bass")

SYMBOL = "vllm.v1.spec_decode.llm_base_proposer.compute_new_slot_mapping"
PATCHED_SYMBOLS = {SYMBOL: (
    "(cad: vllm.v1.attention.backend.CommonAttentionMetadata, new_positions: torch.Tensor, "
    "is_rejected_token_mask: torch.Tensor, block_size: int, num_new_tokens: int, "
    "max_model_len: int)")}


def enabled() -> bool:
    return envs.get("VLLM_BASS_FIRST_PASS_SLOT_KERNEL").strip() != "0"


def apply_in_worker() -> bool:
    """Point the proposer at the kernel for CUDA tensors; True when this call did
    (idempotent)."""
    if not enabled():
        return False
    from vllm_bass.patches import wrap_once

    def make(original):
        def first_pass_slots(cad, new_positions, is_rejected_token_mask, block_size,
                             num_new_tokens, max_model_len):
            from vllm_bass.kernels import first_pass_slot_mapping as kernel

            if new_positions.device.type == "cuda" and kernel.usable():
                return kernel.first_pass_slot_mapping(
                    cad.query_start_loc, new_positions, is_rejected_token_mask,
                    cad.block_table_tensor, block_size, num_new_tokens, max_model_len)
            return original(cad, new_positions, is_rejected_token_mask, block_size,
                            num_new_tokens, max_model_len)
        return first_pass_slots

    if not wrap_once(SYMBOL, make):
        return False
    logger.info("vllm-bass: the draft's first-pass slot mapping runs as one launch on CUDA")
    return True
