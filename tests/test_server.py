"""The OpenAI-compatible server with `--spec-worker bass`: starts the real server process,
completes concurrent requests over HTTP, rejects a bad request with a 4xx while continuing
to serve, exports speculative-decoding metrics on /metrics, and answers one seeded request
sent 4 times among unseeded ones with one text."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.harness import TARGET
from tests.prompts import PROMPTS
from tests.server_harness import BASS_ARGS, running_server

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("server"),
                        BASS_ARGS + ["--num-speculative-tokens", "6"]) as base:
        yield base


def _complete(base, prompt, **extra):
    body = {"model": TARGET, "prompt": prompt, "max_tokens": 32, "temperature": 0.0}
    body.update(extra)
    return requests.post(base + "/v1/completions", json=body, timeout=300)


def test_concurrent_completions(server):
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda p: _complete(server, p), PROMPTS[:4]))
    for r in replies:
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        assert choice["text"] and choice["finish_reason"] in ("length", "stop")


def test_bad_request_is_rejected_and_server_keeps_serving(server):
    bad = _complete(server, PROMPTS[0], temperature=-1.0)
    assert 400 <= bad.status_code < 500 and "temperature" in bad.text
    assert _complete(server, PROMPTS[1]).status_code == 200


def test_speculative_metrics_exported(server):
    _complete(server, PROMPTS[2])
    text = requests.get(server + "/metrics", timeout=30).text
    values = {}
    for line in text.splitlines():
        if line.split("{")[0] in ("vllm:spec_decode_num_draft_tokens_total",
                                  "vllm:spec_decode_num_accepted_tokens_total",
                                  "vllm:spec_decode_num_drafts_total"):
            name = line.split("{")[0]
            values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    assert values.get("vllm:spec_decode_num_draft_tokens_total", 0) > 0, text[:2000]
    assert values.get("vllm:spec_decode_num_accepted_tokens_total", 0) > 0
    bass = {}
    for line in text.splitlines():
        if line.startswith("vllm:bass_"):
            key = line.split(" ")[0]
            bass[key] = float(line.rsplit(" ", 1)[1])
    hist_count = sum(v for k, v in bass.items() if k.startswith("vllm:bass_draft_length_count"))
    on_steps = sum(v for k, v in bass.items()
                   if k.startswith("vllm:bass_sequence_steps_total") and 'speculation="on"' in k)
    pos0 = sum(v for k, v in bass.items()
               if k.startswith("vllm:bass_draft_tokens_per_pos_total") and 'position="0"' in k)
    assert hist_count > 0 and on_steps > 0 and pos0 > 0, sorted(bass)[:20]
    # every drafted sequence-step is one histogram observation
    assert hist_count == values["vllm:spec_decode_num_drafts_total"] if (
        "vllm:spec_decode_num_drafts_total" in values) else True


def test_seeded_request_reproduces_through_the_server(server):
    """The same seeded request (temperature 0.8, seed 1) 4 times, concurrently with 4
    unseeded ones: one text; the unseeded ones differ (sampling is really random)."""
    sampled = {"temperature": 0.8, "max_tokens": 32, "ignore_eos": True}
    jobs = [dict(sampled, seed=1)] * 4 + [sampled] * 4
    jobs = [jobs[i] for i in (0, 4, 1, 5, 2, 6, 3, 7)]
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda extra: _complete(server, PROMPTS[0], **extra), jobs))
    for r in replies:
        assert r.status_code == 200, r.text
    texts = [r.json()["choices"][0]["text"] for r in replies]
    seeded = {t for t, j in zip(texts, jobs) if "seed" in j}
    unseeded = {t for t, j in zip(texts, jobs) if "seed" not in j}
    assert len(seeded) == 1, f"one seeded request, {len(seeded)} outputs: {seeded}"
    assert len(unseeded) > 1, "unseeded requests all gave one text"
