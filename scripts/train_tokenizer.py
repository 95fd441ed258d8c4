#!/usr/bin/env python3
"""Train the byte-level BPE tokenizer shared by the embedded tiny model pair.

Corpus: the Python standard library source of the running interpreter, minus
the held-out set defined in ``scripts/_corpus.py`` (the validation files are
included; the held-out files are not).

Output (HuggingFace layout, loads with ``AutoTokenizer.from_pretrained``):
``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``.

Special tokens: ``<unk>`` = 0, ``<s>`` (bos) = 1, ``</s>`` (eos) = 2.  The
tokenizer is byte-level (GPT-2 style byte alphabet + ByteLevel decoder), so
any text round-trips exactly; ``<s>`` is prepended by the post-processor when
``add_special_tokens=True`` (the default), like Llama tokenizers.

Usage: python scripts/train_tokenizer.py [--out models/tokenizer] [--vocab-size 2048]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _corpus  # noqa: E402

UNK, BOS, EOS = "<unk>", "<s>", "</s>"
MODEL_MAX_LENGTH = 2048


def build_tokenizer(texts, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[UNK, BOS, EOS],  # ids 0, 1, 2
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    assert tok.token_to_id(UNK) == 0 and tok.token_to_id(BOS) == 1 and tok.token_to_id(EOS) == 2
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single=f"{BOS} $A",
            pair=f"{BOS} $A {BOS} $B",
            special_tokens=[(BOS, 1)],
        ),
    ])
    return tok


def write_hf_files(tok, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    special = {
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": UNK,
    }
    added = {
        str(tok.token_to_id(t)): {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True,
        }
        for t in (UNK, BOS, EOS)
    }
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        **special,
        "model_max_length": MODEL_MAX_LENGTH,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")
    with open(os.path.join(out, "special_tokens_map.json"), "w") as fh:
        json.dump(special, fh, indent=2)
        fh.write("\n")


def check(out: str, samples) -> None:
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(out)
    assert (t.unk_token_id, t.bos_token_id, t.eos_token_id) == (0, 1, 2), (t.unk_token_id, t.bos_token_id, t.eos_token_id)
    assert len(t) == t.vocab_size or len(t) >= 3
    for s in samples:
        ids = t(s)["input_ids"]
        assert ids[0] == 1, ids[:3]
        back = t.decode(ids, skip_special_tokens=True)
        assert back == s, (s[:80], back[:80])
    print(f"AutoTokenizer check ok: {type(t).__name__}, vocab={len(t)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/tokenizer")
    ap.add_argument("--vocab-size", type=int, default=2048)
    args = ap.parse_args()

    split = _corpus.split_files()
    rels = split["train"] + split["val"]
    texts = _corpus.load_texts(rels)
    print(f"training BPE on {len(texts)} files ({sum(map(len, texts)):,} chars) from {_corpus.stdlib_dir()}")
    tok = build_tokenizer(texts, args.vocab_size)
    write_hf_files(tok, args.out)

    held = _corpus.load_texts(split["heldout"])
    n_chars = sum(map(len, held))
    n_tok = sum(len(e.ids) for e in tok.encode_batch(held, add_special_tokens=False))
    print(f"vocab={tok.get_vocab_size()} held-out: {n_chars:,} chars -> {n_tok:,} tokens ({n_chars / n_tok:.2f} chars/token)")
    check(args.out, held[:5] + ["def f(x):\n    return x + 1\n", "héllo wörld ✓ \t\n  \x00\x7f 🐍"])
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
