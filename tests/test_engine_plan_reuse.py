"""A batch of PLAN_REUSE_MIN_BATCH+ requests keeps its per-request plan for a few steps
(session 54: host time); the plan only picks draft lengths, so greedy output must still
equal the target's own. 40 prompts of many lengths under the default policy (per_request,
auto-off), with a real, imperfect draft. Runs the real vLLM engine (CPU in CI; the same body
on the GPU host)."""

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, run_engine
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]

BATCH = 40
PROMPT_SET = [p[: max(4, len(p) - (i * 5) % max(1, len(p) - 4))]
              for i, p in enumerate(PROMPTS * (BATCH // len(PROMPTS) + 1))][:BATCH]
JOBS = [{"prompts": PROMPT_SET,
         "sampling": {"temperature": 0.0, "max_tokens": 32, "ignore_eos": True}}]


def test_large_batch_plan_reuse_keeps_greedy_identical():
    from vllm_bass.policy.per_request import PLAN_REUSE_MIN_BATCH, PLAN_REUSE_STEPS

    assert BATCH >= PLAN_REUSE_MIN_BATCH and PLAN_REUSE_STEPS > 1
    want = run_engine(base_engine_kwargs(max_num_seqs=BATCH), JOBS)
    got = run_engine(base_engine_kwargs(max_num_seqs=BATCH, speculative_config=bass_spec(
        num_speculative_tokens=8)), JOBS, metrics=True)
    have = got["results"][0]["token_ids"]
    assert len(have) == BATCH
    for i, (w, h) in enumerate(zip(want["results"][0]["token_ids"], have)):
        assert h == w, f"prompt {i} differs from non-speculative greedy"
    drafts = metric(got["metrics"], "vllm:spec_decode_num_draft_tokens")
    assert drafts > 0, "speculation never ran"
