"""Closed loop without a device: the scheduler's cost model, the draft-length policies and
auto-off against a simulated device with a known cost law and geometric acceptance (the
helpers of tests/test_scheduler.py, which assert bounds on the same runs). Reports the
token rate over plain decoding's, with auto-off and with speculation always on.

    python benchmarks/e2e/sim_auto_off.py --out benchmarks/results/sim_auto_off
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

PAIRS = {  # name: (cost law attribute in tests.test_scheduler, alpha, steps)
    "host_bound": ("HOST_BOUND_PAIR", 0.5, 600),
    "seven_b_like": ("SEVEN_B_PAIR", 0.8, 400),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/sim_auto_off")
    args = ap.parse_args()
    import tests.test_scheduler as sim

    rows = []
    for policy in ("bass", "per_request", "fixed"):
        for async_scheduling in (False, True):
            for pair, (law, alpha, steps) in PAIRS.items():
                row = {"policy": policy, "async": async_scheduling, "pair": pair,
                       "alpha": alpha, "steps": steps, "cost_law": getattr(sim, law)}
                for auto_off in (True, False):
                    sched = sim._scheduler(async_scheduling, max_model_len=2048,
                                           measured_costs=True, draft_length_policy=policy,
                                           num_speculative_tokens=8, auto_off=auto_off)
                    key = "speedup_auto_off" if auto_off else "speedup_always_on"
                    row[key] = sim._simulate(sched, getattr(sim, law), alpha, steps)
                rows.append(row)
    Path(args.out + ".json").write_text(json.dumps(
        {"device": "none (simulated)", "rows": rows,
         "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))
    lines = ["# Auto-off in closed loop against a simulated device (tokens/time over plain)", "",
             "| policy | scheduling | pair | auto-off | always on |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['policy']} | {'async' if r['async'] else 'sync'} | {r['pair']} | "
                     f"{r['speedup_auto_off']:.2f} | {r['speedup_always_on']:.2f} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
