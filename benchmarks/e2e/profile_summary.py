"""Summarise vLLM torch-profiler traces of `vs_vllm.py --profile-dir`: where a step's time
goes, GPU work against GPU idle, and what the host was doing while the GPU waited.

Per trace (one system x setting x batch): steps and generated tokens (vLLM's per-step
`execute_*` annotations), the GPU window and its busy union (kernels, copies, memsets),
idle time split by the innermost host annotation running when each gap began (vLLM's and
our `record_function` ranges; gaps < 20 us are launch spacing and are counted apart),
kernel time by name, and the CUDA runtime calls that block (syncs). Per generated token,
so systems with different tokens per step compare directly. `by_step_shape`: steps grouped by
their generation tokens (one token plus the drafts verified, per request), each step's GPU
kernel time (kernels attributed to the step whose host code launched them, through the
profiler's correlation ids; graph replays included) split by runner phase and kernel
family, medians: two systems' steps of one shape compare there, whatever their mix.

    python benchmarks/e2e/profile_summary.py DIR [--out FILE.json]
"""

from __future__ import annotations

import argparse
import bisect
import collections
import gzip
import json
import re
from pathlib import Path

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
SMALL_GAP_US = 20.0
BLOCKING = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize",
            "cudaMemcpy", "cudaStreamWaitEvent")
STEP = re.compile(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")


def _union(intervals: list[tuple[float, float]]) -> tuple[float, list[tuple[float, float]]]:
    """Busy time of the union and the gaps between merged intervals."""
    busy, gaps, cur_s, cur_e = 0.0, [], None, None
    for s, e in sorted(intervals):
        if cur_e is None:
            cur_s, cur_e = s, e
        elif s > cur_e:
            busy += cur_e - cur_s
            gaps.append((cur_e, s))
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy, gaps


def _kernel_family(name: str) -> str:
    n = name.lower()
    # attention first: FA3's kernels are `cutlass::device_kernel<flash::...>`
    for key, fam in (("flash", "attention"), ("fmha", "attention"), ("attn", "attention"),
                     ("attention", "attention"), ("nvjet", "gemm"), ("gemm", "gemm"),
                     ("cutlass", "gemm"), ("reshape_and_cache", "kv write"),
                     ("rms", "norm"), ("norm", "norm"), ("act_and_mul", "activation"),
                     ("silu", "activation"), ("rotary", "rotary"), ("softmax", "softmax"),
                     ("argmax", "argmax/reduce"), ("reduce", "argmax/reduce"),
                     ("sample", "sampling"), ("memcpy", "copy"), ("copy", "copy"),
                     ("triton", "other triton"), ("elementwise", "elementwise"),
                     ("index", "index/gather"), ("gather", "index/gather"),
                     ("scatter", "index/gather")):
        if key in n:
            return fam
    return "other"


# host ranges whose inside is broken down by self time (what the host did there)
BREAKDOWN = ("bass_drafter: first pass", "gpu_model_runner: preprocess",
             "gpu_model_runner: sample", "gpu_model_runner: draft",
             "gpu_model_runner: forward", "bass_scheduler: plan", "schedule: allocate_slots")


def self_time_breakdown(events: list[dict], roots=BREAKDOWN, top: int = 15) -> dict:
    """Per root range name: self time (own duration minus its direct children's) of every
    host event nested in it (down to the next root), by name, summed over the trace; the
    root's own self time is Python and untraced work in it. Nesting per thread, by
    containment."""
    by_tid = collections.defaultdict(list)
    for ev in events:
        if (ev.get("ph") == "X" and "dur" in ev
                and ev.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime",
                                      "cuda_driver", "python_function")):
            by_tid[(ev.get("pid"), ev.get("tid"))].append(ev)
    out = {r: collections.defaultdict(float) for r in roots}

    def close(item):
        _, name, child, root, dur = item
        if root is not None:
            out[root][name] += dur - child

    for evs in by_tid.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack: list[list] = []  # [end, name, child_time, root, duration]
        for ev in evs:
            ts, dur, name = float(ev["ts"]), float(ev["dur"]), ev.get("name", "")
            while stack and stack[-1][0] <= ts:
                close(stack.pop())
            if stack:
                stack[-1][2] += dur
            root = name if name in out else (stack[-1][3] if stack else None)
            stack.append([ts + dur, name, 0.0, root, dur])
        while stack:
            close(stack.pop())
    return {r: {k: round(v / 1e3, 3) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]}
            for r, d in out.items() if d}


PHASES = ("gpu_model_runner: preprocess", "gpu_model_runner: forward",
          "gpu_model_runner: postprocess", "gpu_model_runner: sample",
          "gpu_model_runner: draft", "gpu_model_runner: bookkeep")


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def by_step_shape(events: list[dict]) -> dict:
    """Per generation-token count: steps, median host period (one step's start to the
    next's), median GPU kernel ms per step by runner phase and by kernel family. A kernel
    belongs to the step (and the innermost phase) whose host code launched it."""
    launches, kernels, steps, phases = {}, [], [], []
    for ev in events:
        if ev.get("ph") != "X" or "dur" not in ev:
            continue
        cat, name = ev.get("cat", ""), ev.get("name", "")
        corr = (ev.get("args") or {}).get("correlation")
        if cat in ("cuda_runtime", "cuda_driver") and corr is not None:
            launches[corr] = float(ev["ts"])
        elif cat == "kernel" and corr is not None:
            kernels.append((corr, float(ev["dur"]), _kernel_family(name)))
        elif cat == "user_annotation":
            m = STEP.match(name)
            if m:
                steps.append((float(ev["ts"]), int(m.group(3)), int(m.group(4)),
                              int(m.group(2))))
            elif name in PHASES:
                phases.append((float(ev["ts"]), float(ev["ts"]) + float(ev["dur"]), name))
    if not steps:
        return {}
    steps.sort()
    phases.sort()
    starts = [s[0] for s in steps]
    phase_starts = [p[0] for p in phases]
    per_step = [collections.defaultdict(float) for _ in steps]
    for corr, dur, family in kernels:
        ts = launches.get(corr)
        if ts is None:
            continue
        i = bisect.bisect_right(starts, ts) - 1
        if i < 0:
            continue
        j = bisect.bisect_right(phase_starts, ts)
        phase = "other"
        for s0, s1, pname in reversed(phases[max(0, j - 8):j]):
            if s0 <= ts < s1:
                phase = pname.split(": ", 1)[-1]
                break
        per_step[i]["total"] += dur
        per_step[i]["phase " + phase] += dur
        per_step[i][family] += dur
    groups = collections.defaultdict(list)
    for i, (ts, reqs, tokens, context) in enumerate(steps[:-1]):  # the last has no period
        # a step with prefill tokens is its own shape (chunks differ: to the power of two)
        chunk = 1 << max(0, context - 1).bit_length() if context else 0
        groups[(chunk, reqs, tokens)].append((steps[i + 1][0] - ts, per_step[i]))
    out = {}
    for (chunk, reqs, tokens), rows in sorted(groups.items()):
        keys = sorted({k for _, d in rows for k in d})
        name = f"{reqs}x{tokens}" if not chunk else f"prefill<={chunk}+{reqs}x{tokens}"
        out[name] = {
            "steps": len(rows),
            "period_ms": round(_median([r[0] for r in rows]) / 1e3, 3),
            "gpu_ms": {k: round(_median([d.get(k, 0.0) for _, d in rows]) / 1e3, 3)
                       for k in keys},
            # the shape's whole GPU time: where two systems' prefill and decode go
            "gpu_ms_sum": round(sum(d.get("total", 0.0) for _, d in rows) / 1e3, 3)}
    return out


def blocking_sites(events: list[dict], min_us: float = 50.0, top: int = 12) -> dict:
    """Where the host blocks: each blocking runtime call of at least `min_us` (event and
    stream syncs, copies that waited) with the innermost host annotation and Python frames
    around it on its thread (frames only when traced with stacks), totalled by site."""
    enclosers = collections.defaultdict(list)  # tid -> (start, end, cat, name)
    blocks = []
    for ev in events:
        if ev.get("ph") != "X" or "dur" not in ev:
            continue
        cat, ts, dur = ev.get("cat", ""), float(ev["ts"]), float(ev["dur"])
        if cat in ("user_annotation", "python_function"):
            enclosers[ev.get("tid")].append((ts, ts + dur, cat, ev.get("name", "")))
        elif (cat in ("cuda_runtime", "cuda_driver") and dur >= min_us
              and any(ev.get("name", "").startswith(b) for b in BLOCKING)):
            blocks.append((ev.get("tid"), ts, ts + dur, ev["name"]))
    for rows in enclosers.values():
        rows.sort()
    starts = {tid: [r[0] for r in rows] for tid, rows in enclosers.items()}
    sites = collections.defaultdict(lambda: [0, 0.0])
    for tid, b0, b1, name in blocks:
        rows = enclosers.get(tid, [])
        i = bisect.bisect_right(starts.get(tid, []), b0)
        around = sorted((r for r in rows[max(0, i - 3000):i] if r[0] <= b0 and r[1] >= b1),
                        key=lambda r: r[1] - r[0])
        frames = [r[3] for r in around if r[2] == "python_function"][:4]
        note = next((r[3] for r in around if r[2] == "user_annotation"), "-")
        key = f"{name} | {note} | " + " < ".join(frames)
        sites[key][0] += 1
        sites[key][1] += b1 - b0
    return {k: {"count": c, "ms": round(t / 1e3, 3)} for k, (c, t) in sorted(
        sites.items(), key=lambda kv: -kv[1][1])[:top]}


def summarise(trace_path: Path) -> dict:
    with gzip.open(trace_path, "rt") if trace_path.suffix == ".gz" else open(trace_path) as fh:
        events = json.load(fh)["traceEvents"]
    gpu, host_ranges, runtime, steps = [], [], collections.defaultdict(lambda: [0, 0.0]), []
    kernels = collections.defaultdict(lambda: [0, 0.0])
    for ev in events:
        if ev.get("ph") != "X" or "dur" not in ev:
            continue
        cat, name, ts, dur = ev.get("cat", ""), ev.get("name", ""), float(ev["ts"]), float(
            ev["dur"])
        if cat in GPU_CATS:
            gpu.append((ts, ts + dur))
            key = name if cat == "kernel" else cat
            kernels[key][0] += 1
            kernels[key][1] += dur
        elif cat == "user_annotation":
            m = STEP.match(name)
            if m:
                steps.append((ts, dur, int(m.group(2)), int(m.group(3)), int(m.group(4))))
            else:
                host_ranges.append((ts, ts + dur, name))
        elif cat in ("cuda_runtime", "cuda_driver"):
            runtime[name][0] += 1
            runtime[name][1] += dur
    steps.sort()
    # generated tokens ~ what the closed batch produced: from the run record when present
    busy, gaps = _union(gpu)
    window = (max(e for _, e in gpu) - min(s for s, _ in gpu)) if gpu else 0.0
    # innermost annotation running at each gap's start (ranges sorted by start)
    host_ranges.sort()
    starts = [r[0] for r in host_ranges]
    idle_by_phase = collections.defaultdict(float)
    small_idle = 0.0
    for g0, g1 in gaps:
        length = g1 - g0
        if length < SMALL_GAP_US:
            small_idle += length
            continue
        i = bisect.bisect_right(starts, g0)
        best, best_len = "(no annotation)", float("inf")
        for s, e, name in host_ranges[max(0, i - 400):i]:
            if s <= g0 < e and e - s < best_len:
                best, best_len = name, e - s
        idle_by_phase[best] += length
    families = collections.defaultdict(float)
    for name, (_, t) in kernels.items():
        families[_kernel_family(name)] += t
    annotations = collections.defaultdict(lambda: [0, 0.0])
    for s, e, name in host_ranges:
        annotations[name][0] += 1
        annotations[name][1] += e - s
    return {
        "trace": trace_path.name,
        "host_self_time_ms": self_time_breakdown(events),
        "by_step_shape": by_step_shape(events),
        "steps": len(steps),
        "step_tokens_scheduled": sum(st[4] + st[2] for st in steps),
        "step_host_ms_median": (sorted(st[1] for st in steps)[len(steps) // 2] / 1e3
                                if steps else None),
        "gpu_window_ms": window / 1e3,
        "gpu_busy_ms": busy / 1e3,
        "gpu_idle_ms": (window - busy) / 1e3,
        "gpu_idle_small_gaps_ms": small_idle / 1e3,
        "idle_by_host_phase_ms": {k: round(v / 1e3, 3) for k, v in sorted(
            idle_by_phase.items(), key=lambda kv: -kv[1])[:15]},
        "kernel_families_ms": {k: round(v / 1e3, 3) for k, v in sorted(
            families.items(), key=lambda kv: -kv[1])},
        "top_kernels": [{"name": k[:120], "count": c, "ms": round(t / 1e3, 3)}
                        for k, (c, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:25]],
        "blocking_sites": blocking_sites(events),
        "blocking_runtime": {k: {"count": c, "ms": round(t / 1e3, 3)}
                             for k, (c, t) in runtime.items()
                             if any(k.startswith(b) for b in BLOCKING)},
        "launches": {k: c for k, (c, _) in runtime.items()
                     if k in ("cudaLaunchKernel", "cudaGraphLaunch", "cuLaunchKernel",
                              "cudaLaunchKernelExC", "cuLaunchKernelEx")},
        "host_annotations_ms": {k: {"count": c, "ms": round(t / 1e3, 3)} for k, (c, t) in
                                sorted(annotations.items(), key=lambda kv: -kv[1][1])[:25]},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    folder = Path(args.folder)
    out = {}
    for trace in sorted(folder.rglob("*.pt.trace.json*")):
        runs = [r.name[:-len("_run.json")] for r in folder.glob("*_run.json")]
        name = max((r for r in runs if trace.name.startswith((r + "_", r + ".pt"))), key=len,
                   default=trace.name)
        summary = summarise(trace)
        run_file = folder / f"{name}_run.json"
        if run_file.exists():
            run = json.loads(run_file.read_text())
            tokens = run["max_tokens"]  # per sequence: the latency metric's denominator
            summary["run"] = run
            summary["per_token_ms"] = {k: round(summary[k] / tokens, 4) for k in (
                "gpu_window_ms", "gpu_busy_ms", "gpu_idle_ms")}
        out[name] = summary
        pt = summary.get("per_token_ms", {})
        print(f"{name}: steps {summary['steps']}, GPU window {summary['gpu_window_ms']:.1f} ms "
              f"busy {summary['gpu_busy_ms']:.1f} idle {summary['gpu_idle_ms']:.1f} "
              f"(per token {pt})", flush=True)
        print("   idle by host phase:", summary["idle_by_host_phase_ms"])
        print("   kernel families:", summary["kernel_families_ms"])
        print("   blocking:", summary["blocking_runtime"], "launches:", summary["launches"])
        for site, v in summary["blocking_sites"].items():
            print(f"   blocks {v['count']:5d} {v['ms']:9.2f} ms  {site}")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
