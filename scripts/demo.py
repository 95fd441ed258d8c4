"""Demo: BASS generating Python code with the embedded model pair, against plain decoding.

Prints the generated code, acceptance statistics and speed with and without speculation,
and checks that greedy BASS output is token-identical to the target's own greedy output.
Each engine runs in its own process (support.isolated_engine).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.isolated_engine import (  # noqa: E402
    DRAFT,
    TARGET,
    base_engine_kwargs,
    metric,
    run_engine,
)

PROMPTS = [
    "def binary_search(items, target):\n",
    "class LRUCache:\n    def __init__(self, capacity):\n",
    "import os\n\n\ndef walk_python_files(root):\n",
    "def parse_args(argv=None):\n    parser = argparse.ArgumentParser(",
    "    def __repr__(self):\n",
    "def read_config(path):\n    with open(path) as f:\n",
    "for key, value in sorted(",
    "class Node:\n    \"\"\"A node of a linked list.\"\"\"\n\n",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--target", default=TARGET)
    ap.add_argument("--draft", default=DRAFT)
    ap.add_argument("--policy", default="bass", choices=["bass", "per_request", "fixed"])
    ap.add_argument("--num-speculative-tokens", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--show", type=int, default=3, help="how many completions to print")
    args = ap.parse_args()

    job = [{"prompts": PROMPTS, "sampling": {"temperature": 0.0, "max_tokens": args.max_tokens,
                                             "ignore_eos": True}}]
    spec = {"method": "bass", "model": args.draft, "draft_length_policy": args.policy}
    if args.num_speculative_tokens:
        spec["num_speculative_tokens"] = args.num_speculative_tokens
    print(f"target {args.target}\ndraft  {args.draft}\nbatch of {len(PROMPTS)} prompts, "
          f"{args.max_tokens} new tokens each, greedy\n")
    print("== plain decoding (no speculation)", flush=True)
    plain = run_engine(base_engine_kwargs(model=args.target), job)
    print(f"== BASS (policy {args.policy})", flush=True)
    bass = run_engine(base_engine_kwargs(model=args.target, speculative_config=spec), job,
                      metrics=True)

    out_plain, out_bass = plain["results"][0], bass["results"][0]
    for prompt, text in list(zip(PROMPTS, out_bass["text"]))[: args.show]:
        print("-" * 72 + "\n" + prompt + text)
    print("-" * 72)
    m = bass["metrics"]
    drafts = metric(m, "vllm:spec_decode_num_drafts")
    draft_tokens = metric(m, "vllm:spec_decode_num_draft_tokens")
    accepted = metric(m, "vllm:spec_decode_num_accepted_tokens")
    per_pos = metric(m, "vllm:spec_decode_num_accepted_tokens_per_pos") or []
    n_tokens = sum(len(t[0]) for t in out_bass["token_ids"])
    identical = out_plain["token_ids"] == out_bass["token_ids"]
    print("acceptance:")
    print(f"  verification steps (sequence-steps with a draft): {drafts}")
    print(f"  draft tokens proposed {draft_tokens}, accepted {accepted} "
          f"({100.0 * accepted / max(draft_tokens, 1):.1f}%)")
    print(f"  mean acceptance length (accepted + 1 per step): "
          f"{1 + accepted / max(drafts, 1):.2f} tokens")
    if drafts and per_pos:
        rates = [f"{p / drafts:.2f}" for p in per_pos[:8]]
        print(f"  acceptance rate by position 1..{len(rates)}: {' '.join(rates)}")
    tp, tb = out_plain["seconds"], out_bass["seconds"]
    print("speed (this machine):")
    print(f"  plain: {tp:.2f} s, {n_tokens / tp:.1f} tokens/s")
    print(f"  BASS:  {tb:.2f} s, {n_tokens / tb:.1f} tokens/s  ->  {tp / tb:.2f}x")
    print(f"greedy BASS output identical to plain greedy output: {'yes' if identical else 'NO'}")
    sys.exit(0 if identical else 1)


if __name__ == "__main__":
    main()
