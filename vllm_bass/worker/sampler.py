"""`BassRejectionSampler`: vLLM's RejectionSampler with our exact, device-agnostic core.

Kept from vLLM (by inheritance): bonus-token sampling through the engine's Sampler, logits
processors / penalties over the draft positions, logprobs. Replaced: the target-logit
processing (temperature / top-k / top-p in plain torch, expanded per draft token) and the
accept / recover step (`vllm_bass.sampling.rejection`), plus per-request synthetic
acceptance for benchmarks. Seeded requests verify position-keyed (`worker.seeded`).
"""

from __future__ import annotations

import re
from dataclasses import replace

import torch
from vllm.v1.outputs import SamplerOutput
from vllm.v1.sample.rejection_sampler import MAX_SPEC_LEN, RejectionSampler

from vllm_bass.config import BassConfig
from vllm_bass.kernels.accept_and_emit import warm_up as warm_up_accept_kernel
from vllm_bass.sampling.keyed import keyed_draft_tokens
from vllm_bass.sampling.rejection import (
    _SAMPLING_EPS,
    draw_randomness,
    ragged_layout,
    rejection_sample,
)
from vllm_bass.utils.host_copy import to_device


def unconditional_to_conditional(rates: list[float], length: int) -> list[float]:
    """P(accept pos i) -> P(accept pos i | accepted pos < i), padded with 0 to `length`."""
    out, prev = [], 1.0
    for r in list(rates)[:length]:
        out.append(0.0 if prev <= 0 else min(1.0, r / prev))
        prev = r
    return out + [0.0] * (length - len(out))


def process_target_logits(logits: torch.Tensor, sampling_metadata, req_of_token: torch.Tensor,
                          is_greedy: torch.Tensor) -> torch.Tensor:
    """Temperature, top-k and top-p per draft token, as the engine's Sampler applies them
    (`req_of_token`: each draft token's request, from `ragged_layout`)."""
    if sampling_metadata.all_greedy:
        return logits
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p

    temperature = torch.where(is_greedy, torch.ones_like(sampling_metadata.temperature),
                              sampling_metadata.temperature)
    logits = logits / temperature[req_of_token].unsqueeze(-1).to(logits.dtype)
    top_k = sampling_metadata.top_k
    top_p = sampling_metadata.top_p
    if top_k is not None:
        top_k = top_k[req_of_token]
    if top_p is not None:
        top_p = top_p[req_of_token]
    if top_k is None and top_p is None:
        return logits
    return apply_top_k_top_p(logits, top_k, top_p)


# vLLM 0.27.1 makes a request's internal id unique with a random suffix: "<id>-<8 hex>"
# (`v1/engine/input_processor.py`); the default group follows the id without it
_UNIQUE_SUFFIX = re.compile(r"-[0-9a-f]{8}$")


def default_synthetic_group(req_id: str, n_groups: int) -> int:
    """The synthetic group of a request that did not ask for one: from the id the user (or
    LLM.generate's counter) gave it, so the same request gets the same group in every run
    and every batch composition."""
    return sum(_UNIQUE_SUFFIX.sub("", req_id).encode()) % n_groups


# SamplingParams(extra_args={SYNTHETIC_GROUP_KEY: g}): a request's synthetic acceptance group
# (an index into synthetic_acceptance_rate_groups), for benchmarks of heterogeneous batches.
SYNTHETIC_GROUP_KEY = "bass_synthetic_group"


class BassRejectionSampler(RejectionSampler):
    def __init__(self, sampler, spec_config, bass_config: BassConfig, device):
        super().__init__(sampler, None, device)  # our synthetic mode, not vLLM's
        self.bass_config = bass_config
        self.synthetic_groups: torch.Tensor | None = None
        if bass_config.acceptance_mode == "synthetic":
            k = bass_config.num_speculative_tokens
            self.synthetic_groups = torch.tensor(
                [unconditional_to_conditional(r, k) for r in bass_config.synthetic_rate_groups()],
                dtype=torch.float64, device=device)
        self.synthetic_mode = self.synthetic_groups is not None
        if torch.device(device).type == "cuda":
            warm_up_accept_kernel(torch.device(device), bass_config.num_speculative_tokens)
        # request id -> synthetic group, so a request keeps its acceptance rates for life
        # (the runner drops requests that left the batch: `forget`)
        self.request_groups: dict[str, int] = {}
        self.current_req_ids: list[str] = []
        # the group each current request asked for (SamplingParams.extra_args
        # [SYNTHETIC_GROUP_KEY]), None where it did not; set by the runner every step
        self.current_groups: list[int | None] = []
        # the runner's seeded.KeyedSampling (the step's seeded rows), None outside BASS runners
        self.keyed = None
        self._rates_key: tuple | None = None  # _synthetic_rates' last batch and answer
        self._rates_value: torch.Tensor | None = None
        self._rates_source: torch.Tensor | None = None

    def _synthetic_rates(self, num_reqs: int) -> torch.Tensor:
        """Each current request's conditional rates [num_reqs, S]; the same batch as the
        last step (most steps) reuses the last answer: a request keeps its group for life."""
        assert self.synthetic_groups is not None
        key = (tuple(self.current_req_ids[:num_reqs]), tuple(self.current_groups[:num_reqs]),
               num_reqs)
        # the groups' tensor is replaced, not edited, when the rates change
        if key == self._rates_key and self._rates_source is self.synthetic_groups:
            return self._rates_value
        n_groups = self.synthetic_groups.shape[0]
        idx = []
        for i in range(num_reqs):
            rid = self.current_req_ids[i] if i < len(self.current_req_ids) else str(i)
            if rid not in self.request_groups:
                asked = self.current_groups[i] if i < len(self.current_groups) else None
                # asked for, else deterministic per request id: the same group on every
                # TP rank and every run
                self.request_groups[rid] = (int(asked) % n_groups if asked is not None
                                            else default_synthetic_group(rid, n_groups))
            idx.append(self.request_groups[rid])
        value = self.synthetic_groups[to_device(idx, self.synthetic_groups.device, torch.long)]
        self._rates_key, self._rates_value = key, value
        self._rates_source = self.synthetic_groups
        return value

    def forget(self, req_id: str) -> None:
        """Bounded state: a request that left the batch keeps no group here."""
        self.request_groups.pop(req_id, None)

    def forward(self, metadata, draft_probs, logits, sampling_metadata) -> SamplerOutput:
        assert metadata.max_spec_len <= MAX_SPEC_LEN
        bonus_logits = logits[metadata.bonus_logits_indices]
        bonus = self.sampler(
            logits=bonus_logits,
            sampling_metadata=replace(sampling_metadata, max_num_logprobs=-1),
            predict_bonus_token=True,
            logprobs_mode_override="processed_logits"
            if self.is_processed_logprobs_mode else "raw_logits",
        )
        raw_target_logits = logits[metadata.target_logits_indices].to(torch.float32)
        target_logits = raw_target_logits
        if not self.is_processed_logprobs_mode and sampling_metadata.max_num_logprobs is not None:
            target_logits = target_logits.clone()  # the raw logits stay for the logprobs
        target_logits = self.apply_logits_processors(target_logits, sampling_metadata, metadata)

        num_reqs = len(metadata.num_draft_tokens)
        if sampling_metadata.all_greedy or sampling_metadata.temperature is None:
            is_greedy = torch.ones(num_reqs, dtype=torch.bool, device=logits.device)
        else:
            is_greedy = sampling_metadata.temperature < _SAMPLING_EPS
        # built on the host and copied once, shared by both steps below
        layout = ragged_layout(metadata.num_draft_tokens, logits.device)
        target_logits = process_target_logits(target_logits, sampling_metadata, layout[0],
                                              is_greedy)
        need_random = self.synthetic_mode or not sampling_metadata.all_greedy
        randomness = (draw_randomness(metadata.num_draft_tokens, target_logits.shape[-1],
                                      sampling_metadata.generators, logits.device,
                                      recovery=not sampling_metadata.all_greedy)
                      if need_random else None)
        seeded = self.keyed.current if self.keyed is not None else None
        keyed = (keyed_draft_tokens(metadata.num_draft_tokens, seeded.rows, seeded.seeds,
                                    seeded.next_positions)
                 if seeded is not None and not sampling_metadata.all_greedy else None)
        output_token_ids = rejection_sample(
            metadata.draft_token_ids, metadata.num_draft_tokens, target_logits,
            bonus.sampled_token_ids, is_greedy, draft_probs, randomness,
            synthetic_conditional_rates=(self._synthetic_rates(num_reqs)
                                         if self.synthetic_mode else None),
            max_spec_len=metadata.max_spec_len,
            all_greedy=bool(sampling_metadata.all_greedy),
            layout=layout,
            keyed=keyed,
        )
        logprobs_tensors = None
        if sampling_metadata.max_num_logprobs is not None:
            logprobs_tensors = self._get_logprobs_tensors(
                sampling_metadata.max_num_logprobs, metadata, logits,
                target_logits if self.is_processed_logprobs_mode else raw_target_logits,
                bonus.logprobs_tensors.logprobs, output_token_ids)
        return SamplerOutput(sampled_token_ids=output_token_ids,
                             logprobs_tensors=logprobs_tensors)
