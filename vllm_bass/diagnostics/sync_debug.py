"""Diagnostics: where a BASS step makes the host wait for the GPU.

Async scheduling only hides the host's work (scheduling, input preparation) behind the GPU
while no step synchronises; one `.item()`, `.tolist()`, blocking copy or data-dependent shape
per step puts host and GPU back in series, and a BASS off-step then costs a plain step's host
plus GPU time. With `VLLM_BASS_SYNC_DEBUG=FILE` the runner turns on torch's synchronisation
warnings (`torch.cuda.set_sync_debug_mode("warn")`) after `VLLM_BASS_SYNC_DEBUG_AFTER` steps
(default 50: warm-up and graph capture sync on purpose) and writes to FILE, every 50 steps,
how often each call site synchronised in each kind of step (plain / verify, +draft) and one
Python stack per site. Off by default; CUDA only.
"""

from __future__ import annotations

import collections
import os
import traceback
import warnings

from vllm_bass import envs

SYNC_MESSAGE = "synchronizing CUDA operation"  # torch's warning text


class SyncDebug:
    def __init__(self, path: str, after_steps: int = 50, flush_every: int = 50):
        self.path = path
        self.after_steps = after_steps
        self.flush_every = flush_every
        self.steps = 0
        self.kind = "warm-up"
        self.steps_by_kind: collections.Counter = collections.Counter()
        self.counts: collections.Counter = collections.Counter()  # (kind, site) -> syncs
        self.stacks: dict[str, str] = {}  # site -> first stack seen
        self.enabled = False
        self._show = None

    @classmethod
    def from_env(cls) -> "SyncDebug | None":
        path = envs.get("VLLM_BASS_SYNC_DEBUG")
        if not path:
            return None
        # "{pid}" in the path: one file per engine process (a benchmark slice runs several
        # engines under one environment, and each writes its whole file)
        path = path.replace("{pid}", str(os.getpid()))
        return cls(path, envs.integer("VLLM_BASS_SYNC_DEBUG_AFTER"))

    def begin_step(self, kind: str) -> None:
        self.steps += 1
        if not self.enabled and self.steps > self.after_steps:
            self.enable()
        if self.enabled:
            self.kind = kind
            self.steps_by_kind[kind] += 1
            if self.steps % self.flush_every == 0:
                self.write()

    def enable(self) -> None:
        """Route torch's sync warnings to `record` (every occurrence, not once per site)."""
        import torch

        self.enabled = True
        warnings.filterwarnings("always", message=f".*{SYNC_MESSAGE}.*")
        self._show = warnings.showwarning
        warnings.showwarning = self._showwarning
        if torch.cuda.is_available():
            torch.cuda.set_sync_debug_mode("warn")

    def _showwarning(self, message, category, filename, lineno, file=None, line=None):
        if SYNC_MESSAGE in str(message):
            self.record(traceback.format_stack()[:-2])
        else:
            self._show(message, category, filename, lineno, file, line)

    def record(self, stack: list[str]) -> None:
        """One synchronisation; its site is the innermost frame outside torch and this
        module (the code that asked for it)."""
        frames = [f for f in stack if "/torch/" not in f and "sync_debug.py" not in f
                  and "/warnings.py" not in f]
        site = frames[-1].strip().splitlines()[0] if frames else "?"
        self.counts[(self.kind, site)] += 1
        self.stacks.setdefault(site, "".join(stack[-14:]))

    def write(self) -> None:
        lines = [f"steps by kind (after {self.after_steps} warm-up steps): "
                 + ", ".join(f"{k} {n}" for k, n in sorted(self.steps_by_kind.items()))]
        for (kind, site), n in sorted(self.counts.items(), key=lambda kv: -kv[1]):
            per_step = n / max(1, self.steps_by_kind[kind])
            lines.append(f"{kind}\t{n} syncs ({per_step:.2f}/step)\t{site}")
        lines.append("")
        for site, stack in self.stacks.items():
            lines += [f"== {site}", stack]
        with open(self.path, "w") as f:
            f.write("\n".join(lines) + "\n")


def step_kind(scheduler_output) -> str:
    """'plain' or 'verify' (the step verifies drafts), '+draft' when it drafts, 'prefill+'
    first when a request starts in it (session 47: a batch's first steps are its slowest)."""
    kind = "verify" if scheduler_output.scheduled_spec_decode_tokens else "plain"
    if getattr(scheduler_output, "num_spec_tokens_to_schedule", 0):
        kind += "+draft"
    if getattr(scheduler_output, "scheduled_new_reqs", None):
        kind = "prefill+" + kind
    return kind
