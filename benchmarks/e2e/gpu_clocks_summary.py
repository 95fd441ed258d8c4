"""Per GPU, how a call's clocks and power behaved while the GPU was busy, from the
`nvidia-smi ... -lms 250` log `gpu_bench.sh`'s pair runs write (`gpu_clocks.csv`: timestamp,
index, SM clock, memory clock, power, temperature, utilisation, throttle reasons).

Session 50: a drafting step's target forward at batch 32 took 6.9 ms of GPU time against an
off-step's 5.3 for 32 more tokens (memory-bound shapes), and busy GPUs sat at their software
power cap most of the time, SM clocks down to ~1400 MHz: how often a call's GPUs were capped
is part of reading its step times.

    python benchmarks/e2e/gpu_clocks_summary.py gpu_clocks.csv [--busy 50] [--out s.json]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

SW_POWER_CAP = 0x4  # nvmlClocksThrottleReasonSwPowerCap
HW_SLOWDOWN = 0x8 | 0x40 | 0x80  # HW slowdown, thermal, power brake


def _number(field: str) -> float:
    return float(field.split()[0])


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
    for row in csv.reader(path.read_text().splitlines(), skipinitialspace=True):
        if len(row) < 8 or not row[1].strip().isdigit():
            continue  # header or a truncated last line
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", type=Path, nargs="+")
    p.add_argument("--busy", type=float, default=50.0, help="utilisation %% counted as busy")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    result = {str(path): summarise(path, args.busy) for path in args.csv}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
