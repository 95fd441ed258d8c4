"""Diagnostics, each off unless its environment variable is set (`vllm_bass.envs`): per-step
phase timings and CUDA-graph modes (`phase_trace`), host-device synchronisation points
(`sync_debug`), injected draft faults (`fault_injection`). Nothing here changes what the
engine outputs (injected faults cost drafts, by design, never tokens)."""
