"""Why a BASS run drafted what it drafted: its plans (`VLLM_BASS_STEP_TRACE=FILE` writes
FILE.plans) beside its measured steps (FILE), per batch size.

For the batch sizes planned most, it reports
* what was planned: off-steps (every length 0, no probe), probes, the mean length a request
  drafted on the other steps, the acceptance estimates (median, 10th / 90th percentile);
* what the fit said: the plans' fitted costs (units of a plain step) and the speedup over
  plain decoding it predicted for one length K for every request, K = 1..4;
* what the steps measured: the median time of each pure-decode shape (draft steps,
  verified tokens per request), and the speedup the measured medians give a length K
  for every request, (1 + sum_j<=K alpha^j) * off-step / K-step, at the estimates' median
  alpha (or `--alpha`, the true rate of a synthetic benchmark).
A plan that sat off where the measured steps say K pays (or drafted where they say it does
not) points at the fit; where both say ~1.0x, speculation has nothing to gain there.
Session 38's open question (alpha 0.4, batch 16, H200: off in half the steps, 0.97x plain)
is what this is for.

    python benchmarks/e2e/plan_summary.py TRACE.csv [--alpha 0.4] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.e2e.step_shapes import step_shapes  # noqa: E402
from vllm_bass.policy.auto_off import expected_tokens, predicted_speedup  # noqa: E402
from vllm_bass.policy.cost_model import StepCostModel  # noqa: E402

LENGTHS = (1, 2, 3, 4)


def read_plans(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fitted_speedup(cost: list[float], alpha: float, length: int, batch: int) -> float:
    """The fit's predicted speedup over plain decoding of `length` for each of `batch`
    requests, from the plans' relative costs [base, draft_pass, per_draft_step,
    per_verify_token(, one_draft)] (the knee's price left out)."""
    base, draft_pass, per_step, per_token, *rest = cost  # session 40 added one_draft
    model = StepCostModel(base=base, draft_pass=draft_pass, per_draft_step=per_step,
                          one_draft=rest[0] if rest else 0.0,
                          per_verify_token=per_token)
    return predicted_speedup(model, [alpha] * batch, [length] * batch)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def shape_medians(trace: Path, batch: int) -> dict[tuple[int, int], dict]:
    """(draft steps, verified per request) -> steps and median ms of the trace's
    pure-decode steps at this batch size (`step_shapes`: shapes seen often enough)."""
    return {(s["draft_steps"], int(s["verify_per_request"])): s for s in step_shapes(trace)
            if s["batch"] == batch and float(s["verify_per_request"]).is_integer()}


def measured_speedups(shapes: dict, alpha: float) -> dict[int, float]:
    """Speedup of length K for all over the off-steps, from the measured medians: the
    K-step is the shape of K draft steps verifying K tokens a request (steady drafting;
    under async scheduling its drafts were verified one step later, so the shape of a
    steady run of K is (K, K))."""
    off = shapes.get((0, 0))
    if off is None:
        return {}
    return {k: expected_tokens(alpha, k) * off["median_ms"] / shapes[(k, k)]["median_ms"]
            for k in LENGTHS if (k, k) in shapes}


def summarise(trace: Path, alpha: float | None = None, top: int = 3) -> dict:
    plans = read_plans(trace.with_name(trace.name + ".plans"))
    by_batch: dict[int, list[dict]] = collections.defaultdict(list)
    for plan in plans:
        by_batch[plan["batch"]].append(plan)
    out = {"trace": trace.name, "plans": len(plans), "batches": []}
    for batch, group in sorted(by_batch.items(), key=lambda kv: -len(kv[1]))[:top]:
        off = [p for p in group if not p["probe"] and not any(p["lengths"])]
        probes = [p for p in group if p["probe"]]
        on = [p for p in group if not p["probe"] and any(p["lengths"])]
        estimates = [a for p in group if p["alpha"] for a in p["alpha"]]
        a_med = statistics.median(estimates) if estimates else None
        a_use = alpha if alpha is not None else a_med
        costs = [p["cost"] for p in group if p["cost"]]
        width = min(len(c) for c in costs) if costs else 0  # 5 since session 40
        cost_med = ([statistics.median(c[i] for c in costs) for i in range(width)]
                    if costs else None)
        shapes = shape_medians(trace, batch)
        row = {
            "batch": batch, "planned_steps": len(group),
            "off_share": round(len(off) / len(group), 3),
            "probe_share": round(len(probes) / len(group), 3),
            "closed_share": round(sum(1 for p in group if p.get("closed")) / len(group), 3),
            "mean_length_when_on": round(statistics.mean(
                statistics.mean(p["lengths"]) for p in on), 3) if on else 0.0,
            "alpha_estimate": None if a_med is None else {
                "median": round(a_med, 3), "p10": round(percentile(estimates, 0.1), 3),
                "p90": round(percentile(estimates, 0.9), 3)},
            "alpha_used": None if a_use is None else round(a_use, 3),
            "fitted_cost_median": None if cost_med is None else dict(zip(
                ("base", "draft_pass", "per_draft_step", "per_verify_token", "one_draft"),
                (round(c, 5) for c in cost_med))),
            "fitted_speedup": {} if cost_med is None or a_use is None else {
                k: round(fitted_speedup(cost_med, a_use, k, batch), 3) for k in LENGTHS},
            "measured_shapes_ms": {f"{d}x{v}": {"steps": s["steps"],
                                                "median_ms": round(s["median_ms"], 3)}
                                   for (d, v), s in shapes.items()},
            "measured_speedup": {} if a_use is None else {
                k: round(x, 3) for k, x in measured_speedups(shapes, a_use).items()},
        }
        out["batches"].append(row)
    return out


def verdict(row: dict) -> str:
    """One line: what the plans did against what the measured steps say pays."""
    measured, fitted = row["measured_speedup"], row["fitted_speedup"]
    best = max(measured.items(), key=lambda kv: kv[1]) if measured else None
    text = (f"batch {row['batch']}: off {row['off_share']:.0%} of {row['planned_steps']} "
            f"plans, probes {row['probe_share']:.0%}, {row['mean_length_when_on']:.2f} "
            f"drafted a request when on; alpha {row['alpha_used']}")
    if best is not None:
        text += f"; measured best K={best[0]} {best[1]:.3f}x"
        if best[0] in fitted:
            text += f" (the fit predicted {fitted[best[0]]:.3f}x)"
    else:
        text += "; too few off-steps or steady K-steps to measure"
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--alpha", type=float, default=None,
                    help="the true acceptance rate (synthetic); default: the estimates'")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    result = [summarise(t, args.alpha) for t in args.traces]
    for summary in result:
        print(summary["trace"])
        for row in summary["batches"]:
            print("  " + verdict(row))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
