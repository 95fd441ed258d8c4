"""The policy wing stays pure: importing every module of `vllm_bass.policy` loads neither vLLM
nor torch (the scheduler's policies are numpy and plain Python, testable and reusable without
an engine), and no module of the package imports another wing of vllm_bass."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cpu]

POLICY = Path(__file__).resolve().parents[2] / "vllm_bass" / "policy"


def test_policy_modules_import_without_vllm_or_torch():
    modules = [f"vllm_bass.policy.{p.stem}" for p in sorted(POLICY.glob("*.py"))
               if p.stem != "__init__"]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'torch'))\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=POLICY.parents[1], check=True)
    assert out.stdout.strip() == "", f"the policy wing imported {out.stdout.strip()}"


def test_policy_modules_import_only_the_policy_wing():
    for path in POLICY.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vllm_bass"):
                assert node.module.startswith("vllm_bass.policy"), (path.name, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith(("vllm", "torch")), (path.name, alias.name)
