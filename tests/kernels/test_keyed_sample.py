"""The one-launch keyed sample draws exactly the tokens of the torch form (the same hash,
the same float64 Gumbel, the first index of the maximum), for any row count, vocabulary
size around the tile, logits dtype and stride, filtered (-inf) tokens, negative and 64-bit
seeds, and positions past 2^32; and `keyed_sample` takes it on CUDA."""

from __future__ import annotations

import pytest
import torch

from tests.kernels.bass_kernel_testutils import DEVICES, HAS_CUDA
from vllm_bass.kernels.keyed_sample import (
    BLOCK_V,
    keyed_sample_ref,
    keyed_sample_triton,
    num_vocab_chunks,
)
from vllm_bass.sampling.keyed import keyed_sample, signed_seed


def _case(rows, vocab, dtype, g):
    logits = (torch.randn(rows, vocab, generator=g) * 3).to(dtype)
    seeds = torch.tensor([signed_seed(s) for s in
                          torch.randint(0, 2 ** 62, (rows,), generator=g).tolist()])
    seeds[::2] = -seeds[::2] - 1  # negative seeds: the high word's sign bits
    positions = torch.randint(0, 2 ** 34, (rows,), generator=g)  # some past 2^32
    return logits, seeds, positions


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows,vocab", [(1, 1), (3, 7), (5, BLOCK_V - 1), (2, BLOCK_V),
                                        (4, BLOCK_V + 1), (6, 5003), (1, 4 * BLOCK_V + 5),
                                        (9, 3 * BLOCK_V)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_kernel_draws_the_reference_tokens(device, rows, vocab, dtype):
    g = torch.Generator().manual_seed(rows * 7919 + vocab)
    logits, seeds, positions = _case(rows, vocab, dtype, g)
    want = keyed_sample_ref(logits.float(), seeds, positions)
    got = keyed_sample_triton(logits.to(device), seeds.to(device), positions.to(device))
    assert got.dtype == torch.int64 and got.device.type == device
    assert got.cpu().tolist() == want.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_filtered_tokens_strided_rows_and_no_rows(device):
    g = torch.Generator().manual_seed(3)
    logits, seeds, positions = _case(6, 3000, torch.float32, g)
    logits[:, 1::3] = float("-inf")  # top-k / top-p filtered
    logits[4, :2999] = float("-inf")  # one token left: it must be drawn
    wide = torch.zeros(6, 4000)
    wide[:, 500:3500] = logits
    view = wide[:, 500:3500].to(device)  # row stride 4000
    got = keyed_sample_triton(view, seeds, positions).cpu()
    assert got.tolist() == keyed_sample_ref(logits, seeds, positions).tolist()
    assert got[4] == 2999 and (got % 3 != 1).all()
    none = keyed_sample_triton(view[:0], seeds[:0], positions[:0])
    assert none.shape == (0,) and none.dtype == torch.int64


@pytest.mark.parametrize("device", DEVICES)
def test_the_winner_in_any_stretch_of_a_split_row(device):
    """One finite token, placed in each stretch in turn (first, inner, the last partial
    one): the split path must return it; ties at -inf elsewhere never win."""
    vocab = 4 * BLOCK_V + 5
    assert num_vocab_chunks(1, vocab, programs=8) == 5  # the interpreter's split
    for token in (0, BLOCK_V - 1, BLOCK_V, 3 * BLOCK_V + 7, vocab - 1):
        logits = torch.full((1, vocab), float("-inf"))
        logits[0, token] = 0.0
        got = keyed_sample_triton(logits.to(device), torch.tensor([5]), torch.tensor([9]))
        assert got.item() == token


@pytest.mark.cpu
def test_vocab_split_fills_the_grid_and_no_more():
    assert num_vocab_chunks(1, 128256, programs=264) == 63  # a stretch is at least a tile
    assert num_vocab_chunks(8, 128256, programs=264) == 33
    assert num_vocab_chunks(64, 32000, programs=264) == 5
    assert num_vocab_chunks(300, 32000, programs=264) == 1
    assert num_vocab_chunks(1, 10 ** 6, programs=264) == 64  # the pick kernel's width


@pytest.mark.cpu
def test_shape_checks_name_the_mismatch():
    with pytest.raises(AssertionError):
        keyed_sample_triton(torch.zeros(3, 10), torch.zeros(2, dtype=torch.int64),
                            torch.zeros(3, dtype=torch.int64))
    with pytest.raises(AssertionError):
        keyed_sample_triton(torch.zeros(3, 10, dtype=torch.float64),
                            torch.zeros(3, dtype=torch.int64), torch.zeros(3, dtype=torch.int64))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_keyed_sample_on_cuda_is_the_kernel_and_agrees_with_cpu():
    g = torch.Generator().manual_seed(11)
    logits, seeds, positions = _case(64, 32000, torch.float32, g)
    on_gpu = keyed_sample(logits.cuda(), seeds.cuda(), positions.cuda())
    assert on_gpu.is_cuda
    assert on_gpu.cpu().tolist() == keyed_sample(logits, seeds, positions).tolist()
