"""`patches/eager_count_correction`: in a BASS worker vLLM's async draft-count correction
runs as the plain function under its torch.compile wrapper (no recompiles inside steps),
with the same results, and only where applied (vLLM's own engines keep the compiled one)."""

import textwrap

import pytest

from tests.patches import assert_runs_in_a_fresh_process

pytestmark = [pytest.mark.cpu]

SCRIPT = textwrap.dedent("""
    import torch
    import vllm.v1.spec_decode.utils as spec_utils
    import vllm.v1.worker.gpu_model_runner as runner_module
    from vllm_bass.patches import is_patched
    from vllm_bass.patches.eager_count_correction import SYMBOL, apply_in_worker

    compiled = runner_module.update_num_computed_tokens_for_batch_change
    assert compiled is spec_utils.update_num_computed_tokens_for_batch_change
    assert not is_patched(SYMBOL)
    assert apply_in_worker() is True
    assert apply_in_worker() is False  # idempotent
    eager = runner_module.update_num_computed_tokens_for_batch_change
    assert eager is not compiled and is_patched(SYMBOL)
    assert spec_utils.update_num_computed_tokens_for_batch_change is compiled

    # 3 requests now; request 0 was row 1 last step with 2 drafts (1 + 1 valid tokens),
    # request 1 is new (-1), request 2 was row 0 with 0 drafts (takes the CPU value)
    computed = torch.tensor([10, 20, 30, 0], dtype=torch.int32)
    accepted = torch.ones(3, dtype=torch.int32)
    prev_positions = torch.tensor([1, -1, 0], dtype=torch.int32)
    valid = torch.tensor([1, 2], dtype=torch.int64)
    prev_drafts = torch.tensor([0, 2, 0, 0], dtype=torch.int32)
    cpu = torch.tensor([99, 5, 31], dtype=torch.int32)
    eager(computed, accepted, prev_positions, valid, prev_drafts, cpu)
    assert computed.tolist() == [20 + 2, 5, 31, 0], computed
    assert accepted.tolist() == [2, 1, 1], accepted
    print("OK")
""")


def test_eager_count_correction_in_a_fresh_process():
    assert_runs_in_a_fresh_process(SCRIPT)


def test_off_switch(monkeypatch):
    from vllm_bass.patches import eager_count_correction

    monkeypatch.setenv("VLLM_BASS_EAGER_COUNT_CORRECTION", "0")
    assert eager_count_correction.apply_in_worker() is False
