"""gc_trace: the engine process's collections on the step trace's clock."""

import gc
import time

import pytest

from vllm_bass.diagnostics import gc_trace

pytestmark = [pytest.mark.cpu]


def test_a_collection_is_written_with_its_start_and_length(tmp_path, monkeypatch):
    monkeypatch.setattr(gc_trace, "_installed", None)
    path = tmp_path / "t" / "steps.csv.gc"  # its folder made first
    tracer = gc_trace.install(str(path))
    try:
        assert gc_trace.install(str(tmp_path / "other.gc")) is tracer  # once per process
        before = time.perf_counter()
        gc.collect(1)
        after = time.perf_counter()
    finally:
        gc.callbacks.remove(tracer)
    pauses = gc_trace.read(path)
    ours = [p for p in pauses if before <= p[0] <= after and p[2] == 1]
    assert len(ours) == 1, pauses
    assert 0.0 <= ours[0][1] <= (after - before) * 1e3 + 1e-3
    assert not (tmp_path / "other.gc").exists()


def test_a_stop_without_a_start_writes_nothing(tmp_path):
    path = tmp_path / "x.gc"
    with open(path, "a") as f:
        tracer = gc_trace.GcTrace(f)
        tracer("stop", {"generation": 0, "collected": 3})
        tracer("start", {"generation": 2})
        tracer("stop", {"generation": 2, "collected": 5})
    (line,) = path.read_text().splitlines()
    assert line.split(",")[2:] == ["2", "5"]
