"""Draft-length policies on hand-built acceptance sequences."""

from dataclasses import replace

import numpy as np
import pytest

from vllm_bass.config import BassConfig, BassConfigError
from vllm_bass.policy.per_request import PerRequestDraftLength, StepCostModel
from vllm_bass.policy.factory import make_policy
from vllm_bass.policy.policies import BassAlgorithm1, DraftPlan, FixedDraftLength, Verified

pytestmark = [pytest.mark.cpu]


def step(policy, accepted_counts, length=None):
    length = policy.length if length is None else length
    policy.observe([Verified(f"r{i}", length, a) for i, a in enumerate(accepted_counts)])
    return policy.length


def test_algorithm1_hand_trajectory():
    p = BassAlgorithm1(initial=7, increment=2, limit=32, shrink_divisor=10)
    assert p.length == 7
    assert step(p, [7, 2]) == 9          # someone accepted the whole draft: +2
    assert step(p, [3, 1]) == 8          # shrink ceil(9/10) = 1
    assert step(p, [2, 0]) == 6          # shrank last step too: ceil(8/10) + 1 = 2
    assert step(p, [5, 1]) == 5          # 6 - 2 = 4, but never below max accepted (5)
    assert step(p, [5]) == 7             # full acceptance again: +2, shrink streak reset
    assert step(p, [0]) == 6             # single shrink: ceil(7/10) = 1
    assert list(p.history) == [7, 9, 8, 6, 5, 7, 6]


def test_algorithm1_grows_to_limit_and_shrinks_to_one():
    p = BassAlgorithm1(initial=7, increment=2, limit=32, shrink_divisor=10)
    lengths = [step(p, [p.length]) for _ in range(15)]
    assert lengths[:4] == [9, 11, 13, 15] and lengths[-1] == 32 and max(lengths) == 32
    lengths = [step(p, [0]) for _ in range(12)]
    assert lengths[:3] == [28, 24, 20]   # 32-ceil(3.2)=28; 28-(3+1)=24; 24-(3+1)=20
    assert lengths[-1] == 1 and min(lengths) == 1


def test_algorithm1_no_observation_keeps_length():
    p = BassAlgorithm1()
    p.observe([])
    assert p.length == 7 and list(p.history) == [7]


def test_fixed_and_factory():
    assert FixedDraftLength(5).plan(["a", "b"]).batch_length == 5
    cfg = BassConfig(draft_model="d", num_speculative_tokens=12, draft_length_policy="bass",
                     initial_draft_length=4, draft_length_increment=3, auto_off=False)
    p = make_policy(cfg)  # auto_off=True wraps it (tests/policy/test_auto_off.py)
    assert isinstance(p, BassAlgorithm1) and p.length == 4 and p.limit == 12
    assert step(p, [4]) == 7 and step(p, [7]) == 10 and step(p, [10]) == 12


def test_per_request_lengths_follow_acceptance():
    cfg = BassConfig(draft_model="d", num_speculative_tokens=16, draft_length_policy="per_request")
    p = PerRequestDraftLength(cfg, StepCostModel(base=1.0, per_draft_step=0.05,
                                                 per_verify_token=0.05))
    for _ in range(30):  # "good" accepts everything, "bad" rejects the first token
        p.observe([Verified("good", 8, 8), Verified("bad", 8, 0)])
    plan = p.plan(["good", "bad"])
    assert plan.length_for("good") > plan.length_for("bad")
    assert plan.batch_length == plan.length_for("good")
    assert p.alpha("good") > 0.9 > 0.2 > p.alpha("bad")


def test_per_request_turns_off_when_drafts_never_accept_then_probes():
    cfg = BassConfig(draft_model="d", num_speculative_tokens=8, draft_length_policy="per_request")
    p = PerRequestDraftLength(cfg, StepCostModel(base=1.0, per_draft_step=0.3, per_verify_token=0.02))
    for _ in range(30):
        p.observe([Verified("a", 4, 0), Verified("b", 4, 0)])
    plans = [p.plan(["a", "b"]) for _ in range(p.probe_interval)]
    assert all(pl.batch_length == 0 for pl in plans[:-1]), "speculation should be off"
    assert plans[-1].batch_length == 1, "a probe step re-measures acceptance"


def brute_force_rate(alphas, cost):
    """Expected tokens per unit of step time of one plan, term by term."""
    def rate(ls):
        gain = sum(1 + sum(a ** j for j in range(1, l + 1)) for a, l in zip(alphas, ls))
        return gain / cost.step_time(list(ls))
    return rate


def test_per_request_optimum_matches_brute_force():
    import itertools

    cfg = BassConfig(draft_model="d", num_speculative_tokens=4, draft_length_policy="per_request")
    cost = StepCostModel(base=1.0, per_draft_step=0.12, per_verify_token=0.08)
    p = PerRequestDraftLength(cfg, cost)
    alphas = [0.95, 0.7, 0.3]
    got = p.best_lengths(alphas)

    rate = brute_force_rate(alphas, cost)
    best = max(itertools.product(range(5), repeat=3), key=rate)
    assert rate(got) == pytest.approx(rate(best), rel=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_per_request_single_sequence_matches_brute_force(seed):
    """Batch 1 takes a direct scan over the lengths; it must find the brute-force optimum
    for any acceptance and costs (0 included: drafting that does not pay)."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 33))
    cfg = BassConfig(draft_model="d", num_speculative_tokens=k, draft_length_policy="per_request")
    cost = StepCostModel(base=1.0, per_draft_step=float(rng.uniform(0.001, 0.6)),
                         per_verify_token=float(rng.uniform(0.0, 0.1)),
                         draft_pass=float(rng.uniform(0.0, 0.5)))
    alpha = float(rng.uniform(0.0, 1.0))
    got = PerRequestDraftLength(cfg, cost).best_lengths([alpha])

    def rate(l):
        return (1 + sum(alpha ** j for j in range(1, l + 1))) / cost.step_time([l])

    assert rate(got[0]) == pytest.approx(max(rate(l) for l in range(k + 1)), rel=1e-12)


def test_per_request_auto_off_can_be_disabled():
    cfg = BassConfig(draft_model="d", num_speculative_tokens=8, draft_length_policy="per_request",
                     auto_off=False)
    p = PerRequestDraftLength(cfg, StepCostModel(base=1.0, per_draft_step=0.3, per_verify_token=0.02))
    for _ in range(30):
        p.observe([Verified("a", 4, 0)])
    assert p.plan(["a"]).batch_length == 1


def test_algorithm1_history_is_bounded():
    """A long-running server observes millions of steps: the length history keeps the last
    HISTORY_LENGTH only."""
    from vllm_bass.policy.policies import HISTORY_LENGTH, BassAlgorithm1, Verified

    p = BassAlgorithm1()
    for step in range(3 * HISTORY_LENGTH):
        p.observe([Verified("r", p.length, p.length if step % 2 else 0)])
    assert len(p.history) == HISTORY_LENGTH and p.history[-1] == p.length


def test_within_token_budget_keeps_the_most_valuable_draft_positions():
    """A verification above the largest CUDA-graph size runs without graphs (3-4x slower on
    the H100): plans are cut to the budget, keeping each sequence a prefix of its draft and
    the positions of highest expected gain alpha^j."""
    from vllm_bass.policy.policies import within_token_budget

    ids = ["hi", "mid", "lo"]
    alpha = {"hi": 0.9, "mid": 0.6, "lo": 0.3}.get
    plan = DraftPlan(8, {"hi": 8, "mid": 8, "lo": 8})
    assert within_token_budget(plan, ids, 27, alpha) is plan  # 3 + 24 fits
    cut = within_token_budget(plan, ids, 3 + 10, alpha)
    lengths = [cut.length_for(r) for r in ids]
    assert sum(lengths) == 10 and lengths[0] >= lengths[1] >= lengths[2], lengths
    # every kept position is worth at least every dropped one
    kept = [alpha(r) ** j for r, n in zip(ids, lengths) for j in range(1, n + 1)]
    dropped = [alpha(r) ** j for r, n in zip(ids, lengths) for j in range(n + 1, 9)]
    assert min(kept) >= max(dropped)
    assert cut.batch_length == max(lengths)
    # batch-length plans: the longest uniform length that fits; no room: no drafts
    assert within_token_budget(DraftPlan(7), ids, 3 + 10).batch_length == 3
    assert within_token_budget(DraftPlan(7), ids, 2).batch_length == 0
    assert within_token_budget(DraftPlan(7, probe=True), ids, 3 + 10).probe
    assert within_token_budget(plan, ids, None, alpha) is plan


def test_per_request_plans_within_the_token_budget_as_part_of_the_optimum():
    """With a token budget the per_request optimum respects it by itself and prices the
    draft steps of what it keeps: cutting the unbudgeted plan afterwards would keep a few
    long drafts (and the whole batch's draft steps for them); the budgeted plan is at least
    as fast under the cost model and no longer."""
    from vllm_bass.policy.policies import within_token_budget

    cost = StepCostModel(base=1.0, per_draft_step=0.05, per_verify_token=0.0005,
                         draft_pass=0.2)
    rng = np.random.default_rng(0)
    alphas = list(rng.uniform(0.3, 0.95, 128))
    ids = [str(i) for i in range(128)]
    p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=16,
                                         draft_length_policy="per_request"), cost)
    free = p.best_lengths(alphas)
    assert 128 + sum(free) > 512  # the budget binds
    p.token_budget = 512
    budgeted = p.best_lengths(alphas)
    assert 128 + sum(budgeted) <= 512
    cut = within_token_budget(DraftPlan(max(free), dict(zip(ids, free))), ids, 512,
                              dict(zip(ids, alphas)).get)
    cut_lengths = [cut.length_for(r) for r in ids]

    def rate(lengths):
        tokens = sum(1 + sum(a ** j for j in range(1, n + 1)) for a, n in zip(alphas, lengths))
        return tokens / cost.step_time(lengths)

    assert rate(budgeted) >= rate(cut_lengths) - 1e-9
    assert max(budgeted) <= max(free)


def test_per_request_re_measures_sequences_it_leaves_undrafted():
    """A sequence planned no draft is never verified, so its estimate cannot recover; while
    the batch drafts it gets one token every SEQUENCE_PROBE_INTERVAL-th step (on the H100 at
    batch 256 such sequences, their estimates low by chance, finished last)."""
    from vllm_bass.policy.per_request import SEQUENCE_PROBE_INTERVAL

    p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=8,
                                         draft_length_policy="per_request"),
                              StepCostModel(base=1.0, per_draft_step=0.05,
                                            per_verify_token=0.05))
    for _ in range(20):
        p.observe([Verified("good", 4, 4), Verified("bad", 4, 0)])
    plans = [p.plan(["good", "bad"]) for _ in range(4 * SEQUENCE_PROBE_INTERVAL)]
    assert all(plan.length_for("good") >= 2 for plan in plans)
    bad = [plan.length_for("bad") for plan in plans]
    assert bad.count(1) == 4 and bad.count(0) == len(bad) - 4, bad
    assert bad[SEQUENCE_PROBE_INTERVAL - 1] == 1
    p.forget("bad")
    assert "bad" not in p._undrafted


def test_keep_best_positions_is_exact_with_ties():
    """Equal gains (alpha 1 everywhere, or equal alphas) still keep exactly `room` positions,
    each row a prefix of its draft."""
    from vllm_bass.policy.policies import keep_best_positions

    lengths = np.array([5, 3, 4])
    for alphas in ([1.0, 1.0, 1.0], [0.7, 0.7, 0.7], [0.9, 0.0, 0.5]):
        gains = np.array(alphas)[:, None] ** np.arange(1, 6)[None, :]
        for room in range(0, 13):
            kept = keep_best_positions(gains, lengths, room)
            assert kept.sum() == min(room, lengths.sum()), (alphas, room, kept)
            assert (kept <= lengths).all() and (kept >= 0).all()


def test_per_request_takes_one_length_for_all_unless_ragged_pays():
    """With uniform_plan_margin on, alike sequences (estimates scattered around one alpha,
    as on the H100 at alpha 0.8) get one length for all, a uniform plan (`per_request` None:
    fixed K's path); a ragged plan is taken only when it promises the margin more than the
    best uniform length. Off (the default), the ragged optimum stands."""
    RAGGED_MIN_GAIN = 0.10
    cost = StepCostModel(base=1.0, per_draft_step=0.02, per_verify_token=0.0005,
                         draft_pass=0.5)
    off = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=16,
                                           draft_length_policy="per_request"), cost)
    p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=16,
                                         draft_length_policy="per_request",
                                         uniform_plan_margin=RAGGED_MIN_GAIN), cost)
    p.token_budget = off.token_budget = 256
    rng = np.random.default_rng(1)
    alike = list(np.clip(rng.normal(0.8, 0.06, 64), 0.0, 1.0))
    ragged = p.best_lengths(alike)
    assert len(set(ragged)) > 1  # the unconstrained optimum spreads them
    assert off.choose_lengths(alike) == ragged
    lengths = p.choose_lengths(alike)
    assert len(set(lengths)) == 1 and lengths[0] == (256 - 64) // 64
    assert p.plan_rate(alike, lengths) * (1 + RAGGED_MIN_GAIN) >= p.plan_rate(alike, ragged)
    ids = [f"r{i}" for i in range(64)]
    p.estimates.alpha = dict(zip(ids, alike)).get
    plan = p.plan(ids)
    assert plan.per_request is None and plan.batch_length == 3

    # a sequence that accepts everything beside one that accepts nothing, verification
    # priced high (GPU-bound): drafting for the second costs more than the margin
    costly = StepCostModel(base=1.0, per_draft_step=0.12, per_verify_token=0.05,
                           draft_pass=0.05)
    q = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=8,
                                         draft_length_policy="per_request",
                                         uniform_plan_margin=RAGGED_MIN_GAIN), costly)
    lengths = q.choose_lengths([0.99, 0.0])
    assert lengths[0] > 0 == lengths[1]
    k, uniform_rate = q.best_uniform_length([0.99, 0.0])
    assert q.plan_rate([0.99, 0.0], lengths) > uniform_rate * (1 + RAGGED_MIN_GAIN)


def test_plan_rate_matches_the_expected_tokens_per_step_time():
    cost = StepCostModel(base=1.0, per_draft_step=0.1, per_verify_token=0.01, draft_pass=0.2)
    p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=8,
                                         draft_length_policy="per_request"), cost)
    alphas, lengths = [0.9, 0.5, 1.0], [4, 0, 3]
    tokens = sum(1 + sum(a ** j for j in range(1, n + 1)) for a, n in zip(alphas, lengths))
    assert p.plan_rate(alphas, lengths) == pytest.approx(tokens / cost.step_time(lengths))


def test_per_request_explores_longer_drafts_while_the_fit_saw_one_length():
    """With `explore_lengths` set (the scheduler's cost fit saw one length only), every
    EXPLORE_INTERVAL-th drafting step drafts longer: every other request +2, then every
    request +1, within k_max and the token budget; never on off-steps; never when off."""
    from vllm_bass.policy.per_request import EXPLORE_INTERVAL

    def policy(**kw):
        p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=4, **kw),
                                  StepCostModel(base=1.0, per_draft_step=0.12,
                                                per_verify_token=0.01, draft_pass=0.05))
        p.probes.need_off_sample = False
        p._last_key = None
        return p

    ids = ["a", "b", "c"]
    assert not BassConfig(draft_model="d").explore_draft_lengths  # off by default (s14)
    p = policy(explore_draft_lengths=True)
    p.choose_lengths = lambda alphas, remaining=None: [1, 1, 4]
    p.explore_lengths = True
    seen = [p.plan(ids).per_request for _ in range(2 * EXPLORE_INTERVAL)]
    explored = [i for i, plan in enumerate(seen) if plan != dict(zip(ids, [1, 1, 4]))]
    assert explored == [EXPLORE_INTERVAL - 1, 2 * EXPLORE_INTERVAL - 1]
    assert seen[explored[0]] == {"a": 3, "b": 1, "c": 4}  # every other +2, capped at k_max
    assert seen[explored[1]] == {"a": 2, "b": 2, "c": 4}  # every request +1
    p.token_budget = 3 + 6  # room for 6 drafts: the +2 exploration (8) does not fit
    assert all(p.plan(ids).per_request == dict(zip(ids, [1, 1, 4]))
               for _ in range(2 * EXPLORE_INTERVAL - 1))
    p.explore_lengths = False
    p.token_budget = None
    assert all(p.plan(ids).per_request == dict(zip(ids, [1, 1, 4]))
               for _ in range(3 * EXPLORE_INTERVAL))
    off = policy(explore_draft_lengths=False)
    off.choose_lengths = lambda alphas, remaining=None: [1, 1, 4]
    off.explore_lengths = True
    assert all(off.plan(ids).per_request == dict(zip(ids, [1, 1, 4]))
               for _ in range(3 * EXPLORE_INTERVAL))


def _closed(k=16, share=0.0, cost=None):
    p = PerRequestDraftLength(
        BassConfig(draft_model="d", num_speculative_tokens=k, draft_length_policy="per_request"),
        cost or StepCostModel(base=1.0, per_draft_step=0.03, per_verify_token=0.001,
                              draft_pass=0.1))
    p.per_request_share = share
    return p


def test_a_closed_batch_drafts_for_its_slowest_requests():
    """A closed batch of six alpha-0.9 requests and two alpha-0.3 ones, step time flat in
    the batch (share 0, batch 8 on the H100): the batch ends when the 0.3s do, and long
    drafts for the 0.9s only lengthen every step until then. Tokens per second would draft
    long for the 0.9s; the closed plan keeps the longest draft near what the 0.3s want."""
    alphas = [0.9] * 6 + [0.3] * 2
    p = _closed()
    open_lengths = p.best_lengths(alphas)
    assert max(open_lengths) >= 8
    cap = p.closed_batch_cap(alphas, [128] * 8)
    assert 1 <= cap <= 3
    lengths = p.choose_lengths(alphas, [128] * 8)
    assert max(lengths) == cap and min(lengths) >= 1

    def makespan(length):  # expected steps of the slowest times the step's cost
        r = (1 - 0.3 ** (length + 1)) / (1 - 0.3)
        return p.cost.time_for(length, 8 * length) * 128 / r
    assert makespan(cap) == min(makespan(k) for k in range(17))


def test_a_closed_batch_that_shrinks_drafts_for_its_fast_requests():
    """Where most of a step's time grows with the batch (share 0.7, batch 256 on the H100),
    the fast requests finishing early shrinks every later step: the closed plan drafts even
    though its slowest requests alone would not pay for drafting."""
    cost = StepCostModel(base=1.0, per_draft_step=0.06, per_verify_token=0.0004,
                         draft_pass=0.2)  # one drafted token for all: 1.36 plain steps
    alphas = [0.9, 0.6, 0.9, 0.3] * 64
    flat, shrinking = _closed(cost=cost, share=0.0), _closed(cost=cost, share=0.7)
    assert flat.closed_batch_cap([0.3] * 256, [128] * 256) == 0
    assert shrinking.closed_batch_cap(alphas, [128] * 256) >= 2
    assert shrinking.closed_batch_cap(alphas, [128] * 256) > flat.closed_batch_cap(
        alphas, [128] * 256)


def test_a_closed_batch_of_alike_requests_plans_as_tokens_per_second():
    """Requests alike in acceptance and tokens left finish together: the batch's time is
    one request's, so the closed plan's longest draft is the token-rate optimum's."""
    for alpha in (0.3, 0.6, 0.8, 0.95):
        for share in (0.0, 0.7):
            p = _closed(share=share)
            assert p.closed_batch_cap([alpha] * 16, [100] * 16) == max(
                p.best_lengths([alpha] * 16)), (alpha, share)


def test_a_request_nearly_done_does_not_set_the_closed_cap():
    """The slow request with 2 tokens left is done in a step or two: the cap follows the
    fast requests, which now set the batch's end."""
    p = _closed()
    alphas = [0.9] * 7 + [0.3]
    assert p.closed_batch_cap(alphas, [100] * 8) <= 3
    assert p.closed_batch_cap(alphas, [100] * 7 + [2]) >= 8


def _closed_margin(margin, cost, share=0.0):
    p = PerRequestDraftLength(
        BassConfig(draft_model="d", num_speculative_tokens=16,
                   draft_length_policy="per_request", closed_batch_off_margin=margin), cost)
    p.per_request_share = share
    return p


def test_the_closed_plan_turns_a_drafting_batch_off_only_past_its_margin():
    """One request whose drafts are hardly accepted sets a flat closed batch's end (share 0:
    the others finishing early saves nothing), so off ends the batch sooner, though the
    other seven make drafting pay in tokens per second. The closed objective turns the
    batch off only where it expects off to be closed_batch_off_margin sooner than the best
    drafting length; with the margin None (before session 49) never. With
    closed_batch_plan off, a closed batch plans as an open one."""
    cost = StepCostModel(base=1.0, per_draft_step=0.06, per_verify_token=0.001,
                         draft_pass=0.15)
    alphas = [0.9] * 7 + [0.05]
    remaining = [100] * 8
    # the slowest request's expected steps times the step's cost, by longest draft
    times = [cost.time_for(k, 8 * k) * 100 * (1 - 0.05) / (1 - 0.05 ** (k + 1))
             for k in range(17)]
    gain = min(times[1:]) / times[0] - 1.0
    default = BassConfig(draft_model="d").closed_batch_off_margin
    assert gain > default  # off ends this batch sooner by more than the default margin
    p = _closed_margin(default, cost)
    assert p.closed_batch_cap(alphas, remaining) == 0
    cap, off_gain = p.closed_batch_choice(alphas, remaining)
    assert cap == 0 and off_gain == pytest.approx(gain, rel=1e-6)
    assert max(p.best_lengths(alphas)) > 0  # tokens per second would draft
    assert p.choose_lengths(alphas, remaining) == [0] * 8
    for margin in (gain * 1.01, None):
        keeps = _closed_margin(margin, cost)
        assert max(keeps.choose_lengths(alphas, remaining)) >= 1, margin
    q = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=16,
                                         draft_length_policy="per_request",
                                         closed_batch_plan=False), cost)
    assert q.choose_lengths(alphas, remaining) == q.best_lengths(alphas)


def test_closed_batch_off_margin_is_validated():
    for bad in (-0.1, 1.5, "0.1", True):
        with pytest.raises(BassConfigError, match="closed_batch_off_margin"):
            BassConfig(draft_model="d", closed_batch_off_margin=bad)
    assert BassConfig(draft_model="d", closed_batch_off_margin=None).closed_batch_off_margin \
        is None


def test_per_request_plan_is_reused_until_an_estimate_moves():
    """Solving a plan is most of the policy's host time per step: it is solved again when
    the batch, the costs or an estimate (by REPLAN_ALPHA_CHANGE) changed, or after
    REPLAN_EVERY steps, and reused otherwise."""
    from vllm_bass.policy import per_request as module

    p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=8,
                                         draft_length_policy="per_request"))
    ids = ["a", "b", "c"]
    alphas = {"a": 0.7, "b": 0.7, "c": 0.7}
    p.estimates.alpha = lambda r: alphas[r]
    solved = []
    choose = p.choose_lengths
    p.choose_lengths = lambda *args: solved.append(1) or choose(*args)
    first = p.plan(ids)
    assert len(solved) == 1
    alphas["a"] = 0.7 + module.REPLAN_ALPHA_CHANGE / 2  # a small move: the plan stands
    assert p.plan(ids) == first and len(solved) == 1
    alphas["a"] = 0.7 + 2 * module.REPLAN_ALPHA_CHANGE  # a large one: solved again
    p.plan(ids)
    assert len(solved) == 2
    alphas["a"] += module.REPLAN_ALPHA_CHANGE / 4  # small moves, but the plan ages
    for _ in range(module.REPLAN_EVERY):
        p.plan(ids)
    assert len(solved) == 3
    p.plan(ids[:2])  # another batch
    assert len(solved) == 4
    ids2 = ids[:2]
    p.cost = replace(p.cost, per_draft_step=p.cost.per_draft_step * (
        1 + module.COST_TOLERANCE / 2))  # a cost fit that hardly moved: the plan stands
    p.plan(ids2)
    assert len(solved) == 4
    p.cost = replace(p.cost, per_draft_step=p.cost.per_draft_step * (
        1 + 3 * module.COST_TOLERANCE))  # one that moved: solved again
    p.plan(ids2)
    assert len(solved) == 5
    for r in ids2:  # every estimate a little (each below REPLAN_ALPHA_CHANGE, the mean not)
        alphas[r] += 1.5 * module.REPLAN_MEAN_CHANGE
    p.plan(ids2)
    assert len(solved) == 6
    alphas["a"] = 0.0  # the same plan as a fresh policy's, whatever came before
    fresh = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=8,
                                             draft_length_policy="per_request"))
    fresh.estimates.alpha = p.estimates.alpha
    fresh.cost = p.cost  # (the costs moved above)
    assert p.plan(ids) == fresh.plan(ids)


def test_per_request_large_batch_keeps_its_plan_for_plan_reuse_steps():
    """From PLAN_REUSE_MIN_BATCH requests a solved plan holds for PLAN_REUSE_STEPS calls
    however the estimates move (among that many requests one moves every step, session 54),
    and finished requests leave it; a new request, moved costs, a closed batch near its end
    or a smaller batch solve it again."""
    from vllm_bass.policy import per_request as module

    def policy():
        p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=8,
                                             draft_length_policy="per_request"))
        p.estimates.alpha = lambda r: alphas[r]
        p.cost = StepCostModel(base=1.0, per_draft_step=0.02, per_verify_token=0.002,
                               draft_pass=0.05)
        choose = p.choose_lengths
        p.choose_lengths = lambda *args: solved.append(1) or choose(*args)
        return p

    n = module.PLAN_REUSE_MIN_BATCH
    assert module.PLAN_REUSE_STEPS >= 2
    ids = [f"r{i}" for i in range(n + 1)]
    alphas = {r: (0.9 if i % 2 else 0.4) for i, r in enumerate(ids)}
    solved: list[int] = []
    p = policy()
    first = p.plan(ids)
    assert len(solved) == 1 and first.per_request is not None
    for r in ids:  # every estimate far off: a plan of these would differ
        alphas[r] = 1.3 - alphas[r]
    for _ in range(module.PLAN_REUSE_STEPS - 1):
        assert p.plan(ids) == first
    assert len(solved) == 1
    p.plan(ids)  # the plan's age is up: solved for the new estimates
    assert len(solved) == 2
    again = p.plan(ids[1:])  # a request finished: the others keep their lengths
    assert len(solved) == 2
    assert again.per_request == {r: p._last_by_id[r] for r in ids[1:]}
    alphas["new"] = 0.7
    p.plan(ids[1:] + ["new"])  # a request joined
    assert len(solved) == 3
    p.cost = replace(p.cost, per_draft_step=p.cost.per_draft_step * (
        1 + 3 * module.COST_TOLERANCE))  # moved costs
    p.plan(ids[1:] + ["new"])
    assert len(solved) == 4
    p.remaining = {r: module.REPLAN_NEAR_END for r in ids}  # a closed batch near its end
    p.plan(ids)
    p.plan(ids)
    assert len(solved) == 6
    solved.clear()
    small = policy()  # below PLAN_REUSE_MIN_BATCH the estimates' rules decide alone
    few = ids[:n - 1]
    small.plan(few)
    for r in few:
        alphas[r] = 1.3 - alphas[r]
    small.plan(few)
    assert len(solved) == 2


def test_per_request_one_length_for_all_takes_fixed_k_path():
    """A plan that gives every sequence the same length is fixed K's plan (no per-request
    lengths), margin or not, so the scheduler trims no placeholders."""
    p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=8,
                                         draft_length_policy="per_request"))
    ids = [f"r{i}" for i in range(4)]
    p.estimates.alpha = lambda r: 0.8
    plan = p.plan(ids)
    assert plan.per_request is None and plan.batch_length > 0
    p.estimates.alpha = {"r0": 0.99, "r1": 0.99, "r2": 0.05, "r3": 0.05}.get
    p.cost = StepCostModel(base=1.0, per_draft_step=0.02, per_verify_token=0.05,
                           draft_pass=0.05)
    ragged = p.plan(ids)
    assert ragged.per_request is not None and len(set(ragged.per_request.values())) > 1


def test_closed_batch_cap_matches_the_loop_over_lengths():
    """The cap over every length at once equals the length-by-length minimum."""
    import math

    p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=12,
                                         draft_length_policy="per_request"))
    p.per_request_share = 0.4
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        alphas = list(rng.uniform(0.0, 0.98, n))
        remaining = list(rng.integers(1, 200, n))
        p.token_budget = int(rng.choice([0, 64, 512])) or None
        best, best_time = 0, math.inf
        a = np.clip(np.asarray(alphas), 0.0, 0.999)
        alive = 1 - 0.4 + 0.4 * (n - np.arange(n)) / n
        for length in range(p.k_max + 1):
            if p.token_budget is not None and length * n > p.token_budget - n:
                break
            steps = np.sort(np.maximum(np.asarray(remaining, float), 1.0) * (1 - a)
                            / (1 - a ** (length + 1)))
            t = p.cost.time_for(length, length * n) * float(
                (np.diff(steps, prepend=0.0) * alive).sum())
            if t < best_time * (1 - 1e-9):
                best, best_time = length, t
        assert p.closed_batch_cap(alphas, remaining) == best


@pytest.mark.parametrize("seed", range(12))
def test_per_request_optimum_with_a_knee_price_matches_brute_force(seed):
    """Past knee_drafts each draft token costs past_knee_price more (the target's compute
    knee): the ragged optimum stays exact under that convex price."""
    import itertools

    rng = np.random.default_rng(seed)
    cfg = BassConfig(draft_model="d", num_speculative_tokens=5, draft_length_policy="per_request")
    cost = StepCostModel(base=1.0, per_draft_step=float(rng.uniform(0.01, 0.2)),
                         per_verify_token=float(rng.uniform(0.0, 0.05)),
                         draft_pass=float(rng.uniform(0.0, 0.2)),
                         knee_drafts=int(rng.integers(0, 10)),
                         past_knee_price=float(rng.uniform(0.0, 0.3)))
    p = PerRequestDraftLength(cfg, cost)
    alphas = [float(a) for a in rng.uniform(0.2, 0.95, size=4)]
    got = p.best_lengths(alphas)

    rate = brute_force_rate(alphas, cost)
    best = max(itertools.product(range(6), repeat=4), key=rate)
    assert rate(got) == pytest.approx(rate(best), rel=1e-9)


def test_the_knee_price_lets_long_contexts_draft_past_the_old_bound():
    """Batch 64, alpha 0.8, the H100 profile's costs (session 29: a draft step ~0.03 of a
    plain step, 64 more verified tokens past 256 +0.8 ms of ~18): at 1024-token contexts the
    weights are ~26% of the traffic and a fourth draft pays (a fifth about as much: vLLM's
    K=4 and K=5 decode steps came out alike); at 128-token ones (68%) the plan keeps
    three, what the hard 256-token bound gave."""
    from vllm_bass.policy.cost_model import knee_price

    cfg = BassConfig(draft_model="d", num_speculative_tokens=8, draft_length_policy="per_request")
    lengths = {}
    for share in (0.26, 0.68):
        cost = StepCostModel(base=1.0, per_draft_step=0.03, per_verify_token=0.0005,
                             draft_pass=0.02, knee_drafts=256 - 64,
                             past_knee_price=knee_price(share, 256))
        p = PerRequestDraftLength(cfg, cost)
        p.token_budget = 1536 - 64
        lengths[share] = p.best_lengths([0.8] * 64)
    assert len(set(lengths[0.26])) == 1 and lengths[0.26][0] in (4, 5)
    assert set(lengths[0.68]) == {3}


def test_knee_price_is_the_weights_share_per_knee_token_in_coarse_steps():
    from vllm_bass.policy.cost_model import knee_price

    assert knee_price(0.5, 256) == pytest.approx(0.5 / 256, rel=0.05)
    assert knee_price(0.26, 256) == knee_price(0.261, 256)  # plans are not re-solved
    assert knee_price(0.1, 256) < knee_price(0.5, 256)


def _best_lengths_one_cap_at_a_time(p, alphas):
    """best_lengths as it was before session 43 solved the caps that fit the knee and the
    budget all at once: each cap's own Dinkelbach, warm-started at the best rate so far."""
    n = len(alphas)
    cost = p.cost
    alpha = np.clip(np.asarray(alphas, dtype=np.float64), 0.0, 1.0)
    gains = alpha[:, None] ** np.arange(1, p.k_max + 1)[None, :]
    expected = np.concatenate([np.zeros((n, 1)), np.cumsum(gains, axis=1)], axis=1)
    best_lengths, best_rate = np.zeros(n, dtype=np.int64), n / cost.time_for(0, 0)
    room = p._draft_room(n)
    for cap in range(1, p.k_max + 1):
        lengths, rate = p._solve_cap(gains, expected, cap, best_rate, room)
        if rate > best_rate + 1e-12:
            best_rate, best_lengths = rate, lengths
        if int(lengths.max()) < cap:
            break
    return [int(x) for x in best_lengths]


@pytest.mark.parametrize("seed", range(6))
def test_all_caps_at_once_plans_as_one_cap_at_a_time(seed):
    """The caps that fit the knee and the budget are solved together (host time); the plan
    is as good as solving them one by one, with and without a binding knee or budget."""
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(2, 48))
        cost = StepCostModel(base=1.0, per_draft_step=float(rng.uniform(0.005, 0.3)),
                             per_verify_token=float(rng.uniform(0.0005, 0.03)),
                             draft_pass=float(rng.uniform(0.0, 0.4)),
                             knee_drafts=int(rng.integers(16, 400)) if rng.random() < 0.6
                             else None, past_knee_price=float(rng.uniform(0.0, 0.05)))
        p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=16), cost)
        p.token_budget = int(rng.integers(n, 600)) if rng.random() < 0.5 else None
        alphas = list(np.clip(rng.normal(rng.uniform(0.2, 0.97), 0.15, n), 0.0, 1.0))
        got, want = p.best_lengths(alphas), _best_lengths_one_cap_at_a_time(p, alphas)
        assert p.plan_rate(alphas, got) == pytest.approx(p.plan_rate(alphas, want), rel=1e-9)
