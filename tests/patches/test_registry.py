"""The registry of every vLLM surface we touch (`vllm_bass.patches.registry`) holds against
the installed vLLM: each wrapped or overridden callable keeps the signature it was written
for, each private attribute and class still exists, none of our attached attributes collides
with one of vLLM's, and every vLLM method our classes override is listed. Runs in a fresh
process (resolving the CPU worker patches torch process-wide)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_registered_surface_holds_in_this_vllm():
    problems = _run("import json\nfrom vllm_bass.patches.registry import check\n"
                    "print(json.dumps(check()))")
    assert problems == [], "\n".join(problems)


def test_registry_covers_every_class_swap_and_kind():
    """Every `__class__ =` assignment in the package has a class-swap entry for its module,
    and every entry names a known kind, its module and when it can go."""
    entries = _run("import json, dataclasses\nfrom vllm_bass.patches.registry import "
                   "surfaces\nprint(json.dumps([dataclasses.asdict(s) for s in surfaces()]))")
    kinds = {"wrap", "override", "class-swap", "private", "field-reuse", "attached",
             "kernel-flags", "global"}
    assert all(e["kind"] in kinds and e["where"] and e["why"] and e["until"]
               for e in entries)
    swapped_in = {e["where"] for e in entries if e["kind"] == "class-swap"}
    for path in (ROOT / "vllm_bass").rglob("*.py"):
        if "__class__ = " in path.read_text():
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            assert module in swapped_in, f"{module} swaps a class the registry does not list"


def test_check_reports_a_changed_signature():
    """The check can fail: a surface registered with another signature is reported."""
    problems = _run(
        "import json, dataclasses\nfrom vllm_bass.patches import registry\n"
        "s = [x for x in registry.surfaces() if x.kind == 'override' and x.signature][0]\n"
        "print(json.dumps([registry.check_one(dataclasses.replace(s, signature='(self)')),"
        " registry.check_one(dataclasses.replace(s, symbol=s.symbol + 'X'))]))")
    assert problems[0].startswith("signature changed") and problems[1]
