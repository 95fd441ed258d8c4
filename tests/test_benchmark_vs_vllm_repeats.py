"""How many timed repeats issue 13's speed benchmark gives a setting (`vs_vllm.timed_repeats`):
short runs get more, so the best-of is not one lucky or unlucky half second."""

import pytest

from benchmarks.e2e import vs_vllm

pytestmark = [pytest.mark.cpu]


def test_short_runs_get_more_repeats_up_to_the_cap():
    assert vs_vllm.timed_repeats(2, warm_seconds=0.5, min_seconds=3.0) == 6
    assert vs_vllm.timed_repeats(2, warm_seconds=0.05, min_seconds=3.0) == vs_vllm.MAX_REPEATS


def test_long_runs_keep_the_asked_repeats():
    assert vs_vllm.timed_repeats(2, warm_seconds=4.0, min_seconds=3.0) == 2
    assert vs_vllm.timed_repeats(3, warm_seconds=1.2, min_seconds=3.0) == 3


def test_zero_minimum_means_exactly_the_asked_repeats():
    assert vs_vllm.timed_repeats(2, warm_seconds=0.1, min_seconds=0.0) == 2
    assert vs_vllm.timed_repeats(5, warm_seconds=0.0, min_seconds=3.0) == 5
