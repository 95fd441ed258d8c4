#!/usr/bin/env python3
"""Measure draft/target agreement of the embedded tiny pair on HELD-OUT code.

Held-out code = the stdlib files that ``scripts/_corpus.py`` holds out from
training (packages json/, email/, asyncio/ and modules textwrap.py,
argparse.py of the running interpreter).  Pure transformers/torch on CPU.

Reported (and written to ``--out``, default ``models/acceptance.json``):

* ``perplexity``: each model's token-level perplexity on the held-out stream
  (files as ``<s> ... </s>``, non-overlapping windows of ``--ppl-window``).
* ``teacher_forced``: at ``--positions`` random positions of held-out files
  (context = up to ``--context`` preceding real tokens) the draft proposes k
  tokens greedily, the target verifies greedily; accepted = length of the
  longest prefix of the proposal equal to the target's greedy tokens.  The
  mean acceptance length is the mean number of tokens emitted per
  verification step, ``accepted + 1`` (the target's bonus/correction token).
  Because greedy proposals for k are a prefix of those for k_max, one k_max
  proposal per position gives the exact value for every k <= k_max.
* ``generation``: real greedy speculative decoding (draft proposes k greedily,
  target verifies, accepted prefix + 1 target token appended) from
  ``--gen-prompts`` held-out prompts for ``--gen-tokens`` new tokens each;
  mean acceptance length = emitted tokens / verification steps.  This is what
  a serving engine sees (the context is the target's own output).

Usage: python scripts/eval_acceptance.py [--target models/bass-tiny-target]
           [--draft models/bass-tiny-draft] [--out models/acceptance.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _corpus  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOS_ID, EOS_ID = 1, 2


def load_model(path: str):
    from transformers import AutoModelForCausalLM

    try:
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    except TypeError:  # transformers < 4.56
        m = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="sdpa")
    m.eval()
    return m


@torch.no_grad()
def logits_of(model, ids: list[int] | torch.Tensor) -> torch.Tensor:
    x = torch.as_tensor(ids, dtype=torch.long)
    if x.dim() == 1:
        x = x[None]
    return model(input_ids=x, use_cache=False).logits[0].float()


@torch.no_grad()
def draft_greedy(draft, ctx: list[int], k: int) -> list[int]:
    """k greedy tokens from the draft (KV-cached)."""
    out = draft(input_ids=torch.tensor([ctx]), use_cache=True)
    past = out.past_key_values
    tok = int(out.logits[0, -1].argmax())
    props = [tok]
    for _ in range(k - 1):
        out = draft(input_ids=torch.tensor([[tok]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        tok = int(out.logits[0, -1].argmax())
        props.append(tok)
    return props


@torch.no_grad()
def verify(target, ctx: list[int], props: list[int]) -> tuple[int, list[int]]:
    """Target greedy tokens at the k+1 positions; returns (#accepted, target tokens)."""
    lg = logits_of(target, ctx + props)
    tgt = lg[len(ctx) - 1:].argmax(-1).tolist()  # k+1 tokens
    n = 0
    while n < len(props) and props[n] == tgt[n]:
        n += 1
    return n, tgt


@torch.no_grad()
def perplexity(model, stream: torch.Tensor, window: int, bs: int = 8) -> tuple[float, int]:
    n = (len(stream) - 1) // window
    w = torch.stack([stream[i * window:(i + 1) * window + 1] for i in range(n)])
    tot, cnt = 0.0, 0
    for i in range(0, n, bs):
        b = w[i:i + bs]
        lg = model(input_ids=b[:, :-1], use_cache=False).logits.float()
        tot += F.cross_entropy(lg.reshape(-1, lg.size(-1)), b[:, 1:].reshape(-1), reduction="sum").item()
        cnt += b[:, 1:].numel()
    return math.exp(tot / cnt), cnt


def sample_positions(docs: list[list[int]], n: int, min_ctx: int, rng: random.Random):
    weights = [max(0, len(d) - min_ctx - 1) for d in docs]
    out = []
    for _ in range(n):
        di = rng.choices(range(len(docs)), weights=weights)[0]
        p = rng.randrange(min_ctx, len(docs[di]) - 1)
        out.append((di, p))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=os.path.join(REPO, "models", "bass-tiny-target"))
    ap.add_argument("--draft", default=os.path.join(REPO, "models", "bass-tiny-draft"))
    ap.add_argument("--out", default=os.path.join(REPO, "models", "acceptance.json"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ks", type=int, nargs="+", default=[3, 5, 7])
    ap.add_argument("--positions", type=int, default=400)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--min-context", type=int, default=16)
    ap.add_argument("--gen-prompts", type=int, default=24)
    ap.add_argument("--gen-prompt-len", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=96)
    ap.add_argument("--ppl-window", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (1 is fastest on a shared/contended machine)")
    ap.add_argument("--split", choices=("heldout", "val"), default="heldout",
                    help="'val' evaluates on the training-side validation files instead (for model selection)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    from transformers import AutoTokenizer

    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(args.target)
    target, draft = load_model(args.target), load_model(args.draft)
    rels = _corpus.split_files()[args.split]
    texts = _corpus.load_texts(rels)
    docs = [[BOS_ID] + tok(t, add_special_tokens=False)["input_ids"] + [EOS_ID] for t in texts]
    stream = torch.tensor([i for d in docs for i in d], dtype=torch.long)
    print(f"{args.split}: {len(rels)} files, {len(stream):,} tokens from {_corpus.stdlib_dir()}", flush=True)

    res: dict = {
        "target": os.path.relpath(os.path.abspath(args.target), REPO),
        "draft": os.path.relpath(os.path.abspath(args.draft), REPO),
        "seed": args.seed,
        "eval_set": {
            "split": args.split,
            "stdlib": f"python {sys.version.split()[0]}",
            "packages": list(_corpus.HELDOUT_PACKAGES), "modules": list(_corpus.HELDOUT_MODULES),
            "files": len(rels), "tokens": len(stream),
        },
    }

    # ---- perplexity ----
    ppl = {}
    for name, m in (("target", target), ("draft", draft)):
        p, n = perplexity(m, stream, args.ppl_window)
        ppl[name] = round(p, 3)
        print(f"{name} {args.split} perplexity {p:.3f} over {n:,} tokens", flush=True)
    res["perplexity"] = {**ppl, "window": args.ppl_window, "scored_tokens": n}

    # ---- teacher-forced acceptance ----
    kmax = max(args.ks)
    acc_n = []
    for di, p in sample_positions(docs, args.positions, args.min_context, rng):
        ctx = docs[di][max(0, p - args.context):p]
        props = draft_greedy(draft, ctx, kmax)
        n, _ = verify(target, ctx, props)
        acc_n.append(n)
    tf = {str(k): round(sum(min(n, k) + 1 for n in acc_n) / len(acc_n), 4) for k in args.ks}
    # per-token acceptance rate: P(proposal i accepted | proposals < i accepted)
    tried = sum(min(n + 1, kmax) for n in acc_n)
    alpha = sum(acc_n) / tried
    res["teacher_forced"] = {
        "positions": len(acc_n), "max_context_tokens": args.context, "k_max": kmax,
        "per_token_acceptance_rate": round(alpha, 4),
        "mean_acceptance_length": tf,
    }
    print(f"teacher-forced: alpha={alpha:.3f} mean acceptance length " +
          ", ".join(f"k={k}: {v}" for k, v in tf.items()), flush=True)

    # ---- generation (real greedy speculative decoding) ----
    prompts = []
    for di, p in sample_positions(docs, args.gen_prompts, args.gen_prompt_len, rng):
        prompts.append(docs[di][p - args.gen_prompt_len:p])
    ref = []
    for pr in prompts:  # plain target greedy decoding (reference output)
        seq = list(pr)
        while len(seq) - len(pr) < args.gen_tokens:
            t = int(logits_of(target, seq)[-1].argmax())
            seq.append(t)
            if t == EOS_ID:
                break
        ref.append(seq[len(pr):])
    gen = {}
    same = 0
    total_cmp = 0
    for k in args.ks:
        emitted = steps = 0
        for pr, r in zip(prompts, ref):
            seq = list(pr)
            while len(seq) - len(pr) < args.gen_tokens and (len(seq) == len(pr) or seq[-1] != EOS_ID):
                props = draft_greedy(draft, seq, k)
                n, tgt = verify(target, seq, props)
                new = tgt[:n + 1]  # accepted prefix (== target tokens) + 1 target token
                if EOS_ID in new:
                    new = new[:new.index(EOS_ID) + 1]
                seq.extend(new)
                emitted += len(new)
                steps += 1
            out = seq[len(pr):]
            m = min(len(out), len(r))
            same += sum(a == b for a, b in zip(out[:m], r[:m]))
            total_cmp += m
        gen[str(k)] = round(emitted / steps, 4)
        print(f"generation k={k}: {emitted} tokens in {steps} verification steps -> {emitted / steps:.3f}", flush=True)
    res["generation"] = {
        "prompts": len(prompts), "prompt_tokens": args.gen_prompt_len, "new_tokens": args.gen_tokens,
        "mean_acceptance_length": gen,
        "output_matches_target_greedy": round(same / max(total_cmp, 1), 4),
    }
    sample = tok.decode(prompts[0][-48:] + ref[0][:48], skip_special_tokens=False)
    res["example_target_continuation"] = sample
    res["seconds"] = round(time.time() - t0, 1)

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=2)
        fh.write("\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
