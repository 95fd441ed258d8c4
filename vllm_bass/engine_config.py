"""BASS options -> vLLM's engine config (called by `patches/engine_args_config` from
`EngineArgs.create_engine_config`, the one front-end function every user surface goes
through: CLI, `LLM(...)`, `AsyncLLM`).

A speculative config with `"method": "bass"` becomes vLLM's own `draft_model` config (so vLLM
loads the draft and gives it paged KV) plus our worker and scheduler classes and the
validated BassConfig in `additional_config["bass"]`. After vLLM built the config, the draft
is checked against the target (vocabulary, tokenizer, context length), so a bad pair fails
before any engine process starts, and the attention backends are chosen.
"""

from __future__ import annotations

import functools

import logging
from typing import Any

from vllm_bass.config import (
    ADDITIONAL_CONFIG_KEY,
    DEFAULT_POLICY,
    BassConfig,
    BassConfigError,
    default_max_draft,
)

logger = logging.getLogger("vllm.bass")  # under vLLM's handlers


WORKER_CLS = {"cpu": "vllm_bass.worker.cpu_worker.BassCPUWorker", "gpu": "vllm_bass.worker.gpu_worker.BassGPUWorker"}
SCHEDULER_CLS = "vllm_bass.scheduler.BassScheduler"
# vLLM speculative-config keys that we hand through to its draft_model config unchanged.
PASSTHROUGH_KEYS = {
    "model", "num_speculative_tokens", "max_model_len", "draft_tensor_parallel_size",
    "tensor_parallel_size", "quantization", "revision", "code_revision", "enforce_eager",
    "attention_backend", "kv_cache_dtype", "disable_padded_drafter_batch",
}



def split_bass_spec(spec: dict[str, Any]) -> tuple[dict[str, Any], BassConfig]:
    """{"method": "bass", ...} -> (vLLM draft_model spec dict, BassConfig)."""
    spec = {k.replace("-", "_"): v for k, v in spec.items() if k != "method"}
    bass_fields = set(BassConfig.__dataclass_fields__) - {"draft_model", "num_speculative_tokens"}
    vllm_spec = {k: v for k, v in spec.items() if k in PASSTHROUGH_KEYS}
    options = {k: v for k, v in spec.items() if k in bass_fields}
    # vLLM-style synthetic acceptance keys are accepted too, for like-for-like benchmarks.
    method = spec.get("rejection_sample_method", "standard")
    if method not in ("standard", "synthetic"):
        raise BassConfigError(f"speculative_config['rejection_sample_method'] must be "
                              f"'standard' or 'synthetic' with method 'bass'; got {method!r}")
    unknown = sorted(set(spec) - PASSTHROUGH_KEYS - bass_fields - {
        "rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length"})
    if unknown:
        raise BassConfigError(
            f"speculative_config keys {unknown} are not supported with method 'bass'; valid: "
            f"{sorted(PASSTHROUGH_KEYS | bass_fields)} and vLLM's synthetic acceptance keys")
    policy = options.setdefault("draft_length_policy", DEFAULT_POLICY)
    k = spec.get("num_speculative_tokens")
    if k is None:
        k = default_max_draft(policy)
    if method == "synthetic":
        options["acceptance_mode"] = "synthetic"
        length = spec.get("synthetic_acceptance_length")
        if length is not None:
            from vllm.config.speculative import SpeculativeConfig
            if "synthetic_acceptance_rates" in spec:
                raise BassConfigError("give synthetic_acceptance_rates or "
                                      "synthetic_acceptance_length, not both")
            options["synthetic_acceptance_rates"] = (
                SpeculativeConfig._resolve_synthetic_acceptance_rates(
                    int(k), None, float(length)))
    if "synthetic_acceptance_rates" in spec:
        options["synthetic_acceptance_rates"] = list(spec["synthetic_acceptance_rates"])
    if options.get("initial_draft_length") is None and isinstance(k, int) and not isinstance(k, bool):
        options["initial_draft_length"] = max(1, min(7, k))
    cfg = BassConfig(draft_model=spec.get("model"), num_speculative_tokens=k, **options)
    vllm_spec.update(
        method="draft_model",
        num_speculative_tokens=cfg.num_speculative_tokens,
        draft_sample_method=cfg.draft_sample_method,
        rejection_sample_method="standard",
    )
    return vllm_spec, cfg


def translate_engine_args(args: Any) -> BassConfig | None:
    """Rewrite a BASS request on EngineArgs in place; returns its BassConfig (None if not BASS)."""
    spec = args.speculative_config
    if isinstance(spec, str):
        import json
        spec = json.loads(spec)
    if not isinstance(spec, dict) or spec.get("method") != "bass":
        extra = args.additional_config or {}
        if ADDITIONAL_CONFIG_KEY in extra:  # translated already (create_engine_config re-run)
            return BassConfig.from_dict(dict(extra[ADDITIONAL_CONFIG_KEY]))
        return None
    vllm_spec, cfg = split_bass_spec(spec)
    from vllm.platforms import current_platform

    worker = WORKER_CLS["cpu" if current_platform.is_cpu() else "gpu"]
    if args.worker_cls not in ("auto", worker):
        raise BassConfigError(f"--worker-cls {args.worker_cls!r} conflicts with --spec-worker "
                              f"bass, which runs its own worker ({worker}); drop --worker-cls")
    if args.scheduler_cls not in (None, SCHEDULER_CLS):
        raise BassConfigError(f"--scheduler-cls {args.scheduler_cls!r} conflicts with "
                              f"--spec-worker bass ({SCHEDULER_CLS}); drop --scheduler-cls")
    args.worker_cls = worker
    args.scheduler_cls = SCHEDULER_CLS
    # Async scheduling: vLLM leaves it off for draft_model speculation unless asked; BASS
    # turns it on on CUDA unless the user said --no-async-scheduling (the scheduler's next
    # step is planned while this one runs: measured the faster mode for every BASS policy,
    # benchmarks/results/README.md). CPU runs sync (vLLM forces it off there).
    if getattr(args, "async_scheduling", None) is None and current_platform.is_cuda():
        args.async_scheduling = True
    if current_platform.is_cuda():
        default_capture_sizes(args)
    args.speculative_config = vllm_spec
    args.additional_config = dict(args.additional_config or {})
    args.additional_config[ADDITIONAL_CONFIG_KEY] = cfg.to_dict()
    precheck_draft_path(cfg.draft_model)
    precheck_vocabulary(args, cfg)
    precheck_environment()
    return cfg


def precheck_environment() -> None:
    """The environment variables the workers parse, checked before any engine process
    starts (a bad value would otherwise end the start-up after the model loaded)."""
    from vllm_bass.attention.precompile import precompile_threads
    from vllm_bass.kernels.paged_attention import pad_stages_cap

    try:
        precompile_threads()
        pad_stages_cap()
    except ValueError as exc:
        raise BassConfigError(str(exc)) from None


# vLLM captures CUDA graphs up to min(2 x max_num_seqs x (1 + K), 512) tokens. Speculation
# at large batches verifies more than that (batch 128 with 3 drafts each: 512 tokens, and the
# draft's first pass one slot more per request, 640), and above the largest graph the
# target and the draft's first pass run eagerly: host-bound, the GPU idle ~25% of a batch-128
# step on the H100 (session 11's profile). BASS captures vLLM's sizes up to 512 and then
# coarser ones up to LARGEST_CAPTURE_SIZE, bounded by CAPTURE_TOKENS_PER_SEQ x max_num_seqs.
EXTRA_CAPTURE_SIZES = (576, 640, 704, 768, 832, 896, 960, 1024, 1152, 1280, 1408, 1536)
LARGEST_CAPTURE_SIZE = EXTRA_CAPTURE_SIZES[-1]
CAPTURE_TOKENS_PER_SEQ = 6


def bass_capture_sizes(max_num_seqs: int | None, max_model_len: int | None = None) -> list[int]:
    """vLLM's default capture sizes up to 512, then EXTRA_CAPTURE_SIZES up to
    CAPTURE_TOKENS_PER_SEQ tokens per sequence (max_num_seqs unknown: all of them) and never
    past max_model_len (vLLM's graph-memory profiling runs one sequence of the largest size;
    a drafter's dummy run past the context crashed there, session 8)."""
    largest = LARGEST_CAPTURE_SIZE if not max_num_seqs else min(
        LARGEST_CAPTURE_SIZE, max(512, CAPTURE_TOKENS_PER_SEQ * int(max_num_seqs)))
    if max_model_len:
        largest = min(largest, max(512, int(max_model_len)))
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
    return sizes + [s for s in EXTRA_CAPTURE_SIZES if s <= largest]


def default_capture_sizes(args: Any) -> None:
    """BASS's capture sizes, unless the user chose sizes, a largest size or eager mode."""
    if getattr(args, "enforce_eager", False):
        return
    compilation = getattr(args, "compilation_config", None)

    def chosen(obj) -> bool:
        get = obj.get if isinstance(obj, dict) else (lambda k: getattr(obj, k, None))
        return obj is not None and (get("cudagraph_capture_sizes") is not None
                                    or get("max_cudagraph_capture_size") is not None
                                    or str(get("cudagraph_mode")).endswith("NONE"))
    if chosen(args) or chosen(compilation):
        return
    args.cudagraph_capture_sizes = bass_capture_sizes(getattr(args, "max_num_seqs", None),
                                                      _context_length(args))


def precheck_draft_path(draft: str) -> None:
    """A local draft path that holds no model: vLLM's own error is a pydantic dump of the
    target's arguments that never says "draft"."""
    import os

    path = os.path.expanduser(draft)
    looks_local = draft.startswith(("/", "./", "../", "~")) or os.path.exists(path)
    if not looks_local:
        return  # a Hugging Face repo id: vLLM resolves it
    if not os.path.isdir(path):
        raise BassConfigError(f"--speculative-model {draft!r}: no such directory (give a "
                              "draft model folder with config.json, or a Hugging Face repo id)")
    if not any(os.path.exists(os.path.join(path, f)) for f in ("config.json", "params.json")):
        raise BassConfigError(f"--speculative-model {draft!r} has no config.json: not a model "
                              "folder")


def _tokenizer_vocab(path: str, revision: str | None, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, revision=revision,
                                            trust_remote_code=trust_remote_code)
    except Exception as exc:  # a draft folder without tokenizer files
        logger.warning("vllm-bass: could not load tokenizer from %s (%s); "
                       "checking the vocabulary size only", path, exc)
        return None
    return tok.get_vocab(), tok.bos_token_id, tok.eos_token_id


@functools.lru_cache(maxsize=8)
def _hf_text_config(path: str, revision: str | None, trust_remote_code: bool):
    """The model's (text) Hugging Face config, or None when it cannot be loaded."""
    from transformers import AutoConfig

    try:
        hf = AutoConfig.from_pretrained(path, revision=revision,
                                        trust_remote_code=trust_remote_code)
    except Exception:
        return None  # let vLLM report an unloadable model in its own words
    return hf.get_text_config() if hasattr(hf, "get_text_config") else hf


def _vocab_size(path: str, revision: str | None, trust_remote_code: bool) -> int | None:
    return getattr(_hf_text_config(path, revision, trust_remote_code), "vocab_size", None)


def _context_length(args: Any) -> int | None:
    """--max-model-len, else the target's own context (what vLLM will derive)."""
    given = getattr(args, "max_model_len", None)
    if isinstance(given, int):
        return given
    text = _hf_text_config(args.model, getattr(args, "revision", None),
                           bool(getattr(args, "trust_remote_code", False)))
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(text, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def precheck_vocabulary(args: Any, cfg: BassConfig) -> None:
    """Before vLLM builds configs: its own vocab check would fire first, without the flag."""
    trust = bool(getattr(args, "trust_remote_code", False))
    t_vocab = _vocab_size(args.model, getattr(args, "revision", None), trust)
    d_vocab = _vocab_size(cfg.draft_model, args.speculative_config.get("revision"), trust)
    if t_vocab is not None and d_vocab is not None and t_vocab != d_vocab:
        raise BassConfigError(
            f"--speculative-model {cfg.draft_model!r} has vocabulary size {d_vocab} but the "
            f"target {args.model!r} has {t_vocab}; BASS needs a draft with the target's "
            "tokenizer and vocabulary")


def validate_draft_against_target(vllm_config: Any, cfg: BassConfig) -> None:
    target = vllm_config.model_config
    spec = vllm_config.speculative_config
    draft = spec.draft_model_config
    draft_max = getattr(draft.hf_text_config, "max_position_embeddings", None)
    if draft_max is not None and draft_max < target.max_model_len:
        raise BassConfigError(
            f"--speculative-model {cfg.draft_model!r} supports {draft_max} positions, fewer "
            f"than the target's max_model_len {target.max_model_len}; pass --max-model-len "
            f"{draft_max} (or less), or use a draft with a longer context")
    if cfg.check_tokenizer and not target.skip_tokenizer_init:
        t = _tokenizer_vocab(target.tokenizer, target.tokenizer_revision,
                             target.trust_remote_code)
        # vLLM points the draft's ModelConfig at the TARGET's tokenizer; read the draft's own.
        d = _tokenizer_vocab(cfg.draft_model, draft.revision, draft.trust_remote_code)
        if t is not None and d is not None and t != d:
            raise BassConfigError(
                f"--speculative-model {cfg.draft_model!r} uses a different tokenizer than the "
                f"target {target.model!r} (vocabularies or special tokens differ); BASS "
                "verifies token ids, so both must share one tokenizer "
                "(set check_tokenizer=false only if you know they agree)")


def choose_attention_backends(vllm_config: Any, cfg: BassConfig) -> None:
    """`attention: bass` on CUDA: our Triton backend (vLLM's CUSTOM slot) for target and
    draft (`target`: the target only), each unless a backend was chosen for it or its model
    needs what the kernels do not implement (then vLLM chooses, and the log says why)."""
    from vllm.platforms import current_platform

    if cfg.attention == "vllm" or not current_platform.is_cuda():
        return
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    from vllm_bass.attention.backend import default_backend_unsupported

    kv_dtype = vllm_config.cache_config.cache_dtype
    spec = vllm_config.speculative_config
    for role, model_config, holder, field in (
            ("target", vllm_config.model_config, vllm_config.attention_config, "backend"),
            ("draft", spec.draft_model_config, spec, "attention_backend")):
        if role == "draft" and cfg.attention == "target":
            continue
        if getattr(holder, field) is not None:
            continue  # chosen by the user
        why_not = default_backend_unsupported(model_config, kv_dtype,
                                              current_platform.get_device_capability())
        if why_not:
            logger.info("vllm-bass: %s keeps vLLM's attention backend (%s)", role, why_not)
            continue
        setattr(holder, field, AttentionBackendEnum.CUSTOM)
