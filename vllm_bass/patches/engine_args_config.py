"""Patch: `EngineArgs.create_engine_config` (vllm/engine/arg_utils.py).

What: a speculative config with `"method": "bass"` is rewritten, before vLLM validates it,
into vLLM's own `draft_model` config (so vLLM loads the draft and gives it paged KV) plus our
worker and scheduler classes and the validated BassConfig in `additional_config["bass"]`.
After vLLM built the config, the draft is checked against the target (vocabulary, tokenizer,
context length) so a bad pair fails here, before any engine process starts.
Why: `SpeculativeConfig.method` is a closed Literal in 0.27.1; this is the one front-end
function that sees every user surface (CLI, `LLM(...)`, `AsyncLLM`) and runs before workers
exist.
When it can go: when vLLM accepts plugin speculative methods (RFC #48202 direction).
"""

from __future__ import annotations

from vllm_bass.engine_config import (choose_attention_backends, translate_engine_args,
                                     validate_draft_against_target)
from vllm_bass.patches import wrap

PATCHED_SYMBOLS = {
    "vllm.engine.arg_utils.EngineArgs.create_engine_config":
        "(self, usage_context: typing.Any | None = None, headless: bool = False) -> vllm.config.vllm.VllmConfig",
}


def apply() -> None:
    def make(original):
        def create_engine_config(self, *args, **kwargs):
            cfg = translate_engine_args(self)
            vllm_config = original(self, *args, **kwargs)
            if cfg is not None:
                validate_draft_against_target(vllm_config, cfg)
                choose_attention_backends(vllm_config, cfg)
            return vllm_config
        return create_engine_config

    wrap("vllm.engine.arg_utils.EngineArgs.create_engine_config", make)
