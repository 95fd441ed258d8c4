"""Every environment variable vllm-bass reads, in one place (as vLLM's `vllm.envs`).

All are optional. Configuration proper lives in `BassConfig` (flags and
`speculative_config`); these switch the plugin off, relax the version pin, or turn on
diagnostics and test aids. `tests/test_envs.py` holds the package to this list (no module
reads a `VLLM_BASS_*` variable that is not declared here) and README's table to it.
"""

from __future__ import annotations

import os

# name -> (default, what it does)
ENVIRONMENT_VARIABLES: dict[str, tuple[str, str]] = {
    "VLLM_BASS_DISABLE": (
        "0", "1: the plugin registers nothing (vLLM runs as if it were not installed)"),
    "VLLM_BASS_ALLOW_UNSUPPORTED_VLLM": (
        "0", "1: start on a vLLM other than 0.27.1 (unsupported; internals may differ)"),
    "VLLM_BASS_STEP_TRACE": (
        "", "FILE: per-step timings (scheduler: FILE; plans: FILE.plans; runner phases and "
            "CUDA-graph mode: FILE.runner; the engine process's GC pauses: FILE.gc)"),
    "VLLM_BASS_PROFILE_DRAFTS": (
        "0", "N (with STEP_TRACE): cProfile of N draft phases after warm-up, to "
             "FILE.draft_profile.txt"),
    "VLLM_BASS_PROFILE_SLOW_DRAFTS": (
        "0", "N (with STEP_TRACE): cProfile of the first N draft phases over 40 ms, to "
             "FILE.slow_drafts.txt"),
    "VLLM_BASS_SYNC_DEBUG": (
        "", "FILE: host-device synchronisations per step kind (where async steps wait; "
            "'{pid}' in FILE: one file per engine process)"),
    "VLLM_BASS_SYNC_DEBUG_AFTER": (
        "50", "steps to skip before SYNC_DEBUG records (warm-up)"),
    "VLLM_BASS_UNSPECIALIZE_DRAFT_KERNELS": (
        "1", "0: keep Triton's integer/alignment specialisation of vLLM's drafter kernels "
             "(JIT stalls of 100-250 ms as draft lengths vary)"),
    "VLLM_BASS_PRECOMPILE_THREADS": (
        "auto", "threads compiling our attention kernels for the CUDA graphs before their "
                "capture (auto: half the CPUs, at most 8; 0: each compiles when the capture "
                "meets it)"),
    "VLLM_BASS_FIRST_PASS_GRAPHS": (
        "1", "0: the drafter's first pass runs as vLLM runs it (piecewise graphs), not as "
             "BASS's full CUDA graphs (A/B measurements)"),
    "VLLM_BASS_MEASURED_DRAFT_STEP": (
        "1", "0: the policy's step-cost fit prices a draft step from step timings alone, "
             "not at least at the draft step graph's time measured at start-up (the default "
             "since session 49; A/B measurements)"),
    "VLLM_BASS_PREFILL_FA3": (
        "1", "0: our attention backend runs prefill steps (a query of 64+ tokens) with its own "
             "kernels too, not FA3's (A/B measurements)"),
    "VLLM_BASS_ATTENTION_PDL": (
        "1", "0: our attention kernels launch after the KV-cache write (and SPLIT's "
             "reduction after its splits) ends, not overlapped with it through Hopper's "
             "programmatic dependent launch (A/B measurements)"),
    "VLLM_BASS_PAD_STAGES": (
        "0", "N: our attention's PAD launches keep at most N K/V pipeline stages (0: the "
             "chooser's: at full occupancy 2 up to 2048 planned keys, else 3 for the 7B "
             "layer's tiles; A/B measurements)"),
    "VLLM_BASS_COST_FIT": (
        "", "session29: the step-cost fit as before session 30, without its per-request term "
            "and with its prior scaled by every step, not the off-steps; one_draft: with a "
            "one-draft step's own premium (session 40's default, dropped in session 41); "
            "session51: the default before session 52 (a verified token's prior price "
            "0.01 of a plain step, not 0.0025; each batch size plans with its own fit, not "
            "the nearest one with drafting steps while it has few); session52: the default "
            "before session 53 (a verified token below the knee priced at the fit's price "
            "alone, not at least half the knee's); linear / borrow: the default (A/B "
            "measurements)"),
    "VLLM_BASS_PLAN_REUSE": (
        "1", "0: a batch of 32 or more requests solves its per-request plan afresh whenever "
             "an estimate, their mean or the batch moved, as before session 54, not once "
             "every 4 steps while its requests, costs and closed-batch end hold (A/B "
             "measurements)"),
    "VLLM_BASS_SHORT_QUERY_GRAPHS": (
        "1", "0: one captured mixed-batch graph a size, planned for a few long "
             "verifications, as before session 57, not also a second graph of that size "
             "planned for many one-draft requests (4-104 tokens on a 7B shape), replayed for "
             "batches of more requests than the first serves (H200: attention 1.12-1.35x "
             "faster on one-draft batches, the target 0.95x the graph time at equal step "
             "shapes on the mix; A/B measurements)"),
    "VLLM_BASS_KNEE_PRICE": (
        "max", "sum: a verified token past the knee costs the fitted token price plus the "
               "knee's compute price, as before session 32 (A/B measurements); max (the "
               "default): the larger of them"),
    "VLLM_BASS_FIRST_PASS_SLOT_KERNEL": (
        "1", "0: the draft's first-pass KV slots by vLLM's torch code (~10 launches a "
             "drafting step), not one Triton launch (A/B measurements)"),
    "VLLM_BASS_EAGER_COUNT_CORRECTION": (
        "1", "0: keep vLLM's torch.compile'd async draft-count correction in BASS engines "
             "(recompiles of 0.4-1 s inside serving steps as batch sizes change)"),
    "VLLM_BASS_INJECT_DRAFT_FAULT": (
        "", "SPEC (tests, drills): the draft pass raises on chosen passes of each worker, "
            "counted from 1: every:N (N, 2N, ...), steps:A,B,... (those), from:N (every "
            "pass from N on); see vllm_bass/diagnostics/fault_injection.py"),
    "VLLM_BASS_TEST_OFF_CYCLE": (
        "", "ON,OFF (tests only): the policy's plan for ON steps, then OFF off-steps"),
}


def get(name: str) -> str:
    """The variable's value, or its declared default."""
    return os.environ.get(name, ENVIRONMENT_VARIABLES[name][0])


def flag(name: str) -> bool:
    return get(name).strip().lower() in ("1", "true", "yes", "on")


def integer(name: str) -> int:
    value = get(name).strip() or "0"
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
