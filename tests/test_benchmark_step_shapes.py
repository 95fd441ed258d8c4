"""benchmarks/e2e/step_shapes.py groups step traces by shape (what session 12's ragged vs
uniform comparison rests on)."""

import pytest

from benchmarks.e2e.step_shapes import MIN_STEPS, runner_phases, step_shapes

pytestmark = [pytest.mark.cpu]


def test_step_shapes_groups_by_batch_draft_steps_and_verify_per_request(tmp_path):
    trace = tmp_path / "t.csv"
    lines = [f"{i}.0,64,3,192,{12.0 + (i % 3)}" for i in range(MIN_STEPS + 1)]
    lines += [f"{i}.5,64,5,192,15.0" for i in range(MIN_STEPS - 1)]  # too rare: left out
    lines += [f"{i}.7,64,0,0,8.0" for i in range(MIN_STEPS)]
    trace.write_text("\n".join(lines) + "\n")
    shapes = step_shapes(trace)
    assert [(s["batch"], s["draft_steps"], s["verify_per_request"]) for s in shapes] == [
        (64, 0, 0.0), (64, 3, 3.0)]
    drafting = shapes[1]
    assert drafting["steps"] == MIN_STEPS + 1 and drafting["median_ms"] == 13.0
    assert drafting["p20_ms"] == 12.0


def test_runner_phases_medians(tmp_path):
    runner = tmp_path / "t.csv.runner"
    rows = [f"{i}.0,64,3,{1 + i},1.5,3.0,10.0,0.2,{2 + i},2" for i in range(MIN_STEPS)]
    runner.write_text("\n".join(rows) + "\n")
    (phase,) = runner_phases(runner)
    assert phase["requests"] == 64 and phase["verified_length"] == 3 and phase["graph_mode"] == 2
    assert phase["forward_cpu_ms"] == pytest.approx(1 + (MIN_STEPS - 1) / 2)
    assert phase["draft_gpu_ms"] == pytest.approx(2 + (MIN_STEPS - 1) / 2)


def test_runner_phases_read_the_model_columns_where_a_trace_has_them(tmp_path):
    """Session 51's traces add the model call's host and device time and the device lead
    before it; older traces (13 fields) read as before."""
    new = tmp_path / "new.csv.runner"
    new.write_text("".join(f"{i}.0,32,1,2.5,0.5,0.8,{6.0 + i},0.05,0.4,2,2.4,0.5,0.8,"
                           f"0.9,{4.5 + i},{1.2 + i}\n" for i in range(MIN_STEPS)))
    (phase,) = runner_phases(new)
    assert phase["model_cpu_ms"] == pytest.approx(0.9)
    assert phase["model_gpu_ms"] == pytest.approx(4.5 + (MIN_STEPS - 1) / 2)
    assert phase["lead_gpu_ms"] == pytest.approx(1.2 + (MIN_STEPS - 1) / 2)
    old = tmp_path / "old.csv.runner"
    old.write_text("".join(f"{i}.0,32,1,2.5,0.5,0.8,6.0,0.05,0.4,2,2.4,0.5,0.8\n"
                           for i in range(MIN_STEPS)))
    (phase,) = runner_phases(old)
    assert "model_gpu_ms" not in phase and phase["forward_thread_ms"] == pytest.approx(2.4)


def test_scheduler_host_time_is_measured_per_policy():
    """bench_scheduler_host.py drives the real scheduler through a closed batch and times
    its own host work per step (what session 12 compared between policies)."""
    from benchmarks.e2e.bench_scheduler_host import host_ms_per_step

    for policy, k in (("per_request", 8), ("fixed", 3)):
        row = host_ms_per_step(policy, 4, "0.8", k, None, max_tokens=8, seed=0)
        assert row["policy"] == policy and row["steps"] >= 3
        assert row["schedule_ms"] > 0 and row["update_from_output_ms"] > 0
        assert row["host_ms_per_step"] == pytest.approx(
            row["schedule_ms"] + row["update_from_output_ms"], abs=2e-3)
        parts = row["mean_ms_per_step"]
        assert parts["bass_plan_step"] > 0 and parts["cost_observe"] > 0
        # fixed K asks no cost model; per_request's plan runs inside the plan step
        assert (parts["cost_model_for"] > 0) is (policy == "per_request")
        assert parts["policy_plan"] <= parts["bass_plan_step"]


def test_paired_phase_compares_two_systems_at_shared_shapes_only():
    """`--pair` (session 56): the second system's device time over the first's at the step
    shapes both ran, each shape weighted by the fewer steps; shapes only one ran are left
    out, so a different mix of shapes cannot pass for a faster graph."""
    from benchmarks.e2e.step_shapes import paired_phase

    def shape(requests, length, steps, model, lead):
        return {"requests": requests, "verified_length": length, "graph_mode": 2,
                "steps": steps, "model_gpu_ms": model, "lead_gpu_ms": lead}

    first = [shape(32, 1, 100, 5.5, 0.4), shape(16, 1, 10, 5.0, 1.2), shape(8, 0, 50, 4.0, 0)]
    second = [shape(32, 1, 300, 5.0, 0.1), shape(16, 1, 40, 5.0, 0.1), shape(64, 1, 9, 9, 0)]
    model = paired_phase(first, second)
    assert [(r["requests"], r["ratio"]) for r in model["shapes"]] == [(32, 0.909), (16, 1.0)]
    assert model["shapes"][0]["steps"] == [100, 300]
    assert model["weighted_ratio"] == pytest.approx((100 * 5.0 + 10 * 5.0) / (100 * 5.5 + 10 * 5.0),
                                                    abs=1e-4)
    lead = paired_phase(first, second, "lead_gpu_ms")
    assert lead["weighted_ratio"] == pytest.approx(11 / 52, abs=1e-4)
    assert paired_phase(first, [])["weighted_ratio"] is None
