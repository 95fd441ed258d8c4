"""How fast any plan of constant per-group draft lengths can decode issue 13's mix, under the
session-10 H100 step law (`sim_closed_batch.h100_step_ms`): one closed batch (request i draws
alpha 0.9 / 0.6 / 0.9 / 0.3 by i mod 4), 128 new tokens each, per-request geometric
acceptance, every (K_0.9, K_0.6, K_0.3) in 0-8 x 0-5 x 0-3 tried (2 seeds). Prints plain
decoding's makespan over the best plan's and over uniform K (capped per group), so a target
such as "1.25x vLLM's best fixed K" can be checked against what the step costs allow.

    python benchmarks/e2e/mix_bound.py --out benchmarks/results/mix_bound_s11.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.e2e import sim_closed_batch  # noqa: E402
from benchmarks.e2e.sim_closed_batch import MIX_PATTERN, h100_step_ms  # noqa: E402


def makespan_ms(alphas: list[float], lengths: list[int], tokens: int, seed: int,
                step_ms=h100_step_ms) -> float:
    """One closed batch: request i drafts lengths[i] every step and gains 1 + its accepted
    drafts; a step of the live requests costs step_ms(live, longest draft, drafts)."""
    rng = random.Random(seed)
    remaining, ms = [tokens] * len(alphas), 0.0
    while any(r > 0 for r in remaining):
        active = [i for i, r in enumerate(remaining) if r > 0]
        ks = [lengths[i] for i in active]
        ms += step_ms(len(active), max(ks), sum(ks))
        for i in active:
            n = 0
            while n < lengths[i] and rng.random() < alphas[i]:
                n += 1
            remaining[i] -= n + 1
    return ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="8,32,64,128,256")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--h200-law", action="store_true",
                    help="session 49's H200 law (sim_closed_batch.H200_LAW)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sim_closed_batch.H200_LAW[0] = args.h200_law
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        alphas = [MIX_PATTERN[i % 4] for i in range(batch)]
        plain = args.tokens * h100_step_ms(batch, 0, 0)
        speedup = {}
        for k9, k6, k3 in itertools.product(range(9), range(6), range(4)):
            by_alpha = {0.9: k9, 0.6: k6, 0.3: k3}
            lengths = [by_alpha[a] for a in alphas]
            ms = sum(makespan_ms(alphas, lengths, args.tokens, s)
                     for s in range(args.seeds)) / args.seeds
            speedup[(k9, k6, k3)] = plain / ms
        best = max(speedup, key=speedup.get)
        uniform = {k: speedup[(k, min(k, 5), min(k, 3))] for k in (1, 2, 3, 5)}
        rows.append({"batch": batch, "best_plan": list(best), "best_vs_plain": speedup[best],
                     "uniform_k_vs_plain": uniform,
                     "best_vs_uniform_k3": speedup[best] / speedup[(3, 3, 3)]})
        print(f"batch {batch}: best {best} {speedup[best]:.3f}x plain, uniform "
              + " ".join(f"K{k} {v:.3f}x" for k, v in uniform.items())
              + f"; best / K3 {rows[-1]['best_vs_uniform_k3']:.3f}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"step_law": "sim_closed_batch." + (
            "h200_step_ms" if args.h200_law else "h100_step_ms"),
                                              "mix": list(MIX_PATTERN), "rows": rows},
                                             indent=1))


if __name__ == "__main__":
    main()
