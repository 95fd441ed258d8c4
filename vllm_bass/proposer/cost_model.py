"""Measured step costs for the draft-length policies.

The scheduler (one process, so every tensor-parallel rank gets the same numbers) times each
engine step of pure decoding and fits, per batch-size bucket, the wall time
    T ~ a + b * draft_steps + c * verify_tokens
(a: target pass + draft catch-up pass + overheads; b: one autoregressive draft step of the
batch; c: one more verified token) by exponentially weighted least squares, shrunk toward a
prior shape so few or collinear samples still give a sane model. The runner's policy gets the
relative model (a = 1) through the scheduler output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class StepCostModel:
    """Relative step costs (units of one plain decode step of the whole batch)."""

    base: float = 1.0            # target forward + draft catch-up pass + overheads
    per_draft_step: float = 0.15  # one more autoregressive draft step over the batch
    per_verify_token: float = 0.01  # one more token per sequence in the verify pass

    def step_time(self, lengths: list[int]) -> float:
        if not lengths:
            return self.base
        return (self.base + self.per_draft_step * max(lengths)
                + self.per_verify_token * sum(lengths))


def batch_bucket(batch: int) -> int:
    """Powers of two: step costs change smoothly with the batch size."""
    return 1 << max(0, math.ceil(math.log2(max(1, batch))))


@dataclass
class _Fit:
    xtx: np.ndarray
    xty: np.ndarray
    weight: float = 0.0
    mean_time: float = 0.0


class StepCostEstimator:
    def __init__(self, prior: StepCostModel | None = None, forget: float = 0.98,
                 prior_strength: float = 4.0, min_weight: float = 6.0):
        self.prior = prior or StepCostModel()
        self.forget = forget
        self.prior_strength = prior_strength
        self.min_weight = min_weight
        self.fits: dict[int, _Fit] = {}

    def observe(self, batch: int, draft_steps: int, verify_tokens: int, seconds: float) -> None:
        if batch <= 0 or seconds <= 0 or not math.isfinite(seconds):
            return
        fit = self.fits.setdefault(batch_bucket(batch), _Fit(np.zeros((3, 3)), np.zeros(3)))
        x = np.array([1.0, float(draft_steps), float(verify_tokens)])
        fit.xtx = self.forget * fit.xtx + np.outer(x, x)
        fit.xty = self.forget * fit.xty + x * seconds
        fit.mean_time = (fit.mean_time * fit.weight * self.forget + seconds) / (
            fit.weight * self.forget + 1.0)
        fit.weight = fit.weight * self.forget + 1.0

    def model_for(self, batch: int) -> StepCostModel:
        """Relative costs for this batch size; the prior until enough steps were seen."""
        fit = self.fits.get(batch_bucket(batch))
        if fit is None or fit.weight < self.min_weight:
            return self.prior
        scale = fit.mean_time
        theta0 = scale * np.array([self.prior.base, self.prior.per_draft_step,
                                   self.prior.per_verify_token])
        ridge = self.prior_strength * np.diag([1.0, 1.0, 1.0])
        theta = np.linalg.solve(fit.xtx + ridge, fit.xty + ridge @ theta0)
        a = theta[0]
        if not a > 0:
            return self.prior
        return StepCostModel(base=1.0, per_draft_step=max(float(theta[1] / a), 1e-4),
                             per_verify_token=max(float(theta[2] / a), 0.0))
