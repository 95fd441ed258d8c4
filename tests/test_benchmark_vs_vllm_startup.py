"""The start-up columns of the speed benchmark (`vs_vllm.startup_phases`): an engine's
start-up by phase, read from its log, so an engine cut before its rows still reports one
(session 35: vLLM K=3's start-up was read off its log by hand)."""

from types import SimpleNamespace

import pytest

from benchmarks.e2e import vs_vllm

pytestmark = [pytest.mark.cpu]

LOG = """\
INFO 11-28 23:59:50 [api_utils.py:273] non-default args: {'load_format': 'dummy'}
(EngineCore pid=7) INFO 11-29 00:00:20 [monitor.py:53] torch.compile took 21.12 s in total
(EngineCore pid=7) INFO 11-29 00:00:30 [monitor.py:53] torch.compile took 10.27 s in total
(EngineCore pid=7) INFO 11-29 00:00:40 [precompile.py:316] vllm-bass: compiled 16 attention \
kernel binaries for the CUDA graphs ahead of their capture (156 launches replayed, 8 threads, \
0 errors) in 2.7 s
(EngineCore pid=7) INFO 11-29 00:00:56 [gpu_model_runner.py:6913] Graph capturing finished \
in 16 secs, took -0.06 GiB
(EngineCore pid=7) INFO 11-29 00:00:57 [precompile.py:330] vllm-bass: the CUDA-graph captures \
compiled 3 attention kernel binaries the precompile did not foresee
(EngineCore pid=7) INFO 11-29 00:01:00 [core.py:348] init engine (profile, create kv cache, \
warmup model) took 69.12 s (compilation: 31.40 s)
(EngineCore pid=7) WARNING 11-29 00:01:02 [jit_monitor.py:135] Triton kernel JIT compilation \
during inference: _paged_attention_pad_kernel. This causes a latency spike
"""


def test_phases_of_a_bass_engine_log():
    phases = vs_vllm.startup_phases(LOG)
    assert phases == pytest.approx({
        "torch_compile_s": 31.39, "graph_capture_s": 16, "init_engine_s": 69.12,
        "precompiled": 16, "precompile_s": 2.7, "capture_misses": 3, "jit_in_serving": 1,
        "log_to_ready_s": 70})  # across midnight


def test_an_engine_without_our_lines_or_cut_before_ready():
    vllm_only = "\n".join(line for line in LOG.splitlines() if "precompile.py" not in line)
    phases = vs_vllm.startup_phases(vllm_only)
    assert "precompiled" not in phases and "capture_misses" not in phases
    cut = "\n".join(LOG.splitlines()[:3])
    assert vs_vllm.startup_phases(cut) == pytest.approx(
        {"torch_compile_s": 31.39, "jit_in_serving": 0})
    assert vs_vllm.startup_phases("") == {"jit_in_serving": 0}


def test_the_report_lists_an_engine_that_wrote_no_rows():
    data = {"rows": [], "cold_start": True,
            "startup_phases": {"vllm_k3/4x1024": vs_vllm.startup_phases(LOG)}}
    lines = vs_vllm._startup_lines(data)
    assert "empty torch.compile caches" in lines[1]
    row = [line for line in lines if line.startswith("| vllm_k3 |")]
    assert row == ["| vllm_k3 | 4x1024 | — | 70 | 31 | 16 | 16 (2.7) | 3 | 1 | — | — |"]


def test_the_calls_first_engine_gets_more_time_to_compile():
    """The first engine compiles the models that the later ones load from torch.compile's
    cache: session 49's call gave every engine 115 s, and a fresh machine's first engine,
    still capturing graphs then, was killed (so was the call's second, by the call's
    limit)."""
    args = SimpleNamespace(timeout=170.0, first_timeout_extra=90.0)
    assert vs_vllm.system_timeout(0, args) == 260.0
    assert vs_vllm.system_timeout(1, args) == 170.0
    assert vs_vllm.system_timeout(5, args) == 170.0
