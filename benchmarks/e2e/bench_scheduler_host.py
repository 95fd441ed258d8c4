"""The scheduler's own host time per step, by draft-length policy: the real BASS scheduler
driven through closed batches as `sim_closed_batch.py` does (simulated H100 step times,
geometric acceptance), with `schedule()` and `update_from_output()` timed on this machine's
clock. Under async scheduling this host work is on the critical path of every step when the
step is host-bound, so a policy's plan must stay cheap at large batches (session 12: at
batch 64-128 per-request plans cost ~1-1.5 ms more per step than fixed K on the H100).

    python benchmarks/e2e/bench_scheduler_host.py --batches 64,128 --policies per_request,fixed
    # session 54: a large batch's plan kept 4 steps (the default) against solved afresh
    python benchmarks/e2e/bench_scheduler_host.py --batches 32,64,128 --acceptance mix,0.8 \
        --max-tokens 128 --k 1 --plan-reuse-steps 0,4 --seeds 3 \
        --out benchmarks/results/session54/scheduler_host_plan_reuse_cpu.json

Each row also gives the mean ms a step of BASS's own parts (`mean_ms_per_step`: the plan,
the cost fit's model and its solves, the observations), which run inside the two.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.e2e.sim_closed_batch import alphas_for, run_batch, scheduler  # noqa: E402


def host_ms_per_step(policy: str, batch: int, acceptance: str, k: int, budget: int | None,
                     max_tokens: int, seed: int, auto_off: bool | None = None) -> dict:
    auto_off = policy != "fixed" if auto_off is None else auto_off
    sched = scheduler(batch, policy, k, auto_off=auto_off, async_scheduling=True,
                      token_budget=budget)
    spent = {"schedule": [], "update_from_output": []}
    # BASS's own parts inside them (session 52): mean ms a step, as each runs on some steps
    parts = {"bass_plan_step": (sched, "_bass_plan_step"),
             "policy_plan": (sched.bass_policy, "plan"),
             "cost_model_for": (sched.bass_costs, "model_for"),
             "policy_observe": (sched.bass_policy, "observe"),
             "cost_observe": (sched.bass_costs, "observe")}
    part_s = dict.fromkeys(parts, 0.0)

    def wrap(obj, name, sink):
        inner = getattr(obj, name)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                sink(time.perf_counter() - t0)
        setattr(obj, name, timed)

    for name in spent:
        wrap(sched, name, lambda s, _name=name: spent[_name].append(s * 1e3))
    for label, (obj, name) in parts.items():
        wrap(obj, name, lambda s, _label=label: part_s.__setitem__(_label, part_s[_label] + s))
    run_batch(sched, alphas_for(acceptance, batch), max_tokens, seed)
    run = {name: statistics.median(ms) for name, ms in spent.items()}
    steps = len(spent["schedule"])
    return {"policy": policy, "auto_off": auto_off, "k": k, "batch": batch,
            "acceptance": acceptance, "steps": steps,
            **{f"{n}_ms": round(v, 3) for n, v in run.items()},
            "host_ms_per_step": round(sum(run.values()), 3),
            "mean_ms_per_step": {label: round(s / max(steps, 1) * 1e3, 3)
                                 for label, s in part_s.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="64,128")
    ap.add_argument("--policies", default="per_request,fixed")
    ap.add_argument("--acceptance", default="0.8,mix")
    ap.add_argument("--k", type=int, default=3, help="fixed's K")
    ap.add_argument("--bound", type=int, default=16, help="per_request's longest draft")
    ap.add_argument("--auto-off", default="policy", choices=("policy", "on", "off", "both"),
                    help="policy: on except for fixed (the defaults); both: on, then off")
    ap.add_argument("--budget", type=int, default=1536, help="largest CUDA graph (tokens)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--plan-reuse-steps", default="",
                    help="per_request's PLAN_REUSE_STEPS values to run (comma list; "
                    "empty: the default)")
    ap.add_argument("--seeds", type=int, default=1, help="runs averaged per row")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from vllm_bass.policy import per_request

    reuse_values = [int(v) for v in args.plan_reuse_steps.split(",") if v.strip()] or [
        per_request.PLAN_REUSE_STEPS]
    rows = []
    for acceptance in args.acceptance.split(","):
        for batch in [int(b) for b in args.batches.split(",")]:
            for policy in args.policies.split(","):
                k = args.k if policy == "fixed" else args.bound
                for auto_off, reuse in itertools.product(
                        {"policy": [None], "on": [True], "off": [False],
                         "both": [True, False]}[args.auto_off],
                        reuse_values if policy == "per_request" else [None]):
                    if reuse is not None:
                        per_request.PLAN_REUSE_STEPS = reuse
                    runs = [host_ms_per_step(policy, batch, acceptance, k, args.budget,
                                             args.max_tokens, seed=seed, auto_off=auto_off)
                            for seed in range(args.seeds)]
                    row = dict(runs[0], seeds=args.seeds, plan_reuse_steps=reuse)
                    for key in ("host_ms_per_step", *(f"{n}_ms" for n in
                                                      ("schedule", "update_from_output"))):
                        row[key] = round(statistics.mean(r[key] for r in runs), 3)
                    row["mean_ms_per_step"] = {
                        label: round(statistics.mean(r["mean_ms_per_step"][label]
                                                     for r in runs), 3)
                        for label in runs[0]["mean_ms_per_step"]}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
