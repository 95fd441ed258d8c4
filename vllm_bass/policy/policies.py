"""Draft-length policies: how many tokens the draft proposes for each sequence next step.

A policy sees, after every verification, each drafted sequence's (draft length, accepted
count) and answers the next step's lengths. Policies are pure and deterministic given those
observations, so every tensor-parallel rank computes the same answer without talking.
In the engine the observations arrive late (the scheduler plans step t before step t-1's
verification is known, and under async scheduling before t-2's, see vllm_bass.scheduler):
a policy must judge a verification by what it carries (`Verified`), not by its own latest
plan.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np

HISTORY_LENGTH = 1024


@dataclass(frozen=True)
class Verified:
    req_id: str
    num_draft: int      # draft tokens verified this step (> 0)
    num_accepted: int   # accepted draft tokens (0..num_draft); the bonus token not counted
    probe: bool = False  # the drafts came from a probing plan (DraftPlan.probe)


@dataclass(frozen=True)
class DraftPlan:
    """Next step: the drafter runs `batch_length` steps; `per_request` (when set) truncates
    individual sequences to shorter drafts (a ragged batch); 0 means no speculation."""

    batch_length: int
    per_request: dict[str, int] | None = None
    probe: bool = False  # a one-token draft that only re-measures acceptance (auto-off)

    def length_for(self, req_id: str) -> int:
        if self.per_request is None:
            return self.batch_length
        return self.per_request.get(req_id, self.batch_length)


def within_token_budget(plan: DraftPlan, req_ids: list[str], budget: int | None,
                        alpha=None) -> DraftPlan:
    """`plan` cut so that the verification holds at most `budget` tokens (one per sequence
    plus its drafts). The engine's budget is the largest CUDA-graph size: a verification
    above it runs without graphs, 3-4x the time of one just below it (H100, 7B shape,
    batch 64: 16-draft steps of 449-1024 tokens took 54 ms, 6-draft steps of 384 tokens 17 ms).
    Per-request plans keep the draft positions of highest expected gain (alpha(req)^j, so
    each sequence keeps a prefix); without `alpha`, the positions nearest the start."""
    if budget is None or not req_ids:
        return plan
    room = budget - len(req_ids)
    if plan.per_request is None:
        if plan.batch_length * len(req_ids) <= room:
            return plan
        return DraftPlan(max(0, room // len(req_ids)), None, plan.probe)
    lengths = np.array([plan.length_for(r) for r in req_ids], dtype=np.int64)
    if lengths.sum() <= room:
        return plan
    alphas = np.array([alpha(r) if alpha is not None else 0.5 for r in req_ids])
    gains = np.clip(alphas, 0.0, 1.0)[:, None] ** np.arange(1, lengths.max() + 1)[None, :]
    kept = [int(n) for n in keep_best_positions(gains, lengths, room)]
    return DraftPlan(max(kept, default=0), dict(zip(req_ids, kept)), plan.probe)


def keep_best_positions(gains: np.ndarray, lengths: np.ndarray, room: int) -> np.ndarray:
    """New lengths that keep exactly min(room, sum(lengths)) draft positions: those of highest
    gain among each row's first `lengths` (gains fall along a row, so every row keeps a
    prefix; among equal gains the earlier rows win)."""
    taken = np.arange(gains.shape[1])[None, :] < lengths[:, None]
    total = int(taken.sum())
    if room <= 0:
        return np.zeros_like(lengths)
    if total <= room:
        return lengths
    values = gains[taken]
    threshold = np.partition(values, total - room)[total - room]
    keep = taken & (gains > threshold)
    ties = taken & (gains == threshold)
    need = room - int(keep.sum())
    # row-major order: the first `need` tied positions (a row's ties are its consecutive
    # positions, so prefixes stay prefixes)
    tie_rank = np.cumsum(ties.ravel()).reshape(ties.shape)
    keep |= ties & (tie_rank <= need)
    return keep.sum(axis=1)


class DraftLengthPolicy:
    name = "base"
    # Whether the scheduler holds this policy's verifications at the hard compute knee
    # (`BassConfig.verify_knee_tokens`; per_request prices the knee instead where it can);
    # False: only the largest CUDA graph bounds them (`scheduler.policy_step_budget`).
    stops_at_knee = True

    def observe(self, verified: list[Verified]) -> None:
        pass

    def plan(self, req_ids: list[str]) -> DraftPlan:
        raise NotImplementedError

    def forget(self, req_id: str) -> None:
        pass


class FixedDraftLength(DraftLengthPolicy):
    """A constant K, like vLLM's own draft_model speculation: the user's K is drafted as is,
    bounded only by the largest CUDA graph, not cut at the knee (session 32, H100: the knee
    held K=5 at 3 drafts at batch 64 / 1024-token prompts, where vLLM's K=5 was best)."""

    name = "fixed"
    stops_at_knee = False

    def __init__(self, length: int):
        self.length = length

    def plan(self, req_ids: list[str]) -> DraftPlan:
        return DraftPlan(self.length)


class BassAlgorithm1(DraftLengthPolicy):
    """Paper's Algorithm 1: one draft length for the whole batch.

    If some sequence accepted its whole draft, grow by `increment` up to `limit`; otherwise
    shrink by ceil(l / shrink_divisor), one more if the previous update also shrank, and never
    below 1 nor below the largest accepted count.
    """

    name = "bass"

    def __init__(self, initial: int = 7, increment: int = 2, limit: int = 32,
                 shrink_divisor: int = 10):
        self.length = max(1, min(initial, limit))
        self.increment = increment
        self.limit = limit
        self.shrink_divisor = shrink_divisor
        self.shrank_last_step = False
        # the recent lengths (diagnostics and tests); bounded for long-running servers
        self.history: collections.deque[int] = collections.deque([self.length],
                                                                 maxlen=HISTORY_LENGTH)

    def observe(self, verified: list[Verified]) -> None:
        if not verified:
            return
        max_accepted = max(v.num_accepted for v in verified)
        # "accepted the whole draft": the batch's draft length of the verified step (a
        # sequence cut shorter does not count), which is not always today's self.length
        verified_length = max(v.num_draft for v in verified)
        whole = any(v.num_accepted == v.num_draft == verified_length for v in verified)
        if whole:
            self.length = min(self.length + self.increment, self.limit)
            self.shrank_last_step = False
        else:
            shrink = math.ceil(self.length / self.shrink_divisor)
            if self.shrank_last_step:
                shrink += 1
            self.length = max(1, max_accepted, self.length - shrink)
            self.shrank_last_step = True
        self.history.append(self.length)

    def plan(self, req_ids: list[str]) -> DraftPlan:
        return DraftPlan(self.length)
