"""Off-steps skip the draft model entirely; the next drafting step catches its KV up.

vLLM's draft-model proposer keeps the draft's paged KV in step with the target by running a
draft "first pass" over every token the target processed, even when it drafts nothing
(K = 0). With auto-off that pass would make every off-step slower than plain decoding
(on small targets a draft pass costs as much as a target pass). So a whole-batch off-step
of pure decoding runs no draft at all, and `DraftKVDebt` remembers, per request, the first
position whose draft KV was not written. The next step that drafts prepends those positions'
tokens (the runner's host token buffer; under async scheduling `SkippedTokens`, recorded on
the device) to each request's query of the draft's first pass:
one short prefill per request instead of one pass per step, written to the same slots.

Exactness never depends on this (the target verifies every token); a missed catch-up
could only lower acceptance. Catch-up needs the step to carry no drafts (true right after
an off-step: nothing was drafted) and the extended first pass to fit the drafter's token
buffer; otherwise the runner does not skip. Known gaps, both acceptance-only: a request owed
KV in a step that also verifies other requests' drafts (only when the token budget left it
unscheduled across an off->on switch) keeps its gap; with prefix caching, a request that
finishes while off leaves draft-KV gaps in its cached blocks for whoever reuses them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vllm_bass.utils.host_copy import to_device
from vllm_bass.utils.ragged import ragged_rows


@dataclass
class CatchUp:
    """Tokens to prepend to each request's query of the draft's first pass."""

    extra: np.ndarray      # [B] int: missed positions per request (0: none)
    starts: np.ndarray     # [B] int: position of each request's first scheduled token
    # [sum(extra)] the missed tokens, request by request (host array, or a device tensor
    # gathered from SkippedTokens)
    token_ids: np.ndarray | torch.Tensor

    @property
    def num_tokens(self) -> int:
        return int(self.extra.sum())


class DraftKVDebt:
    """Per request: the first position whose draft KV is missing."""

    def __init__(self) -> None:
        self.missing_from: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self.missing_from)

    def owed(self, req_ids: list[str], starts: np.ndarray) -> np.ndarray:
        """Missed positions before each request's first scheduled token."""
        if not self.missing_from:
            return np.zeros(len(req_ids), dtype=np.int64)
        missing = self.missing_from  # asked every off-step: plain Python ints, one pass
        return np.array([max(0, s - missing.get(r, s)) for r, s in
                         zip(req_ids, np.asarray(starts).tolist())], dtype=np.int64)

    def record_skip(self, req_ids: list[str], starts: np.ndarray) -> None:
        missing = self.missing_from
        for rid, s in zip(req_ids, np.asarray(starts).tolist()):
            first = missing.get(rid)
            if first is None or s < first:
                missing[rid] = s

    def settle(self, req_ids: list[str], starts: np.ndarray,
               tokens: "np.ndarray | SkippedTokens") -> CatchUp | None:
        """The catch-up for a drafting step over `req_ids`; the debt of these requests is
        cleared. `tokens`: the host token buffer (rows = batch rows) or the device record of
        skipped tokens (async scheduling). None when nothing is owed."""
        extra = self.owed(req_ids, starts)
        for rid in req_ids:
            self.missing_from.pop(rid, None)
        if not extra.any():
            return None
        rows, positions = missed_tokens(extra, starts)
        if isinstance(tokens, SkippedTokens):
            token_ids = tokens.gather(req_ids, rows, positions)
        else:
            token_ids = np.asarray(tokens)[rows, positions].astype(np.int64)
        return CatchUp(extra, np.asarray(starts, dtype=np.int64).copy(), token_ids)

    def forget(self, req_id: str) -> None:
        self.missing_from.pop(req_id, None)


class SkippedTokens:
    """Device record of the tokens the draft skipped, for the catch-up.

    Under async scheduling the host does not have the tokens sampled in the last steps
    (vLLM's host token buffer holds placeholders for them), so each skipped step's input
    tokens -- the target's input ids, already on the device -- are copied into a ring of
    `depth` positions per request (one small scatter, no sync); the catch-up gathers from it.
    A request may owe at most `depth` tokens (the runner does not skip beyond that)."""

    def __init__(self, max_reqs: int, depth: int, device: torch.device | str):
        self.depth = depth
        self.tokens = torch.zeros(max_reqs * depth, dtype=torch.int64, device=device)
        self.slot_of: dict[str, int] = {}
        self.free = list(range(max_reqs - 1, -1, -1))

    def _slot(self, req_id: str) -> int:
        slot = self.slot_of.get(req_id)
        if slot is None:
            if not self.free:
                raise RuntimeError("SkippedTokens: more live requests than slots")
            slot = self.slot_of[req_id] = self.free.pop()
        return slot

    def record(self, req_ids: list[str], num_scheduled: np.ndarray, starts: np.ndarray,
               input_ids: torch.Tensor) -> None:
        """A skipped step: request i had `num_scheduled[i]` input tokens from position
        `starts[i]`, laid out request by request in `input_ids`."""
        rows, offsets = ragged_rows(num_scheduled)
        positions = np.asarray(starts, dtype=np.int64)[rows] + offsets
        slots = np.array([self._slot(r) for r in req_ids], dtype=np.int64)
        index = to_device(slots[rows] * self.depth + positions % self.depth, self.tokens.device)
        self.tokens.index_copy_(0, index, input_ids[:len(rows)].to(torch.int64))

    def gather(self, req_ids: list[str], rows: np.ndarray, positions: np.ndarray
               ) -> torch.Tensor:
        # only requests that owe tokens have a slot (they were in a skipped step)
        slots = np.array([self.slot_of[req_ids[r]] for r in rows], dtype=np.int64)
        index = slots * self.depth + np.asarray(positions, dtype=np.int64) % self.depth
        return self.tokens[to_device(index, self.tokens.device)]

    def forget(self, req_id: str) -> None:
        slot = self.slot_of.pop(req_id, None)
        if slot is not None:
            self.free.append(slot)


def missed_tokens(extra: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(request row, position) of each owed token, request by request: row i owes the
    `extra[i]` positions just before `starts[i]`."""
    extra = np.asarray(extra, dtype=np.int64)
    rows, offsets = ragged_rows(extra)
    return rows, np.asarray(starts, dtype=np.int64)[rows] - extra[rows] + offsets


def extend_queries(query_start_loc_cpu: np.ndarray, catch_up: CatchUp
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layout of the extended first pass.

    Returns (new query_start_loc [B+1], source index [N+M] into cat(original tokens [N],
    missed tokens [M]), positions of the missed tokens [M])."""
    qsl = np.asarray(query_start_loc_cpu, dtype=np.int64)
    qlens = np.diff(qsl)
    extra = catch_up.extra.astype(np.int64)
    n = int(qsl[-1])
    new_qsl = np.concatenate([[0], np.cumsum(qlens + extra)])
    # within each new query: first the request's missed tokens, then its original ones
    ext_first = np.concatenate([[0], np.cumsum(extra)])[:-1]
    row_of, offset = ragged_rows(qlens + extra)
    is_missed = offset < extra[row_of]
    source = np.where(is_missed, n + ext_first[row_of] + offset,
                      qsl[row_of] + offset - extra[row_of])
    _, missed_positions = missed_tokens(extra, catch_up.starts)
    return new_qsl, source, missed_positions


def slots_for(block_table: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor,
              block_size: int) -> torch.Tensor:
    """Paged-KV slot of each (request row, position)."""
    blocks = block_table[rows, torch.div(positions, block_size, rounding_mode="floor")]
    return blocks.to(torch.int64) * block_size + positions % block_size


def apply_catch_up(catch_up: CatchUp, target_token_ids: torch.Tensor,
                   target_positions: torch.Tensor, cad, block_size: int):
    """(token ids, positions, CommonAttentionMetadata) of the extended first pass."""
    qsl_cpu = cad.query_start_loc_cpu.numpy()
    n = int(qsl_cpu[-1])
    assert target_token_ids.shape[0] >= n and target_positions.dim() == 1, (
        "draft catch-up expects 1-D positions and the target's tokens")
    new_qsl, source, missed_positions = extend_queries(qsl_cpu, catch_up)
    device = target_token_ids.device
    # one pinned, non-blocking copy (a blocking one waits for the target's forward)
    missed_rows_np, _ = ragged_rows(catch_up.extra)
    n_src, m = len(source), len(missed_positions)
    on_device = isinstance(catch_up.token_ids, torch.Tensor)
    host_ids = [] if on_device else [np.asarray(catch_up.token_ids, dtype=np.int64)]
    both = to_device(np.concatenate([source, *host_ids, missed_positions, missed_rows_np,
                                     new_qsl]).astype(np.int64), device)
    if on_device:
        source_t, missed_pos, missed_rows, new_qsl_t = both.split([n_src, m, m, len(new_qsl)])
        missed_ids = catch_up.token_ids.to(device)
    else:
        source_t, missed_ids, missed_pos, missed_rows, new_qsl_t = both.split(
            [n_src, m, m, m, len(new_qsl)])
    missed_ids = missed_ids.to(target_token_ids.dtype)
    ids = torch.cat([target_token_ids[:n], missed_ids])[source_t]
    positions = torch.cat([target_positions[:n], missed_pos.to(target_positions.dtype)])[
        source_t]
    missed_slots = slots_for(cad.block_table_tensor, missed_rows, missed_pos, block_size)
    slots = torch.cat([cad.slot_mapping[:n].to(torch.int64), missed_slots])[source_t]
    new_qsl_cpu = torch.from_numpy(new_qsl.astype(np.int32))
    new_cad = cad.replace(
        query_start_loc=new_qsl_t.to(torch.int32),
        query_start_loc_cpu=new_qsl_cpu,
        num_actual_tokens=int(new_qsl[-1]),
        max_query_len=int(np.diff(new_qsl).max()),
        slot_mapping=slots.to(cad.slot_mapping.dtype),
        positions=None,
        logits_indices_padded=None,
        num_logits_indices=None,
        _num_computed_tokens_cpu=None,
        _num_computed_tokens_cache=None,
        _token_to_req_indices_cache=None,
    )
    return ids, positions, new_cad
