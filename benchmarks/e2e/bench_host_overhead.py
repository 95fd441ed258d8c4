"""Host time BASS adds to a step that drafts nothing (an auto-off step), against plain decoding.

On a host-bound pair (the embedded one on any GPU) an off-step can only be as fast as a plain
step if BASS's own per-step work (scheduler planning, cost model, draft-skip bookkeeping) is
small. This runs the engine in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0) under cProfile,
once plain and once with BASS forced off after its first step (VLLM_BASS_TEST_OFF_CYCLE),
and reports ms per step and the cumulative time of the functions BASS adds or wraps.
cProfile inflates Python-heavy code; compare the two modes, not absolute numbers.

    python benchmarks/e2e/bench_host_overhead.py --batch 8 --out benchmarks/results/host_overhead_cpu
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# (label, file suffix, function name) of what BASS adds or wraps in a step
WATCHED = [
    ("engine step", "v1/engine/core.py", "step"),
    ("scheduler.schedule (vLLM)", "v1/core/sched/scheduler.py", "schedule"),
    ("BASS plan (_update_after_schedule)", "vllm_bass/scheduler.py", "_update_after_schedule"),
    ("BASS update_from_output", "vllm_bass/scheduler.py", "update_from_output"),
    ("BASS step timing (cost model)", "vllm_bass/scheduler.py", "_bass_time_step"),
    ("runner.sample_tokens (vLLM)", "v1/worker/gpu_model_runner.py", "sample_tokens"),
    ("BASS propose (draft skip)", "vllm_bass/worker/model_runner.py", "propose_draft_token_ids"),
    ("model forward", "v1/worker/gpu_model_runner.py", "_model_forward"),
]


def _child(mode: str, batch: int, steps: int, out: str) -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    if mode == "bass_off":
        os.environ["VLLM_BASS_TEST_OFF_CYCLE"] = "1,1000000"
    sys.path.insert(0, str(REPO))
    from vllm import LLM, SamplingParams

    from vllm_bass.plugin import register
    from support.isolated_engine import base_engine_kwargs, bass_spec

    register()
    kwargs = base_engine_kwargs(max_num_seqs=batch)
    if mode.startswith("bass_fixed"):  # K draft tokens every step: BASS's verification path
        kwargs["speculative_config"] = bass_spec(num_speculative_tokens=int(mode[10:]),
                                                 draft_length_policy="fixed", auto_off=False)
    elif mode.startswith("vllm_k"):  # vLLM's own draft_model speculation, same draft
        from support.isolated_engine import DRAFT

        kwargs["speculative_config"] = {"method": "draft_model", "model": DRAFT,
                                        "num_speculative_tokens": int(mode[6:])}
    elif mode == "bass_off":
        kwargs["speculative_config"] = bass_spec(num_speculative_tokens=8)
    elif mode == "bass_default":  # the user's defaults (per_request, bound 16, auto-off)
        kwargs["speculative_config"] = bass_spec()
    elif mode != "plain":
        raise SystemExit(f"unknown mode {mode!r}: plain, bass_off, bass_default, bass_fixedK "
                         "or vllm_kK")
    llm = LLM(**kwargs)
    prompts = [f"def f{i}(x):\n    return" for i in range(batch)]
    params = SamplingParams(temperature=0, max_tokens=steps, ignore_eos=True)
    llm.generate(prompts, params, use_tqdm=False)  # warm-up
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    llm.generate(prompts, params, use_tqdm=False)
    profile.disable()
    wall = time.perf_counter() - start
    profile.dump_stats(out + ".prof")  # the whole profile, for diffing the two modes
    stats = pstats.Stats(profile).stats
    funcs = {}
    for label, suffix, name in WATCHED:
        cum = sum(v[3] for k, v in stats.items() if k[0].endswith(suffix) and k[2] == name)
        funcs[label] = 1e3 * cum / steps
    Path(out).write_text(json.dumps({"mode": mode, "ms_per_step": 1e3 * wall / steps,
                                     "functions_ms_per_step": funcs}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--modes", default="plain,bass_off",
                    help="of plain, bass_off, bass_fixedK (BASS drafting K tokens every "
                    "step), vllm_kK (vLLM's draft_model, K)")
    ap.add_argument("--out", default="benchmarks/results/host_overhead")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "BATCH", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, batch, out = args.child
        _child(mode, int(batch), args.steps, out)
        return
    results = {}
    for mode in args.modes.split(","):  # one process each: vLLM keeps global state
        path = f"{args.out}_{mode}.tmp.json"
        subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--child", mode,
                        str(args.batch), path], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        results[mode] = json.loads(Path(path).read_text())
        Path(path).unlink()
    sys.path.insert(0, str(REPO))
    from benchmarks.e2e.bench_policies import device_name

    name = device_name()
    device = name if name.startswith("NVIDIA") else f"cpu: {name}"
    summary = {"device": device, "batch": args.batch, "steps": args.steps, "results": results,
               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out + ".json").write_text(json.dumps(summary, indent=1))
    modes = list(results)
    lines = [f"# Host time per step ({device}, batch {args.batch}, {args.steps} steps, "
             "in-process engine under cProfile)", "",
             "| | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes),
             "| ms per step | " + " | ".join(f"{results[m]['ms_per_step']:.2f}"
                                          for m in modes) + " |"]
    for label, _, _ in WATCHED:
        lines.append(f"| {label} (ms/step, cumulative) | " + " | ".join(
            f"{results[m]['functions_ms_per_step'][label]:.3f}" for m in modes) + " |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
