"""Measured step costs for the draft-length policies.

The scheduler (one process, so every tensor-parallel rank gets the same numbers) times each
engine step of pure decoding and fits, per batch-size bucket, the wall time
    T ~ a + e * drafted + b * draft_steps + c * verify_tokens
(a: a plain decode step -- what an off-step costs, since off-steps skip the draft model;
e: the draft's first pass over the step's new tokens, paid only when it drafts; b: one
autoregressive draft step of the batch; c: one more verified token) by exponentially weighted
least squares, shrunk toward a prior shape so few or collinear samples still give a sane
model. With speculation always on, `a` and `e` are not separable: the estimator reports how
much off-step evidence it holds (`off_weight`) so auto-off can take an occasional off-step to
measure plain decoding. The policy (in the scheduler too) plans with the relative model
(a = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class StepCostModel:
    """Relative step costs (units of one plain decode step of the whole batch)."""

    base: float = 1.0            # a plain decode step: target forward + overheads
    per_draft_step: float = 0.15  # one more autoregressive draft step over the batch
    per_verify_token: float = 0.01  # one more token per sequence in the verify pass
    draft_pass: float = 0.0      # fixed cost of drafting at all (first pass, sampling setup)

    def step_time(self, lengths: list[int]) -> float:
        if not lengths:
            return self.base
        return self.time_for(max(lengths), sum(lengths))

    def time_for(self, longest: int, total: int) -> float:
        """Step time when the longest draft is `longest` tokens and `total` are verified."""
        if longest <= 0:
            return self.base + self.per_verify_token * total
        return (self.base + self.draft_pass + self.per_draft_step * longest
                + self.per_verify_token * total)


RESOLVE_EVERY = 8  # observations between two solves of a bucket's costs
OUTLIER_FACTOR = 4.0  # a step this many times its predicted time is a stall, not a cost
PRIOR_COSTS = StepCostModel(base=1.0, per_draft_step=0.12, per_verify_token=0.01,
                            draft_pass=0.05)


def batch_bucket(batch: int) -> int:
    """Powers of two: step costs change smoothly with the batch size."""
    return 1 << max(0, math.ceil(math.log2(max(1, batch))))


@dataclass
class _Fit:
    xtx: np.ndarray
    xty: np.ndarray
    weight: float = 0.0
    mean_time: float = 0.0
    off_weight: float = 0.0  # decayed count of steps that did not draft
    theta: np.ndarray | None = None  # the solved costs
    # observations since theta was solved, not yet folded into xtx / xty: (x, seconds),
    # folded in one numpy operation before a solve (per-step matrix updates cost ~0.05 ms)
    pending: list = field(default_factory=list)

    def fold(self, forget: float) -> None:
        if not self.pending:
            return
        xs = np.array([x for x, _ in self.pending])
        ys = np.array([y for _, y in self.pending])
        m = len(ys)
        w = forget ** np.arange(m - 1, -1, -1)  # the later, the less forgotten
        self.xtx = forget ** m * self.xtx + (xs * w[:, None]).T @ xs
        self.xty = forget ** m * self.xty + (xs * (w * ys)[:, None]).sum(axis=0)
        self.pending.clear()


class StepCostEstimator:
    def __init__(self, prior: StepCostModel | None = None, forget: float = 0.98,
                 prior_strength: float = 0.1, min_weight: float = 6.0):
        self.prior = prior or PRIOR_COSTS
        self.forget = forget
        self.prior_strength = prior_strength
        self.min_weight = min_weight
        self.fits: dict[int, _Fit] = {}
        self.outliers = 0  # steps left out as one-time stalls

    def observe(self, batch: int, draft_steps: int, verify_tokens: int, seconds: float) -> None:
        if batch <= 0 or seconds <= 0 or not math.isfinite(seconds):
            return
        fit = self.fits.setdefault(batch_bucket(batch), _Fit(np.zeros((4, 4)), np.zeros(4)))
        drafted = 1.0 if draft_steps > 0 else 0.0
        x = (1.0, drafted, float(draft_steps), float(verify_tokens))
        if fit.weight >= self.min_weight:
            # one-time stalls (a kernel JIT-compiled for a new shape, a lazily captured graph,
            # a GC pause) are not step costs: a step far above the model is left out
            theta = self._theta(fit)
            predicted = (theta[0] + theta[1] * x[1] + theta[2] * x[2] + theta[3] * x[3])
            if predicted > 0 and seconds > OUTLIER_FACTOR * predicted:
                self.outliers += 1
                return
        fit.off_weight = fit.off_weight * self.forget + (1.0 - drafted)
        fit.pending.append((x, seconds))
        fit.mean_time = (fit.mean_time * fit.weight * self.forget + seconds) / (
            fit.weight * self.forget + 1.0)
        fit.weight = fit.weight * self.forget + 1.0

    def model_for(self, batch: int) -> StepCostModel:
        """Relative costs for this batch size; the prior until enough steps were seen."""
        fit = self.fits.get(batch_bucket(batch))
        if fit is None or fit.weight < self.min_weight:
            return self.prior
        theta = self._theta(fit)
        a = theta[0]
        if not a > 0:
            return self.prior
        return StepCostModel(base=1.0, per_draft_step=max(float(theta[2] / a), 1e-4),
                             per_verify_token=max(float(theta[3] / a), 0.0),
                             draft_pass=max(float(theta[1] / a), 0.0))

    def _theta(self, fit: _Fit) -> np.ndarray:
        """Absolute costs (seconds) [base, draft_pass, per_draft_step, per_verify_token].
        Re-solved after every RESOLVE_EVERY observations (and until min_weight is reached),
        not every step: the scheduler asks every step, a solve costs ~0.1 ms of host time
        per step, and the costs move slowly (forgetting factor 0.98, ~50 steps)."""
        unsolved = len(fit.pending)
        if (fit.theta is None or unsolved >= RESOLVE_EVERY
                or (unsolved and fit.weight < 2 * self.min_weight)):
            fit.fold(self.forget)
            fit.theta = self._solve(fit)
        return fit.theta

    def _solve(self, fit: _Fit) -> np.ndarray:
        p = self.prior
        shape = np.array([p.base, p.draft_pass, p.per_draft_step, p.per_verify_token])
        mean_x = fit.xtx[0] / fit.xtx[0, 0]
        theta0 = shape * (fit.mean_time / float(shape @ mean_x))  # prior, scaled to the data
        ridge = self.prior_strength * np.eye(4)
        return np.linalg.solve(fit.xtx + ridge, fit.xty + ridge @ theta0)

    def off_weight(self, batch: int) -> float:
        """Decayed number of measured steps without drafting in this batch size's bucket."""
        fit = self.fits.get(batch_bucket(batch))
        return 0.0 if fit is None else fit.off_weight
