"""Which first passes `FirstPassGraphs` serves, and how it pads them (no engine: a stand-in
drafter with the fields it reads). The engine tests (`tests/test_engine_draft_graphs.py`)
check the passes themselves through self-draft acceptance."""

import types

import pytest
import torch

from vllm_bass.worker.drafter.first_pass_graphs import PADDING_SLOT_ID, FirstPassGraphs

pytestmark = pytest.mark.cpu


class _Steps:
    def __init__(self, rows):
        self.max_rows = rows
        self.block_table = None
        self.logits = None
        self.tokens = torch.zeros(rows, dtype=torch.int64)

    def _ensure_block_table(self, width):
        if self.block_table is None:
            self.block_table = torch.zeros((self.max_rows, max(width, 4)), dtype=torch.int32)


def _drafter(rows=8, tokens=64, max_model_len=100):
    return types.SimpleNamespace(
        device=torch.device("cpu"), max_batch_size=rows, max_num_tokens=tokens,
        max_model_len=max_model_len,
        _slot_mapping_buffer=torch.full((tokens,), 7, dtype=torch.int64))


def _graphs(sizes, max_query_len=5, rows=8):
    first = FirstPassGraphs(_drafter(rows), _Steps(rows), True, max_query_len)
    first.graphs = {s: None for s in sorted(sizes)}
    return first


def test_rows_hold_every_batch_of_that_many_tokens():
    """A request brings at least two tokens (a verified one and the extra slot)."""
    assert [FirstPassGraphs.rows_for(t, 8) for t in (2, 3, 10, 16, 17, 100)] == [
        1, 1, 5, 8, 8, 8]


def test_the_smallest_graph_that_holds_the_pass():
    first = _graphs([4, 8, 16, 32])
    assert first.padded_tokens(6, 3, 3, 50) == 8
    assert first.padded_tokens(8, 4, 2, 50) == 8
    assert first.padded_tokens(9, 2, 5, 50) == 16
    assert first.padded_tokens(33, 8, 5, 50) is None  # more tokens than the largest graph


@pytest.mark.parametrize("why, args", [
    ("a query longer than the graphs' bound (a prefill chunk)", (20, 2, 6, 50)),
    ("a sequence past max_model_len", (6, 3, 3, 101)),
    ("more requests than rows", (30, 9, 3, 50)),
])
def test_passes_that_run_vllms_pass(why, args):
    assert _graphs([4, 8, 16, 32]).padded_tokens(*args) is None, why


def test_eager_serves_every_pass_at_its_own_size():
    first = FirstPassGraphs(_drafter(), _Steps(8), False, 64)
    assert first.padded_tokens(37, 5, 30, 50) == 37


def test_staging_pads_tokens_and_rows():
    """Pad tokens get slot -1 (no KV write); pad rows query length 0 (their start is the
    pass's end) and seq_len 0; the real rows are vLLM's layout."""
    first = _graphs([16])
    cad = types.SimpleNamespace(
        num_reqs=3,
        block_table_tensor=torch.arange(12, dtype=torch.int32).reshape(3, 4),
        slot_mapping=torch.tensor([10, 11, 12, -1, 20, 21, 30, 31, 32]),
        query_start_loc=torch.tensor([0, 4, 6, 9], dtype=torch.int32),
        seq_lens=torch.tensor([14, 22, 33], dtype=torch.int32))
    rows = first.stage(9, 16, torch.tensor([2, 5, 8], dtype=torch.int32), cad)
    assert rows == 8
    slots = first.drafter._slot_mapping_buffer
    assert slots[:9].tolist() == cad.slot_mapping.tolist()
    assert (slots[9:16] == PADDING_SLOT_ID).all() and slots[16] == 7  # past T_pad untouched
    assert first.query_start_loc[:9].tolist() == [0, 4, 6, 9, 9, 9, 9, 9, 9]
    assert first.seq_lens[:8].tolist() == [14, 22, 33, 0, 0, 0, 0, 0]
    assert first.sample_rows[:8].tolist() == [2, 5, 8, 0, 0, 0, 0, 0]
    assert torch.equal(first.steps.block_table[:3, :4], cad.block_table_tensor)


def test_captured_metadata_plans_for_any_batch_on_backends_that_need_it():
    """A captured first pass replays batches of other layouts than the one it was captured
    with: a builder whose launch plans follow its batch (ours: `captures_any_batch`) builds
    with `build_for_cudagraph_capture`, the others (FA3) with vLLM's drafting build; an
    eager pass uses vLLM's per-group build as before."""
    from vllm_bass.worker.drafter.draft_graphs import draft_attention_metadata

    calls = []

    class Builder:
        def __init__(self, name, any_batch):
            self.name, self.captures_any_batch = name, any_batch

        def build_for_cudagraph_capture(self, cad):
            calls.append((self.name, "capture"))
            return f"{self.name}:capture"

        def build_for_drafting(self, common_attn_metadata, draft_index):
            calls.append((self.name, f"drafting {draft_index}"))
            return f"{self.name}:drafting"

    groups = [types.SimpleNamespace(get_metadata_builder=lambda b=Builder("ours", True): b,
                                    layer_names=["l0", "l1"]),
              types.SimpleNamespace(get_metadata_builder=lambda b=Builder("fa3", False): b,
                                    layer_names=["l2"])]
    drafter = types.SimpleNamespace(
        draft_attn_groups=groups,
        build_per_group_and_layer_attn_metadata=lambda cad, draft_index: (
            None, {"eager": f"vllm's build {draft_index}"}))
    got = draft_attention_metadata(drafter, "cad", 0, any_batch_graph=True)
    assert got == {"l0": "ours:capture", "l1": "ours:capture", "l2": "fa3:drafting"}
    assert calls == [("ours", "capture"), ("fa3", "drafting 0")]
    assert draft_attention_metadata(drafter, "cad", 0) == {"eager": "vllm's build 0"}
