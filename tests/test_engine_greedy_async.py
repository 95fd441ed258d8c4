"""Lossless greedy under vLLM's async scheduling (`--async-scheduling`, CUDA only: vLLM's
CPU executor has none): the runner assumes every draft is accepted and corrects a step
later, and BASS's scheduler reserves per-request draft lengths among the uniform
placeholders, so the output must still equal the engine's own greedy output. Async
per_request measured best on the H100 (session 7); this gates making it a default."""

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, run_engine
from tests.test_engine_greedy import JOBS, _assert_same, baseline  # noqa: F401 (fixture)

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.mark.parametrize("policy,k", [("bass", 8), ("per_request", 8)])
def test_greedy_identical_to_target_with_async_scheduling(baseline, policy, k):  # noqa: F811
    got = run_engine(base_engine_kwargs(async_scheduling=True, speculative_config=bass_spec(
        draft_length_policy=policy, num_speculative_tokens=k)), JOBS, metrics=True)
    _assert_same(baseline, got, f"{policy}, async")
    drafts = metric(got["metrics"], "vllm:spec_decode_num_draft_tokens")
    assert drafts > 0, "speculation never ran"
