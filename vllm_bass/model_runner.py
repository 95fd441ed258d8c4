"""BASS model-runner mixin, layered on vLLM's own V1 GPUModelRunner / CPUModelRunner.

vLLM's runner already does the heavy lifting we want to reuse: it loads the draft beside the
target, gives it paged KV in the target's block tables, verifies a ragged batch of drafts in
ONE target forward pass (`num_draft_tokens` may differ per sequence, 0 included) and rolls
back rejected KV slots by overwriting. The mixin changes what BASS changes:
  * the rejection sampler -> `BassRejectionSampler` (exact on every device; synthetic modes);
  * the draft length of each step -> a `DraftLengthPolicy` updated from this step's accepted
    counts *before* the drafter runs (the paper's order: verify, update l, draft);
  * per-sequence draft lengths -> drafts are truncated per request before the scheduler
    sees them, so the next verification batch is ragged;
  * whole-batch off-steps of pure decoding run no draft pass at all (a plain decode step);
    the next drafting step catches the draft's KV up (`proposer.draft_sync`);
  * full CUDA graphs for one-token decoding: vLLM captures its full decode graphs only for
    batches of exactly 1 + K tokens per sequence (K = num_speculative_tokens, 32 for
    `bass`) and rounds every capture size to a multiple of 1 + K. BASS verification is
    ragged (piecewise graphs either way), so the graphs are better spent on the batches
    auto-off produces: one token per sequence, exactly like plain decoding. Only `fixed`
    without auto-off keeps vLLM's 1 + K.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from vllm_bass.config import BassConfig
from vllm_bass.proposer.auto_off import with_test_off_cycle
from vllm_bass.proposer.policies import DraftPlan, Verified, make_policy


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
    "take_draft_token_ids":
        "(self) -> vllm.v1.outputs.DraftTokenIds | None",
}

def count_accepted(sampled_token_ids: Any, num_draft_tokens: list[int]) -> list[int]:
    """Accepted draft tokens per request from the sampler output (-1 marks unused slots)."""
    if isinstance(sampled_token_ids, torch.Tensor):
        emitted = (sampled_token_ids != -1).sum(dim=1).tolist()
    else:
        emitted = [len(t) for t in sampled_token_ids]
    return accepted_from_emitted(emitted, num_draft_tokens)


def accepted_from_emitted(emitted: list[int], num_draft_tokens: list[int]) -> list[int]:
    return [max(0, min(e - 1, d)) for e, d in zip(emitted, num_draft_tokens)]


class AcceptedCountsReadback:
    """The verification of a step, its accepted counts copied to the host without stalling it.

    `start` queues the count and a copy into pinned memory behind the sampler (CUDA) and
    returns at once; `result` waits for that copy only, by which time the host has queued
    the draft pass behind it. On CPU (or for list outputs) the counts are computed at once.
    `probe` is the flag of the plan whose drafts were verified (a later plan has replaced
    it by the time the policy observes).
    """

    def __init__(self, max_reqs: int, device: torch.device):
        self.cuda = torch.device(device).type == "cuda"
        self.pinned = torch.zeros(max_reqs, dtype=torch.int32,
                                  pin_memory=True) if self.cuda else None
        self.event = torch.cuda.Event() if self.cuda else None
        self.pending: tuple[list[str], list[int], bool, Any] | None = None

    def start(self, req_ids: list[str], sampled_token_ids: Any, num_draft: list[int],
              probe: bool) -> None:
        if self.cuda and isinstance(sampled_token_ids, torch.Tensor) and sampled_token_ids.is_cuda:
            n = sampled_token_ids.shape[0]
            emitted = (sampled_token_ids != -1).sum(dim=1, dtype=torch.int32)
            self.pinned[:n].copy_(emitted, non_blocking=True)
            self.event.record()
            self.pending = (req_ids, num_draft, probe, n)
        else:
            self.pending = (req_ids, num_draft, probe,
                            count_accepted(sampled_token_ids, num_draft))

    def result(self) -> list[Verified] | None:
        """The drafted requests' verifications of the started step, or None; clears it."""
        if self.pending is None:
            return None
        req_ids, num_draft, probe, counts = self.pending
        self.pending = None
        if isinstance(counts, int):
            self.event.synchronize()
            counts = accepted_from_emitted(self.pinned[:counts].tolist(), num_draft)
        return [Verified(rid, d, a, probe)
                for rid, d, a in zip(req_ids, num_draft, counts) if d > 0]


class BassModelRunnerMixin:
    """Mixed in front of vLLM's runner class by `install_bass_runner` (see worker.py)."""

    bass_config: BassConfig

    def _bass_init(self, bass_config: BassConfig) -> None:
        from vllm_bass.sampling.sampler import BassRejectionSampler

        self.bass_config = bass_config
        self.bass_policy = with_test_off_cycle(make_policy(bass_config), os.environ)
        self.bass_plan = DraftPlan(bass_config.num_speculative_tokens)
        if getattr(self, "speculative_config", None) is not None and hasattr(self, "rejection_sampler"):
            self.rejection_sampler = BassRejectionSampler(
                self.sampler, self.speculative_config, bass_config, self.device)
        self._bass_known_reqs: set[str] = set()
        from vllm_bass.utils.phase_trace import PhaseTrace

        self._bass_trace = PhaseTrace.from_env(
            use_cuda=torch.cuda.is_available() and str(getattr(self, "device", "")) != "cpu")
        if bass_config.draft_length_policy != "fixed" or bass_config.auto_off:
            self._bass_graph_one_token_decode()
        self._bass_accepted = AcceptedCountsReadback(
            getattr(self, "max_num_reqs", 1024), getattr(self, "device", "cpu"))
        if getattr(self, "drafter", None) is not None:
            from vllm_bass.proposer.draft_model import install_bass_drafter

            install_bass_drafter(self.drafter)

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
            from vllm_bass.cuda_graphs import add_full_graphs_for_mixed_batches

            add_full_graphs_for_mixed_batches(self, attention_backends, kv_cache_groups)

    def _warmup_and_capture(self, desc, cudagraph_runtime_mode, *args, **kwargs):
        dispatcher = self.cudagraph_dispatcher
        dispatcher.capturing = cudagraph_runtime_mode  # see cuda_graphs.BassCudagraphDispatcher
        try:
            return super()._warmup_and_capture(desc, cudagraph_runtime_mode, *args, **kwargs)
        finally:
            dispatcher.capturing = None

    def execute_model(self, scheduler_output, *args, **kwargs):
        trace = self._bass_trace
        if trace is None:
            return super().execute_model(scheduler_output, *args, **kwargs)
        trace.finish_step(len(self.input_batch.req_ids), self.bass_plan.batch_length)
        token = trace.begin("forward")
        try:
            return super().execute_model(scheduler_output, *args, **kwargs)
        finally:
            trace.end(token)

    def propose_draft_token_ids(self, *args, **kwargs):
        trace = self._bass_trace
        if trace is None:
            return self._bass_propose(*args, **kwargs)
        token = trace.begin("draft")
        # the last plan drafted: this step verifies, so it most likely drafts again
        profiler = trace.profile_draft(self.bass_plan.batch_length > 0)
        try:
            return self._bass_propose(*args, **kwargs)
        finally:
            if profiler is not None:
                trace.end_profile(profiler)
            trace.end(token)

    def _bass_propose(self, scheduler_output, sampled_token_ids, sampling_metadata,
                      hidden_states, sample_hidden_states, aux_hidden_states,
                      spec_decode_metadata, common_attn_metadata, slot_mappings):
        req_ids = list(self.input_batch.req_ids)
        readback = self._bass_accepted
        if spec_decode_metadata is not None:
            # observed after this step's draft pass is queued (see the module docstring);
            # self.bass_plan is still the plan whose drafts this step verified
            readback.start(req_ids, sampled_token_ids,
                           list(spec_decode_metadata.num_draft_tokens), self.bass_plan.probe)
        try:
            return self._bass_plan_and_draft(
                req_ids, scheduler_output, sampled_token_ids, sampling_metadata,
                hidden_states, sample_hidden_states, aux_hidden_states, spec_decode_metadata,
                common_attn_metadata, slot_mappings)
        finally:
            verified = readback.result()
            if verified is not None:
                self.bass_policy.observe(verified)

    def _bass_plan_and_draft(self, req_ids, scheduler_output, sampled_token_ids,
                             sampling_metadata, hidden_states, sample_hidden_states,
                             aux_hidden_states, spec_decode_metadata, common_attn_metadata,
                             slot_mappings):
        self._bass_forget_finished(req_ids)
        cost = getattr(scheduler_output, "bass_step_cost", None)
        if cost is not None and hasattr(self.bass_policy, "cost"):
            from vllm_bass.proposer.cost_model import StepCostModel

            self.bass_policy.cost = StepCostModel(*cost)  # measured by the scheduler
        probes = getattr(self.bass_policy, "probes", None)
        if probes is not None:
            probes.need_off_sample = bool(getattr(scheduler_output, "bass_needs_off_sample",
                                                  False))
        plan = self.bass_policy.plan(req_ids)
        k_max = self.bass_config.num_speculative_tokens
        batch_length = max(0, min(plan.batch_length, k_max))
        self.bass_plan = plan
        drafter = getattr(self, "drafter", None)
        debt = getattr(drafter, "bass_kv_debt", None)
        if debt is not None and drafter.bass_can_catch_up():
            starts = self.input_batch.num_computed_tokens_cpu[:len(req_ids)]
            if batch_length == 0 and self._bass_may_skip_draft(scheduler_output, req_ids,
                                                               starts, debt, drafter):
                debt.record_skip(req_ids, starts)
                self._draft_probs = None
                self._draft_prob_req_ids = None
                # a list, not an empty device tensor: no copy stream, event or sync
                return [[] for _ in req_ids]
            if debt and spec_decode_metadata is None:
                drafter.bass_catch_up = debt.settle(req_ids, starts,
                                                    self.input_batch.token_ids_cpu)
        saved = scheduler_output.num_spec_tokens_to_schedule
        scheduler_output.num_spec_tokens_to_schedule = batch_length
        try:
            return super().propose_draft_token_ids(
                scheduler_output, sampled_token_ids, sampling_metadata, hidden_states,
                sample_hidden_states, aux_hidden_states, spec_decode_metadata,
                common_attn_metadata, slot_mappings)
        finally:
            scheduler_output.num_spec_tokens_to_schedule = saved
            if drafter is not None:
                drafter.bass_catch_up = None

    @staticmethod
    def _bass_may_skip_draft(scheduler_output, req_ids, starts, debt, drafter) -> bool:
        """Skip the draft pass only in pure decoding (one token plus its drafts per request),
        and only while the catch-up it leaves fits one first pass of the drafter."""
        spec = scheduler_output.scheduled_spec_decode_tokens
        scheduled = [scheduler_output.num_scheduled_tokens.get(r, 0) for r in req_ids]
        if any(n != 1 + len(spec.get(r, ())) for r, n in zip(req_ids, scheduled)):
            return False
        owed_next = int((debt.owed(req_ids, starts) + scheduled).sum())
        return owed_next + 2 * len(req_ids) <= drafter.max_num_tokens

    def _bass_forget_finished(self, req_ids: list[str]) -> None:
        current = set(req_ids)
        debt = getattr(getattr(self, "drafter", None), "bass_kv_debt", None)
        for gone in self._bass_known_reqs - current:
            self.bass_policy.forget(gone)
            if debt is not None:
                debt.forget(gone)
        self._bass_known_reqs = current

    def _sample(self, logits, spec_decode_metadata):
        sampler = getattr(self, "rejection_sampler", None)
        if sampler is not None and hasattr(sampler, "current_req_ids"):
            sampler.current_req_ids = list(self.input_batch.req_ids)  # synthetic groups by id
        if self._bass_trace is None:
            return super()._sample(logits, spec_decode_metadata)
        token = self._bass_trace.begin("sample")
        try:
            return super()._sample(logits, spec_decode_metadata)
        finally:
            self._bass_trace.end(token)

    def take_draft_token_ids(self):
        drafts = super().take_draft_token_ids()
        plan = self.bass_plan
        if drafts is None or plan.per_request is None:
            return drafts
        drafts.draft_token_ids = [
            list(tokens[: plan.length_for(rid)])
            for rid, tokens in zip(drafts.req_ids, drafts.draft_token_ids)]
        return drafts


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
