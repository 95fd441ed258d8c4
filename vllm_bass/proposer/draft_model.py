"""The draft model's sampler, for exact *and* reproducible, better-accepted speculation.

vLLM's draft-model proposer does the batched drafting over the draft's paged KV and is kept
whole; we only replace how it turns draft logits into (token, q):
  * q is processed like the target's p (temperature, top-k, top-p), which raises acceptance;
    exactness never depends on this, only on q being the distribution the token came from;
  * requests with a seed draw their draft tokens from their own torch.Generator (vLLM 0.27.1
    ignores seeds here), so a seeded request is reproducible end to end.
"""

from __future__ import annotations

import torch
from vllm.v1.spec_decode.draft_model import DraftModelProposer

from vllm_bass.sampling.rejection import _SAMPLING_EPS


def sample_draft(logits: torch.Tensor, sampling_metadata) -> tuple[torch.Tensor, torch.Tensor]:
    """One draft position for each request row: returns (token ids [B], q [B, V] float32)."""
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
    tokens = torch.where(greedy, logits.argmax(dim=-1), tokens)
    return tokens, q


class BassDraftModelProposer(DraftModelProposer):
    def _sample_from_logits(self, logits, sampling_metadata):
        if not self._enable_probabilistic_draft_probs or sampling_metadata.all_greedy:
            return super()._sample_from_logits(logits, sampling_metadata)
        if sampling_metadata.temperature is None or (
                sampling_metadata.temperature.shape[0] != logits.shape[0]):
            return super()._sample_from_logits(logits, sampling_metadata)
        return sample_draft(logits, sampling_metadata)


def install_bass_drafter(drafter) -> None:
    if isinstance(drafter, DraftModelProposer) and not isinstance(drafter, BassDraftModelProposer):
        drafter.__class__ = BassDraftModelProposer
