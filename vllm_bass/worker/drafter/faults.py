"""A draft pass that raises costs that step's drafts, never the engine or anyone's output.

Without this, an exception in the draft model (a bug, an unsupported shape, a Triton
compile error) propagates through vLLM's model runner and kills the engine: every request
in flight fails and the server is dead. Speculation is an optimisation the target does not
need, so the drafter contains the exception (`BassDraftModelProposer.propose`):
  * the step drafts nothing: sync scheduling schedules no drafts for the next step, so the
    target decodes one token per request as plain decoding would; async scheduling has
    already reserved the draft slots, which get a dummy draft (token 0, no draft
    probabilities: a deterministic proposal, verified exactly, so still lossless);
  * the draft's KV stays consistent (sync): the positions the failed pass should have
    written, and any catch-up it had taken over, go back into the draft-KV debt
    (`draft_sync`), and the next drafting step catches them up as after off-steps.
    Rewriting a slot a partial pass did write stores the same values, so this holds
    wherever in the pass the exception came from. Where that catch-up would not fit one
    first pass (a faulted long prefill), or under async scheduling (the device record of
    tokens covers skipped steps only), the positions stay a gap, which, as the catch-up's
    other known gaps, can only lower acceptance;
  * an ERROR with the traceback, at most once a minute (the faults in between are counted
    and reported with the next one);
  * after `MAX_CONSECUTIVE_DRAFT_FAULTS` faulting passes in a row, speculation is off for
    the engine's life (one more ERROR says so): the draft is broken, not unlucky.
Device faults are not contained: a CUDA error (illegal memory access, device-side assert,
launch failure) is sticky, the CUDA context is corrupt, and every later kernel of the
process (the target's included) fails or computes garbage. Carrying on would only pretend;
they propagate and vLLM shuts the engine down as it would without BASS.
"""

from __future__ import annotations

import logging
import time

from vllm_bass.config import MAX_CONSECUTIVE_DRAFT_FAULTS

logger = logging.getLogger("vllm.bass")

LOG_INTERVAL_S = 60.0  # at most one traceback a minute
# messages of device errors that corrupt the CUDA context (torch raises them as RuntimeError
# or its subclass torch.AcceleratorError)
DEVICE_FAULT_MARKERS = ("CUDA error", "illegal memory access", "device-side assert",
                        "unspecified launch failure", "misaligned address",
                        "CUBLAS_STATUS_EXECUTION_FAILED", "an illegal instruction")


def is_device_fault(exc: BaseException) -> bool:
    """A CUDA error (or one carried as the cause or context of `exc`)."""
    import torch

    kinds = tuple(k for k in (getattr(torch.cuda, "CudaError", None),
                              getattr(torch, "AcceleratorError", None)) if isinstance(k, type))
    seen = 0
    while exc is not None and seen < 8:
        if (kinds and isinstance(exc, kinds)) or (isinstance(exc, RuntimeError) and any(
                m in str(exc) for m in DEVICE_FAULT_MARKERS)):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class DraftFaults:
    """The drafter's fault count and state (one per worker)."""

    def __init__(self, max_consecutive: int = MAX_CONSECUTIVE_DRAFT_FAULTS,
                 log_interval_s: float = LOG_INTERVAL_S, clock=time.monotonic):
        self.max_consecutive = max_consecutive
        self.log_interval_s = log_interval_s
        self.clock = clock
        self.passes = 0  # draft passes run, faulted or not
        self.total = 0
        self.consecutive = 0
        self.speculation_off = False
        self.faulted_now = False  # the last pass faulted; the runner takes it (`take`)
        self._next_log: float | None = None
        self._unlogged = 0

    def record(self, exc: BaseException) -> None:
        """A contained fault of the draft pass (the caller re-raises device faults)."""
        self.passes += 1
        self.total += 1
        self.consecutive += 1
        self.faulted_now = True
        now = self.clock()
        if self._next_log is None or now >= self._next_log:
            unlogged = (f"; {self._unlogged} more since the last report"
                        if self._unlogged else "")
            logger.error(
                "BASS: the draft pass raised %s (draft fault %d, %d in a row%s); this "
                "step drafts nothing and the target decodes on its own (lossless)",
                type(exc).__name__, self.total, self.consecutive, unlogged, exc_info=exc)
            self._next_log, self._unlogged = now + self.log_interval_s, 0
        else:
            self._unlogged += 1
        if self.consecutive >= self.max_consecutive and not self.speculation_off:
            self.speculation_off = True
            logger.error(
                "BASS: %d draft passes in a row raised (%d in all): speculation is OFF for "
                "this engine from now on (plain decoding; restart it to draft again)",
                self.consecutive, self.total)

    def succeeded(self) -> None:
        self.passes += 1
        self.consecutive = 0

    def take(self) -> bool:
        """Whether the last pass faulted (cleared)."""
        faulted, self.faulted_now = self.faulted_now, False
        return faulted

    def as_dict(self) -> dict:
        return {"passes": self.passes, "faults": self.total, "consecutive": self.consecutive,
                "speculation_off": self.speculation_off}
