"""Per-request draft lengths in one ragged batch.

Each sequence keeps an EMA estimate of its draft's per-token acceptance probability alpha
(a geometric acceptance model: P(first j drafts accepted) = alpha^j). The expected gain of
the j-th draft token is alpha^j accepted tokens, its cost is one more verified token for
that sequence plus, if it lengthens the longest draft, one more draft step for the batch.
The plan maximises expected accepted tokens per unit of step time under the cost model
T = base + per_draft_step * max_i(l_i) + per_verify_token * sum_i(l_i), solved exactly for
the ragged lengths by Dinkelbach iteration (a few passes over batch x K).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vllm_bass.proposer.policies import DraftLengthPolicy, DraftPlan, Verified


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


class PerRequestDraftLength(DraftLengthPolicy):
    name = "per_request"

    def __init__(self, bass_config, cost: StepCostModel | None = None,
                 prior_alpha: float = 0.6, prior_weight: float = 2.0):
        self.k_max = bass_config.num_speculative_tokens
        self.ema = float(bass_config.acceptance_ema)
        self.cost = cost or StepCostModel()
        self.prior_alpha = prior_alpha
        self.prior_weight = prior_weight
        # auto_off=False keeps every sequence drafting at least one token
        self.min_length = 0 if bass_config.auto_off else 1
        # per request: EMA of accepted tokens and of rejections (the geometric stop events)
        self.successes: dict[str, float] = {}
        self.failures: dict[str, float] = {}

    def alpha(self, req_id: str) -> float:
        s = self.successes.get(req_id, 0.0)
        f = self.failures.get(req_id, 0.0)
        w = self.prior_weight
        return (s + w * self.prior_alpha) / (s + f + w)

    def observe(self, verified: list[Verified]) -> None:
        b = self.ema
        for v in verified:
            s = self.successes.get(v.req_id, 0.0)
            f = self.failures.get(v.req_id, 0.0)
            # exponentially decayed sums (window ~1/ema steps), so the prior fades with evidence
            self.successes[v.req_id] = (1 - b) * s + v.num_accepted
            self.failures[v.req_id] = (1 - b) * f + (1.0 if v.num_accepted < v.num_draft else 0.0)

    def forget(self, req_id: str) -> None:
        self.successes.pop(req_id, None)
        self.failures.pop(req_id, None)

    def best_lengths(self, alphas: list[float]) -> list[int]:
        """argmax over ragged lengths of (sum_i 1 + E_i(l_i)) / T(l) (Dinkelbach on lambda).

        For a fixed cap on the longest draft and a rate lambda, sequence i takes every draft
        position j <= cap whose expected gain alpha_i^j beats its verify cost lambda * c;
        iterating lambda to the achieved rate gives the optimum for that cap, and the best
        cap wins. Vectorised: this runs every engine step."""
        n = len(alphas)
        if n == 0:
            return []
        cost = self.cost
        alpha = np.clip(np.asarray(alphas, dtype=np.float64), 0.0, 1.0)
        gains = alpha[:, None] ** np.arange(1, self.k_max + 1)[None, :]  # P(j drafts accepted)
        expected = np.concatenate([np.zeros((n, 1)), np.cumsum(gains, axis=1)], axis=1)
        rows = np.arange(n)
        best_lengths = np.zeros(n, dtype=np.int64)
        best_rate = n / cost.step_time([0] * n)
        for cap in range(1, self.k_max + 1):
            rate = best_rate
            for _ in range(8):
                lengths = (gains[:, :cap] > rate * cost.per_verify_token).sum(axis=1)
                total = n + expected[rows, lengths].sum()
                longest = int(lengths.max())
                new_rate = total / (cost.base + cost.per_draft_step * longest
                                    + cost.per_verify_token * int(lengths.sum()))
                if abs(new_rate - rate) < 1e-12:
                    break
                rate = new_rate
            if rate > best_rate + 1e-12:
                best_rate, best_lengths = rate, lengths
        return [int(x) for x in best_lengths]

    probe_interval = 16  # steps with speculation off before one probing step of length 1

    def plan(self, req_ids: list[str]) -> DraftPlan:
        lengths = [max(self.min_length, n) for n in
                   self.best_lengths([self.alpha(r) for r in req_ids])]
        if req_ids and not any(lengths):
            self.steps_off = getattr(self, "steps_off", 0) + 1
            if self.steps_off >= self.probe_interval:  # re-measure acceptance now and then
                self.steps_off = 0
                lengths = [1] * len(req_ids)
        per_request = dict(zip(req_ids, lengths))
        return DraftPlan(max(lengths, default=0), per_request)
