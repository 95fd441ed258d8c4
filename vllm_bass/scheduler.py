"""BASS scheduler policy: vLLM's Scheduler, plus what ragged adaptive drafts need.

* Lookahead: vLLM reserves `num_speculative_tokens` KV slots per running sequence for the
  draft model's lookahead; with BASS that is the most any sequence may draft (l_limit), so a
  sequence can grow its draft without a reallocation stall. Drafts that do not fit the token
  budget or max_model_len are cut by the base class; preempted sequences drop their drafts
  (base class) and re-draft after resuming.
* vLLM pads *new* decode requests to 1 + K tokens to keep full CUDA graphs; with adaptive
  lengths up to 32 that padding would waste a whole draft's verification, so it is off.
* Statistics for BASS metrics (draft-length histogram, steps with speculation off).
"""

from __future__ import annotations

from collections import Counter

from vllm.v1.core.sched.scheduler import Scheduler


class BassScheduler(Scheduler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A non-None dynamic-SD table turns off vLLM's pad-new-decodes-to-1+K path
        # (scheduler.py, "Pad new decode requests to uniform spec decoding size"); the table
        # itself just returns K, and our runner picks the real length each step.
        if self.num_spec_tokens > 0:
            self.dynamic_sd_lookup = [self.num_spec_tokens] * (
                self.scheduler_config.max_num_seqs + 1)
        self.bass_draft_length_hist: Counter[int] = Counter()
        self.bass_steps = 0
        self.bass_steps_without_drafts = 0

    def update_from_output(self, scheduler_output, model_runner_output):
        decode_reqs = [rid for rid, n in scheduler_output.num_scheduled_tokens.items()
                       if rid in self.requests and not self.requests[rid].is_prefill_chunk]
        spec = scheduler_output.scheduled_spec_decode_tokens
        if decode_reqs:
            self.bass_steps += 1
            lengths = [len(spec.get(rid, ())) for rid in decode_reqs]
            self.bass_draft_length_hist.update(lengths)
            if not any(lengths):
                self.bass_steps_without_drafts += 1
        return super().update_from_output(scheduler_output, model_runner_output)
