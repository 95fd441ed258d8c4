"""One-token draft steps' attention under the plans their CUDA graphs carry.

A draft step graph is captured once per batch size; planned for max_model_len, our
attention SPLITs a small batch's contexts (and reduces them in a second launch) whatever
the context the graph meets. Session 46's profile summed 14 us a layer for the two
launches (4x1024 draft, batch 8, ~200 cached tokens), and a second graph per size planned
for the longest context choose_plan gives PAD (`pad_context_reach`), replayed while the
batch's contexts are within it, looked like 0.3-0.5 ms a drafting step. This times,
graph-captured, a decode step's attention (one query token a sequence; the draft's heads)
at contexts on both sides of that reach under: the plan for max_model_len (`long`, what
the engine replays), the short graph's plan (`pad`), what such an engine would replay
(`engine`: `pad` within the reach, else `long`), and FA3. Session 46 (H200): SPLIT and
its reduction overlap (programmatic dependent launch), `long` took 8.3 us at batch 8 and
200 cached tokens, `pad` 9.0; the short graphs were not kept.

    python benchmarks/kernels/bench_draft_step_plans.py --out DIR [--heads 16 --head-size 64]

Writes DIR/draft_step_plans.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))

import bench_paged_attention as bpa  # noqa: E402

from vllm_bass.kernels.paged_attention import choose_plan, num_sms  # noqa: E402


def pad_context_reach(batch: int, heads: int, kv_heads: int, head_size: int,
                      query_len: int, max_seq_len: int, sms: int, step: int = 16) -> int:
    """The longest context (a multiple of `step`) up to which choose_plan picks PAD, where
    it SPLITs at `max_seq_len`; 0 where PAD serves max_seq_len already."""
    def strategy(seq_len):
        return choose_plan(batch, heads, kv_heads, head_size, query_len, seq_len, sms).strategy

    if strategy(max_seq_len) == "pad":
        return 0
    reach = 0
    for seq_len in range(step, max_seq_len, step):
        if strategy(seq_len) != "pad":
            break
        reach = seq_len
    return reach


BATCHES = [1, 2, 4, 8, 16]
CONTEXTS = [128, 200, 256, 320, 384, 512, 768, 1024, 2048]
MAX_MODEL_LEN = 2048  # vs_vllm.py's engines at 128-token prompts


def measure(args) -> dict:
    bpa.HEADS, bpa.KV_HEADS, bpa.HEAD_SIZE = args.heads, args.kv_heads or args.heads, args.head_size
    heads, kv_heads, head_size = bpa.HEADS, bpa.KV_HEADS, bpa.HEAD_SIZE
    sms = num_sms()
    fa3, fa3_sched, fa3_err = bpa.get_fa3()
    batches = [int(b) for b in args.batches.split(",")]
    contexts = [int(c) for c in args.contexts.split(",")]
    cache = bpa.make_cache(batches, contexts + [args.max_model_len])
    rng = random.Random(0)
    rows = []
    for B in batches:
        reach = pad_context_reach(B, heads, kv_heads, head_size, 1, args.max_model_len, sms)
        long_plan = choose_plan(B, heads, kv_heads, head_size, 1, args.max_model_len, sms)
        for ctx in contexts:
            # seq_len = ctx + 1 (the step's own token is in the cache)
            c = bpa.Case(cache, B, [1] * B, ctx, rng.randint(0, 1 << 30))
            # the short graph's plan (planned for the reach), or one PAD launch
            pad_plan = (choose_plan(B, heads, kv_heads, head_size, 1, reach, sms) if reach
                        else choose_plan(B, heads, kv_heads, head_size, 1, c.max_s, sms,
                                         strategy="pad"))
            t = {"long": bpa.bench_graph(c.bass_fns(long_plan)),
                 "pad": bpa.bench_graph(c.bass_fns(pad_plan))}
            ref = c.out0()
            t["engine"] = t["pad"] if reach and c.max_s <= reach else t["long"]
            if fa3 is not None:
                t["fa3"] = bpa.bench_graph(c.fa3_fns(fa3, fa3_sched))
                err = ((ref - c.out0()).norm() / c.out0().norm()).item()
            else:
                err = None
            rows.append(dict(batch=B, context=ctx, reach=reach,
                             long_plan=[long_plan.strategy, long_plan.num_splits],
                             graph_us=t, rel_err_vs_fa3=err))
            print(f"B {B:3d} ctx {ctx:5d} reach {reach:4d} long {long_plan.strategy}x"
                  f"{long_plan.num_splits} {t['long']:6.1f} pad {t['pad']:6.1f} engine "
                  f"{t['engine']:6.1f} fa3 {t.get('fa3', 0):6.1f} us", flush=True)
            del c
    return dict(device=torch.cuda.get_device_name(), sms=sms, fa3_error=fa3_err,
                shape=dict(heads=heads, kv_heads=kv_heads, head_size=head_size,
                           page=bpa.PAGE, dtype=str(bpa.DTYPE)),
                max_model_len=args.max_model_len, rows=rows)


def report(result: dict) -> str:
    s = result["shape"]
    lines = [f"# Draft-step attention by plan ({result['device']}, {s['heads']}/{s['kv_heads']} "
             f"heads of {s['head_size']}, one query token, graph-timed us, max_model_len "
             f"{result['max_model_len']})", "",
             "| batch | context | reach | long plan | long | pad | engine | FA3 | engine / FA3 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        t = r["graph_us"]
        fa3 = t.get("fa3")
        fa3_cells = ("|", "|") if fa3 is None else (f"{fa3:.1f} |", f"{fa3 / t['engine']:.2f}x |")
        lines.append(f"| {r['batch']} | {r['context']} | {r['reach']} | "
                     f"{r['long_plan'][0]} x{r['long_plan'][1]} | {t['long']:.1f} | "
                     f"{t['pad']:.1f} | {t['engine']:.1f} | {fa3_cells[0]} {fa3_cells[1]}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=0, help="0: as --heads")
    ap.add_argument("--head-size", type=int, default=64)
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--contexts", default=",".join(map(str, CONTEXTS)))
    ap.add_argument("--max-model-len", type=int, default=MAX_MODEL_LEN)
    ap.add_argument("--tag", default="draft_step_plans")
    args = ap.parse_args()
    result = measure(args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{args.tag}.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, f"{args.tag}.md"), "w") as f:
        f.write(report(result))


if __name__ == "__main__":
    main()
