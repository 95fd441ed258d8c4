"""Async scheduling with BASS: off by default (vLLM's default for draft-model speculation),
honoured when asked on CUDA (the scheduler class then builds BASS's async variant), forced off
on CPU by vLLM. One body for CPU and GPU: the expectation follows the platform."""

import pytest

from tests.harness import on_gpu
from tests.patches.test_attention_default import _config

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def test_async_scheduling_is_opt_in():
    cfg = _config()
    assert not cfg.scheduler_config.async_scheduling
    assert cfg.scheduler_config.scheduler_cls == "vllm_bass.scheduler.BassScheduler"


def test_async_scheduling_on_request_on_cuda_only():
    assert _config(async_scheduling=True).scheduler_config.async_scheduling is on_gpu()
