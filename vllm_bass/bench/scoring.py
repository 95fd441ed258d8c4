"""pass@first and pass@all under a wall-clock budget, from samples with finish times.

A problem's clock starts when its first batch is submitted. A sample counts for budget B
when it finished (the engine returned its last token) at most B seconds after that start.
- pass@first(B): the first sample to finish (ties: the lower submission index) is within
  B and passes; no sample within B is a failure;
- pass@all(B): some sample within B passes;
- samples(B): how many samples finished within B.
Batches run back to back from the problem's start, so which samples finish by time B
does not depend on how much budget is left after B: a run with the largest budget gives
every smaller budget's result from the finish times (up to timing noise), which is how
one run yields the pass@all-vs-budget curve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Sample:
    finish_s: float  # seconds from the problem's start
    passed: bool
    tokens: int = 0
    index: int = 0  # submission order within the problem


def within(samples: Sequence[Sample], budget: float) -> list[Sample]:
    return sorted((s for s in samples if s.finish_s <= budget),
                  key=lambda s: (s.finish_s, s.index))


def problem_score(samples: Sequence[Sample], budget: float) -> dict:
    done = within(samples, budget)
    return {"samples": len(done), "pass_first": bool(done) and done[0].passed,
            "pass_all": any(s.passed for s in done),
            "tokens": sum(s.tokens for s in done),
            "first_finish_s": done[0].finish_s if done else None}


def overall(problems: Sequence[Sequence[Sample]], budget: float) -> dict:
    """Means over problems; `tokens_per_s`: tokens of the samples within the budget over
    the budget's total time (budget x problems): the useful sampling rate."""
    scores = [problem_score(p, budget) for p in problems]
    n = len(scores) or 1
    tokens = sum(s["tokens"] for s in scores)
    return {"budget_s": budget, "problems": len(scores),
            "pass_first": sum(s["pass_first"] for s in scores) / n,
            "pass_all": sum(s["pass_all"] for s in scores) / n,
            "samples_per_problem": sum(s["samples"] for s in scores) / n,
            "tokens_per_s": tokens / (budget * n) if budget > 0 else 0.0}
