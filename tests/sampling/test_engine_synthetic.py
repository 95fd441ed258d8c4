"""Synthetic acceptance (vLLM's rejection_sample_method="synthetic" process) in the real
engine, on CPU too (vLLM 0.27.1 asserts there): measured per-position acceptance matches
the configured unconditional rates; heterogeneous groups give different requests different
rates."""

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, run_engine
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]

RATES = [0.8, 0.6, 0.4, 0.2]
# auto_off=False throughout: these measure the acceptance process, so every step drafts.
JOB = [{"prompts": PROMPTS, "sampling": {"temperature": 0.0, "max_tokens": 160,
                                         "ignore_eos": True}}]


def test_synthetic_rates_are_realised():
    got = run_engine(base_engine_kwargs(speculative_config=bass_spec(
        draft_length_policy="fixed", num_speculative_tokens=4, auto_off=False,
        rejection_sample_method="synthetic", synthetic_acceptance_rates=RATES)),
        JOB, metrics=True)
    m = got["metrics"]
    drafts = metric(m, "vllm:spec_decode_num_drafts")
    per_pos = metric(m, "vllm:spec_decode_num_accepted_tokens_per_pos")
    assert drafts > 200
    for pos, (rate, n) in enumerate(zip(RATES, per_pos)):
        se = (rate * (1 - rate) / drafts) ** 0.5
        assert abs(n / drafts - rate) < 5 * se + 1e-9, (pos, n / drafts, rate)


def test_synthetic_length_and_heterogeneous_groups():
    spec = bass_spec(draft_length_policy="fixed", num_speculative_tokens=4, auto_off=False,
                     rejection_sample_method="synthetic",
                     synthetic_acceptance_rate_groups=[[1.0, 1.0, 1.0, 1.0],
                                                       [0.0, 0.0, 0.0, 0.0]],
                     acceptance_mode="synthetic")
    got = run_engine(base_engine_kwargs(speculative_config=spec), JOB, metrics=True)
    m = got["metrics"]
    drafts = metric(m, "vllm:spec_decode_num_drafts")
    accepted = metric(m, "vllm:spec_decode_num_accepted_tokens")
    # every request accepts all 4 or none: the mean is strictly between, never fractional
    # per request; with both groups present the overall rate is neither 0 nor 1
    assert 0 < accepted < 4 * drafts
    per_pos = metric(m, "vllm:spec_decode_num_accepted_tokens_per_pos")
    assert per_pos[0] == per_pos[1] == per_pos[2] == per_pos[3], per_pos


def test_default_group_follows_the_request_id_without_vllms_random_suffix():
    """vLLM 0.27.1 appends "-<8 hex>" to every request id to make it unique; a request that
    does not ask for a group gets it from the id it was given, so the same request lands in
    the same group every run (the heterogeneous test above had a 1-in-128 chance of one
    group only), and LLM.generate's counter ids spread over the groups."""
    from vllm.utils import random_uuid

    from vllm_bass.worker.sampler import default_synthetic_group

    for rid in ("0", "7", "cmpl-abc-3"):
        assert default_synthetic_group(f"{rid}-{random_uuid():.8}", 2) == (
            default_synthetic_group(rid, 2))
    assert {default_synthetic_group(str(i), 2) for i in range(8)} == {0, 1}
    assert {default_synthetic_group(str(i), 3) for i in range(8)} == {0, 1, 2}
