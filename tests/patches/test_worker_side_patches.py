"""`patches/draft_kernel_specialization` turns off Triton's specialisation of a kernel before
its first launch. (That the drafter methods, drafter state and kernels BASS touches still
exist: `tests/patches/test_registry.py`.)"""

import pytest

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def test_unspecialize_turns_off_specialisation_before_first_launch():
    """On a real Triton kernel (ours, never launched), in a fresh interpreter: once vLLM's
    CPU build is imported, `triton` may be its placeholder, whose jit is no JITFunction."""
    import subprocess
    import sys
    from pathlib import Path

    code = """
from vllm_bass.kernels.draft_step_update import _draft_step_update_kernel as kernel
from vllm_bass.patches.draft_kernel_specialization import unspecialize

assert unspecialize(kernel)
runtime = [p for p in kernel.params if not p.is_constexpr]
assert runtime and all(p.do_not_specialize and p.do_not_specialize_on_alignment
                       for p in runtime)
assert not unspecialize(lambda: None)
print("ok")
"""
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # kernels' conftest
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2], env=env)
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]
