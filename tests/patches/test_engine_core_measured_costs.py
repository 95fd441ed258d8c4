"""The start-up hand-off of measured draft step times from the workers to the scheduler
(`patches.engine_core_measured_costs`; the engine tests start real engines through it)."""

import types

import pytest

from vllm_bass.patches.engine_core_measured_costs import slowest_rank
from vllm_bass.scheduler import stash_measured_draft_steps, take_measured_draft_steps

pytestmark = pytest.mark.cpu


def test_each_size_takes_the_slowest_rank():
    assert slowest_rank([{1: 5e-5, 8: 9e-5}, {1: 6e-5, 8: 8e-5, 16: 1e-4}, {}, None]) == {
        1: 6e-5, 8: 9e-5, 16: 1e-4}
    assert slowest_rank([]) == {} and slowest_rank(None) == {}


def test_the_scheduler_of_that_engine_takes_it_once():
    config, other = types.SimpleNamespace(), types.SimpleNamespace()
    stash_measured_draft_steps(config, {8: 1e-4})
    stash_measured_draft_steps(other, {})  # nothing measured (CPU, eager): nothing kept
    assert take_measured_draft_steps(other) == {}
    assert take_measured_draft_steps(config) == {8: 1e-4}
    assert take_measured_draft_steps(config) == {}  # popped: no state left behind
