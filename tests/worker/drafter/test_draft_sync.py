"""Draft KV catch-up after off-steps: debt bookkeeping and the extended first-pass inputs,
checked against a per-request construction written out longhand."""

import numpy as np
import pytest
import torch

from vllm_bass.worker.drafter.draft_sync import (DraftKVDebt, SkippedTokens, apply_catch_up,
                                           extend_queries)

pytestmark = [pytest.mark.cpu]


class _Cad:
    """The fields of vLLM's CommonAttentionMetadata that the catch-up reads and replaces."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def replace(self, **changes):
        return _Cad(**{**self.__dict__, **changes})


def test_debt_counts_from_the_first_skipped_position_and_clears_on_settle():
    debt = DraftKVDebt()
    tokens = np.arange(1000).reshape(2, 500)
    debt.record_skip(["a", "b"], np.array([10, 20]))
    debt.record_skip(["a", "b"], np.array([11, 23]))  # b accepted drafts: jumped by 3
    assert debt.owed(["b", "a", "c"], np.array([24, 12, 5])).tolist() == [4, 2, 0]
    catch_up = debt.settle(["a", "b"], np.array([12, 24]), tokens)
    assert catch_up.extra.tolist() == [2, 4]
    assert catch_up.token_ids.tolist() == [10, 11, 520, 521, 522, 523]
    assert not debt and debt.settle(["a", "b"], np.array([13, 25]), tokens) is None


def test_device_record_of_skipped_tokens_gives_the_host_buffer_catch_up():
    """The device record (what async scheduling must use: the host has placeholders for the
    latest tokens) gives the same catch-up as the host token buffer, across skipped steps
    of one token and one that verified drafts (b accepted 2 of 3), slot reuse included."""
    rng = np.random.default_rng(0)
    history = rng.integers(0, 2048, (2, 500))  # the true token at each (row, position)
    record = SkippedTokens(max_reqs=3, depth=16, device="cpu")
    debt = DraftKVDebt()
    record.record(["old"], [1], np.array([5]), torch.tensor([99]))
    record.forget("old")  # its slot is reused
    steps = [([1, 1], [10, 20]), ([1, 4], [11, 21]), ([1, 1], [12, 24])]
    for scheduled, starts in steps:
        starts = np.array(starts)
        ids = np.concatenate([history[row, s:s + n] for row, (n, s) in
                              enumerate(zip(scheduled, starts))])
        if scheduled[1] == 4:
            ids[-1] = 7  # b's rejected third draft: never owed
        debt.record_skip(["a", "b"], starts)
        record.record(["a", "b"], scheduled, starts, torch.from_numpy(ids))
    expected = DraftKVDebt()
    expected.missing_from = dict(debt.missing_from)
    now = np.array([13, 25])
    on_host = expected.settle(["a", "b"], now, history)
    # "new" joined after the skipped steps: it owes nothing and has no slot
    on_device = debt.settle(["a", "new", "b"], np.array([13, 3, 25]), record)
    on_device.extra = on_device.extra[[0, 2]]
    assert on_device.extra.tolist() == on_host.extra.tolist() == [3, 5]
    assert on_device.token_ids.tolist() == on_host.token_ids.tolist()
    assert on_host.token_ids.tolist() == history[0, 10:13].tolist() + history[1, 20:25].tolist()


def test_restarted_request_owes_nothing():
    """Preempted and recomputed from position 0: the target's pass rewrites everything."""
    debt = DraftKVDebt()
    debt.record_skip(["a"], np.array([40]))
    assert debt.owed(["a"], np.array([0])).tolist() == [0]


@pytest.mark.parametrize("tokens_on_device", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_extended_first_pass_matches_longhand(seed, tokens_on_device):
    rng = np.random.default_rng(seed)
    batch, block_size, max_blocks = int(rng.integers(1, 7)), 16, 12
    qlens = rng.integers(1, 5, batch)
    extra = rng.integers(0, 20, batch) * (rng.random(batch) < 0.7)
    starts = extra + rng.integers(0, 60, batch)
    history = rng.integers(0, 2048, (batch, 200))
    block_table = torch.from_numpy(rng.permutation(batch * max_blocks).reshape(batch, max_blocks))
    qsl = np.concatenate([[0], np.cumsum(qlens)])
    ids = torch.from_numpy(np.concatenate([history[i, s:s + q] for i, (s, q) in
                                           enumerate(zip(starts, qlens))]))
    positions = torch.from_numpy(np.concatenate([np.arange(s, s + q) for s, q in
                                                 zip(starts, qlens)]))
    slots = torch.cat([block_table[i, p // block_size] * block_size + p % block_size
                       for i, s, q in zip(range(batch), starts, qlens)
                       for p in [torch.arange(int(s), int(s + q))]])
    cad = _Cad(query_start_loc_cpu=torch.from_numpy(qsl.astype(np.int32)),
               query_start_loc=torch.from_numpy(qsl.astype(np.int32)),
               block_table_tensor=block_table, slot_mapping=slots.to(torch.int64),
               num_actual_tokens=int(qsl[-1]), max_query_len=int(qlens.max()))
    debt = DraftKVDebt()
    debt.record_skip([str(i) for i in range(batch)], starts - extra)
    catch_up = debt.settle([str(i) for i in range(batch)], starts, history)
    if not extra.any():
        assert catch_up is None
        return
    if tokens_on_device:  # as gathered from SkippedTokens
        catch_up.token_ids = torch.from_numpy(catch_up.token_ids)
    new_ids, new_pos, new_cad = apply_catch_up(catch_up, ids, positions, cad, block_size)
    # longhand: each request's query now starts `extra` positions earlier
    want_pos = np.concatenate([np.arange(s - e, s + q) for s, e, q in zip(starts, extra, qlens)])
    want_ids = np.concatenate([history[i, s - e:s + q] for i, (s, e, q) in
                               enumerate(zip(starts, extra, qlens))])
    rows = np.repeat(np.arange(batch), extra + qlens)
    want_slots = (block_table[rows, want_pos // block_size].numpy() * block_size
                  + want_pos % block_size)
    assert new_pos.tolist() == want_pos.tolist()
    assert new_ids.tolist() == want_ids.tolist()
    assert new_cad.slot_mapping.tolist() == want_slots.tolist()
    want_qsl = np.concatenate([[0], np.cumsum(extra + qlens)])
    assert new_cad.query_start_loc_cpu.tolist() == want_qsl.tolist()
    assert new_cad.query_start_loc.tolist() == want_qsl.tolist()
    assert new_cad.num_actual_tokens == want_qsl[-1]
    assert new_cad.max_query_len == int((extra + qlens).max())


def test_extend_queries_layout_small():
    from vllm_bass.worker.drafter.draft_sync import CatchUp

    catch_up = CatchUp(np.array([2, 0, 1]), np.array([5, 9, 3]), np.array([7, 8, 6]))
    new_qsl, source, missed = extend_queries(np.array([0, 1, 3, 4]), catch_up)
    assert new_qsl.tolist() == [0, 3, 5, 7]
    # originals are 0..3, missed tokens 4..6 (two for request 0, one for request 2)
    assert source.tolist() == [4, 5, 0, 1, 2, 6, 3]
    assert missed.tolist() == [3, 4, 2]


def test_runner_skips_the_draft_only_in_pure_decoding_within_the_buffer():
    """Off-steps skip the draft pass only when every request decodes (1 token + its drafts)
    and the catch-up they leave still fits one first pass of the drafter."""
    from types import SimpleNamespace

    from vllm_bass.worker.model_runner import BassModelRunnerMixin

    may_skip = BassModelRunnerMixin._bass_may_skip_draft
    drafter = SimpleNamespace(max_num_tokens=64)
    debt = DraftKVDebt()
    reqs, starts = ["a", "b"], np.array([100, 200])

    def out(scheduled, spec=None):
        return SimpleNamespace(num_scheduled_tokens=dict(zip(reqs, scheduled)),
                               scheduled_spec_decode_tokens=spec or {})

    assert may_skip(out([1, 1]), reqs, starts, debt, drafter)
    assert may_skip(out([4, 1], {"a": [7, 8, 9]}), reqs, starts, debt, drafter)
    assert not may_skip(out([1, 37]), reqs, starts, debt, drafter), "b is prefilling"
    debt.record_skip(reqs, starts - 29)  # 29 positions owed by each, 30 after this step
    assert may_skip(out([1, 1]), reqs, starts, debt, drafter)  # 2 * 30 + 2 * 2 <= 64
    debt.record_skip(reqs, starts - 30)
    assert not may_skip(out([1, 1]), reqs, starts, debt, drafter)  # 2 * 31 + 2 * 2 > 64
