"""The BASS server (default flags) with a draft that raises on every other pass (injected:
VLLM_BASS_INJECT_DRAFT_FAULT): concurrent streaming and non-streaming requests all finish
with 200 and the plain engine's greedy text, the faults are logged, and the server serves
the next request afterwards (issue 14, faults)."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.harness import TARGET, base_engine_kwargs, run_engine
from tests.prompts import PROMPTS
from tests.server_harness import BASS_ARGS, running_server, stream_events

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]

MAX_TOKENS = 32


@pytest.fixture(scope="module")
def reference():
    out = run_engine(base_engine_kwargs(), [
        {"prompts": PROMPTS, "sampling": {"temperature": 0.0, "max_tokens": MAX_TOKENS}}])
    return out["results"][0]["text"]


def _complete(base, i: int):
    """(status, text) of prompt i; even i stream."""
    body = {"model": TARGET, "prompt": PROMPTS[i], "temperature": 0.0,
            "max_tokens": MAX_TOKENS, "stream": i % 2 == 0}
    with requests.post(base + "/v1/completions", json=body, stream=body["stream"],
                       timeout=600) as r:
        if r.status_code != 200 or not body["stream"]:
            return r.status_code, (r.json()["choices"][0]["text"] if r.status_code == 200
                                   else r.text)
        text = ""
        for event in stream_events(r):
            text += event["choices"][0]["text"]
        return r.status_code, text


def test_server_keeps_serving_through_draft_faults(tmp_path, monkeypatch, reference):
    monkeypatch.setenv("VLLM_BASS_INJECT_DRAFT_FAULT", "every:2")
    with running_server(tmp_path, BASS_ARGS) as base:
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            results = list(pool.map(lambda i: _complete(base, i), range(len(PROMPTS))))
        after = _complete(base, 1)
        healthy = requests.get(base + "/health", timeout=10).status_code
        log = (tmp_path / "server.log").read_text()  # before the shutdown logs its own
    assert "BASS: the draft pass raised InjectedDraftFault" in log, "no fault happened"
    assert [status for status, _ in results] == [200] * len(PROMPTS), results
    differ = [i for i, (_, text) in enumerate(results) if text != reference[i]]
    assert not differ, [(results[i][1], reference[i]) for i in differ[:2]]
    assert after == (200, reference[1]) and healthy == 200
    assert "EngineDeadError" not in log and "EngineCore encountered" not in log
