"""BASS under tensor parallelism: with the target and draft split over 2 workers, greedy
output equals the same TP engine without speculation, every rank runs the BASS worker, and
speculation runs (drafts proposed, some accepted). CPU in CI (vLLM's multiprocessing
executor over gloo; the CPU platform refuses Ray); on a host with 2+ GPUs (`-m multigpu`)
the same body runs once per executor: multiprocessing and Ray."""

import importlib.util

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, on_gpu, run_engine
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.cpu, pytest.mark.multigpu, pytest.mark.slow]

TP = 2
JOBS = [{"prompts": PROMPTS, "sampling": {"temperature": 0.0, "max_tokens": 40,
                                          "ignore_eos": True}}]


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if on_gpu() else 0


def _executors() -> list:
    ray = pytest.param("ray", marks=pytest.mark.skipif(
        not on_gpu() or importlib.util.find_spec("ray") is None,
        reason="Ray: GPU hosts with ray installed only (vLLM's CPU platform refuses it)"))
    return ["mp", ray]


@pytest.fixture(autouse=True)
def _enough_devices():
    if on_gpu() and _gpus() < TP:
        pytest.skip(f"tensor parallel size {TP} needs {TP} GPUs, this host has {_gpus()}")


def _engine(executor: str, **overrides) -> dict:
    return base_engine_kwargs(tensor_parallel_size=TP, distributed_executor_backend=executor,
                              **overrides)


@pytest.mark.parametrize("executor", _executors())
def test_greedy_identical_to_target_under_tensor_parallelism(executor):
    plain = run_engine(_engine(executor), JOBS)
    got = run_engine(_engine(executor, speculative_config=bass_spec()), JOBS, metrics=True,
                     worker_rpc=["bass_draft_faults"])
    for i, (want, have) in enumerate(zip(plain["results"][0]["token_ids"],
                                         got["results"][0]["token_ids"])):
        assert have == want, f"TP {TP} over {executor}: prompt {i} differs from greedy"
    ranks = got["worker_rpc"]["bass_draft_faults"]
    assert len(ranks) == TP, f"expected one BASS worker per rank, got {ranks}"
    for rank, faults in enumerate(ranks):
        assert faults.get("passes", 0) > 0, f"rank {rank} never ran a draft pass: {faults}"
        assert faults.get("faults") == 0, f"rank {rank} contained draft faults: {faults}"
    drafts = metric(got["metrics"], "vllm:spec_decode_num_draft_tokens")
    accepted = metric(got["metrics"], "vllm:spec_decode_num_accepted_tokens")
    assert drafts > 0, "speculation never ran"
    assert 0 < accepted < drafts, "expected partial acceptance (a genuine, imperfect draft)"
