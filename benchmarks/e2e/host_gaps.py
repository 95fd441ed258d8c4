"""Where a step's host time goes between the runner's phases, from one engine's step trace
(`VLLM_BASS_STEP_TRACE=FILE`: FILE, the scheduler's `update_from_output` ends) and runner
trace (FILE.runner: each step's start and its forward / sample / draft phases), both on the
engine core's clock. Per step: the runner's phases (host wall), then the gap from their end
to `update_from_output`'s end (the previous step's output: vLLM's and BASS's bookkeeping,
and any wait for the device), then the gap to the next runner step (`schedule()` of the next
step: vLLM's scheduler and BASS's plan). Grouped by batch size, the draft length the step
verifies and whether the device waited for the host before the model (`lead` > 1 ms: the
step was host-bound), medians.

    python benchmarks/e2e/host_gaps.py TRACE.csv [TRACE2.csv ...] --batches 32,64 --out gaps.json

Session 54 (`gpu_bench.sh crit4_gap`): the default's schedule() took 1.5-2.5 ms a step at
batch 64 against fixed K=1's 0.8-1.1 on one H200 host.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import statistics
from pathlib import Path

LEAD_HOST_BOUND_MS = 1.0


def _rows(path: Path) -> list[list[float]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [[float(x) for x in line.split(",")] for line in fh if line.strip()]


def gaps(step_trace: Path, runner_trace: Path, batches: set[int]) -> list[dict]:
    """One row per (batch, verified drafts, regime): steps and the medians (ms)."""
    runner, steps = _rows(runner_trace), _rows(step_trace)
    events = sorted([(r[0], 0, r) for r in runner] + [(s[0], 1, s) for s in steps],
                    key=lambda e: (e[0], e[1]))
    groups: dict[tuple, list[tuple]] = collections.defaultdict(list)
    for i in range(len(events) - 2):
        (t, kind, r), (t_upd, kind1, _), (t_next, kind2, nxt) = events[i:i + 3]
        if kind != 0 or kind1 != 1 or kind2 != 0 or int(r[1]) not in batches:
            continue
        phases = r[3] + r[4] + r[5]
        end = t + phases / 1e3
        regime = "host_bound" if len(nxt) > 15 and nxt[15] > LEAD_HOST_BOUND_MS else \
            "device_bound"
        groups[(int(r[1]), int(r[2]), regime)].append(
            ((t_next - t) * 1e3, phases, (t_upd - end) * 1e3, (t_next - t_upd) * 1e3,
             nxt[15] if len(nxt) > 15 else float("nan")))
    out = []
    for (batch, verified, regime), vals in sorted(groups.items()):
        med = [statistics.median(v[j] for v in vals) for j in range(5)]
        out.append({"batch": batch, "verified_drafts": verified, "regime": regime,
                    "steps": len(vals), "period_ms": round(med[0], 3),
                    "runner_phases_ms": round(med[1], 3),
                    "to_update_end_ms": round(med[2], 3),
                    "schedule_gap_ms": round(med[3], 3),
                    "next_lead_ms": round(med[4], 3)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="step traces (FILE or FILE.gz; the runner "
                    "trace is FILE.runner or FILE.runner.gz beside it)")
    ap.add_argument("--batches", default="32,64")
    ap.add_argument("--min-steps", type=int, default=8)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    batches = {int(b) for b in args.batches.split(",")}
    result = {}
    for name in args.traces:
        path = Path(name)
        base = path.with_suffix("") if path.suffix == ".gz" else path
        runner = next(p for p in (Path(f"{base}.runner"), Path(f"{base}.runner.gz"))
                      if p.exists())
        rows = [r for r in gaps(path, runner, batches) if r["steps"] >= args.min_steps]
        result[base.name] = rows
        for r in rows:
            print(base.name, json.dumps(r))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
