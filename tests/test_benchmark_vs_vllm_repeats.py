"""How many timed repeats issue 13's speed benchmark gives a setting (`vs_vllm.timed_repeats`):
short runs get more, so the best-of is not one lucky or unlucky half second."""

import pytest

from benchmarks.e2e import vs_vllm

pytestmark = [pytest.mark.cpu]


def test_short_runs_get_more_repeats_up_to_the_cap():
    assert vs_vllm.timed_repeats(2, warm_seconds=0.5, min_seconds=3.0) == 6
    assert vs_vllm.timed_repeats(2, warm_seconds=0.05, min_seconds=3.0) == vs_vllm.MAX_REPEATS


def test_long_runs_keep_the_asked_repeats():
    assert vs_vllm.timed_repeats(2, warm_seconds=4.0, min_seconds=3.0) == 2
    assert vs_vllm.timed_repeats(3, warm_seconds=1.2, min_seconds=3.0) == 3


def test_zero_minimum_means_exactly_the_asked_repeats():
    assert vs_vllm.timed_repeats(2, warm_seconds=0.1, min_seconds=0.0) == 2
    assert vs_vllm.timed_repeats(5, warm_seconds=0.0, min_seconds=3.0) == 5


def test_a_system_run_again_in_one_call_keeps_its_configuration():
    """`NAME@TAG` runs NAME's engine once more (an order check), and stays out of vLLM's
    best K."""
    again = vs_vllm.engine_kwargs(vs_vllm.engine_system("bass_fixed2@2"), "t", "d", 2048, 8)
    assert again == vs_vllm.engine_kwargs("bass_fixed2", "t", "d", 2048, 8)
    assert vs_vllm.engine_system("bass_default") == "bass_default"
    rows = [{"system": "vllm_k2@2", "draft": "d", "acceptance": "0.5", "batch": 8,
             "ms_per_token": 1.0},
            {"system": "vllm_k3", "draft": "d", "acceptance": "0.5", "batch": 8,
             "ms_per_token": 2.0}]
    assert vs_vllm.best_vllm(rows, "d", "0.5", 8)["system"] == "vllm_k3"


def test_the_report_compares_medians_too(tmp_path):
    """Best-of favours the system whose repeats scatter; the medians' column does not:
    here BASS has the best single repeat, vLLM the better median."""
    def row(system, repeats):
        return {"system": system, "draft": "4x1024", "acceptance": "0.9", "batch": 1,
                "ms_per_token": min(repeats), "repeat_ms_per_token": repeats,
                "mean_acceptance_length": 1.0, "mean_draft_length": 1.0,
                "off_step_fraction": 0.0, "tokens_per_s": 1.0}
    rows = [row("bass_default", [1.0, 2.0, 2.2]), row("vllm_k5", [1.6, 1.7, 1.8]),
            row("vllm_k3", [1.9, 1.9])]
    assert vs_vllm.median_ms(rows[0]) == 2.0 and vs_vllm.median_ms(rows[2]) == 1.9
    assert vs_vllm.best_vllm(rows, "4x1024", "0.9", 1, key=vs_vllm.median_ms)["system"] \
        == "vllm_k5"
    vs_vllm.report({"rows": rows, "device": "test"}, tmp_path / "r")
    line = next(x for x in (tmp_path / "r.md").read_text().splitlines()
                if x.startswith("| 4x1024 | 0.9 | 1 |"))
    assert "| 1.60x | 0.85x (5) |" in line, line
