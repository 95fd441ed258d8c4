"""BASS model-runner mixin, layered on vLLM's own V1 GPUModelRunner / CPUModelRunner.

vLLM's runner already does the heavy lifting we want to reuse: it loads the draft beside the
target, gives it paged KV in the target's block tables, verifies a ragged batch of drafts in
ONE target forward pass (`num_draft_tokens` may differ per sequence, 0 included) and rolls
back rejected KV slots by overwriting. The mixin changes what BASS changes:
  * the rejection sampler -> `BassRejectionSampler` (exact on every device; synthetic modes);
  * the draft length of each step -> a `DraftLengthPolicy` updated from this step's accepted
    counts *before* the drafter runs (the paper's order: verify, update l, draft);
  * per-sequence draft lengths -> drafts are truncated per request before the scheduler
    sees them, so the next verification batch is ragged.
"""

from __future__ import annotations

from typing import Any

import torch

from vllm_bass.config import BassConfig
from vllm_bass.proposer.policies import DraftPlan, Verified, make_policy


def count_accepted(sampled_token_ids: Any, num_draft_tokens: list[int]) -> list[int]:
    """Accepted draft tokens per request from the sampler output (-1 marks unused slots)."""
    if isinstance(sampled_token_ids, torch.Tensor):
        emitted = (sampled_token_ids != -1).sum(dim=1).tolist()
    else:
        emitted = [len(t) for t in sampled_token_ids]
    return [max(0, min(e - 1, d)) for e, d in zip(emitted, num_draft_tokens)]


class BassModelRunnerMixin:
    """Mixed in front of vLLM's runner class by `install_bass_runner` (see worker.py)."""

    bass_config: BassConfig

    def _bass_init(self, bass_config: BassConfig) -> None:
        from vllm_bass.sampling.sampler import BassRejectionSampler

        self.bass_config = bass_config
        self.bass_policy = make_policy(bass_config)
        self.bass_plan = DraftPlan(bass_config.num_speculative_tokens)
        if getattr(self, "speculative_config", None) is not None and hasattr(self, "rejection_sampler"):
            self.rejection_sampler = BassRejectionSampler(
                self.sampler, self.speculative_config, bass_config, self.device)
        self._bass_known_reqs: set[str] = set()
        if getattr(self, "drafter", None) is not None:
            from vllm_bass.proposer.draft_model import install_bass_drafter

            install_bass_drafter(self.drafter)

    def propose_draft_token_ids(self, scheduler_output, sampled_token_ids, sampling_metadata,
                                hidden_states, sample_hidden_states, aux_hidden_states,
                                spec_decode_metadata, common_attn_metadata, slot_mappings):
        req_ids = list(self.input_batch.req_ids)
        if spec_decode_metadata is not None:
            num_draft = list(spec_decode_metadata.num_draft_tokens)
            accepted = count_accepted(sampled_token_ids, num_draft)
            self.bass_policy.observe([
                Verified(rid, d, a) for rid, d, a in zip(req_ids, num_draft, accepted) if d > 0])
        self._bass_forget_finished(req_ids)
        cost = getattr(scheduler_output, "bass_step_cost", None)
        if cost is not None and hasattr(self.bass_policy, "cost"):
            from vllm_bass.proposer.cost_model import StepCostModel

            self.bass_policy.cost = StepCostModel(*cost)  # measured by the scheduler
        plan = self.bass_policy.plan(req_ids)
        k_max = self.bass_config.num_speculative_tokens
        batch_length = max(0, min(plan.batch_length, k_max))
        self.bass_plan = plan
        saved = scheduler_output.num_spec_tokens_to_schedule
        scheduler_output.num_spec_tokens_to_schedule = batch_length
        try:
            return super().propose_draft_token_ids(
                scheduler_output, sampled_token_ids, sampling_metadata, hidden_states,
                sample_hidden_states, aux_hidden_states, spec_decode_metadata,
                common_attn_metadata, slot_mappings)
        finally:
            scheduler_output.num_spec_tokens_to_schedule = saved

    def _bass_forget_finished(self, req_ids: list[str]) -> None:
        current = set(req_ids)
        for gone in self._bass_known_reqs - current:
            self.bass_policy.forget(gone)
        self._bass_known_reqs = current

    def _sample(self, logits, spec_decode_metadata):
        sampler = getattr(self, "rejection_sampler", None)
        if sampler is not None and hasattr(sampler, "current_req_ids"):
            sampler.current_req_ids = list(self.input_batch.req_ids)  # synthetic groups by id
        return super()._sample(logits, spec_decode_metadata)

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
