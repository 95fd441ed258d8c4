"""Measured step costs for the draft-length policies.

The scheduler (one process, so every tensor-parallel rank gets the same numbers) times each
engine step and fits, per batch-size bucket, the wall time
    T ~ a + r * requests + e * drafted + b * draft_steps + c * verify_tokens
        + d * other_tokens + p * [draft_steps == 1]
(p, only with `one_draft_term` / VLLM_BASS_COST_FIT=one_draft: what a one-draft step costs
over the line through the other lengths, prior 0. Session 40's H200 trace at batch 4 timed
one-draft steps at 6.84 ms against 5.69 for three drafts, and the line alone read that as
dear draft steps; session 41's H200 engines did not show it (batch 4: 5.35-5.94 ms for one
draft, 5.56-5.80 for two or three) and the A/B against the line was mixed (-16% to +5%),
so the line is the default again;
a + r * requests: a plain decode step -- what an off-step costs, since off-steps skip the
draft model; r is each request's own share, mostly its KV-cache read, which with long
contexts is most of the step (0.19 ms a request at 1100 cached tokens on an H100: the 7B
shape's KV of one request over the copy bandwidth), and without it, as a closed batch
drained, the verified tokens (which follow the requests) took the requests' cost: 2.5x a
verified token's and nothing for a draft step (session 30's trace); e:
the draft's first pass over the step's new tokens, paid only when it drafts; b: one
autoregressive draft step of the batch; c: one more verified token; d: one token of a
prefill in the same step, which the plan does not choose but a server's steps mostly
carry: timing pure-decode steps only left the prior's costs in force under continuous
batching, where a request arrives nearly every step) by exponentially
weighted non-negative least squares over the last WINDOW steps, shrunk toward a prior shape
so few or collinear samples still give a sane model. One-time stalls (JIT compiles for a new
shape, lazily captured graphs, GC pauses: 10-100x a step, often several among the first
drafting steps at a new batch size) are left out at every solve, from the raw steps: a step
more than OUTLIER_FACTOR times the fastest of its shape, or one of a shape seen at most
FEW_STEPS times and that far above the model of the others (the H100 traces show a compile
stall twice for one shape: two 670 ms steps of 4 draft steps among 6 ms plain steps, which
as a "repeated shape" made one draft step cost 1.6 plain steps until they left the window,
and speculation stayed off for the whole run). Decided afresh at each solve, a wrong call
cannot stick: an earlier incremental rule (drop a step far above the current model) let a
fit spoilt by early stalls reject every later off-step as a stall and never recover
(closed-loop simulation of the 7B-shape pair's costs with compile stalls;
`benchmarks/e2e/sim_auto_off.py` measures the current rule). With speculation always on, `a`
and `e` are not separable: the estimator reports how much off-step evidence it holds
(`off_weight`) so auto-off can take an occasional off-step to measure plain decoding. The
policy (in the scheduler too) plans with the relative model (a = 1).
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class StepCostModel:
    """Relative step costs (units of one plain decode step of the whole batch)."""

    base: float = 1.0            # a plain decode step: target forward + overheads
    per_draft_step: float = 0.15  # one more autoregressive draft step over the batch
    per_verify_token: float = 0.01  # one more token per sequence in the verify pass
    draft_pass: float = 0.0      # fixed cost of drafting at all (first pass, sampling setup)
    # The verification's knee (`knee_price`): past knee_drafts draft tokens each one more
    # costs past_knee_price on top of per_verify_token (None: no knee price; the scheduler
    # then bounds the drafts instead)
    knee_drafts: int | None = None
    past_knee_price: float = 0.0
    # A step whose longest draft is one token costs this much more than the line through
    # the others gives (`StepCostEstimator(one_draft_term=True)`): session 40's H200 trace at
    # batch 4 (5x1280 draft) timed one-draft steps at 6.84 ms against 5.69 for three drafts
    # and 4.67 off, which the line alone could only read as dear draft steps
    one_draft: float = 0.0

    def step_time(self, lengths: list[int]) -> float:
        if not lengths:
            return self.base
        return self.time_for(max(lengths), sum(lengths))

    def time_for(self, longest: int, total: int) -> float:
        """Step time when the longest draft is `longest` tokens and `total` are verified."""
        knee = (0.0 if self.knee_drafts is None
                else self.past_knee_price * max(0, total - self.knee_drafts))
        if longest <= 0:
            return self.base + self.per_verify_token * total + knee
        return (self.base + self.draft_pass + self.per_draft_step * longest
                + self.per_verify_token * total + knee
                + (self.one_draft if longest == 1 else 0.0))

    def times_for(self, longest: np.ndarray, total: np.ndarray) -> np.ndarray:
        """`time_for` of many plans at once (arrays of equal shape): the plans' searches
        price every length each step, and a Python loop over them was most of a plan's
        host time at small batches."""
        longest = np.asarray(longest)
        total = np.asarray(total, dtype=np.float64)
        times = self.base + self.per_verify_token * total
        if self.knee_drafts is not None:
            times = times + self.past_knee_price * np.maximum(0.0, total - self.knee_drafts)
        drafting = (self.draft_pass + self.per_draft_step * longest
                    + np.where(longest == 1, self.one_draft, 0.0))
        return times + np.where(longest > 0, drafting, 0.0)


RESOLVE_EVERY = 8  # observations between two solves of a bucket's costs
# ... once the bucket holds SETTLED_WEIGHT decayed steps (session 41: the solves were 4% of
# a host-bound H200 engine's host time at batch 4 / 16; the costs move over ~50 steps)
RESOLVE_EVERY_SETTLED = 16
SETTLED_WEIGHT = 24.0
WINDOW = 192  # raw steps kept per bucket (forgetting 0.98: the oldest weigh 0.02)
MIN_DRAFTING_WEIGHT = 7.0  # decayed drafting steps of a bucket before lengths_unvaried says
LENGTH_SPREAD = 0.5  # draft steps' weighted standard deviation below which they are "one length"
# `borrow_young` (the scheduler's default since session 52; VLLM_BASS_COST_FIT=session51:
# off): a bucket with fewer decayed drafting steps than this plans with the nearest bucket
# that has them. Session 51's H200 trace (the mix, batch 64): the bucket's first two
# drafting steps took 12.0 ms against 5.6-6.8 off, its young fit priced one draft at
# 1.6-1.9x an off-step, and the batch stayed off, seeing no drafting step but probes, where
# K=2 measured 1.55x an off-step
BORROW_DRAFTING_WEIGHT = 6.0
OUTLIER_FACTOR = 4.0  # a step this many times its shape's fastest (or the model) is a stall
FEW_STEPS = 3  # a shape seen this often or less is judged against the other shapes' model
RARE_FACTOR = 2.0  # ... and, once the gross stalls are out, this far above it is a stall
HUBER_K = 1.5  # residuals beyond this many robust standard deviations weigh less
HUBER_ITERATIONS = 3
# ... and their robust scale is at least this share of the median step: step times that
# follow the law (nearly) exactly have a median residual of ~0, and without a floor every
# weight collapsed while the ridge kept its strength, pulling the fit toward the prior
HUBER_MIN_SCALE = 0.01
# A plain step's growth per request relative to its fixed part, before two batch sizes are
# fitted: 0.049 ms per request against 5.68 ms (H100, 7B-shape target, session 18's trace)
PER_REQUEST_SLOPE_PRIOR = 0.0086
# ... fitted from the buckets holding at least this many (decayed) off-steps, each weighing
# by them: a bucket that drafts nearly every step reads its plain step through the prior's
# shape. Session 52's H200 trace (the mix, 4x1024): the closed batches' tails (batch 4-32,
# <= 1 off-step each) put a plain step at 7.0-7.4 ms where off-steps took 4.9-5.5, the line
# came out flat (0.005-0.02 ms a request against ~0.035 measured), phi at batch 128 0.09-0.27
# against ~0.5, and the closed objective turned batch 128 / 256 off on 13-64% of its steps,
# 4-9% slower than fixed K=1
SHARE_OFF_WEIGHT = 2.0
# a draft step's fitted cost is held at or above this many plain steps (above it where the
# models' sizes give a floor: `StepCostEstimator.draft_step_floor`)
MIN_DRAFT_STEP = 1e-4
# A verified token's prior price: one token's compute against a plain step of a weight-bound
# target (7B: ~14 GFLOP, ~0.02 ms at ~700 TFLOP/s, against a 6-9 ms step). The fits agree:
# H200, the mix, 4x1024 (session 52): 0.0014-0.0026 at batch 128, 0.0002-0.001 at 64; H100
# 0.0003 at batch 64 (session 29). The price before session 52, 0.01 (SESSION51_PRIOR),
# made one draft at batch 64 cost 1.81 plain steps against 1.06 measured: a batch size
# without a fit of its own (the tail of a closed batch, a new batch size) went off and
# learnt no drafting costs but from probes (session 52: 28% off at batch 128, 5% slower
# than fixed K=1). Past the verification's knee `knee_price` adds the compute price.
PRIOR_COSTS = StepCostModel(base=1.0, per_draft_step=0.12, per_verify_token=0.0025,
                            draft_pass=0.05)
SESSION51_PRIOR = replace(PRIOR_COSTS, per_verify_token=0.01)
# A prefill token in units of a plain step, before the fit: a 7B target's forward is ~14
# GFLOP a token, ~0.02-0.03 ms on an H100 against a ~6 ms plain step
PRIOR_OTHER_TOKEN = 0.004


# Below the knee a verified token costs at least this share of `knee_price` (the scheduler's
# default since session 53; VLLM_BASS_COST_FIT=session52 and the earlier fits: none). A
# bucket that drafts one length nearly every step and measures no plain step cannot tell
# the tokens it verifies from its plain step (the verified tokens follow the batch): the
# fit put them into the plain step, priced a token at 0 and drafting at half its cost.
# Session 53's H200 runs (the mix, 4x1024): batch 32 fitted one / two drafts at 1.09 /
# 1.14 plain steps where they took 1.14 / 1.23 (session 52's off-steps), and drafted two
# where fixed K=1 decoded 5% faster. Measured below the knee (H200, 128-token prompts),
# a token cost 0.5-1.0 of the knee price: 0.0036 / 0.0023 / 0.0014 / 0.0015 plain steps
# at batch 16 / 32 / 64 / 128 against 0.0034 / 0.0031 / 0.0026 / 0.0020.
SUB_KNEE_TOKEN_SHARE = 0.5


def knee_price(weight_share: float, knee_tokens: int) -> float:
    """The price, in plain steps, of one verified token past the knee where the target's
    forward turns from reading its weights to compute (`config.DEFAULT_VERIFY_KNEE_TOKENS`):
    there a token costs 1/knee of the weights' read time, and the weights are
    `weight_share` of a plain step's memory traffic (the rest: every request's KV cache).
    With long contexts the step is mostly KV reads and a token past the knee costs little:
    at batch 64 with ~1100 cached tokens the 7B shape's weights are ~26% of the traffic,
    and vLLM's K=4 (320 tokens) beat K=3 while BASS's hard 256-token bound kept 3 drafts
    (H100, session 29: 64 more tokens +0.8 ms on a 21.6 ms step). With short ones the
    weights dominate and the price keeps the old bound (0.68 at 128-token prompts). Rounded
    to 1/8 of an octave: plans are re-solved when the cost model changes."""
    raw = max(float(weight_share), 1e-6) / max(int(knee_tokens), 1)
    return float(2.0 ** (round(math.log2(raw) * 8) / 8))


def plain_step(theta: np.ndarray, batch: float) -> float:
    """A plain step of `batch` requests (seconds) from a bucket's solved costs
    (`StepCostEstimator._theta`)."""
    return float(theta[0] + theta[5] * batch)


def batch_bucket(batch: int) -> int:
    """Powers of two: step costs change smoothly with the batch size."""
    return 1 << max(0, math.ceil(math.log2(max(1, batch))))


@dataclass
class _Fit:
    bucket: int = 1  # the batch bucket it fits (`batch_bucket`)
    steps: collections.deque = field(default_factory=lambda: collections.deque(maxlen=WINDOW))
    weight: float = 0.0  # decayed count of steps
    batch_sum: float = 0.0  # decayed sum of the steps' batch sizes (the bucket's mean batch)
    off_weight: float = 0.0  # decayed count of steps that did not draft
    # decayed count, sum and sum of squares of the draft steps of the steps that drafted
    draft_weight: float = 0.0
    draft_steps_sum: float = 0.0
    draft_steps_squares: float = 0.0
    unsolved: int = 0  # steps since theta was solved
    theta: np.ndarray | None = None  # the solved costs


def stall_mask(xs: np.ndarray, ys: np.ndarray, prior_shape: np.ndarray, ridge_fit) -> np.ndarray:
    """True for the steps to keep. Shape = (draft steps, verified anything, other tokens to
    a power of two). Within a shape a
    stall is far above the shape's fastest step; a shape seen at most FEW_STEPS times is
    judged against the model of the more frequent shapes (the prior's shape scaled to the
    fastest step if there are none): a stall may hit one shape more than once."""
    other = np.where(xs[:, 4] > 0, np.floor(np.log2(np.maximum(xs[:, 4], 1.0))) + 1.0, 0.0)
    keys = (other * 64 + xs[:, 2]) * 2 + (xs[:, 3] > 0)
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    fastest = np.full(len(uniq), np.inf)
    np.minimum.at(fastest, inverse, ys)
    keep = ys <= OUTLIER_FACTOR * fastest[inverse]
    few = counts[inverse] <= FEW_STEPS
    if few.any():
        frequent = keep & ~few
        if frequent.any():
            predicted = xs @ ridge_fit(frequent)
        else:
            relative = xs @ prior_shape
            predicted = relative * np.min(ys / relative)
        predicted = np.maximum(predicted, 1e-12)
        keep &= ~few | (ys <= OUTLIER_FACTOR * predicted)
        # the frequent shapes may not tell one draft step from the fixed cost of drafting
        # (at batch 1: 0, 1 and 1+1 only), so a long rare draft 3x its cost passes the
        # first test; the model of every other kept step (other rare lengths included)
        # extrapolates well enough to hold it to RARE_FACTOR. Dropping a true rare step
        # costs little: a shape that recurs stops being rare. (Only shapes with a step
        # above RARE_FACTOR times the first model are refitted, to keep solves cheap.)
        doubtful = keep & few & (ys > RARE_FACTOR * predicted)
        for key in np.unique(keys[doubtful]):
            this = keys == key
            others = keep & ~this
            if others.any():
                predicted = xs[this] @ ridge_fit(others)
                keep[this] &= ys[this] <= RARE_FACTOR * np.maximum(predicted, 1e-12)
    return keep


def _solve_on(a: np.ndarray, b: np.ndarray, free: np.ndarray) -> np.ndarray:
    """The unconstrained optimum over the `free` unknowns, the others held at zero."""
    x = np.zeros(len(b))
    x[free] = np.linalg.solve(a[free][:, free], b[free])
    return x


def nonnegative_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin of x'ax - 2b'x over x >= 0 (a positive definite), by Lawson and Hanson's
    active set on the normal equations. Every cost is non-negative, and an unconstrained
    fit on few, collinear, noisy steps (at batch 1 the verified tokens follow the draft
    length) trades a large cost per draft step against a negative one per verified token,
    which then extrapolates wrongly to other lengths (session 7's H100 trace: 1.6 plain
    steps per draft step, speculation off for a whole run)."""
    x = np.linalg.solve(a, b)
    if (x >= 0).all():
        return x
    n = len(b)
    tol = 1e-12 * max(1.0, float(np.abs(b).max()))
    # first guess (right in most fits of the traces, one solve): the unknowns that came
    # out negative are the ones held at zero; accepted when the optimality conditions hold
    free = x > 0
    if free.any():
        s = _solve_on(a, b, free)
        if (s[free] > 0).all() and ((b - a @ s)[~free] <= tol).all():
            return s
    x = np.zeros(n)
    free = np.zeros(n, dtype=bool)
    gradient = b.copy()  # b - a x: the descent direction of the objective
    for _ in range(3 * n):
        candidates = np.where(free, -np.inf, gradient)
        j = int(np.argmax(candidates))
        if candidates[j] <= tol:
            break
        free[j] = True
        while True:
            s = _solve_on(a, b, free)
            if (s[free] > 0).all():
                break
            bad = free & (s <= 0)
            alpha = np.min(x[bad] / np.maximum(x[bad] - s[bad], 1e-300))
            x = x + alpha * (s - x)
            free &= x > tol
            x[~free] = 0.0
        x = s
        gradient = b - a @ x
    return x


class StepCostEstimator:
    def __init__(self, prior: StepCostModel | None = None, forget: float = 0.98,
                 prior_strength: float = 0.1, min_weight: float = 6.0,
                 session29_fit: bool = False, one_draft_term: bool = False,
                 draft_step_floor: float | None = None, borrow_young: bool = False):
        self.prior = prior or PRIOR_COSTS
        # True (the scheduler's default since session 52): a bucket that has seen few
        # drafting steps plans with the nearest bucket that has seen enough
        # (BORROW_DRAFTING_WEIGHT)
        self.borrow_young = borrow_young
        # the least a draft step may cost in plain steps (the scheduler's
        # `draft_step_cost_floor`, from the models' sizes; MIN_DRAFT_STEP without one)
        self.draft_step_floor = max(MIN_DRAFT_STEP, draft_step_floor or 0.0)
        # True (VLLM_BASS_COST_FIT=one_draft, an A/B aid): a one-draft step's own premium
        # (`StepCostModel.one_draft`, prior 0); False (the default since session 41): the
        # line through every drafting step
        self.one_draft_term = one_draft_term
        # True (the scheduler's VLLM_BASS_COST_FIT=session29, an A/B aid): the fit before
        # session 30, without the per-request term and with the ridge's prior scaled by
        # every step's mean through the prior's shape, not by the off-steps' time
        self.session29_fit = session29_fit
        self.forget = forget
        self.prior_strength = prior_strength
        self.min_weight = min_weight
        self.fits: dict[int, _Fit] = {}
        # bucket -> seconds: a draft step's GPU time measured at start-up (`measured_draft_
        # steps`); the fit's draft step costs at least that much
        self.measured_draft_step: dict[int, float] = {}
        self.outliers = 0  # steps left out as one-time stalls at the last solves
        self._observed = 0
        self._share_line: tuple[int, float, float] | None = None  # (at _observed, a0, c)

    def set_measured_draft_steps(self, seconds_by_rows: dict[int, float]) -> None:
        """A draft step's time by the batch size it ran for (the drafter's step graphs timed
        at start-up, `DraftStepGraphs.time_replays`): each bucket's fitted draft step costs
        at least the measured time of the bucket's smallest batch (the graph that batch
        replays: the smallest measured size holding it). Step periods scatter (async
        pipelining: 5-13 ms for one shape at batch 8, session 45's H200 trace) and a
        drafting step's cost splits badly between its first pass and its draft steps when
        the lengths vary little: the fit priced a 4x1024 draft step at 0.02 ms at batch 8
        (first pass 2.5 ms), 0.1 ms in the shapes' own medians, and the plan drafted 16
        where fixed 6-8 ran 10-30% faster (session 46). Refits every bucket."""
        sizes = sorted((int(rows), float(t)) for rows, t in seconds_by_rows.items()
                       if int(rows) > 0 and t > 0 and math.isfinite(t))
        self.measured_draft_step = {}
        for bucket in (1 << k for k in range(0, 16)):
            smallest = bucket // 2 + 1
            held = [t for rows, t in sizes if rows >= smallest]
            if held:
                self.measured_draft_step[bucket] = held[0]
        for fit in self.fits.values():
            fit.theta = None

    def observe(self, batch: int, draft_steps: int, verify_tokens: int, seconds: float,
                other_tokens: int = 0) -> None:
        """One step of `batch` requests: `other_tokens` are the scheduled tokens besides each
        request's one and its verified drafts (prefill chunks of new or resumed requests)."""
        if batch <= 0 or seconds <= 0 or not math.isfinite(seconds):
            return
        bucket = batch_bucket(batch)
        fit = self.fits.get(bucket)
        if fit is None:
            fit = self.fits[bucket] = _Fit(bucket)
        drafted = 1.0 if draft_steps > 0 else 0.0
        fit.steps.append((1.0, drafted, float(draft_steps), float(verify_tokens),
                          float(max(other_tokens, 0)), float(batch),
                          1.0 if draft_steps == 1 else 0.0, seconds))
        fit.off_weight = fit.off_weight * self.forget + (1.0 - drafted)
        fit.draft_weight = fit.draft_weight * self.forget + drafted
        fit.draft_steps_sum = fit.draft_steps_sum * self.forget + drafted * draft_steps
        fit.draft_steps_squares = (fit.draft_steps_squares * self.forget
                                   + drafted * draft_steps * draft_steps)
        fit.weight = fit.weight * self.forget + 1.0
        fit.batch_sum = fit.batch_sum * self.forget + batch
        fit.unsolved += 1
        self._observed += 1

    def model_for(self, batch: int) -> StepCostModel:
        """Relative costs for this batch size; the prior until enough steps were seen."""
        fit = self.fits.get(batch_bucket(batch))
        if self.borrow_young and (fit is None or fit.draft_weight < BORROW_DRAFTING_WEIGHT):
            fit = self._donor(batch_bucket(batch)) or fit
        if fit is None or fit.weight < self.min_weight:
            return self.prior
        theta = self._theta(fit)
        a = plain_step(theta, batch)
        if not a > 0:
            return self.prior
        return StepCostModel(base=1.0,
                             per_draft_step=max(float(theta[2] / a), self.draft_step_floor),
                             per_verify_token=max(float(theta[3] / a), 0.0),
                             draft_pass=max(float(theta[1] / a), 0.0),
                             one_draft=max(float(theta[6] / a), 0.0))

    def _donor(self, bucket: int) -> _Fit | None:
        """The bucket nearest `bucket` (in powers of two; the smaller on a tie) whose fit
        holds min_weight steps, BORROW_DRAFTING_WEIGHT of them drafting; None if none does.
        Its costs in seconds, the plain step extrapolated by its per-request term, price
        this batch (`model_for`)."""
        mature = [b for b, f in self.fits.items() if b != bucket
                  and f.weight >= self.min_weight and f.draft_weight >= BORROW_DRAFTING_WEIGHT]
        if not mature:
            return None
        log2 = math.log2(bucket)
        return self.fits[min(mature, key=lambda b: (abs(math.log2(b) - log2), b))]

    def _theta(self, fit: _Fit) -> np.ndarray:
        """Absolute costs (seconds) [base, draft_pass, per_draft_step, per_verify_token,
        per_other_token, per_request, one_draft]: a plain step of B requests is
        base + per_request * B.
        Re-solved after every RESOLVE_EVERY observations (RESOLVE_EVERY_SETTLED once the
        bucket holds SETTLED_WEIGHT steps; every step until twice min_weight),
        not every step: the scheduler asks every step, a solve costs ~1 ms of host time on a
        2-core CPU (benchmarks/results/replay_cost_fit_new.md),
        and the costs move slowly (forgetting factor 0.98, ~50 steps)."""
        every = RESOLVE_EVERY_SETTLED if fit.weight >= SETTLED_WEIGHT else RESOLVE_EVERY
        if (fit.theta is None or fit.unsolved >= every
                or (fit.unsolved and fit.weight < 2 * self.min_weight)):
            fit.theta = self._solve(fit, self.measured_draft_step.get(fit.bucket, 0.0))
            fit.unsolved = 0
        return fit.theta

    def _solve(self, fit: _Fit, draft_step_floor_s: float = 0.0) -> np.ndarray:
        """Exponentially weighted ridge least squares over the window's steps minus the
        stalls, pulled toward the prior's shape scaled to the off-steps' mean time (to every
        step's where the window holds no off-step). `draft_step_floor_s`: the draft step
        costs at least that (a measured time): fitted as that plus a non-negative rest, so
        the other costs are fitted knowing it."""
        p = self.prior
        shape = np.array([p.base, p.draft_pass, p.per_draft_step, p.per_verify_token,
                          PRIOR_OTHER_TOKEN * p.base, PER_REQUEST_SLOPE_PRIOR * p.base,
                          p.one_draft])
        data = np.array(fit.steps)
        xs, ys = data[:, :7], data[:, 7]
        if draft_step_floor_s > 0:
            ys = ys - draft_step_floor_s * xs[:, 2]
        if self.session29_fit:  # no per-request term
            xs[:, 5] = 0.0
            shape[5] = 0.0
        if not self.one_draft_term:
            xs[:, 6] = 0.0
        w = self.forget ** np.arange(len(ys) - 1, -1, -1, dtype=np.float64)
        # a step with prefill tokens weighs as its relative error would, once longer than
        # the median step without: a step's scatter grows with its length, and a few
        # prefill steps (16k-token chunks, 300-700 ms beside 20 ms decode steps, +-20%)
        # weighed in absolute terms like hundreds of decode steps: one of them with 7 draft
        # steps made a draft step cost 1.6 plain steps, and batch 64 ran 7 steps without
        # drafts (H100, 1024-token prompts, session 29's trace). Only those: weighing every
        # step by its relative error let the shortest steps (async timing) decide the draft
        # step's cost in the session-7 traces (0.28 -> 0.0 at batch 1).
        decode = xs[:, 4] == 0
        reference = float(np.median(ys[decode] if decode.any() else ys))
        norm = np.where(decode, 1.0, np.maximum(1.0, ys / max(reference, 1e-12)))
        w = w / norm ** 2
        ridge = self.prior_strength * np.eye(7)
        # the prior's scale: the off-steps' mean time where the window holds any (they
        # measure a plain step directly), else the steps' mean through the prior's shape.
        # That shape priced a verified token at 0.01 of a plain step before session 52, 1.9
        # plain steps for 192 tokens at batch 64, where the H100 took 0.05 (session 29,
        # 1024-token prompts);
        # scaled through it the ridge pulled the plain step toward 6 ms, and as the last
        # off-step's weight decayed the fit drifted from 17 to 12 ms while off-steps took
        # 16-18 ms: every drafting cost looked 1.3-1.5x dearer and the plans shortened
        off = (xs[:, 1] == 0) & decode
        anchored = not self.session29_fit

        def ridge_fit(mask: np.ndarray, robust: np.ndarray | None = None) -> np.ndarray:
            xm, ym, wm = xs[mask], ys[mask], w[mask]
            if robust is not None:
                wm = wm * robust[mask]
            on_off = off[mask] & (wm > 0)
            if anchored and on_off.any():
                mean_off = (wm[on_off] @ xm[on_off]) / wm[on_off].sum()
                theta0 = shape * ((wm[on_off] @ ym[on_off]) / wm[on_off].sum()
                                  / float(shape @ mean_off))
            else:
                mean_x = (wm @ xm) / wm.sum()
                theta0 = shape * ((wm @ ym) / wm.sum() / float(shape @ mean_x))
            if draft_step_floor_s > 0:  # the prior of the rest over the measured floor
                theta0 = theta0.copy()
                theta0[2] = max(theta0[2] - draft_step_floor_s, 0.0)
            xtx = (xm * wm[:, None]).T @ xm + ridge
            xty = (xm * (wm * ym)[:, None]).sum(axis=0) + ridge @ theta0
            return nonnegative_solve(xtx, xty)

        keep = stall_mask(xs, ys, shape, ridge_fit)
        self.outliers = int((~keep).sum())
        theta = ridge_fit(keep)
        floor = HUBER_MIN_SCALE * float(np.median(ys[keep])) + 1e-12
        # Huber reweighting: step times under async scheduling are heavy-tailed (GC, late
        # host work, smaller stalls than stall_mask's 4x); a few 1.5-3x steps of one shape
        # moved the fitted cost per draft step by a factor of 2-6 (session 9's H100 trace)
        for _ in range(HUBER_ITERATIONS):
            residual = np.abs(ys - xs @ theta) / norm  # a long prefill step's: relative
            scale = max(1.4826 * float(np.median(residual[keep])), floor)
            theta = ridge_fit(keep, np.minimum(1.0, HUBER_K * scale / np.maximum(residual,
                                                                                  1e-12)))
        if draft_step_floor_s > 0:
            theta = theta.copy()
            theta[2] += draft_step_floor_s
        return theta

    def lengths_unvaried(self, batch: int) -> bool:
        """The bucket's recent drafting steps (decayed like the fit's, at least
        MIN_DRAFTING_WEIGHT of them) all had about the same number of draft steps (standard
        deviation below LENGTH_SPREAD): the fit cannot split a drafting step's cost between
        the draft's first pass and its further steps (nor those from the verified tokens,
        which follow the length), and the split comes from the prior's shape. A plan that
        keeps one length then never learns what another would cost (per_request explores).
        O(1): asked every step."""
        fit = self.fits.get(batch_bucket(batch))
        if fit is None or fit.draft_weight < MIN_DRAFTING_WEIGHT:
            return False
        mean = fit.draft_steps_sum / fit.draft_weight
        variance = fit.draft_steps_squares / fit.draft_weight - mean * mean
        return math.sqrt(max(variance, 0.0)) < LENGTH_SPREAD

    def per_request_share(self, batch: int) -> float:
        """phi: the share of a plain step of `batch` requests that grows with the batch,
        c * batch / (a0 + c * batch), from a line through the fitted plain-step times of
        the buckets whose fits hold SHARE_OFF_WEIGHT off-steps (their mean batch sizes;
        each weighs by its off-steps); PER_REQUEST_SLOPE_PRIOR until two such buckets a
        factor 1.5 apart hold min_weight steps each. Refitted every RESOLVE_EVERY
        observations (the closed-batch plan asks every step)."""
        line = self._share_line
        if line is None or self._observed - line[0] >= RESOLVE_EVERY:
            points = []
            for fit in self.fits.values():
                if fit.weight >= self.min_weight and fit.off_weight >= SHARE_OFF_WEIGHT:
                    mean_batch = fit.batch_sum / fit.weight
                    theta = self._theta(fit)
                    points.append((mean_batch, plain_step(theta, mean_batch),
                                   fit.off_weight))
            a0, c = 1.0, PER_REQUEST_SLOPE_PRIOR
            if len(points) >= 2:
                xs, ys, evidence = np.array(points).T
                if xs.max() >= 1.5 * xs.min() and (ys > 0).all():
                    slope, intercept = np.polyfit(xs, ys, 1, w=np.sqrt(evidence))
                    if slope >= 0 and intercept > 0:
                        a0, c = float(intercept), float(slope)
                    elif slope >= 0:  # the fixed part did not come out: all per request
                        a0, c = 0.0, 1.0
                    else:  # the step does not grow with the batch
                        a0, c = 1.0, 0.0
            line = self._share_line = (self._observed, a0, c)
        _, a0, c = line
        grown = c * max(batch, 0)
        return grown / (a0 + grown) if a0 + grown > 0 else 0.0

    def off_weight(self, batch: int) -> float:
        """Decayed number of measured steps without drafting in this batch size's bucket."""
        fit = self.fits.get(batch_bucket(batch))
        return 0.0 if fit is None else fit.off_weight
