"""The drafter's one-token steps as full CUDA graphs.

vLLM 0.27.1's draft-model drafter runs each one-token draft step under piecewise CUDA
graphs: attention and the KV-cache write of every layer run eagerly between the graph
pieces, the attention metadata is rebuilt on the host every step, and the position /
slot update is a separate launch. At the batch sizes speculation is for, a draft step is
then bound by host work (~0.5 ms for a 4-layer draft on an H100, session traces), several
times the draft's own GPU time, and the draft length that pays stays short.

Here one graph per padded batch size holds the whole step: the position, KV-slot and
seq_len update (`kernels.draft_step_update`, which reads the real batch size from device
memory so one graph serves every batch up to its size), the draft model's forward with
attention metadata built once, at capture, over persistent buffers, its logits, and the
greedy token written back as the next step's input. A step is then one graph replay plus
one copy of its tokens (and, for sampled requests, the draft sampler on the logits, run
eagerly so per-request generators and exact q stay as they are).

Padding rows (between the real batch and the graph's size) have seq_len 0, slot -1 (no KV
write) and are never read back. The metadata is captured with max_seq_len =
max_model_len (a bound, as the kernels take it; the lengths themselves are read from
`seq_lens` on the device). Where graphs are not available (CPU, eager mode) the same step
runs eagerly over the same buffers, so CPU CI exercises this path's bookkeeping.
"""

from __future__ import annotations

import contextlib
import logging

import numpy as np
import torch

logger = logging.getLogger("vllm.bass")


def measures_replays(parallel_config) -> bool:
    """Whether the captured step graphs are timed at start-up for the policy's draft-step
    price (VLLM_BASS_MEASURED_DRAFT_STEP, on by default since session 49): on a single rank
    only. Under tensor or pipeline parallelism a replay holds collectives, and a rank whose
    timing failed would leave the others waiting in theirs; there the fit alone prices a
    draft step, as before session 49 (measured on one GPU only)."""
    from vllm_bass import envs

    return (envs.flag("VLLM_BASS_MEASURED_DRAFT_STEP")
            and getattr(parallel_config, "tensor_parallel_size", 1) == 1
            and getattr(parallel_config, "pipeline_parallel_size", 1) == 1)


class DraftStepGraphs:
    """Persistent inputs and captured graphs of the drafter's one-token step."""

    def __init__(self, drafter, use_graphs: bool):
        self.drafter = drafter
        self.use_graphs = use_graphs
        device = drafter.device
        rows = drafter.max_batch_size
        self.max_rows = rows
        self.seq_lens = torch.zeros(rows, dtype=torch.int32, device=device)
        self.num_reqs = torch.zeros(1, dtype=torch.int32, device=device)
        self.tokens = torch.zeros(rows, dtype=torch.int64, device=device)
        self.logits: torch.Tensor | None = None  # [rows, vocab], written by every step
        self.block_table: torch.Tensor | None = None  # allocated with the block size
        self.query_start_loc_cpu = torch.from_numpy(np.arange(rows + 1, dtype=np.int32))
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}  # by size, ascending
        # size -> seconds of one replay (`time_replays`, at capture): the policy's draft
        # step price floor (`StepCostEstimator.set_measured_draft_steps`)
        self.replay_seconds: dict[int, float] = {}
        self.max_seq_len = 0  # eager steps: the batch's longest sequence (host side)
        from vllm_bass.kernels import draft_step_update as op

        self._update = op.draft_step_update if use_graphs else op.draft_step_update_ref

    # -- sizes ----------------------------------------------------------------------------
    def padded_rows(self, num_reqs: int) -> int | None:
        """The smallest captured size that holds `num_reqs` (eager: `num_reqs` itself);
        None when no graph is that large."""
        if not self.use_graphs:
            return num_reqs if num_reqs <= self.max_rows else None
        return next((size for size in self.graphs if size >= num_reqs), None)

    def _ensure_block_table(self, width: int) -> None:
        if self.block_table is None:
            d = self.drafter
            needed = -(-d.max_model_len // d.block_size)
            self.block_table = torch.zeros((self.max_rows, max(needed, width)),
                                           dtype=torch.int32, device=d.device)

    # -- per drafting step ------------------------------------------------------------------
    def load(self, num_reqs: int, rows: int, positions: torch.Tensor,
             seq_lens: torch.Tensor, block_table: torch.Tensor | None,
             first_tokens: torch.Tensor, max_seq_len: int) -> None:
        """Copy the state after the drafter's first pass into the persistent buffers
        (`rows` = padded_rows(num_reqs), what a step runs over): `positions` are those of
        the tokens just sampled, `seq_lens` count them as not yet in the draft's KV.
        `block_table` None: the first pass's graphs staged it here already."""
        d = self.drafter
        if block_table is not None:
            self._ensure_block_table(block_table.shape[1])
            width = min(block_table.shape[1], self.block_table.shape[1])
            self.block_table[:num_reqs, :width].copy_(block_table[:num_reqs, :width],
                                                      non_blocking=True)
        self.seq_lens[:num_reqs].copy_(seq_lens[:num_reqs], non_blocking=True)
        if rows > num_reqs:
            self.seq_lens[num_reqs:rows].zero_()
            self.block_table[num_reqs:rows].zero_()
            d.positions[num_reqs:rows].zero_()
        d.positions[:num_reqs].copy_(positions[:num_reqs], non_blocking=True)
        d.input_ids[:num_reqs].copy_(first_tokens[:num_reqs], non_blocking=True)
        self.num_reqs.fill_(num_reqs)
        self.max_seq_len = max_seq_len

    def step(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One draft step over `rows`: returns (logits [rows, V], greedy tokens [rows]);
        the greedy tokens are already the next step's input (sampled requests overwrite
        theirs, see `set_inputs`)."""
        graph = self.graphs.get(rows) if self.use_graphs else None
        if graph is not None:
            graph.replay()
        else:
            self.max_seq_len = min(self.max_seq_len + 1, self.drafter.max_model_len)
            self._forward(rows, self.max_seq_len)
        return self.logits[:rows], self.tokens[:rows]

    def set_inputs(self, tokens: torch.Tensor) -> None:
        self.drafter.input_ids[:tokens.shape[0]].copy_(tokens)

    # -- the step itself --------------------------------------------------------------------
    def _common_metadata(self, rows: int, max_seq_len: int):
        from vllm.v1.attention.backend import CommonAttentionMetadata

        d = self.drafter
        return CommonAttentionMetadata(
            query_start_loc=d.arange[:rows + 1],
            query_start_loc_cpu=self.query_start_loc_cpu[:rows + 1],
            seq_lens=self.seq_lens[:rows],
            num_reqs=rows,
            num_actual_tokens=rows,
            max_query_len=1,
            max_seq_len=max_seq_len,
            block_table_tensor=self.block_table[:rows],
            slot_mapping=d._slot_mapping_buffer[:rows],
            causal=True,
        )

    def _forward(self, rows: int, max_seq_len: int) -> None:
        d = self.drafter
        self._update(d.positions[:rows], self.block_table, self.seq_lens[:rows],
                     d._slot_mapping_buffer[:rows], self.num_reqs, d.block_size,
                     d.max_model_len)
        hidden = run_draft_model(d, self._common_metadata(rows, max_seq_len), rows,
                                 draft_index=1)
        self.store_logits(d.model.compute_logits(hidden), rows)
        d.input_ids[:rows].copy_(self.tokens[:rows])

    def store_logits(self, logits: torch.Tensor, rows: int) -> None:
        """Into the persistent logits (allocated at the first call) and their argmax."""
        if self.logits is None:
            self.logits = torch.empty((self.max_rows, logits.shape[-1]), dtype=logits.dtype,
                                      device=logits.device)
        self.logits[:rows].copy_(logits)
        torch.argmax(logits, dim=-1, out=self.tokens[:rows])

    # -- capture --------------------------------------------------------------------------
    def sizes_to_capture(self, sizes: list[int]) -> list[int]:
        """The batch sizes `capture` captures for vLLM's capture sizes, largest first."""
        wanted = {s for s in sizes if 0 < s <= self.max_rows}
        if sizes and max(sizes) > self.max_rows:
            # the batches between the largest size that fits and max_num_seqs (BASS's
            # sizes are multiples of 1 + K: with K=4 and 8 sequences, batches 6-8 had none)
            wanted.add(self.max_rows)
        return sorted(wanted, reverse=True)

    def capture(self, sizes: list[int]) -> None:
        """One graph per size, largest first (the smaller ones reuse its memory pool)."""
        from vllm.distributed.parallel_state import graph_capture

        d = self.drafter
        self._ensure_block_table(0)
        sizes = self.sizes_to_capture(sizes)
        if not sizes:
            return
        from vllm.platforms import current_platform

        from vllm_bass.attention import capturing_uniform_batch

        pool = current_platform.get_global_graph_pool()  # shared with vLLM's graphs

        uniform = capturing_uniform_batch.set(True)  # our backend: plan for these rows
        try:
            with graph_capture(device=d.device), _no_gc():
                for rows in sizes:
                    self._dummy_batch(rows)
                    self._forward(rows, d.max_model_len)  # warm-up (compiles, allocates)
                    torch.cuda.synchronize()
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph, pool=pool,
                                          stream=torch.cuda.current_stream()):
                        self._forward(rows, d.max_model_len)
                    self.graphs[rows] = graph
                torch.cuda.synchronize()
            self.graphs = dict(sorted(self.graphs.items()))  # padded_rows: smallest first
            if measures_replays(d.vllm_config.parallel_config):
                self.replay_seconds = self._timed_or_none()
        finally:
            capturing_uniform_batch.reset(uniform)
            self.seq_lens.zero_()
            self.num_reqs.zero_()
        logger.info("vllm-bass: captured full CUDA graphs of the draft step for batch sizes "
                    "%s; one replay takes %s us", list(self.graphs),
                    {rows: round(t * 1e6, 1) for rows, t in self.replay_seconds.items()})

    def _dummy_batch(self, rows: int) -> None:
        """`rows` requests of one cached token at position 0, token 0, their KV slots in
        the block table's block 0 (vLLM's null block): what capture and timing replay."""
        d = self.drafter
        self.num_reqs.fill_(rows)
        self.seq_lens[:rows].fill_(1)
        d.positions[:rows].zero_()
        d.input_ids[:rows].zero_()

    def _timed_or_none(self) -> dict[int, float]:
        """`time_replays`, or {} (the policy's fit alone) where timing fails: a
        measurement must not stop the engine from starting."""
        try:
            return self.time_replays()
        except Exception as e:  # noqa: BLE001
            logger.warning("vllm-bass: draft step graphs not timed (%s: %s)",
                           type(e).__name__, e)
            return {}

    def time_replays(self, warmup: int = 3, timed: int = 10) -> dict[int, float]:
        """Seconds of one replay of each captured graph, the median of `timed` back-to-back
        replays timed on the GPU (contexts of a few tokens: the KV each step reads is tiny
        at the batch sizes drafting pays, and the cost is the draft's weights and its
        kernels' latency). Each replay writes one slot of the block table's block 0, as the
        capture did. Run once, right after the capture."""
        seconds = {}
        for rows, graph in self.graphs.items():
            self._dummy_batch(rows)
            for _ in range(warmup):
                graph.replay()
            events = [torch.cuda.Event(enable_timing=True) for _ in range(timed + 1)]
            events[0].record()
            for event in events[1:]:
                graph.replay()
                event.record()
            events[-1].synchronize()
            laps = sorted(a.elapsed_time(b) for a, b in zip(events, events[1:]))
            seconds[rows] = laps[len(laps) // 2] * 1e-3
        return seconds


def draft_attention_metadata(d, cad, draft_index: int, any_batch_graph: bool = False) -> dict:
    """Per-layer attention metadata of a draft pass (vLLM's drafting build).
    `any_batch_graph`: the pass is captured into a graph that will replay batches of other
    layouts (the first pass); a backend whose launch plans follow the batch they are built
    for (ours: `captures_any_batch`) then plans for any batch of the graph's sizes."""
    if not any_batch_graph:
        return d.build_per_group_and_layer_attn_metadata(cad, draft_index=draft_index)[1]
    per_layer = {}
    for group in d.draft_attn_groups:
        builder = group.get_metadata_builder()
        if getattr(builder, "captures_any_batch", False):
            metadata = builder.build_for_cudagraph_capture(cad)
        else:
            metadata = builder.build_for_drafting(common_attn_metadata=cad,
                                                  draft_index=draft_index)
        per_layer.update(dict.fromkeys(group.layer_names, metadata))
    return per_layer


def run_draft_model(d, cad, tokens: int, draft_index: int,
                    any_batch_graph: bool = False) -> torch.Tensor:
    """The draft model over the drafter's first `tokens` input slots, with attention
    metadata built from `cad`. CUDAGraphMode.NONE: vLLM's piecewise wrappers run inline, so
    this can run inside a graph we capture."""
    from vllm.config import CUDAGraphMode
    from vllm.forward_context import set_forward_context

    per_layer = draft_attention_metadata(d, cad, draft_index, any_batch_graph)
    slots = d._slot_mapping_buffer[:tokens]
    with set_forward_context(per_layer, d.vllm_config, num_tokens=tokens,
                             cudagraph_runtime_mode=CUDAGraphMode.NONE,
                             slot_mapping={n: slots for n in d._draft_attn_layer_names}):
        return d.model(input_ids=d.input_ids[:tokens], positions=d.positions[:tokens],
                       inputs_embeds=None)


@contextlib.contextmanager
def _no_gc():
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
