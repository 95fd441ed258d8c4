"""`pyspy_phases.py` splits a py-spy raw file by system (each child's engine-core process),
keeps the engine core's step stacks, sets compiling stacks apart and sums phases inclusively
(a stack counts once per phase however deep the phase recurs)."""

import pytest

from benchmarks.e2e import pyspy_phases

pytestmark = [pytest.mark.cpu]

ROOT = 'process 1:"";process {pid}:"python vs_vllm.py --child";process {core}:"EngineCore"'
STEP = "EngineCore.step_with_batch_queue (vllm/v1/engine/core.py:400)"


def _line(pid, core, frames, count):
    return ";".join([ROOT.format(pid=pid, core=core), *frames]) + f" {count}"


def test_phases_by_system(tmp_path):
    sched = "Scheduler.schedule (vllm/v1/core/sched/scheduler.py:439)"
    plan = "BassScheduler._bass_plan_step (vllm_bass/scheduler.py:292)"
    prep = "GPUModelRunner._prepare_inputs (vllm/v1/worker/gpu_model_runner.py:1960)"
    compile_ = "JITFunction._do_compile (triton/runtime/jit.py:700)"
    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join([
        _line(10, 11, [STEP, sched, plan], 40),
        _line(10, 11, [STEP, prep, compile_], 20),
        _line(10, 11, [STEP, prep], 60),
        _line(10, 11, ["LLM.__init__ (vllm/entrypoints/llm.py:295)"], 500),  # start-up
        _line(20, 21, [STEP, sched], 10),
        'process 1:"";<module> (vs_vllm.py:910) 7',
    ]) + "\n")
    out = pyspy_phases.phases(raw, {"10": "bass", "20": "vllm"}, rate=100.0)
    assert out["bass"]["step_s"] == 1.2 and out["bass"]["compiling_s"] == 0.2
    assert out["bass"]["serving_s"] == 1.0
    assert out["bass"]["phases_s"] == {"Scheduler.schedule": 0.4,
                                       "BassScheduler._bass_plan_step": 0.4,
                                       "GPUModelRunner._prepare_inputs": 0.6}
    assert out["vllm"]["phases_s"] == {"Scheduler.schedule": 0.1}
    # one system per recording: every child counts as it
    alone = pyspy_phases.phases(raw, {"*": "one"}, rate=100.0)
    assert alone["one"]["step_s"] == 1.3
    assert alone["one"]["phases_s"]["Scheduler.schedule"] == 0.5
