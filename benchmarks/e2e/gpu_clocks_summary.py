"""Per GPU, how a call's clocks and power behaved while the GPU was busy, from the
`nvidia-smi ... -lms 250` log `gpu_bench.sh`'s pair runs write (`gpu_clocks.csv`: timestamp,
index, SM clock, memory clock, power, temperature, utilisation, throttle reasons).

Session 50: a drafting step's target forward at batch 32 took 6.9 ms of GPU time against an
off-step's 5.3 for 32 more tokens (memory-bound shapes), and busy GPUs sat at their software
power cap most of the time, SM clocks down to ~1400 MHz: how often a call's GPUs were capped
is part of reading its step times.

    python benchmarks/e2e/gpu_clocks_summary.py gpu_clocks.csv [--busy 50] [--out s.json]
    # a runner trace's target forward GPU time by shape, at a high and a low SM clock
    # (the clock of the GPU `--gpu` nearest each step; `clock_offset.txt`: gpu_bench.sh's
    # pair runs write `time.time() time.monotonic()` once, to put the trace on wall time)
    python benchmarks/e2e/gpu_clocks_summary.py gpu_clocks.csv --gpu 1 \
        --runner traces1/bass_default_8x1024.csv.runner --clock-offset clock_offset.txt
"""

from __future__ import annotations

import argparse
import bisect
import csv
import datetime
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.e2e.step_shapes import MIN_STEPS, read_runner  # noqa: E402

SW_POWER_CAP = 0x4  # nvmlClocksThrottleReasonSwPowerCap
HW_SLOWDOWN = 0x8 | 0x40 | 0x80  # HW slowdown, thermal, power brake


def _number(field: str) -> float:
    return float(field.split()[0])


def _rows(path: Path) -> list[list[str]]:
    """The log's sample rows (no header, no line cut off when the logger was killed)."""
    return [row for row in csv.reader(path.read_text().splitlines(), skipinitialspace=True)
            if len(row) >= 8 and row[1].strip().isdigit()]


def wall_seconds(stamp: str) -> float:
    """nvidia-smi's `2026/11/30 13:53:54.377` (the GPU host's local time, read in this
    machine's zone: both UTC so far) as epoch seconds."""
    return datetime.datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()


def quantiles(values: list[float]) -> dict:
    s = sorted(values)
    if not s:
        return {}
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"p10": pick(0.1), "median": pick(0.5), "p90": pick(0.9), "min": s[0], "max": s[-1]}


def summarise(path: Path, busy_percent: float = 50.0) -> dict:
    """{gpu index: samples, busy samples, share of busy samples power-capped / HW-slowed,
    SM clock and power quantiles while busy}."""
    per_gpu: dict[str, list[list[str]]] = {}
    for row in _rows(path):
        per_gpu.setdefault(row[1].strip(), []).append(row)
    out = {}
    for gpu, rows in sorted(per_gpu.items()):
        busy = [r for r in rows if _number(r[6]) > busy_percent]
        reasons = [int(r[7], 16) for r in busy]
        out[gpu] = {
            "samples": len(rows),
            "busy_samples": len(busy),
            "power_capped_share": (sum(bool(x & SW_POWER_CAP) for x in reasons) / len(busy)
                                   if busy else 0.0),
            "hw_slowdown_share": (sum(bool(x & HW_SLOWDOWN) for x in reasons) / len(busy)
                                  if busy else 0.0),
            "sm_clock_mhz": quantiles([_number(r[2]) for r in busy]),
            "power_w": quantiles([_number(r[4]) for r in busy]),
        }
    return out


def forward_by_clock(clock_csv: Path, gpu: str, runner: Path, monotonic_to_wall: float,
                     split_mhz: float = 1900.0, max_gap_s: float = 0.5) -> list[dict]:
    """Per runner-trace shape (requests, verified length): the median target forward GPU
    time of the steps whose nearest clock sample (within max_gap_s) of GPU `gpu` was at or
    above split_mhz, and of those below it. `monotonic_to_wall`: wall - monotonic seconds
    (the trace's starts are perf_counter's, CLOCK_MONOTONIC on Linux)."""
    samples = sorted((wall_seconds(r[0]), _number(r[2])) for r in _rows(clock_csv)
                     if r[1].strip() == gpu)
    times = [t for t, _ in samples]
    groups: dict[tuple, dict[str, list[float]]] = {}
    for step in read_runner(runner):
        wall = step["start"] + monotonic_to_wall
        i = bisect.bisect_left(times, wall)
        near = [j for j in (i - 1, i) if 0 <= j < len(times)]
        if not near:
            continue
        j = min(near, key=lambda k: abs(times[k] - wall))
        if abs(times[j] - wall) > max_gap_s:
            continue
        side = "high" if samples[j][1] >= split_mhz else "low"
        key = (step["requests"], step["verified_length"])
        groups.setdefault(key, {"high": [], "low": []})[side].append(step)
    out = []
    for (n, length), sides in sorted(groups.items()):
        if len(sides["high"]) + len(sides["low"]) < MIN_STEPS:
            continue
        row = {"requests": n, "verified_length": length}
        for side, steps in sides.items():
            row[f"{side}_clock_steps"] = len(steps)
            # the forward phase's device time; with session 51's traces also the model
            # call's and the lead before it
            for phase in ("forward_gpu_ms", "model_gpu_ms", "lead_gpu_ms"):
                if phase == "forward_gpu_ms" or (steps and all(phase in s for s in steps)):
                    row[f"{side}_clock_{phase}"] = (
                        round(statistics.median(s[phase] for s in steps), 3) if steps else None)
        out.append(row)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", type=Path, nargs="+")
    p.add_argument("--busy", type=float, default=50.0, help="utilisation %% counted as busy")
    p.add_argument("--out", type=Path)
    p.add_argument("--runner", type=Path, help="a runner trace to read against the clock")
    p.add_argument("--gpu", default="0", help="--runner: the GPU index its engine ran on")
    p.add_argument("--clock-offset", type=Path,
                   help="--runner: a file holding `time.time() time.monotonic()`")
    p.add_argument("--split-mhz", type=float, default=1900.0)
    args = p.parse_args()
    if args.runner:
        if not args.clock_offset:
            p.error("--runner needs --clock-offset")
        wall, mono = map(float, args.clock_offset.read_text().split()[:2])
        result = {"runner": str(args.runner), "gpu": args.gpu, "split_mhz": args.split_mhz,
                  "shapes": forward_by_clock(args.csv[0], args.gpu, args.runner, wall - mono,
                                             args.split_mhz)}
    else:
        result = {str(path): summarise(path, args.busy) for path in args.csv}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
