"""benchmarks/e2e/plan_summary.py: a run's plans beside its measured steps (what the next
GPU trace of session 38's alpha-0.4 cell is read with)."""

import pytest

from benchmarks.e2e import plan_summary
from benchmarks.e2e import sim_closed_batch as scb
from tests.test_benchmark_sim_closed_batch import law  # noqa: F401 (the fixture)
from vllm_bass.policy.cost_model import StepCostModel

pytestmark = [pytest.mark.cpu]


def test_fitted_speedup_prices_steps_as_the_policy_does():
    cost = StepCostModel(base=1.0, draft_pass=0.07, per_draft_step=0.03, per_verify_token=0.002)
    for batch, length, alpha in ((1, 1, 0.4), (16, 2, 0.4), (64, 4, 0.8)):
        expected = (plan_summary.expected_tokens(alpha, length)
                    / cost.time_for(length, length * batch))
        assert plan_summary.fitted_speedup(
            [cost.base, cost.draft_pass, cost.per_draft_step, cost.per_verify_token],
            alpha, length, batch) == pytest.approx(expected)


def test_a_simulated_on_off_run_is_summarised_from_its_own_trace(tmp_path, monkeypatch, law):
    """Fixed K=2 switched off every other 6 steps (the test aid's cycle) on the simulated
    device: half the plans are off, and the measured shapes give exactly the law's
    speedup of K=2 over an off-step."""
    trace = tmp_path / "bass.csv"
    monkeypatch.setenv("VLLM_BASS_STEP_TRACE", str(trace))
    monkeypatch.setenv("VLLM_BASS_TEST_OFF_CYCLE", "6,6")
    law.JITTER[0], law.CONTEXT_LAW[0], law.KNEE_LAW[0] = 0.0, False, False
    batch, alpha = 8, 0.6
    sched = scb.system_scheduler("k2", batch)
    scb.run_batch(sched, [alpha] * batch, 96, seed=0)
    sched._bass_trace.flush()
    sched._bass_plan_trace.flush()
    (row,) = plan_summary.summarise(trace, alpha=alpha, top=1)["batches"]
    assert row["batch"] == batch
    assert 0.4 <= row["off_share"] <= 0.6 and row["probe_share"] == 0.0
    assert row["mean_length_when_on"] == pytest.approx(2.0)
    shapes = row["measured_shapes_ms"]
    assert shapes["0x0"]["median_ms"] == pytest.approx(scb.h100_step_ms(batch, 0, 0), abs=1e-3)
    assert shapes["2x2"]["median_ms"] == pytest.approx(scb.h100_step_ms(batch, 2, 2 * batch),
                                                        abs=1e-3)
    law = (plan_summary.expected_tokens(alpha, 2) * scb.h100_step_ms(batch, 0, 0)
           / scb.h100_step_ms(batch, 2, 2 * batch))
    assert row["measured_speedup"][2] == pytest.approx(law, rel=1e-3)
    assert "measured best K=2" in plan_summary.verdict(row)
