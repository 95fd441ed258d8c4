"""Captured-graph attention plans on verification steps: what the draft-length bound costs.

A full CUDA graph of a ragged verification holds one attention launch per layer, planned at
capture for the fewest requests its tokens may hold (requests of 1 + bound tokens) and
contexts up to max_model_len (`BassAttentionMetadataBuilder.build_for_cudagraph_capture`;
since session 23 it caps the bound at `PLANNED_DRAFTS`, which this measurement motivated).
This times, graph-captured on a Llama-2-7B layer (32 heads, head size 128, bf16), the
batches that then replay (B requests of q tokens, contexts ctx) under the plan each bound
gets, SPLIT plans also on PAD's wide tiles, and the plan made for the very batch replayed,
against FA3; each layer first writes its new tokens' K/V into the cache (ours: our
kernel, overlapped with the attention through PDL on Hopper, also timed without; FA3:
vLLM's `reshape_and_cache_flash`), as the engine's layers do.

    python benchmarks/kernels/bench_captured_plans.py --out DIR
    # session 55: the short-query graphs (VLLM_BASS_SHORT_QUERY_GRAPHS): a default engine's
    # plan (bound 8) against the plan for one-draft requests (bound 1), each on both kinds
    # of batch, at the benchmark's max_model_len
    python benchmarks/kernels/bench_captured_plans.py --out DIR --bounds 1,8 --all-bounds \
        --max-model-len 2048 --shapes 16x2,32x2,48x2,8x8,12x5,4x9 --contexts 256,1024

    # session 56: which PAD tiles launches of 2-3 programs an SM want (9-12 requests of a
    # 7B layer on 132 SMs), beside the plans the planner makes
    python benchmarks/kernels/bench_captured_plans.py --out DIR --pad-tiles --bounds 8 \
        --max-model-len 2048 --shapes 8x8,9x5,10x2,10x5,11x3,12x1,12x2,12x5,12x9,16x2 \
        --contexts 256,1024,2048

Writes DIR/captured_plans.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))

from bench_paged_attention import (  # noqa: E402
    DTYPE,
    HEAD_SIZE,
    HEADS,
    KV_HEADS,
    PAGE,
    Case,
    bench_graph,
    get_fa3,
    make_cache,
)

from vllm_bass.kernels import paged_attention_common  # noqa: E402
from vllm_bass.kernels.paged_attention import choose_plan, num_sms, paged_attention  # noqa: E402
from vllm_bass.kernels.reshape_and_cache import reshape_and_cache  # noqa: E402

MAX_MODEL_LEN = 4352
BOUNDS = (2, 8)  # the engine plans for at most PLANNED_DRAFTS (8) drafts
# (requests, tokens each); batch 1-4: where a lone request's short context meets a graph
# planned for SPLIT (session 27)
SHAPES = [(1, 5), (1, 9), (2, 9), (4, 5), (8, 3), (8, 5), (32, 2), (32, 3), (32, 5)]
CONTEXTS = [200, 1000, 4000]


def captured_plan(bound: int, tokens: int, num_reqs: int, sms: int):
    """The plan `build_for_cudagraph_capture` makes for a graph of this many tokens."""
    query_len = 1 + bound
    expected = min(num_reqs, -(-tokens // query_len))
    return choose_plan(expected, HEADS, KV_HEADS, HEAD_SIZE, query_len, MAX_MODEL_LEN, sms,
                       any_batch=True)


def time_plan(case: Case, kv, name: str, plan, times: dict, plans: dict, ref, pdl,
              **extra):
    """Graph-time `plan` on `case` into `times[name]`, its shape and its output's largest
    difference from `ref` (the shape's first output) into `plans[name]`; returns `ref`."""
    times[name] = timed(graph_fns(case, plan, kv), pdl)
    out = case.out0()
    ref = out if ref is None else ref
    plans[name] = dict(strategy=plan.strategy, splits=plan.num_splits,
                       block_m=plan.tiles.block_m, block_n=plan.tiles.block_n, **extra,
                       min_split_keys=plan.min_split_keys,
                       max_abs_diff=(out - ref).abs().max().item())
    return ref


def pad_tile_variants(batch: int, query_len: int) -> dict:
    """`--pad-tiles`: PAD plans for any batch of this shape on each tile family."""
    from vllm_bass.kernels.paged_attention import AttnPlan
    from vllm_bass.kernels.paged_attention_common import pick_tiles

    narrow = pick_tiles(HEADS, KV_HEADS, HEAD_SIZE, query_len)
    wide = pick_tiles(HEADS, KV_HEADS, HEAD_SIZE, query_len, wide=True)
    return {"pad_narrow": AttnPlan("pad", 1, narrow, True),
            "pad_narrow2": AttnPlan("pad", 1, dataclasses.replace(narrow, num_stages=2), True),
            "pad_wide": AttnPlan("pad", 1, wide, True)}


def apply_args(args) -> None:
    """The command line's bounds, shapes, contexts and max_model_len, in place of the
    module's defaults (the functions read them from here)."""
    global BOUNDS, SHAPES, CONTEXTS, MAX_MODEL_LEN
    BOUNDS = tuple(int(b) for b in args.bounds.split(","))
    SHAPES = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    CONTEXTS = [int(c) for c in args.contexts.split(",")]
    MAX_MODEL_LEN = args.max_model_len


def new_kv(case: Case):
    """The step's new keys and values and, per input set, the cache slots of their positions
    (what the layer writes before it attends), or None (--no-cache-write)."""
    g = torch.Generator(device="cuda").manual_seed(case.ctx + case.B)
    key = torch.randn(case.T, KV_HEADS, HEAD_SIZE, dtype=DTYPE, device="cuda", generator=g)
    value = torch.randn_like(key)
    slots = []
    for bt in case.block_tables:
        rows = []
        for s, q in enumerate(case.qlens):
            pos = torch.arange(case.ctx, case.ctx + q, device="cuda")
            rows.append(bt[s, pos // PAGE].long() * PAGE + pos % PAGE)
        slots.append(torch.cat(rows))
    return key, value, slots


def graph_fns(case: Case, plan, kv=None):
    ws = torch.empty(max(1, plan.workspace_numel(case.T, HEADS)), dtype=torch.float32,
                     device="cuda")

    def step(q, o, bt, slot):
        if kv is not None:
            reshape_and_cache(kv[0], kv[1], case.k_cache, case.v_cache, slot)
        paged_attention(q, case.k_cache, case.v_cache, o, case.cu, case.seq_lens, bt,
                        case.scale, case.max_q, MAX_MODEL_LEN, plan=plan, workspace=ws,
                        check=False)

    slots = kv[2] if kv is not None else [None] * len(case.qs)
    return [(lambda q=q, o=o, bt=bt, sl=sl: step(q, o, bt, sl))
            for q, o, bt, sl in zip(case.qs, case.outs, case.block_tables, slots)]


def fa3_graph_fns(case: Case, fa3, fa3_sched, kv=None):
    """FA3 as vLLM's FLASH_ATTN backend runs it: vLLM's cache write, then the kernel."""
    attn = case.fa3_fns(fa3, fa3_sched)
    if kv is None:
        return attn
    from vllm import _custom_ops as ops

    one = torch.ones((), dtype=torch.float32, device="cuda")

    def step(f, slot):
        ops.reshape_and_cache_flash(kv[0], kv[1], case.k_cache, case.v_cache, slot, "auto",
                                    one, one)
        f()

    return [(lambda f=f, sl=sl: step(f, sl)) for f, sl in zip(attn, kv[2])]


def timed(fns, pdl: bool | None) -> float:
    """Graph-timed, with PDL forced on / off (None: the default)."""
    paged_attention_common.PDL_OVERRIDE = pdl
    try:
        return bench_graph(fns)
    finally:
        paged_attention_common.PDL_OVERRIDE = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    ap.add_argument("--no-cache-write", action="store_true",
                    help="time the attention alone (before session 28: no KV-cache write)")
    ap.add_argument("--bounds", default=",".join(map(str, BOUNDS)),
                    help="draft bounds whose captured plans to time (a plan for 1 + bound "
                         "tokens a request)")
    ap.add_argument("--all-bounds", action="store_true",
                    help="time every bound's plan on every shape, also on queries longer "
                         "than it was planned for (a short-query graph meets them)")
    ap.add_argument("--max-model-len", type=int, default=MAX_MODEL_LEN)
    ap.add_argument("--shapes", default=",".join(f"{b}x{q}" for b, q in SHAPES),
                    help="BATCHxQUERY_LEN, comma separated")
    ap.add_argument("--contexts", default=",".join(map(str, CONTEXTS)))
    ap.add_argument("--pad-tiles", action="store_true",
                    help="also time each shape's batch as PAD on the narrow tiles (64 keys, "
                         "4 warps; 3 and 2 stages) and on the wide ones (128 keys, 8 warps): "
                         "which tiles a launch of 2-3 programs an SM wants (session 56: 12 "
                         "requests of 5 tokens ran 1.20-1.31x faster on the narrow tiles "
                         "the planner does not give them)")
    args = ap.parse_args()
    apply_args(args)
    sms = num_sms(torch.device("cuda"))
    fa3, fa3_sched, fa3_err = get_fa3()
    cache = make_cache([b for b, _ in SHAPES], CONTEXTS)
    rows = []
    for ctx in CONTEXTS:
        for batch, q in SHAPES:
            case = Case(cache, batch, [q] * batch, ctx, rng_seed=ctx + batch + q)
            times, plans, ref = {}, {}, None
            kv = None if args.no_cache_write else new_kv(case)
            for bound in BOUNDS:
                if bound + 1 < q and not args.all_bounds:
                    continue
                # the graph's requests as its key holds them (any count up to its tokens):
                # a bound at least the queries' plans as before, a shorter one for T / (1 +
                # bound) requests, as a short-query graph of this size is planned
                plan = captured_plan(bound, case.T, case.T, sms)
                variants = {f"bound{bound}": plan}
                if plan.strategy == "split":
                    # the split plan on the wide tiles PAD uses (a replay that meets many
                    # requests runs each sequence whole, as PAD does)
                    wide = choose_plan(batch, HEADS, KV_HEADS, HEAD_SIZE, q, MAX_MODEL_LEN, sms,
                                       strategy="pad", any_batch=True).tiles
                    variants[f"bound{bound}_wide"] = dataclasses.replace(plan, tiles=wide)
                if bound == BOUNDS[-1]:
                    # what a plan made for this very batch does in a graph (the bound a
                    # per-step plan would reach)
                    variants["exact"] = choose_plan(batch, HEADS, KV_HEADS, HEAD_SIZE, q,
                                                    MAX_MODEL_LEN, sms, any_batch=True)
                    # the same plan with the attention waiting for the cache write to end
                    # (and SPLIT's reduction for the splits) instead of overlapping it
                    variants[f"bound{bound}_nopdl"] = plan
                for name, p in variants.items():
                    ref = time_plan(case, kv, name, p, times, plans, ref,
                                    False if name.endswith("_nopdl") else None)
            if args.pad_tiles:
                for name, p in pad_tile_variants(batch, q).items():
                    ref = time_plan(case, kv, name, p, times, plans, ref, None,
                                    stages=p.tiles.num_stages)
            if fa3 is not None:
                times["fa3"] = bench_graph(fa3_graph_fns(case, fa3, fa3_sched, kv))
            rows.append(dict(context=ctx, batch=batch, query_len=q, graph_us=times, plans=plans))
            print(ctx, batch, q, {k: round(v, 1) for k, v in times.items()}, flush=True)
    os.makedirs(args.out, exist_ok=True)
    meta = dict(gpu=torch.cuda.get_device_name(0), sms=sms, max_model_len=MAX_MODEL_LEN,
                heads=HEADS, kv_heads=KV_HEADS, head_size=HEAD_SIZE, dtype=str(DTYPE),
                fa3_error=fa3_err, cache_write=not args.no_cache_write,
                pdl=paged_attention_common.pdl_enabled(torch.device("cuda")))
    with open(os.path.join(args.out, "captured_plans.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    names = sorted({k for r in rows for k in r["graph_us"]})
    lines = [f"# Captured-graph attention plans, {meta['gpu']} (us per layer, graph-timed)", "",
             "| context | batch | q | " + " | ".join(names) + " |",
             "|---" * (3 + len(names)) + "|"]
    for r in rows:
        cells = [f"{r['graph_us'][n]:.1f}" if n in r["graph_us"] else "—" for n in names]
        lines.append(f"| {r['context']} | {r['batch']} | {r['query_len']} | "
                     + " | ".join(cells) + " |")
    with open(os.path.join(args.out, "captured_plans.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
