"""The draft step graphs on FA3 (GPU host only): bfloat16 and `attention: vllm` put target
and draft on FA3 (vLLM's choice, which the benchmarks' vLLM engines use), where synthetic
acceptance would hide a wrong draft step."""

import pytest

from tests.harness import TARGET, base_engine_kwargs, bass_spec, metric, run_engine
from tests.test_engine_greedy import JOBS

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_self_draft_accepted_through_draft_step_graphs_on_fa3():
    """The target as its own draft; batched and one-token bf16 numerics may flip a near-tie,
    hence 0.9 (a stale or wrong draft input rejects most drafts)."""
    got = run_engine(base_engine_kwargs(enforce_eager=False, dtype="bfloat16",
                                        speculative_config=bass_spec(
        model=TARGET, draft_length_policy="fixed", num_speculative_tokens=6,
        auto_off=False, attention="vllm")), JOBS, metrics=True)
    m = got["metrics"]
    drafts = metric(m, "vllm:spec_decode_num_draft_tokens")
    accepted = metric(m, "vllm:spec_decode_num_accepted_tokens")
    assert drafts > 200 and accepted >= 0.9 * drafts, f"FA3 self-draft {accepted}/{drafts}"
