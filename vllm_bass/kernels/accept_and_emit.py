"""Accept the drafts and emit each request's output row, in one launch.

The tail of every verification step (`sampling.rejection.rejection_sample`): given, per
draft token, whether it is accepted and what the target emits if it is the first one
rejected, each request keeps its accepted prefix, then either the token emitted at its
first rejection or, when every draft was accepted, the bonus token; -1 pads the row. In
torch that is ~25 small ops a step (pads, scatters, a cumprod, gathers); on the H100 the
host time of those launches was 3x what vLLM's sampler spends at batch 64 (session 14's
profile). Here one program per request does it all, and the acceptance rule itself where it
is simple:
  * greedy (no `accept`, no `rates`): a draft token is accepted iff it equals `recovered`
    (the target's argmax at its position);
  * synthetic acceptance (`rates`): accepted iff uniform < rates[request, position];
  * otherwise `accept` says (random requests, keyed requests: computed by the caller).
A negative draft id (vLLM's placeholder for a missing draft) is always rejected.
`accept_and_emit_reference` is the same in plain torch (CPU, and the tests' reference).
"""

from __future__ import annotations

import logging

import torch
import triton
import triton.language as tl

logger = logging.getLogger("vllm.bass")

PLACEHOLDER_TOKEN_ID = -1
_PAD = tl.constexpr(PLACEHOLDER_TOKEN_ID)  # what a kernel may read of a global
# False after the kernel failed to compile at start-up (`warm_up`): the torch path serves
_triton_usable = True
MIN_BLOCK = 32  # one binary for every draft up to 31 tokens (block = a power of two)


# Every runtime argument unspecialised, pointers' alignment included: one binary per
# constexpr combination, compiled by `warm_up`. Triton's default (ints on == 1 and % 16,
# pointers on 16-byte alignment) compiled a new variant inside timed steps when a draft
# slice started off alignment (H100, session 16: one compile in the repeats of 2 of 12
# settings, ~130 ms, 1.2x on that repeat).
_RUNTIME_ARGS = ["draft_ptr", "recovered_ptr", "accept_ptr", "uniforms_ptr", "rates_ptr",
                 "rates_stride", "num_rates", "starts_ptr", "counts_ptr", "bonus_ptr",
                 "out_ptr", "out_stride"]


@triton.jit(do_not_specialize=_RUNTIME_ARGS, do_not_specialize_on_alignment=_RUNTIME_ARGS)
def _accept_and_emit_kernel(
    draft_ptr,  # [T] int: draft token ids (negative: missing, rejected)
    recovered_ptr,  # [T] int64: what the target emits at a first rejection there
    accept_ptr,  # [T] bool, read when HAS_ACCEPT
    uniforms_ptr,  # [T] float64, read when HAS_RATES
    rates_ptr,  # [B, num_rates] float64, read when HAS_RATES
    rates_stride,
    num_rates,
    starts_ptr,  # [B] int64: each request's first draft token
    counts_ptr,  # [B] int64: its draft length
    bonus_ptr,  # [B] int: the bonus token (all drafts accepted)
    out_ptr,  # [B, out_stride] int32, every column written
    out_stride,
    HAS_ACCEPT: tl.constexpr,
    HAS_RATES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    req = tl.program_id(0)
    start = tl.load(starts_ptr + req)
    count = tl.load(counts_ptr + req)
    offs = tl.arange(0, BLOCK)
    in_draft = offs < count
    draft = tl.load(draft_ptr + start + offs, mask=in_draft, other=-1).to(tl.int64)
    recovered = tl.load(recovered_ptr + start + offs, mask=in_draft, other=0).to(tl.int64)
    if HAS_RATES:
        u = tl.load(uniforms_ptr + start + offs, mask=in_draft, other=1.0)
        rate = tl.load(rates_ptr + req.to(tl.int64) * rates_stride + offs,
                       mask=in_draft & (offs < num_rates), other=0.0)
        accepted = u < rate
    elif HAS_ACCEPT:
        accepted = tl.load(accept_ptr + start + offs, mask=in_draft, other=0) != 0
    else:
        accepted = draft == recovered
    accepted = accepted & in_draft & (draft >= 0)
    # the accepted prefix ends at the first rejected position (or the draft's end)
    num_accepted = tl.min(tl.where(accepted, count, offs), axis=0)
    num_accepted = tl.minimum(num_accepted, count)
    at_reject = tl.sum(tl.where(offs == num_accepted, recovered, 0), axis=0)
    bonus = tl.load(bonus_ptr + req).to(tl.int64)
    last = tl.where(num_accepted < count, at_reject, bonus)
    row = tl.where(offs < num_accepted, draft,
                   tl.where(offs == num_accepted, last, _PAD))
    tl.store(out_ptr + req.to(tl.int64) * out_stride + offs, row.to(tl.int32),
             mask=offs < out_stride)


def _check(draft, recovered, accept, uniforms, rates, starts, counts, bonus, spec_len):
    num_tokens = draft.shape[0]
    batch = starts.shape[0]
    assert draft.dim() == 1 and not draft.is_floating_point(), (draft.shape, draft.dtype)
    assert recovered.shape == (num_tokens,) and recovered.dtype == torch.int64, (
        recovered.shape, recovered.dtype)
    assert starts.shape == counts.shape == (batch,), (starts.shape, counts.shape)
    assert starts.dtype == counts.dtype == torch.int64, (starts.dtype, counts.dtype)
    assert bonus.shape == (batch,) and not bonus.is_floating_point(), bonus.shape
    assert accept is None or (accept.shape == (num_tokens,) and accept.dtype == torch.bool)
    assert (uniforms is None) == (rates is None), "synthetic acceptance needs both"
    if rates is not None:
        assert uniforms.shape == (num_tokens,) and uniforms.dtype == torch.float64
        assert rates.dim() == 2 and rates.shape[0] == batch and rates.dtype == torch.float64
        assert rates.stride(1) == 1, "rates rows must be contiguous"
    assert spec_len >= 0
    for t in (draft, recovered, accept, uniforms, starts, counts, bonus):
        assert t is None or t.is_contiguous(), "1-D inputs must be contiguous"


def _block(spec_len: int) -> int:
    return max(MIN_BLOCK, triton.next_power_of_2(spec_len + 1))


def accept_and_emit(draft: torch.Tensor, recovered: torch.Tensor, accept: torch.Tensor | None,
                    uniforms: torch.Tensor | None, rates: torch.Tensor | None,
                    starts: torch.Tensor, counts: torch.Tensor, bonus: torch.Tensor,
                    spec_len: int, use_triton: bool | None = None) -> torch.Tensor:
    """[B, spec_len + 1] int32 output rows (module docstring); `rates` ([B, S] float64,
    position j of request i accepted iff uniforms < rates[i, j], 0 past S) wins over
    `accept`, which wins over the greedy rule. `use_triton` None: Triton on CUDA, torch
    elsewhere (True on CPU: the tests, under TRITON_INTERPRET)."""
    _check(draft, recovered, accept, uniforms, rates, starts, counts, bonus, spec_len)
    if not (draft.is_cuda and _triton_usable if use_triton is None else use_triton):
        return accept_and_emit_reference(draft, recovered, accept, uniforms, rates, starts,
                                         counts, bonus, spec_len)
    batch = starts.shape[0]
    out = torch.empty(batch, spec_len + 1, dtype=torch.int32, device=draft.device)
    if batch == 0:
        return out
    dummy = recovered  # never read: a disabled input's pointer
    _accept_and_emit_kernel[(batch,)](
        draft, recovered, dummy if accept is None else accept,
        dummy if uniforms is None else uniforms, dummy if rates is None else rates,
        0 if rates is None else rates.stride(0), 0 if rates is None else rates.shape[1],
        starts, counts, bonus, out, spec_len + 1,
        HAS_ACCEPT=accept is not None, HAS_RATES=rates is not None, BLOCK=_block(spec_len))
    return out


def accept_and_emit_reference(draft, recovered, accept, uniforms, rates, starts, counts,
                              bonus, spec_len) -> torch.Tensor:
    """The same in plain torch, vectorised over the ragged batch."""
    device = draft.device
    batch = starts.shape[0]
    num_tokens = draft.shape[0]
    out = torch.full((batch, spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32,
                     device=device)
    bonus = bonus.reshape(batch).to(torch.int32)
    if num_tokens == 0:
        out[:, 0] = bonus
        return out
    req_of_token = torch.repeat_interleave(torch.arange(batch, device=device), counts)
    pos_of_token = torch.arange(num_tokens, device=device) - starts[req_of_token]
    draft = draft.to(torch.long)
    if rates is not None:
        in_rates = pos_of_token < rates.shape[1]
        rate = rates[req_of_token, pos_of_token.clamp_max(max(rates.shape[1] - 1, 0))] \
            if rates.shape[1] else torch.zeros(num_tokens, dtype=torch.float64, device=device)
        accepted = in_rates & (uniforms < rate)
    elif accept is not None:
        accepted = accept.clone()
    else:
        accepted = draft == recovered
    accepted &= draft >= 0
    width = max(spec_len, 1)
    acc_pad = torch.zeros(batch, width, dtype=torch.int32, device=device)
    acc_pad[req_of_token, pos_of_token] = accepted.to(torch.int32)
    num_accepted = torch.minimum(torch.cumprod(acc_pad, dim=1).sum(dim=1), counts)
    tok_pad = torch.zeros(batch, width, dtype=torch.long, device=device)
    tok_pad[req_of_token, pos_of_token] = draft.clamp_min(0)
    rec_pad = torch.zeros_like(tok_pad)
    rec_pad[req_of_token, pos_of_token] = recovered
    cols = torch.arange(spec_len + 1, device=device)[None, :]
    if spec_len > 0:
        keep = cols[:, :spec_len] < num_accepted[:, None]
        out[:, :spec_len] = torch.where(keep, tok_pad[:, :spec_len].to(torch.int32),
                                        out[:, :spec_len])
    rejected = num_accepted < counts
    rec_at = rec_pad.gather(1, num_accepted.clamp_max(width - 1)[:, None]).squeeze(1)
    last = torch.where(rejected, rec_at.to(torch.int32), bonus)
    out.scatter_(1, num_accepted[:, None], last[:, None])
    return out


def warm_up(device: torch.device, k_max: int) -> int:
    """Compile the variants a BASS engine launches (greedy, synthetic, given accept) for
    drafts up to k_max tokens without launching (Triton's `warmup`), so no step compiles.
    Returns how many; never fails the engine: a variant that does not compile (a Triton
    change) switches this process to the torch path."""
    global _triton_usable
    i32, i64, f64 = torch.int32, torch.int64, torch.float64
    done = 0
    with torch.cuda.device(device):
        for has_accept, has_rates in ((False, False), (False, True), (True, False)):
            # the launcher's dtypes: vLLM's draft ids and sampled (bonus) tokens are int32,
            # a disabled input gets `recovered`'s (int64) pointer
            args = [i32, i64, torch.bool if has_accept else i64, f64 if has_rates else i64,
                    f64 if has_rates else i64, 8, 8, i64, i64, i32, i32, 8]
            for block in sorted({_block(n) for n in range(k_max + 1)}):
                try:
                    _accept_and_emit_kernel.warmup(*args, grid=(1,), HAS_ACCEPT=has_accept,
                                                   HAS_RATES=has_rates, BLOCK=block)
                    done += 1
                except Exception as exc:  # a Triton change: say so, keep serving
                    logger.warning("vllm-bass: the accept kernel does not compile (%s: %s); "
                                   "verification uses its torch path", type(exc).__name__, exc)
                    _triton_usable = False
                    return done
    return done
