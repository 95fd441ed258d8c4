#!/usr/bin/env python3
"""Train the embedded tiny target/draft Llama pair on the Python stdlib source.

1. Target (``bass-tiny-target``): Llama, hidden 256, 4 layers, 4 heads / 2 KV
   heads (head_dim 64), MLP 512, tied embeddings, vocab 2048 (2.89M params).
   Next-token cross-entropy; training-only dropout (``--dropout``, forward
   hooks on the embedding / attention / MLP outputs, nothing saved) because
   the corpus is small (~2.7M tokens) and the model otherwise overfits.
2. Draft (``bass-tiny-draft``): Llama, hidden 128, 2 layers, 2 heads / 1 KV
   head (head_dim 64), MLP 384, tied embeddings, same vocab (0.66M params).
   Distilled from the SAVED (bf16) target: loss ``(1-a) CE + a KL(target||draft)``
   (``a = --kd-alpha``), half of the steps (``--gen-mix``) on sequences
   sampled from the target (on-policy distillation: the contexts a serving
   engine sees), the other half on corpus windows.

Corpus: stdlib ``*.py`` files (of the running interpreter, or of ``--stdlib
DIR``) minus the held-out set of ``scripts/_corpus.py``; each file becomes
``<s> tokens </s>``; training windows are sampled uniformly from the
concatenation.  A validation split of training-side files selects the best
checkpoint (evaluated every ``--eval-every`` steps).  AdamW (0.9, 0.95, wd
0.1), linear warm-up + cosine decay to 10%, bf16 autocast on CUDA (fp32 on
CPU).  Needs ``models/tokenizer`` from ``scripts/train_tokenizer.py``.

Each model is written as a HuggingFace folder (``config.json``,
``generation_config.json``, ``model.safetensors`` in bfloat16, tokenizer
files, ``training_meta.json``) under ``--out``: ``<out>/<target-name>`` and
``<out>/<draft-name>`` (default ``target`` / ``draft``).

Deterministic given ``--seed`` on CPU; on CUDA up to non-deterministic GPU
kernels (and unless ``--max-seconds`` forces fewer steps, which is logged).
Speed on one H100: ~19 ms/step for the target, ~20 ms/step for the draft
(~2.5 min for the whole default recipe when run alone).

The committed pair (models/bass-tiny-{target,draft}) was produced with the
defaults on an H100 from the CPython 3.11.7 stdlib (the one that trained the
tokenizer; shipped to the GPU host as a tarball of the training-side files):

    python scripts/train_tiny_pair.py --device cuda --seed 0 \
        --stdlib <python3.11 stdlib dir> --out /tmp/pair
    # then copy /tmp/pair/target -> models/bass-tiny-target,
    #           /tmp/pair/draft  -> models/bass-tiny-draft

(the defaults are the winners of a small sweep selected on the validation
split: target dropout {0, 0.1, 0.2} x steps, draft kd-alpha {0.7, 1} x
gen-mix {0, 0.5}.)

Smoke (CPU):  python scripts/train_tiny_pair.py --device cpu --steps 5 --draft-steps 5 \
                  --batch-size 2 --seq-len 128 --gen-rows 2 --eval-every 5 --out /tmp/pair
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _corpus  # noqa: E402

VOCAB_SIZE = 2048
BOS_ID, EOS_ID = 1, 2
MAX_POS = 2048
ROPE_THETA = 10000.0

TARGET_ARCH = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=64, intermediate_size=512)
DRAFT_ARCH = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=64, intermediate_size=384)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------
# config / model helpers (shared with eval_acceptance.py)
# ----------------------------------------------------------------------------
def config_dict(arch: dict) -> dict:
    """The exact config.json we commit (version-independent, Llama-standard keys)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": VOCAB_SIZE,
        **arch,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POS,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-5,
        "use_cache": True,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": None,
        "tie_word_embeddings": True,
        "rope_theta": ROPE_THETA,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "torch_dtype": "bfloat16",
    }


def _dropout_hook(p: float):
    def hook(mod, inp, out):
        if not mod.training:
            return out
        if isinstance(out, tuple):
            return (F.dropout(out[0], p, True),) + tuple(out[1:])
        return F.dropout(out, p, True)
    return hook


def add_residual_dropout(model, p: float) -> None:
    """Training-only dropout on the embedding output and on every attention /
    MLP branch output (forward hooks; the saved architecture is unchanged)."""
    if p <= 0:
        return
    model.model.embed_tokens.register_forward_hook(_dropout_hook(p))
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(_dropout_hook(p))
        layer.mlp.register_forward_hook(_dropout_hook(p))


def build_model(arch: dict):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = {k: v for k, v in config_dict(arch).items() if k not in ("architectures", "model_type", "torch_dtype")}
    config = LlamaConfig(**cfg)
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config)
    model.tie_weights()
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), "embeddings not tied"
    return model


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weight counted once


def save_hf(model, arch: dict, folder: str, tokenizer_dir: str, meta: dict) -> None:
    from safetensors.torch import save_file

    os.makedirs(folder, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).contiguous().cpu()
          for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(sd, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    cfg = config_dict(arch)
    try:
        import transformers
        cfg["transformers_version"] = transformers.__version__
    except Exception:  # pragma: no cover
        pass
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")
    gen = {"_from_model_config": True, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID}
    with open(os.path.join(folder, "generation_config.json"), "w") as fh:
        json.dump(gen, fh, indent=2)
        fh.write("\n")
    for f in TOKENIZER_FILES:
        shutil.copyfile(os.path.join(tokenizer_dir, f), os.path.join(folder, f))
    with open(os.path.join(folder, "training_meta.json"), "w") as fh:
        json.dump(meta, fh, indent=2)
        fh.write("\n")


# ----------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------
def encode_files(tokenizer_dir: str, rels: list[str], root: str | None) -> torch.Tensor:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    texts = _corpus.load_texts(rels, root)
    encs = tok.encode_batch(texts, add_special_tokens=False)
    flat: list[int] = []
    for e in encs:
        flat.append(BOS_ID)
        flat.extend(e.ids)
        flat.append(EOS_ID)
    return torch.tensor(flat, dtype=torch.long)


class WindowSampler:
    """Uniform random windows of seq_len+1 tokens from a flat token stream."""

    def __init__(self, tokens: torch.Tensor, seq_len: int, batch: int, seed: int, device):
        self.tokens = tokens.to(device)
        self.seq_len, self.batch, self.device = seq_len, batch, device
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.offs = torch.arange(seq_len + 1, device=device)
        self.hi = len(tokens) - seq_len - 1
        assert self.hi > 0, "corpus shorter than one window"

    def next(self):
        starts = torch.randint(0, self.hi, (self.batch,), generator=self.gen).to(self.device)
        w = self.tokens[starts[:, None] + self.offs[None, :]]
        return w[:, :-1], w[:, 1:]


class RowSampler:
    """Random rows (each seq_len+1 tokens) of a pre-built [N, seq_len+1] tensor."""

    def __init__(self, rows: torch.Tensor, batch: int, seed: int, device):
        self.rows = rows.to(device)
        self.batch = batch
        self.gen = torch.Generator(device="cpu").manual_seed(seed)

    def next(self):
        idx = torch.randint(0, len(self.rows), (self.batch,), generator=self.gen).to(self.rows.device)
        w = self.rows[idx]
        return w[:, :-1], w[:, 1:]


class MixSampler:
    """Alternates deterministically: every step whose index satisfies the mix
    ratio draws from ``b`` (target samples), the others from ``a`` (corpus)."""

    def __init__(self, a, b, frac_b: float):
        self.a, self.b, self.frac_b, self.i = a, b, frac_b, 0

    def next(self):
        self.i += 1
        use_b = self.b is not None and int(self.i * self.frac_b) != int((self.i - 1) * self.frac_b)
        return (self.b if use_b else self.a).next()


def fixed_windows(tokens: torch.Tensor, seq_len: int, max_windows: int) -> torch.Tensor:
    """Non-overlapping windows covering (a prefix of) the stream, for evaluation."""
    n = (len(tokens) - 1) // seq_len
    n = min(n, max_windows)
    x = torch.stack([tokens[i * seq_len:(i + 1) * seq_len + 1] for i in range(n)])
    return x


def autocast(device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


@torch.no_grad()
def sample_from(model, tokens: torch.Tensor, n_rows: int, prompt_len: int, row_len: int,
                temperature: float, seed: int, device, bs: int = 1024) -> torch.Tensor:
    """On-policy distillation data: ``n_rows`` rows of ``row_len`` tokens, each a
    real ``prompt_len``-token corpus prompt continued by ancestral sampling from
    ``model`` at ``temperature`` (KV-cached, through </s><s> boundaries)."""
    model.eval()
    g_cpu = torch.Generator(device="cpu").manual_seed(seed)
    g_dev = torch.Generator(device=device).manual_seed(seed)
    starts = torch.randint(0, len(tokens) - prompt_len, (n_rows,), generator=g_cpu)
    offs = torch.arange(prompt_len)
    out = []
    for i in range(0, n_rows, bs):
        prompt = tokens[starts[i:i + bs, None] + offs[None, :]].to(device)
        with autocast(device):
            o = model(input_ids=prompt, use_cache=True)
        past, logits = o.past_key_values, o.logits[:, -1]
        seq = [prompt]
        for _ in range(row_len - prompt_len):
            probs = torch.softmax(logits.float() / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=g_dev)
            seq.append(nxt)
            with autocast(device):
                o = model(input_ids=nxt, past_key_values=past, use_cache=True)
            past, logits = o.past_key_values, o.logits[:, -1]
        out.append(torch.cat(seq, 1).cpu())
        del past, o
    return torch.cat(out)


@torch.no_grad()
def eval_loss(model, windows: torch.Tensor, device, bs: int = 32) -> float:
    was = model.training
    model.eval()
    tot, cnt = 0.0, 0
    for i in range(0, len(windows), bs):
        w = windows[i:i + bs].to(device)
        with autocast(device):
            logits = model(input_ids=w[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1), reduction="sum")
        tot += loss.item()
        cnt += w[:, 1:].numel()
    model.train(was)
    return tot / max(cnt, 1)


@torch.no_grad()
def eval_agreement(target, draft, windows: torch.Tensor, device, bs: int = 32) -> float:
    """Teacher-forced greedy agreement: P(argmax draft == argmax target)."""
    was = draft.training
    target.eval(); draft.eval()
    agree, cnt = 0, 0
    for i in range(0, len(windows), bs):
        w = windows[i:i + bs, :-1].to(device)
        with autocast(device):
            a = target(input_ids=w, use_cache=False).logits.argmax(-1)
            b = draft(input_ids=w, use_cache=False).logits.argmax(-1)
        agree += (a == b).sum().item()
        cnt += a.numel()
    draft.train(was)
    return agree / max(cnt, 1)


def lr_at(step: int, total: int, peak: float, warmup: int, min_ratio: float = 0.1) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p)))


def make_optimizer(model, lr: float, wd: float, device):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    kw = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.95), eps=1e-8, **kw)


# ----------------------------------------------------------------------------
# training loop (target: CE; draft: (1-a) CE + a KL(target || draft))
# ----------------------------------------------------------------------------
def train(name, model, sampler, val_windows, args, device, steps, peak_lr, teacher=None, kd_alpha=0.0):
    opt = make_optimizer(model, peak_lr, args.weight_decay, device)
    model.train()
    if teacher is not None:
        teacher.eval()
        for p in teacher.parameters():
            p.requires_grad_(False)
    best = (float("inf"), -1, None)
    history = []
    total = steps
    t0 = time.time()
    t_probe = None
    step = 0
    while step < total:
        lr = lr_at(step, total, peak_lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = sampler.next()
        with autocast(device):
            logits = model(input_ids=x, use_cache=False).logits
        logits = logits.float().reshape(-1, logits.size(-1))
        ce = F.cross_entropy(logits, y.reshape(-1))
        if teacher is not None and kd_alpha > 0:
            with torch.no_grad(), autocast(device):
                tlogits = teacher(input_ids=x, use_cache=False).logits
            tlogp = F.log_softmax(tlogits.float().reshape(-1, tlogits.size(-1)) / args.kd_temp, -1)
            slogp = F.log_softmax(logits / args.kd_temp, -1)
            kl = F.kl_div(slogp, tlogp, log_target=True, reduction="batchmean") * args.kd_temp ** 2
            loss = (1 - kd_alpha) * ce + kd_alpha * kl
        else:
            kl = None
            loss = ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1

        if step == 10:
            if device.type == "cuda":
                torch.cuda.synchronize()
            t_probe = time.time()
        if step == 40 and t_probe is not None:
            if device.type == "cuda":
                torch.cuda.synchronize()
            per = (time.time() - t_probe) / 30
            projected = (time.time() - t0) + per * (total - step)
            log(f"{name}: {per * 1000:.1f} ms/step, projected {projected:.0f}s for {total} steps")
            if args.max_seconds > 0 and projected > args.max_seconds:
                new_total = max(step + 1, int(step + (args.max_seconds - (time.time() - t0)) / per))
                log(f"{name}: WARNING time budget {args.max_seconds}s -> reducing steps {total} -> {new_total}")
                total = new_total

        if step % args.log_every == 0 or step == total:
            msg = f"{name} step {step}/{total} lr {lr:.2e} ce {ce.item():.4f}"
            if kl is not None:
                msg += f" kl {kl.item():.4f}"
            log(msg + f" ({time.time() - t0:.0f}s)")
        if step % args.eval_every == 0 or step == total:
            vl = eval_loss(model, val_windows, device)
            rec = {"step": step, "train_ce": round(ce.item(), 4), "val_loss": round(vl, 4)}
            if kl is not None:
                rec["train_kl"] = round(kl.item(), 4)
            history.append(rec)
            tag = ""
            if vl < best[0]:
                best = (vl, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
                tag = " *best*"
            log(f"{name} step {step} val_loss {vl:.4f} (ppl {math.exp(vl):.2f}){tag}")
    if best[2] is not None:
        model.load_state_dict(best[2])
    model.eval()
    return {"steps_run": step, "steps_requested": steps, "best_step": best[1],
            "best_val_loss": round(best[0], 4), "final_train_ce": round(ce.item(), 4),
            "seconds": round(time.time() - t0, 1), "history": history}


def load_saved(arch: dict, folder: str, device):
    """Rebuild a model from a folder written by save_hf (bf16 weights -> fp32)."""
    from safetensors.torch import load_file

    m = build_model(arch)
    sd = load_file(os.path.join(folder, "model.safetensors"))
    missing, unexpected = m.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    m.tie_weights()
    return m.to(device).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=2000, help="target optimisation steps")
    ap.add_argument("--draft-steps", type=int, default=2500, help="draft optimisation steps")
    ap.add_argument("--out", default="models")
    ap.add_argument("--target-name", default="target")
    ap.add_argument("--draft-name", default="draft")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--phase", choices=("both", "target", "draft"), default="both",
                    help="'draft' distils from the target already saved at <out>/<target-name>")
    ap.add_argument("--stdlib", default=None,
                    help="stdlib directory to read the corpus from (default: the running interpreter's)")
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "tokenizer"))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=2e-3, help="target peak LR")
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument("--dropout", type=float, default=0.2, help="target residual/embedding dropout (training only)")
    ap.add_argument("--draft-dropout", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--kd-alpha", type=float, default=1.0, help="weight of KL(target||draft) in the draft loss")
    ap.add_argument("--kd-temp", type=float, default=1.0)
    ap.add_argument("--gen-mix", type=float, default=0.5,
                    help="fraction of draft steps on target-sampled sequences (on-policy distillation); 0 = corpus only")
    ap.add_argument("--gen-rows", type=int, default=1024, help="number of target-sampled rows (seq_len+1 tokens each)")
    ap.add_argument("--gen-prompt", type=int, default=32)
    ap.add_argument("--gen-temp", type=float, default=0.8)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--val-windows", type=int, default=64)
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="per-model wall-clock budget; if the measured speed would exceed it, fewer steps are run (logged). 0 = off")
    args = ap.parse_args()
    draft_steps = args.draft_steps

    device = torch.device(args.device)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        log(f"device {torch.cuda.get_device_name(device)}")
    import transformers
    log(f"torch {torch.__version__} transformers {transformers.__version__} python {sys.version.split()[0]}")

    root = args.stdlib or _corpus.stdlib_dir()
    split = _corpus.split_files(root)
    log(f"stdlib {root}: train {len(split['train'])} files, val {len(split['val'])}, held-out {len(split['heldout'])} (excluded)")
    t = time.time()
    train_tokens = encode_files(args.tokenizer, split["train"], root)
    val_tokens = encode_files(args.tokenizer, split["val"], root)
    log(f"tokens: train {len(train_tokens):,} val {len(val_tokens):,} ({time.time() - t:.1f}s)")
    val_w = fixed_windows(val_tokens, args.seq_len, args.val_windows)

    common_meta = {
        "seed": args.seed, "batch_size": args.batch_size, "seq_len": args.seq_len,
        "weight_decay": args.weight_decay, "warmup": args.warmup,
        "corpus": "CPython stdlib *.py (%s) minus held-out packages %s and modules %s; see scripts/_corpus.py"
                  % ("--stdlib " + os.path.basename(root.rstrip("/")) if args.stdlib else "python " + sys.version.split()[0],
                     list(_corpus.HELDOUT_PACKAGES), list(_corpus.HELDOUT_MODULES)),
        "train_files": len(split["train"]), "train_tokens": len(train_tokens),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
    }
    target_dir = os.path.join(args.out, args.target_name)

    # ---------------- target ----------------
    if args.phase in ("both", "target"):
        torch.manual_seed(args.seed)
        target = build_model(TARGET_ARCH).to(device)
        add_residual_dropout(target, args.dropout)
        log(f"target params {n_params(target):,}")
        sampler = WindowSampler(train_tokens, args.seq_len, args.batch_size, args.seed, device)
        tstats = train("target", target, sampler, val_w, args, device, args.steps, args.lr)
        log(f"target done: best val {tstats['best_val_loss']} (ppl {math.exp(tstats['best_val_loss']):.3f}) @ step {tstats['best_step']}")
        save_hf(target, TARGET_ARCH, target_dir, args.tokenizer,
                {**common_meta, "model": "target", "steps": args.steps, "lr": args.lr, "dropout": args.dropout,
                 "params": n_params(target), **tstats})
        del target
        if args.phase == "target":
            return

    # ---------------- draft (distilled from the SAVED bf16 target) ----------------
    teacher = load_saved(TARGET_ARCH, target_dir, device)
    gen_rows = None
    if args.gen_mix > 0:
        t = time.time()
        gen_rows = sample_from(teacher, train_tokens, args.gen_rows, args.gen_prompt, args.seq_len + 1,
                               args.gen_temp, args.seed + 2, device)
        log(f"sampled {gen_rows.numel():,} target tokens for on-policy distillation ({time.time() - t:.1f}s)")
    torch.manual_seed(args.seed + 1)
    draft = build_model(DRAFT_ARCH).to(device)
    add_residual_dropout(draft, args.draft_dropout)
    log(f"draft params {n_params(draft):,}")
    corpus_s = WindowSampler(train_tokens, args.seq_len, args.batch_size, args.seed + 1, device)
    gen_s = RowSampler(gen_rows, args.batch_size, args.seed + 3, device) if gen_rows is not None else None
    sampler = MixSampler(corpus_s, gen_s, args.gen_mix)
    dstats = train("draft", draft, sampler, val_w, args, device, draft_steps, args.draft_lr,
                   teacher=teacher, kd_alpha=args.kd_alpha)
    dstats["val_greedy_agreement"] = round(eval_agreement(teacher, draft, val_w, device), 4)
    log(f"draft done: best val {dstats['best_val_loss']} (ppl {math.exp(dstats['best_val_loss']):.3f}) @ step {dstats['best_step']}, "
        f"teacher-forced greedy agreement with target on val {dstats['val_greedy_agreement']}")
    save_hf(draft, DRAFT_ARCH, os.path.join(args.out, args.draft_name), args.tokenizer,
            {**common_meta, "model": "draft", "steps": draft_steps, "lr": args.draft_lr, "dropout": args.draft_dropout,
             "kd_alpha": args.kd_alpha, "kd_temp": args.kd_temp, "gen_mix": args.gen_mix,
             "gen_rows": args.gen_rows if args.gen_mix > 0 else 0, "gen_temp": args.gen_temp,
             "params": n_params(draft), **dstats})
    log("all done")


if __name__ == "__main__":
    main()
