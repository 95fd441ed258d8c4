"""Compile the drafter's bookkeeping Triton kernels for every block size at start-up.

vLLM's drafter launches `eagle_prepare_next_token_padded_kernel` with BLOCK_SIZE_TOKENS =
next_pow2(1 + this step's draft length) and `copy_and_expand_eagle_inputs_kernel` with
min(256, next_pow2(longest query + new slots)). Both are constexprs, so each new value
compiles a new binary (~100-250 ms) inside a serving step; `eagle_prepare_inputs_padded_kernel`
(no constexpr) compiles once, in the first speculative step. vLLM with one fixed K meets one
or two values; BASS's per-step draft lengths meet every power of two up to 1 + k_max, and
the H100 benchmarks of session 13 still counted such compiles inside timed repeats (vLLM's
JIT monitor). Triton's `warmup` compiles without launching (dtypes stand in for tensors),
on the start-up compile pool (`attention.precompile.compile_launches`, several at a time),
so this costs start-up time only, and nothing when Triton's disk cache has the binaries.
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger("vllm.bass")

MAX_COPY_BLOCK = 256  # vLLM caps copy_and_expand's token block at 256
# the drafter attributes read here (registered in `patches.registry`)
DRAFTER_FIELDS = ("needs_extra_input_slots", "extra_slots_per_request",
                  "pass_hidden_states_to_model", "is_rejected_token_mask",
                  "is_masked_token_mask", "num_speculative_tokens")


def powers_of_two_up_to(n: int) -> list[int]:
    """1, 2, 4, ... up to next_pow2(n) inclusive (n >= 1)."""
    out, p = [1], 1
    while p < n:
        p *= 2
        out.append(p)
    return out


def warmup_block_sizes(k_max: int) -> dict[str, list[int | None]]:
    """The BLOCK_SIZE_TOKENS values vLLM's drafter can pass, per kernel, when drafts are
    up to `k_max` tokens (copy_and_expand: every size up to the cap, which prefill chunks
    reach whatever the new slots per request)."""
    prepare = powers_of_two_up_to(1 + k_max)  # 1: steps that drafted nothing
    copy = powers_of_two_up_to(MAX_COPY_BLOCK)
    return {"eagle_prepare_next_token_padded_kernel": prepare,
            "copy_and_expand_eagle_inputs_kernel": copy,
            "eagle_prepare_inputs_padded_kernel": [None]}  # None: no block constexpr


def _positional(kernel, values: dict) -> list:
    names = [p.name for p in kernel.params if not p.is_constexpr]
    missing = [n for n in names if n not in values]
    if missing:
        raise KeyError(f"{kernel.fn.__name__}: no warm-up value for {missing}")
    return [values[n] for n in names]


def _prepare_next_token_args(drafter) -> dict:
    i32 = torch.int32
    return dict(sampled_token_ids_ptr=i32,  # our rejection sampler's output
                discard_request_mask_ptr=torch.bool, backup_next_token_ids_ptr=i32,
                next_token_ids_ptr=i32, valid_sampled_tokens_count_ptr=i32,
                vocab_size=1000, num_sampled_tokens_per_req=3, num_reqs=2,
                stride_sampled_token_ids=3)


def _prepare_inputs_args(drafter) -> dict:
    i32 = torch.int32
    return dict(cu_num_draft_tokens_ptr=i32, valid_sampled_tokens_count_ptr=i32,
                query_start_loc_gpu_ptr=i32, token_indices_to_sample_ptr=i32,
                num_rejected_tokens_gpu_ptr=i32, num_reqs=2)


def _copy_and_expand_args(drafter) -> dict:
    i32 = torch.int32
    return dict(target_token_ids_ptr=i32, target_positions_ptr=torch.int64,
                next_token_ids_ptr=i32, out_input_ids_ptr=drafter.input_ids.dtype,
                out_positions_ptr=drafter.positions.dtype,
                out_is_rejected_token_mask_ptr=drafter.is_rejected_token_mask.dtype,
                out_is_masked_token_mask_ptr=drafter.is_masked_token_mask.dtype,
                out_new_token_indices_ptr=i32, out_hidden_state_mapping_ptr=i32,
                query_start_loc_ptr=i32, query_end_loc_ptr=i32, padding_token_id=0,
                parallel_drafting_token_id=0, total_input_tokens=6,
                num_padding_slots_per_request=int(drafter.extra_slots_per_request),
                shift_input_ids=bool(drafter.pass_hidden_states_to_model))


ARG_BUILDERS = {"eagle_prepare_next_token_padded_kernel": _prepare_next_token_args,
                "copy_and_expand_eagle_inputs_kernel": _copy_and_expand_args,
                "eagle_prepare_inputs_padded_kernel": _prepare_inputs_args}


def warm_up_draft_kernels(drafter) -> int:
    """Compile the block-size variants BASS's draft lengths reach, in parallel
    (`attention.precompile.compile_launches`); returns how many were compiled or found in
    Triton's cache. Never fails the engine: a miss only means the compile happens later,
    inside a step, as it does without this."""
    from vllm.v1.spec_decode import utils as spec_utils

    from vllm_bass.attention.precompile import compile_launches, precompile_threads
    from vllm_bass.kernels.paged_attention import KernelLaunch

    if not getattr(drafter, "needs_extra_input_slots", False) or drafter.positions is None:
        return 0
    launches = []
    for name, blocks in warmup_block_sizes(int(drafter.num_speculative_tokens)).items():
        kernel = getattr(spec_utils, name, None)
        if kernel is None or not hasattr(kernel, "warmup"):
            continue
        try:
            args = tuple(_positional(kernel, ARG_BUILDERS[name](drafter)))
        except Exception as exc:  # a vLLM/Triton change: say so, keep serving
            logger.warning("vllm-bass: could not warm up %s (%s: %s); its block sizes "
                           "compile on first use", name, type(exc).__name__, exc)
            continue
        grid = (2, 1) if name.startswith("copy") else (2,)
        launches += [KernelLaunch(kernel, grid, args,
                                  {} if block is None else {"BLOCK_SIZE_TOKENS": block})
                     for block in blocks]
    result = compile_launches(launches, torch.device(drafter.device),
                              max(1, precompile_threads()))
    done = result["launches"] - result["errors"]
    logger.info("vllm-bass: %d drafter kernel variants compiled at start-up in %.1f s",
                done, result["seconds"])
    return done
