"""What a step trace's cost fit promised drafting, step by step, under two fits.

Replays a BASS step trace (`VLLM_BASS_STEP_TRACE`, plain or gzipped) through
`StepCostEstimator` twice, once with a one-draft step's own premium (the default since
session 40) and once without it (`one_draft_term=False`, `VLLM_BASS_COST_FIT=linear`).
Every `--every` steps of the chosen batch sizes, it reports the fitted costs and the
speedup over plain decoding each fit predicts for K = 1..4 drafts for every request at
`--alpha`. Where the best of those stays under 1.0x, the policy sits off.

    python benchmarks/e2e/replay_plan_speedup.py TRACE.csv.gz --batches 3,4 --alpha 0.4
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vllm_bass.policy.auto_off import predicted_speedup  # noqa: E402
from vllm_bass.policy.cost_model import StepCostEstimator  # noqa: E402

LENGTHS = (1, 2, 3, 4)


def read_steps(path: Path) -> list[tuple[int, int, int, float, int]]:
    """(batch, draft steps, verified tokens, ms, other tokens) of every traced step."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [(int(r[1]), int(r[2]), int(r[3]), float(r[4]), int(r[5]) if len(r) > 5 else 0)
                for r in csv.reader(f) if r]


def replay(steps, batches: set[int], alpha: float, every: int) -> list[dict]:
    fits = {"one_draft": StepCostEstimator(one_draft_term=True),
            "linear": StepCostEstimator(one_draft_term=False)}
    rows, seen = [], 0
    for batch, draft_steps, verify, ms, other in steps:
        if batch not in batches:
            continue
        for est in fits.values():
            est.observe(batch, draft_steps, verify, ms / 1e3, other)
        seen += 1
        if seen % every:
            continue
        row = {"step": seen, "batch": batch}
        for name, est in fits.items():
            model = est.model_for(batch)
            row[name] = {
                "draft_pass": round(model.draft_pass, 4),
                "per_draft_step": round(model.per_draft_step, 4),
                "one_draft": round(model.one_draft, 4),
                "speedup": {k: round(predicted_speedup(model, [alpha] * batch, [k] * batch), 3)
                            for k in LENGTHS}}
        rows.append(row)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", type=Path)
    p.add_argument("--batches", default="4", help="batch sizes replayed (comma-separated)")
    p.add_argument("--alpha", type=float, default=0.4)
    p.add_argument("--every", type=int, default=30)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    rows = replay(read_steps(args.trace), {int(b) for b in args.batches.split(",")},
                  args.alpha, args.every)
    for row in rows:
        print(row["step"], " | ".join(
            f"{name}: best {max(row[name]['speedup'].values()):.2f}x "
            f"(one_draft {row[name]['one_draft']:.2f})" for name in ("one_draft", "linear")))
    if args.out:
        args.out.write_text(json.dumps({"trace": args.trace.name, "alpha": args.alpha,
                                        "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
