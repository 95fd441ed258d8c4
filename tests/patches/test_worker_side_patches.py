"""What the worker side touches in vLLM besides the registered patches: the drafter
methods BASS overrides (signatures), and vLLM's drafter input kernels whose Triton
specialisation `patches/draft_kernel_specialization` turns off."""

import inspect

import pytest

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def test_overridden_drafter_methods_unchanged():
    from vllm.v1.spec_decode.draft_model import DraftModelProposer

    from vllm_bass.worker.drafter.draft_model import OVERRIDDEN_DRAFTER_METHODS

    for name, expected in OVERRIDDEN_DRAFTER_METHODS.items():
        assert str(inspect.signature(getattr(DraftModelProposer, name))) == expected, (
            f"DraftModelProposer.{name} changed: review vllm_bass/worker/drafter/draft_model.py")


def test_drafter_state_the_draft_loop_uses_still_exists():
    import vllm.v1.spec_decode.llm_base_proposer as base

    from vllm_bass.worker.drafter.draft_model import DRAFTER_ATTRIBUTES

    source = inspect.getsource(base.SpecDecodeBaseProposer)
    for name in DRAFTER_ATTRIBUTES:
        assert f"self.{name}" in source or f"def {name}" in source, name


def test_drafter_kernels_resolve():
    from vllm_bass.patches import resolve
    from vllm_bass.patches.draft_kernel_specialization import KERNELS

    for dotted in KERNELS:
        resolve(dotted)  # raises when vLLM renamed or moved one


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
