"""Lossless greedy: BASS output is token-identical to the same vLLM engine without
speculation, for batch sizes 1, 3 and 8 with different prompt lengths, for every draft-length
policy, under KV-cache pressure that preempts sequences carrying drafts, and with auto-off
switching speculation off (a draft that is never accepted).
Runs the real vLLM engine (CPU in CI; the same body on the GPU host)."""

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, run_engine
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]

BATCHES = {1: PROMPTS[:1], 3: PROMPTS[1:4], 8: PROMPTS}
GREEDY = {"temperature": 0.0, "max_tokens": 40, "ignore_eos": True}
# The last job runs long enough that 8 sequences outgrow a tiny KV cache (preemption test).
LONG = {"temperature": 0.0, "max_tokens": 150, "ignore_eos": True}
JOBS = [{"prompts": prompts, "sampling": GREEDY} for prompts in BATCHES.values()] + [
    {"prompts": PROMPTS, "sampling": LONG}]


@pytest.fixture(scope="module")
def baseline():
    return run_engine(base_engine_kwargs(), JOBS)


def _assert_same(baseline, got, label):
    labels = [f"batch {b}" for b in BATCHES] + ["batch 8, long"]
    for batch, want, have in zip(labels, baseline["results"], got["results"]):
        for i, (w, h) in enumerate(zip(want["token_ids"], have["token_ids"])):
            assert h == w, f"{label}: {batch}, prompt {i} differs from non-speculative greedy"


@pytest.mark.parametrize("policy,k", [("fixed", 4), ("bass", 8), ("per_request", 8)])
def test_greedy_identical_to_target(baseline, policy, k):
    got = run_engine(base_engine_kwargs(speculative_config=bass_spec(
        draft_length_policy=policy, num_speculative_tokens=k)), JOBS, metrics=True)
    _assert_same(baseline, got, policy)
    drafts = metric(got["metrics"], "vllm:spec_decode_num_draft_tokens")
    accepted = metric(got["metrics"], "vllm:spec_decode_num_accepted_tokens")
    assert drafts > 0, "speculation never ran"
    assert 0 < accepted < drafts, "expected partial acceptance (a genuine, imperfect draft)"


def test_greedy_identical_under_preemption(baseline):
    """A KV cache far too small for 8 long sequences forces preemption of drafted ones:
    8 x (prompt + 150 + lookahead) tokens need ~16 blocks of 128, the cache has 6."""
    got = run_engine(base_engine_kwargs(num_gpu_blocks_override=6, block_size=128, max_model_len=512,
                                        speculative_config=bass_spec(num_speculative_tokens=6)),
                     JOBS, metrics=True)
    _assert_same(baseline, got, "preemption")
    assert metric(got["metrics"], "vllm:num_preemptions") > 0, "the test did not preempt"


def test_greedy_identical_with_auto_off(baseline):
    """Synthetic acceptance 0: drafting never pays, so the default `bass` policy's auto-off
    stops it for the whole batch, probing now and then; the output is still the target's."""
    got = run_engine(base_engine_kwargs(speculative_config=bass_spec(
        num_speculative_tokens=8, rejection_sample_method="synthetic",
        synthetic_acceptance_rates=[0.0])), JOBS, metrics=True)
    _assert_same(baseline, got, "auto-off")
    m = got["metrics"]
    on = metric(m, "vllm:bass_steps", speculation="on")
    off = metric(m, "vllm:bass_steps", speculation="off")
    assert metric(m, "vllm:spec_decode_num_accepted_tokens") == 0
    # on: each job's first steps (the 0.6 prior) and the probes; everything else is off
    assert on > 0, "speculation never ran (it starts on and probes)"
    assert off > 2 * on, f"auto-off did not stop drafting that never pays: on {on}, off {off}"
    assert metric(m, "vllm:bass_sequence_steps", speculation="off") > 0


def test_draft_catches_up_after_skipped_off_steps(baseline, monkeypatch):
    """Off-steps run no draft pass; the next drafting step must rebuild the draft's KV for
    the skipped positions. With the target as its own draft, greedy drafts are accepted
    only if the draft saw exactly the target's context, so acceptance stays ~100% across
    a fixed schedule of 2 drafting steps and 5 skipped ones (stale KV would reject)."""
    monkeypatch.setenv("VLLM_BASS_TEST_OFF_CYCLE", "2,5")
    from tests.harness import TARGET

    got = run_engine(base_engine_kwargs(speculative_config=bass_spec(
        model=TARGET, draft_length_policy="fixed", num_speculative_tokens=3, auto_off=False)),
        JOBS, metrics=True)
    _assert_same(baseline, got, "catch-up")
    m = got["metrics"]
    drafts = metric(m, "vllm:spec_decode_num_draft_tokens")
    accepted = metric(m, "vllm:spec_decode_num_accepted_tokens")
    assert metric(m, "vllm:bass_steps", speculation="off") > metric(
        m, "vllm:bass_steps", speculation="on") > 0, "the off-cycle did not run"
    assert drafts > 100 and accepted >= 0.97 * drafts, (
        f"self-draft acceptance {accepted}/{drafts} after catch-up: draft KV is stale")
