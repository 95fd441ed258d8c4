"""Auto-off around the batch-length policies (`bass`, `fixed`): off when drafting cannot pay,
the inner plan untouched when it does, a probe every 16 off-steps, resumption, and the inner
Algorithm 1 state frozen while off."""

import itertools
import random

import pytest

from vllm_bass.config import BassConfig
from vllm_bass.policy.auto_off import (
    AcceptanceEstimates,
    AutoOff,
    ProbeSchedule,
    expected_tokens,
)
from vllm_bass.policy.cost_model import StepCostModel
from vllm_bass.policy.per_request import PerRequestDraftLength
from vllm_bass.policy.factory import make_policy
from vllm_bass.policy.policies import (
    BassAlgorithm1,
    DraftPlan,
    FixedDraftLength,
    Verified,
)

pytestmark = [pytest.mark.cpu]

REQS = ["a", "b", "c", "d"]
# Pays at high acceptance (and at the 0.6 prior) with K=4 and 4 sequences, not at low acceptance.
COST = StepCostModel(base=1.0, per_draft_step=0.2, per_verify_token=0.02)


def cfg(policy="bass", k=4, **kw):
    return BassConfig(draft_model="d", draft_length_policy=policy, num_speculative_tokens=k,
                      initial_draft_length=min(7, k), **kw)


def feed(policy, plan, accepted):
    """Verify `plan`: each drafted request accepts accepted(req_id, length) tokens."""
    policy.observe([Verified(r, plan.length_for(r), accepted(r, plan.length_for(r)),
                             plan.probe) for r in REQS if plan.length_for(r) > 0])


def algo1_state(p: BassAlgorithm1):
    return (p.length, p.shrank_last_step, list(p.history))


def test_factory_wraps_bass_and_fixed_only_when_auto_off():
    for name, inner in (("bass", BassAlgorithm1), ("fixed", FixedDraftLength)):
        p = make_policy(cfg(name))
        assert isinstance(p, AutoOff) and isinstance(p.inner, inner)
        assert hasattr(p, "cost"), "the runner feeds measured costs only to a `cost` attribute"
        assert isinstance(make_policy(cfg(name, auto_off=False)), inner)
    assert isinstance(make_policy(cfg("per_request")), PerRequestDraftLength)


def test_expected_tokens_closed_form():
    for a, n in itertools.product([0.0, 0.3, 0.77, 0.999999, 1.0], range(0, 9)):
        assert expected_tokens(a, n) == pytest.approx(1 + sum(a ** j for j in range(1, n + 1)))


def test_decision_is_the_rate_comparison():
    """Off exactly when sum_i E_i(l) / T(l) < n / T(0), over a grid of costs and acceptance."""
    rng = random.Random(1)
    for _ in range(200):
        base = rng.uniform(0.5, 2.0)
        cost = StepCostModel(base, base * rng.uniform(0.0, 0.6), base * rng.uniform(0.0, 0.1))
        k, n = rng.randint(1, 8), rng.randint(1, 6)
        p = AutoOff(FixedDraftLength(k), cfg("fixed", k), cost)
        reqs = REQS[:n] + [f"x{i}" for i in range(n - len(REQS))]
        for r in reqs:  # a few observations of random quality per request
            for _ in range(rng.randint(0, 6)):
                p.observe([Verified(r, k, rng.randint(0, k))])
        alphas = [p.estimates.alpha(r) for r in reqs]
        spec = sum(1 + sum(a ** j for j in range(1, k + 1)) for a in alphas) / cost.step_time(
            [k] * n)
        plain = n / cost.step_time([0] * n)
        if abs(spec - plain) < 1e-9:
            continue
        assert (p.plan(reqs).batch_length == 0) == (spec < plain), (spec, plain)


def test_turns_off_probes_every_16_steps_and_freezes_algorithm1():
    p = make_policy(cfg("bass", k=4))
    p.cost = COST
    inner = p.inner
    assert p.plan(REQS) == DraftPlan(4), "the prior (alpha 0.6) pays: speculation starts on"
    for _ in range(20):  # drafted steps in which nothing is accepted
        feed(p, DraftPlan(inner.length), lambda r, n: 0)
    assert inner.length == 1
    frozen = algo1_state(inner)
    # even one draft token does not pay now: 15 off-steps, then a one-token probe whose
    # outcome feeds the acceptance estimates only; twice over
    for _ in range(2):
        for _ in range(p.probe_interval - 1):
            assert p.plan(REQS).batch_length == 0
            p.observe([])  # what the runner sees after an off-step
        assert algo1_state(inner) == frozen, "Algorithm 1 must not change while off"
        probe = p.plan(REQS)
        assert probe == DraftPlan(1, probe=True)
        feed(p, probe, lambda r, n: 0)
        assert algo1_state(inner) == frozen, "a probe must not move Algorithm 1"


def test_off_step_keeps_algorithm1_length_for_the_resumption():
    """Off at a long draft: probes draft one token, and speculation resumes at Algorithm 1's
    last length once they show acceptance."""
    p = make_policy(cfg("bass", k=16))
    p.cost = StepCostModel(base=1.0, per_draft_step=0.3, per_verify_token=0.0)
    inner = p.inner
    for _ in range(6):  # "a" accepts 9 tokens (Algorithm 1 stays >= 9), the others none
        feed(p, DraftPlan(inner.length), lambda r, n: min(n, 9) if r == "a" else 0)
    length = inner.length
    assert length >= 9
    plans = [p.plan(REQS) for _ in range(p.probe_interval)]
    assert [pl.batch_length for pl in plans] == [0] * 15 + [1]
    for _ in range(10 * p.probe_interval):
        plan = p.plan(REQS)
        feed(p, plan, lambda r, n: n)  # probes: all accepted
        if plan.batch_length > 1:
            break
    assert plan == DraftPlan(length)


def test_resumes_when_probes_show_high_acceptance():
    p = AutoOff(FixedDraftLength(4), cfg("fixed"), COST)
    for _ in range(20):
        p.observe([Verified(r, 4, 0) for r in REQS])
    plans = [p.plan(REQS) for _ in range(p.probe_interval)]
    assert [pl.batch_length for pl in plans] == [0] * 15 + [1]
    steps_to_resume = None
    for step in range(1, 8 * p.probe_interval):
        feed(p, plans[-1], lambda r, n: n)  # every draft accepted
        plans.append(p.plan(REQS))
        if plans[-1].batch_length and plans[-2].batch_length:
            steps_to_resume = step
            break
    assert steps_to_resume is not None, "speculation did not resume"
    assert steps_to_resume <= 4 * p.probe_interval  # a few one-token probes
    assert plans[-1] == DraftPlan(4)


@pytest.mark.parametrize("name", ["bass", "fixed"])
def test_identical_to_bare_policy_where_speculation_pays(name):
    """Sequences accept each draft token with probability 0.8: with this cost every plan pays,
    so the wrapped policy answers exactly what the bare one answers, step by step."""
    cheap = StepCostModel(base=1.0, per_draft_step=0.01, per_verify_token=0.002)
    bare = make_policy(cfg(name, k=16, auto_off=False))
    wrapped = make_policy(cfg(name, k=16))
    wrapped.cost = cheap
    rng = random.Random(0)

    def geometric(r, n):
        return next((j for j in range(n) if rng.random() >= 0.8), n)

    for _ in range(200):
        want, got = bare.plan(REQS), wrapped.plan(REQS)
        assert got == want
        verified = [Verified(r, want.length_for(r), geometric(r, want.length_for(r)))
                    for r in REQS]
        bare.observe(verified)
        wrapped.observe(verified)
    if name == "bass":
        assert wrapped.inner.history == bare.history and len(set(bare.history)) > 3


def test_auto_off_false_keeps_drafting_like_algorithm1():
    p = make_policy(cfg("bass", k=8, auto_off=False))
    lengths = []
    for _ in range(20):
        plan = p.plan(REQS)
        lengths.append(plan.batch_length)
        feed(p, plan, lambda r, n: 0)
    assert min(lengths) == 1 and lengths[:4] == [7, 6, 4, 2]


def test_probe_schedule_counts_consecutive_off_steps():
    s = ProbeSchedule(4)
    assert [s.probe_due(True) for _ in range(4)] == [False, False, False, True]
    s.probe_due(True)
    s.probe_due(False)  # speculation ran: the count starts again
    assert [s.probe_due(True) for _ in range(4)] == [False, False, False, True]


def test_acceptance_estimates_have_no_prior_floor():
    """The prior decays with the data: a draft that is never accepted is estimated near 0, so
    even one cheap draft token is switched off (a fixed-weight prior floored alpha at 0.17,
    which beat this measured CPU cost of one draft step, 0.14)."""
    est = AcceptanceEstimates(ema=0.2)
    assert est.alpha("a") == pytest.approx(0.6)
    for _ in range(20):
        est.observe([Verified("a", 1, 0), Verified("b", 1, 1)])
    assert est.alpha("a") < 0.01 and est.alpha("b") > 0.99
    p = AutoOff(FixedDraftLength(1), cfg("fixed", 1), StepCostModel(1.0, 0.14, 0.0))
    assert p.plan(REQS[:3]) == DraftPlan(1)
    for _ in range(10):
        p.observe([Verified(r, 1, 0) for r in REQS[:3]])
    assert p.plan(REQS[:3]).batch_length == 0


def test_new_requests_start_from_the_pooled_acceptance():
    """An unseen request's alpha is the pooled acceptance of the requests seen so far (0.6
    before any), which outlives the requests; at a cost where drafting pays at 0.875 but
    not at 0.6, a new request drafts from its first step."""
    est = AcceptanceEstimates(ema=0.2)
    assert est.alpha("new") == pytest.approx(0.6)
    for _ in range(30):  # 7 accepted tokens and 1 rejection per step
        est.observe([Verified("a", 4, 4), Verified("b", 4, 3)])
    # (the prior's two pseudo-observations at 0.6 have decayed to 0.4 of one)
    assert est.alpha("new") == pytest.approx(7 / 8, abs=2e-3)
    est.forget("a")
    est.forget("b")
    assert est.alpha("new") == pytest.approx(7 / 8, abs=2e-3)
    cost = StepCostModel(base=1.0, per_draft_step=0.55, per_verify_token=0.0)
    assert expected_tokens(0.6, 4) < cost.step_time([4]) < expected_tokens(7 / 8, 4)
    p = AutoOff(FixedDraftLength(4), cfg("fixed"), cost)
    assert p.plan(["new"]).batch_length == 0, "the 0.6 prior does not pay here"
    for _ in range(30):
        p.observe([Verified("a", 4, 4), Verified("b", 4, 3)])
    assert p.plan(["new"]) == DraftPlan(4)


def test_forget_drops_estimates():
    """A forgotten request falls back to the pooled prior (here 8 accepted tokens per
    rejection)."""
    p = AutoOff(FixedDraftLength(4), cfg("fixed"), COST)
    for _ in range(10):
        p.observe([Verified("a", 4, 0), Verified("b", 4, 4), Verified("c", 4, 4)])
    assert p.estimates.alpha("a") < 0.3
    p.forget("a")
    assert "a" not in p.estimates.successes and "a" not in p.estimates.failures
    assert p.estimates.alpha("a") == pytest.approx(8 / 9, abs=0.02)


# alpha 0.6 (the prior), 4 drafts: 2.31 tokens in 2.21 plain steps, 1.04x plain decoding:
# pays, but close enough that what plain decoding costs decides it
MARGINAL = StepCostModel(base=1.0, per_draft_step=0.3, per_verify_token=0.002)


def test_measures_plain_step_when_the_scheduler_asks():
    """Speculation that pays stays on, except one off-step in `measure_interval` while the
    scheduler reports no recent off-step timing; none once it has one."""
    p = AutoOff(FixedDraftLength(4), cfg("fixed", 4), MARGINAL)
    p.probes.need_off_sample = True
    lengths = [p.plan(["a"]).batch_length for _ in range(20)]
    assert lengths.count(0) == 1 and lengths.index(0) == p.probes.measure_interval - 1
    p.probes.need_off_sample = False
    assert all(p.plan(["a"]).batch_length == 4 for _ in range(40))


@pytest.mark.parametrize("policy", ["fixed", "per_request"])
def test_no_measuring_off_steps_when_speculation_clearly_pays(policy):
    """A plan predicted CONFIDENT_SPEEDUP ahead of plain decoding takes no off-step to
    measure plain decoding (at alpha 0.8 each one gave up ~3.5 tokens per sequence, 5-11%
    of the steps on the H100); a marginal one does."""
    from vllm_bass.policy.auto_off import CONFIDENT_SPEEDUP, predicted_speedup

    cheap = StepCostModel(base=1.0, per_draft_step=0.01, per_verify_token=0.002)
    # drafting pays, but by less than CONFIDENT_SPEEDUP (per_request drafts shorter than
    # fixed K=4, so its draft steps must cost more for that)
    marginal = MARGINAL if policy == "fixed" else StepCostModel(
        base=1.0, per_draft_step=0.4, per_verify_token=0.002)
    for cost, measures in ((cheap, False), (marginal, True)):
        p = make_policy(cfg(policy, 4)) if policy == "per_request" else AutoOff(
            FixedDraftLength(4), cfg("fixed", 4), cost)
        p.cost = cost
        plan = p.plan(["a", "b"])
        speedup = predicted_speedup(cost, [p.estimates.alpha("a")] * 2,
                                    [plan.length_for("a"), plan.length_for("b")])
        assert (speedup >= CONFIDENT_SPEEDUP) != measures, speedup
        assert speedup > 1.0, speedup
        p.probes.need_off_sample = True
        lengths = [p.plan(["a", "b"]).batch_length for _ in range(30)]
        assert (0 in lengths) == measures, (policy, lengths)


def test_a_measurement_takes_one_off_step():
    """One off-step measures plain decoding, async scheduling included (its first off-step
    after drafting runs no draft pass since session 43)."""
    p = AutoOff(FixedDraftLength(4), cfg("fixed", 4), MARGINAL)
    p.probes.need_off_sample = True
    lengths = [p.plan(["a"]).batch_length for _ in range(20)]
    first = p.probes.measure_interval - 1
    assert lengths.count(0) == 1 and lengths[first] == 0, lengths


def test_forced_off_cycle_test_aid():
    from vllm_bass.policy.auto_off import with_test_off_cycle

    bare = FixedDraftLength(3)
    assert with_test_off_cycle(bare, {}) is bare
    p = with_test_off_cycle(bare, {"VLLM_BASS_TEST_OFF_CYCLE": "2,3"})
    assert [p.plan(["a"]).batch_length for _ in range(10)] == [3, 3, 0, 0, 0] * 2


def test_failed_probes_back_off_and_an_accepted_one_resets():
    """A draft that stays useless is probed ever more rarely (16, 32, 64, ... up to the
    cap); one accepted probe brings the interval back to 16."""
    p = AutoOff(FixedDraftLength(4), cfg("fixed"), COST)
    for _ in range(20):
        p.observe([Verified(r, 4, 0) for r in REQS])
    gaps = []
    for _ in range(6):
        steps = 1
        while p.plan(REQS).batch_length == 0:
            p.observe([])
            steps += 1
        gaps.append(steps)
        p.observe([Verified(r, 1, 0, probe=True) for r in REQS])  # the probe: rejected
    assert gaps == [16, 32, 64, 128, 256, 256]
    while p.plan(REQS).batch_length == 0:
        p.observe([])
    p.observe([Verified(r, 1, 1, probe=True) for r in REQS])  # accepted
    assert p.probe_interval == 16


def run_one_step_late(policy, steps, accepted):
    """The engine's order: step t plans (from observations up to step t-1), then observes the
    verification of step t-1's plan (the runner reads the counts back after queueing the
    draft). Returns the plans."""
    plans, previous = [], None
    for _ in range(steps):
        plan = policy.plan(REQS)
        if previous is not None and previous.batch_length:
            feed(policy, previous, accepted)
        plans.append(plan)
        previous = plan
    return plans


def test_probes_back_off_with_one_step_late_observations():
    """A rejected probe still doubles the interval and never reaches Algorithm 1 when its
    verification is observed after the next plan (the flag travels with the verification)."""
    p = make_policy(cfg("bass", k=4))
    p.cost = COST
    for _ in range(20):
        feed(p, DraftPlan(p.inner.length), lambda r, n: 0)
    frozen = algo1_state(p.inner)
    plans = run_one_step_late(p, 16 + 32 + 64 + 1, lambda r, n: 0)
    probes = [i for i, pl in enumerate(plans) if pl.batch_length]
    assert all(plans[i].probe for i in probes)
    assert [b - a for a, b in zip([-1] + probes, probes)] == [16, 32, 64]
    assert algo1_state(p.inner) == frozen


def test_algorithm1_grows_on_a_whole_draft_observed_one_step_late():
    """Algorithm 1 judges "whole draft accepted" against the verified draft length, not its
    current one: with the lag, l has already moved on when a verification arrives."""
    late, on_time = BassAlgorithm1(), BassAlgorithm1()
    run_one_step_late(late, 6, lambda r, n: n)  # every draft accepted in full
    for _ in range(5):
        feed(on_time, on_time.plan(REQS), lambda r, n: n)
    assert list(late.history) == list(on_time.history) == [7, 9, 11, 13, 15, 17]


def test_a_request_alone_leans_on_the_pooled_history():
    """At batch 1 a request's ~5-step window alone scatters too widely at low acceptance
    (alpha 0.3, one-token drafts: 10th percentile 0.07, a quarter of the steps below 0.15,
    where one draft token stops paying and speculation switched off); alone it is shrunk
    toward the pool, its own and its predecessors' longer history. Requests that differ
    keep their own estimates (the fitted shrinkage)."""
    import numpy as np

    rng = np.random.default_rng(0)
    est = AcceptanceEstimates(ema=0.2)
    values = []
    for req in range(10):
        for _ in range(60):
            est.observe([Verified(f"r{req}", 1, int(rng.random() < 0.3))])
            values.append(est.alpha(f"r{req}"))
        est.forget(f"r{req}")
    values = np.array(values[60:])
    assert np.quantile(values, 0.1) > 0.15 and (values < 0.15).mean() < 0.08
    assert 0.2 < np.median(values) < 0.4
    # one rejected draft of a first request does not read as a useless draft (an empty
    # pool did: 0 after one rejection, and the request sat switched off)
    est = AcceptanceEstimates(ema=0.2)
    est.observe([Verified("first", 3, 0)])
    assert est.alpha("first") > 0.3
    # two requests that truly differ are not pulled together
    est = AcceptanceEstimates(ema=0.2)
    for _ in range(40):
        est.observe([Verified("good", 4, 4), Verified("bad", 4, 0)])
    assert est.alpha("good") > 0.95 and est.alpha("bad") < 0.05
