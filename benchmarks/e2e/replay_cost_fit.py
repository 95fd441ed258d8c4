"""Replay H100 step traces through the scheduler's step-cost fit, without a device.

The traces (`benchmarks/results/traces/*.csv`, written by VLLM_BASS_STEP_TRACE) hold every
step the scheduler timed; feeding them to `StepCostEstimator` in order shows what cost model
the policy planned with at each step. Reported per batch size: the relative cost of one
draft step (units of a plain step) over the steps after the first `--skip` of that batch
size, and the host time of one solve on this machine. Run from another checkout (with this
script copied there) to replay an older fit.

    python benchmarks/e2e/replay_cost_fit.py --out benchmarks/results/replay_cost_fit_new
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TRACES = ["llama7b_s7_per_request_async.csv", "llama7b_s7_per_request_async_bass_attn.csv",
          "llama7b_s7_final_per_request_async.csv"]


def replay(path: Path, skip: int) -> dict:
    from vllm_bass.policy.cost_model import StepCostEstimator, batch_bucket

    est = StepCostEstimator()
    seen: dict[int, int] = {}
    draft_step: dict[int, list[float]] = {}
    solve_s = []
    for row in csv.reader(path.open()):
        batch, steps, tokens, ms = int(row[1]), int(row[2]), int(row[3]), float(row[4])
        est.observe(batch, steps, tokens, ms / 1000, int(row[5]) if len(row) > 5 else 0)
        fit = est.fits[batch_bucket(batch)]
        start = time.perf_counter()
        est._solve(fit)
        solve_s.append(time.perf_counter() - start)
        seen[batch] = seen.get(batch, 0) + 1
        if batch in (1, 8, 32) and seen[batch] > skip:
            draft_step.setdefault(batch, []).append(est.model_for(batch).per_draft_step)
    return {"per_draft_step": {b: {"steps": len(v), "min": round(min(v), 3),
                                   "median": round(statistics.median(v), 3),
                                   "max": round(max(v), 3)} for b, v in draft_step.items()},
            "solve_ms_mean": round(1000 * statistics.mean(solve_s), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--traces", default=str(ROOT / "benchmarks" / "results" / "traces"))
    ap.add_argument("--skip", type=int, default=24, help="steps of a batch size left out "
                    "at its start (the prior and the first stalls)")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    rows = {name: replay(Path(args.traces) / name, args.skip) for name in TRACES}
    result = {"device": "none (replay of NVIDIA H100 80GB HBM3 step traces; solve times: "
                        "this CPU)", "fit": args.label, "skip": args.skip, "traces": rows,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"# Step-cost fit replayed over H100 traces ({args.label})", "",
             f"Relative cost of one draft step (plain step = 1) after the first {args.skip} "
             "steps of each batch size: min / median / max; solve: mean host ms per solve "
             "on this CPU.", "", "| trace | batch | steps | min | median | max | solve ms |",
             "|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        for b, s in sorted(r["per_draft_step"].items()):
            lines.append(f"| {name} | {b} | {s['steps']} | {s['min']} | {s['median']} | "
                         f"{s['max']} | {r['solve_ms_mean']} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
