"""Host time of one per_request plan on this machine's CPU: `best_lengths` (the search
outside closed batches) and a whole fresh `plan` (closed batch or not), minimum process
time over repeats (robust to other processes on the machine). `--repo` times another
checkout's policy code (a worktree of an older commit) for a before / after.

    python benchmarks/e2e/bench_plan_host.py --out benchmarks/results/session43/plan_host_after.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def timed_min(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument("--batches", default="4,16,64")
    ap.add_argument("--alphas", default="0.5,0.8,0.95")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sys.path.insert(0, args.repo)
    import numpy as np

    from vllm_bass.config import BassConfig
    from vllm_bass.policy.cost_model import StepCostModel
    from vllm_bass.policy.per_request import PerRequestDraftLength

    cost = StepCostModel(base=1.0, per_draft_step=0.05, per_verify_token=0.004,
                         draft_pass=0.1, knee_drafts=200, past_knee_price=0.01)
    rows = []
    for n in (int(b) for b in args.batches.split(",")):
        for alpha in (float(a) for a in args.alphas.split(",")):
            p = PerRequestDraftLength(BassConfig(draft_model="d", num_speculative_tokens=16),
                                      cost)
            p.token_budget = 512
            rng = np.random.default_rng(0)
            alphas = list(np.clip(rng.normal(alpha, 0.05, n), 0.0, 1.0))
            ids = [f"r{i}" for i in range(n)]
            p.estimates.alpha = dict(zip(ids, alphas)).__getitem__
            row = {"batch": n, "alpha": alpha,
                   "best_lengths_ms": timed_min(lambda: p.best_lengths(alphas), args.reps)}
            # a closed batch's requests each with 37 tokens left (as a fresh Random(1)
            # drew for every request when the JSON of session 43 was made)
            remaining = dict.fromkeys(ids, 37)
            for closed in (False, True):

                def fresh_plan():
                    p.remaining = remaining if closed else None
                    p._last_key = None  # solved afresh, as when the batch changes
                    p.plan(ids)
                row["closed_plan_ms" if closed else "open_plan_ms"] = timed_min(fresh_plan,
                                                                                args.reps)
            rows.append(row)
            print(row, flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"device": "cpu (this machine; minimum process time)", "repo": args.repo,
             "cost": "base 1, draft pass 0.1, draft step 0.05, verified token 0.004, knee 200",
             "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
