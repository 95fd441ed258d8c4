"""Position-keyed noise: reproducible sampling for requests with a seed.

A seeded request samples the token at absolute sequence position t (the number of tokens
before it, prompt included) as

    token_t = argmax_v  logits_t(v) + G(seed, t, v),    G = -log(-log u(seed, t, v))

with logits_t the processed target logits (temperature, top-k, top-p) and u a uniform in
(0, 1) from a counter-based hash of (seed, t, v). This is the Gumbel-max form of
argmax p_t(v) / E(seed, t, v) with E = -log u ~ Exp(1) (the exponential race): an exact sample
of p_t, independent across positions (distinct keys). It depends on nothing but the seed,
the position and the target's distribution there: not on how positions were grouped into
verification steps, what the draft proposed, the batch, the timing or a preemption. Drafting
a seeded request with the same G on the draft's logits (Gumbel coupling) makes the draft
agree with the target's sample whenever the two argmaxes agree, which is likely when q ~ p.

Torch ops here, vectorised on the logits' device (the hash keeps every value in 32 bits
inside int64 tensors; the multiplies are split in 16-bit halves so no product overflows
int64); on CUDA `keyed_sample` runs the same arithmetic in Triton
(`vllm_bass.kernels.keyed_sample`), 17-32x faster on an H100 (session 26).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vllm_bass.utils.host_copy import to_device
from vllm_bass.utils.ragged import ragged_rows

_M32 = 0xFFFFFFFF
KEYED_KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # the kernel's logits
_TWO32 = float(2 ** 32)


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for 0 <= x < 2^32 and a 32-bit constant c, with every intermediate
    below 2^49."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _M32


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    """MurmurHash3's 32-bit finaliser: a bijection of [0, 2^32) with full avalanche."""
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def signed_seed(seed: int) -> int:
    """A seed (any Python int, e.g. torch.Generator.initial_seed()'s uint64) as the int64
    that carries its low 64 bits."""
    seed &= (1 << 64) - 1
    return seed - (1 << 64) if seed >= (1 << 63) else seed


def _row_keys(seeds: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two 32-bit keys per (seed, position); the first is injective in the position for a
    fixed seed (positions < 2^32)."""
    seeds = seeds.to(torch.int64)
    lo, hi = seeds & _M32, (seeds >> 32) & _M32
    a = _fmix32(lo ^ 0x9E3779B9)
    a = _fmix32(a ^ hi)
    a = _fmix32((a + _mul32(positions.to(torch.int64) & _M32, 0x632BE5AB)) & _M32)
    b = _fmix32(a ^ 0x5BD1E995)
    return a, b


def keyed_uniform(seeds: torch.Tensor, positions: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """[N, vocab] float64 uniforms in (0, 1), u(seed_i, position_i, v). Within a row the map
    v -> u is injective (no ties)."""
    a, b = _row_keys(seeds, positions)
    v = _mul32(torch.arange(vocab_size, dtype=torch.int64, device=seeds.device), 0x9E3779B1)
    h = _fmix32(v[None, :] ^ a[:, None])
    h = _fmix32(h ^ b[:, None])
    return (h.to(torch.float64) + 0.5) / _TWO32


def keyed_exponential(seeds: torch.Tensor, positions: torch.Tensor,
                      vocab_size: int) -> torch.Tensor:
    """[N, vocab] Exp(1) draws E(seed, position, v) = -log u."""
    return -torch.log(keyed_uniform(seeds, positions, vocab_size))


def keyed_gumbel(seeds: torch.Tensor, positions: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """[N, vocab] Gumbel(0, 1) draws -log E(seed, position, v)."""
    return -torch.log(keyed_exponential(seeds, positions, vocab_size))


def keyed_sample(logits: torch.Tensor, seeds: torch.Tensor,
                 positions: torch.Tensor) -> torch.Tensor:
    """[N] token ids: argmax(logits + G) per row, an exact sample of softmax(logits) row i
    keyed by (seeds[i], positions[i]). `logits` are processed (temperature, top-k / top-p;
    -inf for filtered tokens); the log-space form needs no softmax, so two callers holding
    the same logits get the same token whatever their softmax precision. On CUDA one
    Triton launch (`vllm_bass.kernels.keyed_sample`: every caller in a process takes the
    same path, so draft and target agree); elsewhere the torch form below."""
    if (logits.is_cuda and logits.dim() == 2 and logits.shape[0] > 0
            and logits.dtype in KEYED_KERNEL_DTYPES):
        from vllm_bass.kernels.keyed_sample import keyed_sample_triton

        return keyed_sample_triton(logits, seeds, positions)
    return keyed_sample_torch(logits, seeds, positions)


def keyed_sample_torch(logits: torch.Tensor, seeds: torch.Tensor,
                       positions: torch.Tensor) -> torch.Tensor:
    """`keyed_sample` in torch ops (~40 launches over rows x vocab): the CPU path and the
    kernel's reference."""
    if logits.shape[0] == 0:
        return torch.zeros(0, dtype=torch.long, device=logits.device)
    g = keyed_gumbel(seeds.to(logits.device), positions.to(logits.device), logits.shape[-1])
    return (logits.to(torch.float64) + g).argmax(dim=-1)


@dataclass
class KeyedTokens:
    """The draft tokens of seeded requests in one verification step."""

    index: torch.Tensor      # [S] long: their indices among the step's flat draft tokens
    seeds: torch.Tensor      # [S] int64: their request's seed
    positions: torch.Tensor  # [S] int64: the absolute position each one's target sample takes


def keyed_draft_tokens(num_draft_tokens: list[int], rows: list[int], seeds: torch.Tensor,
                       next_positions: torch.Tensor) -> KeyedTokens:
    """`rows`: the seeded requests (batch indices, on the host); `seeds`, `next_positions`:
    theirs, on the device; next_positions[i] is the position of row i's bonus token (one
    past its last draft), so draft j of n samples position next - n + j. The index
    arithmetic runs on the host and goes over in one copy; no device value is read."""
    counts = np.asarray(num_draft_tokens, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    n = counts[np.asarray(rows, dtype=np.int64)] if rows else np.zeros(0, dtype=np.int64)
    slot, j = ragged_rows(n)
    index = starts[np.asarray(rows, dtype=np.int64)][slot] + j if rows else slot
    back = n[slot] - j
    both = to_device(np.concatenate([index, slot, back]), seeds.device)
    total = len(slot)
    index_d, slot_d, back_d = both[:total], both[total:2 * total], both[2 * total:]
    return KeyedTokens(index_d, seeds[slot_d], next_positions[slot_d] - back_d)
