"""`patches/first_pass_slot_mapping`: in a BASS worker the drafter's first-pass slot mapping
goes to our one-launch kernel for CUDA tensors and to vLLM's function otherwise (CPU here:
the same values as before the patch), only where applied, and not at all when turned off."""

import textwrap

import pytest

from tests.patches import assert_runs_in_a_fresh_process

pytestmark = [pytest.mark.cpu]

SCRIPT = textwrap.dedent("""
    from types import SimpleNamespace

    import torch
    import vllm.v1.spec_decode.llm_base_proposer as proposer
    import vllm.v1.spec_decode.utils as spec_utils
    from vllm_bass.patches import is_patched
    from vllm_bass.patches.first_pass_slot_mapping import SYMBOL, apply_in_worker

    original = proposer.compute_new_slot_mapping
    assert original is spec_utils.compute_new_slot_mapping and not is_patched(SYMBOL)
    assert apply_in_worker() is True
    assert apply_in_worker() is False  # idempotent
    patched = proposer.compute_new_slot_mapping
    assert patched is not original and is_patched(SYMBOL)
    assert spec_utils.compute_new_slot_mapping is original  # vLLM's module keeps its own

    qsl = torch.tensor([0, 2, 3], dtype=torch.int32)
    table = torch.tensor([[7, 8], [9, 10]], dtype=torch.int32)
    cad = SimpleNamespace(block_table_tensor=table, query_start_loc=qsl,
                          naive_query_lens=lambda: qsl[1:] - qsl[:-1])
    positions = torch.tensor([3, 4, 5, 17, 40], dtype=torch.int64)
    rejected = torch.tensor([False, True, False, False, False])
    kwargs = dict(cad=cad, new_positions=positions, is_rejected_token_mask=rejected,
                  block_size=16, num_new_tokens=1, max_model_len=32)
    assert torch.equal(patched(**kwargs), original(**kwargs))  # CPU: vLLM's function
    print("OK")
""")


def test_first_pass_slot_mapping_patch_in_a_fresh_process():
    assert_runs_in_a_fresh_process(SCRIPT)


def test_off_switch(monkeypatch):
    from vllm_bass.patches import first_pass_slot_mapping

    monkeypatch.setenv("VLLM_BASS_FIRST_PASS_SLOT_KERNEL", "0")
    assert first_pass_slot_mapping.apply_in_worker() is False
