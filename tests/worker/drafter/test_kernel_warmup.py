"""Start-up compile of the drafter's bookkeeping kernels: every block size BASS's draft
lengths reach, with the argument names of the installed vLLM (CPU), and on the GPU a real
launch after the warm-up compiles nothing new."""

import inspect
from types import SimpleNamespace

import pytest
import torch

from vllm_bass.worker.drafter import kernel_warmup as kw


def _fake_drafter(device: str, k_max: int = 7):
    def buf(dtype):
        return torch.zeros(64, dtype=dtype, device=device)

    return SimpleNamespace(
        device=device, num_speculative_tokens=k_max, extra_slots_per_request=1,
        needs_extra_input_slots=True, pass_hidden_states_to_model=False,
        input_ids=buf(torch.int32), positions=buf(torch.int64),
        is_rejected_token_mask=buf(torch.bool), is_masked_token_mask=buf(torch.bool))


@pytest.mark.cpu
def test_block_sizes_cover_every_draft_length_and_the_prefill_cap():
    sizes = kw.warmup_block_sizes(k_max=7)
    assert sizes["eagle_prepare_next_token_padded_kernel"] == [1, 2, 4, 8]
    assert sizes["eagle_prepare_inputs_padded_kernel"] == [None]
    assert sizes["copy_and_expand_eagle_inputs_kernel"] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert kw.warmup_block_sizes(32)["eagle_prepare_next_token_padded_kernel"][-1] == 64
    for k in range(0, 40):  # vLLM's rule: next_pow2(1 + draft length this step)
        need = 1 << (k).bit_length()
        assert need in kw.warmup_block_sizes(k)["eagle_prepare_next_token_padded_kernel"]


@pytest.mark.cpu
def test_argument_builders_name_every_runtime_parameter_of_the_installed_kernels():
    """A vLLM upgrade that renames or adds a kernel argument fails here, not in serving."""
    from vllm.v1.spec_decode import utils as spec_utils

    drafter = _fake_drafter("cpu")
    assert sorted(kw.ARG_BUILDERS) == sorted(kw.warmup_block_sizes(7))
    for name, build in kw.ARG_BUILDERS.items():
        kernel = getattr(spec_utils, name)
        fn = getattr(kernel, "fn", kernel)
        runtime = [p for p in inspect.signature(fn).parameters if p != "BLOCK_SIZE_TOKENS"]
        assert sorted(build(drafter)) == sorted(runtime), name


@pytest.mark.gpu
def test_real_launch_after_warm_up_compiles_nothing():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from vllm.v1.spec_decode import utils as spec_utils
    from vllm_bass.patches.draft_kernel_specialization import apply_in_worker

    apply_in_worker()
    drafter = _fake_drafter("cuda", k_max=7)
    assert kw.warm_up_draft_kernels(drafter) == 4 + 9 + 1
    kernel = spec_utils.eagle_prepare_next_token_padded_kernel

    def compiled() -> int:
        return sum(len(c[0]) for c in kernel.device_caches.values())

    before = compiled()
    for k in (0, 1, 3, 6):  # draft lengths 0, 1, 3 and 6: block sizes 1, 2, 4 and 8
        sampled = torch.randint(0, 100, (5, 1 + k), dtype=torch.int32, device="cuda")
        out = torch.empty(5, dtype=torch.int32, device="cuda")
        count = torch.empty_like(out)
        kernel[(5,)](sampled, torch.zeros(5, dtype=torch.bool, device="cuda"),
                     torch.zeros(5, dtype=torch.int32, device="cuda"), out, count, 100,
                     1 + k, 5, sampled.stride(0),
                     BLOCK_SIZE_TOKENS=1 << (k).bit_length())
        assert count.tolist() == [1 + k] * 5 and out.tolist() == sampled[:, -1].tolist()
    assert compiled() == before
