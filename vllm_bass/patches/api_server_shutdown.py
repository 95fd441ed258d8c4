"""Patch: `serve_http` as the OpenAI API server calls it (vllm/entrypoints/openai/api_server.py).

What: for a BASS engine, uvicorn gets `timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S` unless
the caller set one.
Why: on SIGTERM vLLM 0.27.1 stops the engine client first, then asks uvicorn to shut down,
which waits, with no time limit, for open connections to close; a streaming response whose
request was in flight when the engine stopped may never end, and the server then hung until
killed (CI, session 11: 8 streams, SIGTERM just after their first chunks; the engine was gone
in 0.1 s, the server still up 60 s later). With the limit uvicorn closes such connections
and the server exits.
When it can go: when vLLM ends in-flight streams on shutdown or bounds uvicorn's wait.
Only in the API server process (where the CLI imported the module before plugins load);
other processes are left alone.
"""

from __future__ import annotations

import sys

from vllm_bass.patches import wrap

API_SERVER = "vllm.entrypoints.openai.api_server"
GRACEFUL_SHUTDOWN_S = 10
PATCHED_SYMBOLS = {
    f"{API_SERVER}.serve_http":
        "(app: fastapi.applications.FastAPI, sock: socket.socket | None, "
        "enable_ssl_refresh: bool = False, **uvicorn_kwargs: Any)",
}


def _serves_bass(app) -> bool:
    from vllm_bass.config import bass_config_from_vllm

    client = getattr(getattr(app, "state", None), "engine_client", None)
    config = getattr(client, "vllm_config", None)
    return config is not None and bass_config_from_vllm(config) is not None


def apply() -> None:
    if API_SERVER not in sys.modules:
        return  # not the API server process: importing it here would cost every process

    def make(original):
        async def serve_http(app, sock, enable_ssl_refresh=False, **uvicorn_kwargs):
            if "timeout_graceful_shutdown" not in uvicorn_kwargs and _serves_bass(app):
                uvicorn_kwargs["timeout_graceful_shutdown"] = GRACEFUL_SHUTDOWN_S
            return await original(app, sock, enable_ssl_refresh, **uvicorn_kwargs)
        return serve_http

    wrap(f"{API_SERVER}.serve_http", make)
