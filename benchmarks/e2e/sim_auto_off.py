"""Closed loop without a device: the scheduler's cost model, the draft-length policies and
auto-off against a simulated device with a known cost law and geometric acceptance (the
helpers of tests/test_scheduler.py, which assert bounds on the same runs). Reports the
token rate over plain decoding's with auto-off, with auto-off but a constant acceptance
prior for new requests (before the pooled prior), and with speculation always on; the mean
and the worst of `--seeds` acceptance seeds.

    python benchmarks/e2e/sim_auto_off.py --out benchmarks/results/sim_auto_off
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

# name: (cost law attribute in tests.test_scheduler, alpha, steps, tokens per request,
# compile stall in plain steps the first times each draft length runs (left out of the
# rate), how many times it stalls, step-time jitter)
PAIRS = {
    "host_bound": ("HOST_BOUND_PAIR", 0.5, 600, 400, 0.0, 1, 0.0),
    "seven_b_like": ("SEVEN_B_PAIR", 0.8, 400, 400, 0.0, 1, 0.0),
    "seven_b_measured_128": ("SEVEN_B_MEASURED", 0.8, 400, 128, 0.0, 1, 0.0),
    "seven_b_measured_128_stalls": ("SEVEN_B_MEASURED", 0.8, 400, 128, 100.0, 1, 0.0),
    # as session 7's H100 trace: two stalls per new length, step times scattered +-30%
    "seven_b_measured_128_stalls2_jitter": ("SEVEN_B_MEASURED", 0.8, 400, 128, 100.0, 2, 0.3),
}
VARIANTS = {  # column: (auto_off, pooled prior)
    "auto_off": (True, True),
    "auto_off_constant_prior": (True, False),
    "always_on": (False, True),
}


def run(sim, policy, async_scheduling, law, alpha, steps, max_tokens, stall, repeats, jitter,
        batch, auto_off, pooled, seed):
    from vllm_bass.policy.auto_off import AcceptanceEstimates

    sched = sim._scheduler(async_scheduling, max_model_len=2048, measured_costs=True,
                           draft_length_policy=policy, num_speculative_tokens=7,
                           auto_off=auto_off)
    saved = AcceptanceEstimates.pool_alpha
    if not pooled:  # the prior before the pool: a constant
        AcceptanceEstimates.pool_alpha = property(lambda self: self.prior_alpha)
    try:
        return sim._simulate(sched, getattr(sim, law), alpha, steps, batch=batch, seed=seed,
                             max_tokens=max_tokens, stall=stall, stall_repeats=repeats,
                             jitter=jitter)
    finally:
        AcceptanceEstimates.pool_alpha = saved


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/sim_auto_off")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    import tests.test_scheduler as sim

    rows = []
    for policy in ("bass", "per_request", "fixed"):
        for async_scheduling in (False, True):
            for pair, (law, alpha, steps, max_tokens, stall, repeats, jitter) in PAIRS.items():
                for batch in (1, 4):
                    row = {"policy": policy, "async": async_scheduling, "pair": pair,
                           "alpha": alpha, "steps": steps, "tokens_per_request": max_tokens,
                           "stall": stall, "stall_repeats": repeats, "jitter": jitter,
                           "batch": batch, "cost_law": getattr(sim, law)}
                    for name, (auto_off, pooled) in VARIANTS.items():
                        runs = [run(sim, policy, async_scheduling, law, alpha, steps,
                                    max_tokens, stall, repeats, jitter, batch, auto_off,
                                    pooled, seed)
                                for seed in range(args.seeds)]
                        row[name] = statistics.mean(runs)
                        row[name + "_worst"] = min(runs)
                    rows.append(row)
                    print(row, flush=True)
    Path(args.out + ".json").write_text(json.dumps(
        {"device": "none (simulated)", "seeds": args.seeds, "rows": rows,
         "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))
    lines = ["# Auto-off in closed loop against a simulated device (tokens/time over plain)", "",
             f"Mean (worst) of {args.seeds} acceptance seeds. `constant prior`: new requests "
             "start at alpha 0.6 instead of the pooled acceptance of earlier requests. "
             "`_stalls`: the first step drafting each length stalls for 100 plain steps once "
             "(a compile); the rate leaves that time out. `_stalls2_jitter`: two such stalls per "
             "length and step times scattered by +-30% (session 7's H100 async trace).", "",
             "| policy | scheduling | pair | batch | auto-off | auto-off, constant prior "
             "| always on |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = " | ".join(f"{r[n]:.2f} ({r[n + '_worst']:.2f})" for n in VARIANTS)
        lines.append(f"| {r['policy']} | {'async' if r['async'] else 'sync'} | {r['pair']} | "
                     f"{r['batch']} | {cells} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
