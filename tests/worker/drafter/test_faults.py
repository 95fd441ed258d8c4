"""Contained draft faults: counted, logged with their traceback at most once per interval
(the ones in between reported with the next), speculation off after N in a row (a success
resets the run), and CUDA errors recognised as device faults, which are never contained."""

import logging

import pytest
import torch

from vllm_bass.config import MAX_CONSECUTIVE_DRAFT_FAULTS
from vllm_bass.worker.drafter.faults import DraftFaults, is_device_fault

pytestmark = [pytest.mark.cpu]


class _Clock:
    t = 0.0

    def __call__(self):
        return self.t


def _raised(exc):
    try:
        raise exc
    except Exception as caught:
        return caught


class _Records(logging.Handler):
    """Records of the "vllm.bass" logger (vLLM's logging config stops propagation to the
    root logger pytest's caplog listens on, once vLLM was imported)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def records():
    handler, log = _Records(), logging.getLogger("vllm.bass")
    log.addHandler(handler)
    yield handler.records
    log.removeHandler(handler)


def test_faults_are_counted_rate_limited_and_turn_speculation_off(records):
    clock = _Clock()
    faults = DraftFaults(max_consecutive=3, log_interval_s=60.0, clock=clock)
    for _ in range(2):
        faults.record(_raised(ValueError("boom")))
    assert faults.take() and not faults.take()
    faults.succeeded()  # a good pass ends the run
    clock.t = 61.0
    faults.record(_raised(ValueError("boom")))
    assert not faults.speculation_off
    faults.record(_raised(ValueError("boom")))
    faults.record(_raised(ValueError("boom")))
    assert faults.speculation_off
    assert faults.as_dict() == {"passes": 6, "faults": 5, "consecutive": 3,
                                "speculation_off": True}
    reports = [r for r in records if "draft pass raised" in r.getMessage()]
    assert len(reports) == 2, "one traceback per interval"
    assert all(r.exc_info and r.exc_info[0] is ValueError for r in reports)
    assert "1 more since the last report" in reports[1].getMessage()
    off = [r for r in records if "speculation is OFF" in r.getMessage()]
    assert len(off) == 1 and off[0].levelno == logging.ERROR


def test_default_limit_is_the_configured_constant():
    assert DraftFaults().max_consecutive == MAX_CONSECUTIVE_DRAFT_FAULTS >= 2


@pytest.mark.parametrize("exc,device", [
    (RuntimeError("CUDA error: an illegal memory access was encountered"), True),
    (RuntimeError("CUDA error: device-side assert triggered"), True),
    (torch.AcceleratorError("anything") if hasattr(torch, "AcceleratorError") else
     RuntimeError("CUDA error"), True),
    (RuntimeError("shape mismatch"), False),
    (ValueError("CUDA error"), False),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"), False),
])
def test_device_faults_are_recognised(exc, device):
    assert is_device_fault(exc) is device


def test_a_device_fault_carried_as_the_cause_is_recognised():
    try:
        try:
            raise RuntimeError("CUDA error: unspecified launch failure")
        except RuntimeError as inner:
            raise ValueError("draft step failed") from inner
    except ValueError as outer:
        assert is_device_fault(outer)


class _Cad:
    def batch_size(self):
        return 3


def _drafter(exc):
    from vllm_bass.worker.drafter.draft_model import BassDraftModelProposer

    drafter = object.__new__(BassDraftModelProposer)  # just the state propose() touches
    drafter.bass_faults, drafter.bass_catch_up = DraftFaults(), object()
    drafter.input_ids = torch.zeros(8, dtype=torch.int32)

    def draft_pass(*args):
        raise exc
    drafter._bass_draft_pass = draft_pass
    return drafter


def test_the_drafter_contains_a_fault_and_drafts_nothing():
    drafter = _drafter(ValueError("bad draft"))
    drafts = drafter.propose(4, None, None, None, None, None, _Cad(), None)
    assert drafts.shape == (3, 4) and not drafts.any() and drafter._last_draft_probs is None
    assert drafter.bass_catch_up is None and drafter.bass_faults.take()


def test_the_drafter_does_not_contain_a_device_fault():
    drafter = _drafter(RuntimeError("CUDA error: an illegal memory access was encountered"))
    with pytest.raises(RuntimeError, match="illegal memory access"):
        drafter.propose(4, None, None, None, None, None, _Cad(), None)
    assert drafter.bass_faults.total == 0


def test_readme_states_the_limit():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert f"{MAX_CONSECUTIVE_DRAFT_FAULTS} in a row turn speculation off" in readme
