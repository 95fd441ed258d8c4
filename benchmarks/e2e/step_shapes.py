"""Step times by shape from BASS step traces (`VLLM_BASS_STEP_TRACE`, `vs_vllm.py
--trace-dir`): per trace, the median wall time of the steps of each (batch, draft steps,
verified tokens per request) and of each runner phase, so that two systems' steps of the same
shape can be compared (session 12: per-request plans vs one length for all).

    python benchmarks/e2e/step_shapes.py TRACE.csv [TRACE2.csv ...] --out shapes.json
    # session 56: two systems' target device time at the same runner step shapes
    python benchmarks/e2e/step_shapes.py traces/*.csv --pair bass_default bass_short_graphs
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
from pathlib import Path

MIN_STEPS = 8  # shapes seen fewer times are left out (compile stalls, transitions)
PHASES = ("forward_cpu_ms", "sample_cpu_ms", "draft_cpu_ms", "forward_gpu_ms",
          "sample_gpu_ms", "draft_gpu_ms")
# the engine thread's CPU time per phase (runner traces since session 41)
THREAD_PHASES = ("forward_thread_ms", "sample_thread_ms", "draft_thread_ms")
# the target model's call within the forward phase and the device time before it (since
# session 51: `diagnostics.phase_trace`)
MODEL_PHASES = ("model_cpu_ms", "model_gpu_ms", "lead_gpu_ms")
# `--pair`: the target's graph time, the whole forward phase, the device's wait before the
# model (session 54's traces: 0.4-2.7 ms a one-draft step for the default, 0.1 for fixed K=1)
PAIRED_PHASES = ("model_gpu_ms", "forward_gpu_ms", "lead_gpu_ms")


def read_steps(csv_path: Path) -> list[tuple[float, int, int, int, float, int]]:
    """(end s, batch, draft steps, verified tokens, ms, other tokens) of every traced step
    (other tokens, the step's prefill tokens, since session 25: 0 before)."""
    steps = []
    for line in csv_path.read_text().splitlines():
        if not line.strip():
            continue
        end, batch, draft_steps, verify, ms, *other = line.split(",")
        steps.append((float(end), int(batch), int(draft_steps), int(verify), float(ms),
                      int(other[0]) if other else 0))
    return steps


def read_runner(runner_path: Path) -> list[dict]:
    """The runner's phase trace (`diagnostics.phase_trace`): per step its start (s),
    requests, verified length and graph mode, and the ms of each of PHASES (and of
    THREAD_PHASES and MODEL_PHASES where the trace has them)."""
    rows = []
    for line in runner_path.read_text().splitlines():
        if not line.strip():
            continue
        fields = line.split(",")
        row = {"start": float(fields[0]), "requests": int(fields[1]),
               "verified_length": int(fields[2]), "graph_mode": int(fields[9])}
        row.update(zip(PHASES + THREAD_PHASES + MODEL_PHASES,
                       map(float, fields[3:9] + fields[10:16])))
        rows.append(row)
    return rows


def step_shapes(csv_path: Path) -> list[dict]:
    """(batch, draft_steps, verify tokens per request) -> count, median and p20 ms."""
    groups: dict[tuple, list[float]] = collections.defaultdict(list)
    for _end, batch, draft_steps, verify, ms, other in read_steps(csv_path):
        if other:  # pure-decode steps only here
            continue
        groups[(batch, draft_steps, round(verify / max(1, batch), 1))].append(ms)
    return [{"batch": b, "draft_steps": d, "verify_per_request": v, "steps": len(ms),
             "median_ms": round(statistics.median(ms), 3),
             "p20_ms": round(sorted(ms)[len(ms) // 5], 3)}
            for (b, d, v), ms in sorted(groups.items()) if len(ms) >= MIN_STEPS]


def runner_phases(runner_path: Path) -> list[dict]:
    """(requests, verified length, graph mode) -> median ms of each runner phase."""
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for row in read_runner(runner_path):
        groups[(row["requests"], row["verified_length"], row["graph_mode"])].append(row)
    out = []
    for (n, length, mode), rows in sorted(groups.items()):
        if len(rows) < MIN_STEPS:
            continue
        phases = [p for p in PHASES + THREAD_PHASES + MODEL_PHASES
                  if all(p in r for r in rows)]
        out.append({"requests": n, "verified_length": length, "graph_mode": mode,
                    "steps": len(rows),
                    **{p: round(statistics.median(r[p] for r in rows), 3) for p in phases}})
    return out


def paired_phase(first: list[dict], second: list[dict], phase: str = "model_gpu_ms") -> dict:
    """Two systems' `runner_phases` at the step shapes (requests, verified length, graph
    mode) both have: each shape's median `phase` ms and their ratio (second / first), and
    the ratio of the sums weighted by the fewer steps of the two (a device-time A/B free of
    the host's noise: session 56's short-query graphs)."""
    theirs = {(r["requests"], r["verified_length"], r["graph_mode"]): r for r in second}
    rows, a_sum, b_sum = [], 0.0, 0.0
    for r in first:
        key = (r["requests"], r["verified_length"], r["graph_mode"])
        o = theirs.get(key)
        if o is None or phase not in r or phase not in o or r[phase] <= 0:
            continue
        weight = min(r["steps"], o["steps"])
        a_sum += weight * r[phase]
        b_sum += weight * o[phase]
        rows.append({"requests": key[0], "verified_length": key[1], "graph_mode": key[2],
                     "steps": [r["steps"], o["steps"]], phase: [r[phase], o[phase]],
                     "ratio": round(o[phase] / r[phase], 3)})
    return {"phase": phase, "shapes": rows,
            "weighted_ratio": round(b_sum / a_sum, 4) if a_sum else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--pair", nargs=2, metavar=("FIRST", "SECOND"), default=None,
                   help="also compare the runner phases of the traces whose names start "
                   "with these two systems (`paired_phase`)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    result = {}
    for trace in args.traces:
        runner = trace.with_name(trace.name + ".runner")
        result[trace.stem] = {"steps": step_shapes(trace),
                              "runner": runner_phases(runner) if runner.exists() else []}
    if args.pair:
        def runner_of(system):
            found = [v["runner"] for k, v in result.items()
                     if k.startswith(system + "_") and v["runner"]]
            if len(found) != 1:
                raise SystemExit(f"--pair: {len(found)} traces with runner phases for "
                                 f"{system!r} (one wanted)")
            return found[0]
        first, second = (runner_of(s) for s in args.pair)
        result["pair"] = {"systems": args.pair,
                          **{ph: paired_phase(first, second, ph)
                             for ph in PAIRED_PHASES}}
        for ph in PAIRED_PHASES:
            print(f"{args.pair[1]} / {args.pair[0]} {ph}: weighted "
                  f"{result['pair'][ph]['weighted_ratio']} over "
                  f"{len(result['pair'][ph]['shapes'])} shapes")
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
