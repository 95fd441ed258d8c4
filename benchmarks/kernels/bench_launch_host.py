"""Host time of our attention's Python path per layer, kernel launches stubbed out.

Why: in the drafter (one-token steps, attention eager between piecewise CUDA graphs) a
draft step with our attention took ~3x FA3's device time on the H100 (session 7), i.e.
~290 us more per layer and step. This measures what of that is our own Python (the
backend's `forward` and `do_kv_cache_update`, plans, argument lists) by replacing every
Triton kernel's launch with a no-op: what is left for Triton's launch path and the
kernels themselves. Runs anywhere (CPU tensors); the numbers are this machine's CPU.

    python benchmarks/kernels/bench_launch_host.py [--out benchmarks/results/launch_host_cpu_after]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

# (name, query heads, KV heads, head size, query length): the 7B-shape pair's draft
# (16 heads of 64) at a one-token draft step, its target (32 of 128) at decode and at a
# verification of 4 drafts
SHAPES = [("draft_decode", 16, 16, 64, 1), ("target_decode", 32, 32, 128, 1),
          ("target_verify5", 32, 32, 128, 5)]


class _NoLaunch:
    """Stands in for a @triton.jit kernel: `kernel[grid](...)` does nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def _stub_kernels() -> None:
    import vllm_bass.kernels.paged_attention_pad as pad
    import vllm_bass.kernels.paged_attention_split as split
    import vllm_bass.kernels.reshape_and_cache as cache

    for module in (pad, split, cache):
        for name in dir(module):
            if name.startswith("_") and name.endswith("_kernel"):
                setattr(module, name, _NoLaunch())


def measure(heads: int, kv_heads: int, head_size: int, query_len: int, batch: int,
            context: int, repeats: int) -> dict:
    from vllm_bass.attention.backend import BassAttentionImpl, BassAttentionMetadata

    block = 16
    blocks_per_seq = -(-(context + query_len) // block)
    tokens = batch * query_len
    impl = BassAttentionImpl(heads, head_size, head_size ** -0.5, kv_heads)
    kv_cache = torch.zeros(batch * blocks_per_seq, kv_heads, block, 2 * head_size,
                           dtype=torch.bfloat16)
    q = torch.zeros(tokens, heads * head_size, dtype=torch.bfloat16)
    k = torch.zeros(tokens, kv_heads, head_size, dtype=torch.bfloat16)
    out = torch.zeros_like(q)
    md = BassAttentionMetadata(
        num_actual_tokens=tokens, max_query_len=query_len, max_seq_len=context + query_len,
        query_start_loc=torch.arange(batch + 1, dtype=torch.int32) * query_len,
        seq_lens=torch.full((batch,), context + query_len, dtype=torch.int32),
        block_table=torch.arange(batch * blocks_per_seq, dtype=torch.int32).view(batch, -1),
        slot_mapping=torch.zeros(tokens, dtype=torch.long), sms=132,
        device=torch.device("cpu"))
    md.plan, md.workspace = md.plan_for(heads, kv_heads, head_size, torch.bfloat16)
    calls = {
        "forward_us": lambda: impl.forward(None, q, k, k, kv_cache, md, out),
        "kv_update_us": lambda: impl.do_kv_cache_update(None, k, k, kv_cache,
                                                        md.slot_mapping),
    }
    row = {"plan": md.plan.strategy}
    for name, call in calls.items():
        call()  # the first call checks the inputs; the step's other layers do not
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats):
                call()
            samples.append((time.perf_counter() - start) / repeats * 1e6)
        row[name] = round(statistics.median(samples), 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/launch_host_cpu_after")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=2000)
    args = ap.parse_args()
    _stub_kernels()
    rows = []
    for name, heads, kv_heads, head_size, query_len in SHAPES:
        row = {"shape": name, "heads": heads, "kv_heads": kv_heads, "head_size": head_size,
               "query_len": query_len, "batch": args.batch, "context": args.context}
        row.update(measure(heads, kv_heads, head_size, query_len, args.batch, args.context,
                           args.repeats))
        rows.append(row)
        print(row, flush=True)
    result = {"device": f"CPU only ({platform.processor() or platform.machine()}), launches "
                        "stubbed", "torch": torch.__version__, "rows": rows,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# Host time of our attention's Python path per layer (kernel launches stubbed)",
             "", f"{result['device']}, median of 5 x {args.repeats} calls, batch "
             f"{args.batch}, context {args.context}.", "",
             "| shape | plan | forward us | KV write us |", "|---|---|---:|---:|"]
    lines += [f"| {r['shape']} | {r['plan']} | {r['forward_us']} | {r['kv_update_us']} |"
              for r in rows]
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
