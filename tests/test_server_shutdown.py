"""Shutdown with requests in flight (issue 14): SIGTERM to a BASS server while 8 streaming
requests are mid-generation ends the server and every process it started, and every
client's connection ends (no client hangs). Without `patches.api_server_shutdown` vLLM's
server could wait forever for those streams (seen in CI, session 11); with it, at most
GRACEFUL_SHUTDOWN_S."""

import os
import signal
import threading
import time

import pytest
import requests

from tests.harness import TARGET
from tests.prompts import PROMPTS
from tests.server_harness import BASS_ARGS, running_server, stream_events
from vllm_bass.patches.api_server_shutdown import GRACEFUL_SHUTDOWN_S

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]


def _stream(base: str, prompt: str, started: threading.Event, outcome: dict, key: int):
    chunks = 0
    try:
        with requests.post(base + "/v1/completions", stream=True, timeout=120, json={
                "model": TARGET, "prompt": prompt, "temperature": 0.0, "max_tokens": 400,
                "ignore_eos": True, "stream": True}) as r:
            for _ in stream_events(r):
                chunks += 1
                started.set()
        outcome[key] = ("ended", chunks)
    except requests.RequestException as exc:  # the server went away mid-stream
        outcome[key] = (type(exc).__name__, chunks)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_sigterm_with_requests_in_flight_exits_cleanly(tmp_path):
    processes = []
    with running_server(tmp_path, BASS_ARGS, processes=processes) as base:
        server = processes[0]
        outcome, events, threads = {}, [], []
        for i, prompt in enumerate(PROMPTS):
            started = threading.Event()
            t = threading.Thread(target=_stream, args=(base, prompt, started, outcome, i),
                                 daemon=True)
            t.start()
            events.append(started)
            threads.append(t)
        for started in events:
            assert started.wait(120), "a request produced nothing before the shutdown"
        t0 = time.time()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=GRACEFUL_SHUTDOWN_S + 30)
        exit_s = time.time() - t0
        deadline = time.time() + 30
        while _group_alive(server.pid) and time.time() < deadline:
            time.sleep(0.5)
        assert not _group_alive(server.pid), "processes of the server outlived it"
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads), "a client still hangs"
        assert len(outcome) == len(PROMPTS)
        print(f"server exited rc={server.returncode} {exit_s:.1f} s after SIGTERM; "
              f"clients: {sorted(outcome.values())}")
