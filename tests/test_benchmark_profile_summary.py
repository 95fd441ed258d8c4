"""The trace summariser behind session 11's diagnosis (`benchmarks/e2e/profile_summary.py`):
GPU busy/idle from overlapping kernels, idle attributed to the innermost host range running
when the GPU went idle, per-range self time, and the py-spy summariser's focus shares."""

import gzip
import json

import pytest

from benchmarks.e2e.profile_summary import _union, by_step_shape, self_time_breakdown, summarise
from benchmarks.e2e.pyspy_summary import load, summarise as spy_summarise

pytestmark = [pytest.mark.cpu]


def _ev(cat, name, ts, dur, tid=1):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def test_fa3_kernels_count_as_attention():
    from benchmarks.e2e.profile_summary import _kernel_family

    assert _kernel_family("void cutlass::device_kernel<flash::enable_sm90_or_later<"
                          "flash::FlashAttnFwdSm90<...>") == "attention"
    assert _kernel_family("void cutlass::device_kernel<cutlass::gemm::Sm90>") == "gemm"


def test_union_merges_overlaps_and_reports_gaps():
    busy, gaps = _union([(0, 10), (5, 20), (30, 40), (40, 41)])
    assert busy == 31 and gaps == [(20, 30)]


def test_summary_attributes_idle_and_self_time(tmp_path):
    events = [
        _ev("user_annotation", "execute_context_0(0)_generation_4(8)", 0, 100),
        _ev("user_annotation", "gpu_model_runner: preprocess", 0, 60),
        _ev("cpu_op", "aten::copy_", 10, 20),
        _ev("user_annotation", "bass_drafter: first pass", 60, 40),
        _ev("kernel", "nvjet_gemm", 0, 30, tid=7),
        _ev("kernel", "flash_fwd", 25, 15, tid=7),      # overlaps: busy 0-40
        _ev("kernel", "triton_small", 80, 20, tid=7),   # idle 40-80: begins in preprocess
    ]
    path = tmp_path / "t.pt.trace.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events}, fh)
    s = summarise(path)
    assert s["steps"] == 1 and s["step_tokens_scheduled"] == 8
    assert s["gpu_window_ms"] == pytest.approx(0.1) and s["gpu_busy_ms"] == pytest.approx(0.06)
    assert s["idle_by_host_phase_ms"] == {"gpu_model_runner: preprocess": pytest.approx(0.04)}
    assert s["kernel_families_ms"]["gemm"] == pytest.approx(0.03)
    selfs = self_time_breakdown(events)
    assert selfs["gpu_model_runner: preprocess"]["gpu_model_runner: preprocess"] == (
        pytest.approx(0.04))  # 60 us minus the 20 us copy inside it
    assert selfs["bass_drafter: first pass"] == {"bass_drafter: first pass": pytest.approx(0.04)}


def test_pyspy_focus_share(tmp_path):
    raw = tmp_path / "spy.txt"
    raw.write_text('process 1:"VLLM::EngineCore";loop (a.py:1);propose (b.py:2);'
                   'first_pass (c.py:3) 6\n'
                   'process 1:"VLLM::EngineCore";loop (a.py:1);schedule (d.py:4) 2\n'
                   'process 2:"other";main (e.py:1) 50\n')
    s = spy_summarise(load(raw, "EngineCore"), ["propose"])
    assert s["samples"] == 8
    assert s["propose"]["share"] == pytest.approx(0.75)
    assert s["propose"]["callees"] == [("first_pass (c.py)", 1.0)]


def test_kernels_belong_to_the_step_and_phase_that_launched_them():
    """A kernel that runs after its step's host range ended (async) still counts for the
    step (and the phase) whose launch call carries its correlation id."""
    def launch(ts, corr):
        return {**_ev("cuda_runtime", "cudaGraphLaunch", ts, 1), "args": {"correlation": corr}}

    def kernel(name, ts, dur, corr):
        return {**_ev("kernel", name, ts, dur, tid=7), "args": {"correlation": corr}}

    events = [
        _ev("user_annotation", "execute_context_0(0)_generation_2(8)", 0, 50),
        _ev("user_annotation", "gpu_model_runner: forward", 0, 40),
        launch(10, 1),
        _ev("user_annotation", "gpu_model_runner: draft", 60, 20),
        launch(65, 2),
        _ev("user_annotation", "execute_context_0(0)_generation_2(8)", 100, 50),
        launch(110, 3),
        _ev("user_annotation", "execute_context_0(0)_generation_2(2)", 200, 50),
        kernel("flash_fwd", 120, 30, 1),       # step 1's forward, run during step 2
        kernel("nvjet_gemm", 150, 10, 2),      # step 1's draft
        kernel("nvjet_gemm", 160, 40, 3),      # step 2 (no phase range: other)
    ]
    shapes = by_step_shape(events)
    assert list(shapes) == ["2x8"]  # the last step has no period: left out
    g = shapes["2x8"]
    assert g["steps"] == 2 and g["period_ms"] == pytest.approx(0.1)
    # medians over the two steps: step 1 has 40 us (30 forward + 10 draft), step 2 40 us
    assert g["gpu_ms"]["total"] == pytest.approx(0.04)
    # upper median of (30, 0) us forward, (10, 0) draft
    assert g["gpu_ms"]["phase forward"] == pytest.approx(0.03)
    assert g["gpu_ms"]["phase draft"] == pytest.approx(0.01)
    assert g["gpu_ms"]["attention"] == pytest.approx(0.03)


def test_blocking_sites_name_the_code_that_waited():
    from benchmarks.e2e.profile_summary import blocking_sites

    events = [
        _ev("user_annotation", "gpu_model_runner: preprocess", 0, 1000),
        _ev("python_function", "runner.py(10): _prepare_inputs", 10, 900),
        _ev("python_function", "batch.py(20): refresh", 20, 500),
        _ev("cuda_runtime", "cudaEventSynchronize", 30, 400),
        _ev("cuda_runtime", "cudaEventSynchronize", 600, 100),   # outside refresh
        _ev("cuda_runtime", "cudaEventSynchronize", 700, 10),    # too short to count
        _ev("cuda_runtime", "cudaEventSynchronize", 30, 400, tid=2),  # another thread
        _ev("cuda_runtime", "cudaLaunchKernel", 40, 400),        # not blocking
    ]
    sites = blocking_sites(events)
    inner = ("cudaEventSynchronize | gpu_model_runner: preprocess | "
             "batch.py(20): refresh < runner.py(10): _prepare_inputs")
    outer = "cudaEventSynchronize | gpu_model_runner: preprocess | runner.py(10): _prepare_inputs"
    assert sites[inner] == {"count": 1, "ms": 0.4}
    assert sites[outer] == {"count": 1, "ms": 0.1}
    assert sites["cudaEventSynchronize | - | "] == {"count": 1, "ms": 0.4}
    assert len(sites) == 3


def test_prefill_steps_are_their_own_shape():
    """A step with prefill tokens is keyed apart from pure decode steps of the same
    generation shape (chunk size to the power of two), each shape with its GPU time sum."""
    def launch(ts, corr):
        return {**_ev("cuda_runtime", "cudaLaunchKernel", ts, 1), "args": {"correlation": corr}}

    def kernel(ts, dur, corr):
        return {**_ev("kernel", "nvjet_gemm", ts, dur, tid=7), "args": {"correlation": corr}}

    events = [
        _ev("user_annotation", "execute_context_2(3000)_generation_2(8)", 0, 50), launch(1, 1),
        _ev("user_annotation", "execute_context_0(0)_generation_2(8)", 100, 50), launch(101, 2),
        _ev("user_annotation", "execute_context_0(0)_generation_2(8)", 200, 50), launch(201, 3),
        _ev("user_annotation", "execute_context_0(0)_generation_2(2)", 300, 50),
        kernel(10, 80, 1), kernel(110, 20, 2), kernel(210, 30, 3),
    ]
    shapes = by_step_shape(events)
    assert sorted(shapes) == ["2x8", "prefill<=4096+2x8"]
    assert shapes["prefill<=4096+2x8"]["gpu_ms_sum"] == pytest.approx(0.08)
    assert shapes["2x8"]["steps"] == 2 and shapes["2x8"]["gpu_ms_sum"] == pytest.approx(0.05)
