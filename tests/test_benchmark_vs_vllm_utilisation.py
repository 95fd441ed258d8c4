"""The utilisation columns of issue 13's speed benchmark (`vs_vllm.row_utilisation`, issue
18's "GPU utilisation" beside ms/token): useful model FLOPs and bytes of a measured row,
checked against a hand count."""

import pytest

from benchmarks.e2e import vs_vllm

pytestmark = [pytest.mark.cpu]


def test_plain_row_by_hand():
    row = {"batch": 2, "ms_per_token": 10.0, "mean_acceptance_length": None,
           "off_step_fraction": None}
    u = vs_vllm.row_utilisation(row, prompt_len=100, max_tokens=50, bandwidth=1e12)
    t = vs_vllm.TARGET_SHAPE
    h, L, d, inter = t["hidden_size"], t["num_hidden_layers"], t["head_dim"], t["intermediate_size"]
    heads, kv = t["num_attention_heads"], t["num_key_value_heads"]
    import json

    from benchmarks.e2e.dummy_models import TOKENIZER_FROM
    vocab = json.loads((TOKENIZER_FROM / "config.json").read_text())["vocab_size"]
    params = L * (2 * h * heads * d + 2 * h * kv * d + 3 * h * inter) + vocab * h
    tokens, steps, context, seconds = 2 * 50, 50, 100 + 25, 0.5
    flops = 2 * params * tokens + 4 * L * heads * d * tokens * context
    moved = params * 2 * steps + 2 * L * kv * d * 2 * steps * 2 * context
    assert u["mfu"] == pytest.approx(flops / seconds / 989e12)
    assert u["mbu"] == pytest.approx(moved / seconds / 1e12)


def test_speculation_reads_the_weights_once_per_step_not_per_token():
    plain = {"batch": 8, "ms_per_token": 6.0, "mean_acceptance_length": None}
    spec = {"batch": 8, "ms_per_token": 6.0, "mean_acceptance_length": 4.0,
            "off_step_fraction": 0.0}
    u_plain = vs_vllm.row_utilisation(plain, 128, 128)
    u_spec = vs_vllm.row_utilisation(spec, 128, 128)
    assert u_spec["mfu"] == pytest.approx(u_plain["mfu"])  # same tokens in the same time
    assert u_spec["mbu"] < u_plain["mbu"] / 3  # a quarter of the steps


def test_a_held_out_draft_shape_is_parsed_and_a_bad_one_names_the_flag():
    shape = vs_vllm.draft_shape("12x768")
    assert (shape["num_hidden_layers"], shape["hidden_size"], shape["num_attention_heads"],
            shape["head_dim"]) == (12, 768, 12, 64)
    assert shape["intermediate_size"] % 256 == 0 and shape["intermediate_size"] >= 768 * 2
    assert vs_vllm.draft_shape("4x1024") is vs_vllm.DRAFT_SHAPES["4x1024"]
    for bad in ("12x700", "x1024", "4by1024", "0x1024"):
        with pytest.raises(SystemExit, match="--drafts"):
            vs_vllm.draft_shape(bad)
