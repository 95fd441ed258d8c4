"""pass@first / pass@all under a budget from samples with finish times
(`vllm_bass/bench/scoring.py`), on hand-made samples."""

import pytest

from vllm_bass.bench.scoring import Sample, overall, problem_score

pytestmark = [pytest.mark.cpu]

# problem A: the first sample to finish fails, a later one passes
A = [Sample(1.0, False, 10, 0), Sample(1.0, True, 12, 1), Sample(2.5, True, 20, 2)]
# problem B: the first passes (finished before a lower index), the rest fail
B = [Sample(0.4, False, 5, 0), Sample(0.3, True, 6, 1), Sample(3.0, False, 7, 2)]
# problem C: nothing finished within any of the budgets below
C = [Sample(9.0, True, 50, 0)]


def test_problem_scores():
    assert problem_score(A, 0.5) == {"samples": 0, "pass_first": False, "pass_all": False,
                                     "tokens": 0, "first_finish_s": None}
    # tie at 1.0 s: the lower index (0, failing) is first
    assert problem_score(A, 1.0) == {"samples": 2, "pass_first": False, "pass_all": True,
                                     "tokens": 22, "first_finish_s": 1.0}
    assert problem_score(B, 0.35)["pass_first"] is True
    assert problem_score(B, 5.0) == {"samples": 3, "pass_first": True, "pass_all": True,
                                     "tokens": 18, "first_finish_s": 0.3}


def test_overall_at_budgets():
    got = overall([A, B, C], 2.0)
    assert got["pass_first"] == pytest.approx(1 / 3)  # B only
    assert got["pass_all"] == pytest.approx(2 / 3)  # A and B
    assert got["samples_per_problem"] == pytest.approx((2 + 2 + 0) / 3)
    assert got["tokens_per_s"] == pytest.approx((22 + 11) / (2.0 * 3))
    big = overall([A, B, C], 10.0)
    assert big["pass_all"] == 1.0 and big["samples_per_problem"] == pytest.approx(7 / 3)
    assert overall([A, B, C], 0.1)["pass_all"] == 0.0
