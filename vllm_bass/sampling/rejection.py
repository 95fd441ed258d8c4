"""Exact speculative (rejection) sampling over a ragged batch of drafts.

Why our own: vLLM 0.27.1's draft_model path samples a measurably wrong distribution on the
CPU platform (its CPU stand-ins for the Triton kernels), and it has no per-request
heterogeneous synthetic acceptance. The acceptance test is torch, vectorised over the batch,
with the randomness drawn separately so a float64 reference can be fed the very same draws in
tests; the tail (accepted prefix, first rejection, bonus, padding) and the simple acceptance
rules are one Triton launch on CUDA and the same in torch elsewhere (`kernels.accept_and_emit`).

Rule (Leviathan et al. / Chen et al.; BASS uses the same): draft token x at position j is
accepted with probability min(1, p(x) / q(x)); at the first rejection the output is a sample
of normalize(max(0, p - q)); if every draft token is accepted, a bonus token is sampled from
the target at the next position. Greedy requests accept x iff x == argmax p and emit argmax p
on rejection, which makes greedy output identical to non-speculative greedy decoding.
Requests with a seed (`keyed`) use the position-keyed coupling of `vllm_bass.sampling.keyed`
instead: the target's own keyed sample at each draft position is the output, a draft token is
accepted iff it equals that sample, so their tokens do not depend on the drafts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vllm_bass.kernels.accept_and_emit import PLACEHOLDER_TOKEN_ID, accept_and_emit
from vllm_bass.sampling.keyed import KeyedTokens, keyed_sample
from vllm_bass.utils.host_copy import to_device
from vllm_bass.utils.ragged import ragged_rows

GREEDY_TEMPERATURE = 0.0
_SAMPLING_EPS = 1e-5


@dataclass
class SpeculationRandomness:
    """The random draws of one verification step.

    uniforms: [num_tokens] float64 in [0, 1), one per draft token (the accept test).
    recovery_noise: [batch, vocab] Exp(1) draws; argmax(residual / noise) samples the
        residual distribution (only the first rejected position of a request is ever used,
        so one row per request suffices). None when every request is greedy (synthetic
        acceptance of a greedy batch needs the uniforms only).
    """

    uniforms: torch.Tensor
    recovery_noise: torch.Tensor | None


def draw_randomness(num_draft_tokens: list[int], vocab_size: int,
                    generators: dict[int, torch.Generator] | None,
                    device: torch.device, recovery: bool = True) -> SpeculationRandomness:
    """Draw the step's randomness; requests with their own torch.Generator (per-request
    seeds) draw from it, in request order, so seeded outputs are reproducible.
    `recovery=False` (a greedy batch: no generators) skips the [batch, vocab] float64
    recovery noise, 64 MB a step at batch 256 with a 32k vocabulary."""
    num_tokens = sum(num_draft_tokens)
    uniforms = torch.rand(num_tokens, dtype=torch.float64, device=device)
    if not recovery:
        assert not generators, "requests with generators sample: they need recovery noise"
        return SpeculationRandomness(uniforms, None)
    noise = torch.empty(len(num_draft_tokens), vocab_size, dtype=torch.float64,
                        device=device).exponential_()
    if generators:
        starts = [0]
        for n in num_draft_tokens:
            starts.append(starts[-1] + n)
        for i, gen in generators.items():
            n = num_draft_tokens[i]
            if n == 0:
                continue  # no draws for undrafted requests: keeps seeded streams aligned
            uniforms[starts[i]:starts[i] + n].uniform_(generator=gen)
            noise[i].exponential_(generator=gen)
    return SpeculationRandomness(uniforms, noise)


def ragged_layout(num_draft_tokens: list[int], device: torch.device):
    """(request of each draft token, counts, each request's first draft token) on `device`,
    built on the host and moved in one copy."""
    counts = np.asarray(num_draft_tokens, dtype=np.int64)
    total = int(counts.sum())
    req, _ = ragged_rows(counts)
    starts = np.cumsum(counts) - counts
    both = to_device(np.concatenate([req, counts, starts]), device)
    batch = len(counts)
    return both[:total], both[total:total + batch], both[total + batch:]


def rejection_sample(
    draft_token_ids: torch.Tensor,      # [T] int
    num_draft_tokens: list[int],        # [B], ragged (0 allowed)
    target_logits: torch.Tensor,        # [T, V] after temperature / top-k / top-p
    bonus_token_ids: torch.Tensor,      # [B] or [B, 1]
    is_greedy: torch.Tensor,            # [B] bool: temperature 0 requests
    draft_probs: torch.Tensor | None,   # [T, V] q, or None for a deterministic draft
    randomness: SpeculationRandomness | None,
    synthetic_conditional_rates: torch.Tensor | None = None,  # [B, S] accept prob per pos
    max_spec_len: int | None = None,
    all_greedy: bool | None = None,     # host-known `is_greedy.all()` (saves a device sync)
    layout: tuple[torch.Tensor, ...] | None = None,  # `ragged_layout`, when the caller has it
    keyed: KeyedTokens | None = None,   # the draft tokens of seeded requests
) -> torch.Tensor:
    """Returns [B, max_spec_len + 1] int32 token ids, PLACEHOLDER_TOKEN_ID after the end.

    Runs every verification step, so it avoids device->host syncs: the ragged layout is
    built on the host and copied once, and no branch reads a device value (except
    `is_greedy.all()` when the caller does not say `all_greedy`)."""
    device = target_logits.device
    batch = len(num_draft_tokens)
    num_tokens = int(draft_token_ids.shape[0])
    assert target_logits.ndim == 2 and target_logits.shape[0] == num_tokens, (
        f"target_logits {tuple(target_logits.shape)} vs {num_tokens} draft tokens")
    assert sum(num_draft_tokens) == num_tokens, "num_draft_tokens must sum to the draft count"
    assert draft_probs is None or draft_probs.shape == target_logits.shape
    spec_len = max(num_draft_tokens, default=0) if max_spec_len is None else max_spec_len
    if num_tokens == 0:
        out = torch.full((batch, spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32,
                         device=device)
        out[:, 0] = bonus_token_ids.reshape(batch).to(torch.int32)
        return out
    req_of_token, counts, starts = layout or ragged_layout(num_draft_tokens, device)
    if all_greedy is None:
        all_greedy = bool(is_greedy.all())
    target_argmax = target_logits.argmax(dim=-1)
    # greedy: a draft token is accepted iff it is the argmax, which is also what a
    # rejection emits; `accept` stays None for that rule (the emit kernel applies it)
    accept: torch.Tensor | None = None
    recovered = target_argmax

    if not all_greedy or synthetic_conditional_rates is not None:
        assert randomness is not None, "random requests need randomness"
    if not all_greedy:
        assert randomness.recovery_noise is not None, "random requests need recovery noise"
        draft = draft_token_ids.to(torch.long).clamp_min(0)
        greedy_tok = is_greedy.to(device=device, dtype=torch.bool)[req_of_token]
        p = torch.softmax(target_logits.to(torch.float64), dim=-1)
        p_x = p.gather(1, draft[:, None]).squeeze(1)
        if draft_probs is None:
            q_x = torch.ones_like(p_x)
            residual = p.clone()
            residual.scatter_(1, draft[:, None], 0.0)
        else:
            q = draft_probs.to(torch.float64)
            q_x = q.gather(1, draft[:, None]).squeeze(1)
            residual = (p - q).clamp_min_(0.0)
        # p == q leaves no residual mass; rejection then has probability 0, but keep p.
        residual = torch.where((residual.sum(-1) <= 0)[:, None], p, residual)
        noise = randomness.recovery_noise.to(torch.float64)[req_of_token]
        random_recovered = (residual / noise).argmax(dim=-1)
        random_accept = (q_x > 0) & (p_x >= randomness.uniforms.to(torch.float64) * q_x)
        accept = torch.where(greedy_tok, draft == target_argmax, random_accept)
        recovered = torch.where(greedy_tok, target_argmax, random_recovered)

    if keyed is not None and keyed.index.shape[0] > 0:
        # seeded requests: the output at each position is the target's keyed sample there
        sample = keyed_sample(target_logits[keyed.index], keyed.seeds, keyed.positions)
        if accept is None:
            accept = draft_token_ids.to(torch.long) == target_argmax
            recovered = target_argmax.clone()
        accept[keyed.index] = draft_token_ids[keyed.index].to(torch.long) == sample
        recovered[keyed.index] = sample

    rates = uniforms = None
    if synthetic_conditional_rates is not None:  # replaces every other acceptance rule
        rates = synthetic_conditional_rates.to(device=device, dtype=torch.float64)
        uniforms = randomness.uniforms.to(torch.float64)
    return accept_and_emit(draft_token_ids.contiguous(), recovered, accept, uniforms,
                           rates.contiguous() if rates is not None else None, starts,
                           counts, bonus_token_ids.reshape(batch).contiguous(), spec_len)
