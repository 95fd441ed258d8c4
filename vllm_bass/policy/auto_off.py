"""Auto-off: stop drafting when speculation is predicted to be slower than plain decoding.

Speculation pays only while the accepted tokens outweigh the draft steps and the longer verify
pass; with large batches (verification no longer nearly free) or a poorly matching draft it
makes every step slower. The pieces here are shared by every draft-length policy:
  * `AcceptanceEstimates`: each sequence's per-token acceptance probability alpha under a
    geometric model (P(first j drafts accepted) = alpha^j), as exponentially decayed counts
    of accepted tokens and rejections, starting from a prior;
  * `ProbeSchedule`: while speculation is off nothing is verified, so estimates cannot
    improve; every `interval`-th consecutive off-step is a probing step that drafts again.
    The other way round, while speculation stays on, the cost of a plain step is not
    measured; when the scheduler reports too little off-step evidence for this batch size,
    one on-step in `measure_interval` is taken off to measure it, unless the plan is
    predicted far enough ahead of plain decoding (CONFIDENT_SPEEDUP) that the measurement
    could not turn speculation off;
  * `AutoOff`: wraps a batch-length policy (`bass`, `fixed`) and switches the whole batch off
    when the inner plan's expected token rate is below plain decoding's.
`per_request` builds auto-off into its own optimisation (lengths of 0) and uses the first two.
"""

from __future__ import annotations

import numpy as np

from vllm_bass.policy.cost_model import PRIOR_COSTS, StepCostModel
from vllm_bass.policy.policies import DraftLengthPolicy, DraftPlan, Verified

PROBE_INTERVAL = 16  # consecutive off-steps before one probing step
MAX_PROBE_INTERVAL = 256  # after failed probes the interval doubles up to this
MEASURE_OFF_INTERVAL = 8  # consecutive on-steps before one measuring off-step, when needed
# Predicted speedup over plain decoding above which no off-step is taken to measure plain
# decoding: without off-steps the fit splits a drafting step's fixed cost between the plain
# step and the draft's first pass by the prior's shape, an error of ~10-15% of a plain step
# on the H100 traces, which cannot turn a plan predicted 1.2x faster into a slower one. An
# off-step at alpha 0.8 gives up ~3.5 tokens per sequence: measuring every ~40 steps cost
# 5-11% of the steps (session 9, H100, batch 8-32). Session 21: 1.3 (session 9's value)
# still measured at alpha 0.4-0.6, where a plan is predicted 1.2-1.3x; in closed-batch
# simulation of the H100 step law (`benchmarks/e2e/sim_policy_ab.py`, 35 settings) 1.2
# gained 0.4% on average, -1.4% (the mix, batch 8) to +4.3% (alpha 0.6, batch 8), and
# changed nothing where the prediction is below 1.2 (alpha 0.3 and 0.4 from batch 32).
# per_request reads it through this module (one value for every policy).
CONFIDENT_SPEEDUP = 1.2


class AcceptanceEstimates:
    """Per-request alpha = s / (s + f), s and f exponentially decayed sums (window ~1/ema
    steps) of accepted tokens and of rejections. The prior is their starting value (`weight`
    pseudo-observations of rate `pool_alpha`) and decays like the data: a prior of fixed
    weight would floor alpha at w * prior / (w + 1/ema) (0.17 by default), which makes a
    draft that is never accepted look worth drafting one token for at small batches.

    The prior of a new request is the pooled acceptance of the requests seen so far (decayed
    totals over all verifications, window ~1/POOL_EMA steps; `prior_alpha` before any):
    requests of one engine share the draft and target, so the pool predicts a new request
    far better than a constant. With a constant 0.6, every new request of the 7B-shape pair's
    measured costs (alpha 0.8; drafting pays above ~0.7) started switched off and waited for
    one-token probes; in closed-loop simulation with 128-token requests at batch 1 (sync)
    that cost `bass` 1.33x -> 1.26x plain and `fixed` 1.14x -> 1.11x
    (benchmarks/results/sim_auto_off.md)."""

    POOL_EMA = 0.05  # per step of observations
    # Shrinkage toward the pool (empirical Bayes, a beta prior fitted by moments): a window
    # of ~1/ema steps holds few observations, so raw estimates scatter widely (H100, alpha
    # 0.8 for every request: q10-q90 0.52-0.92), and the plan then gave long drafts to the
    # lucky and none to the unlucky, who finished last: a closed batch of 128 ran 60 steps
    # where 43 carry its tokens. The prior's weight m (pseudo-observations that do not
    # decay) follows from how much the raw estimates scatter beyond their sampling noise:
    # requests that truly differ (a mix of 0.9 and 0.3; a perfect draft beside a useless
    # one) are shrunk little, requests that are alike a lot (up to MAX_SHRINK_WEIGHT).
    # Closed-batch simulation of the H100 step costs (`benchmarks/e2e/sim_closed_batch.py`,
    # per_request): see docs/history.md, session 10.
    MAX_SHRINK_WEIGHT = 16.0

    def __init__(self, ema: float, prior_alpha: float = 0.6, prior_weight: float = 2.0):
        self.ema = float(ema)
        self.prior_alpha = prior_alpha
        self.prior_weight = prior_weight
        self.successes: dict[str, float] = {}
        self.failures: dict[str, float] = {}
        # the pool starts from the prior's pseudo-observations, decaying like the data:
        # an empty pool read 0 after one rejected draft, and a request alone (which leans
        # on it) then sat switched off waiting for probes
        self.pool_successes = prior_weight * prior_alpha
        self.pool_failures = prior_weight * (1.0 - prior_alpha)
        self.version = 0  # changes whenever an estimate does (plans cache on it)
        self.shrink_weight = 0.0  # m, refitted at each observation ...
        self.shrink_mean = prior_alpha  # ... toward the tracked requests' pooled alpha

    @property
    def pool_alpha(self) -> float:
        """The prior of requests not observed yet."""
        n = self.pool_successes + self.pool_failures
        return self.pool_successes / n if n > 0 else self.prior_alpha

    def alpha(self, req_id: str) -> float:
        s = self.successes.get(req_id)
        if s is None:
            return self.pool_alpha
        m = self.shrink_weight
        return (s + m * self.shrink_mean) / (s + self.failures[req_id] + m)

    def observe(self, verified: list[Verified]) -> None:
        b, w = self.ema, self.prior_weight
        if not verified:
            return
        self.version += 1
        prior = self.pool_alpha
        step_s = step_f = 0.0
        for v in verified:
            rejected = 1.0 if v.num_accepted < v.num_draft else 0.0
            s = self.successes.get(v.req_id, w * prior)
            f = self.failures.get(v.req_id, w * (1.0 - prior))
            self.successes[v.req_id] = (1 - b) * s + v.num_accepted
            self.failures[v.req_id] = (1 - b) * f + rejected
            step_s += v.num_accepted
            step_f += rejected
        keep = 1.0 - self.POOL_EMA
        self.pool_successes = keep * self.pool_successes + step_s
        self.pool_failures = keep * self.pool_failures + step_f
        self.shrink_weight = self._fit_shrink()

    def _fit_shrink(self) -> float:
        """Beta-binomial method of moments over the tracked requests: the between-request
        variance tau^2 = Var(raw alpha) - mean sampling variance; prior strength m = mu
        (1 - mu) / tau^2 - 1, capped, toward mu, the tracked requests' pooled alpha (not the
        slow pool of new requests' prior: when every request's draft turns good at once,
        that lagged, and speculation resumed after 7 probes instead of 3). Sampling variance
        alpha (1 - alpha) / n_eff, with n_eff = (s + f)(2 - ema) (exponential weights hold
        (2 - ema) / ema effective observations per ~1 / ema of weight).

        A request alone has no scatter to fit; it leans (MAX_SHRINK_WEIGHT) on the pool,
        which at batch 1 is its own and its predecessors' longer-window history. Its ~5-step
        window alone was too noisy at low acceptance: at alpha 0.3 with one-token drafts the
        estimate's 10th percentile was 0.07 (0.17 pooled), below what one draft token needs,
        so it switched off and waited for probes (H100, session 16: 47% off-steps at batch
        1, 0.93x vLLM K=1, while BASS fixed K=1 made 1.11x)."""
        if len(self.successes) == 1:
            self.shrink_mean = self.pool_alpha
            return self.MAX_SHRINK_WEIGHT
        if len(self.successes) < 2:
            return 0.0
        s = np.fromiter(self.successes.values(), dtype=np.float64)
        f = np.fromiter(self.failures.values(), dtype=np.float64)
        n = s + f
        raw = s / n
        mean = self.shrink_mean = float(s.sum() / n.sum())
        noise = float(np.mean(raw * (1.0 - raw) / (n * (2.0 - self.ema))))
        between = float(np.var(raw)) - noise
        spread = mean * (1.0 - mean)
        if between <= spread / (self.MAX_SHRINK_WEIGHT + 1.0):
            return self.MAX_SHRINK_WEIGHT
        return max(0.0, spread / between - 1.0)

    def forget(self, req_id: str) -> None:
        if self.successes.pop(req_id, None) is not None:
            self.version += 1
        self.failures.pop(req_id, None)


class ProbeSchedule:
    """Exploration both ways: every `interval`-th consecutive off-step is a probe that drafts;
    when `need_off_sample` (set each step from the scheduler's cost estimator) says plain
    decoding is not measured for this batch size, every `measure_interval`-th consecutive
    on-step is taken off. A probe costs more than the plain step it replaces (a draft pass,
    the draft's KV catch-up and a verification); a probe whose draft was rejected doubles
    the interval (up to `max_interval`), an accepted one or speculation resuming resets it,
    so a draft that stays useless costs ever less and a recovered one is found quickly."""

    def __init__(self, interval: int = PROBE_INTERVAL,
                 measure_interval: int = MEASURE_OFF_INTERVAL,
                 max_interval: int = MAX_PROBE_INTERVAL):
        self.base_interval = self.interval = interval
        self.max_interval = max_interval
        self.measure_interval = measure_interval
        self.steps_off = 0
        self.steps_on = 0
        self.need_off_sample = False

    def measure_off_due(self, off: bool, confident: bool = False) -> bool:
        """`confident`: the plan is predicted so far ahead of plain decoding that measuring
        plain decoding could not change the decision (CONFIDENT_SPEEDUP). One off-step a
        measurement: under async scheduling the first off-step after drafting ran a draft
        pass until session 43 (it verifies the last drafts), and two were taken in a row."""
        if off:
            self.steps_on = 0
            return False
        self.steps_on += 1
        if self.need_off_sample and not confident and self.steps_on >= self.measure_interval:
            self.steps_on = 0
            self.need_off_sample = False  # one per request from the scheduler
            return True
        return False

    def observe_probe(self, verified: list[Verified]) -> bool:
        """Feed a verification; True when its drafts came from a probe (`Verified.probe`:
        the one-token drafts then set the next interval: all accepted reset it, else
        double)."""
        if not (verified and verified[0].probe):
            return False
        accepted = all(v.num_accepted == v.num_draft for v in verified)
        self.interval = (self.base_interval if accepted
                         else min(2 * self.interval, self.max_interval))
        return True

    def probe_due(self, off: bool) -> bool:
        if not off:
            self.steps_off = 0
            self.interval = self.base_interval
            return False
        self.steps_off += 1
        if self.steps_off >= self.interval:
            self.steps_off = 0
            return True
        return False


def expected_tokens(alpha: float, length: int) -> float:
    """Tokens one sequence emits in a step drafting `length`: 1 + sum_{j<=length} alpha^j."""
    a = min(max(alpha, 0.0), 1.0)
    if length <= 0:
        return 1.0
    if a >= 1.0:
        return 1.0 + length
    return 1.0 + a * (1.0 - a ** length) / (1.0 - a)


def predicted_speedup(cost: StepCostModel, alphas: list[float], lengths: list[int]) -> float:
    """Expected tokens per unit time drafting `lengths` over plain decoding's (n / base)."""
    if not lengths or not any(lengths):
        return 1.0
    tokens = sum(expected_tokens(a, n) for a, n in zip(alphas, lengths))
    return tokens * cost.base / (len(lengths) * cost.step_time(lengths))


class AutoOff(DraftLengthPolicy):
    """Runs `inner`'s plan when it is predicted to beat plain decoding, else drafts nothing.

    With the inner lengths l_i and acceptance estimates alpha_i, speculation emits
    sum_i expected_tokens(alpha_i, l_i) tokens in T(l) (the step cost model, which the scheduler
    replaces from its measurements through `cost`), plain decoding n tokens in
    T(0) = base. The batch goes off when the first rate is below the second; while off, the
    inner policy sees no observations (nothing is verified) and keeps its state, and every
    `probe_interval`-th off-step drafts one token (the cheapest probe; its outcome feeds the
    acceptance estimates only) to re-measure acceptance, so speculation resumes where it
    pays again. When it pays, the inner plan is returned as is.
    `inner.plan` must not change the inner state (true of `bass` and `fixed`): it is asked
    every step, also when its answer is not used.
    """

    def __init__(self, inner: DraftLengthPolicy, bass_config, cost: StepCostModel | None = None):
        self.inner = inner
        self.name, self.stops_at_knee = inner.name, inner.stops_at_knee
        self.k_max = bass_config.num_speculative_tokens
        self.cost = cost or PRIOR_COSTS  # the scheduler replaces it every step
        self.estimates = AcceptanceEstimates(bass_config.acceptance_ema)
        self.probes = ProbeSchedule()

    @property
    def probe_interval(self) -> int:
        return self.probes.interval

    def observe(self, verified: list[Verified]) -> None:
        if not verified:  # an off-step: nothing was drafted
            return
        self.estimates.observe(verified)
        # a probe's one-token draft says nothing about the inner policy's length
        if not self.probes.observe_probe(verified):
            self.inner.observe(verified)

    def forget(self, req_id: str) -> None:
        self.estimates.forget(req_id)
        self.inner.forget(req_id)

    def speedup(self, req_ids: list[str], plan: DraftPlan) -> float:
        """Predicted token rate of `plan` over plain decoding's (1.0 for no drafts)."""
        lengths = [max(0, min(plan.length_for(r), self.k_max)) for r in req_ids]
        return predicted_speedup(self.cost, [self.estimates.alpha(r) for r in req_ids],
                                 lengths)

    def pays(self, req_ids: list[str], plan: DraftPlan) -> bool:
        """Whether `plan` is predicted to emit tokens at least as fast as plain decoding."""
        return self.speedup(req_ids, plan) >= 1.0

    def plan(self, req_ids: list[str]) -> DraftPlan:
        plan = self.inner.plan(req_ids)
        speedup = self.speedup(req_ids, plan) if req_ids else 1.0
        off = bool(req_ids) and speedup < 1.0
        if self.probes.probe_due(off):
            return DraftPlan(1, probe=True)  # the cheapest draft that re-measures acceptance
        if self.probes.measure_off_due(off, speedup >= CONFIDENT_SPEEDUP) or off:
            return DraftPlan(0)
        return plan


TEST_OFF_CYCLE_ENV = "VLLM_BASS_TEST_OFF_CYCLE"


class ForcedOffCycle(DraftLengthPolicy):
    """Test aid, on only when `VLLM_BASS_TEST_OFF_CYCLE="ON,OFF"` is set: `inner`'s plan for
    ON steps, then OFF whole-batch off-steps, repeating, so engine tests can exercise the
    draft skip and its KV catch-up on a fixed schedule instead of a timing-driven one."""

    def __init__(self, inner: DraftLengthPolicy, on_steps: int, off_steps: int):
        if on_steps < 1 or off_steps < 0:
            raise ValueError(f"{TEST_OFF_CYCLE_ENV} must be 'ON,OFF' with ON >= 1, OFF >= 0")
        self.inner, self.name, self.stops_at_knee = inner, inner.name, inner.stops_at_knee
        self.cycle, self.on_steps = on_steps + off_steps, on_steps
        self.step = 0

    def observe(self, verified: list[Verified]) -> None:
        self.inner.observe(verified)

    def forget(self, req_id: str) -> None:
        self.inner.forget(req_id)

    def plan(self, req_ids: list[str]) -> DraftPlan:
        phase, self.step = self.step % self.cycle, self.step + 1
        return self.inner.plan(req_ids) if phase < self.on_steps else DraftPlan(0)


def with_test_off_cycle(policy: DraftLengthPolicy, env: dict) -> DraftLengthPolicy:
    spec = env.get(TEST_OFF_CYCLE_ENV)
    if not spec:
        return policy
    on, off = (int(x) for x in spec.split(","))
    return ForcedOffCycle(policy, on, off)
