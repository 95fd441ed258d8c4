"""Per-request draft lengths in one ragged batch.

Each sequence keeps an EMA estimate of its draft's per-token acceptance probability alpha
(a geometric acceptance model: P(first j drafts accepted) = alpha^j). The expected gain of
the j-th draft token is alpha^j accepted tokens, its cost is one more verified token for
that sequence plus, if it lengthens the longest draft, one more draft step for the batch.
The plan maximises expected accepted tokens per unit of step time under the cost model
T = base + [any l_i > 0] * draft_pass + per_draft_step * max_i(l_i)
    + per_verify_token * sum_i(l_i) + past_knee_price * max(0, sum_i(l_i) - knee_drafts)
    + one_draft * [max_i(l_i) = 1]
(the knee term: the target's compute knee, `cost_model.knee_price`; the last: a one-draft
step's own premium, `StepCostModel.one_draft`), solved exactly for
the ragged lengths by Dinkelbach iteration (a few passes over batch x K). Auto-off is part of
the optimum (length 0 when a draft token does not pay; all zeros turn the batch off), with a
probing step of length 1 after 16 consecutive off-steps, the interval doubling after each
rejected probe (`auto_off.ProbeSchedule`).

A closed batch (no request waits or arrives, so none takes a finished one's place; the
scheduler decides, `BassScheduler.is_closed_batch`) is done when its
slowest request is: there the longest draft is the one that minimises the batch's expected
remaining time (`closed_batch_cap`), and the ragged lengths are chosen within it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from vllm_bass.policy import auto_off
from vllm_bass.policy.auto_off import AcceptanceEstimates, ProbeSchedule, predicted_speedup
from vllm_bass.policy.cost_model import PRIOR_COSTS, StepCostModel
from vllm_bass.policy.policies import (DraftLengthPolicy, DraftPlan, Verified,
                                       keep_best_positions)

__all__ = ["PerRequestDraftLength", "StepCostModel"]

SEQUENCE_PROBE_INTERVAL = 4  # drafting steps a request sits out before a one-token draft
# Length exploration: while the cost fit has seen only one draft length for this batch size
# (`StepCostEstimator.lengths_unvaried`), every EXPLORE_INTERVAL-th drafting step drafts
# longer, alternating two shapes -- every other request 2 more, every request 1 more -- so
# the first pass, a further draft step and a verified token get separable costs. Without
# it the split is the prior's (a draft step 0.12 of a plain step, 4-25x what the H100 fits
# measure), and a plan that settled on one length kept it: the closed-batch simulation of
# the H100 step law drafted 1 token at alpha 0.6, batch 32 (1.11x plain where K=3 makes
# 1.28x).
EXPLORE_INTERVAL = 8
# A plan is solved again when an acceptance estimate moved REPLAN_ALPHA_CHANGE since it was
# solved, or the batch's estimates REPLAN_MEAN_CHANGE on average, after REPLAN_EVERY steps
# (if any moved), when a cost of the model moved COST_TOLERANCE (of a plain step, relative),
# or every step once a closed batch's request has at most REPLAN_NEAR_END tokens left (its
# end decides the batch's). Session 41 (py-spy of a host-bound H200 run, batch 4 / 16): the
# plan was 10% of the engine core's host time; estimates of few verifications move 0.05 in
# a step or two (one request of a batch sufficed), and every cost fit (8 steps) solved
# again: 78-94% of the steps planned afresh in the closed-batch simulation (128 tokens,
# batch 4-64, alpha 0.4 / the mix), 56-94% with these bounds (the rest: requests that
# finish, a closed batch's end).
REPLAN_ALPHA_CHANGE = 0.12
REPLAN_MEAN_CHANGE = 0.03
REPLAN_EVERY = 8
REPLAN_NEAR_END = 16
COST_TOLERANCE = 0.02
# From PLAN_REUSE_MIN_BATCH requests a solved plan is kept for PLAN_REUSE_STEPS plan() calls
# whatever the estimates do (0: off), while its requests stay (finished ones leave it), the
# costs and share hold and no request of a closed batch is near its end. With ~5-step
# windows, among 32+ requests some estimate moves REPLAN_ALPHA_CHANGE, and their mean
# absolute move passes REPLAN_MEAN_CHANGE, nearly every step: 96-97% of the closed mix's
# steps at batch 32-128 planned afresh (`bench_scheduler_host.py`), ~0.4 ms of host time a
# step on a 2-core CPU and ~1 ms on the H200 hosts (session 54: the default's schedule()
# took 1.5-2.5 ms a step at batch 64 against fixed K=1's 0.8-1.1, and the step was host-bound).
PLAN_REUSE_MIN_BATCH = 32
PLAN_REUSE_STEPS = 4


def costs_close(a: StepCostModel | None, b: StepCostModel | None) -> bool:
    """Two step-cost models plan alike: the same knee, every cost within COST_TOLERANCE."""
    if a is None or b is None:
        return a is b
    for f in dataclasses.fields(StepCostModel):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if not isinstance(x, float) or not isinstance(y, float):
            if x != y:  # the knee (a count, or None)
                return False
        elif abs(x - y) > COST_TOLERANCE * max(abs(x), abs(y), 0.05):
            return False
    return True


def accepted_drafts(alphas: list[float], lengths: np.ndarray) -> np.ndarray:
    """Expected accepted drafts sum_{j=1..l} alpha^j of each sequence drafting `lengths`
    (closed form; alpha = 1: l), broadcast: `lengths` of shape (n,) or (k, 1) for k
    lengths of every sequence."""
    alpha = np.clip(np.asarray(alphas, dtype=np.float64), 0.0, 1.0)
    safe = np.where(alpha < 1.0, alpha, 0.5)
    return np.where(alpha < 1.0, safe * (1.0 - safe ** lengths) / (1.0 - safe),
                    lengths.astype(np.float64))


class PerRequestDraftLength(DraftLengthPolicy):
    name = "per_request"

    def __init__(self, bass_config, cost: StepCostModel | None = None,
                 prior_alpha: float = 0.6, prior_weight: float = 2.0):
        self.k_max = bass_config.num_speculative_tokens
        self.cost = cost or PRIOR_COSTS  # the scheduler replaces it every step
        self.estimates = AcceptanceEstimates(bass_config.acceptance_ema, prior_alpha,
                                             prior_weight)
        # auto_off=False keeps every sequence drafting at least one token
        self.min_length = 0 if bass_config.auto_off else 1
        self.uniform_plan_margin = float(bass_config.uniform_plan_margin)
        self.probes = ProbeSchedule()  # all lengths 0: probe with length 1 now and then
        # the most tokens a verification may hold (the scheduler sets vLLM's largest
        # CUDA-graph size; None: no limit): part of the optimisation, so a cut plan does not
        # keep a long tail of draft steps for a few sequences
        self.token_budget: int | None = None
        self._last_key: tuple | None = None
        self._last_lengths: list[int] = []
        self._last_by_id: dict[str, int] = {}  # the last solved plan's lengths by request
        # calls a large batch keeps a solved plan (`_reuse_stands`; the scheduler sets 0 under
        # VLLM_BASS_PLAN_REUSE=0)
        self.plan_reuse_steps = PLAN_REUSE_STEPS
        self._last_alphas: list[float] = []
        self._last_cost: StepCostModel | None = None  # the model and share it was solved for
        self._last_share = 0.0
        self._plan_age = 0  # plan() calls since the plan was last solved
        self._last_speedup = 1.0
        self._undrafted: dict[str, int] = {}  # consecutive drafting steps a request sat out
        # tokens each request may still emit (max_tokens - output) while the batch is closed
        # (`BassScheduler.is_closed_batch`); the scheduler sets it every step, None otherwise
        self.remaining: dict[str, int] | None = None
        # share of a step's time that grows with the batch (the scheduler sets it from the
        # cost fits, `StepCostEstimator.per_request_share`): how much a closed batch gains
        # when a request finishes
        self.per_request_share = 0.5
        # the scheduler sets it every step: the cost fit has seen one draft length only
        self.explore_lengths = False
        self.explore_enabled = bool(bass_config.explore_draft_lengths)
        self.closed_batch_plan = bool(bass_config.closed_batch_plan)
        # the closed objective turns the batch off too, where it expects off to end the
        # batch at least closed_off_margin sooner than its best drafting length
        # (BassConfig.closed_batch_off_margin; `sim_policy_ab.py`'s `closedoffX`)
        margin = getattr(bass_config, "closed_batch_off_margin", None)
        self.closed_decides_off = margin is not None
        self.closed_off_margin = float(margin or 0.0)
        self._drafting_since_explore = 0
        self._explorations = 0

    @property
    def probe_interval(self) -> int:
        return self.probes.interval

    def alpha(self, req_id: str) -> float:
        return self.estimates.alpha(req_id)

    def observe(self, verified: list[Verified]) -> None:
        self.estimates.observe(verified)
        self.probes.observe_probe(verified)

    def forget(self, req_id: str) -> None:
        self.estimates.forget(req_id)
        self._undrafted.pop(req_id, None)

    def _probe_undrafted(self, req_ids: list[str], lengths: list[int]) -> None:
        """A request planned no draft is not verified, so its estimate cannot recover: one
        whose estimate fell by chance (or whose text got easier) would sit out for good and
        finish last. Every SEQUENCE_PROBE_INTERVAL-th drafting step it sits out it drafts
        one token (the batch's draft pass makes that token anyway: one verified token)."""
        for i, rid in enumerate(req_ids):
            if lengths[i]:
                self._undrafted.pop(rid, None)
                continue
            idle = self._undrafted.get(rid, 0) + 1
            if idle >= SEQUENCE_PROBE_INTERVAL:
                lengths[i], idle = 1, 0
            self._undrafted[rid] = idle

    def _draft_room(self, n: int) -> int | None:
        """Draft tokens a verification of n requests may hold within the token budget
        (each request's own token comes first; None: no budget)."""
        return None if self.token_budget is None else max(0, self.token_budget - n)

    def _maybe_explore(self, lengths: list[int]) -> list[int]:
        """Every EXPLORE_INTERVAL-th drafting step while the cost fit has seen one length
        only (`explore_lengths`): a longer plan, within k_max and the token budget."""
        if not (self.explore_enabled and self.explore_lengths):
            self._drafting_since_explore = 0
            return lengths
        self._drafting_since_explore += 1
        if self._drafting_since_explore < EXPLORE_INTERVAL:
            return lengths
        self._drafting_since_explore = 0
        self._explorations += 1
        if self._explorations % 2:
            longer = [min(self.k_max, n + 2) if i % 2 == 0 else n
                      for i, n in enumerate(lengths)]
        else:
            longer = [min(self.k_max, n + 1) for n in lengths]
        room = self._draft_room(len(lengths))
        if room is not None and sum(longer) > room:
            return lengths
        return longer

    def closed_batch_cap(self, alphas: list[float], remaining: list[int]) -> int:
        """The longest draft L (0: off) of a closed batch (`closed_batch_choice`)."""
        return self.closed_batch_choice(alphas, remaining)[0]

    def closed_batch_choice(self, alphas: list[float],
                            remaining: list[int]) -> tuple[int, float]:
        """The closed batch's cap and, where it is 0, how much longer its best drafting
        length is expected to take (best drafting time / off's - 1; else 0).
        The cap is the longest draft L (0: off) that minimises the batch's
        expected remaining time if every request drafted L tokens from now on,
            T(L) * sum_k (s_(k) - s_(k-1)) * (1 - phi + phi * alive_k / n),
        s_i = remaining_i / (expected tokens per step of request i at L), sorted; phi the
        share of a step that grows with the batch (`per_request_share`): the makespan is set
        by the slowest requests, and the others' tokens count only by how much sooner they
        leave the batch. Maximising tokens per second instead drafted long for a closed
        mix's alpha-0.9 half while its alpha-0.3 quarter set the time: in closed-batch
        simulation of the H100 step law with +-15% step scatter, batch 8, 1.08x plain
        against 1.14x (`benchmarks/e2e/sim_policy_ab.py`; session19/sim_closed_plan_ab)."""
        n = len(alphas)
        alpha = np.clip(np.asarray(alphas, dtype=np.float64), 0.0, 0.999)
        rem = np.maximum(np.asarray(remaining, dtype=np.float64), 1.0)
        phi = min(max(float(self.per_request_share), 0.0), 1.0)
        alive = 1.0 - phi + phi * (n - np.arange(n)) / n
        room = self._draft_room(n)
        lengths = np.arange(0, self.k_max + 1)
        if room is not None:
            lengths = lengths[lengths * n <= room]  # room >= 0: length 0 stays
        # every length at once (one sort of a (lengths x n) array): this runs every step,
        # and a loop over the lengths cost ~0.4 ms of host time at batch 8
        steps = np.sort(rem * (1.0 - alpha) / (1.0 - alpha ** (lengths[:, None] + 1)), axis=1)
        spans = (np.diff(steps, axis=1, prepend=0.0) * alive).sum(axis=1)
        best, best_time = 0, math.inf
        times = self.cost.times_for(lengths, lengths * n) * spans
        for length, time in zip(lengths.tolist(), times.tolist()):
            if time < best_time * (1.0 - 1e-9):
                best, best_time = length, time
        drafting = times[lengths > 0]
        off_gain = (float(drafting.min()) / best_time - 1.0
                    if best == 0 and drafting.size else 0.0)
        return best, off_gain

    def lengths_within(self, alphas: list[float], cap: int) -> list[int]:
        """Ragged lengths under a longest draft of `cap`: each sequence drafts the positions
        whose expected gain beats a verified token's cost at the plan's rate (Dinkelbach at
        a fixed cap), so a draft that is hardly accepted does not fill the cap."""
        n = len(alphas)
        if cap <= 0 or n == 0:
            return [0] * n
        cost = self.cost
        alpha = np.clip(np.asarray(alphas, dtype=np.float64), 0.0, 1.0)
        gains = alpha[:, None] ** np.arange(1, cap + 1)[None, :]
        expected = np.concatenate([np.zeros((n, 1)), np.cumsum(gains, axis=1)], axis=1)
        lengths = np.full(n, cap)
        room = self._draft_room(n)
        rate = (n + expected[:, cap].sum()) / cost.time_for(cap, cap * n)
        for _ in range(8):
            new, new_rate = self._dinkelbach_step(gains, expected, rate, room)
            if not new.any():
                break
            lengths = new
            if abs(new_rate - rate) < 1e-12:
                break
            rate = new_rate
        return [int(x) for x in lengths]

    def _dinkelbach_step(self, gains: np.ndarray, expected: np.ndarray, rate: float,
                         room: int | None) -> tuple[np.ndarray, float]:
        """One Dinkelbach iteration over the draft positions in `gains` (one column per
        position, within the cap): each sequence takes the positions whose gain beats a
        verified token's cost at `rate`, cut to the token budget's `room`; the lengths and
        the rate they achieve."""
        cost = self.cost
        lengths = (gains > rate * cost.per_verify_token).sum(axis=1)
        knee = cost.knee_drafts
        if knee is not None and lengths.sum() > knee:
            # a convex price: past the knee's first positions (highest gain first) only those
            # that pay the knee's price too
            steep = int((gains > rate * (cost.per_verify_token + cost.past_knee_price)).sum())
            lengths = keep_best_positions(gains, lengths, max(knee, steep))
        if room is not None and lengths.sum() > room:
            lengths = keep_best_positions(gains, lengths, room)
        total = len(lengths) + expected[np.arange(len(lengths)), lengths].sum()
        return lengths, total / cost.time_for(int(lengths.max()), int(lengths.sum()))

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
        # P(j drafts accepted)
        gains = alpha[:, None] ** np.arange(1, self.k_max + 1)[None, :]
        expected = np.concatenate([np.zeros((n, 1)), np.cumsum(gains, axis=1)], axis=1)
        worth = float(n)  # one step's tokens without drafts
        if n == 1:
            # one sequence: every length at once (the search below costs ~0.5 ms at batch 1,
            # where a step is shortest)
            lengths = np.arange(self.k_max + 1)
            rates = (1.0 + expected[0]) / cost.times_for(lengths, lengths)
            best = int(np.argmax(rates))  # the shortest among equals, 0 first
            return [best]
        best_lengths = np.zeros(n, dtype=np.int64)
        best_rate = worth / cost.time_for(0, 0)
        room = self._draft_room(n)
        # caps whose every position fits the knee and the budget: solved all at once
        limit = min(math.inf if cost.knee_drafts is None else cost.knee_drafts,
                    math.inf if room is None else room)
        free_caps = int(min(self.k_max, limit // n))
        if free_caps < 4:  # a pass over a few caps saves less than it costs (batch 64)
            free_caps = 0
        free = self._free_cap_solutions(gains, expected, free_caps, best_rate)
        for cap in range(1, self.k_max + 1):
            if cap <= free_caps:
                lengths, rate = free[0][cap - 1], float(free[1][cap - 1])
            else:
                lengths, rate = self._solve_cap(gains, expected, cap, best_rate, room)
            if rate > best_rate + 1e-12:
                best_rate, best_lengths = rate, lengths
            if int(lengths.max()) < cap:
                # the cap did not bind: with gains falling along the draft, no larger cap
                # takes another position at this rate, so the optimum is found
                break
        return [int(x) for x in best_lengths]

    def _solve_cap(self, gains: np.ndarray, expected: np.ndarray, cap: int, rate: float,
                   room: int | None) -> tuple[np.ndarray, float]:
        """Dinkelbach at one cap from `rate`: the lengths and the rate they achieve."""
        for _ in range(8):
            lengths, new_rate = self._dinkelbach_step(gains[:, :cap], expected, rate, room)
            if abs(new_rate - rate) < 1e-12:
                break
            rate = new_rate
        return lengths, rate

    def _free_cap_solutions(self, gains: np.ndarray, expected: np.ndarray, caps: int,
                            start: float) -> tuple[np.ndarray, np.ndarray]:
        """Dinkelbach for every cap 1..`caps` at once, where neither the knee nor the token
        budget can bind (each cap's positions all fit): lengths [caps, n] and rates [caps].
        One cap at a time this was 8-40 small numpy passes, 0.4-0.5 ms of host time a plan
        at alpha 0.8-0.95 (batch 4-16, this CPU), on the critical path of a host-bound step
        whenever a server's batch changes."""
        n = gains.shape[0]
        if caps <= 0:
            return np.zeros((0, n), dtype=np.int64), np.zeros(0)
        cost = self.cost
        cap = np.arange(1, caps + 1)
        rows = np.arange(n)[None, :]
        rate = np.full(caps, start)
        lengths = np.zeros((caps, n), dtype=np.int64)
        active = np.ones(caps, dtype=bool)
        for _ in range(12):  # Dinkelbach converges superlinearly; 8 sufficed one cap a time
            new = np.minimum((gains[None, :, :caps] > (rate[:, None, None]
                                                        * cost.per_verify_token)).sum(axis=2),
                             cap[:, None])
            new_rate = ((n + expected[rows, new].sum(axis=1))
                        / cost.times_for(new.max(axis=1), new.sum(axis=1)))
            lengths[active] = new[active]
            converged = np.abs(new_rate - rate) < 1e-12
            rate = np.where(active & ~converged, new_rate, rate)
            active &= ~converged
            if not active.any():
                break
        return lengths, rate

    def plan_rate(self, alphas: list[float], lengths: list[int]) -> float:
        """Expected tokens per unit of step time of a plan under the cost model."""
        if not lengths:
            return 0.0
        lengths_arr = np.asarray(lengths, dtype=np.int64)
        tokens = float((1.0 + accepted_drafts(alphas, lengths_arr)).sum())
        return tokens / self.cost.time_for(int(lengths_arr.max()), int(lengths_arr.sum()))

    def _uniform_rates(self, alphas: list[float], low: int, longest: int) -> list[float]:
        """plan_rate of every length k in [low, longest] for all sequences, at once (this
        runs every plan)."""
        n = len(alphas)
        ks = np.arange(low, longest + 1)
        tokens = (1.0 + accepted_drafts(alphas, ks[:, None])).sum(axis=1)
        return (tokens / self.cost.times_for(ks, ks * n)).tolist()

    def _uniform_longest(self, n: int, longest: int | None = None) -> int:
        """The longest length for all within k_max, `longest` and the token budget."""
        longest = self.k_max if longest is None else min(self.k_max, longest)
        room = self._draft_room(n)
        return min(longest, room // n) if room is not None and n else longest

    def uniform_pays(self, alphas: list[float]) -> bool:
        """Some length for all (within the token budget) beats plain decoding's rate."""
        longest = self._uniform_longest(len(alphas))
        if longest < 1:
            return False
        return max(self._uniform_rates(alphas, 1, longest)) > (
            len(alphas) / self.cost.time_for(0, 0) * (1.0 + 1e-12))

    def best_uniform_length(self, alphas: list[float], shortest: int = 0,
                            longest: int | None = None) -> tuple[int, float]:
        """The one draft length (>= shortest, <= longest) for every sequence with the best
        plan_rate (within the token budget), and that rate."""
        longest = self._uniform_longest(len(alphas), longest)
        low = max(self.min_length, shortest)
        best, best_rate = low, -1.0
        for k, rate in enumerate(self._uniform_rates(alphas, low, max(longest, low)), low):
            if rate > best_rate + 1e-12:
                best, best_rate = k, rate
        return best, best_rate

    def choose_lengths(self, alphas: list[float],
                       remaining: list[int] | None = None) -> list[int]:
        """The ragged optimum (within `closed_batch_cap` when the batch is closed:
        `remaining` given), unless one length for all comes within uniform_plan_margin of
        it (BassConfig.uniform_plan_margin; 0: always the ragged optimum)."""
        longest = self.k_max
        closed = self.closed_batch_plan and remaining is not None and len(alphas) >= 2
        # drafting at all is first the token rate's call: the closed objective follows the
        # lowest acceptance estimate, and noisy estimates of a marginal quarter (a mix's
        # alpha 0.3) turned whole batches off (H100, session 19: 28% off-steps at batch 8);
        # the closed objective turns a drafting batch off only past closed_off_margin.
        # One length for all is a plan too, so where it beats plain decoding drafting pays
        # without the ragged search (the search is most of a plan's host time)
        if not closed:
            lengths = self.best_lengths(alphas)
        elif self.uniform_pays(alphas) or any(self.best_lengths(alphas)):
            longest, off_gain = self.closed_batch_choice(alphas, remaining)
            off = (self.closed_decides_off and longest == 0
                   and off_gain >= self.closed_off_margin)
            lengths = ([0] * len(alphas) if off
                       else self.lengths_within(alphas, max(1, longest)))
        else:
            lengths = [0] * len(alphas)
        ragged = [max(self.min_length, n) for n in lengths]
        if self.uniform_plan_margin <= 0 or len(alphas) < 2 or len(set(ragged)) == 1:
            return ragged
        # drafting at all is the ragged optimum's call (all zeros: off); the margin is about
        # the ragged path's cost (session 12: letting it switch a drafting mix off flipped
        # between off-steps and drafts, 0.83x plain at batch 64 on the H100)
        k, uniform_rate = self.best_uniform_length(alphas, shortest=1, longest=max(1, longest))
        if (uniform_rate * (1.0 + self.uniform_plan_margin)
                >= self.plan_rate(alphas, ragged)):
            return [k] * len(alphas)
        return ragged

    def _plan_key(self, req_ids: list[str], remaining: list[int] | None) -> tuple:
        """What a plan is solved for besides the estimates and costs (which may drift a
        little)."""
        return (tuple(req_ids), remaining is None)

    def _reuse_stands(self, req_ids: list[str], remaining: list[int] | None) -> bool:
        """A large batch keeps its last solved plan for `plan_reuse_steps` calls
        (PLAN_REUSE_STEPS), its estimates unread: the same requests or fewer, the same
        closed-batch state, the costs and share within their tolerances, no closed batch near
        its end."""
        steps = self.plan_reuse_steps
        if (steps <= 0 or len(req_ids) < PLAN_REUSE_MIN_BATCH
                or self._plan_age >= steps or self._last_key is None
                or self._last_key[1] != (remaining is None)
                or not self._solved_context_holds(remaining)):
            return False
        by_id = self._last_by_id
        return all(r in by_id for r in req_ids)

    def _solved_context_holds(self, remaining: list[int] | None) -> bool:
        """What the last plan was solved for besides its requests and estimates still holds:
        the costs (within COST_TOLERANCE), the per-request share (within
        REPLAN_MEAN_CHANGE), and no request of a closed batch within REPLAN_NEAR_END tokens
        of its end."""
        if not costs_close(self._last_cost, self.cost):
            return False
        if abs(self._last_share - self.per_request_share) > REPLAN_MEAN_CHANGE:
            return False
        return remaining is None or min(remaining) > REPLAN_NEAR_END

    def _plan_stands(self, req_ids: list[str], alphas: list[float],
                     remaining: list[int] | None) -> bool:
        """The last plan still holds: same requests, closed-batch state, cost model (within
        COST_TOLERANCE) and per-request share (within REPLAN_MEAN_CHANGE), no estimate moved
        by REPLAN_ALPHA_CHANGE nor their mean by REPLAN_MEAN_CHANGE since, fewer than
        REPLAN_EVERY steps ago (no age limit while no estimate changed at all: off-steps
        verify nothing), and no request of a closed batch near its end. Replanning every
        step cost 0.6-0.8 ms of host time at batch 8-64 (2-core CPU), on the critical path
        of a host-bound step."""
        if (self._last_key != self._plan_key(req_ids, remaining)
                or not self._solved_context_holds(remaining)):
            return False
        if not alphas:
            return True
        drifts = np.abs(np.asarray(alphas) - np.asarray(self._last_alphas))
        drift = float(drifts.max())
        if drift == 0.0:
            return True
        return (drift < REPLAN_ALPHA_CHANGE and float(drifts.mean()) < REPLAN_MEAN_CHANGE
                and self._plan_age < REPLAN_EVERY)

    def plan(self, req_ids: list[str]) -> DraftPlan:
        remaining = (None if self.remaining is None or len(req_ids) < 2
                     else [self.remaining.get(r, 1) for r in req_ids])
        if self._reuse_stands(req_ids, remaining):
            lengths = [self._last_by_id[r] for r in req_ids]
        else:
            alphas = [self.alpha(r) for r in req_ids]
            if not self._plan_stands(req_ids, alphas, remaining):
                self._last_key = self._plan_key(req_ids, remaining)
                self._last_cost, self._last_share = self.cost, self.per_request_share
                self._last_alphas, self._plan_age = alphas, 0
                self._last_lengths = self.choose_lengths(alphas, remaining)
                self._last_by_id = dict(zip(req_ids, self._last_lengths))
                self._last_speedup = predicted_speedup(self.cost, alphas, self._last_lengths)
            lengths = list(self._last_lengths)
        self._plan_age += 1
        off = bool(req_ids) and not any(lengths)
        if not off:
            self._probe_undrafted(req_ids, lengths)
        probe = self.probes.probe_due(off)
        if probe:
            lengths = [1] * len(req_ids)  # re-measure acceptance now and then
        elif self.min_length == 0 and self.probes.measure_off_due(
                off, self._last_speedup >= auto_off.CONFIDENT_SPEEDUP):
            lengths = [0] * len(req_ids)  # measure what plain decoding costs
        elif not off:
            lengths = self._maybe_explore(lengths)
        if len(set(lengths)) <= 1:
            # one length for all: fixed K's plan (no per-request placeholders to trim)
            return DraftPlan(lengths[0] if lengths else 0, None, probe)
        return DraftPlan(max(lengths), dict(zip(req_ids, lengths)), probe)
