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
