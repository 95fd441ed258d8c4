"""Plugin entry point: version guard, escape hatch, kill switch, registration in a fresh
process through vLLM's own plugin loader."""

import os
import subprocess
import sys

import pytest

from vllm_bass.plugin import (
    ALLOW_ANY_VLLM_ENV,
    SUPPORTED_VLLM,
    UnsupportedVLLMVersion,
    check_vllm_version,
)

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def test_version_guard_names_found_and_supported(monkeypatch):
    monkeypatch.delenv(ALLOW_ANY_VLLM_ENV, raising=False)
    check_vllm_version(SUPPORTED_VLLM)
    with pytest.raises(UnsupportedVLLMVersion) as err:
        check_vllm_version("0.28.0")
    assert "0.28.0" in str(err.value) and SUPPORTED_VLLM in str(err.value)
    assert ALLOW_ANY_VLLM_ENV in str(err.value)


def test_version_guard_escape_hatch(monkeypatch):
    monkeypatch.setenv(ALLOW_ANY_VLLM_ENV, "1")
    check_vllm_version("0.28.0")


PROBE = """
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm_bass import patches
print("PATCHED", patches.is_patched("vllm.engine.arg_utils.EngineArgs.create_engine_config"))
"""


@pytest.mark.parametrize("disable,expected", [("0", "True"), ("1", "False")])
def test_vllm_loads_plugin_unless_killed(disable, expected):
    env = dict(os.environ, VLLM_BASS_DISABLE=disable)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, timeout=300)
    assert f"PATCHED {expected}" in out.stdout, out.stderr[-3000:]


def test_gpu_worker_module_does_not_import_vllm_cpu_worker():
    """vllm.v1.worker.cpu_worker imports vllm.v1.worker.cpu.shm, which monkeypatches torch
    and vLLM for the whole process (CPU-only async_tensor_h2d, no-op synchronize). On a GPU
    host that put speculative metadata on the CPU; the GPU worker must never import it."""
    code = ("import sys, vllm_bass.worker.gpu_worker, vllm_bass.worker.model_runner, vllm_bass.scheduler\n"
            "bad = [m for m in sys.modules if m.startswith('vllm.v1.worker.cpu')]\n"
            "print('CPU_MODULES', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert "CPU_MODULES []" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]
