"""BASS model-runner mixin, layered on vLLM's own V1 GPUModelRunner / CPUModelRunner.

vLLM's runner already does the heavy lifting we want to reuse: it loads the draft beside the
target, gives it paged KV in the target's block tables, verifies a ragged batch of drafts in
ONE target forward pass (`num_draft_tokens` may differ per sequence, 0 included) and rolls
back rejected KV slots by overwriting. The mixin changes what BASS changes:
  * the rejection sampler -> `BassRejectionSampler` (exact on every device; synthetic modes);
  * the draft length of each step is the scheduler's plan (`vllm_bass.scheduler`, where the
    draft-length policy lives), `num_spec_tokens_to_schedule`; per-sequence lengths are
    applied by the scheduler, so the next verification batch is ragged;
  * whole-batch off-steps of pure decoding run no draft pass at all (a plain decode step);
    the next drafting step catches the draft's KV up (`drafter.draft_sync`; under async
    scheduling from a device record of the skipped tokens, since the host does not have
    them yet). Under async scheduling, an off-step that verifies drafts runs only vLLM's
    bookkeeping of the accepted counts (the next step's positions are corrected from it);
  * full CUDA graphs for one-token decoding: vLLM captures its full decode graphs only for
    batches of exactly 1 + K tokens per sequence (K = num_speculative_tokens, 32 for
    `bass`) and rounds every capture size to a multiple of 1 + K. BASS verification is
    ragged (piecewise graphs either way), so the graphs are better spent on the batches
    auto-off produces: one token per sequence, exactly like plain decoding. Only `fixed`
    without auto-off keeps vLLM's 1 + K.
  * seeded requests sample position-keyed (`seeded`): the same tokens whatever the policy,
    auto-off, batch, timing or preemption.
  * a draft pass that raises drafts nothing for that step (`drafter.faults`); the runner
    drops its dummy drafts and puts the positions it missed back into the draft-KV debt;
    after repeated faults speculation is off for good.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from vllm_bass.config import BassConfig
from vllm_bass.utils.steps import decode_tokens
from vllm_bass.worker.cuda_graphs import BassCudagraphDispatcher


# vLLM runner methods the mixin overrides, with the signatures it was written against
# (tests/test_model_runner.py fails when vLLM changes one).
OVERRIDDEN_RUNNER_METHODS = {
    "_check_and_update_cudagraph_mode":
        "(self, attention_backends: list[set[type[vllm.v1.attention.backend.AttentionBackend]]], kv_cache_groups: list[vllm.v1.kv_cache_interface.KVCacheGroupSpec], is_profiling: bool = False) -> None",
    "_warmup_and_capture":
        "(self, desc: vllm.forward_context.BatchDescriptor, cudagraph_runtime_mode: vllm.config.compilation.CUDAGraphMode, profile_seq_lens: int | None = None, allow_microbatching: bool = False, num_warmups: int | None = None, profiler: contextlib.AbstractContextManager[typing.Any] | None = None)",
    "execute_model":
        "(self, scheduler_output: 'SchedulerOutput', intermediate_tensors: vllm.sequence.IntermediateTensors | None = None) -> vllm.v1.outputs.ModelRunnerOutput | vllm.v1.outputs.AsyncModelRunnerOutput | vllm.sequence.IntermediateTensors | None",
    "propose_draft_token_ids":
        "(self, scheduler_output: 'SchedulerOutput', sampled_token_ids: torch.Tensor | list[list[int]], sampling_metadata: vllm.v1.sample.metadata.SamplingMetadata, hidden_states: torch.Tensor, sample_hidden_states: torch.Tensor, aux_hidden_states: list[torch.Tensor] | None, spec_decode_metadata: vllm.v1.spec_decode.metadata.SpecDecodeMetadata | None, common_attn_metadata: vllm.v1.attention.backend.CommonAttentionMetadata, slot_mappings: dict[str, torch.Tensor] | list[dict[str, torch.Tensor]] | None) -> list[list[int]] | torch.Tensor",
    "_sample":
        "(self, logits: torch.Tensor | None, spec_decode_metadata: vllm.v1.spec_decode.metadata.SpecDecodeMetadata | None) -> vllm.v1.outputs.SamplerOutput",
    "capture_model": "(self) -> int",
    "_model_forward":
        "(self, input_ids: torch.Tensor | None = None, positions: torch.Tensor | None = None, intermediate_tensors: vllm.sequence.IntermediateTensors | None = None, inputs_embeds: torch.Tensor | None = None, **model_kwargs: dict[str, typing.Any]) -> Any",
    "_determine_batch_execution_and_padding":
        "(self, num_tokens: int, num_reqs: int, num_scheduled_tokens_np: numpy.ndarray, max_num_scheduled_tokens: int, use_cascade_attn: bool, allow_microbatching: bool = True, force_eager: bool = False, force_uniform_decode: bool | None = None, force_has_lora: bool | None = None, force_num_active_loras: int | None = None, num_encoder_reqs: int = 0) -> tuple[vllm.config.compilation.CUDAGraphMode, vllm.forward_context.BatchDescriptor, bool, torch.Tensor | None, vllm.compilation.cuda_graph.CUDAGraphStat | None]",
}

# Most positions one request may owe the draft before the runner stops skipping its pass
# (auto-off probes at least every 256 off-steps; a probe drafts and settles the debt).
SKIPPED_TOKENS_DEPTH = 512


class BassModelRunnerMixin:
    """Mixed in front of vLLM's runner class by `install_bass_runner` (see worker.py)."""

    bass_config: BassConfig

    def _bass_init(self, bass_config: BassConfig) -> None:
        from vllm_bass.worker.sampler import BassRejectionSampler
        from vllm_bass.worker.seeded import KeyedSampling

        self.bass_config = bass_config
        # drafter length of the last step (the scheduler's plan; 0 = off-step)
        self.bass_draft_length = bass_config.num_speculative_tokens
        # seeded rows sample position-keyed in every sampler of this runner
        self._bass_keyed = KeyedSampling(self.sampler) if hasattr(self, "sampler") else None
        self._bass_seeded_step = None  # this step's SeededRows, for the drafter
        if getattr(self, "speculative_config", None) is not None and hasattr(self, "rejection_sampler"):
            self.rejection_sampler = BassRejectionSampler(
                self.sampler, self.speculative_config, bass_config, self.device)
            self.rejection_sampler.keyed = self._bass_keyed
        self._bass_known_reqs: set[str] = set()
        self.bass_async = bool(getattr(self, "use_async_scheduling", False))
        if str(getattr(self, "device", "")).startswith("cuda"):
            from vllm_bass.patches.eager_count_correction import apply_in_worker, enabled

            apply_in_worker()  # no dynamo recompiles inside steps (async spec decode)
            if self.bass_async and enabled():  # its one launch, compiled now
                from vllm_bass.kernels.count_correction import warm_up

                warm_up(self.device, int(getattr(self, "max_num_reqs", 256)))
            from vllm_bass.patches import first_pass_slot_mapping

            first_pass_slot_mapping.apply_in_worker()  # the draft's first-pass KV slots
            if first_pass_slot_mapping.enabled():
                from vllm_bass.kernels.first_pass_slot_mapping import warm_up as warm_slots

                warm_slots(self.device)
        self._bass_skipped = None  # draft_sync.SkippedTokens, under async scheduling
        from vllm_bass.diagnostics.phase_trace import PhaseTrace
        from vllm_bass.diagnostics.sync_debug import SyncDebug

        self._bass_trace = PhaseTrace.from_env(
            use_cuda=torch.cuda.is_available() and str(getattr(self, "device", "")) != "cpu")
        self._bass_sync_debug = SyncDebug.from_env()
        if bass_config.draft_length_policy != "fixed" or bass_config.auto_off:
            self._bass_graph_one_token_decode()
        if getattr(self, "drafter", None) is not None:
            from vllm_bass.worker.drafter.draft_model import install_bass_drafter
            from vllm_bass.worker.drafter.draft_sync import SkippedTokens

            from vllm_bass import envs

            install_bass_drafter(self.drafter, bass_config.full_graph_drafting,
                                 envs.flag("VLLM_BASS_FIRST_PASS_GRAPHS"))
            # async scheduling only (sync catches up from the host token buffer); slots for
            # every live request, twice over (finished ones are freed a step late)
            self._bass_skipped = SkippedTokens(
                2 * getattr(self, "max_num_reqs", 256), SKIPPED_TOKENS_DEPTH,
                getattr(self, "device", "cpu")) if self.bass_async else None

    def _bass_graph_one_token_decode(self) -> None:
        """Before the KV cache (and CUDA graph keys) are set up: uniform decode is 1 token."""
        dispatcher = getattr(self, "cudagraph_dispatcher", None)
        if not hasattr(self, "uniform_decode_query_len") or dispatcher is None:
            return  # CPU runner: no CUDA graphs
        assert not dispatcher.keys_initialized, "install the BASS runner before graph setup"
        self.uniform_decode_query_len = 1
        dispatcher.uniform_decode_query_len = 1

    def _check_and_update_cudagraph_mode(self, attention_backends, kv_cache_groups,
                                         is_profiling: bool = False) -> None:
        super()._check_and_update_cudagraph_mode(attention_backends, kv_cache_groups,
                                                 is_profiling)
        if self.bass_config.full_graph_verification:
            from vllm_bass.worker.cuda_graphs import add_full_graphs_for_mixed_batches

            add_full_graphs_for_mixed_batches(self, attention_backends, kv_cache_groups)

    def _warmup_and_capture(self, desc, cudagraph_runtime_mode, *args, **kwargs):
        """vLLM's capture, with two BASS twists (`cuda_graphs`): the dispatcher knows which
        mode is being captured, and a FULL mixed-batch graph is captured from a
        verification-shaped dummy batch (requests of 1 + K tokens: vLLM's uniform dummy
        batch with that query length) instead of one query as long as the batch. A FULL
        graph's eager warm-up run plans its attention as the capture does
        (`attention.warming_full_graph`)."""
        from vllm_bass.attention import (
            capturing_uniform_batch,
            planned_query_len,
            warming_full_graph,
        )

        dispatcher = self.cudagraph_dispatcher
        dispatcher.capturing = cudagraph_runtime_mode  # see cuda_graphs.BassCudagraphDispatcher
        uniform = capturing_uniform_batch.set(bool(getattr(desc, "uniform", False)))
        full = getattr(cudagraph_runtime_mode, "name", None) == "FULL"
        warming = warming_full_graph.set(full)
        query_len = getattr(dispatcher, "full_max_query_len", None)
        verification = bool(query_len and not getattr(desc, "uniform", False) and full)
        saved_query_len = getattr(self, "uniform_decode_query_len", None)
        planned = None
        if verification:
            import dataclasses

            from vllm_bass.attention.backend import short_query_plan_len

            short = short_query_plan_len(dispatcher, desc)
            if short:
                # the size's short-query graph (`cuda_graphs.add_short_query_graphs`): a
                # dummy batch of one-draft requests, planned for them
                query_len = short
                planned = planned_query_len.set(short)
            dispatcher.capturing_verification = True
            dispatcher.capturing_descriptor = desc  # the key the capture is filed under
            self.uniform_decode_query_len = query_len  # read by the dummy run only
            desc = dataclasses.replace(desc, uniform=True)
        try:
            return super()._warmup_and_capture(desc, cudagraph_runtime_mode, *args, **kwargs)
        finally:
            dispatcher.capturing = None
            capturing_uniform_batch.reset(uniform)
            warming_full_graph.reset(warming)
            if planned is not None:
                planned_query_len.reset(planned)
            if verification:
                dispatcher.capturing_verification = False
                dispatcher.capturing_descriptor = None
                self.uniform_decode_query_len = saved_query_len

    def _determine_batch_execution_and_padding(self, num_tokens, num_reqs,
                                               num_scheduled_tokens_np,
                                               max_num_scheduled_tokens, *args, **kwargs):
        """vLLM's choice of graph, told the batch's longest request (BASS's FULL mixed-batch
        graphs serve only requests of at most 1 + K tokens) and its request count (which of
        a size's two graphs under VLLM_BASS_SHORT_QUERY_GRAPHS: `cuda_graphs`)."""
        dispatcher = getattr(self, "cudagraph_dispatcher", None)
        ours = isinstance(dispatcher, BassCudagraphDispatcher)
        if ours:
            dispatcher.batch_max_query_len = int(max_num_scheduled_tokens)
            dispatcher.batch_num_reqs = int(num_reqs)
        try:
            return super()._determine_batch_execution_and_padding(
                num_tokens, num_reqs, num_scheduled_tokens_np, max_num_scheduled_tokens,
                *args, **kwargs)
        finally:
            if ours:
                dispatcher.batch_max_query_len = None
                dispatcher.batch_num_reqs = None

    def capture_model(self) -> int:
        """vLLM's graphs, then the drafter's one-token steps (`draft_graphs`) for every
        captured size up to the most requests a step holds, and its first pass
        (`first_pass_graphs`) for every captured token count; our attention's binaries for
        all of them compiled first, in parallel (`attention.precompile`)."""
        from vllm_bass.attention.precompile import precompile_for_capture, report_capture_misses

        precompiled = precompile_for_capture(self)  # our attention's binaries, in parallel
        size = super().capture_model()
        drafter = getattr(self, "drafter", None)
        sizes = list(self.compilation_config.cudagraph_capture_sizes or ())
        steps = getattr(drafter, "bass_step_graphs", None)
        if steps is not None and steps.use_graphs:
            steps.capture(sizes)
            first = getattr(drafter, "bass_first_pass_graphs", None)
            if first is not None and first.use_graphs:
                first.capture(sizes)
        report_capture_misses(precompiled, self.device)
        return size

    def execute_model(self, scheduler_output, *args, **kwargs):
        if self._bass_sync_debug is not None:
            from vllm_bass.diagnostics.sync_debug import step_kind

            self._bass_sync_debug.begin_step(step_kind(scheduler_output))
        trace = self._bass_trace
        if trace is None:
            return super().execute_model(scheduler_output, *args, **kwargs)
        trace.finish_step(len(self.input_batch.req_ids), self.bass_draft_length)
        token = trace.begin("forward")
        try:
            return super().execute_model(scheduler_output, *args, **kwargs)
        finally:
            trace.end(token)
            mode = getattr(getattr(self, "cudagraph_dispatcher", None), "last_mode", None)
            trace.graph_mode = -1 if mode is None else int(getattr(mode, "value", mode))

    def _model_forward(self, *args, **kwargs):
        """The target's model call, timed as its own sub-phase when tracing (vLLM's hook
        for this: `GPUModelRunner._model_forward`)."""
        trace = self._bass_trace
        if trace is None:
            return super()._model_forward(*args, **kwargs)
        token = trace.begin("model")
        try:
            return super()._model_forward(*args, **kwargs)
        finally:
            trace.end(token)

    def propose_draft_token_ids(self, *args, **kwargs):
        trace = self._bass_trace
        if trace is None:
            return self._bass_propose(*args, **kwargs)
        token = trace.begin("draft")
        # the last plan drafted: this step verifies, so it most likely drafts again
        profiler = trace.profile_draft(self.bass_draft_length > 0)
        try:
            return self._bass_propose(*args, **kwargs)
        finally:
            if profiler is not None:
                trace.end_profile(profiler)
            trace.end(token)

    def _bass_propose(self, scheduler_output, sampled_token_ids, sampling_metadata,
                      hidden_states, sample_hidden_states, aux_hidden_states,
                      spec_decode_metadata, common_attn_metadata, slot_mappings):
        """Draft `num_spec_tokens_to_schedule` tokens (the scheduler's plan). Off-steps (0)
        of pure decoding skip the draft pass; the next drafting step catches the draft's KV
        up from the host token buffer (sync) or, under async scheduling, where the host
        has placeholders for the latest tokens, from a device record of the skipped steps'
        input tokens. An off-step that verifies drafts skips too: under async scheduling it
        runs only vLLM's bookkeeping of the accepted counts (`_bass_async_bookkeeping`).
        Where an off-step cannot skip under async scheduling, it runs a one-token draft
        pass whose draft is never scheduled, which keeps the draft's KV current."""
        req_ids = list(self.input_batch.req_ids)
        self._bass_forget_finished(req_ids)
        batch_length = scheduler_output.num_spec_tokens_to_schedule
        self.bass_draft_length = batch_length
        drafter = getattr(self, "drafter", None)
        faults = getattr(drafter, "bass_faults", None)
        if faults is not None and faults.speculation_off and not self.bass_async:
            return self._bass_no_drafts(req_ids)  # off for good after repeated faults
        debt = getattr(drafter, "bass_kv_debt", None)
        skipped = self._bass_skipped  # None under sync: the host token buffer has them
        catch_up = None
        if debt is not None and drafter.bass_can_catch_up():
            starts = self.input_batch.num_computed_tokens_cpu[:len(req_ids)]
            if (batch_length == 0 and self._bass_may_skip_draft(
                    scheduler_output, req_ids, starts, debt, drafter,
                    skipped.depth if skipped is not None else None)):
                if self.bass_async and spec_decode_metadata is not None:
                    self._bass_async_bookkeeping(drafter, sampled_token_ids)
                debt.record_skip(req_ids, starts)
                if skipped is not None:
                    scheduled = [scheduler_output.num_scheduled_tokens[r] for r in req_ids]
                    skipped.record(req_ids, scheduled, starts, self.input_ids.gpu)
                return self._bass_no_drafts(req_ids)
            if debt and spec_decode_metadata is None:
                catch_up = drafter.bass_catch_up = debt.settle(
                    req_ids, starts,
                    skipped if skipped is not None else self.input_batch.token_ids_cpu)
        if batch_length == 0 and self.bass_async:
            batch_length = 1  # drafts nothing that is scheduled; keeps the draft's KV
        saved = scheduler_output.num_spec_tokens_to_schedule
        scheduler_output.num_spec_tokens_to_schedule = batch_length
        if drafter is not None:
            drafter.bass_seeded = self._bass_seeded_step
        try:
            drafts = super().propose_draft_token_ids(
                scheduler_output, sampled_token_ids, sampling_metadata, hidden_states,
                sample_hidden_states, aux_hidden_states, spec_decode_metadata,
                common_attn_metadata, slot_mappings)
        finally:
            scheduler_output.num_spec_tokens_to_schedule = saved
            self._bass_seeded_step = None
            if drafter is not None:
                drafter.bass_catch_up = None
                drafter.bass_seeded = None
        if faults is not None and faults.take():
            return self._bass_after_draft_fault(scheduler_output, req_ids, catch_up, drafts)
        return drafts

    def _bass_async_bookkeeping(self, drafter, sampled_token_ids) -> None:
        """What vLLM's runner does for a step that verified drafts without running its
        drafter (`sample_tokens`, when the input does not fit the drafter): the accepted
        counts and next tokens, from which the next step's optimistic positions and input
        token are corrected. Until session 43 such an off-step ran a one-token draft pass
        for this (0.3-0.4 of a plain step with a dear draft), so every switch off cost one."""
        next_token_ids, valid_counts = drafter.prepare_next_token_ids_padded(
            sampled_token_ids, self.requests, self.input_batch, self.discard_request_mask.gpu)
        self._copy_valid_sampled_token_count(next_token_ids, valid_counts)

    def _bass_no_drafts(self, req_ids: list[str]) -> list[list[int]]:
        self._draft_probs = None
        self._draft_prob_req_ids = None
        # a list, not an empty device tensor: no copy stream, event or sync
        return [[] for _ in req_ids]

    def _bass_after_draft_fault(self, scheduler_output, req_ids, catch_up, drafts):
        """The draft pass raised; the drafter contained it (`drafter.faults`) and returned
        dummy drafts. Sync: they are dropped (the next step verifies no drafts: plain
        decoding for a step), and the draft KV the pass should have written, from the
        first position it was catching up, is owed again, so the next drafting step
        catches it up -- unless that would not fit one first pass, then it stays a gap
        (acceptance only). Async: the dummy drafts fill the slots the scheduler reserved
        already, and the positions the pass missed stay a gap (the device record of tokens
        covers skipped steps only)."""
        if self.bass_async:
            return drafts
        drafter = self.drafter
        if drafter.bass_can_catch_up():
            debt = drafter.bass_kv_debt
            starts = np.asarray(self.input_batch.num_computed_tokens_cpu[:len(req_ids)],
                                dtype=np.int64)
            debt.record_skip(req_ids, starts - catch_up.extra if catch_up is not None
                             else starts)
            scheduled = sum(scheduler_output.num_scheduled_tokens[r] for r in req_ids)
            if (int(debt.owed(req_ids, starts).sum()) + scheduled + 2 * len(req_ids)
                    > drafter.max_num_tokens):
                for rid in req_ids:
                    debt.forget(rid)
        return self._bass_no_drafts(req_ids)

    @staticmethod
    def _bass_may_skip_draft(scheduler_output, req_ids, starts, debt, drafter,
                             max_owed: int | None = None) -> bool:
        """Skip the draft pass only in pure decoding (one token plus its drafts per request),
        and only while the catch-up it leaves fits one first pass of the drafter and each
        request's debt fits the record of skipped tokens (`max_owed`, async only)."""
        scheduled = decode_tokens(scheduler_output.num_scheduled_tokens,
                                  scheduler_output.scheduled_spec_decode_tokens, req_ids)
        if scheduled is None:
            return False
        owed_next = debt.owed(req_ids, starts) + scheduled
        if max_owed is not None and len(req_ids) and int(owed_next.max()) > max_owed:
            return False
        return int(owed_next.sum()) + 2 * len(req_ids) <= drafter.max_num_tokens

    def _bass_forget_finished(self, req_ids: list[str]) -> None:
        """Per-request state of requests that left the batch: the draft-KV debt, the
        skipped-token record and the synthetic sampler's group (a returning request gets
        the same group again: asked for, or derived from its id)."""
        current = set(req_ids)
        debt = getattr(getattr(self, "drafter", None), "bass_kv_debt", None)
        sampler_forget = getattr(getattr(self, "rejection_sampler", None), "forget", None)
        for gone in self._bass_known_reqs - current:
            if debt is not None:
                debt.forget(gone)
            if self._bass_skipped is not None:
                self._bass_skipped.forget(gone)
            if sampler_forget is not None:
                sampler_forget(gone)
        self._bass_known_reqs = current

    def _sample(self, logits, spec_decode_metadata):
        """vLLM's sampling, with this step's seeded rows (if any) sampled keyed."""
        keyed = self._bass_keyed
        if keyed is None:
            return self._bass_sample(logits, spec_decode_metadata)
        from vllm_bass.worker.seeded import seeded_rows

        # the drafter reads it after sampling, in the same step (same rows)
        self._bass_seeded_step = keyed.current = seeded_rows(
            self.input_batch.sampling_metadata.generators, self.seq_lens, self.device)
        try:
            return self._bass_sample(logits, spec_decode_metadata)
        finally:
            keyed.current = None

    def _bass_sample(self, logits, spec_decode_metadata):
        sampler = getattr(self, "rejection_sampler", None)
        if getattr(sampler, "synthetic_mode", False) and hasattr(sampler, "current_groups"):
            from vllm_bass.worker.sampler import SYNTHETIC_GROUP_KEY

            req_ids = list(self.input_batch.req_ids)  # synthetic groups by request
            sampler.current_req_ids = req_ids
            sampler.current_groups = [
                ((self.requests[r].sampling_params.extra_args or {}).get(SYNTHETIC_GROUP_KEY)
                 if r in self.requests and self.requests[r].sampling_params is not None
                 else None) for r in req_ids]
        if self._bass_trace is None:
            return super()._sample(logits, spec_decode_metadata)
        token = self._bass_trace.begin("sample")
        try:
            return super()._sample(logits, spec_decode_metadata)
        finally:
            self._bass_trace.end(token)


_RUNNER_CLASSES: dict[type, type] = {}


def bass_runner_class(base: type) -> type:
    if issubclass(base, BassModelRunnerMixin):
        return base
    if base not in _RUNNER_CLASSES:
        _RUNNER_CLASSES[base] = type(f"Bass{base.__name__}", (BassModelRunnerMixin, base), {})
    return _RUNNER_CLASSES[base]


def install_bass_runner(runner: Any, bass_config: BassConfig) -> Any:
    """Turn an already-built vLLM runner into its BASS subclass (no second construction, so
    no second set of device buffers), then set up the BASS state."""
    runner.__class__ = bass_runner_class(type(runner))
    runner._bass_init(bass_config)
    return runner
