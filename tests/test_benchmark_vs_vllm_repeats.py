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


class _FakeEngine:
    """Each step: every request in flight gets `speed` tokens, finished at max_tokens; the
    clock is the step count. Records the most requests in flight."""

    def __init__(self):
        self.live, self.most, self.steps = {}, 0, 0

    def add_request(self, rid, prompt, params):
        self.live[rid] = [0, params]
        self.most = max(self.most, len(self.live))

    def has_unfinished_requests(self):
        return bool(self.live)

    def step(self):
        from types import SimpleNamespace

        self.steps += 1
        outs = []
        for rid, state in list(self.live.items()):
            state[0] = min(state[0] + state[1]["speed"], state[1]["max_tokens"])
            done = state[0] >= state[1]["max_tokens"]
            outs.append(SimpleNamespace(request_id=rid, finished=done, outputs=[
                SimpleNamespace(token_ids=list(range(state[0])))]))
            if done:
                del self.live[rid]
        return outs


def test_continuous_workload_keeps_the_batch_in_flight_and_counts_its_tokens(monkeypatch):
    """Requests 3, 7, 11, 15 emit 1 token a step, the others 4; 8 tokens each, 4 in flight.
    Closed batches of 4 would move 32 tokens per 8 steps (the slow one paces each); kept in
    flight, the fast slots are refilled: 106 tokens in the 10 steps before the last request
    is submitted (worked out step by step), and the tail after it is not counted."""
    from types import SimpleNamespace

    engine = _FakeEngine()
    monkeypatch.setattr(vs_vllm.time, "perf_counter", lambda: float(engine.steps))
    params = [{"speed": 1 if i % 4 == 3 else 4, "max_tokens": 8} for i in range(16)]
    rate = vs_vllm.continuous_tokens_per_s(SimpleNamespace(llm_engine=engine),
                                           [None] * 16, params, concurrency=4)
    assert engine.most == 4 and not engine.live
    assert rate == 106 / 10


def test_repeats_go_on_while_every_repeat_compiled_a_kernel():
    """A compile inside every timed repeat would make the best-of a compile's time: more
    repeats until one runs clean, at most EXTRA_REPEATS_AFTER_JIT more."""
    def engine(compiles_per_run):
        state = {"compiled": 0, "runs": 0}

        def run_once():
            compiles = compiles_per_run[state["runs"]]
            state["runs"] += 1
            state["compiled"] += compiles
            return 5.0 if compiles else 1.0
        return run_once, lambda: state["compiled"]

    run_once, compiled = engine([2, 1, 1, 0, 0, 0, 0])
    results, compiles = vs_vllm.repeat_until_clean(run_once, compiled, repeats=2, extra=3)
    assert compiles == [2, 1, 1, 0] and min(results) == 1.0

    run_once, compiled = engine([1, 0, 1, 1, 1])  # one clean repeat: no extra
    assert vs_vllm.repeat_until_clean(run_once, compiled, repeats=2, extra=3)[1] == [1, 0]

    run_once, compiled = engine([1] * 10)  # never clean: capped
    results, compiles = vs_vllm.repeat_until_clean(run_once, compiled, repeats=2, extra=3)
    assert len(results) == 5 and all(compiles)


def test_runs_split_over_gpus_merge_into_one_report(tmp_path):
    """Two processes of one host (one a GPU) measured different systems: one JSON, one
    table, vLLM's best K taken over both parts; a part of another experiment is refused."""
    def part(system, ms, **extra):
        return dict({"device": "H200", "prompt_len": 128, "max_tokens": 128,
                     "rows": [{"system": system, "draft": "4x1024", "acceptance": "0.7",
                               "batch": 8, "ms_per_token": ms}],
                     "startup_phases": {f"{system}/4x1024": {"graph_capture_s": 1.0}}},
                    **extra)
    merged = vs_vllm.merge_results({"rows": []}, [part("vllm_k2", 3.0), part("vllm_k5", 2.5),
                                                  part("vllm_k2", 2.8)])
    assert sorted((r["system"], r["ms_per_token"]) for r in merged["rows"]) == [
        ("vllm_k2", 2.8), ("vllm_k5", 2.5)]
    assert set(merged["startup_phases"]) == {"vllm_k2/4x1024", "vllm_k5/4x1024"}
    assert vs_vllm.best_vllm(merged["rows"], "4x1024", "0.7", 8)["system"] == "vllm_k5"
    with pytest.raises(SystemExit, match="prompt"):
        vs_vllm.merge_results({"rows": []}, [part("plain", 5.0),
                                             part("vllm_k3", 3.0, prompt_len=512)])


def test_bass_default_runs_first_unless_the_order_is_kept():
    """A call's time limit cuts the baselines run last, not BASS (session 40 lost BASS's
    rows of a held-out slice that way)."""
    given = ["plain", "vllm_k2", "bass_default", "vllm_k3"]
    assert vs_vllm.run_order(given) == ["bass_default", "plain", "vllm_k2", "vllm_k3"]
    assert vs_vllm.run_order(given, keep_order=True) == given
    assert vs_vllm.run_order(["plain", "vllm_k2"]) == ["plain", "vllm_k2"]


def test_each_repeat_says_how_it_speculated():
    """A slow repeat beside fast ones: did it sit off, draft longer, or accept less?"""
    counts = [{"steps_on": 30, "steps_off": 10, "vllm:spec_decode_num_drafts": 60,
               "vllm:spec_decode_num_draft_tokens": 150,
               "vllm:spec_decode_num_accepted_tokens": 90},
              {"steps_on": 0, "steps_off": 0, "vllm:spec_decode_num_drafts": 0,
               "vllm:spec_decode_num_draft_tokens": 0,
               "vllm:spec_decode_num_accepted_tokens": 0}]
    got = vs_vllm.repeat_speculation(counts)
    assert got == {"repeat_off_step_fraction": [0.25, None],
                   "repeat_mean_draft_length": [2.5, None],
                   "repeat_mean_acceptance_length": [2.5, None]}


def test_a_closed_batch_is_timed_from_generate_alone():
    """The makespan covers `generate` only: the requests are built before the clock."""
    import time

    built = []

    def slow_prompts():
        time.sleep(0.2)
        built.append(True)
        return ["p"]

    class FakeLLM:
        def generate(self, prompts, params, use_tqdm):
            assert built and prompts == ["p"] and params == ["s"] and use_tqdm is False
            time.sleep(0.01)

    seconds = vs_vllm.closed_batch_seconds(FakeLLM(), slow_prompts(), ["s"])
    assert 0.01 <= seconds < 0.15
