"""`attention: "bass"` runs our Triton attention (vLLM's CUSTOM backend) for target and draft
on CUDA by default; "vllm" leaves vLLM's choice; explicit backends win; models the kernels
do not cover keep vLLM's backend; CPU keeps vLLM's CPU attention. One body for CPU and GPU:
the expectation follows the platform."""

import json
from types import SimpleNamespace

import pytest

from tests.harness import DRAFT, TARGET, on_gpu
from vllm_bass.attention.backend import default_backend_unsupported
from vllm_bass.config import BassConfig, BassConfigError

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def _model(archs=("LlamaForCausalLM",), head_size=128, dtype="torch.bfloat16", **hf):
    return SimpleNamespace(architectures=list(archs), hf_text_config=SimpleNamespace(**hf),
                           get_head_size=lambda: head_size, dtype=dtype)


def test_default_only_where_the_kernels_apply():
    assert default_backend_unsupported(_model()) is None
    assert default_backend_unsupported(_model(["Qwen2ForCausalLM"], sliding_window=4096,
                                              use_sliding_window=False)) is None
    assert "architecture" in default_backend_unsupported(_model(["Gemma2ForCausalLM"]))
    assert "sliding" in default_backend_unsupported(_model(["MistralForCausalLM"],
                                                           sliding_window=4096))
    assert "head size" in default_backend_unsupported(_model(head_size=12))
    assert "kv_cache_dtype" in default_backend_unsupported(_model(), "fp8")
    # a GPU older than Ampere keeps vLLM's backend (the default must not stop the engine)
    from vllm.platforms.interface import DeviceCapability

    assert default_backend_unsupported(_model(), "auto", DeviceCapability(9, 0)) is None
    assert default_backend_unsupported(_model(), "auto", DeviceCapability(8, 0)) is None
    assert "compute capability 7.5" in default_backend_unsupported(
        _model(), "auto", DeviceCapability(7, 5))


def test_attention_option_is_validated():
    with pytest.raises(BassConfigError, match="attention"):
        BassConfig(draft_model=DRAFT, attention="flash")


def _config(spec_extra=None, **engine):
    from vllm.engine.arg_utils import EngineArgs

    from vllm_bass.plugin import register

    register()
    spec = {"method": "bass", "model": DRAFT, "num_speculative_tokens": 3, **(spec_extra or {})}
    engine.setdefault("max_model_len", 512)
    return EngineArgs(model=TARGET, speculative_config=json.loads(json.dumps(spec)),
                      **engine).create_engine_config()


def _backends(cfg):
    names = (cfg.attention_config.backend, cfg.speculative_config.attention_backend)
    return tuple(None if b is None else b.name for b in names)


def test_bass_attention_by_default_on_cuda_only():
    want = ("CUSTOM", "CUSTOM") if on_gpu() else (None, None)
    assert _backends(_config({"attention": "bass"})) == want
    want = ("CUSTOM", None) if on_gpu() else (None, None)
    assert _backends(_config({"attention": "target"})) == want
    want = ("CUSTOM", "CUSTOM") if on_gpu() else (None, None)
    assert _backends(_config()) == want  # the default: ours on CUDA
    assert _backends(_config({"attention": "vllm"})) == (None, None)  # vLLM chooses
