"""Paged attention on BASS verification shapes: ours vs vLLM's FA3 and TRITON_ATTN.

Llama-2-7B layer: 32 query heads, 32 KV heads, head size 128, bf16, block 16.
Batch 1..64; per-sequence query length 2..9 (uniform 2, 5, 9, and mixed random
in [2, 9]); context (cached tokens before the new ones) 256..8192.

Two timings per kernel, both medians of CUDA-event measurements:
* graph: the GPU time. K calls over K disjoint input sets (block tables into
  disjoint parts of the cache, own q/out) captured in one CUDA graph, replayed,
  time / K. K is chosen so the K sets overflow L2 several times (in a model
  each layer reads another layer's cache, so L2 is cold).
* eager: triton.testing.do_bench (L2 flushed before every run), launches from
  Python as vLLM's piecewise-graph mode does for attention; includes CPU
  launch overhead wherever it exceeds the GPU time of the flush + kernel.
Per-step work (our PAD/SPLIT plan and workspace, FA3's scheduler metadata) is
done outside the timed region, as vLLM does it once per step in the builder.
Bandwidth: bytes of K/V read (every cached + new token of every sequence) +
q read + out written, over the median time, against a measured device copy
(bytes read + written).

    python benchmarks/kernels/bench_paged_attention.py --out DIR [--quick | --tune]

Writes DIR/paged_attention_bench.{json,md} and .png (if matplotlib exists).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import sys
import time

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from vllm_bass.kernels.paged_attention import choose_plan, num_sms, paged_attention  # noqa: E402
from vllm_bass.kernels.paged_attention_split import split_geometry  # noqa: E402

HEADS, KV_HEADS, HEAD_SIZE, PAGE, DTYPE = 32, 32, 128, 16, torch.bfloat16
BATCHES = [1, 4, 8, 16, 32, 64]
Q_MODES = ["2", "5", "9", "mixed"]
CONTEXTS = [256, 1024, 4096, 8192]
DEV = os.environ.get("BENCH_DEVICE", "cuda")  # "cpu" only for a smoke run under TRITON_INTERPRET


def bench(fn, rep=50):
    return triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median") * 1e3  # us


def bench_graph(fns, reps=25):
    """Median GPU time (us) of one call: all of ``fns`` (one per input set)
    captured in one CUDA graph, replayed ``reps`` times."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fns:
            f()
    g.replay()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    t = statistics.median(a.elapsed_time(b) for a, b in ev) * 1e3 / len(fns)
    del g
    return t


def cpu_us_per_call(fn, n=200):
    """Wall time per call of n back-to-back calls (no sync in between):
    max(CPU launch cost, GPU time)."""
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def copy_bandwidth():
    n = 1 << 30  # 2 GiB of bf16
    x = torch.randn(n, dtype=DTYPE, device=DEV)
    y = torch.empty_like(x)
    t = triton.testing.do_bench(lambda: y.copy_(x), warmup=20, rep=200, return_mode="median") * 1e-3
    return 2 * n * 2 / t / 1e9  # GB/s, read + write


def get_fa3():
    try:
        from vllm.vllm_flash_attn import flash_attn_varlen_func
        from vllm.vllm_flash_attn.flash_attn_interface import get_scheduler_metadata, is_fa_version_supported

        if not is_fa_version_supported(3):
            return None, None, "FA3 not supported on this device"
        return flash_attn_varlen_func, get_scheduler_metadata, None
    except Exception as e:  # noqa: BLE001
        return None, None, f"{type(e).__name__}: {e}"


def get_triton_attn():
    try:
        from vllm.v1.attention.ops.triton_unified_attention import unified_attention

        return unified_attention, None
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {e}"


class Case:
    """One shape: K input sets over disjoint blocks of the shared cache."""

    def __init__(self, cache, B, qlens, ctx, rng_seed):
        self.B, self.qlens, self.ctx = B, qlens, ctx
        k_cache, v_cache, num_blocks = cache
        self.k_cache, self.v_cache = k_cache, v_cache
        self.seq_lens_l = [ctx + q for q in qlens]
        self.T = sum(qlens)
        self.max_q, self.max_s = max(qlens), max(self.seq_lens_l)
        nblk = triton.cdiv(self.max_s, PAGE)
        elem = 2
        self.bytes = sum(self.seq_lens_l) * KV_HEADS * HEAD_SIZE * 2 * elem + 2 * self.T * HEADS * HEAD_SIZE * elem
        l2 = torch.cuda.get_device_properties(0).L2_cache_size if DEV == "cuda" else 1 << 20
        k = min(32, max(1, triton.cdiv(4 * l2, self.bytes)), num_blocks // (B * nblk))
        g = torch.Generator(device=DEV).manual_seed(rng_seed)
        perm = torch.randperm(num_blocks, device=DEV, generator=g)[: k * B * nblk]
        self.block_tables = [t.view(B, nblk).int() for t in perm.split(B * nblk)]
        self.cu = torch.tensor([0] + torch.tensor(qlens).cumsum(0).tolist(), dtype=torch.int32, device=DEV)
        self.seq_lens = torch.tensor(self.seq_lens_l, dtype=torch.int32, device=DEV)
        self.qs = [torch.randn(self.T, HEADS, HEAD_SIZE, dtype=DTYPE, device=DEV, generator=g) for _ in range(k)]
        self.outs = [torch.empty_like(q) for q in self.qs]
        self.scale = HEAD_SIZE**-0.5

    def bass_fns(self, plan):
        ws = torch.empty(max(1, plan.workspace_numel(self.T, HEADS)), dtype=torch.float32, device=DEV)
        return [
            (lambda q=q, o=o, bt=bt: paged_attention(
                q, self.k_cache, self.v_cache, o, self.cu, self.seq_lens, bt, self.scale,
                self.max_q, self.max_s, plan=plan, workspace=ws, check=False))
            for q, o, bt in zip(self.qs, self.outs, self.block_tables)
        ]

    def fa3_fns(self, fa3, fa3_sched):
        sched = fa3_sched(self.B, self.max_q, self.max_s, HEADS, KV_HEADS, HEAD_SIZE, self.seq_lens,
                          qkv_dtype=DTYPE, cu_seqlens_q=self.cu, page_size=PAGE, causal=True, num_splits=0)
        return [
            (lambda q=q, o=o, bt=bt: fa3(
                q=q, k=self.k_cache, v=self.v_cache, out=o, cu_seqlens_q=self.cu, max_seqlen_q=self.max_q,
                seqused_k=self.seq_lens, max_seqlen_k=self.max_s, softmax_scale=self.scale, causal=True,
                block_table=bt, scheduler_metadata=sched, fa_version=3))
            for q, o, bt in zip(self.qs, self.outs, self.block_tables)
        ]

    def triton_fns(self, tri):
        desc = torch.ones(1, dtype=torch.float32, device=DEV).expand(self.B, KV_HEADS)
        segs, thr = 16, max(1, 128 // KV_HEADS)  # as TritonAttentionMetadataBuilder
        seg_o = torch.empty(thr, HEADS, segs, HEAD_SIZE, dtype=torch.float32, device=DEV)
        seg_m = torch.empty(thr, HEADS, segs, dtype=torch.float32, device=DEV)
        seg_e = torch.empty(thr, HEADS, segs, dtype=torch.float32, device=DEV)
        return [
            (lambda q=q, o=o, bt=bt: tri(
                q=q, k=self.k_cache, v=self.v_cache, out=o, cu_seqlens_q=self.cu, max_seqlen_q=self.max_q,
                seqused_k=self.seq_lens, max_seqlen_k=self.max_s, softmax_scale=self.scale, causal=True,
                window_size=(-1, -1), block_table=bt, softcap=0, q_descale=None, k_descale=desc,
                v_descale=desc, seq_threshold_3D=thr, num_par_softmax_segments=segs,
                softmax_segm_output=seg_o, softmax_segm_max=seg_m, softmax_segm_expsum=seg_e))
            for q, o, bt in zip(self.qs, self.outs, self.block_tables)
        ]

    def out0(self):
        return self.outs[0].float().clone()


def make_cache(batches, contexts):
    max_blocks_per_seq = triton.cdiv(max(contexts) + 9, PAGE)
    num_blocks = max(batches) * max_blocks_per_seq + 64
    phys = torch.empty(num_blocks, PAGE, KV_HEADS, 2 * HEAD_SIZE, dtype=DTYPE, device=DEV)
    for i in range(0, num_blocks, 4096):
        phys[i : i + 4096].normal_()
    kv_cache = phys.permute(0, 2, 1, 3)  # vLLM logical (blocks, KVH, P, 2D), NHD physical
    k_cache, v_cache = kv_cache.transpose(1, 2).split(HEAD_SIZE, dim=-1)
    return k_cache, v_cache, num_blocks


def qlens_for(qm, B, rng):
    return [rng.randint(2, 9) for _ in range(B)] if qm == "mixed" else [int(qm)] * B


TUNE_CONTEXTS, TUNE_BATCHES = [1024, 4096, 8192], [1, 4, 8, 16, 64]
PAD_VARIANTS = [(64, 4, 3), (64, 4, 4), (128, 8, 3), (64, 8, 3)]
SPLIT_VARIANTS = [(128, 8, 3), (64, 4, 3)]
SPLIT_COUNTS = (2, 3, 4, 6, 8, 12, 16, 24, 32)


def pad_variants(args) -> list[tuple[int, int, int]]:
    """--pad-variants "BN:WARPS:STAGES,..." (session 27's next step for batch 4 at 256 cached
    tokens: fewer stages, smaller key tiles), else PAD_VARIANTS."""
    if not getattr(args, "pad_variants", ""):
        return PAD_VARIANTS
    variants = []
    for item in args.pad_variants.split(","):
        try:
            bn, nw, ns = (int(x) for x in item.split(":"))
        except ValueError:
            raise SystemExit(f"--pad-variants: {item!r} is not BLOCK_N:WARPS:STAGES") from None
        variants.append((bn, nw, ns))
    return variants


def tune(args, sms, fa3, fa3_sched):
    """Graph-timed sweep: PAD with each tile variant, SPLIT counts x variants (splits of
    at least one key block), each in both program orders (sequence-major, head-major)."""
    contexts = [int(x) for x in args.tune_contexts.split(",")] if args.tune_contexts else TUNE_CONTEXTS
    batches = [int(x) for x in args.tune_batches.split(",")] if args.tune_batches else TUNE_BATCHES
    cache = make_cache(batches, contexts)
    rng = random.Random(0)
    rows = []
    for ctx in contexts:
        for B in batches:
            c = Case(cache, B, qlens_for(args.tune_q, B, rng), ctx, rng.randint(0, 1 << 30))
            base = choose_plan(B, HEADS, KV_HEADS, HEAD_SIZE, c.max_q, c.max_s, sms)
            t = {"auto": bench_graph(c.bass_fns(base))}
            if fa3 is not None:
                t["fa3"] = bench_graph(c.fa3_fns(fa3, fa3_sched))
            for order in (False, True):
                tag = "h" if order else "s"
                for bn, nw, ns in pad_variants(args):
                    tiles = dataclasses.replace(base.tiles, block_n=bn, num_warps=nw, num_stages=ns,
                                                head_fastest=order)
                    try:
                        t[f"pad_{bn}_{nw}_{ns}_{tag}"] = bench_graph(
                            c.bass_fns(type(base)("pad", 1, tiles)))
                    except Exception as exc:  # a variant past the SM's resources: skip it
                        print(f"pad_{bn}_{nw}_{ns}_{tag}: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:120] if str(exc) else ''}", flush=True)
                for bn, nw, ns in SPLIT_VARIANTS:
                    tiles = dataclasses.replace(base.tiles, block_n=bn, num_warps=nw, num_stages=ns,
                                                head_fastest=order)
                    for sp in SPLIT_COUNTS:
                        if sp * bn <= c.max_s and B * KV_HEADS * sp <= 16 * sms:
                            p = type(base)("split", split_geometry(c.max_s, sp, bn)[1], tiles)
                            t[f"split{sp}_{bn}_{nw}_{ns}_{tag}"] = bench_graph(c.bass_fns(p))
            best = min((v, k) for k, v in t.items() if k not in ("fa3",))
            row = dict(context=ctx, batch=B, K=len(c.qs), auto_plan=[base.strategy, base.num_splits],
                       graph_us=t, best=best[1])
            rows.append(row)
            top = " ".join(f"{k}={v:.1f}" for v, k in sorted((v, k) for k, v in t.items())[:6])
            print(f"ctx {ctx:5d} B {B:3d} auto {base.strategy}x{base.num_splits} {t['auto']:7.1f} "
                  f"fa3 {t.get('fa3', 0):7.1f} | {top}", flush=True)
            del c
    with open(os.path.join(args.out, args.tune_out), "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name() if DEV == "cuda" else DEV, sms=sms, rows=rows), f, indent=1)


PREFILL_QUERIES, PREFILL_CONTEXTS, PREFILL_BATCHES = [128, 512, 2048], [0, 1024], [1, 4, 16]


def prefill(args, sms, fa3, fa3_sched):
    """Prefill and chunked-prefill shapes (queries of 128-2048 tokens over 0 or 1024 cached
    ones), graph-timed, ours (the chooser's plan) vs FA3: the steps a verification kernel
    must not make slow when it is the engine's only attention."""
    rng = random.Random(0)
    cache = make_cache(PREFILL_BATCHES, [max(PREFILL_CONTEXTS) + max(PREFILL_QUERIES)])
    rows = []
    for ctx in PREFILL_CONTEXTS:
        for q in PREFILL_QUERIES:
            for B in PREFILL_BATCHES:
                c = Case(cache, B, [q] * B, ctx, rng.randint(0, 1 << 30))
                plan = choose_plan(B, HEADS, KV_HEADS, HEAD_SIZE, c.max_q, c.max_s, sms)
                t = {"bass": bench_graph(c.bass_fns(plan))}
                ours = c.out0()
                if fa3 is not None:
                    t["fa3"] = bench_graph(c.fa3_fns(fa3, fa3_sched))
                    err = ((ours - c.out0()).norm() / c.out0().norm()).item()
                else:
                    err = None
                row = dict(context=ctx, query_len=q, batch=B, plan=plan.strategy, graph_us=t,
                           rel_err_vs_fa3=err,
                           speedup_vs_fa3=t["fa3"] / t["bass"] if "fa3" in t else None)
                rows.append(row)
                print(f"ctx {ctx:5d} q {q:5d} B {B:3d} {plan.strategy} bass {t['bass']:9.1f} us "
                      f"fa3 {t.get('fa3', 0):9.1f} us  x{row['speedup_vs_fa3'] or 0:.2f}",
                      flush=True)
                del c
    with open(os.path.join(args.out, "paged_attention_prefill.json"), "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name() if DEV == "cuda" else DEV, sms=sms,
                       shape=dict(heads=HEADS, kv_heads=KV_HEADS, head_size=HEAD_SIZE,
                                  page=PAGE, dtype=str(DTYPE)), rows=rows), f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    ap.add_argument("--quick", action="store_true", help="a few configs only")
    ap.add_argument("--tune", action="store_true", help="tile / split sweep on a subset (graph timing)")
    ap.add_argument("--tune-contexts", default="", help="--tune: contexts (comma-separated)")
    ap.add_argument("--tune-batches", default="", help="--tune: batches (comma-separated)")
    ap.add_argument("--tune-out", default="paged_attention_tune.json")
    ap.add_argument("--tune-q", default="5",
                    help="--tune: new tokens per sequence (a number, or 'mixed': 2-9)")
    ap.add_argument("--pad-variants", default="",
                    help="--tune: PAD tiles as BLOCK_N:WARPS:STAGES,... (default: PAD_VARIANTS)")
    ap.add_argument("--prefill", action="store_true",
                    help="prefill / chunked-prefill shapes only (queries of 128-2048 tokens)")
    ap.add_argument("--no-eager", action="store_true", help="graph timing only")
    ap.add_argument("--any-batch", action="store_true",
                    help="also time the same plan with the any-batch grid (what a captured "
                         "CUDA graph of a ragged batch launches: binary search per program)")
    ap.add_argument("--order", choices=["auto", "seq", "head"], default="auto",
                    help="force the program order of our kernels (default: the chooser's)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    rng = random.Random(0)

    dev = torch.cuda.get_device_name() if DEV == "cuda" else DEV
    sms = num_sms(torch.device("cuda") if DEV == "cuda" else None)
    bw = copy_bandwidth()
    print(f"device {dev}, {sms} SMs, copy bandwidth {bw:.0f} GB/s (read+write)", flush=True)
    fa3, fa3_sched, fa3_err = get_fa3()
    tri, tri_err = get_triton_attn()
    if fa3_err:
        print("FA3 unavailable:", fa3_err)
    if tri_err:
        print("TRITON_ATTN unavailable:", tri_err)
    if args.tune:
        return tune(args, sms, fa3, fa3_sched)
    if args.prefill:
        return prefill(args, sms, fa3, fa3_sched)

    batches, qmodes, contexts = BATCHES, Q_MODES, CONTEXTS
    if args.quick:
        batches, qmodes, contexts = [1, 16, 64], ["5", "mixed"], [256, 8192]
    cache = make_cache(batches, contexts)

    rows = []
    t_start = time.time()
    for ctx in contexts:
        for qm in qmodes:
            for B in batches:
                c = Case(cache, B, qlens_for(qm, B, rng), ctx, rng.randint(0, 1 << 30))
                plan = choose_plan(B, HEADS, KV_HEADS, HEAD_SIZE, c.max_q, c.max_s, sms)
                if args.order != "auto":
                    plan = dataclasses.replace(plan, tiles=dataclasses.replace(
                        plan.tiles, head_fastest=args.order == "head"))
                row = dict(batch=B, q_mode=qm, context=ctx, tokens=c.T, max_query_len=c.max_q, bytes=c.bytes,
                           input_sets=len(c.qs), plan=dict(strategy=plan.strategy, num_splits=plan.num_splits,
                                                        head_fastest=plan.tiles.head_fastest))
                g, e = {}, {}
                fns = {"bass": c.bass_fns(plan)}
                if args.any_batch:
                    fns["bass_any_batch"] = c.bass_fns(dataclasses.replace(plan, any_batch=True))
                if fa3 is not None:
                    fns["fa3"] = c.fa3_fns(fa3, fa3_sched)
                if tri is not None:
                    fns["triton_attn"] = c.triton_fns(tri)
                outs = {}
                for name, f in fns.items():
                    try:
                        g[name] = bench_graph(f)
                        if not args.no_eager:
                            e[name] = bench(f[0])
                        f[0]()
                        outs[name] = c.out0()
                    except Exception as ex:  # noqa: BLE001
                        row[f"{name}_error"] = f"{type(ex).__name__}: {ex}"[:300]
                for name in ("fa3", "triton_attn"):
                    if name in outs and "bass" in outs:
                        row[f"rel_err_vs_{name}"] = ((outs["bass"] - outs[name]).norm() / outs[name].norm()).item()
                row["graph_us"], row["eager_us"] = g, e
                if "bass_any_batch" in g and "bass_any_batch" in outs:
                    row["any_batch_time_ratio"] = g["bass_any_batch"] / g["bass"]
                    row["rel_err_any_batch"] = ((outs["bass_any_batch"] - outs["bass"]).norm()
                                                / outs["bass"].norm()).item()
                row["bass_gbps"] = c.bytes / g["bass"] / 1e3
                row["bass_pct_copy_bw"] = 100 * row["bass_gbps"] / bw
                for name in ("fa3", "triton_attn"):
                    if name in g:
                        row[f"{name}_gbps"] = c.bytes / g[name] / 1e3
                        row[f"speedup_vs_{name}"] = g[name] / g["bass"]
                        if name in e and "bass" in e:
                            row[f"eager_speedup_vs_{name}"] = e[name] / e["bass"]
                rows.append(row)
                print(
                    f"ctx {ctx:5d} q {qm:>5s} B {B:3d} K {len(c.qs):2d} {plan.strategy:5s}x{plan.num_splits:<2d} graph "
                    + " ".join(f"{k} {v:7.1f}" for k, v in g.items()) + " | eager "
                    + " ".join(f"{k} {v:7.1f}" for k, v in e.items())
                    + f" | {row['bass_gbps']:5.0f} GB/s {row['bass_pct_copy_bw']:5.1f}%"
                    + (f" x{row['speedup_vs_fa3']:.2f} FA3" if "speedup_vs_fa3" in row else "")
                    + f" err {row.get('rel_err_vs_fa3', float('nan')):.1e}",
                    flush=True,
                )
                del c, fns, outs

    summary = summarize(rows, bw)
    result = dict(device=dev, sms=sms, copy_bandwidth_gbps=bw, torch=torch.__version__, triton=triton.__version__,
                  shape=dict(heads=HEADS, kv_heads=KV_HEADS, head_size=HEAD_SIZE, page=PAGE, dtype=str(DTYPE)),
                  timing="graph: CUDA-graph replay of K calls over disjoint input sets (L2 cold), median / K; "
                         "eager: triton.testing.do_bench median, L2 flushed before each run",
                  fa3_error=fa3_err, triton_attn_error=tri_err, wall_s=time.time() - t_start,
                  summary=summary, rows=rows)
    with open(os.path.join(args.out, "paged_attention_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = markdown(result)
    with open(os.path.join(args.out, "paged_attention_bench.md"), "w") as f:
        f.write(md)
    print(md)
    plot(result, os.path.join(args.out, "paged_attention_bench.png"))


def summarize(rows, bw):
    s = {}
    for key, label in (("speedup_vs_fa3", "fa3"), ("eager_speedup_vs_fa3", "fa3_eager"),
                       ("speedup_vs_triton_attn", "triton_attn"), ("eager_speedup_vs_triton_attn", "triton_attn_eager")):
        sp = [r[key] for r in rows if key in r]
        if sp:
            s[f"median_speedup_vs_{label}"] = statistics.median(sp)
            s[f"geomean_speedup_vs_{label}"] = math.exp(statistics.mean(math.log(x) for x in sp))
            s[f"min_speedup_vs_{label}"] = min(sp)
            s[f"configs_at_least_{label}"] = f"{sum(x >= 1.0 for x in sp)}/{len(sp)}"
    for ctx in sorted({r["context"] for r in rows}):
        pct = [r["bass_pct_copy_bw"] for r in rows if r["context"] == ctx]
        s[f"ctx{ctx}_median_pct_copy_bw"] = statistics.median(pct)
        s[f"ctx{ctx}_max_pct_copy_bw"] = max(pct)
        big = [r["bass_pct_copy_bw"] for r in rows if r["context"] == ctx and r["batch"] >= 16]
        if big:
            s[f"ctx{ctx}_batch16plus_median_pct_copy_bw"] = statistics.median(big)
        f3 = [100 * r["fa3_gbps"] / bw for r in rows if r["context"] == ctx and "fa3_gbps" in r]
        if f3:
            s[f"ctx{ctx}_fa3_median_pct_copy_bw"] = statistics.median(f3)
    ab = [r["any_batch_time_ratio"] for r in rows if "any_batch_time_ratio" in r]
    if ab:  # the any-batch grid's time over the direct grid's (same plan)
        s["any_batch_time_ratio_median"] = statistics.median(ab)
        s["any_batch_time_ratio_max"] = max(ab)
        s["any_batch_max_rel_err"] = max(r["rel_err_any_batch"] for r in rows
                                         if "rel_err_any_batch" in r)
    errs = [r["rel_err_vs_fa3"] for r in rows if "rel_err_vs_fa3" in r]
    if errs:
        s["max_rel_err_vs_fa3"] = max(errs)
    return s


def markdown(res):
    s = res["summary"]
    nan = float("nan")
    out = [
        f"# Paged attention, BASS verification shapes ({res['device']})",
        "",
        f"Llama-2-7B layer: {HEADS} heads / {KV_HEADS} KV heads, head {HEAD_SIZE}, bf16, block {PAGE}. "
        f"Timing: {res['timing']}. Copy bandwidth (read+write) {res['copy_bandwidth_gbps']:.0f} GB/s. "
        f"torch {res['torch']}, triton {res['triton']}. Speedup = their time / our time (>1: we are faster).",
        "",
        "## Summary",
        "",
    ] + [f"- {k}: {v:.3g}" if isinstance(v, float) else f"- {k}: {v}" for k, v in s.items()] + [
        "",
        "| ctx | q | batch | plan | bass us | FA3 us | TRITON us | x FA3 | x TRITON | bass GB/s | % copy BW "
        "| eager bass us | eager FA3 us | eager x FA3 |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in res["rows"]:
        g, e = r["graph_us"], r.get("eager_us", {})
        out.append(
            f"| {r['context']} | {r['q_mode']} | {r['batch']} | {r['plan']['strategy']}x{r['plan']['num_splits']} "
            f"| {g['bass']:.1f} | {g.get('fa3', nan):.1f} | {g.get('triton_attn', nan):.1f} "
            f"| {r.get('speedup_vs_fa3', nan):.2f} | {r.get('speedup_vs_triton_attn', nan):.2f} "
            f"| {r['bass_gbps']:.0f} | {r['bass_pct_copy_bw']:.1f} "
            f"| {e.get('bass', nan):.1f} | {e.get('fa3', nan):.1f} | {r.get('eager_speedup_vs_fa3', nan):.2f} |"
        )
    return "\n".join(out) + "\n"


def plot(res, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no PNG")
        return
    ctxs = sorted({r["context"] for r in res["rows"]})
    fig, axes = plt.subplots(1, len(ctxs), figsize=(4.5 * len(ctxs), 4), squeeze=False)
    for ax, ctx in zip(axes[0], ctxs):
        for qm, style in (("mixed", "-"), ("9", "--")):
            rs = [r for r in res["rows"] if r["context"] == ctx and r["q_mode"] == qm]
            if not rs:
                continue
            bs = [r["batch"] for r in rs]
            for key, color in (("bass", "C0"), ("fa3", "C1"), ("triton_attn", "C2")):
                ys = [r["graph_us"].get(key, float("nan")) for r in rs]
                ax.plot(bs, ys, style, color=color, marker="o", ms=3, label=f"{key} q={qm}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"context {ctx}")
        ax.set_xlabel("batch")
        ax.set_ylabel("us (median, CUDA graph)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"BASS paged attention vs FA3 / TRITON_ATTN, {res['device']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


if __name__ == "__main__":
    main()
