"""Off-steps skip the draft model entirely; the next drafting step catches its KV up.

vLLM's draft-model proposer keeps the draft's paged KV in step with the target by running a
draft "first pass" over every token the target processed, even when it drafts nothing
(K = 0). With auto-off that pass would make every off-step slower than plain decoding
(on small targets a draft pass costs as much as a target pass). So a whole-batch off-step
of pure decoding runs no draft at all, and `DraftKVDebt` remembers, per request, the first
position whose draft KV was not written. The next step that drafts prepends those positions'
tokens (from the runner's token buffer) to each request's query of the draft's first pass:
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


@dataclass
class CatchUp:
    """Tokens to prepend to each request's query of the draft's first pass."""

    extra: np.ndarray      # [B] int: missed positions per request (0: none)
    starts: np.ndarray     # [B] int: position of each request's first scheduled token
    token_ids: np.ndarray  # [sum(extra)] int: the missed tokens, request by request

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
        out = np.zeros(len(req_ids), dtype=np.int64)
        for i, rid in enumerate(req_ids):
            first = self.missing_from.get(rid)
            if first is not None:
                out[i] = max(0, int(starts[i]) - first)
        return out

    def record_skip(self, req_ids: list[str], starts: np.ndarray) -> None:
        for rid, s in zip(req_ids, starts):
            self.missing_from[rid] = min(self.missing_from.get(rid, int(s)), int(s))

    def settle(self, req_ids: list[str], starts: np.ndarray,
               token_ids_cpu: np.ndarray) -> CatchUp | None:
        """The catch-up for a drafting step over `req_ids` (rows of `token_ids_cpu`); the
        debt of these requests is cleared. None when nothing is owed."""
        extra = self.owed(req_ids, starts)
        for rid in req_ids:
            self.missing_from.pop(rid, None)
        if not extra.any():
            return None
        ids = [token_ids_cpu[row, int(starts[row]) - int(n):int(starts[row])]
               for row, n in enumerate(extra) if n]
        return CatchUp(extra, np.asarray(starts, dtype=np.int64).copy(),
                       np.concatenate(ids).astype(np.int64))

    def forget(self, req_id: str) -> None:
        self.missing_from.pop(req_id, None)


def extend_queries(query_start_loc_cpu: np.ndarray, catch_up: CatchUp
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layout of the extended first pass.

    Returns (new query_start_loc [B+1], source index [N+M] into cat(original tokens [N],
    missed tokens [M]), positions of the missed tokens [M])."""
    qsl = np.asarray(query_start_loc_cpu, dtype=np.int64)
    qlens = np.diff(qsl)
    extra = catch_up.extra.astype(np.int64)
    n, m = int(qsl[-1]), int(extra.sum())
    new_qsl = np.concatenate([[0], np.cumsum(qlens + extra)])
    rows = np.arange(len(qlens))
    # within each new query: first the request's missed tokens, then its original ones
    ext_first = np.concatenate([[0], np.cumsum(extra)])[:-1]
    new_index = np.arange(n + m)
    row_of = np.repeat(rows, qlens + extra)
    offset = new_index - new_qsl[row_of]
    is_missed = offset < extra[row_of]
    source = np.where(is_missed, n + ext_first[row_of] + offset,
                      qsl[row_of] + offset - extra[row_of])
    missed_rows = np.repeat(rows, extra)
    missed_positions = (catch_up.starts[missed_rows] - extra[missed_rows]
                        + (np.arange(m) - ext_first[missed_rows]))
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
    missed_rows_np = np.repeat(np.arange(len(catch_up.extra)), catch_up.extra)
    n_src, m = len(source), len(missed_positions)
    both = to_device(np.concatenate([source, catch_up.token_ids.astype(np.int64),
                                     missed_positions, missed_rows_np, new_qsl]).astype(np.int64),
                     device)
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
