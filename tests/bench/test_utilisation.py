"""Model FLOP/s and bytes/s utilisation (`vllm_bass/bench/utilisation.py`) against a
hand-computed example, the embedded target's real weights, and the H100's ridge point."""

import json
from pathlib import Path

import pytest

from vllm_bass.bench import utilisation as u

pytestmark = [pytest.mark.cpu]

REPO = Path(__file__).resolve().parents[2]
SMALL = u.ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, vocab=10,
                     head_dim=4)


def test_hand_computed_step():
    # per layer: q,o 2*8*8 = 128; k,v 2*8*4 = 64; gated MLP 3*8*16 = 384 -> 576
    # 2 layers 1152 + LM head 10*8 = 80 -> 1232 weights
    assert SMALL.params == 1232
    # 3 tokens: sequence 1 one query at context 5, sequence 2 two queries at context 7
    # FLOPs: 2*1232*3 = 7392 + attention 4*2 layers*2 heads*4 dims*(1*5 + 2*7) = 1216
    # bytes (2 per value): weights 2464 + KV 2*2 layers*1 kv head*4 dims*2 B = 32 per
    # token of context, (5 + 7) * 32 = 384 -> 2848
    got = u.step_utilisation(SMALL, 2, 3, [5, 7], 1e-3, peak_flops=1e7, bandwidth=4e6,
                             query_lens=[1, 2])
    assert got["flops"] == 8608 and got["bytes"] == 2848
    assert got["flop_per_s"] == pytest.approx(8.608e6)
    assert got["mfu"] == pytest.approx(0.8608)
    assert got["bytes_per_s"] == pytest.approx(2.848e6)
    assert got["mbu"] == pytest.approx(0.712)


def test_steps_accumulate_linearly():
    one = u.StepTotals()
    one.add([5, 7], [1, 2])
    two = u.StepTotals().merge([one, one])
    assert (two.steps, two.tokens, two.query_context, two.kv_context) == (2, 6, 38, 24)
    assert u.model_flops(SMALL, two) == 2 * 8608
    assert u.bytes_moved(SMALL, 2, two) == 2 * 2848
    spread = u.StepTotals()
    spread.add([4, 6], tokens=4)  # no query lengths: 2 queries each
    assert spread.query_context == 20 and spread.tokens == 4


def test_from_hf_config_counts_the_embedded_targets_weights():
    """Every 2-D weight of the embedded target (tied embeddings: the embedding is the LM
    head) is one the FLOP count multiplies by."""
    safetensors = pytest.importorskip("safetensors")
    folder = REPO / "models" / "bass-tiny-target"
    shape = u.ModelShape.from_hf_config(json.loads((folder / "config.json").read_text()))
    assert (shape.layers, shape.kv_heads, shape.head_dim) == (4, 2, 64)
    with safetensors.safe_open(str(folder / "model.safetensors"), "np") as f:
        matrices = sum(f.get_slice(k).get_shape()[0] * f.get_slice(k).get_shape()[1]
                       for k in f.keys() if len(f.get_slice(k).get_shape()) == 2)
    assert shape.params == matrices == 2883584


def test_h100_ridge_point():
    """Without attention and KV, compute and bandwidth are equally used at 989/3.35 =
    295 tokens per step in bf16, whatever the model (the knee `docs/design.md` uses)."""
    llama7b = u.ModelShape(32, 4096, 11008, 32, 32, 32000, 128)
    at = u.step_utilisation(llama7b, 2, 295, [0], 0.01)
    assert at["mfu"] / at["mbu"] == pytest.approx(295 / (989 / 3.35), rel=1e-9)
    assert u.H100_SXM_BF16_FLOPS == 989e12 and u.H100_SXM_BYTES_PER_S == 3.35e12
