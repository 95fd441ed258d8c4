"""`vs_vllm.py --arms` (session 54): an A/B of BASS policy attributes inside one engine, its
arms' timed runs interleaved, so that a host drifting over the runs (the H200 hosts'
15-25% scatter) weighs on every arm alike; the worker extension finds the engine's BASS
scheduler and sets the policy's attributes."""

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from benchmarks.e2e import synthetic_control as sc
from benchmarks.e2e import vs_vllm

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.cpu
def test_arms_parse_and_a_bad_one_names_the_flag():
    assert vs_vllm.parse_arms("reuse:plan_reuse_steps=4; noreuse:plan_reuse_steps=0,x=a") == [
        ("reuse", {"plan_reuse_steps": 4}), ("noreuse", {"plan_reuse_steps": 0, "x": "a"})]
    for bad in ("reuse:plan_reuse_steps=4", "a:x=1;a:x=2", "a:x;b:x=1", "a;b:x=1",
                ":x=1;b:x=2"):
        with pytest.raises(SystemExit, match="--arms"):
            vs_vllm.parse_arms(bad)


@pytest.mark.cpu
def test_arms_interleave_a_b_then_b_a():
    assert vs_vllm.armed_order(2, 3) == [0, 1, 1, 0, 0, 1]
    assert vs_vllm.armed_order(3, 2) == [0, 1, 2, 2, 1, 0]
    order = vs_vllm.armed_order(2, 4)
    assert order.count(0) == order.count(1) == 4


@pytest.mark.cpu
def test_policy_attributes_set_on_every_scheduler_and_unknown_names_refused():
    scheds = [types.SimpleNamespace(bass_policy=types.SimpleNamespace(plan_reuse_steps=4))
              for _ in range(2)]
    assert sc.set_policy_attributes(scheds, {"plan_reuse_steps": 0}) == 2
    assert [s.bass_policy.plan_reuse_steps for s in scheds] == [0, 0]
    with pytest.raises(AttributeError, match="--arms.*no_such"):
        sc.set_policy_attributes(scheds, {"no_such": 1})
    with pytest.raises(RuntimeError, match="--arms: no BASS scheduler"):
        sc.set_policy_attributes([], {"plan_reuse_steps": 0})


@pytest.mark.cpu
def test_an_armed_setting_times_each_arm_interleaved(monkeypatch, tmp_path):
    """A fake engine whose runs take the arm's time plus a drift that grows run by run:
    each arm gets `repeats` runs in the interleaved order, and its row its best run."""
    arms = [("fast", {"plan_reuse_steps": 4}), ("slow", {"plan_reuse_steps": 0})]
    current, ran = {}, []
    llm = types.SimpleNamespace(collective_rpc=lambda name, args: current.update(args[0]))
    counts = {"vllm:spec_decode_num_drafts": 0, "vllm:spec_decode_num_draft_tokens": 0,
              "vllm:spec_decode_num_accepted_tokens": 0, "steps_on": 0, "steps_off": 0}

    def run(slots):
        ran.append(current["plan_reuse_steps"])
        counts["vllm:spec_decode_num_drafts"] += 10
        counts["vllm:spec_decode_num_draft_tokens"] += 10 * (1 + current["plan_reuse_steps"])
        counts["steps_on"] += 10
        base = 0.001 if current["plan_reuse_steps"] == 4 else 0.002
        return base + 0.0001 * len(ran)  # seconds per token, the host drifting slower

    monkeypatch.setattr(vs_vllm, "compiled_kernels", lambda: {})
    spec = {"repeats": 3, "system": "bass_default", "draft": "4x1024"}
    rows = vs_vllm._armed_setting(llm, spec, arms, "mix", 32, [[0, 1]], run,
                                  lambda: dict(counts), n_tokens=100)
    assert ran == [4, 0] + [4, 0, 0, 4, 4, 0]  # warm-up, then A B, B A, A B
    fast, slow = rows
    assert (fast["arm"], slow["arm"]) == ("fast", "slow")
    assert fast["repeat_ms_per_token"] == pytest.approx([1.3, 1.6, 1.7])
    assert slow["repeat_ms_per_token"] == pytest.approx([2.4, 2.5, 2.8])
    assert fast["ms_per_token"] == pytest.approx(1.3)
    assert fast["mean_draft_length"] == 5.0 and slow["mean_draft_length"] == 1.0
    for r in rows:  # the report takes armed rows beside the others
        r.update(system=f"bass_default[{r['arm']}]", draft="4x1024")
    vs_vllm.report({"rows": rows, "device": "test"}, tmp_path / "r")
    assert "bass_default[slow]" in (tmp_path / "r.md").read_text()


@pytest.mark.cpu
@pytest.mark.slow
def test_the_worker_extension_reaches_the_engines_scheduler():
    """A real engine (CPU, in one process as one GPU's engine core and worker are): the
    extension finds its BASS scheduler after vLLM froze the start-up's objects."""
    code = (
        "from vllm import LLM\n"
        "from vllm_bass.plugin import register\n"
        "from support.isolated_engine import base_engine_kwargs, bass_spec\n"
        "register()\n"
        "llm = LLM(**base_engine_kwargs(speculative_config=bass_spec(num_speculative_tokens=4),"
        " worker_extension_cls='benchmarks.e2e.synthetic_control.SyntheticAcceptanceControl'))\n"
        "print('SET', llm.collective_rpc('bench_set_policy', args=({'plan_reuse_steps': 0},)))\n"
        "sched = llm.llm_engine.engine_core.engine_core.scheduler\n"
        "print('VALUE', sched.bass_policy.plan_reuse_steps)\n")
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE="1",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, timeout=600,
                         capture_output=True, text=True)
    assert "SET [1]" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]
    assert "VALUE 0" in out.stdout


@pytest.mark.cpu
def test_a_settings_row_takes_its_best_run_and_the_counters_over_all():
    d = {"vllm:spec_decode_num_drafts": 40, "vllm:spec_decode_num_draft_tokens": 120,
         "vllm:spec_decode_num_accepted_tokens": 60, "steps_on": 30, "steps_off": 10}
    row = vs_vllm.setting_timing(32, "mix", [0.8, 0.64, 0.72], d, n_tokens=128)
    assert row["seconds"] == 0.64 and row["ms_per_token"] == pytest.approx(5.0)
    assert row["tokens_per_s"] == pytest.approx(32 * 128 / 0.64)
    assert row["mean_draft_length"] == 3.0 and row["mean_acceptance_length"] == 2.5
    assert row["off_step_fraction"] == 0.25
    assert row["repeat_ms_per_token"] == pytest.approx([6.25, 5.0, 5.625])
    plain = dict(d, **{"vllm:spec_decode_num_drafts": 0, "steps_on": 0, "steps_off": 0})
    row = vs_vllm.setting_timing(1, "0.8", [0.5], plain, n_tokens=100)
    assert row["mean_draft_length"] is None and row["off_step_fraction"] is None


@pytest.mark.cpu
def test_arms_reach_the_adaptive_bass_engines_only():
    """A fixed-K BASS policy has no plan attributes (session 55: `arms_reuse` beside fixed
    K=1 would have failed its row); vLLM and plain run as they are."""
    arms = vs_vllm.parse_arms("a:plan_reuse_steps=4;b:plan_reuse_steps=0")
    assert vs_vllm.arms_for("bass_default", arms) == arms
    assert vs_vllm.arms_for("bass_default@2", arms) == arms
    assert vs_vllm.arms_for("bass_noreuse", arms) == arms
    for system in ("bass_fixed1", "bass_fixed3_fa3", "vllm_k1", "plain"):
        assert vs_vllm.arms_for(system, arms) == [], system
