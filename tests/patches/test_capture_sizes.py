"""BASS's CUDA-graph sizes: vLLM's up to 512 tokens, then coarser ones up to 1536 (bounded by
6 tokens per sequence), so large-batch verifications and the draft's first pass (one slot
more per request) replay graphs; the user's own sizes, largest size or eager mode win. The
verification budget stops at the compute knee (KNEE_TOKENS or 4 per request) and keeps the
draft's first pass inside the largest graph. One body for CPU
and GPU: on the CPU (no graphs) the sizes stay vLLM's."""

import json
from pathlib import Path

import pytest

from tests.harness import TARGET, on_gpu
from tests.patches.test_attention_default import _config
from vllm_bass.engine_config import (LARGEST_CAPTURE_SIZE, bass_capture_sizes,
                                     default_capture_sizes)
from vllm_bass.scheduler import KNEE_TOKENS, LARGE_BATCH_TOKENS_PER_REQUEST, step_token_budget

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def test_sizes_extend_vllms_default_by_batch_size():
    sizes = bass_capture_sizes(256)
    assert sizes == sorted(set(sizes))
    assert sizes[:3] == [1, 2, 4] and 512 in sizes and sizes[-1] == LARGEST_CAPTURE_SIZE
    assert max(b - a for a, b in zip(sizes, sizes[1:]) if b <= 512) == 16
    assert bass_capture_sizes(8)[-1] == 512  # small engines: vLLM's sizes, nothing more
    assert bass_capture_sizes(128)[-1] == 768
    assert bass_capture_sizes(None)[-1] == LARGEST_CAPTURE_SIZE
    assert bass_capture_sizes(256, max_model_len=1024)[-1] == 1024
    assert bass_capture_sizes(256, max_model_len=300)[-1] == 512  # vLLM's own bound stays


def _args(model=TARGET, **kw):
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(model=model, **kw)


@pytest.mark.parametrize("chosen", [
    dict(max_cudagraph_capture_size=256), dict(cudagraph_capture_sizes=[1, 8]),
    dict(enforce_eager=True), dict(compilation_config={"cudagraph_capture_sizes": [1, 2]}),
    dict(compilation_config={"max_cudagraph_capture_size": 64}),
    dict(compilation_config={"cudagraph_mode": "NONE"})])
def test_the_users_choice_wins(chosen):
    args = _args(**chosen)
    before = args.cudagraph_capture_sizes
    default_capture_sizes(args)
    assert args.cudagraph_capture_sizes == before


def test_unset_sizes_get_bass_sizes():
    args = _args(max_num_seqs=256)
    default_capture_sizes(args)
    assert args.cudagraph_capture_sizes == bass_capture_sizes(256)


def test_sizes_stay_within_the_targets_own_context(tmp_path):
    """No --max-model-len: the target's config bounds the sizes (vLLM derives the context
    from it later; a graph past it crashed vLLM's graph-memory profiling, session 8)."""
    config = json.loads((Path(TARGET) / "config.json").read_text())
    config["max_position_embeddings"] = 1024
    (tmp_path / "config.json").write_text(json.dumps(config))
    args = _args(model=str(tmp_path), max_num_seqs=256)
    default_capture_sizes(args)
    assert args.cudagraph_capture_sizes[-1] == 1024
    args = _args(max_num_seqs=256, max_model_len=700)
    default_capture_sizes(args)
    assert args.cudagraph_capture_sizes[-1] == 640


def test_engine_config_captures_bass_sizes_on_cuda_only():
    sizes = _config(max_num_seqs=256).compilation_config.cudagraph_capture_sizes
    if on_gpu():
        assert sizes[-1] == 512  # max_model_len 512
        sizes = _config(max_num_seqs=256, max_model_len=2048
                        ).compilation_config.cudagraph_capture_sizes
        assert sizes[-1] == LARGEST_CAPTURE_SIZE
    else:
        assert not sizes or sizes[-1] <= 512


@pytest.mark.parametrize("batch", [1, 8, 64, 128, 255, 256, 384, 512])
def test_budget_keeps_the_first_pass_in_the_largest_graph(batch):
    budget = step_token_budget(LARGEST_CAPTURE_SIZE, batch)
    assert budget >= LARGE_BATCH_TOKENS_PER_REQUEST * batch
    assert budget == max(KNEE_TOKENS, LARGE_BATCH_TOKENS_PER_REQUEST * batch)
    if LARGE_BATCH_TOKENS_PER_REQUEST * batch <= LARGEST_CAPTURE_SIZE - batch:
        assert budget + batch <= LARGEST_CAPTURE_SIZE
    assert step_token_budget(None, batch) is None
