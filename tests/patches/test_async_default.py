"""BASS runs vLLM's async scheduling by default on CUDA (vLLM leaves it off for draft-model
speculation), keeps it off when asked, and runs sync on CPU (vLLM forces it there). One body
for CPU and GPU: the expectation follows the platform."""

import pytest

from tests.harness import on_gpu
from tests.patches.test_attention_default import _config

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def test_async_scheduling_default_follows_the_platform():
    cfg = _config()
    assert cfg.scheduler_config.async_scheduling is on_gpu()
    assert cfg.scheduler_config.scheduler_cls == "vllm_bass.scheduler.BassScheduler"


def test_async_scheduling_can_be_turned_off():
    assert _config(async_scheduling=False).scheduler_config.async_scheduling is False
