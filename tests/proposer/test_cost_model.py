"""The step-cost estimator recovers a known cost law and falls back to its prior."""

import random

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


def test_prior_until_enough_samples_and_per_bucket():
    prior = StepCostModel(1.0, 0.2, 0.01)
    est = StepCostEstimator(prior=prior, min_weight=6)
    for _ in range(3):
        est.observe(8, 4, 32, 0.02)
    assert est.model_for(8) is prior
    assert est.model_for(64) is prior
    assert batch_bucket(5) == batch_bucket(8) == 8 and batch_bucket(9) == 16
