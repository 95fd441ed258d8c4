"""BASS scheduler policy: vLLM's Scheduler, plus what ragged adaptive drafts need.

* Lookahead: vLLM reserves `num_speculative_tokens` KV slots per running sequence for the
  draft model's lookahead; with BASS that is the most any sequence may draft (l_limit), so a
  sequence can grow its draft without a reallocation stall. Drafts that do not fit the token
  budget or max_model_len are cut by the base class; preempted sequences drop their drafts
  (base class) and re-draft after resuming.
* vLLM pads *new* decode requests to 1 + K tokens to keep full CUDA graphs; with adaptive
  lengths up to 32 that padding would waste a whole draft's verification, so it is off.
* Step costs: every pure-decode step is timed here (one process, so all tensor-parallel
  ranks see the same numbers) and fitted by `StepCostEstimator`; the relative cost model for
  the step's batch size rides to the workers on the scheduler output (`bass_step_cost`),
  where the policy uses it to turn drafting off when it does not pay (auto-off) and, for
  per_request, to choose the draft lengths. Off-steps skip the draft model, so they measure
  plain decoding; `bass_needs_off_sample` asks for one when that measurement is stale.
BASS statistics are derived in the front end (`vllm_bass.metrics`) from the stats this
scheduler already ships.
"""

from __future__ import annotations

import os
import time
from dataclasses import astuple

from vllm.v1.core.sched.scheduler import Scheduler

from vllm_bass.proposer.cost_model import StepCostEstimator

# Decayed count of measured off-steps (per batch bucket) below which auto-off takes an
# occasional off-step, to measure what plain decoding costs (about one in 35 steps).
OFF_SAMPLES_WANTED = 0.5


class BassScheduler(Scheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A non-None dynamic-SD table turns off vLLM's pad-new-decodes-to-1+K path
        # (scheduler.py, "Pad new decode requests to uniform spec decoding size"); the table
        # itself just returns K, and our runner picks the real length each step.
        if self.num_spec_tokens > 0:
            self.dynamic_sd_lookup = [self.num_spec_tokens] * (
                self.scheduler_config.max_num_seqs + 1)
        self.bass_costs = StepCostEstimator()
        # (start time, batch, verified draft tokens, end time or None) of the step in flight
        self._bass_step: list | None = None
        # Diagnostics: VLLM_BASS_STEP_TRACE=FILE appends
        # "start_s,batch,draft_steps,verify_tokens,ms"
        # for every timed step (what the cost model is fitted to).
        trace = os.environ.get("VLLM_BASS_STEP_TRACE")
        self._bass_trace = open(trace, "a", buffering=1) if trace else None

    def schedule(self, *args, **kwargs):
        self._bass_finish_step(draft_steps=0)  # no drafts came back for the last step
        start = time.perf_counter()
        out = super().schedule(*args, **kwargs)
        spec = out.scheduled_spec_decode_tokens
        batch = len(out.num_scheduled_tokens)
        decode_only = batch > 0 and not out.scheduled_new_reqs and all(
            n == 1 + len(spec.get(rid, ())) for rid, n in out.num_scheduled_tokens.items())
        out.bass_step_cost = astuple(self.bass_costs.model_for(batch))
        out.bass_needs_off_sample = self.bass_costs.off_weight(batch) < OFF_SAMPLES_WANTED
        self._bass_step = ([start, batch, sum(len(s) for s in spec.values()), None]
                           if decode_only else None)
        return out

    def update_from_output(self, scheduler_output, model_runner_output):
        result = super().update_from_output(scheduler_output, model_runner_output)
        if self._bass_step is not None:
            self._bass_step[3] = time.perf_counter()
        return result

    def update_draft_token_ids(self, draft_token_ids) -> None:
        super().update_draft_token_ids(draft_token_ids)
        self._bass_finish_step(
            draft_steps=max((len(d) for d in draft_token_ids.draft_token_ids), default=0))

    def _bass_finish_step(self, draft_steps: int) -> None:
        step, self._bass_step = self._bass_step, None
        if step is not None and step[3] is not None:
            start, batch, verify_tokens, end = step
            self.bass_costs.observe(batch, draft_steps, verify_tokens, end - start)
            if self._bass_trace is not None:
                self._bass_trace.write(f"{start:.6f},{batch},{draft_steps},{verify_tokens},"
                                       f"{(end - start) * 1e3:.4f}\n")
