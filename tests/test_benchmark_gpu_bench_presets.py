"""Every system and draft that a `scripts/gpu_bench.sh` preset hands to `vs_vllm.py` is
one the benchmark knows. A misspelt name fails only on the GPU host, when its engine's
turn comes, after the device minutes before it are spent."""

import re
from pathlib import Path

import pytest

from benchmarks.e2e import vs_vllm

pytestmark = [pytest.mark.cpu]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_bench.sh"


def _preset_values(flag: str) -> list[str]:
    """The literal comma-separated values after `flag` in the script's code (values built
    from shell variables are left out, and so is the time-budget tool's line: `TB_ARGS`,
    whose systems are that tool's own)."""
    code = "\n".join(line.split(" # ")[0] for line in SCRIPT.read_text().splitlines()
                     if not line.lstrip().startswith("#") and "TB_ARGS" not in line)
    return [v for v in re.findall(rf"{flag}[ =]?([A-Za-z0-9_.,@]+)", code) if "$" not in v]


def test_every_preset_names_systems_the_benchmark_runs():
    lists = _preset_values("--systems") + _preset_values("SYSTEMS:-")
    assert len(lists) >= 12, lists  # the presets' lists were found
    for names in lists:
        for name in names.split(","):
            # raises SystemExit for a name it does not know
            vs_vllm.engine_kwargs(vs_vllm.engine_system(name), "t", "d", 2048, 8)


def test_every_preset_names_drafts_the_benchmark_builds():
    lists = _preset_values("--drafts")
    assert lists
    for names in lists:
        for name in names.split(","):
            assert vs_vllm.draft_shape(name)["num_hidden_layers"] > 0


def test_an_unknown_system_is_refused():
    with pytest.raises(SystemExit, match="unknown system"):
        vs_vllm.engine_kwargs("bass_fixd5", "t", "d", 2048, 8)
