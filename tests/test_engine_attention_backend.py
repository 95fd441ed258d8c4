"""GPU only: our Triton attention as vLLM's attention backend (CUSTOM) in the real engine,
for target and draft, under BASS speculation."""

import pytest

from tests.harness import TARGET, base_engine_kwargs, bass_spec, metric, on_gpu, run_engine
from tests.prompts import PROMPTS
from tests.test_engine_greedy import JOBS, _assert_same

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not on_gpu(), reason="compiled Triton kernels need CUDA")]


def test_greedy_with_bass_attention_backend_on_target_and_draft(tmp_path):
    """`attention: "bass"` on CUDA runs our Triton attention (vLLM's CUSTOM backend) for
    target and draft: its log says so, and BASS output equals plain decoding on the same
    backend."""
    custom = {"attention_config": {"backend": "CUSTOM"}}
    plain = run_engine(base_engine_kwargs(**custom), JOBS[:3])
    log = tmp_path / "bass.log"
    got = run_engine(base_engine_kwargs(speculative_config=bass_spec(
        num_speculative_tokens=8, attention="bass")), JOBS[:3], metrics=True,
        log_path=str(log))
    assert "BASS Triton attention (CUSTOM backend) in use" in log.read_text()
    for want, have in zip(plain["results"], got["results"]):
        assert have["token_ids"] == want["token_ids"]
    assert metric(got["metrics"], "vllm:spec_decode_num_accepted_tokens") > 0


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_self_draft_accepted_through_draft_graphs_on_bass_attention(dtype):
    """Our attention in the drafter's captured graphs, the first pass included (its graphs
    replay ragged batches of other layouts than the one captured): with the target as its
    own draft a stale input, a wrong slot or a launch that skips a request's tiles would
    reject most drafts. bf16: batched and one-token numerics may flip a near-tie (0.9);
    float32: greedy equals plain decoding on our attention too."""
    plain = run_engine(base_engine_kwargs(enforce_eager=False, dtype=dtype,
                                          attention_config={"backend": "CUSTOM"}), JOBS)
    got = run_engine(base_engine_kwargs(enforce_eager=False, dtype=dtype,
                                        speculative_config=bass_spec(
        model=TARGET, draft_length_policy="fixed", num_speculative_tokens=5,
        auto_off=False, attention="bass")), JOBS, metrics=True,
        worker_rpc=["bass_draft_graph_stats"])
    if dtype == "float32":
        _assert_same(plain, got, "our attention, draft graphs")
    m = got["metrics"]
    drafts = metric(m, "vllm:spec_decode_num_draft_tokens")
    accepted = metric(m, "vllm:spec_decode_num_accepted_tokens")
    floor = 0.97 if dtype == "float32" else 0.9
    assert drafts > 200 and accepted >= floor * drafts, (
        f"self-draft on our attention ({dtype}): {accepted}/{drafts}")
    (stats,) = got["worker_rpc"]["bass_draft_graph_stats"]
    print("first passes:", stats)
    assert stats["graphs"] and stats["replays"] >= 10 and stats["replays"] > 2 * stats[
        "fallbacks"], f"the first pass did not replay its graphs on our attention: {stats}"


def test_prefill_on_fa3_agrees_with_prefill_on_our_kernels(monkeypatch, tmp_path):
    """bf16 on our attention: prompts far over PREFILL_QUERY_LEN tokens prefill through FA3
    (the default; its log says the first prefill was checked and kept) or through our
    kernels (VLLM_BASS_PREFILL_FA3=0); the two engines' first greedy tokens agree (one
    prompt may flip a bf16 near-tie)."""
    prompts = [" ".join((p.split() * 80)[:150]) for p in PROMPTS]  # 150 words each
    job = [{"prompts": prompts, "sampling": {"temperature": 0.0, "max_tokens": 6,
                                               "ignore_eos": True}}]
    kwargs = base_engine_kwargs(dtype="bfloat16", attention_config={"backend": "CUSTOM"})
    log = tmp_path / "fa3.log"
    on_fa3 = run_engine(kwargs, job, log_path=str(log))["results"][0]["token_ids"]
    text = log.read_text()
    assert "prefill steps run on FA3" in text, [
        line for line in text.splitlines() if "prefill steps" in line]
    monkeypatch.setenv("VLLM_BASS_PREFILL_FA3", "0")
    on_ours = run_engine(kwargs, job)["results"][0]["token_ids"]
    same = sum(a[0][:3] == b[0][:3] for a, b in zip(on_fa3, on_ours))
    assert len(on_fa3) == len(prompts) and same >= len(prompts) - 1, (on_fa3, on_ours)


def test_explicit_backends_win():
    """With attention="bass", backends the user names for target and draft are kept."""
    from tests.patches.test_attention_default import _backends, _config

    cfg = _config({"attention": "bass", "attention_backend": "TRITON_ATTN"},
                  attention_backend="FLASH_ATTN")
    assert _backends(cfg) == ("FLASH_ATTN", "TRITON_ATTN")
