"""Diagnostics: injected draft faults, to show that a failing draft costs drafts, not output.

`VLLM_BASS_INJECT_DRAFT_FAULT=SPEC` makes the drafter's draft pass raise `InjectedDraftFault`
on chosen passes. A pass is one call of the drafter's `propose` in one worker (a step that
runs the draft model), counted from 1 per worker process. SPEC:

  every:N        passes N, 2N, 3N, ...
  steps:A,B,...  passes A, B, ... only
  from:N         every pass from N on (a persistent fault: after
                 `config.MAX_CONSECUTIVE_DRAFT_FAULTS` in a row speculation turns off)

The fault is raised where the pass begins, after the step's draft-KV catch-up was taken
from the debt and before the draft's first forward: nothing of the step reaches the draft's
KV, the case its catch-up must repair (`worker/drafter/faults.py`). Unset (the default) the
drafter holds None and checks nothing.
"""

from __future__ import annotations

from vllm_bass import envs

ENV = "VLLM_BASS_INJECT_DRAFT_FAULT"


class InjectedDraftFault(RuntimeError):
    """The exception an injected fault raises."""


class DraftFaultInjector:
    def __init__(self, spec: str):
        self.spec = spec
        self.passes = 0
        kind, _, arg = spec.strip().partition(":")
        try:
            numbers = [int(x) for x in arg.split(",") if x.strip()]
        except ValueError:
            numbers = []
        if (kind not in ("every", "steps", "from") or not numbers
                or min(numbers) < 1 or (kind != "steps" and len(numbers) != 1)):
            raise ValueError(f"{ENV} must be every:N, steps:A,B,... or from:N (N >= 1); "
                             f"got {spec!r}")
        self.kind, self.numbers = kind, frozenset(numbers)
        self.n = numbers[0]

    @classmethod
    def from_env(cls) -> "DraftFaultInjector | None":
        spec = envs.get(ENV)
        return cls(spec) if spec.strip() else None

    def due(self, n: int) -> bool:
        """Whether pass n (from 1) faults."""
        if self.kind == "every":
            return n % self.n == 0
        if self.kind == "from":
            return n >= self.n
        return n in self.numbers

    def check(self) -> None:
        """Called once at the start of every draft pass."""
        self.passes += 1
        if self.due(self.passes):
            raise InjectedDraftFault(f"injected draft fault at draft pass {self.passes} "
                                     f"({ENV}={self.spec})")
