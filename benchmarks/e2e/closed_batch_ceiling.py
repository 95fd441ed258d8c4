"""What a closed batch at one constant draft length can reach under a measured step law
(session 45: is criterion 4's 2.5x at batch 8 a matter of draft lengths or of step cost?).

Monte Carlo of `vs_vllm.py`'s closed batch: B requests of N new tokens each, synthetic
acceptance alpha^(j+1) (position j of a draft accepted with probability alpha given the
ones before it), every live request drafting L and gaining 1 + its accepted drafts (its
last step only what it still needs), the batch shrinking as requests finish. A step of b
live requests at length L costs the law's time, linear in L and interpolated linearly in
b between the batch-1 and batch-B laws (ms = a + s * L); the run
adds a fixed `--overhead-ms` (prefill and engine overhead, as plain decoding pays).

    python benchmarks/e2e/closed_batch_ceiling.py --alpha 0.8 --batch 8 \
        --law1 5.75,0.083 --lawb 6.70,0.056 --overhead-ms 27 --plain-ms 5.17

(the defaults: session 45's call-3 trace, 4x1024 on an H200, Theil-Sen lines of its warm
runs' steps at batch 1 and 8).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.e2e.mix_bound import makespan_ms  # noqa: E402


def closed_batch_ms(alpha: float, length: int, batch: int, step_ms, new_tokens: int = 128,
                    overhead_ms: float = 0.0, trials: int = 2000, seed: int = 0) -> float:
    """Mean wall time (ms) of a closed batch (`mix_bound.makespan_ms`, every request at
    alpha and `length`, one seed a trial); `step_ms(live, length)` prices a step."""
    requests = batch * [alpha], batch * [length]

    def law(live: int, longest: int, drafts: int) -> float:
        return step_ms(live, longest)

    return overhead_ms + sum(makespan_ms(*requests, new_tokens, seed + t, law)
                             for t in range(trials)) / trials


def linear_law(law1: tuple[float, float], lawb: tuple[float, float], batch: int):
    """ms of a step with `live` requests drafting `length`: each law a + s * length, the
    batch-1 law at one request and the batch-B law at B, linear between."""
    def step_ms(live: int, length: int) -> float:
        at1 = law1[0] + law1[1] * length
        atb = lawb[0] + lawb[1] * length
        w = 0.0 if batch == 1 else (live - 1) / (batch - 1)
        return at1 + w * (atb - at1)
    return step_ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--alpha", type=float, default=0.8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--lengths", default="4,6,8,10,12,16")
    p.add_argument("--law1", default="5.75,0.083", help="batch-1 step: ms at L=0, ms per L")
    p.add_argument("--lawb", default="6.70,0.056", help="batch-B step: ms at L=0, ms per L")
    p.add_argument("--overhead-ms", type=float, default=27.0)
    p.add_argument("--plain-ms", type=float, default=5.17, help="plain decoding, ms/token")
    p.add_argument("--trials", type=int, default=2000)
    args = p.parse_args()
    law1 = tuple(float(x) for x in args.law1.split(","))
    lawb = tuple(float(x) for x in args.lawb.split(","))
    step_ms = linear_law(law1, lawb, args.batch)
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        wall = closed_batch_ms(args.alpha, length, args.batch, step_ms, args.new_tokens,
                               args.overhead_ms, args.trials)
        per_token = wall / args.new_tokens
        rows.append({"length": length, "ms_per_token": round(per_token, 3),
                     "x_plain": round(args.plain_ms / per_token, 3)})
        print(json.dumps(rows[-1]))


if __name__ == "__main__":
    main()
