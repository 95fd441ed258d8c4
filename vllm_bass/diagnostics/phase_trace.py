"""Diagnostics: where a BASS step's time goes, per runner phase.

With `VLLM_BASS_STEP_TRACE=FILE`, the runner appends to `FILE.runner` one line per step:
`start_s,num_reqs,verified_length,forward_cpu_ms,sample_cpu_ms,draft_cpu_ms,forward_gpu_ms,
sample_gpu_ms,draft_gpu_ms,graph_mode,forward_thread_ms,sample_thread_ms,draft_thread_ms`
(graph_mode: the CUDA-graph mode the target's forward was dispatched to, 0 none, 1
piecewise, 2 full, -1 unknown; verified_length: the draft length this step verifies) -- host
time spent in each phase (Python + launches; wall clock), the device time between CUDA
events at the phase boundaries, and the engine thread's own CPU time in each phase (since
session 41: its wall time exceeds its CPU time when the thread waits -- a sync, the GIL,
another process on its core -- rather than works; session 41's H200 trace had a run's first
~100 drafting steps at 1.5x the host time of its later ones, cause unknown). A step is
written once its events have completed (`Event.query`), never by waiting for them:
`elapsed_time` on an unfinished event synchronises, which under async scheduling serialised
host and GPU and so measured another engine (session 5's async traces). Off by default;
nothing is recorded without the variable.
Since session 51 three more fields follow: `model_cpu_ms,model_gpu_ms,lead_gpu_ms`, the
target model's own call inside the forward phase (the runner's `_model_forward`: host time,
device time between events around it) and the device time from the forward phase's start
to the model's (input preparation, and the device idle while the host prepares). Session
51's H200 traces had the same full-graph forward take 5.6 or 6.5-7.3 ms of device time in
stretches of tens of steps, at full clock: these split graph time from the lead before it.
With `VLLM_BASS_PROFILE_DRAFTS=N` as well, the draft phases of N drafting steps (after the
first 300 steps: warm-up) run under cProfile and `FILE.draft_profile.txt` gets the top
functions by cumulative and by own time (where the host time of a draft step goes).
"""

from __future__ import annotations

import cProfile
import collections
import io
import pstats
import time

import torch

from vllm_bass import envs
from vllm_bass.diagnostics import open_trace

PHASES = ("forward", "sample", "draft")
MODEL = "model"  # the target model's call within the forward phase


class PhaseTrace:
    def __init__(self, path: str, use_cuda: bool):
        self.file = open_trace(path)
        self.use_cuda = use_cuda
        self.pending: collections.deque = collections.deque()  # steps, events not yet read
        self._reset()

    @classmethod
    def from_env(cls, use_cuda: bool) -> "PhaseTrace | None":
        path = envs.get("VLLM_BASS_STEP_TRACE")
        if not path:
            return None
        trace = cls(path + ".runner", use_cuda)
        trace.profile_left = envs.integer("VLLM_BASS_PROFILE_DRAFTS")
        trace.profile_path = path + ".draft_profile.txt"
        # VLLM_BASS_PROFILE_SLOW_DRAFTS=N: every draft phase runs under cProfile; the first N
        # that take over SLOW_DRAFT_MS go to FILE.slow_drafts.txt (what a stall is)
        trace.slow_left = envs.integer("VLLM_BASS_PROFILE_SLOW_DRAFTS")
        trace.slow_path = path + ".slow_drafts.txt"
        return trace

    profile_left = 0
    profile_path = ""
    profiler: cProfile.Profile | None = None
    steps_seen = 0

    slow_left = 0
    slow_path = ""
    SLOW_DRAFT_MS = 40.0

    def profile_draft(self, drafting: bool):
        """A started cProfile for this draft phase, or None (see the module docstring)."""
        self.steps_seen += 1
        if self.slow_left > 0:
            profiler = cProfile.Profile()
            profiler.bass_start = time.perf_counter()
            profiler.enable()
            return profiler
        if not (drafting and self.profile_left > 0 and self.steps_seen > 300):
            return None
        self.profiler = self.profiler or cProfile.Profile()
        self.profiler.enable()
        return self.profiler

    def end_profile(self, profiler) -> None:
        profiler.disable()
        start = getattr(profiler, "bass_start", None)
        if start is not None:
            ms = (time.perf_counter() - start) * 1e3
            if ms > self.SLOW_DRAFT_MS and self.slow_left > 0:
                self.slow_left -= 1
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
                with open(self.slow_path, "a") as f:
                    f.write(f"=== step {self.steps_seen}: draft phase {ms:.1f} ms\n"
                            + out.getvalue())
            return
        self.profile_left -= 1
        if self.profile_left == 0:
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            stats.sort_stats("cumulative").print_stats(45)
            stats.sort_stats("tottime").print_stats(30)
            with open(self.profile_path, "w") as f:
                f.write(out.getvalue())

    def _reset(self) -> None:
        self.start = time.perf_counter()
        self.cpu = dict.fromkeys(PHASES + (MODEL,), 0.0)
        self.thread = dict.fromkeys(PHASES + (MODEL,), 0.0)
        self.events: dict[str, tuple] = {}
        self.num_reqs = 0
        self.drafted = 0
        self.graph_mode = -1

    def begin(self, phase: str):
        ev = None
        if self.use_cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
        return phase, time.perf_counter(), ev, time.thread_time()

    def end(self, token) -> None:
        phase, t0, ev0, thread0 = token
        self.cpu[phase] += (time.perf_counter() - t0) * 1e3
        self.thread[phase] += (time.thread_time() - thread0) * 1e3
        if ev0 is not None:
            ev1 = torch.cuda.Event(enable_timing=True)
            ev1.record()
            self.events[phase] = (ev0, ev1)

    def finish_step(self, num_reqs: int, drafted: int) -> None:
        """Called at the start of the next step: queue the step just run and write every
        queued step whose events have completed, oldest first (no device wait)."""
        self.pending.append((self.start, num_reqs, drafted, self.cpu, self.events,
                             self.graph_mode, self.thread))
        self._reset()
        while self.pending and all(e1.query() for _, e1 in self.pending[0][4].values()):
            start, n, d, cpu, events, mode, thread = self.pending.popleft()
            gpu = [events[p][0].elapsed_time(events[p][1]) if p in events else 0.0
                   for p in PHASES + (MODEL,)]
            lead = (events["forward"][0].elapsed_time(events[MODEL][0])
                    if "forward" in events and MODEL in events else 0.0)
            self.file.write(",".join([f"{start:.6f}", str(n), str(d)]
                                     + [f"{cpu[p]:.3f}" for p in PHASES]
                                     + [f"{g:.3f}" for g in gpu[:len(PHASES)]] + [str(mode)]
                                     + [f"{thread[p]:.3f}" for p in PHASES]
                                     + [f"{cpu[MODEL]:.3f}", f"{gpu[-1]:.3f}",
                                        f"{lead:.3f}"]) + "\n")
