"""run_windows.py: a closed batch's window split into head / traced steps / tail."""

import json

import pytest

from benchmarks.e2e import run_windows

pytestmark = [pytest.mark.cpu]


def test_window_splits_into_head_steps_and_tail(tmp_path):
    # three steps of 6 ms ending at 10.020, 10.026, 10.032 s; the window 10.000-10.040
    trace = tmp_path / "bass_default_4x1024.csv"
    trace.write_text("9.500000,8,6,48,6.0,0\n"  # an earlier run's step: outside the window
                     "10.020000,8,6,0,6.0,1024\n10.026000,8,6,48,6.0,0\n"
                     "10.032000,8,6,48,6.0,0\n")
    result = tmp_path / "pair0.json"
    result.write_text(json.dumps({"rows": [
        {"system": "bass_default", "draft": "4x1024", "acceptance": 0.8, "batch": 8,
         "ms_per_token": 0.31, "run_windows": [[10.0, 10.04]]},
        {"system": "plain", "draft": "-", "acceptance": "-", "batch": 8,
         "run_windows": [[10.0, 10.04]]}]}))  # no trace of its own: left out
    rows = run_windows.summarise([result], tmp_path)
    assert len(rows) == 1
    (w,) = rows[0]["windows"]
    assert w["steps"] == 3 and w["prefill_steps"] == 1
    assert w["head_ms"] == pytest.approx(14.0)  # 10.000 -> the first step's start 10.014
    assert w["span_ms"] == pytest.approx(18.0)
    assert w["tail_ms"] == pytest.approx(8.0)
    assert w["head_ms"] + w["span_ms"] + w["tail_ms"] == pytest.approx(w["window_ms"])


def test_window_without_steps_is_all_head():
    w = run_windows.split_window(1.0, 1.5, [(0.5, 8, 1, 8, 5.0, 0)])
    assert w["steps"] == 0 and w["head_ms"] == pytest.approx(500.0)


def test_runner_phases_split_the_head_from_the_later_steps(tmp_path):
    # runner rows: two prefill steps (start 10.002, 10.010) before the first traced step
    # began (10.014), then two verification steps
    row = "{start},{n},6,{fc},0.5,{dc},{fg},0.05,{dg},{mode},0,0,0\n"
    runner = [
        row.format(start=10.002, n=3, fc=9.0, dc=2.0, fg=9.1, dg=2.1, mode=1),
        row.format(start=10.010, n=8, fc=20.0, dc=4.0, fg=20.2, dg=4.1, mode=0),
        row.format(start=10.014, n=8, fc=3.0, dc=1.0, fg=4.7, dg=1.2, mode=2),
        row.format(start=10.020, n=8, fc=3.2, dc=1.0, fg=4.9, dg=1.2, mode=2),
    ]
    path = tmp_path / "t.csv.runner"
    path.write_text("".join(runner))
    phases = run_windows.runner_phases(10.0, 10.04, 10.014, run_windows.read_runner(path))
    assert [h["num_reqs"] for h in phases["head_steps"]] == [3, 8]
    assert phases["head_steps"][1]["forward_gpu"] == pytest.approx(20.2)
    assert phases["head_steps"][1]["graph_mode"] == 0
    assert phases["median_ms"]["forward_gpu"] == pytest.approx(4.8)
    assert phases["median_ms"]["draft_gpu"] == pytest.approx(1.2)


def test_gc_pauses_are_split_between_the_head_and_the_steps():
    pauses = [(9.9, 5.0, 2), (10.005, 3.0, 0), (10.02, 7.5, 2), (10.03, 1.0, 1), (10.2, 9.0, 2)]
    g = run_windows.gc_in_window(10.0, 10.04, 10.014, pauses)
    assert g["head"] == {"count": 1, "ms": 3.0, "longest_ms": 3.0}
    assert g["rest"] == {"count": 2, "ms": 8.5, "longest_ms": 7.5}
