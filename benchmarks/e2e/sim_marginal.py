"""Auto-off and per-request plans where drafting barely pays, without a device: the real
BASS scheduler (async) in closed loop against a cost law taken from the H100 medians of
session 18's call 1 (4x1024 draft: off-step and one-token-draft step times at batch 64 / 128
/ 256), geometric acceptance, +-15% step-time scatter, finished requests replaced at once (an
open loop, as a loaded server). Token rate over plain decoding for per_request with
auto-off and fixed K=1. (Session 18's run also had per_request without the remaining-token
weights; those weights are gone since session 19: a closed batch plans for its end,
`PerRequestDraftLength.closed_batch_cap`, and an open one, as here, counts every token.)

    python benchmarks/e2e/sim_marginal.py --out benchmarks/results/session18/sim_marginal
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

# batch: (off-step ms, one-token-draft step ms), H100 medians (session 18, call 1)
STEP_MS = {64: (8.64, 10.00), 128: (11.45, 14.23), 256: (18.48, 23.96)}
VERIFY_SHARE = 0.7  # of a one-token step's extra time: the verified tokens (runner trace)


def cost_law(batch: int) -> dict:
    off, k1 = STEP_MS[batch]
    extra = k1 / off - 1.0
    draft = (1.0 - VERIFY_SHARE) * extra / 2
    return dict(base=1.0, draft_pass=draft, per_draft_step=draft,
                per_verify_token=VERIFY_SHARE * extra / batch)


def rate(sim, batch, alpha, policy, k, auto_off, seed, steps, jitter):
    sched = sim._scheduler(True, max_model_len=2048, measured_costs=True, max_num_seqs=batch,
                           draft_length_policy=policy, num_speculative_tokens=k,
                           auto_off=auto_off)
    return sim._simulate(sched, cost_law(batch), alpha, steps, batch=batch, seed=seed,
                         max_tokens=128, jitter=jitter)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/sim_marginal")
    ap.add_argument("--batches", default="128,256")
    ap.add_argument("--alphas", default="0.3,0.5")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--jitter", type=float, default=0.15)
    args = ap.parse_args()
    import tests.test_scheduler as sim
    variants = {"per_request": ("per_request", 7, True),
                "fixed_k1": ("fixed", 1, False)}
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        for alpha in (float(a) for a in args.alphas.split(",")):
            row = {"batch": batch, "alpha": alpha, "cost_law": cost_law(batch)}
            for name, (policy, k, auto_off) in variants.items():
                runs = [rate(sim, batch, alpha, policy, k, auto_off, seed, args.steps,
                             args.jitter) for seed in range(args.seeds)]
                row[name] = statistics.mean(runs)
            rows.append(row)
            print(row, flush=True)
    Path(args.out + ".json").write_text(json.dumps(
        {"device": "none (simulated; H100 step medians)", "seeds": args.seeds,
         "steps": args.steps, "jitter": args.jitter, "rows": rows,
         "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))
    lines = ["# Marginal settings in closed loop (token rate over plain decoding)", "",
             f"Mean of {args.seeds} seeds, async, open loop, +-{args.jitter:.0%} step scatter.",
             "", "| batch | alpha | " + " | ".join(variants) + " |",
             "|---|---|" + "---|" * len(variants)]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['alpha']} | "
                     + " | ".join(f"{r[n]:.3f}" for n in variants) + " |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
