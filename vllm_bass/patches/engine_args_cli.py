"""Patch: `EngineArgs.add_cli_args` and `EngineArgs.from_cli_args` (vllm/engine/arg_utils.py).

What: adds the flags `--speculative-model`, `--spec-worker`, `--num-speculative-tokens` and
`--draft-length-policy` to vLLM's CLI, and folds them into `speculative_config` when the
parsed namespace becomes EngineArgs.
Why: vLLM 0.27.1 has no plugin hook for CLI flags; general plugins are loaded before the
parser is built, so wrapping these two is the narrowest change. `from_cli_args` copies only
dataclass fields, hence the second wrap.
When it can go: when vLLM grows a plugin CLI hook, or `--spec-method` accepts plugin methods.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from vllm_bass.config import DRAFT_LENGTH_POLICIES, MAX_DRAFT_TOKENS, BassConfigError
from vllm_bass.patches import wrap

PATCHED_SYMBOLS = {
    "vllm.engine.arg_utils.EngineArgs.add_cli_args": "(parser: vllm.utils.argparse_utils.FlexibleArgumentParser) -> vllm.utils.argparse_utils.FlexibleArgumentParser",
    "vllm.engine.arg_utils.EngineArgs.from_cli_args": "(cls, args: argparse.Namespace)",
}
GROUP_TITLE = "BASS speculative decoding (vllm-bass plugin)"


def _draft_token_count(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in 1..{MAX_DRAFT_TOKENS}, got {text!r}")
    if not 1 <= k <= MAX_DRAFT_TOKENS:
        raise argparse.ArgumentTypeError(f"must be an integer in 1..{MAX_DRAFT_TOKENS}, got {k}")
    return k


def add_bass_flags(parser: argparse.ArgumentParser) -> None:
    if any(getattr(g, "title", None) == GROUP_TITLE for g in parser._action_groups):
        return
    group = parser.add_argument_group(GROUP_TITLE)
    group.add_argument("--spec-worker", choices=["bass"], default=None,
                       help="Speculative worker. 'bass': batched draft-model speculation "
                            "with adaptive ragged draft lengths (needs --speculative-model).")
    group.add_argument("--speculative-model", default=None, metavar="DRAFT",
                       help="Draft model (HF id or folder) for --spec-worker bass.")
    group.add_argument("--num-speculative-tokens", type=_draft_token_count, default=None,
                       metavar="K", help=f"Most draft tokens per sequence and step "
                                         f"(1..{MAX_DRAFT_TOKENS}).")
    group.add_argument("--draft-length-policy", choices=list(DRAFT_LENGTH_POLICIES),
                       default=None, help="How BASS picks draft lengths each step.")


def fold_bass_flags(args: argparse.Namespace) -> None:
    """Move the BASS flags into args.speculative_config (a dict vLLM already accepts)."""
    worker = getattr(args, "spec_worker", None)
    flags: dict[str, Any] = {
        "model": getattr(args, "speculative_model", None),
        "num_speculative_tokens": getattr(args, "num_speculative_tokens", None),
        "draft_length_policy": getattr(args, "draft_length_policy", None),
    }
    given = {k: v for k, v in flags.items() if v is not None}
    if worker is None:
        if given:
            names = ", ".join("--" + {"model": "speculative-model"}.get(k, k.replace("_", "-"))
                              for k in given)
            raise BassConfigError(f"{names} need --spec-worker bass (vLLM's own draft-model "
                             "speculation uses --spec-model / --speculative-config)")
        return
    spec = getattr(args, "speculative_config", None)
    if isinstance(spec, str):
        spec = json.loads(spec)
    spec = dict(spec or {})
    if spec.get("method") not in (None, "bass"):
        raise BassConfigError(f"--spec-worker bass conflicts with --speculative-config method "
                         f"{spec['method']!r}; use method 'bass' or drop one of them")
    for key, value in given.items():
        if key in spec and spec[key] != value:
            raise BassConfigError(f"--{key.replace('_', '-')} and --speculative-config['{key}'] "
                             "disagree; give it once")
        spec[key] = value
    spec["method"] = "bass"
    if not spec.get("model"):
        raise BassConfigError("--spec-worker bass needs a draft model: add --speculative-model DRAFT")
    args.speculative_config = spec


def apply() -> None:
    def make_add(original):
        def add_cli_args(parser, *a, **kw):
            parser = original(parser, *a, **kw)
            add_bass_flags(parser)
            return parser
        return add_cli_args

    def make_from(original):
        def from_cli_args(cls, args):
            fold_bass_flags(args)
            return original(cls, args)
        return from_cli_args

    wrap("vllm.engine.arg_utils.EngineArgs.add_cli_args", make_add)
    wrap("vllm.engine.arg_utils.EngineArgs.from_cli_args", make_from)
