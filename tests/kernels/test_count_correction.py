"""count_correction (one launch) writes what vLLM's update_num_computed_tokens_for_batch_change
writes: rows that verified drafts last step get their previous device count plus the tokens
verified, the others the host's count; accepted counts likewise. Rows gather from rows the
same launch overwrites (a request moved to another row), which the kernel must read first.
Kernel against the torch reference, the reference against vLLM's own function and against
hand-computed values."""

from __future__ import annotations

import pytest
import torch

from tests.kernels.bass_kernel_testutils import DEVICES
from vllm_bass.kernels.count_correction import (
    block_for,
    count_correction,
    count_correction_ref,
)


def _inputs(n, prev_batch, capacity, g, device, valid_dtype=torch.int32):
    computed = torch.randint(0, 5000, (capacity,), generator=g, dtype=torch.int32)
    accepted = torch.randint(1, 4, (n,), generator=g, dtype=torch.int32)
    # a permutation of the previous rows (requests moved), some new (-1)
    perm = torch.randperm(max(prev_batch, 1), generator=g)[:n]
    prev_positions = torch.full((n,), -1, dtype=torch.int64)
    k = min(n, prev_batch)
    prev_positions[:k] = perm[:k]
    new = torch.rand(n, generator=g) < 0.2
    prev_positions[new] = -1
    valid = torch.randint(1, 6, (max(prev_batch, 1),), generator=g).to(valid_dtype)
    prev_drafts = torch.randint(0, 4, (capacity,), generator=g, dtype=torch.int32)
    cpu = torch.randint(0, 5000, (n,), generator=g, dtype=torch.int32)
    return [t.to(device) for t in (computed, accepted, prev_positions, valid, prev_drafts, cpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,prev_batch,capacity", [(1, 1, 4), (7, 9, 16), (33, 33, 40),
                                                   (64, 50, 64), (5, 0, 8), (250, 256, 1000)])
def test_kernel_matches_reference(device, n, prev_batch, capacity):
    g = torch.Generator().manual_seed(n * 131 + prev_batch)
    got = _inputs(n, prev_batch, capacity, g, device)
    want = [t.clone() for t in got]
    count_correction(*got)
    count_correction_ref(*want)
    for name, a, b in zip(("computed", "accepted"), got[:2], want[:2]):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batch_is_a_no_op(device):
    g = torch.Generator().manual_seed(0)
    computed, accepted, prev, valid, drafts, cpu = _inputs(0, 3, 8, g, device)
    before = computed.clone()
    count_correction(computed, accepted, prev, valid, drafts, cpu)
    assert torch.equal(computed, before)


@pytest.mark.cpu
def test_reference_semantics():
    # request 0 was row 1 last step with 2 drafts and 2 tokens verified; request 1 is new;
    # request 2 was row 0 with no drafts (takes the host's count); request 3 was row 2 with
    # a draft, and row 2 is overwritten by this same call (read first)
    computed = torch.tensor([10, 20, 30, 40, 0], dtype=torch.int32)
    accepted = torch.ones(4, dtype=torch.int32)
    prev = torch.tensor([1, -1, 0, 2], dtype=torch.int64)
    valid = torch.tensor([1, 2, 3], dtype=torch.int32)
    drafts = torch.tensor([0, 2, 1, 0, 0], dtype=torch.int32)
    cpu = torch.tensor([99, 5, 31, 77], dtype=torch.int32)
    count_correction_ref(computed, accepted, prev, valid, drafts, cpu)
    assert computed.tolist() == [22, 5, 31, 33, 0]
    assert accepted.tolist() == [2, 1, 1, 3]


@pytest.mark.cpu
def test_reference_is_vllms_function():
    from vllm.v1.spec_decode.utils import update_num_computed_tokens_for_batch_change as vllm_fn

    eager = getattr(vllm_fn, "_torchdynamo_orig_callable", vllm_fn)
    g = torch.Generator().manual_seed(7)
    ours = _inputs(37, 41, 64, g, "cpu")
    theirs = [t.clone() for t in ours]
    count_correction_ref(*ours)
    eager(*theirs)
    assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])


@pytest.mark.cpu
def test_block_holds_the_capacity():
    assert block_for(1) == 32 and block_for(256) == 256 and block_for(257) == 512


@pytest.mark.cpu
def test_shape_checks_name_the_tensor():
    g = torch.Generator().manual_seed(1)
    computed, accepted, prev, valid, drafts, cpu = _inputs(6, 6, 8, g, "cpu")
    with pytest.raises(AssertionError, match="num_accepted_tokens"):
        count_correction(computed, accepted[:3], prev, valid, drafts, cpu)
    with pytest.raises(AssertionError, match="num_computed_tokens"):
        count_correction(computed[:2], accepted, prev, valid, drafts, cpu)
