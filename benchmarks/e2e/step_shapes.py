"""Step times by shape from BASS step traces (`VLLM_BASS_STEP_TRACE`, `vs_vllm.py
--trace-dir`): per trace, the median wall time of the steps of each (batch, draft steps,
verified tokens per request) and of each runner phase, so that two systems' steps of the same
shape can be compared (session 12: per-request plans vs one length for all).

    python benchmarks/e2e/step_shapes.py TRACE.csv [TRACE2.csv ...] --out shapes.json
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


def step_shapes(csv_path: Path) -> list[dict]:
    """(batch, draft_steps, verify tokens per request) -> count, median and p20 ms."""
    groups: dict[tuple, list[float]] = collections.defaultdict(list)
    for line in csv_path.read_text().splitlines():
        # session 25 added other_tokens (prefill tokens); pure-decode steps only here
        _end, batch, draft_steps, verify, ms, *other = line.split(",")
        if other and int(other[0]):
            continue
        batch = int(batch)
        groups[(batch, int(draft_steps), round(int(verify) / max(1, batch), 1))].append(
            float(ms))
    return [{"batch": b, "draft_steps": d, "verify_per_request": v, "steps": len(ms),
             "median_ms": round(statistics.median(ms), 3),
             "p20_ms": round(sorted(ms)[len(ms) // 5], 3)}
            for (b, d, v), ms in sorted(groups.items()) if len(ms) >= MIN_STEPS]


def runner_phases(runner_path: Path) -> list[dict]:
    """(requests, verified length, graph mode) -> median ms of each runner phase."""
    groups: dict[tuple, list[list[float]]] = collections.defaultdict(list)
    for line in runner_path.read_text().splitlines():
        fields = line.split(",")
        groups[(int(fields[1]), int(fields[2]), int(fields[9]))].append(
            [float(x) for x in fields[3:9] + fields[10:13]])
    out = []
    for (n, length, mode), rows in sorted(groups.items()):
        if len(rows) < MIN_STEPS:
            continue
        medians = [round(statistics.median(col), 3) for col in zip(*rows)]
        out.append({"requests": n, "verified_length": length, "graph_mode": mode,
                    "steps": len(rows), **dict(zip(PHASES + THREAD_PHASES, medians))})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    result = {}
    for trace in args.traces:
        runner = trace.with_name(trace.name + ".runner")
        result[trace.stem] = {"steps": step_shapes(trace),
                              "runner": runner_phases(runner) if runner.exists() else []}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
