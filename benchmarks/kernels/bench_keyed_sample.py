"""What a seeded request's reproducibility costs per step on the device (issue 14).

Seeded rows sample with position-keyed Gumbel noise (`vllm_bass.sampling.keyed.keyed_sample`,
~40 int64 element-wise ops over rows x vocab); unseeded rows take vLLM's exponential race
(softmax, divide by Exp(1) noise, argmax). Times both over rows (the step's seeded draft
positions) x vocabulary, CUDA events, median of 20 after 3 warm-ups.

    python3 benchmarks/kernels/bench_keyed_sample.py --out $OUT/keyed_sample.json
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from vllm_bass.sampling.keyed import keyed_sample


def _time_ms(fn, repeats: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _race_sample(logits: torch.Tensor) -> torch.Tensor:
    """vLLM's unseeded sampler: probs / Exp(1) noise, argmax."""
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    return probs.div_(torch.empty_like(probs).exponential_()).argmax(dim=-1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", default="1,8,64,256,1024")
    p.add_argument("--vocab", default="32000,128256")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device")
    dev = torch.device("cuda")
    rows_out = []
    for vocab in (int(v) for v in args.vocab.split(",")):
        for n in (int(r) for r in args.rows.split(",")):
            logits = torch.randn(n, vocab, device=dev)
            seeds = torch.arange(n, dtype=torch.int64, device=dev) + 12345
            positions = torch.arange(n, dtype=torch.int64, device=dev) + 200
            keyed = _time_ms(lambda: keyed_sample(logits, seeds, positions))
            race = _time_ms(lambda: _race_sample(logits))
            rows_out.append(dict(rows=n, vocab=vocab, keyed_ms=round(keyed, 4),
                                 race_ms=round(race, 4),
                                 extra_ms=round(keyed - race, 4)))
            print(f"vocab {vocab:>6} rows {n:>5}: keyed {keyed:8.3f} ms, "
                  f"race {race:7.3f} ms", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(), rows=rows_out), f, indent=1)


if __name__ == "__main__":
    main()
