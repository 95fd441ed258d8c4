"""Patch: `EngineCoreProc._process_input_queue` (vllm/v1/engine/core.py).

What: when an idle BASS engine core receives requests, it keeps taking them from its input
queue while they come close together (each within `BURST_GAP_S` of the last, for at most
`burst_window_ms` in all) before it schedules its first step.
Why: a client's burst (`LLM.generate` over a list, a benchmark's closed batch, a server's
fan-out) reaches the core one request at a time, ~0.4 ms apart; vLLM steps as soon as the
first arrives, so the burst is prefilled over two steps. With BASS the second one is a mixed
prefill + verification step of 640-800 tokens at batch 8, and the two took 56-105 ms of a
300-380 ms batch-8 run (H200, session 48, traced); with the window the burst's one prefill
step made the head 29-53 ms, and batch 8 ran 2.73x plain against 2.57x. It costs an idle
engine's lone request at most one gap of waiting.
When it can go: when vLLM batches a burst's arrivals itself (a scheduling delay option).
"""

from __future__ import annotations

import queue
import time
from typing import Any, Callable

from vllm_bass.patches import wrap

PATCHED_SYMBOLS = {
    "vllm.v1.engine.core.EngineCoreProc._process_input_queue": "(self)",
}

# Longest pause between two requests of one burst. LLM.generate's front end adds one
# request every ~0.4 ms (session 47's traces: 8 requests over ~3 ms).
BURST_GAP_S = 0.001
_WINDOW_ATTR = "_bass_burst_window_s"  # attached: this core's window (0.0: not BASS / off)


def gather_burst(get: Callable[..., Any], handle: Callable[..., None], gap_s: float,
                 window_s: float, clock: Callable[[], float] = time.monotonic) -> int:
    """Handle the queue's items while each comes within `gap_s` of the last and `window_s`
    has not passed; the number handled."""
    deadline = clock() + window_s
    handled = 0
    while (remaining := deadline - clock()) > 0:
        try:
            item = get(timeout=min(gap_s, remaining))
        except queue.Empty:
            break
        handle(*item)
        handled += 1
    return handled


def burst_window_s(vllm_config: Any) -> float:
    """The core's window in seconds: the BASS config's `burst_window_ms`, 0 without BASS."""
    from vllm_bass.config import bass_config_from_vllm

    bass = bass_config_from_vllm(vllm_config)
    return 0.0 if bass is None else float(bass.burst_window_ms) / 1000.0


def apply() -> None:
    def make(original):
        def _process_input_queue(self):
            window = getattr(self, _WINDOW_ATTR, None)
            if window is None:
                window = burst_window_s(getattr(self, "vllm_config", None))
                setattr(self, _WINDOW_ATTR, window)
            was_idle = window > 0.0 and not self.has_work()
            original(self)
            if was_idle and self.scheduler.has_requests():
                gather_burst(self.input_queue.get, self._handle_client_request,
                             min(BURST_GAP_S, window), window)
        return _process_input_queue

    wrap("vllm.v1.engine.core.EngineCoreProc._process_input_queue", make)
