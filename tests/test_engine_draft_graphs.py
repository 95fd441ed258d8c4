"""The drafter's one-token steps through `DraftStepGraphs` (captured CUDA graphs on the GPU
host, the same step eagerly on CPU): with the target as its own draft, greedy drafts are
accepted only if every draft step saw exactly the target's context, so stale inputs, a
wrong KV slot, a padding row leaking into a real one or a graph replayed over the wrong
batch would show as rejected drafts. Batches 1, 3 (padded to a captured 4) and 8, and a
long job. Greedy output must equal the plain engine's either way."""

import pytest

from tests.harness import TARGET, base_engine_kwargs, bass_spec, metric, on_gpu, run_engine
from tests.test_engine_greedy import JOBS, _assert_same

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]

# graphs on the GPU host (no enforce_eager); float32 keeps the plain and speculative
# engines' greedy choices comparable
GRAPHS = {"enforce_eager": not on_gpu()}


@pytest.fixture(scope="module")
def graph_baseline():
    return run_engine(base_engine_kwargs(**GRAPHS), JOBS)


@pytest.mark.parametrize("k", [1, 4, 7])
def test_self_draft_accepted_through_draft_graphs(graph_baseline, k):
    """The first pass (`first_pass_graphs`) and, for K > 1, the one-token steps."""
    got = run_engine(base_engine_kwargs(**GRAPHS, speculative_config=bass_spec(
        model=TARGET, draft_length_policy="fixed", num_speculative_tokens=k,
        auto_off=False)), JOBS, metrics=True,
        worker_rpc=["bass_draft_graph_stats", "bass_measured_draft_steps"],
        env={"VLLM_BASS_MEASURED_DRAFT_STEP": "1"})
    _assert_same(graph_baseline, got, f"draft graphs, K={k}")
    m = got["metrics"]
    drafts = metric(m, "vllm:spec_decode_num_draft_tokens")
    accepted = metric(m, "vllm:spec_decode_num_accepted_tokens")
    assert drafts > 100 * min(k, 2) and accepted >= 0.97 * drafts, (
        f"self-draft acceptance {accepted}/{drafts}: a draft pass read the wrong inputs")
    (stats,) = got["worker_rpc"]["bass_draft_graph_stats"]
    print("first passes:", stats)
    ran = stats["replays"] if on_gpu() else stats["eager"]
    # prefill chunks longer than the graphs' bound take vLLM's pass on the GPU
    assert ran >= 10 and ran > 2 * stats["fallbacks"], (
        f"first passes did not run ours: {stats}")
    # with VLLM_BASS_MEASURED_DRAFT_STEP=1 each captured step graph was timed at start-up
    # (the policy's measured draft step); eager engines (CPU) have none to time
    (measured,) = got["worker_rpc"]["bass_measured_draft_steps"]
    print("draft step us:", {rows: round(t * 1e6, 1) for rows, t in measured.items()})
    if on_gpu():
        assert measured and all(0 < t < 0.01 for t in measured.values()), measured
    else:
        assert measured == {}, measured


def test_greedy_identical_with_graphs_and_default_policy(graph_baseline):
    """The user's defaults (per_request; async scheduling on CUDA) over the real draft."""
    got = run_engine(base_engine_kwargs(**GRAPHS, speculative_config=bass_spec()), JOBS,
                     metrics=True)
    _assert_same(graph_baseline, got, "defaults, draft step graphs")
    assert metric(got["metrics"], "vllm:spec_decode_num_draft_tokens") > 0

