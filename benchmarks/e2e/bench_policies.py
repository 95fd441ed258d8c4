"""End-to-end BASS: ms/token and mean acceptance length for the `fixed`, `bass` and
`per_request` draft-length policies against plain decoding and vLLM's own draft_model
speculation, at batch sizes 1, 8 and 32 (greedy, 128 new tokens per sequence). One engine per
configuration, in its own process. ms/token is the paper's latency metric: wall time of the
batch / new tokens per sequence. Writes JSON + markdown (+ PNG when matplotlib is present).

Model pairs: `--pair embedded` (the repo's trained tiny pair, real acceptance) or
`--pair llama7b` (Llama-2-7B layer shapes as target, a ~100M Llama as draft, dummy weights,
the tiny pair's 2048-token vocabulary); on dummy weights acceptance is synthetic, the same
process for BASS and vLLM (`rejection_sample_method="synthetic"`): position j of a draft is
accepted with unconditional probability alpha^j. A configuration name may carry its own
alpha: `bass@0.3`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.e2e.vs_vllm import speculation_means  # noqa: E402
from support.isolated_engine import (  # noqa: E402
    DRAFT,
    TARGET,
    base_engine_kwargs,
    metric,
    run_engine,
)
from tests.prompts import PROMPTS  # noqa: E402

# name: (speculative config or None, engine overrides). `*_bass_attn`: our Triton attention
# (CUSTOM backend) for target and draft (the option attention="bass"); else vLLM's choice.
CUSTOM_ATTN = {"attention_config": {"backend": "CUSTOM"}}
PER_REQUEST = {"method": "bass", "draft_length_policy": "per_request", "num_speculative_tokens": 16}
ASYNC = {"async_scheduling": True}
CONFIGS = {
    "plain": (None, {}),
    "fixed": ({"method": "bass", "draft_length_policy": "fixed", "num_speculative_tokens": 5}, {}),
    "bass": ({"method": "bass", "draft_length_policy": "bass"}, {}),
    "per_request": (PER_REQUEST, {}),
    # BASS under vLLM's async scheduling (opt-in: --async-scheduling)
    "bass_async": ({"method": "bass", "draft_length_policy": "bass"}, ASYNC),
    "per_request_async": (PER_REQUEST, ASYNC),
    "plain_sync": (None, {"async_scheduling": False}),
    # vLLM's own draft-model speculation with the same K as `fixed`
    "vllm_draft_model": ({"method": "draft_model", "num_speculative_tokens": 5}, {}),
    # the same with vLLM's async scheduling asked for explicitly (vLLM leaves it off by
    # default for draft_model, but accepts it when asked)
    "vllm_draft_model_async": ({"method": "draft_model", "num_speculative_tokens": 5},
                               {"async_scheduling": True}),
    "plain_triton_attn": (None, CUSTOM_ATTN),
    "bass_bass_attn": ({"method": "bass", "draft_length_policy": "bass", "attention": "bass"},
                       {}),
    "per_request_async_bass_attn": ({**PER_REQUEST, "attention": "bass"}, ASYNC),
    "per_request_async_target_attn": ({**PER_REQUEST, "attention": "target"}, ASYNC),
    "fixed_bass_attn": ({"method": "bass", "draft_length_policy": "fixed",
                         "num_speculative_tokens": 5, "attention": "bass"}, {}),
    # every batch (ragged verification included) under full CUDA graphs: FA3 declares
    # AttentionCGSupport.ALWAYS; vLLM's default FULL_AND_PIECEWISE runs them piecewise
    "bass_full_graphs": ({"method": "bass", "draft_length_policy": "bass"},
                         {"compilation_config": {"cudagraph_mode": "FULL"}}),
    "fixed_full_graphs": ({"method": "bass", "draft_length_policy": "fixed",
                           "num_speculative_tokens": 5},
                          {"compilation_config": {"cudagraph_mode": "FULL"}}),
    "plain_full_graphs": (None, {"compilation_config": {"cudagraph_mode": "FULL"}}),
    # vLLM's choice for the target, our Triton attention for the draft only
    "bass_draft_attn": ({"method": "bass", "draft_length_policy": "bass",
                         "attention_backend": "CUSTOM"}, {}),
}
DEFAULT_CONFIGS = "plain,fixed,bass,per_request,vllm_draft_model"
REPO_ROOT = Path(__file__).resolve().parents[2]
# Dummy-weight pair with Llama-2-7B layer shapes (vocabulary: the tiny pair's tokenizer).
LLAMA7B_SHAPES = {
    "target": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                   num_key_value_heads=32, head_dim=128, intermediate_size=11008),
    "draft": dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                  num_key_value_heads=16, head_dim=64, intermediate_size=2816),
}


def dummy_pair(root: Path) -> tuple[str, str]:
    """Config-only model folders (weights come from load_format='dummy')."""
    from benchmarks.e2e.dummy_models import dummy_model_folder

    paths = [dummy_model_folder(root / f"llama7b-pair-{role}", shape, 4096)
             for role, shape in LLAMA7B_SHAPES.items()]
    return paths[0], paths[1]


def synthetic(spec: dict, alpha: float) -> dict:
    """vLLM's synthetic acceptance keys: position j accepted with probability alpha^j."""
    k = spec.get("num_speculative_tokens", 32)
    return dict(spec, rejection_sample_method="synthetic",
                synthetic_acceptance_rates=[alpha ** (j + 1) for j in range(k)])


def device_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except Exception:
        pass
    return platform.processor() or platform.machine()


def config_rows(name: str, results: list[dict], sizes: list[int], max_tokens: int) -> list[dict]:
    """One row per batch size from an engine's job results (warm-up, then 2 repeats per
    size; the best repeat is kept, counters are differenced over the size's jobs)."""
    rows = []
    for i, bs in enumerate(sizes):
        reps = results[1 + 2 * i: 3 + 2 * i]
        if len(reps) < 2:
            break  # the run stopped before this size
        best = min(r["seconds"] for r in reps)
        m = reps[-1]["metrics"]
        before = results[2 * i]["metrics"]  # the job just before this pair
        d = {k: metric(m, k) - metric(before, k) for k in (
            "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens")}
        d |= {f"steps_{s}": metric(m, "vllm:bass_steps", speculation=s)
              - metric(before, "vllm:bass_steps", speculation=s) for s in ("on", "off")}
        rows.append({
            "config": name, "batch": bs, "seconds": best,
            "ms_per_token": 1000.0 * best / max_tokens,
            "tokens_per_s": bs * max_tokens / best,
            **speculation_means(d),
            "greedy_equals_plain": None,
        })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/e2e_policies")
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"from {','.join(CONFIGS)}")
    ap.add_argument("--eager", action="store_true", help="no CUDA graphs / torch.compile")
    ap.add_argument("--warmup-tokens", type=int, default=256)
    ap.add_argument("--trace-dir", help="write each engine's per-step trace here "
                    "(VLLM_BASS_STEP_TRACE)")
    ap.add_argument("--sync-debug-dir",
                    help="write where each BASS engine's steps wait for the GPU here "
                         "(VLLM_BASS_SYNC_DEBUG; perturbs timing)")
    ap.add_argument("--pair", choices=("embedded", "llama7b"), default="embedded")
    ap.add_argument("--alpha", type=float, default=0.8,
                    help="synthetic per-token acceptance for --pair llama7b")
    ap.add_argument("--summarize", action="store_true",
                    help="run nothing: rebuild the table from the per-configuration JSONs "
                         "that a run stopped early left at --out (no greedy check: they "
                         "hold no token ids)")
    ap.add_argument("--device", help="with --summarize: the device the run was on "
                    "(default: the one the per-configuration JSONs name)")
    args = ap.parse_args()
    device = args.device or device_name()
    target, draft, load = TARGET, DRAFT, {}
    if args.pair == "llama7b":
        target, draft = dummy_pair(REPO_ROOT / "benchmarks" / ".models")
        load = {"load_format": "dummy", "model": target, "gpu_memory_utilization": 0.85}
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    sampling = {"temperature": 0.0, "max_tokens": args.max_tokens, "ignore_eos": True}
    # warm-up: long enough for the one-time costs of every step shape (Triton JIT of the
    # kernels' specialisations, lazily compiled graphs) that a serving engine pays once
    jobs = [{"prompts": PROMPTS, "sampling": dict(sampling, max_tokens=args.warmup_tokens)}]
    for bs in sizes:
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(bs)]
        jobs += [{"prompts": prompts, "sampling": sampling}] * 2  # 2 repeats, best kept
    rows, raw = [], {}
    for name in args.configs.split(",") if args.summarize else ():
        path = Path(f"{args.out}_{name}.json")
        if path.exists():
            saved = json.loads(path.read_text())
            device = args.device or saved.get("device", device)
            results = [{"seconds": t, "metrics": m}
                       for t, m in zip(saved["seconds"], saved["metrics"])]
            rows += config_rows(name, results, saved["sizes"], saved["max_tokens"])
    for name in () if args.summarize else args.configs.split(","):
        base_name, _, alpha = name.partition("@")
        spec, engine = CONFIGS[base_name]
        kwargs = base_engine_kwargs(dtype=args.dtype, max_num_seqs=max(sizes),
                                    enforce_eager=args.eager, max_model_len=1024,
                                    **engine, **load)
        if spec is not None:
            spec = {"model": draft, **spec}
            if args.pair == "llama7b":
                spec = synthetic(spec, float(alpha or args.alpha))
            kwargs["speculative_config"] = spec
        t0 = time.time()
        if args.trace_dir:
            os.environ["VLLM_BASS_STEP_TRACE"] = f"{args.trace_dir}/{name}.csv"
        if args.sync_debug_dir:
            os.environ["VLLM_BASS_SYNC_DEBUG"] = f"{args.sync_debug_dir}/{name}.syncs.txt"
        out = run_engine(kwargs, jobs, metrics=True, log_path=f"{args.out}_{name}.log")
        print(f"{name}: engine run {time.time() - t0:.0f}s", flush=True)
        raw[name] = out
        # keep what we have if a later configuration runs out of time
        Path(f"{args.out}_{name}.json").write_text(json.dumps(
            {"config": name, "device": device, "sizes": sizes, "max_tokens": args.max_tokens,
             "seconds": [r["seconds"] for r in out["results"]],
             "metrics": [r.get("metrics") for r in out["results"]]}))
        rows += config_rows(name, out["results"], sizes, args.max_tokens)
    # losslessness check on the side: greedy outputs must match plain decoding
    # (against plain decoding on the same attention backend: bf16 kernels may round differently)
    cuda = device.startswith("NVIDIA")
    for r in rows:
        if args.pair != "embedded":
            continue  # synthetic acceptance is not lossless by design; dummy weights anyway
        spec, engine = CONFIGS[r["config"].partition("@")[0]]
        custom = engine == CUSTOM_ATTN or (cuda and spec is not None
                                           and spec.get("attention") in ("bass", "target"))
        ref = "plain_triton_attn" if custom else "plain"
        r["greedy_reference"] = ref
        if ref in raw:
            i = sizes.index(r["batch"])
            r["greedy_equals_plain"] = (raw[r["config"]]["results"][1 + 2 * i]["token_ids"]
                                        == raw[ref]["results"][1 + 2 * i]["token_ids"])
    for r in rows:
        # against plain decoding of the same run with the same engine settings
        # (`*_full_graphs` against plain_full_graphs), else against `plain`
        engine = CONFIGS[r["config"].partition("@")[0]][1]
        plains = [n for n, (s, e) in CONFIGS.items() if s is None and e == engine] + ["plain"]
        base = next((x for p in plains for x in rows
                     if x["config"] == p and x["batch"] == r["batch"]), None)
        r["speedup_vs_plain"] = base["seconds"] / r["seconds"] if base else None
        r["plain_reference"] = base["config"] if base else None
    result = {"device": device, "pair": args.pair, "target": Path(target).name,
              "draft": Path(draft).name, "dtype": args.dtype,
              "synthetic_alpha": args.alpha if args.pair == "llama7b" else None,
              "eager": args.eager, "max_tokens": args.max_tokens, "rows": rows,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    pair = ("the embedded pair" if args.pair == "embedded" else
            f"a dummy-weight Llama-2-7B-shape target + ~100M draft, synthetic acceptance "
            f"alpha^j, alpha={args.alpha} unless the config says @alpha")
    lines = [f"# BASS end-to-end on {pair} ({result['device']}, {args.dtype}, "
             f"{'eager' if args.eager else 'CUDA graphs'}, greedy, {args.max_tokens} tokens)", "",
             "| config | batch | ms/token | tokens/s | speedup vs plain | mean acceptance length "
             "| mean draft length | off-step fraction | greedy == plain |",
             "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v, f: "—" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        lines.append(f"| {r['config']} | {r['batch']} | {r['ms_per_token']:.2f} | "
                     f"{r['tokens_per_s']:.0f} | {fmt(r['speedup_vs_plain'], '.2f')} | "
                     f"{fmt(r['mean_acceptance_length'], '.2f')} | "
                     f"{fmt(r['mean_draft_length'], '.2f')} | "
                     f"{fmt(r['off_step_fraction'], '.2f')} | {r['greedy_equals_plain']} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for name in dict.fromkeys(r["config"] for r in rows):
            pts = [(r["batch"], r["ms_per_token"]) for r in rows if r["config"] == name]
            ax.plot(*zip(*pts), marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_ylabel("ms / token (per sequence)")
        ax.set_title(f"BASS policies, {args.pair} pair, {result['device']}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out + ".png", dpi=120)
    except ImportError:
        print("matplotlib missing: no PNG")


if __name__ == "__main__":
    main()
