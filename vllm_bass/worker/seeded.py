"""Reproducible seeded requests in BASS engines: the position-keyed coupling
(`vllm_bass.sampling.keyed`) wired into vLLM's sampling.

A seeded request's token at position t must be argmax(logits_t + G(seed, t, .)) wherever it
is produced: by the engine's Sampler (a prefill's first token, steps without speculation,
the bonus token of a verification), by the rejection sampler (a draft position) or, as a
proposal, by the drafter. Each step the runner builds `SeededRows` from the batch's
generators (vLLM gives exactly the seeded rows one) and the step's sequence lengths (the
position of each row's next sampled token), and hands it to the places that sample:
  * vLLM's `TopKTopPSampler` of the runner's Sampler: its per-instance `forward` (vLLM sets
    it in `__init__` per platform: native, CPU, FlashInfer) is wrapped so that, while a
    step has seeded rows, it samples those rows keyed (every platform then takes this one
    path for seeded batches, FlashInfer included); otherwise it calls vLLM's own;
  * `BassRejectionSampler.forward` (keyed target samples at each draft position);
  * the drafter (`draft_model.sample_draft`), through `SeededRows.seeds`.
Nothing is built and nothing is copied in steps without a seeded request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vllm_bass.sampling.keyed import keyed_sample, signed_seed
from vllm_bass.utils.host_copy import to_device


@dataclass
class SeededRows:
    """The seeded rows of one step."""

    rows: list[int]               # host: batch rows with a seed, ascending
    rows_device: torch.Tensor     # [S] long
    seeds: torch.Tensor           # [S] int64
    next_positions: torch.Tensor  # [S] int64: position of the token sampled after the
    #                               step's last scheduled token (= the row's sequence length)

    def per_row(self, num_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(seeded mask [num_rows] bool, seeds [num_rows] int64) over every row."""
        device = self.seeds.device
        mask = torch.zeros(num_rows, dtype=torch.bool, device=device)
        seeds = torch.zeros(num_rows, dtype=torch.int64, device=device)
        mask[self.rows_device] = True
        seeds[self.rows_device] = self.seeds
        return mask, seeds


def seeded_rows(generators: dict[int, torch.Generator], seq_lens: torch.Tensor,
                device: torch.device) -> SeededRows | None:
    """None without seeded rows (no work at all); else the rows, their seeds (the seed vLLM
    gave the request's generator) and their next positions, read on the device from
    `seq_lens` (the step's sequence lengths, as vLLM computed them, under async scheduling
    too)."""
    if not generators:
        return None
    rows = sorted(generators)
    host = np.array(rows + [signed_seed(generators[r].initial_seed()) for r in rows],
                    dtype=np.int64)
    both = to_device(host, device)
    rows_device, seeds = both[:len(rows)], both[len(rows):]
    return SeededRows(rows, rows_device, seeds, seq_lens[rows_device].to(torch.int64))


class KeyedSampling:
    """Owns the runner's per-step `SeededRows` (`current`, set around the step's sampling
    by the runner) and the keyed wrapper of the Sampler's top-k/top-p sampler."""

    def __init__(self, sampler) -> None:
        self.current: SeededRows | None = None
        topk_topp = sampler.topk_topp_sampler
        original = topk_topp.forward
        if getattr(original, "bass_keyed", False):
            raise RuntimeError("the sampler already samples seeded rows keyed")

        def forward(logits, generators, k, p):
            seeded = self.current
            if seeded is None or not generators:
                return original(logits, generators, k, p)
            return keyed_topk_topp_sample(logits, generators, k, p, seeded,
                                          topk_topp.logprobs_mode)

        forward.bass_keyed = True
        forward.original = original
        topk_topp.forward = forward


def keyed_topk_topp_sample(logits, generators, k, p, seeded: SeededRows, logprobs_mode):
    """vLLM's forward_native (top-k/top-p, processed logprobs, the exponential race with the
    request generators, which stay advanced as vLLM expects), then the seeded rows' tokens
    replaced by their keyed samples at their next positions."""
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p

    logits = apply_top_k_top_p(logits, k, p)
    to_return = None
    if logprobs_mode == "processed_logits":
        to_return = logits
    elif logprobs_mode == "processed_logprobs":
        to_return = logits.log_softmax(dim=-1, dtype=torch.float32)
    keyed = keyed_sample(logits[seeded.rows_device], seeded.seeds, seeded.next_positions)
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    q = torch.empty_like(probs)
    if len(generators) != probs.shape[0]:
        q.exponential_()
    for i, generator in generators.items():
        q[i].exponential_(generator=generator)
    sampled = probs.div_(q).argmax(dim=-1).view(-1)
    sampled[seeded.rows_device] = keyed
    return sampled, to_return
