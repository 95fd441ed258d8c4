"""The diagnostics never wait for the device and report what they saw."""

import warnings
from types import SimpleNamespace

import pytest

from vllm_bass.diagnostics.phase_trace import PhaseTrace
from vllm_bass.diagnostics.sync_debug import SYNC_MESSAGE, SyncDebug, step_kind

pytestmark = [pytest.mark.cpu]


class _Event:
    """A CUDA event stand-in: complete once `done` is set; elapsed_time must not be asked
    before (the real one would wait for the device)."""

    def __init__(self, t, done=False):
        self.t, self.done = t, done

    def query(self):
        return self.done

    def elapsed_time(self, other):
        assert self.done and other.done, "elapsed_time on an unfinished event"
        return other.t - self.t


def test_phase_trace_writes_a_step_only_once_its_events_completed(tmp_path):
    trace = PhaseTrace(str(tmp_path / "t.runner"), use_cuda=False)
    ends = []
    for step in range(3):
        trace.finish_step(4, step)
        t0 = trace.begin("forward")
        trace.end(t0)
        start, end = _Event(10.0 * step, done=True), _Event(10.0 * step + 2.5)
        trace.events["forward"] = (start, end)  # as with use_cuda, the end not yet run
        ends.append(end)
    trace.finish_step(4, 3)  # steps 0..2 queued (and the empty warm-up row written)
    lines = (tmp_path / "t.runner").read_text().splitlines()
    assert len(lines) == 1, "no step may be read before its events complete"
    ends[0].done = True
    ends[1].done = True
    trace.finish_step(4, 0)
    lines = (tmp_path / "t.runner").read_text().splitlines()
    assert len(lines) == 3 and [float(x.split(",")[6]) for x in lines[1:]] == [2.5, 2.5]
    fields = lines[1].split(",")
    assert len(fields) == 16, ("start, requests, length, 3 wall, 3 device, mode, 3 thread "
                               "CPU, the model's wall, device and lead")
    wall, thread = float(fields[3]), float(fields[10])
    assert 0.0 <= thread <= wall + 0.5, "the thread's CPU time within its wall time"
    assert fields[13:] == ["0.000"] * 3, "no model call in these steps"
    assert len(trace.pending) == 2  # step 2 (unfinished) and the last one


def test_phase_trace_times_the_model_call_within_the_forward(tmp_path):
    """The model's own call (the runner's `_model_forward`) is a sub-phase of the
    forward: its host time, its device time and the device time from the forward's start
    to the model's (session 51: a forward's slow stretches, graph or lead)."""
    trace = PhaseTrace(str(tmp_path / "t.runner"), use_cuda=False)
    trace.finish_step(8, 0)
    forward = trace.begin("forward")
    model = trace.begin("model")
    trace.end(model)
    trace.end(forward)
    trace.events["forward"] = (_Event(100.0, done=True), _Event(106.5, done=True))
    trace.events["model"] = (_Event(101.25, done=True), _Event(106.0, done=True))
    trace.finish_step(8, 1)
    trace.finish_step(8, 1)
    fields = (tmp_path / "t.runner").read_text().splitlines()[1].split(",")
    assert float(fields[6]) == 6.5  # the forward phase's device time
    model_wall, model_gpu, lead = map(float, fields[13:16])
    assert model_gpu == 4.75 and lead == 1.25
    assert 0.0 <= model_wall <= float(fields[3]), "the model's host time within the forward's"


def test_sync_debug_counts_syncs_per_site_and_step_kind(tmp_path):
    path = tmp_path / "syncs.txt"
    dbg = SyncDebug(str(path), after_steps=1, flush_every=1000)
    show = warnings.showwarning
    passed_on = []
    warnings.showwarning = lambda message, *args, **kw: passed_on.append(str(message))
    try:
        dbg.begin_step("plain")  # warm-up: not counted
        assert not dbg.enabled

        def sync_site():
            warnings.warn(f"called a {SYNC_MESSAGE}")

        for kind, n in (("plain", 2), ("verify+draft", 3)):
            dbg.begin_step(kind)
            for _ in range(n):
                sync_site()
        warnings.simplefilter("always")
        warnings.warn("unrelated")  # other warnings go where they went before
        dbg.write()
    finally:
        warnings.showwarning = show
        warnings.resetwarnings()
    assert passed_on == ["unrelated"]
    text = path.read_text()
    assert "steps by kind (after 1 warm-up steps): plain 1, verify+draft 1" in text
    rows = [line.split("\t") for line in text.splitlines() if "\t" in line]
    assert [(r[0], r[1]) for r in rows] == [("verify+draft", "3 syncs (3.00/step)"),
                                            ("plain", "2 syncs (2.00/step)")]
    assert all("sync_site" in r[2] for r in rows), rows


def test_step_kind():
    out = SimpleNamespace(scheduled_spec_decode_tokens={}, num_spec_tokens_to_schedule=0)
    assert step_kind(out) == "plain"
    out.num_spec_tokens_to_schedule = 3
    assert step_kind(out) == "plain+draft"
    out.scheduled_spec_decode_tokens = {"a": [1, 2]}
    assert step_kind(out) == "verify+draft"
    out.scheduled_new_reqs = [object()]  # a request starts: its prompt's prefill
    assert step_kind(out) == "prefill+verify+draft"


def test_sync_debug_file_per_process(monkeypatch, tmp_path):
    import os

    monkeypatch.setenv("VLLM_BASS_SYNC_DEBUG", str(tmp_path / "syncs_{pid}.txt"))
    dbg = SyncDebug.from_env()
    assert dbg.path == str(tmp_path / f"syncs_{os.getpid()}.txt")


def test_trace_folder_is_made(tmp_path):
    """A trace variable naming a folder not yet there is a trace, not a failed start-up."""
    from vllm_bass.diagnostics import open_trace
    path = tmp_path / "not" / "yet" / "steps.csv"
    with open_trace(str(path)) as fh:
        fh.write("x\n")
    with open_trace(str(path)) as fh:  # appends
        fh.write("y\n")
    assert path.read_text() == "x\ny\n"
