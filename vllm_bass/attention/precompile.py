"""Compile our attention kernels for the CUDA graphs before they are captured, in parallel.

Every plan a captured graph bakes in (PAD or SPLIT, tiles, split count; and each layer
configuration's KV-cache write) is its own Triton binary (for sm_90 on one CPU core: PAD
1.5-2 s, SPLIT ~3 s, the reduction and the KV write 0.2-0.4 s; session 34), and graph
capture met them one at a time: BASS's start-up on a fresh H100 took 111-119 s against
vLLM's 54-61 s, whose FA3 comes compiled (session 33). Here the metadata builders' plans for every graph
about to be captured (the target's FULL graphs from the dispatcher's keys, the drafter's
step and first-pass graphs from their sizes) are replayed through the real launchers with
the launches recorded, not run (`kernels.paged_attention.recording_launches`), and each
recorded launch becomes Triton's `warmup` (compile, no launch) inside Triton's
AsyncCompileMode over a thread pool: the compiles overlap (most of a compile runs without
the GIL: four took 4.0 s on two threads against 6.5 s in a row, session 34's CPU).

Since session 41 the plans of steps outside the graphs are compiled too (`eager_batches`:
one step per plan a prefill chunk or an uncaptured draft pass can choose, ~12 binaries per
head configuration): they compiled while serving before (steps of 0.6-0.8 s).

The drafter's bookkeeping kernels (`worker.drafter.kernel_warmup`) use the same pool.
Nothing here can fail the engine: a launch this misses compiles when the capture meets it,
as every launch did before. `VLLM_BASS_PRECOMPILE_THREADS=0` turns it off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import traceback
from dataclasses import dataclass
from types import SimpleNamespace

import torch

logger = logging.getLogger("vllm.bass")

MISSES_NAMED = 8  # binaries the captures compiled unforeseen: a log line each, at most
SERVING_NAMED = 8  # ... and compiled while serving (then only counted)
KEY_CHARS = 700  # of a Triton cache key in that line
STACK_FROM = ("vllm",)  # the frames that say where a capture met a compile (vllm, vllm_bass)


@dataclass(frozen=True)
class GraphBatch:
    """The batch one captured graph's attention metadata is built from."""
    num_reqs: int
    num_tokens: int
    max_query_len: int
    max_seq_len: int
    # built by `build_for_cudagraph_capture` (plans for any batch), else by
    # `build_for_drafting` (the draft step graphs: plans for exactly these rows)
    for_capture: bool
    uniform: bool = False  # `capturing_uniform_batch` while it is built
    eager: bool = False  # built by `build` (a step outside the graphs: its own plan)
    planned_query_len: int = 0  # `attention.planned_query_len` while it is built


# Candidate eager steps (`eager_batches`): requests, query lengths (the tiles follow the
# longest query) and contexts (PAD / SPLIT and the stages follow them)
EAGER_REQUESTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512)
EAGER_QUERY_LENS = (1, 2, 3, 5, 9, 17, 33, 65, 129, 513, 2049)
EAGER_SEQ_LENS = (16, 64, 200, 288, 512, 1024, 2048, 4096, 8192, 16384, 32768, 131072)
EAGER_MAX_TOKENS = 8192  # the replay's buffers hold this many tokens at most


def target_graph_batches(runner) -> list[GraphBatch]:
    """The target's FULL graphs, from the dispatcher's keys, as vLLM's dummy run builds
    their attention metadata (`_dummy_run`: the key's request count, its uniform query
    length, which `model_runner._warmup_and_capture` sets to 1 + K for BASS's
    verification-shaped mixed graphs; vLLM's own mixed dummy: a query of the whole batch)."""
    from vllm.config import CUDAGraphMode

    dispatcher = getattr(runner, "cudagraph_dispatcher", None)
    keys = getattr(dispatcher, "cudagraph_keys", {}).get(CUDAGraphMode.FULL, ())
    max_num_seqs = runner.scheduler_config.max_num_seqs
    from vllm_bass.attention.backend import short_query_plan_len

    verification_len = getattr(dispatcher, "full_max_query_len", None)
    batches = []
    for desc in keys:
        tokens = desc.num_tokens
        planned = short_query_plan_len(dispatcher, desc)  # a short-query graph's, else 0
        if desc.uniform:
            query_len = runner.uniform_decode_query_len
        else:
            query_len = planned or verification_len or tokens
        reqs = desc.num_reqs if desc.num_reqs is not None else min(
            tokens // query_len if desc.uniform else tokens, max_num_seqs)
        batches.append(GraphBatch(reqs, tokens, query_len, 1, True, bool(desc.uniform),
                                  planned_query_len=planned))
    return batches


def draft_graph_batches(drafter, capture_sizes: list[int]) -> list[GraphBatch]:
    """The drafter's step graphs (one token a row, `build_for_drafting`) and first-pass
    graphs (`build_for_cudagraph_capture` over `rows_for` rows), as their `capture` builds
    them."""
    batches = []
    steps = getattr(drafter, "bass_step_graphs", None)
    if steps is None or not steps.use_graphs:
        return batches
    for rows in steps.sizes_to_capture(capture_sizes):
        batches.append(GraphBatch(rows, rows, 1, drafter.max_model_len, False, True))
    first = getattr(drafter, "bass_first_pass_graphs", None)
    if first is not None and first.use_graphs and first.graphs_supported():
        for tokens in first.sizes_to_capture(capture_sizes):
            rows = first.rows_for(tokens, first.max_rows)
            batches.append(GraphBatch(rows, tokens, first.max_query_len,
                                      drafter.max_model_len, True, False))
    return batches


def eager_batches(builder, max_reqs: int, max_tokens: int, max_seq_len: int,
                  sms: int) -> list[GraphBatch]:
    """One step per plan a step outside the CUDA graphs can choose on `builder`'s layers (a
    prefill chunk or mixed batch under vLLM's piecewise graphs, the drafter's first pass
    where no graph holds it), the one with the fewest tokens. Those plans are their own
    binaries (ANY_BATCH off), which the graph replays never meet: session 41's H200 engines
    compiled three of them while serving (a prefill's 64-row PAD, the draft's catch-up PAD
    and SPLIT; steps of 0.6-0.8 s), inside timed repeats (11-13 against 5.5 ms a token at
    batch 16) and in the step times the plan's cost fit learns from."""
    from vllm_bass.kernels.paged_attention import choose_plan

    candidates = sorted(
        ((reqs * query, reqs, query, seq) for reqs in EAGER_REQUESTS if reqs <= max_reqs
         for query in EAGER_QUERY_LENS if reqs * query <= max_tokens
         for seq in EAGER_SEQ_LENS + (max_seq_len,) if query <= seq <= max_seq_len))
    plans: dict = {}
    for tokens, reqs, query, seq in candidates:
        plan = choose_plan(reqs, builder.num_heads_q, builder.num_heads_kv, builder.head_size,
                           query, seq, sms, elem_size=builder.dtype.itemsize)
        plans.setdefault((plan.strategy, plan.tiles),
                         GraphBatch(reqs, tokens, query, seq, False, eager=True))
    return list(plans.values())


def replay_launches(builder, batches: list[GraphBatch], block_table: torch.Tensor,
                    kv_cache: torch.Tensor, device: torch.device) -> list:
    """The launches of `batches` on `builder`'s layers (recorded, not run): the builder
    plans each batch as the capture will, and our attention impl launches the plan as a
    layer's forward does (`_ours`), after its KV-cache write. `block_table` and `kv_cache`
    (one layer's) are the ones the graphs read: their strides are specialised on; q is a
    slice of a packed QKV row, as a model's is."""
    from vllm_bass.attention import capturing_uniform_batch, planned_query_len
    from vllm_bass.attention.backend import BassAttentionImpl
    from vllm_bass.kernels import paged_attention

    heads, kv_heads, head_size = builder.num_heads_q, builder.num_heads_kv, builder.head_size
    most_tokens = max((b.num_tokens for b in batches), default=0)
    most_reqs = max((b.num_reqs for b in batches), default=0)
    if not most_tokens or block_table.shape[0] < most_reqs:
        return []
    impl = BassAttentionImpl(heads, head_size, head_size ** -0.5, kv_heads)
    q_width, kv_width = heads * head_size, kv_heads * head_size
    qkv = torch.empty(most_tokens, q_width + 2 * kv_width, dtype=builder.dtype, device=device)
    out = torch.empty(most_tokens, heads, head_size, dtype=builder.dtype, device=device)
    key_cache, value_cache = impl._split_cache(kv_cache)
    query_start_loc = torch.zeros(most_reqs + 1, dtype=torch.int32, device=device)
    seq_lens = torch.ones(most_reqs, dtype=torch.int32, device=device)
    slot_mapping = torch.zeros(most_tokens, dtype=torch.int64, device=device)
    kept = len(getattr(builder, "_captured_plans", ()))
    launches = []
    try:
        with paged_attention.recording_launches() as recorded:
            # the layer's KV-cache write (one binary whatever the batch)
            impl.do_kv_cache_update(
                None, qkv[:, q_width:q_width + kv_width].view(-1, kv_heads, head_size),
                qkv[:, q_width + kv_width:].view(-1, kv_heads, head_size), kv_cache,
                slot_mapping)
            for b in batches:
                cm = SimpleNamespace(
                    num_reqs=b.num_reqs, num_actual_tokens=b.num_tokens,
                    max_query_len=b.max_query_len, max_seq_len=b.max_seq_len,
                    query_start_loc=query_start_loc[:b.num_reqs + 1],
                    seq_lens=seq_lens[:b.num_reqs],
                    block_table_tensor=block_table[:b.num_reqs],
                    slot_mapping=slot_mapping[:b.num_tokens])
                token = capturing_uniform_batch.set(b.uniform)
                planned = planned_query_len.set(b.planned_query_len)
                try:
                    if b.eager:
                        md = builder.build(0, cm)
                    elif b.for_capture:
                        md = builder.build_for_cudagraph_capture(cm)
                    else:
                        md = builder.build_for_drafting(common_attn_metadata=cm,
                                                        draft_index=1)
                finally:
                    capturing_uniform_batch.reset(token)
                    planned_query_len.reset(planned)
                impl._ours(qkv[:, :q_width], key_cache, value_cache, out[:b.num_tokens], md)
            launches = list(recorded)
    finally:
        if hasattr(builder, "_captured_plans"):  # the replay's plans hold no graph
            del builder._captured_plans[kept:]
    return launches


def compile_launches(launches: list, device: torch.device, threads: int) -> dict:
    """Compile (Triton `warmup`: no launch) every launch's binary, on `threads` threads
    under Triton's AsyncCompileMode (one after the other where this Triton has none).
    Returns counts and seconds; raises nothing (a launch that fails here compiles, or
    fails, where it is launched)."""
    from concurrent.futures import ThreadPoolExecutor

    start = time.perf_counter()
    kernels = {id(launch.kernel): launch.kernel for launch in launches}
    before = _compiled(kernels.values(), device)
    failed: dict[str, str] = {}  # kernel (or stage) -> the first error
    errors = 0  # launches whose warm-up raised
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        AsyncCompileMode = None
    try:
        on_device = (torch.cuda.device(device) if device.type == "cuda"
                     else contextlib.nullcontext())
        with on_device, ThreadPoolExecutor(max(1, threads),
                                           thread_name_prefix="bass-compile") as pool:
            with (AsyncCompileMode(pool) if AsyncCompileMode is not None
                  else contextlib.nullcontext()):
                for launch in launches:
                    try:
                        launch.kernel.warmup(*launch.args, grid=launch.grid, **launch.meta)
                    except Exception as exc:  # noqa: BLE001 - compiles on first use instead
                        errors += 1
                        failed.setdefault(_name(launch.kernel), f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - an async compile failed: shows at its launch
        failed.setdefault("async compile", f"{type(exc).__name__}: {exc}")
        _drop_unfinished(kernels.values(), device)
    for name, why in failed.items():
        logger.warning("vllm-bass: compiling %s ahead failed (%s); it compiles on first use",
                       name, why)
    return {"launches": len(launches), "compiled": _compiled(kernels.values(), device) - before,
            "errors": errors, "failed": sorted(failed), "async": AsyncCompileMode is not None,
            "seconds": time.perf_counter() - start}


def _drop_unfinished(kernels, device: torch.device) -> None:
    """After a failed async compile, Triton may leave other launches' placeholders
    (FutureKernel) in the kernels' caches, unfinalised: finish each, or drop it so its
    launch compiles on its own."""
    if device.type != "cuda":
        return
    for kernel in kernels:
        with contextlib.suppress(Exception):
            cache = kernel.device_caches[_device_index(device)][0]
            for key, entry in list(cache.items()):
                if type(entry).__name__ == "FutureKernel":
                    try:
                        entry.result()
                    except Exception:  # noqa: BLE001
                        cache.pop(key, None)
                    if type(cache.get(key)).__name__ == "FutureKernel":
                        cache.pop(key, None)


def _name(kernel) -> str:
    fn = getattr(kernel, "fn", kernel)
    return getattr(fn, "__name__", type(kernel).__name__)


def _compiled(kernels, device: torch.device) -> int:
    """Binaries in the kernels' in-memory caches for `device` (0 if Triton's layout moved)."""
    if device.type != "cuda":
        return 0
    total = 0
    for kernel in kernels:
        with contextlib.suppress(Exception):
            total += len(kernel.device_caches[_device_index(device)][0])
    return total


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def precompile_threads() -> int:
    """`VLLM_BASS_PRECOMPILE_THREADS`: "auto" (half the CPUs, at most 8), N, or 0 (off)."""
    from vllm_bass import envs

    value = envs.get("VLLM_BASS_PRECOMPILE_THREADS").strip().lower()
    if value in ("", "auto"):
        return max(1, min(8, (os.cpu_count() or 2) // 2))
    if not value.isdigit():
        raise ValueError(f"VLLM_BASS_PRECOMPILE_THREADS={value!r}: expected 'auto' or a "
                         "number of threads (0 turns the precompile off)")
    return int(value)


def attention_binaries(device: torch.device) -> int:
    """Binaries of our attention kernels (and the KV-cache write) compiled in this process
    for `device`."""
    from vllm_bass.kernels.paged_attention import step_kernels

    return _compiled(step_kernels(), device)


def attention_binary_keys(device: torch.device) -> set[tuple[str, str]]:
    """(kernel, Triton cache key) of every binary `attention_binaries` counts: the key
    spells the specialisation and constexprs, so a miss can be told from its neighbours."""
    from vllm_bass.kernels.paged_attention import step_kernels

    keys: set[tuple[str, str]] = set()
    if device.type != "cuda":
        return keys
    for kernel in step_kernels():
        with contextlib.suppress(Exception):
            keys |= {(_name(kernel), str(key))
                     for key in kernel.device_caches[_device_index(device)][0]}
    return keys


def layer_kv_cache(runner, layer_name: str) -> torch.Tensor:
    """The KV cache tensor bound to an attention layer (vLLM's `bind_kv_cache`)."""
    return runner.compilation_config.static_forward_context[layer_name].kv_cache


def precompile_for_capture(runner) -> dict | None:
    """Compile every attention binary the target's and the drafter's graph captures will
    launch; the runner's `capture_model` calls it before capturing. None: not run (CPU,
    turned off, or the replay could not be planned)."""
    threads = precompile_threads()
    device = torch.device(getattr(runner, "device", "cpu"))
    if threads <= 0 or device.type != "cuda":
        return None
    start = time.perf_counter()
    launches = []
    drafter = getattr(runner, "drafter", None)
    draft_layers = set(getattr(drafter, "_draft_attn_layer_names", None) or ())
    try:
        target = target_graph_batches(runner)
        sizes = list(runner.compilation_config.cudagraph_capture_sizes or ())
        draft = draft_graph_batches(drafter, sizes) if drafter is not None else []
        for group, builder, is_draft in our_builders(runner, drafter, draft_layers):
            kv_cache = layer_kv_cache(runner, group.layer_names[0])
            if not is_draft:
                table = runner.input_batch.block_table[group.kv_cache_group_id]
                launches += replay_launches(
                    builder, target,
                    table.get_device_tensor(runner.scheduler_config.max_num_seqs),
                    kv_cache, device)
            elif draft:
                steps = drafter.bass_step_graphs
                steps._ensure_block_table(0)  # the draft graphs' own table (capture makes it)
                launches += replay_launches(builder, draft, steps.block_table, kv_cache,
                                            device)
    except Exception as exc:  # noqa: BLE001 - never fail the engine over a warm-up
        logger.warning("vllm-bass: could not plan the attention kernels' compiles ahead "
                       "(%s: %s); the graph capture compiles them", type(exc).__name__, exc)
        return None
    eager = eager_launches(runner, drafter, draft_layers, device)
    launches += eager
    torch.cuda.empty_cache()  # the replay's buffers and workspaces: back for the graphs
    result = compile_launches(launches, device, threads)
    result.update(threads=threads, total_seconds=time.perf_counter() - start,
                  eager_launches=len(eager),
                  binaries_after=attention_binaries(device),
                  keys_after=attention_binary_keys(device),
                  watch=CaptureCompileWatch.install())
    logger.info("vllm-bass: compiled %d attention kernel binaries for the CUDA graphs ahead "
                "of their capture (%d launches replayed, %d threads, %d errors) in %.1f s",
                result["compiled"], result["launches"], threads, result["errors"],
                result["total_seconds"])
    return result


def our_builders(runner, drafter, draft_layers: set):
    """(group, its builder, whether it is the drafter's) for every attention group on our
    backend: the target's groups (the draft's layers left out), then the drafter's."""
    from vllm_bass.attention.backend import BassAttentionMetadataBuilder

    groups = [(group, False) for groups in runner.attn_groups for group in groups
              if not set(group.layer_names) <= draft_layers]
    groups += [(group, True) for group in getattr(drafter, "draft_attn_groups", None) or ()]
    for group, is_draft in groups:
        builder = group.get_metadata_builder()
        if isinstance(builder, BassAttentionMetadataBuilder):
            yield group, builder, is_draft


def eager_launches(runner, drafter, draft_layers: set, device: torch.device) -> list:
    """The launches of `eager_batches` on the target's layers and the drafter's (both read
    the target's block table outside the graphs); [] where they cannot be planned (the
    graphs' compiles go ahead regardless)."""
    from vllm_bass.kernels.paged_attention import num_sms

    launches = []
    try:
        sms = num_sms(device)
        max_reqs = runner.scheduler_config.max_num_seqs
        table = None
        for group, builder, is_draft in our_builders(runner, drafter, draft_layers):
            if table is None:
                table = runner.input_batch.block_table[group.kv_cache_group_id]
            max_tokens = min(EAGER_MAX_TOKENS, int(
                getattr(drafter, "max_num_tokens", 0) if is_draft
                else runner.scheduler_config.max_num_batched_tokens) or EAGER_MAX_TOKENS)
            max_len = int(getattr(drafter, "max_model_len", 0) if is_draft
                          else runner.model_config.max_model_len) or builder.max_model_len
            batches = eager_batches(builder, max_reqs, max_tokens, max_len, sms)
            launches += replay_launches(builder, batches, table.get_device_tensor(max_reqs),
                                        layer_kv_cache(runner, group.layer_names[0]), device)
    except Exception as exc:  # noqa: BLE001 - never fail the engine over a warm-up
        logger.warning("vllm-bass: could not plan the eager attention compiles ahead (%s: "
                       "%s); steps outside the graphs compile them", type(exc).__name__, exc)
        return []
    return launches


def report_capture_misses(result: dict | None, device) -> int | None:
    """After the captures: log how many attention binaries they still compiled (launches
    the replay did not foresee). None when `precompile_for_capture` did not run."""
    if not result or "binaries_after" not in result:
        return None
    device = torch.device(device)
    watch = result.pop("watch", None)
    if watch is not None:
        watch.serving = True  # from here on a compile is a request's latency (`__call__`)
    missed = attention_binaries(device) - result["binaries_after"]
    logger.info("vllm-bass: the CUDA-graph captures compiled %d attention kernel binaries "
                "the precompile did not foresee", missed)
    if missed > 0:  # name them (bounded), beside what was compiled ahead for the same kernel
        before = result.get("keys_after", set())
        for name, key in sorted(attention_binary_keys(device) - before)[:MISSES_NAMED]:
            ahead = [k for n, k in sorted(before) if n == name][:2]
            met = watch.met.get((name, key), "?") if watch is not None else "?"
            logger.info("vllm-bass: not foreseen: %s %s; met at %s; compiled ahead for it: %s",
                        name, key[:KEY_CHARS], met, [k[:KEY_CHARS] for k in ahead])
    return missed


class CaptureCompileWatch:
    """Triton's post-compile hook while the graphs are captured: where each compile of our
    attention's kernels was met (the vLLM and vllm-bass frames of its stack), so a binary
    the precompile missed names the capture that planned it. Chains to the hook it found.
    After the captures (`serving`) it stays: a compile then stalls a request (H200, session
    40: a PAD and a SPLIT binary compiled in the first timed run at batch 4, 11.3 ms a token
    against 4.4 in the next runs), and vLLM's own warning names the kernel only; ours logs
    the specialisation and where it was met, for the first SERVING_NAMED of them."""

    def __init__(self, previous):
        from vllm_bass.kernels.paged_attention import step_kernels

        self.previous = previous
        self.names = {_name(kernel) for kernel in step_kernels()}
        self.met: dict[tuple[str, str], str] = {}
        self.serving = False
        self.serving_compiles = 0  # our kernels' compiles after the captures (all counted)

    @classmethod
    def install(cls) -> CaptureCompileWatch | None:
        try:
            from triton import knobs

            watch = cls(knobs.runtime.jit_post_compile_hook)
            knobs.runtime.jit_post_compile_hook = watch
            return watch
        except Exception:  # noqa: BLE001 - only the log's detail is lost
            return None

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            from triton import knobs

            if knobs.runtime.jit_post_compile_hook is self:
                knobs.runtime.jit_post_compile_hook = self.previous

    def __call__(self, *args, **kwargs):
        with contextlib.suppress(Exception):
            name = str(getattr(kwargs.get("fn"), "name", "")).rsplit(".", 1)[-1]
            if name in self.names:
                if self.serving:
                    self.serving_compiles += 1
                    if self.serving_compiles <= SERVING_NAMED:
                        logger.warning(
                            "vllm-bass: our attention compiled while serving (%d so far; a "
                            "stall for the requests of this step): %s %s; met at %s",
                            self.serving_compiles, name,
                            str(kwargs.get("key"))[:KEY_CHARS], self._where())
                elif len(self.met) < MISSES_NAMED:
                    self.met[(name, str(kwargs.get("key")))] = self._where()
        return self.previous(*args, **kwargs) if self.previous is not None else None

    @staticmethod
    def _where() -> str:
        """The vLLM and vllm-bass frames of the compile's stack, innermost first."""
        frames = [f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                  for f in traceback.extract_stack()[:-2]
                  if any(part in f.filename for part in STACK_FROM)]
        return " < ".join(frames[::-1][:12])

