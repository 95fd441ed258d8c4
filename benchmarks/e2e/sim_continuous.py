"""The continuous workload without a device: `vs_vllm.py --workload continuous` (4x the batch
in requests, the batch kept in flight, tokens per second until the last request is
submitted) on `sim_closed_batch.py`'s simulated H100 step law, with 128-token prompts whose
prefill rides in decode steps (PREFILL_TOKEN_MS). BASS default (and its plan without the
closed-batch objective) against fixed K without auto-off (vLLM draft_model's shape of plan,
not its host costs); each as its speed-up over plain decoding's token rate. `bass_s29fit`:
the default with the step-cost fit before session 30.

    python benchmarks/e2e/sim_continuous.py --acceptance mix,0.9 --batches 8,32,64 \\
        --out benchmarks/results/session25/sim_continuous.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import sim_closed_batch as scb  # noqa: E402

from vllm_bass.policy.cost_model import StepCostEstimator  # noqa: E402


def speedup(system: str, acceptance: str, batch: int, seeds: int) -> float:
    """Token rate over plain decoding's (batch tokens a plain step), mean over seeds, each
    measured after one warm-up run on the same scheduler (cost fit, estimates)."""
    alphas = scb.alphas_for(acceptance, 4 * batch)  # vs_vllm.CONTINUOUS_REQUESTS_PER_SLOT
    rates = []
    for seed in range(seeds):
        sched = scb.system_scheduler(system, batch)
        if not system.startswith("k"):
            sched.bass_policy.closed_batch_plan = system != "bass_open_plan"
        if system == "bass_s29fit":  # the step-cost fit before session 30
            sched.bass_costs = StepCostEstimator(session29_fit=True)
        if system == "bass_knee_sum":  # VLLM_BASS_KNEE_PRICE=sum (before session 32)
            sched._bass_knee_sum = True
        scb.run_continuous(sched, alphas, 128, batch, 1000 + seed)
        rates.append(scb.run_continuous(sched, alphas, 128, batch, seed)["tokens_per_ms"])
    return statistics.mean(rates) / (batch / scb.h100_step_ms(batch, 0, 0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--acceptance", default="mix,0.9")
    ap.add_argument("--batches", default="8,32,64")
    ap.add_argument("--systems", default="bass_default,bass_open_plan,k2,k3")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jitter", type=float, default=0.15)
    ap.add_argument("--knee-law", action="store_true",
                    help="decode tokens past the GEMMs' knee cost more (KNEE_LAW)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    scb.JITTER[0] = args.jitter
    scb.KNEE_LAW[0] = args.knee_law
    rows = []
    for acceptance in args.acceptance.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            row = {"acceptance": acceptance, "batch": batch}
            for system in args.systems.split(","):
                row[system] = round(speedup(system, acceptance, batch, args.seeds), 4)
            rows.append(row)
            print(row, flush=True)
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=Path(__file__).parent).stdout.strip()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(
            {"device": "none (simulated H100 step law)", "code": commit,
             "seeds": args.seeds, "jitter": args.jitter,
             "prefill_token_ms": scb.PREFILL_TOKEN_MS, "knee_law": args.knee_law,
             "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
