"""End-to-end BASS on the embedded model pair: ms/token and mean acceptance length for the
`fixed`, `bass` and `per_request` draft-length policies against plain decoding, at batch
sizes 1, 8 and 32 (greedy, 128 new tokens per sequence). One engine per configuration, in its
own process. ms/token is the paper's latency metric: wall time of the batch / new tokens per
sequence. Writes JSON + markdown (+ PNG when matplotlib is present).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vllm_bass.utils.isolated_engine import (  # noqa: E402
    DRAFT,
    TARGET,
    base_engine_kwargs,
    metric,
    run_engine,
)
from tests.prompts import PROMPTS  # noqa: E402

# name: (speculative config or None, engine overrides)
CUSTOM_ATTN = {"attention_config": {"backend": "CUSTOM"}}
CONFIGS = {
    "plain": (None, {}),
    "fixed": ({"method": "bass", "draft_length_policy": "fixed", "num_speculative_tokens": 5}, {}),
    "bass": ({"method": "bass", "draft_length_policy": "bass"}, {}),
    "per_request": ({"method": "bass", "draft_length_policy": "per_request",
                     "num_speculative_tokens": 16}, {}),
    # vLLM's own draft-model speculation with the same K as `fixed`
    "vllm_draft_model": ({"method": "draft_model", "num_speculative_tokens": 5}, {}),
    # our Triton attention (CUSTOM backend) for target and draft
    "plain_triton_attn": (None, CUSTOM_ATTN),
    "bass_triton_attn": ({"method": "bass", "draft_length_policy": "bass",
                          "attention_backend": "CUSTOM"}, CUSTOM_ATTN),
}
DEFAULT_CONFIGS = "plain,fixed,bass,per_request,vllm_draft_model"


def device_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except Exception:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/e2e_policies")
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"from {','.join(CONFIGS)}")
    ap.add_argument("--eager", action="store_true", help="no CUDA graphs / torch.compile")
    args = ap.parse_args()
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    sampling = {"temperature": 0.0, "max_tokens": args.max_tokens, "ignore_eos": True}
    jobs = [{"prompts": PROMPTS[:4], "sampling": dict(sampling, max_tokens=16)}]  # warm-up
    for bs in sizes:
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(bs)]
        jobs += [{"prompts": prompts, "sampling": sampling}] * 2  # 2 repeats, best kept
    rows, raw = [], {}
    for name in args.configs.split(","):
        spec, engine = CONFIGS[name]
        kwargs = base_engine_kwargs(dtype=args.dtype, max_num_seqs=max(sizes),
                                    enforce_eager=args.eager, max_model_len=1024, **engine)
        if spec is not None:
            kwargs["speculative_config"] = {"model": DRAFT, **spec}
        t0 = time.time()
        out = run_engine(kwargs, jobs, metrics=True, log_path=f"{args.out}_{name}.log")
        print(f"{name}: engine run {time.time() - t0:.0f}s", flush=True)
        raw[name] = out
        # keep what we have if a later configuration runs out of time
        Path(f"{args.out}_{name}.json").write_text(json.dumps(
            {"config": name, "sizes": sizes, "max_tokens": args.max_tokens,
             "seconds": [r["seconds"] for r in out["results"]],
             "metrics": [r.get("metrics") for r in out["results"]]}))
        for i, bs in enumerate(sizes):
            reps = out["results"][1 + 2 * i: 3 + 2 * i]
            best = min(r["seconds"] for r in reps)
            m = reps[-1]["metrics"]
            before = out["results"][2 * i]["metrics"]  # the job just before this pair
            d = {k: metric(m, k) - metric(before, k) for k in (
                "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                "vllm:spec_decode_num_accepted_tokens")}
            drafts = d["vllm:spec_decode_num_drafts"]
            rows.append({
                "config": name, "batch": bs, "seconds": best,
                "ms_per_token": 1000.0 * best / args.max_tokens,
                "tokens_per_s": bs * args.max_tokens / best,
                "mean_acceptance_length": (1 + d["vllm:spec_decode_num_accepted_tokens"] / drafts)
                if drafts else None,
                "mean_draft_length": (d["vllm:spec_decode_num_draft_tokens"] / drafts)
                if drafts else None,
                "greedy_equals_plain": None,
            })
    # losslessness check on the side: greedy outputs must match plain decoding
    # (against plain decoding on the same attention backend: bf16 kernels may round differently)
    for r in rows:
        ref = "plain_triton_attn" if CONFIGS[r["config"]][1] else "plain"
        if ref in raw:
            i = sizes.index(r["batch"])
            r["greedy_equals_plain"] = (raw[r["config"]]["results"][1 + 2 * i]["token_ids"]
                                        == raw[ref]["results"][1 + 2 * i]["token_ids"])
    for r in rows:
        base = next((x for x in rows if x["config"] == "plain" and x["batch"] == r["batch"]), None)
        r["speedup_vs_plain"] = base["seconds"] / r["seconds"] if base else None
    result = {"device": device_name(), "target": TARGET, "draft": DRAFT, "dtype": args.dtype,
              "eager": args.eager, "max_tokens": args.max_tokens, "rows": rows,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    lines = [f"# BASS end-to-end on the embedded pair ({result['device']}, {args.dtype}, "
             f"{'eager' if args.eager else 'CUDA graphs'}, greedy, {args.max_tokens} tokens)", "",
             "| config | batch | ms/token | tokens/s | speedup vs plain | mean acceptance length "
             "| mean draft length | greedy == plain |", "|---|---|---|---|---|---|---|---|"]
    fmt = lambda v, f: "—" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        lines.append(f"| {r['config']} | {r['batch']} | {r['ms_per_token']:.2f} | "
                     f"{r['tokens_per_s']:.0f} | {fmt(r['speedup_vs_plain'], '.2f')} | "
                     f"{fmt(r['mean_acceptance_length'], '.2f')} | "
                     f"{fmt(r['mean_draft_length'], '.2f')} | {r['greedy_equals_plain']} |")
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
        ax.set_title(f"BASS policies, embedded pair, {result['device']}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out + ".png", dpi=120)
    except ImportError:
        print("matplotlib missing: no PNG")


if __name__ == "__main__":
    main()
