"""accept_and_emit: the Triton kernel and its torch reference against a per-request Python
loop (the rule written out), for greedy, synthetic and given acceptance, ragged drafts with
empty ones, missing (negative) draft ids, odd batch sizes and output widths past the
longest draft; on CPU the kernel runs under TRITON_INTERPRET."""

from __future__ import annotations

import importlib

import pytest
import torch

from tests.kernels.bass_kernel_testutils import DEVICES, INTERPRET
import vllm_bass.kernels.accept_and_emit as accept_module


@pytest.fixture(scope="module")
def kernels():
    """The module with its kernel decorated now: under the interpreter on CPU even when an
    earlier test module imported it (Triton picks the interpreter at decoration)."""
    if INTERPRET:
        return importlib.reload(accept_module)
    return accept_module


def rule(draft, recovered, accept, uniforms, rates, counts, bonus, spec_len):
    """The output rows, one request at a time, as the rejection rule says."""
    rows, start = [], 0
    for i, n in enumerate(counts):
        row, emitted = [], False
        for j in range(n):
            t = start + j
            if rates is not None:
                ok = j < rates.shape[1] and uniforms[t] < rates[i, j]
            elif accept is not None:
                ok = bool(accept[t])
            else:
                ok = draft[t] == recovered[t]
            ok = ok and draft[t] >= 0
            if not ok:
                row.append(int(recovered[t]))
                emitted = True
                break
            row.append(int(draft[t]))
        if not emitted:
            row.append(int(bonus[i]))
        rows.append(row + [-1] * (spec_len + 1 - len(row)))
        start += n
    return torch.tensor(rows, dtype=torch.int32).reshape(len(counts), spec_len + 1)


def case(counts, mode, seed, vocab=7):
    g = torch.Generator().manual_seed(seed)
    total = sum(counts)
    draft = torch.randint(-1, vocab, (total,), generator=g, dtype=torch.int32)  # -1: missing
    recovered = torch.randint(0, vocab, (total,), generator=g, dtype=torch.int64)
    # greedy: make long accepted prefixes likely
    agree = torch.rand(total, generator=g) < 0.7
    draft = torch.where(agree & (draft >= 0), recovered.to(torch.int32), draft)
    accept = (torch.rand(total, generator=g) < 0.75) if mode == "accept" else None
    uniforms = rates = None
    if mode == "rates":
        uniforms = torch.rand(total, generator=g, dtype=torch.float64)
        rates = torch.rand(len(counts), 5, generator=g, dtype=torch.float64) ** 0.3
    bonus = torch.randint(0, vocab, (len(counts),), generator=g, dtype=torch.int32)
    starts = torch.tensor([sum(counts[:i]) for i in range(len(counts))], dtype=torch.int64)
    return draft, recovered, accept, uniforms, rates, starts, torch.tensor(
        counts, dtype=torch.int64), bonus


COUNTS = [[3], [0], [0, 0, 0], [1, 0, 4, 2, 7], [5] * 9, [2, 9, 0, 1, 3, 6, 0, 8, 1, 1, 4],
          [31, 0, 17], [40, 2]]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["greedy", "rates", "accept"])
@pytest.mark.parametrize("counts", COUNTS, ids=lambda c: f"b{len(c)}max{max(c)}")
@pytest.mark.parametrize("extra_width", [0, 3])
def test_kernel_and_reference_follow_the_rule(kernels, device, mode, counts, extra_width):
    inputs = case(counts, mode, seed=len(counts) * 7 + max(counts) + extra_width)
    spec_len = max(counts) + extra_width
    want = rule(*[t for i, t in enumerate(inputs) if i != 5], spec_len)
    on = [None if t is None else t.to(device) for t in inputs]
    ref = kernels.accept_and_emit_reference(*on, spec_len)
    assert torch.equal(ref.cpu(), want)
    got = kernels.accept_and_emit(*on, spec_len, use_triton=True)
    assert got.dtype == torch.int32 and torch.equal(got.cpu(), want)


@pytest.mark.cpu
def test_rates_past_their_width_reject():
    """A draft longer than the synthetic rate table: positions past it are rejected."""
    counts = [4]
    draft = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    recovered = torch.tensor([9, 9, 9, 8], dtype=torch.int64)
    uniforms = torch.zeros(4, dtype=torch.float64)
    rates = torch.ones(1, 2, dtype=torch.float64)  # positions 0, 1 certain; 2, 3 unknown
    out = accept_module.accept_and_emit_reference(
        draft, recovered, None, uniforms, rates, torch.tensor([0]), torch.tensor(counts),
        torch.tensor([5], dtype=torch.int32), 4)
    assert out.tolist() == [[1, 2, 9, -1, -1]]


@pytest.mark.cpu
def test_shape_checks_name_the_input():
    draft = torch.zeros(3, dtype=torch.int32)
    with pytest.raises(AssertionError, match="synthetic acceptance needs both"):
        accept_module.accept_and_emit(draft, torch.zeros(3, dtype=torch.int64), None,
                                      torch.zeros(3, dtype=torch.float64), None,
                                      torch.tensor([0]), torch.tensor([3]),
                                      torch.zeros(1, dtype=torch.int32), 3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_warm_up_compiles_what_the_engine_launches():
    """Start-up compiles the three rules with the engine's dtypes (int32 drafts and bonus,
    the launcher's stand-in pointers for disabled inputs): the real launches after it
    compile nothing, and Triton stays in use."""
    kernel = accept_module._accept_and_emit_kernel
    assert accept_module.warm_up(torch.device("cuda"), k_max=16) == 3
    assert accept_module._triton_usable

    def compiled() -> int:
        return sum(len(c[0]) for c in kernel.device_caches.values())

    def off_alignment(t):
        """The same values starting one element into a larger buffer (engine tensors are
        often slices): Triton specialises pointers on 16-byte alignment by default."""
        if t is None:
            return None
        buffer = torch.zeros(t.numel() + 1, dtype=t.dtype, device="cuda")
        buffer[1:].copy_(t.reshape(-1))
        return buffer[1:].view(t.shape)

    before = compiled()
    for counts in ([3, 0, 5], [1], [16, 1, 2], [7] * 17):
        for mode in ("greedy", "rates", "accept"):
            cpu = case(counts, mode, seed=len(counts))
            want = rule(*[t for i, t in enumerate(cpu) if i != 5], max(counts))
            for move in (lambda t: None if t is None else t.to("cuda"), off_alignment):
                got = accept_module.accept_and_emit(*[move(t) for t in cpu], max(counts))
                assert torch.equal(got.cpu(), want)
    assert compiled() == before, "a launch compiled a variant the warm-up missed"
