"""The drafter's first pass (the ragged pass over the verified tokens) as full CUDA graphs.

vLLM 0.27.1 runs the draft model's first pass of every step under piecewise CUDA graphs:
attention and the KV-cache write of each layer run eagerly between the pieces, and the
attention metadata is built on the host. On an H100 that pass was the largest host cost of
a drafting step (~2 of ~3 ms at batch 1 for a 4-layer draft, session 15 traces), several
times its GPU time, so drafting steps were host-bound at batch 1-8.

Here vLLM still lays out the pass's inputs (`set_inputs_first_pass`: its own kernel and
slot arithmetic, untouched); we copy the layout's metadata into persistent buffers and
replay one graph, keyed by the padded token count, that holds the draft model's forward
with the attention metadata built once at capture over those buffers, the gather of each
request's sampled row, its logits and their argmax. Captured as vLLM's FULL graphs for
EAGLE are (vLLM PR #34880): persistent query_start_loc / seq_lens / slot_mapping, bounds
(max query length, max_model_len) baked at capture, the real lengths read on the device.

Padding: tokens between the pass's T and the graph's size belong to no request (slot -1:
no KV write, never sampled); rows between the batch and the graph's row count have query
length 0 and seq_len 0. A pass that does not fit a graph (a prefill chunk longer than the
bound, more tokens than the largest graph, a sequence at max_model_len) runs vLLM's
piecewise pass, as before. Where graphs are off (CPU, eager mode) the same forward runs
eagerly over the same buffers at the real sizes, so CPU CI exercises the bookkeeping.
"""

from __future__ import annotations

import logging
import time

import torch

from vllm_bass.worker.drafter.draft_graphs import _no_gc, run_draft_model

logger = logging.getLogger("vllm.bass")

PADDING_SLOT_ID = -1  # vLLM's: reshape_and_cache skips it


class FirstPassGraphs:
    """Persistent metadata and captured graphs of the drafter's first pass. Shares the
    drafter's input/position/slot buffers and the step graphs' block table and logits."""

    def __init__(self, drafter, steps, use_graphs: bool, max_query_len: int):
        self.drafter = drafter
        self.steps = steps  # DraftStepGraphs: block_table, logits and tokens are shared
        self.use_graphs = use_graphs
        self.max_query_len = max_query_len  # the graphs' bound on one request's tokens
        device = drafter.device
        rows = drafter.max_batch_size
        self.max_rows = rows
        self.max_tokens = drafter.max_num_tokens
        self.query_start_loc = torch.zeros(rows + 1, dtype=torch.int32, device=device)
        self.seq_lens = torch.zeros(rows, dtype=torch.int32, device=device)
        self.sample_rows = torch.zeros(rows, dtype=torch.int64, device=device)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}  # by token count (rows: rows_for)
        self.replays = 0  # passes that ran through a graph (tests, traces)
        self.eager = 0  # passes that ran the same forward eagerly (no graph of their size)
        self.fallbacks = 0  # passes that did not fit and ran vLLM's piecewise pass

    def stats(self) -> dict:
        return {"replays": self.replays, "eager": self.eager, "fallbacks": self.fallbacks,
                "graphs": list(self.graphs)}

    @classmethod
    def for_drafter(cls, drafter, steps) -> "FirstPassGraphs":
        """Graphs where the step graphs have them, bounded to verification-shaped passes (a
        request's 1 + K verified tokens and the extra slot; longer ones run vLLM's pass);
        eager: every pass, at its real size."""
        from vllm_bass.worker.cuda_graphs import verification_query_len

        if steps.use_graphs:
            return cls(drafter, steps, True, verification_query_len(drafter.vllm_config) + 1)
        return cls(drafter, steps, False, drafter.max_num_tokens)

    def graphs_supported(self) -> bool:
        """Every draft attention backend takes full graphs of any batch (FA3; ours, whose
        captured launches plan for any batch: `draft_attention_metadata`)."""
        from vllm_bass.worker.cuda_graphs import full_graphs_supported

        groups = self.drafter.draft_attn_groups
        if not groups:
            return False
        return full_graphs_supported(self.drafter.vllm_config, [[g.backend] for g in groups],
                                     groups)

    # -- which passes fit ---------------------------------------------------------------------
    @staticmethod
    def rows_for(tokens: int, max_rows: int) -> int:
        """Rows a graph of `tokens` tokens holds: every request brings at least two tokens
        to the first pass (one verified token and the extra slot)."""
        return max(1, min(tokens // 2, max_rows))

    def padded_tokens(self, num_tokens: int, num_reqs: int, max_query_len: int,
                      max_seq_len: int) -> int | None:
        """The graph size that serves this pass (eager: `num_tokens`), or None: run vLLM's
        pass. All host-side values of the pass's metadata, no device reads."""
        d = self.drafter
        if (max_query_len > self.max_query_len or max_seq_len > d.max_model_len
                or num_reqs > self.max_rows or num_tokens > self.max_tokens):
            return None
        if not self.use_graphs:
            return num_tokens
        for size in self.graphs:
            if size >= num_tokens and self.rows_for(size, self.max_rows) >= num_reqs:
                return size
        return None

    # -- per drafting step --------------------------------------------------------------------
    def stage(self, num_tokens: int, padded: int, sample_rows: torch.Tensor, cad) -> int:
        """Copy the pass's layout (vLLM's `set_inputs_first_pass` output) into the graph's
        buffers; returns the rows the pass runs over."""
        d, steps = self.drafter, self.steps
        batch = cad.num_reqs
        rows = self.rows_for(padded, self.max_rows) if self.use_graphs else batch
        steps._ensure_block_table(cad.block_table_tensor.shape[1])
        width = min(cad.block_table_tensor.shape[1], steps.block_table.shape[1])
        steps.block_table[:batch, :width].copy_(cad.block_table_tensor[:batch, :width],
                                                non_blocking=True)
        slots = d._slot_mapping_buffer
        slots[:num_tokens].copy_(cad.slot_mapping[:num_tokens], non_blocking=True)
        self.query_start_loc[:batch + 1].copy_(cad.query_start_loc[:batch + 1],
                                               non_blocking=True)
        self.seq_lens[:batch].copy_(cad.seq_lens[:batch], non_blocking=True)
        self.sample_rows[:batch].copy_(sample_rows[:batch], non_blocking=True)
        if padded > num_tokens:
            slots[num_tokens:padded].fill_(PADDING_SLOT_ID)
        if rows > batch:
            self.query_start_loc[batch + 1:rows + 1].fill_(num_tokens)
            self.seq_lens[batch:rows].zero_()
            self.sample_rows[batch:rows].zero_()
        return rows

    def run(self, num_tokens: int, padded: int, rows: int, cad) -> torch.Tensor:
        """The pass: returns the sampled rows' logits [rows, V] (greedy tokens in
        `steps.tokens[:rows]`)."""
        graph = self.graphs.get(padded) if self.use_graphs else None
        if graph is not None:
            graph.replay()
            self.replays += 1
        else:  # eager: the real sizes, vLLM's host-side metadata of this pass
            self.eager += 1
            self._forward(padded, rows, cad.replace(
                query_start_loc=self.query_start_loc[:rows + 1],
                seq_lens=self.seq_lens[:rows],
                block_table_tensor=self.steps.block_table[:rows],
                slot_mapping=self.drafter._slot_mapping_buffer[:num_tokens]))
        return self.steps.logits[:rows]

    # -- the pass itself ----------------------------------------------------------------------
    def _capture_metadata(self, tokens: int, rows: int):
        from vllm.v1.attention.backend import CommonAttentionMetadata

        d = self.drafter
        # host shadow of the bound: FA3 reads only the device tensors and the scalars
        query_start_loc_cpu = torch.clamp(
            torch.arange(rows + 1, dtype=torch.int32) * self.max_query_len, max=tokens)
        return CommonAttentionMetadata(
            query_start_loc=self.query_start_loc[:rows + 1],
            query_start_loc_cpu=query_start_loc_cpu,
            seq_lens=self.seq_lens[:rows],
            num_reqs=rows,
            num_actual_tokens=tokens,
            max_query_len=self.max_query_len,
            max_seq_len=d.max_model_len,
            block_table_tensor=self.steps.block_table[:rows],
            slot_mapping=d._slot_mapping_buffer[:tokens],
            causal=True,
        )

    def _forward(self, tokens: int, rows: int, cad, capturing: bool = False) -> None:
        d = self.drafter
        hidden = run_draft_model(d, cad, tokens, draft_index=0, any_batch_graph=capturing)
        self.steps.store_logits(d.model.compute_logits(hidden[self.sample_rows[:rows]]), rows)

    # -- capture ------------------------------------------------------------------------------
    def sizes_to_capture(self, sizes: list[int]) -> list[int]:
        """The token counts `capture` captures for vLLM's capture sizes, largest first (each
        with `rows_for(tokens, max_rows)` rows)."""
        return sorted({s for s in sizes if 2 <= s <= self.max_tokens}, reverse=True)

    def capture(self, sizes: list[int]) -> None:
        """One graph per token count, largest first (smaller ones reuse its memory pool).
        Captured with no request (every slot -1: nothing is written to the KV cache); the
        launches depend only on the sizes and bounds baked in."""
        from vllm.distributed.parallel_state import graph_capture
        from vllm.platforms import current_platform

        d = self.drafter
        if not self.graphs_supported():
            logger.info("vllm-bass: the drafter's attention backend takes no full graphs of "
                        "any batch; its first pass runs piecewise (vLLM's pass)")
            self.use_graphs, self.max_query_len = False, 0
            return
        self.steps._ensure_block_table(0)
        sizes = self.sizes_to_capture(sizes)
        if not sizes:
            return
        pool = current_platform.get_global_graph_pool()
        start, free_before = time.perf_counter(), torch.cuda.mem_get_info()[0]
        try:
            with graph_capture(device=d.device), _no_gc():
                for tokens in sizes:
                    rows = self.rows_for(tokens, self.max_rows)
                    self.query_start_loc[:rows + 1].zero_()
                    self.seq_lens[:rows].zero_()
                    self.sample_rows[:rows].zero_()
                    d._slot_mapping_buffer[:tokens].fill_(PADDING_SLOT_ID)
                    d.input_ids[:tokens].zero_()
                    d.positions[:tokens].zero_()
                    cad = self._capture_metadata(tokens, rows)
                    self._forward(tokens, rows, cad, capturing=True)  # warm-up, compiles
                    torch.cuda.synchronize()
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph, pool=pool,
                                          stream=torch.cuda.current_stream()):
                        self._forward(tokens, rows, cad, capturing=True)
                    self.graphs[tokens] = graph
                torch.cuda.synchronize()
        except Exception:  # a graph we cannot capture costs speed, never the engine
            logger.exception("vllm-bass: capturing the drafter's first pass failed; it runs "
                             "piecewise (vLLM's pass)")
            self.graphs = {}
            self.use_graphs = False
            self.max_query_len = 0  # nothing fits: every pass takes vLLM's path
            return
        self.graphs = dict(sorted(self.graphs.items()))  # padded_tokens: smallest first
        logger.info("vllm-bass: captured %d full CUDA graphs of the drafter's first pass "
                    "(up to %d tokens, queries of at most %d tokens) in %.1f s, %.0f MiB",
                    len(self.graphs), max(self.graphs), self.max_query_len,
                    time.perf_counter() - start,
                    (free_before - torch.cuda.mem_get_info()[0]) / 2**20)
