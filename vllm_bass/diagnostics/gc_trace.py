"""Diagnostics: the engine process's garbage-collection pauses, on the step trace's clock.

With `VLLM_BASS_STEP_TRACE=FILE` the scheduler's process also appends to `FILE.gc` one line
per collection: `start_s,ms,generation,collected` (time.perf_counter, the clock of the step
trace and of `vs_vllm.py`'s run windows). Session 47's traced batch-8 runs spent 40-100 ms
in their two prefill steps, with the host busy for the whole forward and draft phases and
the time scattering 4x between identical runs; a collection inside a step is one candidate
(vLLM freezes the start-up heap, but a prefill step allocates the most objects).
`run_windows.py` adds the pauses up per window part. Off without the variable; one
callback per process, a perf_counter read at each start and stop.
"""

from __future__ import annotations

import gc
import time

_installed: "GcTrace | None" = None


class GcTrace:
    def __init__(self, file):
        self.file = file
        self._start: float | None = None

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        if phase != "stop" or self._start is None:
            return
        start, self._start = self._start, None
        ms = (time.perf_counter() - start) * 1e3
        try:
            self.file.write(f"{start:.6f},{ms:.3f},{info.get('generation', -1)},"
                            f"{info.get('collected', -1)}\n")
        except (OSError, ValueError):  # a closed or full trace never stops the engine
            pass


def install(path: str) -> GcTrace:
    """Record this process's collections to `path` (once per process: later calls return
    the first tracer)."""
    global _installed
    if _installed is None:
        from vllm_bass.diagnostics import open_trace

        _installed = GcTrace(open_trace(path))
        gc.callbacks.append(_installed)
    return _installed


def read(path) -> list[tuple[float, float, int]]:
    """(start s, ms, generation) per collection of a `FILE.gc`."""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) >= 3:
                out.append((float(parts[0]), float(parts[1]), int(parts[2])))
    return out
