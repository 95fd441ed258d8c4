"""The closed-batch Monte Carlo behind session 45's batch-8 ceiling (`closed_batch_ceiling`):
its step counts where they are known exactly, and the law it interpolates."""

import math

import pytest

from benchmarks.e2e import closed_batch_ceiling as cbc

pytestmark = [pytest.mark.cpu]


def test_nothing_accepted_is_one_token_a_step():
    wall = cbc.closed_batch_ms(0.0, 5, 4, lambda live, length: 2.0, new_tokens=10,
                               overhead_ms=3.0, trials=5)
    assert wall == pytest.approx(3.0 + 10 * 2.0)


def test_everything_accepted_is_length_plus_one_a_step():
    wall = cbc.closed_batch_ms(1.0, 7, 3, lambda live, length: 1.0, new_tokens=128, trials=3)
    assert wall == pytest.approx(math.ceil(128 / 8))


def test_the_batch_shrinks_as_requests_finish():
    """With geometric acceptance the batch's last steps run with fewer requests: a law that
    charges only full batches costs less than one that charges every step."""
    every = cbc.closed_batch_ms(0.7, 4, 8, lambda live, length: 1.0, trials=200, seed=3)
    full_only = cbc.closed_batch_ms(0.7, 4, 8, lambda live, length: float(live == 8),
                                    trials=200, seed=3)
    assert full_only < every


def test_law_interpolates_between_batch_one_and_batch_b():
    step = cbc.linear_law((6.0, 0.1), (8.0, 0.0), 9)
    assert step(1, 10) == pytest.approx(7.0)
    assert step(9, 10) == pytest.approx(8.0)
    assert step(5, 10) == pytest.approx(7.5)
    assert cbc.linear_law((6.0, 0.1), (9.0, 0.0), 1)(1, 10) == pytest.approx(7.0)
