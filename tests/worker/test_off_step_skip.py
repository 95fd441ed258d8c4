"""Which off-steps skip the draft pass, on a stand-in runner (the engine tests run the real
one: `test_engine_greedy.py::test_draft_catches_up_after_skipped_off_steps`, under async
scheduling on the GPU). Since session 43 an async off-step that verifies drafts skips the
pass too, keeping only vLLM's bookkeeping of the accepted counts; beside a prefill it still
runs a one-token pass."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from vllm_bass.worker.drafter.draft_sync import DraftKVDebt, SkippedTokens
from vllm_bass.worker.model_runner import BassModelRunnerMixin

pytestmark = pytest.mark.cpu


class VllmRunner:
    """What the mixin calls of vLLM's runner, recorded."""

    def propose_draft_token_ids(self, scheduler_output, *args):
        self.calls.append(("draft pass", scheduler_output.num_spec_tokens_to_schedule))
        return [[7] * scheduler_output.num_spec_tokens_to_schedule for _ in self.req_ids]

    def _copy_valid_sampled_token_count(self, next_token_ids, valid_counts):
        self.calls.append(("counts", next_token_ids.tolist(), valid_counts.tolist()))


class Runner(BassModelRunnerMixin, VllmRunner):
    def __init__(self, async_scheduling: bool):
        self.req_ids = ["a", "b"]
        self.calls = []
        self.bass_async = async_scheduling
        self._bass_known_reqs = set()
        self._bass_seeded_step = None
        self._bass_skipped = SkippedTokens(4, 64, "cpu") if async_scheduling else None
        self.input_batch = SimpleNamespace(req_ids=self.req_ids,
                                           num_computed_tokens_cpu=np.array([10, 20]))
        self.input_ids = SimpleNamespace(gpu=torch.arange(100, 140))
        self.requests = {}
        self.discard_request_mask = SimpleNamespace(gpu=torch.zeros(2, dtype=torch.bool))
        calls = self.calls

        def bookkeeping(sampled, requests, input_batch, discard):
            calls.append(("bookkeeping", sampled.shape[0]))
            return torch.tensor([5, 6]), torch.tensor([3, 1])

        self.drafter = SimpleNamespace(
            bass_faults=None, bass_kv_debt=DraftKVDebt(), bass_can_catch_up=lambda: True,
            max_num_tokens=256, bass_catch_up=None, bass_seeded=None,
            prepare_next_token_ids_padded=bookkeeping)

    def propose(self, plan: int, drafts: dict[str, int], prefill: bool = False):
        """One step's propose: `drafts` verified per request (spec metadata when any)."""
        scheduled = {r: 1 + drafts.get(r, 0) for r in self.req_ids}
        if prefill:
            scheduled["b"] = 9
        out = SimpleNamespace(num_spec_tokens_to_schedule=plan,
                              num_scheduled_tokens=scheduled,
                              scheduled_spec_decode_tokens={
                                  r: [-1] * n for r, n in drafts.items() if n})
        spec = object() if any(drafts.values()) else None
        return self._bass_propose(out, torch.zeros(2, 4, dtype=torch.int64), None, None, None,
                                  None, spec, None, None)


def test_async_off_step_that_verifies_drafts_keeps_only_vllms_bookkeeping():
    runner = Runner(async_scheduling=True)
    got = runner.propose(0, {"a": 3, "b": 3})
    assert got == [[], []]
    assert runner.calls == [("bookkeeping", 2), ("counts", [5, 6], [3, 1])]
    # the draft owes the verified positions from each request's first scheduled token
    assert runner.drafter.bass_kv_debt.missing_from == {"a": 10, "b": 20}
    recorded = runner._bass_skipped.gather(["a", "b"], np.array([0, 0, 1]),
                                           np.array([10, 13, 20]))
    assert recorded.tolist() == [100, 103, 104]  # inputs laid out request by request


def test_async_off_step_beside_a_prefill_runs_a_one_token_pass():
    runner = Runner(async_scheduling=True)
    got = runner.propose(0, {"a": 3}, prefill=True)
    assert runner.calls == [("draft pass", 1)]  # vLLM's pass does its own bookkeeping
    assert got == [[7], [7]] and not runner.drafter.bass_kv_debt


def test_pure_decode_off_step_skips_without_bookkeeping():
    for async_scheduling in (True, False):
        runner = Runner(async_scheduling)
        assert runner.propose(0, {}) == [[], []]
        assert runner.calls == []
        assert runner.drafter.bass_kv_debt.missing_from == {"a": 10, "b": 20}


def test_sync_off_step_that_verifies_drafts_skips_without_bookkeeping():
    runner = Runner(async_scheduling=False)
    assert runner.propose(0, {"a": 2, "b": 1}) == [[], []]
    assert runner.calls == []  # the host has every token: vLLM corrects nothing


def test_a_drafting_step_runs_the_pass():
    runner = Runner(async_scheduling=True)
    assert runner.propose(3, {"a": 3, "b": 3}) == [[7] * 3, [7] * 3]
    assert runner.calls == [("draft pass", 3)]
