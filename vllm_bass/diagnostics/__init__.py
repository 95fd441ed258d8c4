"""Diagnostics, each off unless its environment variable is set (`vllm_bass.envs`): per-step
phase timings and CUDA-graph modes (`phase_trace`), garbage-collection pauses (`gc_trace`),
host-device synchronisation points (`sync_debug`), injected draft faults (`fault_injection`).
Nothing here changes what the engine outputs (injected faults cost drafts, by design, never
tokens)."""

import os


def open_trace(path: str):
    """A trace file opened to append line by line, its folder made first: a trace variable
    naming a folder not yet there stopped the engine at start-up (session 29)."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    return open(path, "a", buffering=1)
