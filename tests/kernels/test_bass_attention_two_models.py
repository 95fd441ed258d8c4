"""Regression: target and draft model on the BASS backend in one engine.

Under speculative decoding vLLM builds the drafter's metadata builders with
the *target's* ``VllmConfig``: ``model_config`` then describes the target
(here 4 query / 2 KV heads) while the draft layers have 2 query / 1 KV head.
A plan (tiles) derived from the model config instead of the layers' own head
configuration packed the wrong number of query heads per KV head into a
tile and failed ``paged_attention_pad``'s tile assert (H100 engine run, fp32).

Here: one fake ``VllmConfig`` holding a target and a draft attention layer,
a builder per layer group (as vLLM creates them), one shared block table
(the draft shares the target's), fp32, head size 64; a prefill chunk and
BASS verification rows of 1..9 tokens; PAD and SPLIT. Every impl runs on its
own group's metadata (vLLM's path) and on the other group's (a plan must
never be reused for a different head configuration).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.kernels.bass_kernel_testutils import DEVICES, assert_close, make_batch

pytest.importorskip("vllm")

from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase  # noqa: E402
from vllm.v1.attention.backend import AttentionType, CommonAttentionMetadata  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec  # noqa: E402

from vllm_bass.attention.backend import (  # noqa: E402
    BassAttentionBackend,
    BassAttentionImpl,
    BassAttentionMetadataBuilder,
)
from vllm_bass.kernels.paged_attention_common import paged_attention_ref  # noqa: E402

HEAD, PAGE, DTYPE = 64, 16, torch.float32
# (layer name, query heads, KV heads): models/bass-tiny-target and -draft
MODELS = {
    "target": ("model.layers.0.self_attn.attn", 4, 2),
    "draft": ("draft_model.model.layers.0.self_attn.attn", 2, 1),
}
CASES = {
    # chunked prefill: a long chunk next to a decode row
    "prefill": ([9, 1], [5, 20]),
    # BASS verification: 1 + draft length, ragged, 1..9 tokens per row
    "verify": (list(range(1, 10)), [3, 17, 0, 30, 8, 1, 22, 12, 40]),
}


class _FakeAttentionLayer(AttentionLayerBase):
    """What get_num_attention_heads_from_layers reads: ``layer.impl``."""

    def __init__(self, impl):
        self.impl = impl

    def get_attn_backend(self):
        return BassAttentionBackend

    def get_kv_cache_spec(self, vllm_config):
        return None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", ["pad", "split"])
@pytest.mark.parametrize("case", list(CASES))
def test_target_and_draft_layers_get_their_own_tiles(device, strategy, case, monkeypatch):
    from vllm_bass.kernels import paged_attention as pa

    monkeypatch.setattr(pa, "MIN_SPLIT_TOKENS", 16 if strategy == "split" else 1 << 30)
    monkeypatch.setattr(pa, "SHORT_CONTEXT", 0)
    monkeypatch.setattr(pa, "num_sms", lambda device=None: 64)
    qlens, ctx = CASES[case]
    # same lengths and seed -> the same block table for both caches, as when
    # the draft shares the target's block table
    batches = {
        m: make_batch(qlens, ctx, h, kvh, HEAD, PAGE, DTYPE, device, seed=5)
        for m, (_, h, kvh) in MODELS.items()
    }
    assert torch.equal(batches["target"].block_table, batches["draft"].block_table)
    impls = {
        m: BassAttentionImpl(h, HEAD, batches[m].scale, kvh, None, None, "auto", None, AttentionType.DECODER, None)
        for m, (_, h, kvh) in MODELS.items()
    }
    # the engine's (target) config: model_config knows only the target's heads
    _, t_heads, t_kv_heads = MODELS["target"]
    vllm_config = SimpleNamespace(
        model_config=SimpleNamespace(
            get_num_attention_heads=lambda parallel_config: t_heads,
            get_num_kv_heads=lambda parallel_config: t_kv_heads,
            max_model_len=4096,
        ),
        parallel_config=SimpleNamespace(),
        compilation_config=SimpleNamespace(
            static_forward_context={name: _FakeAttentionLayer(impls[m]) for m, (name, _, _) in MODELS.items()}
        ),
    )
    b0 = batches["target"]
    cm = CommonAttentionMetadata(
        query_start_loc=b0.cu_seqlens_q,
        query_start_loc_cpu=b0.cu_seqlens_q.cpu(),
        seq_lens=b0.seq_lens,
        num_reqs=len(qlens),
        num_actual_tokens=b0.q.shape[0],
        max_query_len=b0.max_query_len,
        max_seq_len=b0.max_seq_len,
        block_table_tensor=b0.block_table,
        slot_mapping=torch.zeros(b0.q.shape[0], dtype=torch.int64, device=device),
    )
    metadata = {}
    for m, (name, _, kvh) in MODELS.items():
        spec = FullAttentionSpec(block_size=PAGE, num_kv_heads=kvh, head_size=HEAD, dtype=DTYPE)
        builder = BassAttentionMetadataBuilder(spec, [name], vllm_config, torch.device(device))
        metadata[m] = builder.build(0, cm)
        assert metadata[m].plan.strategy == strategy
    T = b0.q.shape[0]
    for m, (_, h, _) in MODELS.items():
        b = batches[m]
        ref = paged_attention_ref(b.q, b.k_cache, b.v_cache, b.cu_seqlens_q, b.seq_lens, b.block_table, b.scale)
        for md_of in ("target", "draft", m):  # own, other, own again (unchecked path)
            output = torch.full((T, h * HEAD), float("nan"), dtype=DTYPE, device=device)
            impls[m].forward(SimpleNamespace(), b.q, None, None, b.kv_cache, metadata[md_of], output)
            assert_close(output.view(T, h, HEAD), ref, DTYPE, f"{case}/{strategy}: {m} layer on {md_of} metadata")
