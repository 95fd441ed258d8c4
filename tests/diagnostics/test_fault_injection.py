"""VLLM_BASS_INJECT_DRAFT_FAULT: which draft passes fault, and bad specs named at start."""

import pytest

from vllm_bass.diagnostics.fault_injection import (ENV, DraftFaultInjector,
                                                   InjectedDraftFault)

pytestmark = [pytest.mark.cpu]


def _faulting(spec: str, passes: int = 12) -> list[int]:
    injector, hit = DraftFaultInjector(spec), []
    for n in range(1, passes + 1):
        try:
            injector.check()
        except InjectedDraftFault as exc:
            assert f"pass {n}" in str(exc)
            hit.append(n)
    return hit


def test_specs_pick_the_passes():
    assert _faulting("every:3") == [3, 6, 9, 12]
    assert _faulting("steps:2, 7,7") == [2, 7]
    assert _faulting("from:10") == [10, 11, 12]


@pytest.mark.parametrize("spec", ["3", "every:", "every:0", "every:2,3", "sometimes:2",
                                  "steps:a", "from:-1"])
def test_bad_specs_are_refused_with_the_variable_named(spec):
    with pytest.raises(ValueError, match=ENV):
        DraftFaultInjector(spec)


def test_unset_means_no_injector(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert DraftFaultInjector.from_env() is None
    monkeypatch.setenv(ENV, "every:2")
    assert DraftFaultInjector.from_env().due(4)
