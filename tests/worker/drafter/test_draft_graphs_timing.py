"""The draft step graphs are timed at start-up (the policy's measured draft-step price, on
by default since session 49) on a single rank only: under tensor or pipeline parallelism a
replay holds collectives, and one rank's failed timing would leave the others waiting."""

from types import SimpleNamespace

import pytest

from vllm_bass.worker.drafter.draft_graphs import measures_replays

pytestmark = [pytest.mark.cpu]


def _parallel(tp: int, pp: int = 1):
    return SimpleNamespace(tensor_parallel_size=tp, pipeline_parallel_size=pp)


def test_one_rank_times_its_graphs_by_default(monkeypatch):
    monkeypatch.delenv("VLLM_BASS_MEASURED_DRAFT_STEP", raising=False)
    assert measures_replays(_parallel(1))


@pytest.mark.parametrize("tp,pp", [(2, 1), (1, 2), (4, 2)])
def test_parallel_ranks_leave_the_price_to_the_fit(monkeypatch, tp, pp):
    monkeypatch.delenv("VLLM_BASS_MEASURED_DRAFT_STEP", raising=False)
    assert not measures_replays(_parallel(tp, pp))


def test_the_variable_turns_the_timing_off(monkeypatch):
    monkeypatch.setenv("VLLM_BASS_MEASURED_DRAFT_STEP", "0")
    assert not measures_replays(_parallel(1))
