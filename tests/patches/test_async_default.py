"""Async scheduling with BASS: on by default on CUDA (vLLM leaves it off for draft-model
speculation; BASS plans the next step while this one runs), off when the user asks
(`--no-async-scheduling`), forced off on CPU by vLLM. One body for CPU and GPU: the
expectation follows the platform."""

import pytest

from tests.harness import on_gpu
from tests.patches.test_attention_default import _config

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def test_async_scheduling_is_the_default_on_cuda_only():
    cfg = _config()
    assert cfg.scheduler_config.async_scheduling is on_gpu()
    assert cfg.scheduler_config.scheduler_cls == "vllm_bass.scheduler.BassScheduler"


def test_async_scheduling_can_be_turned_off():
    assert not _config(async_scheduling=False).scheduler_config.async_scheduling


def test_async_scheduling_on_request_on_cuda_only():
    assert _config(async_scheduling=True).scheduler_config.async_scheduling is on_gpu()
