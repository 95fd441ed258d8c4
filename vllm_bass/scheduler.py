"""BASS scheduler policy: vLLM's Scheduler, plus what ragged adaptive drafts need.

* Lookahead: vLLM reserves `num_speculative_tokens` KV slots per running sequence for the
  draft model's lookahead; with BASS that is the most any sequence may draft (l_limit), so a
  sequence can grow its draft without a reallocation stall. Drafts that do not fit the token
  budget or max_model_len are cut by the base class; preempted sequences drop their drafts
  (base class) and re-draft after resuming.
* vLLM pads *new* decode requests to 1 + K tokens to keep full CUDA graphs; with adaptive
  lengths up to 32 that padding would waste a whole draft's verification, so it is off.
BASS statistics are derived in the front end (`vllm_bass.metrics`) from the stats this
scheduler already ships, so nothing is counted twice here.
"""

from __future__ import annotations

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
