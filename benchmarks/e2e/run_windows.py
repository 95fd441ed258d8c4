"""Where a closed batch's wall time goes outside BASS's traced steps.

`vs_vllm.py` records each timed closed batch's (start, end) on time.perf_counter
(`run_windows`), and BASS's step trace (`--trace-dir`, `VLLM_BASS_STEP_TRACE`) each step's
end on the same clock (CLOCK_MONOTONIC, one clock for every process of the machine). A
window then splits into
  head: request set-up and the first step after idle (the scheduler does not time it: its
        period would hold the idle time; the prompts' prefill runs there),
  steps: the traced steps (their periods add up to the span),
  tail: from the last step's end to generate() returning (the output's last hop).
Session 45's traced batch-8 runs (alpha 0.8, 4x1024) spanned 248-257 ms of steps in
304-319 ms windows (plain decoding has no BASS step trace: its head is not split). With the
runner's phase trace beside it (`FILE.runner`, `diagnostics.phase_trace`) each window also
gets its head's steps (the prompts' prefill) and the later steps' median phase times, and
with `FILE.gc` (`diagnostics.gc_trace`) the engine's garbage-collection pauses in each part.

    python benchmarks/e2e/run_windows.py pair0.json --traces traces0 --out windows.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.e2e.step_shapes import read_runner, read_steps  # noqa: E402
from vllm_bass.diagnostics import gc_trace  # noqa: E402


def split_window(start: float, end: float, steps: list) -> dict:
    """One window's head / steps / tail in ms (no traced step inside: all head)."""
    inside = [s for s in steps if start < s[0] <= end]
    if not inside:
        return {"window_ms": (end - start) * 1e3, "steps": 0, "head_ms": (end - start) * 1e3,
                "span_ms": 0.0, "tail_ms": 0.0}
    first_start = inside[0][0] - inside[0][4] / 1e3
    periods = [s[4] for s in inside]
    return {
        "window_ms": round((end - start) * 1e3, 3),
        "steps": len(inside),
        "head_ms": round((first_start - start) * 1e3, 3),
        "span_ms": round((inside[-1][0] - first_start) * 1e3, 3),
        "tail_ms": round((end - inside[-1][0]) * 1e3, 3),
        "median_step_ms": round(statistics.median(periods), 3),
        "mean_step_ms": round(statistics.fmean(periods), 3),
        "slowest_steps_ms": sorted(round(p, 2) for p in periods)[-3:],
        "mean_draft_steps": round(statistics.fmean(s[2] for s in inside), 2),
        "prefill_steps": sum(1 for s in inside if s[5] > 0),
    }


def runner_phases(start: float, end: float, head_end: float, runner: list[dict]) -> dict:
    """The window's head steps (started before the first traced step began: the prefill)
    with their phase times, and the median phase times of the steps after them."""
    inside = [r for r in runner if start < r["start"] <= end]
    head = [r for r in inside if r["start"] < head_end]
    rest = [r for r in inside if r["start"] >= head_end and r["requests"] > 0]
    kept_phases = ("forward_cpu", "forward_gpu", "draft_cpu", "draft_gpu")

    def median(phase):
        return (round(statistics.median(r[phase + "_ms"] for r in rest), 3) if rest
                else None)

    return {"head_steps": [{"num_reqs": r["requests"], "graph_mode": r["graph_mode"],
                            **{p: r[p + "_ms"] for p in kept_phases}} for r in head],
            "median_ms": {p: median(p) for p in ("forward_cpu", "forward_gpu", "sample_gpu",
                                                 "draft_cpu", "draft_gpu")}}


def gc_in_window(start: float, end: float, head_end: float, pauses: list) -> dict:
    """The engine process's collections (`diagnostics.gc_trace`) that began in the window's
    head and in its steps: count, ms, the longest."""
    def part(lo, hi):
        inside = [p for p in pauses if lo <= p[0] < hi]
        return {"count": len(inside), "ms": round(sum(p[1] for p in inside), 3),
                "longest_ms": round(max((p[1] for p in inside), default=0.0), 3)}

    return {"head": part(start, head_end), "rest": part(head_end, end)}


def summarise(result_paths: list[Path], trace_dir: Path) -> list[dict]:
    out = []
    for path in result_paths:
        for row in json.loads(path.read_text()).get("rows", []):
            windows = row.get("run_windows") or []
            trace = trace_dir / f"{row.get('system')}_{row.get('draft')}.csv"
            if not windows or not trace.exists():
                continue
            steps = read_steps(trace)
            parts = [split_window(a, b, steps) for a, b in windows]
            gc_path = Path(f"{trace}.gc")
            if gc_path.exists():
                pauses = gc_trace.read(gc_path)
                for (a, b), part in zip(windows, parts):
                    part["gc"] = gc_in_window(a, b, a + part["head_ms"] / 1e3, pauses)
            runner_path = Path(f"{trace}.runner")
            if runner_path.exists():
                runner = read_runner(runner_path)
                for (a, b), part in zip(windows, parts):
                    part.update(runner_phases(a, b, a + part["head_ms"] / 1e3, runner))
            out.append({"system": row["system"], "draft": row.get("draft"),
                        "acceptance": row.get("acceptance"), "batch": row["batch"],
                        "ms_per_token": row.get("ms_per_token"), "windows": parts})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="vs_vllm.py JSON files")
    p.add_argument("--traces", type=Path, required=True, help="the --trace-dir of the run")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    rows = summarise(args.results, args.traces)
    for r in rows:
        for w in r["windows"]:
            print(f"{r['system']:>22} a={r['acceptance']} b={r['batch']:>3}: window "
                  f"{w['window_ms']:7.1f} = head {w['head_ms']:6.1f} + steps {w['span_ms']:7.1f}"
                  f" ({w['steps']} steps) + tail {w['tail_ms']:5.1f} ms")
            if "head_steps" in w:
                head = "; ".join(f"{h['num_reqs']} reqs fwd {h['forward_gpu']:.1f} draft "
                                 f"{h['draft_gpu']:.1f}" for h in w["head_steps"])
                m = w["median_ms"]
                print(f"{'':>24}head steps (GPU ms): {head}; later steps' median forward "
                      f"{m['forward_gpu']} draft {m['draft_gpu']} ms")
            if "gc" in w:
                g = w["gc"]
                print(f"{'':>24}GC: head {g['head']['count']} ({g['head']['ms']} ms), steps "
                      f"{g['rest']['count']} ({g['rest']['ms']} ms, longest "
                      f"{g['rest']['longest_ms']})")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
