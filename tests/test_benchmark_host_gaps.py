"""benchmarks/e2e/host_gaps.py splits a step's host time between the runner's phases, the
previous step's output and the next step's schedule() (session 54's host-bound default)."""

import gzip

import pytest

from benchmarks.e2e.host_gaps import gaps

pytestmark = [pytest.mark.cpu]


def _runner_row(start_s, batch, verified, fwd, sample, draft, lead):
    # start, reqs, verified, 3 cpu phases, 3 gpu phases, graph, 3 thread, model cpu/gpu, lead
    return (f"{start_s:.6f},{batch},{verified},{fwd},{sample},{draft},5.0,0.1,0.3,2,"
            f"{fwd},{sample},{draft},1.0,5.0,{lead}")


def test_gaps_split_a_step_into_runner_output_and_schedule(tmp_path):
    step, runner = tmp_path / "t.csv", tmp_path / "t.csv.runner"
    steps, runs = [], []
    t = 100.0
    for i in range(12):
        host_bound = i >= 6  # steps 6-11: the device then waits before steps 7-12's graphs
        runs.append(_runner_row(t, 64, 1, 3.0, 0.5, 1.0, 3.0 if i >= 7 else 0.1))
        update_end = t + (4.5 + 1.5) / 1e3  # phases 4.5 ms, then 1.5 ms to the output's end
        steps.append(f"{update_end:.6f},64,1,64,7.0,0")
        t = update_end + (2.0 if host_bound else 0.8) / 1e3  # schedule() before the next
    runs.append(_runner_row(t, 64, 1, 3.0, 0.5, 1.0, 3.0))
    step.write_text("\n".join(steps) + "\n")
    with gzip.open(str(runner) + ".gz", "wt") as fh:  # gzipped runner traces read too
        fh.write("\n".join(runs) + "\n")
    rows = {r["regime"]: r for r in gaps(step, tmp_path / "t.csv.runner.gz", {64})}
    # a step is host-bound when the device waited for the host before the next model graph
    assert rows["device_bound"]["steps"] == 6 and rows["host_bound"]["steps"] == 6
    fast, slow = rows["device_bound"], rows["host_bound"]
    assert fast["runner_phases_ms"] == pytest.approx(4.5)
    assert fast["to_update_end_ms"] == pytest.approx(1.5, abs=1e-3)
    assert fast["schedule_gap_ms"] == pytest.approx(0.8, abs=1e-3)
    assert slow["schedule_gap_ms"] == pytest.approx(2.0, abs=1e-3)
    assert slow["period_ms"] == pytest.approx(8.0, abs=1e-3)
    assert slow["next_lead_ms"] == 3.0
    assert gaps(step, tmp_path / "t.csv.runner.gz", {32}) == []
