"""GPU only: our Triton attention as vLLM's attention backend (CUSTOM) in the real engine,
for target and draft, under BASS speculation."""

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, on_gpu, run_engine
from tests.test_engine_greedy import JOBS

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


def test_explicit_backends_win():
    """With attention="bass", backends the user names for target and draft are kept."""
    from tests.patches.test_attention_default import _backends, _config

    cfg = _config({"attention": "bass", "attention_backend": "TRITON_ATTN"},
                  attention_backend="FLASH_ATTN")
    assert _backends(cfg) == ("FLASH_ATTN", "TRITON_ATTN")
