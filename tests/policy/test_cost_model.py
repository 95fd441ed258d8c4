"""The step-cost estimator recovers a known cost law and falls back to its prior."""

import random
import statistics

import numpy as np
import pytest

from vllm_bass.policy.cost_model import (StepCostEstimator, batch_bucket, nonnegative_solve,
                                         plain_step)
from vllm_bass.policy.per_request import StepCostModel

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


def test_exact_step_times_give_the_exact_law():
    """Steps that follow the cost law exactly (no scatter) must give it back: the robust
    reweighting's scale is the residuals' median, which is ~0 here, and without a floor every
    step's weight collapsed toward 0 while the ridge kept its strength, so the fit fell back
    toward the prior's shape (closed-loop simulation of the H100 batch-256 costs: a drafting
    overhead of 0.16-0.20 of a plain step for a true 0.09, and the prior itself at times)."""
    base, first, per_step, per_token = 1.0, 0.0445, 0.0445, 0.0008
    est = StepCostEstimator()
    # the batch-256 mix the simulation produced: off-steps, first drafting steps (nothing
    # verified yet) and one-token drafts verified for most of the batch
    for i in range(300):
        if i % 3 == 0:
            shape = (0, 0)
        elif i % 29 == 1:
            shape = (1, 0)
        else:
            shape = (1, 256 - i % 7)
        k, tokens = shape
        est.observe(256, k, tokens,
                    base + per_token * tokens + ((first + per_step * k) if k else 0.0))
        if i >= 60 and i % 20 == 0:
            model = est.model_for(256)
            # (4%: the ridge, scaled by the off-steps' time, pulls the first pass and the draft
            # step of this one-length drafting toward the prior's, whose sum is twice the true
            # one, and a little of that lands on the verified tokens: 0.97-0.99 of the law)
            assert model.per_verify_token == pytest.approx(per_token, rel=0.04), i
            assert model.time_for(1, 256) == pytest.approx(
                base + first + per_step + 256 * per_token, rel=0.01), i


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


def test_a_stall_that_hits_one_shape_twice_is_still_a_stall():
    """Session 7's H100 trace at batch 1: two 670 ms steps of 4 draft steps (no verify)
    among 6 ms plain steps. Seen twice, the shape passed as "repeated" and one draft step
    cost 1.6 plain steps until the stalls left the window: speculation stayed off."""
    rng = random.Random(7)
    clean, stalled = StepCostEstimator(), StepCostEstimator()
    a, e, b = 0.0059, 0.0012, 0.0017
    for i in range(160):
        k = [0, 0, 0, 1, 0, 2, 0, 4][i % 8]
        t = (a + (e + b * k if k else 0.0)) * rng.uniform(0.97, 1.03)
        clean.observe(1, k, k, t)
        stalled.observe(1, k, k, t)
        if i in (5, 6):
            stalled.observe(1, 4, 0, 0.67)
    for k in (0, 1, 4, 8):
        assert stalled.model_for(1).time_for(k, k) == pytest.approx(
            clean.model_for(1).time_for(k, k), rel=0.05), k


def test_nonnegative_solve_is_the_constrained_least_squares_optimum():
    """Against scipy's NNLS on the same problems (a = m'm, b = m'y), constraints active
    or not."""
    from scipy.optimize import nnls

    rng = np.random.default_rng(9)
    active = 0
    for _ in range(300):
        m = rng.normal(size=(12, 4))
        y = rng.normal(size=12)
        expected, _ = nnls(m, y)
        got = nonnegative_solve(m.T @ m, m.T @ y)
        assert got == pytest.approx(expected, abs=1e-8)
        active += (expected == 0).any()
    assert active > 100  # most draws exercise the constrained path


def test_h100_trace_batch_one_keeps_drafting_cheap():
    """Replay of session 7's H100 step trace (per_request, async scheduling, the 7B shape,
    alpha 0.8), the steps the scheduler fitted: at batch 1 a draft step costs ~0.3 of a
    plain step (d4+verify 13 ms vs 5.9 ms plain), and the compile stalls of the first
    drafting steps (two 670 ms, one 530 ms, 100 ms ones) must not make it look dearer
    than half a plain step -- the old fit said 1.6, and the run kept speculation off."""
    import csv
    from pathlib import Path

    trace = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "traces"
             / "llama7b_s7_per_request_async.csv")
    est = StepCostEstimator()
    seen_b1 = 0
    worst = 0.0
    for row in csv.reader(trace.open()):
        batch, steps, tokens, ms = int(row[1]), int(row[2]), int(row[3]), float(row[4])
        est.observe(batch, steps, tokens, ms / 1000)
        if batch == 1:
            seen_b1 += 1
            if seen_b1 > 24:
                worst = max(worst, est.model_for(1).per_draft_step)
    assert seen_b1 > 150
    assert 0.05 < worst < 0.5


def test_a_fit_that_finds_drafting_free_is_held_at_the_models_floor():
    """Session 44's H200 trace (4x1024, the mix, closed batches at batch 32): at batch 5-8
    the window held the warm-up run's slow one-draft steps (6.3-8.4 ms) beside later
    five-to-seven-draft steps (4.9-6.7 ms), the free fit priced a draft step at 0 and the
    plan drafted 5-7 tokens at alpha 0.3. The floor from the models' sizes holds it; where
    the steps do price drafting the floor changes nothing."""
    rng = random.Random(3)

    def drifting(est):
        for _ in range(30):  # slow warm-up steps, one draft each
            est.observe(8, 1, 8, rng.uniform(6.3e-3, 8.4e-3))
        for _ in range(60):  # later: longer drafts, faster steps
            drafts = rng.choice([5, 6, 7])
            est.observe(8, drafts, 8 * drafts, rng.uniform(4.9e-3, 6.7e-3))
        return est.model_for(8).per_draft_step

    assert drifting(StepCostEstimator()) < 1e-3
    assert drifting(StepCostEstimator(draft_step_floor=0.0063)) == pytest.approx(0.0063)
    honest = StepCostEstimator(draft_step_floor=0.0063)
    for _ in range(80):
        drafts = rng.choice([0, 1, 3, 5])
        honest.observe(8, drafts, 8 * drafts, 5.0e-3 * (1 + 0.04 * drafts))
    assert honest.model_for(8).per_draft_step == pytest.approx(0.04, rel=0.1)


def _trace_steps(session: str, name: str):
    """(batch, draft steps, verified tokens, seconds, other tokens) of a committed step
    trace (`VLLM_BASS_STEP_TRACE` rows: end_s,batch,draft_steps,verify_tokens,ms,other)."""
    import csv
    import gzip
    from pathlib import Path

    trace = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / session / name
    with gzip.open(trace, "rt") as f:
        for row in csv.reader(f):
            yield (int(row[1]), int(row[2]), int(row[3]), float(row[4]) / 1000, int(row[5]))


def test_session44_trace_the_floor_holds_where_the_free_fit_collapsed():
    """Replay of session 44's call-2 step trace (H200; BASS default, 4x1024 draft, the mix,
    closed batches of 32 / 64 / 128): without a floor the batch-5-8 fit spends most of its
    later steps at a zero draft step; with the models' floor (0.0063 of a plain step for
    this pair) it never goes below it, and the batch-32 fit, which saw drafting priced, is
    the same either way."""
    free, floored = StepCostEstimator(), StepCostEstimator(draft_step_floor=0.0063)
    small_free, small_floored, same_at_32 = [], [], []
    for step in _trace_steps("session44", "step_trace_call2_bass_default_4x1024_mix.csv.gz"):
        for est in (free, floored):
            est.observe(*step)
        batch = step[0]
        if 5 <= batch <= 8:
            small_free.append(free.model_for(batch).per_draft_step)
            small_floored.append(floored.model_for(batch).per_draft_step)
        elif batch == 32:
            same_at_32.append(free.model_for(32) == floored.model_for(32))
    later = small_free[len(small_free) // 3:]
    assert sum(c < 1e-3 for c in later) > 0.5 * len(later)
    assert min(small_floored) >= 0.0063
    assert all(same_at_32) and len(same_at_32) > 200


def test_lengths_unvaried_says_when_the_fit_saw_one_draft_length():
    """One draft length in a bucket's drafting steps (off-steps aside) leaves the first
    pass / draft step / verified token split to the prior; a second length ends that."""
    est = StepCostEstimator()
    assert not est.lengths_unvaried(32)  # nothing seen
    for i in range(7):
        est.observe(32, 1, 32, 0.010)
    assert not est.lengths_unvaried(32)  # too few drafting steps to judge
    est.observe(32, 0, 0, 0.008)  # an off-step changes nothing
    est.observe(32, 1, 32, 0.010)
    assert est.lengths_unvaried(32) and not est.lengths_unvaried(128)
    for i in range(4):
        est.observe(32, 3, 64, 0.011)
    assert not est.lengths_unvaried(32)


def test_exploration_prices_longer_drafts_the_prior_would_misprice():
    """Steps of length 1 only: the fit keeps the prior's split (a draft step 0.12 of a plain
    step); with a few explored lengths it finds the true ~0.02."""
    def step_seconds(draft_steps, verify):  # the H100 law at batch 32, in seconds
        ms = 6.3 + 0.053 * 32 + 0.015 * verify
        if draft_steps:
            ms += 1.6 + 0.015 * 32 + draft_steps * (0.11 + 0.001 * 32)
        return ms / 1e3

    one, explored = StepCostEstimator(), StepCostEstimator()
    for i in range(64):
        for est in (one, explored):
            est.observe(32, 1, 32, step_seconds(1, 32))
        if i % 8 == 7:
            length, verify = (3, 64) if i % 16 == 7 else (2, 64)
            explored.observe(32, length, verify, step_seconds(length, verify))
    true_step = (0.11 + 0.032) / (6.3 + 0.053 * 32)
    assert one.model_for(32).per_draft_step > 4 * true_step
    # (the ridge toward the prior keeps a little of its shape)
    assert true_step / 2 < explored.model_for(32).per_draft_step < 2 * true_step


def test_per_request_share_follows_the_plain_step_across_batch_sizes():
    """A plain step of 5 ms + 0.05 ms per request, fitted in two buckets: the share of a
    step that grows with the batch is c n / (a0 + c n); the prior's before that."""
    from vllm_bass.policy.cost_model import PER_REQUEST_SLOPE_PRIOR

    est = StepCostEstimator()
    prior = PER_REQUEST_SLOPE_PRIOR * 64 / (1 + PER_REQUEST_SLOPE_PRIOR * 64)
    assert est.per_request_share(64) == pytest.approx(prior)
    rng = np.random.default_rng(0)
    for _ in range(80):
        for batch in (16, 64):
            drafted = int(rng.integers(0, 4))
            ms = 5.0 + 0.05 * batch + (0.5 + 0.2 * drafted if drafted else 0.0)
            est.observe(batch, drafted, drafted * batch, ms / 1e3)
    for batch in (16, 64, 256):
        assert est.per_request_share(batch) == pytest.approx(
            0.05 * batch / (5.0 + 0.05 * batch), abs=0.03)


def test_per_request_share_ignores_buckets_that_never_measured_a_plain_step():
    """Session 52's H200 trace: a closed mix's tails (batch 4-32) drafted nearly every step,
    their fits read a plain step through the prior's shape at ~7 ms where off-steps took
    ~5, the line through every bucket came out flat and phi at batch 128 was 0.09-0.27
    against ~0.5; the closed objective then turned the batch off. Only buckets with
    off-steps (SHARE_OFF_WEIGHT) place the line."""
    from vllm_bass.policy.cost_model import PER_REQUEST_SLOPE_PRIOR, SHARE_OFF_WEIGHT

    def law_ms(batch, drafted):
        return 4.0 + 0.035 * batch + (0.5 + 0.03 * batch if drafted else 0.0)

    est = StepCostEstimator()
    for _ in range(40):  # small buckets: drafting only, and slow (host-bound) steps
        for batch in (4, 8, 16):
            est.observe(batch, 2, 2 * batch, 2.0 * law_ms(batch, True) / 1e3)
    prior = PER_REQUEST_SLOPE_PRIOR * 128 / (1 + PER_REQUEST_SLOPE_PRIOR * 128)
    assert est.per_request_share(128) == pytest.approx(prior), "no off-steps: the prior"
    for i in range(60):  # large buckets: off-steps among the drafting ones
        for batch in (120, 250):
            drafted = i % 3 != 0
            est.observe(batch, int(drafted), batch * drafted, law_ms(batch, drafted) / 1e3)
    assert all(est.fits[b].off_weight < SHARE_OFF_WEIGHT for b in (4, 8, 16))
    truth = 0.035 * 128 / (4.0 + 0.035 * 128)  # 0.53
    assert est.per_request_share(128) == pytest.approx(truth, abs=0.08)


def test_session52_trace_the_share_at_batch_128_follows_its_off_steps():
    """Replay of session 52's call-2 step trace (H200; BASS default, 4x1024 draft, the mix,
    closed batches of 64 then 128 then 256): the batch-64 run's tails (batch 4-32) drafted
    nearly every step. Through every bucket's plain step the share line put phi at batch 128
    at 0.09-0.27 during the batch-128 runs, where its off-steps (8.1 ms against 13.2 at batch
    256 and ~6.3 at 64) give ~0.5; the closed objective then turned the batch off on 21-64%
    of its steps, 8% slower than fixed K=1."""
    est = StepCostEstimator(borrow_young=True)
    shares = []
    for batch, draft_steps, verify, seconds, other in _trace_steps(
            "session52", "step_trace_call2_bass_default_4x1024_mix.csv.gz"):
        est.observe(batch, draft_steps, verify, seconds, other)
        if batch == 128:
            shares.append(est.per_request_share(128))
    assert len(shares) > 100
    assert min(shares) > 0.4


def test_session53_trace_prices_batch_32s_verified_tokens_at_zero():
    """Why the scheduler holds a verified token below the knee at half the knee's price
    (`SUB_KNEE_TOKEN_SHARE`, session 53): replay of session 53's call-2 step trace (H200;
    BASS default on session 52's code, 4x1024 draft, the mix, closed batches of 32 then
    256). The batch-32 bucket drafted nearly every step and measured no plain step: the fit
    priced a verified token at 0 in most of its drafting steps, where session 52's runner
    traces put one at ~0.002 plain steps at batch 32; the plan drafted 2.1 a request where
    fixed K=1 decoded 5% faster. The floor there is 0.0016."""
    from vllm_bass.policy.cost_model import SHARE_OFF_WEIGHT

    est = StepCostEstimator(borrow_young=True)
    prices = []
    for batch, draft_steps, verify, seconds, other in _trace_steps(
            "session53", "step_trace_call2_bass_default_4x1024_mix.csv.gz"):
        est.observe(batch, draft_steps, verify, seconds, other)
        if 17 <= batch <= 32 and draft_steps and not other:
            prices.append(est.model_for(batch).per_verify_token)
    assert len(prices) > 150
    assert statistics.median(prices) < 0.0005
    assert est.fits[32].off_weight < SHARE_OFF_WEIGHT


def test_steps_with_prefill_tokens_give_the_decode_law():
    """A server's steps mostly carry a new request's prefill (continuous batching): the
    prefill tokens are a term of their own, so the drafting costs come out right from such
    steps, and a step with a big prefill is neither a stall nor a draft cost."""
    rng = random.Random(3)
    a, e, b, c, d = 0.008, 0.0009, 0.0004, 0.00001, 0.00002  # d: one prefill token
    est = StepCostEstimator(forget=0.995)
    for i in range(400):
        k = 0 if i % 10 == 0 else rng.choice([1, 2, 3, 5])
        tokens = rng.randint(k, 32 * k)  # ragged: some requests draft less
        other = rng.choice([0, 0, 127, 254, 1500])
        seconds = a + c * tokens + d * other + ((e + b * k) if k else 0.0)
        est.observe(32, k, tokens, seconds * rng.uniform(0.98, 1.02), other)
    model = est.model_for(32)
    assert model.per_draft_step == pytest.approx(b / a, rel=0.2)
    assert model.per_verify_token == pytest.approx(c / a, rel=0.3)
    for k in (1, 3, 5):
        assert model.time_for(k, 32 * k) == pytest.approx(
            (a + e + b * k + c * 32 * k) / a, rel=0.03)
    assert est.outliers == 0


def test_long_prefill_steps_do_not_price_draft_steps():
    """Replay of session 29's H100 trace (1024-token prompts, batch 64, alpha 0.8): the
    16k-token prefill chunks take 300-700 ms beside ~21 ms decode steps, and one of them
    carried 7 draft steps; weighed like the decode steps in absolute terms it made a draft
    step cost 1.6 plain steps (the timed batch then ran 7 steps without drafts). A draft
    step of the 4-layer draft costs ~0.03 of a plain step there (profile: ~0.65 ms)."""
    import csv
    from pathlib import Path

    trace = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "traces"
             / "llama7b_s29_prompt1024_b64.csv")
    est = StepCostEstimator()
    worst, checked = 0.0, 0
    for row in csv.reader(trace.open()):
        batch, steps, tokens, ms, other = (int(row[1]), int(row[2]), int(row[3]),
                                           float(row[4]), int(row[5]))
        if batch == 64 and other == 0:
            worst = max(worst, est.model_for(64).per_draft_step)
            checked += 1
        est.observe(batch, steps, tokens, ms / 1000, other)
    assert checked > 100
    assert worst < 0.3


def test_a_noisy_long_prefill_step_is_weighed_by_its_relative_error():
    """Decode steps follow the law; a few prefill steps 20x longer scatter +-20% and carry
    different draft lengths: the draft step's cost stays the decode steps'."""
    rng = random.Random(5)
    a, e, b, c, d = 0.020, 0.001, 0.0006, 0.000002, 0.00002
    est = StepCostEstimator()
    for i in range(120):
        k = rng.choice([2, 3, 4]) if i % 12 else 0
        other = 16000 if i % 30 == 5 else 0
        seconds = a + c * 64 * k + d * other + ((e + b * k) if k else 0.0)
        noise = rng.uniform(0.8, 1.25) if other else rng.uniform(0.99, 1.01)
        est.observe(64, 7 if other else k, 64 * k, seconds * noise, other)
    model = est.model_for(64)
    assert model.per_draft_step == pytest.approx(b / a, rel=0.35)


def _replay_plain_step_and_token_price(session29_fit: bool) -> tuple[list[float], list[float]]:
    """Session 30's H100 step trace (BASS default, 1024-token prompts, alpha 0.6 / 0.8,
    batch 32 / 64): at every decode step of batch 64, the fitted plain step over the median
    of the last off-steps of batch 64, and the fitted price of a verified token."""
    import csv
    import gzip
    import statistics
    from pathlib import Path

    trace = (Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "session30"
             / "step_trace_call2_bass_default.csv.gz")
    est = StepCostEstimator(session29_fit=session29_fit)
    ratios, prices, off_steps = [], [], []
    with gzip.open(trace, "rt") as fh:
        for row in csv.reader(fh):
            batch, steps, tokens, ms, other = (int(row[1]), int(row[2]), int(row[3]),
                                               float(row[4]), int(row[5]))
            if batch == 64 and other == 0:
                if steps == 0:
                    off_steps.append(ms / 1000)
                fit = est.fits.get(64)
                if fit is not None and fit.weight >= est.min_weight and len(off_steps) >= 3:
                    ratios.append(plain_step(est._theta(fit), 64)
                                  / statistics.median(off_steps[-5:]))
                    prices.append(est.model_for(64).per_verify_token)
            est.observe(batch, steps, tokens, ms / 1000, other)
    return ratios, prices


def test_the_plain_step_follows_the_off_steps_as_a_closed_batch_drains():
    """With long contexts each request's KV read is most of a step; without the per-request
    term the verified tokens (which follow the requests as the batch drains) took that cost
    and the plain step sank to 0.6 of what off-steps took (H100, session 30): drafting looked
    dearer than it was. Both fits replay the same trace; the earlier one must show the fault
    (or the trace no longer tests it)."""
    import statistics

    ratios, prices = _replay_plain_step_and_token_price(session29_fit=False)
    assert len(ratios) > 200
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.1)
    assert min(ratios) > 0.8
    # 64 more verified tokens took +0.8 ms of a ~17 ms step (session 29's profile): ~0.0007
    assert statistics.median(prices) < 0.002
    old_ratios, old_prices = _replay_plain_step_and_token_price(session29_fit=True)
    assert statistics.median(old_ratios) < 0.75 and statistics.median(old_prices) > 0.003


def _session40_batch4(est, one_draft_ms: float, steps: int = 240, seed: int = 3):
    """Session 40's H200 step medians at batch 4 (5x1280 draft): off 4.67 ms, three drafts
    5.69 ms, each further draft ~0.1 ms, a one-draft step `one_draft_ms` over that line."""
    rng = random.Random(seed)
    for i in range(steps):
        k = (0, 1, 3, 2, 1, 4, 3, 0)[i % 8]
        ms = 4.67 + (0.71 + 0.1 * k if k else 0.0) + (one_draft_ms if k == 1 else 0.0)
        est.observe(4, k, 4 * k, ms / 1e3 * rng.uniform(0.97, 1.03))
    return est.model_for(4)


def test_a_dear_one_draft_step_is_its_own_cost_not_every_draft_steps():
    """One-draft steps 1.2 ms over the line through the others (session 40, H200, batch 4:
    6.84 against 5.69 ms for three drafts): the premium is fitted apart, so three drafts are
    priced as measured. The line alone (`one_draft_term=False`, the fit before) spreads it
    over the draft pass and the draft steps, and prices three drafts ~0.25 ms dearer. (The
    term is opt-in since session 41, VLLM_BASS_COST_FIT=one_draft: the line is the default.)"""
    model = _session40_batch4(StepCostEstimator(one_draft_term=True), 1.2)
    line = _session40_batch4(StepCostEstimator(), 1.2)
    off = 4.67
    assert model.one_draft * off == pytest.approx(1.2, abs=0.15)
    assert model.time_for(3, 12) * off == pytest.approx(5.69, abs=0.1)
    assert model.time_for(1, 4) * off == pytest.approx(off + 0.81 + 1.2, abs=0.15)
    assert line.one_draft == 0.0
    assert line.time_for(3, 12) * off > 5.69 + 0.2


def test_no_one_draft_premium_where_one_draft_is_on_the_line():
    model = _session40_batch4(StepCostEstimator(one_draft_term=True), 0.0)
    assert model.one_draft * 4.67 < 0.05
    assert model.time_for(3, 12) * 4.67 == pytest.approx(5.69, abs=0.1)


def test_times_for_prices_many_plans_as_time_for_prices_one():
    model = StepCostModel(base=1.0, per_draft_step=0.07, per_verify_token=0.004,
                          draft_pass=0.2, knee_drafts=40, past_knee_price=0.02, one_draft=0.3)
    longest = np.array([0, 0, 1, 1, 2, 5, 16, 16])
    total = np.array([0, 12, 1, 64, 8, 39, 41, 256])
    want = [model.time_for(int(a), int(b)) for a, b in zip(longest, total)]
    assert np.allclose(model.times_for(longest, total), want)
    plain = StepCostModel()
    assert np.allclose(plain.times_for(longest, total),
                       [plain.time_for(int(a), int(b)) for a, b in zip(longest, total)])


def test_measured_draft_steps_map_to_the_buckets_smallest_batch():
    """A bucket (b/2, b] is held to the graph its smallest batch replays (the smallest
    measured size holding it); buckets past the largest size get no floor."""
    est = StepCostEstimator()
    est.set_measured_draft_steps({1: 50e-6, 2: 55e-6, 4: 60e-6, 8: 80e-6, 16: 90e-6,
                                  24: 100e-6, 0: 1.0, 3: float("nan")})
    got = est.measured_draft_step
    assert got[1] == 50e-6 and got[2] == 55e-6 and got[4] == 60e-6  # batch 3: the size-4 graph
    assert got[8] == 80e-6 and got[16] == 90e-6 and got[32] == 100e-6  # batch 17: size 24
    assert 64 not in got


def test_a_measured_draft_step_is_the_fits_floor_and_the_rest_refits_around_it():
    """The drifting steps of the models'-floor test: the free fit finds drafting free and
    puts a drafting step's cost in its first pass. Held at a measured 0.1 ms, the draft step
    costs that and the first pass is refitted lower, so the steps seen are still explained;
    where the steps price a draft step above the measured time, the fit keeps theirs."""
    def drifting(est, seed=3):
        rng = random.Random(seed)
        for _ in range(30):
            est.observe(8, 1, 8, rng.uniform(6.3e-3, 8.4e-3))
        for _ in range(60):
            drafts = rng.choice([5, 6, 7])
            est.observe(8, drafts, 8 * drafts, rng.uniform(4.9e-3, 6.7e-3))
        return est

    free = drifting(StepCostEstimator())
    measured = StepCostEstimator()
    measured.set_measured_draft_steps({8: 0.1e-3})
    drifting(measured)
    a, a_free = (plain_step(est._theta(est.fits[8]), 8) for est in (measured, free))
    got, was = measured.model_for(8), free.model_for(8)
    assert was.per_draft_step < 1e-3
    assert got.per_draft_step * a == pytest.approx(0.1e-3, rel=1e-6)
    assert got.draft_pass * a < was.draft_pass * a_free
    # the drafting steps the window holds most (5-7 drafts, 4.9-6.7 ms) cost about what
    # the free fit says they cost (seconds)
    for k in (5, 6, 7):
        assert got.time_for(k, 8 * k) * a == pytest.approx(
            was.time_for(k, 8 * k) * a_free, rel=0.05)
        assert 4.9e-3 < got.time_for(k, 8 * k) * a < 6.7e-3
    honest = StepCostEstimator()
    honest.set_measured_draft_steps({8: 0.05e-3})
    rng = random.Random(4)
    for _ in range(80):
        drafts = rng.choice([0, 1, 3, 5])
        honest.observe(8, drafts, 8 * drafts, 5.0e-3 * (1 + 0.04 * drafts))
    assert honest.model_for(8).per_draft_step == pytest.approx(0.04, rel=0.1)


def test_session45_trace_a_measured_draft_step_shortens_the_batch8_plan():
    """Replay of session 45's call-3 step trace (H200, BASS default, 4x1024 draft, alpha
    0.8, closed batches of 8): the free fit priced a draft step at ~0.004 of a plain step
    (its first pass ~0.5), so the best uniform length at alpha 0.8 was the bound (16),
    where fixed K=6-8 ran 10-30% faster (session 46). The shapes' own medians put a draft
    step near 0.1 ms; held at that, the best length is shorter."""
    free, measured = StepCostEstimator(), StepCostEstimator()
    measured.set_measured_draft_steps({8: 0.1e-3})
    for step in _trace_steps("session45", "step_trace_call3_bass_default_4x1024_alpha08.csv.gz"):
        for est in (free, measured):
            est.observe(*step)

    def best_length(est, alpha=0.8, batch=8, bound=16):
        model = est.model_for(batch)
        goodput = {k: (1 - alpha ** (k + 1)) / (1 - alpha) / model.time_for(k, batch * k)
                   for k in range(1, bound + 1)}
        return max(goodput, key=goodput.get)

    assert free.model_for(8).per_draft_step < 0.01
    assert best_length(free) == 16
    assert 6 <= best_length(measured) <= 12


@pytest.mark.cpu
def test_a_young_bucket_borrows_the_nearest_mature_fit_when_asked():
    """`borrow_young` (the scheduler's default since session 52): a batch size whose fit has
    seen few drafting steps plans with the nearest one that has seen enough, its plain step
    extrapolated by the per-request term. Session 51's trace: the batch-64 bucket's first
    two drafting steps took 12 ms against ~6 off, its own fit priced a draft 1.6-1.9x an
    off-step, and the batch stayed off."""
    from vllm_bass.policy.cost_model import BORROW_DRAFTING_WEIGHT

    def law_ms(batch, draft_steps, verify):
        ms = 4.0 + 0.03 * batch + 0.003 * verify
        return ms + (0.5 + 0.17 * draft_steps if draft_steps else 0.0)

    def feed(est):
        for i in range(60):  # batch 32: drafting at 1-3 and some off-steps
            d = (0, 1, 2, 3)[i % 4]
            est.observe(32, d, 32 * d, law_ms(32, d, 32 * d) / 1e3)
        for _ in range(6):  # batch 64: off-steps, then two dear drafting steps
            est.observe(64, 0, 0, law_ms(64, 0, 0) / 1e3)
        for _ in range(2):
            est.observe(64, 1, 64, 12.0e-3)

    def one_draft(model, batch):
        return model.time_for(1, batch) / model.time_for(0, 0)

    own, borrowing = StepCostEstimator(), StepCostEstimator(borrow_young=True)
    feed(own)
    feed(borrowing)
    truth = law_ms(64, 1, 64) / law_ms(64, 0, 0)  # 1.15x
    assert one_draft(own.model_for(64), 64) > 1.3 * truth, "the young fit alone: dear"
    assert one_draft(borrowing.model_for(64), 64) == pytest.approx(truth, rel=0.1)
    # a bucket with enough drafting steps of its own plans with them, as without borrowing
    for est in (own, borrowing):
        for _ in range(int(BORROW_DRAFTING_WEIGHT) + 4):
            est.observe(64, 1, 64, law_ms(64, 1, 64) / 1e3)
    assert borrowing.fits[64].draft_weight >= BORROW_DRAFTING_WEIGHT
    assert borrowing.model_for(64) == own.model_for(64)
    # without any mature bucket the young one keeps its own fit (or the prior)
    lone, plain_fit = StepCostEstimator(borrow_young=True), StepCostEstimator()
    for est in (lone, plain_fit):
        for _ in range(8):
            est.observe(64, 0, 0, law_ms(64, 0, 0) / 1e3)
    assert lone._donor(64) is None
    assert lone.model_for(64) == plain_fit.model_for(64)
