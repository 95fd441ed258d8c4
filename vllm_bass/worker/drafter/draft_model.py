"""The draft model's sampler, for exact *and* reproducible, better-accepted speculation.

vLLM's draft-model proposer does the batched drafting over the draft's paged KV and is kept
whole; we only replace how it turns draft logits into (token, q):
  * q is processed like the target's p (temperature, top-k, top-p), which raises acceptance;
    exactness never depends on this, only on q being the distribution the token came from;
  * requests with a seed draw their draft token at position t with the position-keyed noise
    their target sample at t uses (`sampling.keyed`, Gumbel coupling): the draft agrees
    with the target's (reproducible) sample whenever the two argmaxes agree;
  * after off-steps that skipped the draft, the first pass is extended to catch the draft's
    KV up (`draft_sync`);
  * the first pass (`first_pass_graphs`) and the one-token steps after it
    (`draft_graphs`) run as full CUDA graphs: vLLM runs them piecewise, with attention,
    KV writes and metadata on the host every step, which made drafting host-bound.
  * a draft pass that raises drafts nothing for that step instead of killing the engine
    (`faults`).
"""

from __future__ import annotations

import torch
from vllm.v1.spec_decode.draft_model import DraftModelProposer
from vllm.v1.utils import record_function_or_nullcontext

from vllm_bass.diagnostics.fault_injection import DraftFaultInjector
from vllm_bass.worker.drafter.draft_graphs import DraftStepGraphs
from vllm_bass.worker.drafter.first_pass_graphs import FirstPassGraphs
from vllm_bass.worker.drafter.faults import DraftFaults, is_device_fault
from vllm_bass.worker.drafter.draft_sync import CatchUp, DraftKVDebt, apply_catch_up
from vllm_bass.sampling.keyed import keyed_sample
from vllm_bass.sampling.rejection import _SAMPLING_EPS


def sample_draft(logits: torch.Tensor, sampling_metadata,
                 keyed: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """One draft position for each request row: returns (token ids [B], q [B, V] float32).
    `keyed`: (rows, seeds, positions) of the seeded rows, sampled with their position-keyed
    noise (q stays their draft distribution; their verification does not use it)."""
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p

    temperature = sampling_metadata.temperature
    rows = logits.shape[0]
    assert temperature is not None and temperature.shape[0] == rows, (
        "draft sampling expects one row per request")
    greedy = temperature < _SAMPLING_EPS
    scaled = logits.float() / torch.where(greedy, torch.ones_like(temperature),
                                          temperature).unsqueeze(-1)
    top_k, top_p = sampling_metadata.top_k, sampling_metadata.top_p
    if top_k is not None or top_p is not None:
        scaled = apply_top_k_top_p(scaled, top_k, top_p)
    q = torch.softmax(scaled, dim=-1, dtype=torch.float32)
    noise = torch.empty_like(q, dtype=torch.float64).exponential_()
    for i, gen in sampling_metadata.generators.items():
        if i < rows:
            noise[i].exponential_(generator=gen)
    tokens = (q.double() / noise).argmax(dim=-1)
    if keyed is not None:
        rows, seeds, positions = keyed
        tokens[rows] = keyed_sample(scaled[rows], seeds, positions)
    tokens = torch.where(greedy, logits.argmax(dim=-1), tokens)
    return tokens, q


# vLLM drafter methods the subclass overrides, with the signatures it was written against
# (tests/patches/test_worker_side_patches.py fails when vLLM changes one).
OVERRIDDEN_DRAFTER_METHODS = {
    "propose": "(self, num_speculative_tokens, target_token_ids: torch.Tensor, target_positions: torch.Tensor, target_hidden_states: torch.Tensor, next_token_ids: torch.Tensor, token_indices_to_sample: torch.Tensor | None, common_attn_metadata: vllm.v1.attention.backend.CommonAttentionMetadata, sampling_metadata: vllm.v1.sample.metadata.SamplingMetadata, mm_embed_inputs: tuple[list[torch.Tensor], torch.Tensor] | None = None, num_rejected_tokens_gpu: torch.Tensor | None = None, slot_mappings: dict[str, torch.Tensor] | list[dict[str, torch.Tensor]] | None = None) -> torch.Tensor",
    "set_inputs_first_pass": "(self, target_token_ids: torch.Tensor, next_token_ids: torch.Tensor, target_positions: torch.Tensor, target_hidden_states: torch.Tensor, token_indices_to_sample: torch.Tensor | None, cad: vllm.v1.attention.backend.CommonAttentionMetadata, num_rejected_tokens_gpu: torch.Tensor | None) -> tuple[int, torch.Tensor, vllm.v1.attention.backend.CommonAttentionMetadata]",
    "_sample_from_logits": "(self, logits: torch.Tensor, sampling_metadata: vllm.v1.sample.metadata.SamplingMetadata) -> tuple[torch.Tensor, torch.Tensor | None]",
}
# ... and the drafter state our draft loop reads or writes (DraftStepGraphs)
DRAFTER_ATTRIBUTES = ("positions", "input_ids", "_slot_mapping_buffer", "arange",
                      "max_batch_size", "max_model_len", "block_size", "model",
                      "_draft_attn_layer_names", "build_per_group_and_layer_attn_metadata",
                      "_last_draft_probs", "num_speculative_tokens", "max_num_tokens",
                      "draft_attn_groups", "_enable_probabilistic_draft_probs")


class BassDraftModelProposer(DraftModelProposer):
    bass_kv_debt: DraftKVDebt
    bass_faults: DraftFaults  # contained exceptions of the draft pass (`faults`)
    bass_fault_injector: DraftFaultInjector | None = None  # VLLM_BASS_INJECT_DRAFT_FAULT
    bass_catch_up: CatchUp | None = None  # set by the runner for the next propose() only
    bass_step_graphs: DraftStepGraphs | None = None  # None: vLLM's own draft loop
    bass_first_pass_graphs: FirstPassGraphs | None = None  # None: vLLM's first pass
    _bass_first_pass: tuple | None = None  # what set_inputs_first_pass returned last
    bass_seeded = None  # the step's seeded.SeededRows, set by the runner around propose()
    _bass_draft_step = 0  # draft tokens sampled so far in this propose()
    _bass_seeded_base: torch.Tensor | None = None  # [S] position of the first draft token

    def bass_can_use_step_graphs(self) -> bool:
        """Our draft loop covers the plain draft-model chain: what the catch-up needs (the
        extra-slot first pass, 1-D positions, token inputs only, one vocabulary), plus a
        greedy argmax over the full vocabulary, advancing positions, no expert load
        balancing and no data parallelism (vLLM's loop pads across DP ranks)."""
        return bool(
            self.bass_can_catch_up() and self.method == "draft_model"
            and not self.use_local_argmax_reduction and not self.constant_draft_positions
            and not self.uses_mrope and not self.uses_xdrope_dim
            and self.eplb_state is None
            and self.vllm_config.parallel_config.data_parallel_size == 1)

    def set_inputs_first_pass(self, *args, **kwargs):
        out = super().set_inputs_first_pass(*args, **kwargs)
        self._bass_first_pass = out  # (num_tokens, token_indices_to_sample, metadata)
        return out

    def bass_can_catch_up(self) -> bool:
        """Catch-up rewrites the first pass's inputs: only for 1-D positions, no hidden
        states fed to the draft, and the extra-slot (draft model) first pass. Fixed for
        the engine's life; asked every step, so computed once (uses_mrope reads the HF
        config, ~0.1 ms)."""
        can = self.__dict__.get("_bass_can_catch_up")
        if can is None:
            can = self._bass_can_catch_up = bool(
                self.needs_extra_input_slots and not self.pass_hidden_states_to_model
                and not self.parallel_drafting and not self.supports_mm_inputs
                and not self.use_heterogeneous_vocab
                and not self.vllm_config.model_config.uses_mrope)
        return can

    def propose(self, num_speculative_tokens, target_token_ids, target_positions,
                target_hidden_states, next_token_ids, token_indices_to_sample,
                common_attn_metadata, sampling_metadata, mm_embed_inputs=None,
                num_rejected_tokens_gpu=None, slot_mappings=None):
        """The step's drafts; a pass that raises (other than a device fault) drafts
        nothing instead (`faults`: logged, counted, the runner repairs the draft's KV)."""
        faults = self.bass_faults
        if faults.speculation_off:
            self.bass_catch_up, self._last_draft_probs = None, None
            return self._bass_no_drafts(common_attn_metadata, num_speculative_tokens)
        try:
            drafts = self._bass_draft_pass(
                num_speculative_tokens, target_token_ids, target_positions,
                target_hidden_states, next_token_ids, token_indices_to_sample,
                common_attn_metadata, sampling_metadata, mm_embed_inputs,
                num_rejected_tokens_gpu, slot_mappings)
        except Exception as exc:
            if is_device_fault(exc):
                raise  # the CUDA context is corrupt: nothing later would be right (faults)
            self.bass_catch_up, self._bass_first_pass, self._last_draft_probs = None, None, None
            self.num_speculative_tokens = num_speculative_tokens  # as after a whole pass
            faults.record(exc)
            return self._bass_no_drafts(common_attn_metadata, num_speculative_tokens)
        faults.succeeded()
        return drafts

    def _bass_no_drafts(self, common_attn_metadata, num_speculative_tokens) -> torch.Tensor:
        """Dummy drafts: token 0 everywhere, no draft probabilities. Under sync scheduling
        the runner drops them (a list of empty drafts); under async scheduling they fill
        the slots already reserved and verify as a deterministic proposal (exact)."""
        return torch.zeros((common_attn_metadata.batch_size(), num_speculative_tokens),
                           dtype=torch.int64, device=self.input_ids.device)

    def _bass_draft_pass(self, num_speculative_tokens, target_token_ids, target_positions,
                         target_hidden_states, next_token_ids, token_indices_to_sample,
                         common_attn_metadata, sampling_metadata, mm_embed_inputs,
                         num_rejected_tokens_gpu, slot_mappings):
        catch_up, self.bass_catch_up = self.bass_catch_up, None
        self._bass_draft_step, self._bass_seeded_base = 0, None
        if self.bass_fault_injector is not None:
            self.bass_fault_injector.check()  # diagnostics: VLLM_BASS_INJECT_DRAFT_FAULT
        if catch_up is not None:
            assert token_indices_to_sample is None and num_rejected_tokens_gpu is None, (
                "draft catch-up runs only on steps that verified no drafts")
            target_token_ids, target_positions, common_attn_metadata = apply_catch_up(
                catch_up, target_token_ids, target_positions, common_attn_metadata,
                self.block_size)
        steps = self.bass_step_graphs
        batch = common_attn_metadata.batch_size()
        rows = (steps.padded_rows(batch)
                if steps is not None and num_speculative_tokens > 1 else None)
        first = self.bass_first_pass_graphs
        if first is not None and rows is None and num_speculative_tokens > 1:
            first.fallbacks += 1  # no step graph holds this batch
        elif first is not None and num_speculative_tokens >= 1:
            padded = first.padded_tokens(
                target_token_ids.shape[0] + batch, batch,
                common_attn_metadata.max_query_len + 1, common_attn_metadata.max_seq_len + 1)
            if padded is not None:
                return self._bass_propose_with_graphs(
                    first, padded, steps, rows, num_speculative_tokens, target_token_ids,
                    target_positions, target_hidden_states, next_token_ids,
                    token_indices_to_sample, common_attn_metadata, sampling_metadata,
                    num_rejected_tokens_gpu)
            first.fallbacks += 1
        if rows is not None:
            return self._bass_propose_with_step_graphs(
                steps, rows, num_speculative_tokens, target_token_ids, target_positions,
                target_hidden_states, next_token_ids, token_indices_to_sample,
                common_attn_metadata, sampling_metadata, mm_embed_inputs,
                num_rejected_tokens_gpu, slot_mappings)
        return super().propose(
            num_speculative_tokens=num_speculative_tokens, target_token_ids=target_token_ids,
            target_positions=target_positions, target_hidden_states=target_hidden_states,
            next_token_ids=next_token_ids, token_indices_to_sample=token_indices_to_sample,
            common_attn_metadata=common_attn_metadata, sampling_metadata=sampling_metadata,
            mm_embed_inputs=mm_embed_inputs, num_rejected_tokens_gpu=num_rejected_tokens_gpu,
            slot_mappings=slot_mappings)

    def _bass_propose_with_graphs(self, first, padded, steps, rows, num_speculative_tokens,
                                  target_token_ids, target_positions, target_hidden_states,
                                  next_token_ids, token_indices_to_sample,
                                  common_attn_metadata, sampling_metadata,
                                  num_rejected_tokens_gpu) -> torch.Tensor:
        """vLLM's first-pass layout, the pass itself one graph replay (`first_pass_graphs`),
        then the remaining tokens one step-graph replay each. Same tokens and q as vLLM's
        pass: the same forward over the same inputs, argmax for greedy batches, the draft
        sampler on the sampled rows' logits otherwise."""
        batch = common_attn_metadata.batch_size()
        self.num_speculative_tokens = num_speculative_tokens
        self._last_draft_probs = None
        with record_function_or_nullcontext("bass_drafter: first pass graph"):
            num_tokens, sampled_at, cad = self.set_inputs_first_pass(
                target_token_ids=target_token_ids, next_token_ids=next_token_ids,
                target_positions=target_positions, target_hidden_states=target_hidden_states,
                token_indices_to_sample=token_indices_to_sample, cad=common_attn_metadata,
                num_rejected_tokens_gpu=num_rejected_tokens_gpu)
            first_rows = first.stage(num_tokens, padded, sampled_at, cad)
            logits = first.run(num_tokens, padded, first_rows, cad)[:batch]
            if not self._enable_probabilistic_draft_probs or sampling_metadata.all_greedy:
                first_tokens, first_q = steps.tokens[:batch].clone(), None
            else:  # as vLLM's _sample_draft_tokens (seeded rows: keyed at the first pass)
                first_tokens, first_q = self._sample_from_logits(logits, sampling_metadata)
        self._bass_first_pass = None
        if num_speculative_tokens == 1:
            if first_q is not None:
                self._last_draft_probs = first_q.unsqueeze(1).contiguous()
            return first_tokens.view(-1, 1)
        return self._bass_steps_after_first_pass(
            steps, rows, batch, num_speculative_tokens, sampled_at, cad,
            num_rejected_tokens_gpu, None, first_tokens, first_q, sampling_metadata)

    def _bass_propose_with_step_graphs(self, steps, rows, num_speculative_tokens,
                                       target_token_ids,
                                       target_positions, target_hidden_states,
                                       next_token_ids, token_indices_to_sample,
                                       common_attn_metadata, sampling_metadata,
                                       mm_embed_inputs, num_rejected_tokens_gpu,
                                       slot_mappings) -> torch.Tensor:
        """vLLM's first pass (one draft token), then the remaining tokens one graph replay
        each. Same tokens and q as vLLM's loop: the same forward over the same inputs,
        argmax for greedy batches, the draft sampler on the step's logits otherwise."""
        batch = common_attn_metadata.batch_size()
        self._bass_first_pass = None
        with record_function_or_nullcontext("bass_drafter: first pass"):
            first = super().propose(
                num_speculative_tokens=1, target_token_ids=target_token_ids,
                target_positions=target_positions, target_hidden_states=target_hidden_states,
                next_token_ids=next_token_ids, token_indices_to_sample=token_indices_to_sample,
                common_attn_metadata=common_attn_metadata, sampling_metadata=sampling_metadata,
                mm_embed_inputs=mm_embed_inputs,
                num_rejected_tokens_gpu=num_rejected_tokens_gpu, slot_mappings=slot_mappings)
        self.num_speculative_tokens = num_speculative_tokens
        _, sampled_at, cad = self._bass_first_pass
        self._bass_first_pass = None
        first_q = self._last_draft_probs
        return self._bass_steps_after_first_pass(
            steps, rows, batch, num_speculative_tokens, sampled_at, cad,
            num_rejected_tokens_gpu, cad.block_table_tensor, first[:, 0],
            None if first_q is None else first_q[:, 0], sampling_metadata)

    def _bass_steps_after_first_pass(self, steps, rows, batch, num_speculative_tokens,
                                     sampled_at, cad, num_rejected_tokens_gpu, block_table,
                                     first_tokens, first_q, sampling_metadata) -> torch.Tensor:
        """Load the step graphs' state from the first pass (`block_table` None: staged
        already), then draft the remaining tokens one step-graph replay each."""
        seq_lens = cad.seq_lens
        if num_rejected_tokens_gpu is not None:
            seq_lens = seq_lens - num_rejected_tokens_gpu  # as vLLM's loop (padded batch)
        steps.load(batch, rows, self.positions[sampled_at], seq_lens, block_table,
                   first_tokens, cad.max_seq_len)
        probs = None if first_q is None else [first_q]
        with record_function_or_nullcontext("bass_drafter: step graphs"):
            return self._bass_draft_steps(steps, rows, batch, num_speculative_tokens,
                                          [first_tokens], probs, sampling_metadata)

    def _bass_draft_steps(self, steps, rows, batch, num_speculative_tokens, tokens, probs,
                          sampling_metadata) -> torch.Tensor:
        for _ in range(num_speculative_tokens - 1):
            logits, greedy = steps.step(rows)
            if probs is None:
                tokens.append(greedy[:batch].clone())
            else:
                sampled, q = self._sample_from_logits(logits[:batch], sampling_metadata)
                steps.set_inputs(sampled)
                tokens.append(sampled)
                probs.append(q)
        if probs is not None:
            self._last_draft_probs = torch.stack(probs, dim=1).contiguous()
        return torch.stack(tokens, dim=1)

    def _sample_from_logits(self, logits, sampling_metadata):
        if not self._enable_probabilistic_draft_probs or sampling_metadata.all_greedy:
            return super()._sample_from_logits(logits, sampling_metadata)
        if sampling_metadata.temperature is None or (
                sampling_metadata.temperature.shape[0] != logits.shape[0]):
            return super()._sample_from_logits(logits, sampling_metadata)
        step, self._bass_draft_step = self._bass_draft_step, self._bass_draft_step + 1
        return sample_draft(logits, sampling_metadata, self._bass_keyed_rows(step))

    def _bass_keyed_rows(self, step: int):
        """(rows, seeds, positions) of the seeded rows for draft token `step` of this
        propose(), or None. Draft token k sits k past the first, whose position is one past
        the first pass's sampled input (read from vLLM's positions buffer at the first
        draft token, before the draft loop advances it)."""
        seeded = self.bass_seeded
        if seeded is None:
            return None
        if self._bass_seeded_base is None:
            first_pass = self._bass_first_pass
            if first_pass is None or step != 0:
                return None  # not a draft pass we know the positions of
            sampled_at = first_pass[1]
            self._bass_seeded_base = self.positions[sampled_at][seeded.rows_device] + 1
        return seeded.rows_device, seeded.seeds, self._bass_seeded_base + step


def install_bass_drafter(drafter, step_graphs: bool = True,
                        first_pass_graphs: bool = True) -> None:
    """`step_graphs`: run the one-token draft steps through `DraftStepGraphs` (captured
    as CUDA graphs when the engine captures graphs, eagerly otherwise); with them,
    `first_pass_graphs`: the first pass through `FirstPassGraphs` likewise."""
    if isinstance(drafter, DraftModelProposer) and not isinstance(drafter, BassDraftModelProposer):
        drafter.__class__ = BassDraftModelProposer
        drafter.bass_kv_debt = DraftKVDebt()
        drafter.bass_faults = DraftFaults()
        drafter.bass_fault_injector = DraftFaultInjector.from_env()
        drafter.bass_catch_up = None
        drafter.bass_step_graphs = None
        if str(drafter.device).startswith("cuda"):
            from vllm_bass.patches.draft_kernel_specialization import apply_in_worker

            apply_in_worker()
            from vllm_bass.worker.drafter.kernel_warmup import warm_up_draft_kernels

            warm_up_draft_kernels(drafter)
        drafter.bass_first_pass_graphs = None
        if step_graphs and drafter.bass_can_use_step_graphs():
            steps = drafter.bass_step_graphs = DraftStepGraphs(
                drafter, use_graphs=_graphs_on(drafter))
            if first_pass_graphs:
                drafter.bass_first_pass_graphs = FirstPassGraphs.for_drafter(drafter, steps)


def _graphs_on(drafter) -> bool:
    from vllm.config import CUDAGraphMode

    return (str(drafter.device).startswith("cuda")
            and drafter.vllm_config.compilation_config.cudagraph_mode != CUDAGraphMode.NONE
            and not drafter.speculative_config.enforce_eager
            and not drafter.vllm_config.model_config.enforce_eager)
