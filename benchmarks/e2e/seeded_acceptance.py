"""What the position-keyed coupling of seeded requests costs in acceptance (issue 14).

The same prompts through the same BASS engine (`fixed` policy, auto-off off, so every step
drafts K tokens), once with a seed per request (keyed verification, Gumbel-coupled drafts)
and once without (exact rejection sampling with min(1, p/q), the optimum for these drafts);
reports draft tokens accepted per verification and per draft token, and per draft position.
Also the pure-torch expectation on the embedded pair's own distributions is not needed: the
engine numbers are the ones that matter.

    python benchmarks/e2e/seeded_acceptance.py [--k 4] [--temperature 0.8] [--repeats 4]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.isolated_engine import base_engine_kwargs, bass_spec, metric, run_engine  # noqa: E402
from tests.prompts import PROMPTS  # noqa: E402


def _stats(before: dict | None, after: dict) -> dict:
    def diff(name):
        value = metric(after, name)
        old = metric(before, name) if before is not None else (
            [0] * len(value) if isinstance(value, list) else 0)
        return [a - b for a, b in zip(value, old)] if isinstance(value, list) else value - old

    drafts = diff("vllm:spec_decode_num_drafts")
    tokens = diff("vllm:spec_decode_num_draft_tokens")
    accepted = diff("vllm:spec_decode_num_accepted_tokens")
    per_pos = diff("vllm:spec_decode_num_accepted_tokens_per_pos")
    return {"verifications": drafts, "draft_tokens": tokens, "accepted": accepted,
            "accepted_per_verification": accepted / max(drafts, 1),
            "acceptance_per_draft_token": accepted / max(tokens, 1),
            "accepted_per_position": [a / max(drafts, 1) for a in per_pos]
            if isinstance(per_pos, list) else per_pos}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=4, help="copies of the 8 prompts")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    prompts = PROMPTS * args.repeats
    sampling = {"temperature": args.temperature, "max_tokens": args.max_tokens,
                "ignore_eos": True}
    jobs = [{"prompts": prompts, "sampling": sampling},
            {"prompts": prompts, "sampling": sampling, "per_prompt_seed": 1000}]
    out = run_engine(base_engine_kwargs(max_num_seqs=8, speculative_config=bass_spec(
        draft_length_policy="fixed", auto_off=False, num_speculative_tokens=args.k)),
        jobs, metrics=True)
    unseeded = _stats(None, out["results"][0]["metrics"])
    seeded = _stats(out["results"][0]["metrics"], out["results"][1]["metrics"])
    report = {"k": args.k, "temperature": args.temperature, "requests": len(prompts),
              "max_tokens": args.max_tokens, "unseeded (exact rejection)": unseeded,
              "seeded (keyed coupling)": seeded,
              "ratio accepted per verification": seeded["accepted_per_verification"]
              / max(unseeded["accepted_per_verification"], 1e-9)}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
