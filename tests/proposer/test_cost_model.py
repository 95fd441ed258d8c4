"""The step-cost estimator recovers a known cost law and falls back to its prior."""

import random

import numpy as np
import pytest

from vllm_bass.proposer.cost_model import StepCostEstimator, batch_bucket
from vllm_bass.proposer.per_request import StepCostModel

pytestmark = [pytest.mark.cpu]


def test_recovers_relative_costs_from_noisy_steps():
    rng = random.Random(0)
    est = StepCostEstimator(prior=StepCostModel(1.0, 0.5, 0.5), forget=0.999)
    a, b, c = 0.010, 0.0012, 0.00003  # seconds: base, per draft step, per verified token
    for _ in range(400):
        batch = rng.choice([13, 16])
        steps = rng.randint(0, 12)
        tokens = batch * rng.randint(0, steps) if steps else 0
        est.observe(batch, steps, tokens, (a + b * steps + c * tokens) * rng.uniform(0.97, 1.03))
    model = est.model_for(16)
    assert model.base == 1.0
    assert model.per_draft_step == pytest.approx(b / a, rel=0.15)
    assert model.per_verify_token == pytest.approx(c / a, rel=0.3)


def test_separates_plain_step_from_draft_pass_with_off_steps():
    """Off-steps skip the draft: with a few of them among the on-steps, the plain step (base)
    is told apart from drafting; with two draft lengths, also the fixed cost of drafting at
    all (draft_pass) from the per-step cost; with one, their sum at that length is right."""
    a, e, b = 0.004, 0.003, 0.002  # plain step, first draft pass, per draft step
    for lengths in ([5], [3, 6]):
        rng = random.Random(1)
        est = StepCostEstimator(forget=0.995)
        for i in range(300):
            k = 0 if i % 12 == 0 else lengths[i % len(lengths)]
            est.observe(8, k, 0, (a + (e + b * k if k else 0.0)) * rng.uniform(0.98, 1.02))
        model = est.model_for(8)
        for k in lengths:
            assert model.time_for(k, 0) == pytest.approx((a + e + k * b) / a, rel=0.05)
        assert model.time_for(0, 0) == 1.0
    assert model.draft_pass == pytest.approx(e / a, rel=0.2)
    assert model.per_draft_step == pytest.approx(b / a, rel=0.2)


def test_off_weight_decays_and_counts_only_off_steps():
    est = StepCostEstimator(forget=0.5)
    est.observe(4, 3, 12, 0.01)
    assert est.off_weight(4) == 0.0 and est.off_weight(64) == 0.0
    est.observe(4, 0, 12, 0.01)
    est.observe(4, 3, 12, 0.01)
    assert est.off_weight(3) == pytest.approx(0.5)


def test_prior_until_enough_samples_and_per_bucket():
    prior = StepCostModel(1.0, 0.2, 0.01)
    est = StepCostEstimator(prior=prior, min_weight=6)
    for _ in range(3):
        est.observe(8, 4, 32, 0.02)
    assert est.model_for(8) is prior
    assert est.model_for(64) is prior
    assert batch_bucket(5) == batch_bucket(8) == 8 and batch_bucket(9) == 16


def test_one_time_stalls_do_not_move_the_model():
    """JIT compiles and lazily captured graphs make a few steps 10-100x slower once."""
    rng = random.Random(2)
    clean, stalled = StepCostEstimator(), StepCostEstimator()
    for i in range(200):
        k = [0, 3, 6][i % 3]
        t = (0.006 + 0.001 * k) * rng.uniform(0.98, 1.02)
        clean.observe(8, k, 0, t)
        stalled.observe(8, k, 0, t * (80 if i in (20, 57, 130) else 1))
    for k in (0, 3, 6):
        assert stalled.model_for(8).time_for(k, 0) == pytest.approx(
            clean.model_for(8).time_for(k, 0), rel=0.02)
    assert stalled.outliers == 3


def test_stalls_among_the_first_steps_do_not_spoil_the_model():
    """Compiles come with the first drafting steps at a new batch size, before any model
    exists: several of the first steps, each the first of its length, are stalls. The fit
    must still match a clean one, and later off-steps must count (an incremental rule let
    such a start reject every later off-step as a stall)."""
    rng = random.Random(4)
    clean, stalled = StepCostEstimator(), StepCostEstimator()
    seen = set()
    for i in range(120):
        k = [7, 5, 0, 3, 0, 6, 0, 2][i % 8] if i < 40 else [0, 0, 0, 1][i % 4]
        t = (0.008 + (0.0016 + 0.0022 * k if k else 0.0)) * rng.uniform(0.98, 1.02)
        clean.observe(1, k, k, t)
        stall = 0.8 if k and k not in seen else 0.0  # 100 plain steps, once per length
        seen.add(k)
        stalled.observe(1, k, k, t + stall)
        if i in (10, 39, 119):  # solves during the run, as the scheduler asks each step
            # at step 10 only lengths 0, 5 and 7 were seen twice (the first of each: a stall)
            for k_ in (0, 5, 7) if i == 10 else (0, 1, 3, 7):
                assert stalled.model_for(1).time_for(k_, k_) == pytest.approx(
                    clean.model_for(1).time_for(k_, k_), rel=0.05), (i, k_)


def test_a_shape_that_stays_slow_is_a_cost_not_a_stall():
    """On a launch-bound pair a draft step costs as much as a plain step: a 7-token draft
    step is ~9x an off-step, far above the prior's shape (0.12 per draft step). Repeated,
    it is the cost, and the model must say so."""
    est = StepCostEstimator()
    for i in range(80):
        k = 7 if i % 2 else 0
        est.observe(8, k, 8 * k, 0.002 * (1 + (1 + k) if k else 1))
    model = est.model_for(8)
    assert model.time_for(7, 56) == pytest.approx(9.0, rel=0.05)
    assert est.outliers == 0
