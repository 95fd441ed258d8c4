"""The closed-batch plan A/B without a device: per_request with and without
`closed_batch_plan` on `sim_closed_batch.py`'s simulated H100 (session 18's step law,
step-time jitter), closed batches of 128 new tokens; plain decoding's makespan over each.

    python benchmarks/e2e/sim_closed_plan_ab.py --out benchmarks/results/session19/sim_closed_plan_ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import sim_closed_batch as scb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--acceptance", default="mix,0.6,0.9,0.3")
    ap.add_argument("--batches", default="8,32,64,256")
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--jitter", type=float, default=0.15)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    scb.JITTER[0] = args.jitter
    rows = []
    for acceptance in args.acceptance.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            alphas = scb.alphas_for(acceptance, batch)
            plain = 128 * scb.h100_step_ms(batch, 0, 0)
            row = {"acceptance": acceptance, "batch": batch}
            for name, closed in (("closed_plan", True), ("open_plan", False)):
                times = []
                for seed in range(args.seeds):
                    sched = scb.scheduler(batch, "per_request", 16, True, True, 512)
                    sched.bass_policy.closed_batch_plan = closed
                    scb.run_batch(sched, alphas, 128, 1000 + 17 * seed)  # warm: fits, pool
                    times.append(scb.run_batch(sched, alphas, 128, seed)["ms"])
                row[name] = plain / statistics.mean(times)
            rows.append(row)
            print(row, flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"device": "none (simulated H100 step law)", "seeds": args.seeds,
             "jitter": args.jitter, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
