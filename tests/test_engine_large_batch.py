"""Large batches under CUDA graphs (GPU host only): 128 sequences each verifying 3 drafts
make a 512-token verification and a 640-token first pass of the draft, past vLLM's default
largest graph (512), where BASS's own capture sizes (here up to 768) replay graphs. Greedy output must still equal the plain engine's
(float32: no bf16 near-ties between batched and one-token numerics), under sync and async
scheduling."""

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, run_engine
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

BATCH = 128
# prompts of many lengths: the first k characters of each prompt, k varying
PROMPT_SET = [p[: max(4, len(p) - (i * 7) % max(1, len(p) - 4))]
              for i, p in enumerate(PROMPTS * (BATCH // len(PROMPTS)))][:BATCH]
JOBS = [{"prompts": PROMPT_SET,
         "sampling": {"temperature": 0.0, "max_tokens": 48, "ignore_eos": True}}]


def _engine(**overrides):
    return base_engine_kwargs(enforce_eager=False, max_num_seqs=BATCH, max_model_len=2048,
                              **overrides)


@pytest.fixture(scope="module")
def baseline():
    return run_engine(_engine(), JOBS)


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_large_batch_greedy_identical_under_graphs(baseline, async_scheduling):
    # fixed K=6 without auto-off, cut to the budget (4 tokens a request at batch 128): 512
    # verified tokens a step and 640 in the draft's first pass, whatever the timing
    got = run_engine(_engine(async_scheduling=async_scheduling, speculative_config=bass_spec(
        draft_length_policy="fixed", num_speculative_tokens=6, auto_off=False)),
        JOBS, metrics=True)
    want, have = baseline["results"][0]["token_ids"], got["results"][0]["token_ids"]
    assert len(have) == BATCH
    for i, (w, h) in enumerate(zip(want, have)):
        assert h == w, f"prompt {i} differs from non-speculative greedy"
    drafts = metric(got["metrics"], "vllm:spec_decode_num_draft_tokens")
    steps = metric(got["metrics"], "vllm:spec_decode_num_drafts")
    assert steps > 0 and drafts / steps > 2.5, "the batch did not verify ~3 drafts a request"
    print(f"drafted {drafts} tokens in {steps} drafts "
          f"({drafts / steps:.2f} per request and step)")
