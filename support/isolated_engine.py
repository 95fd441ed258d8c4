"""Run a real vLLM engine in a child process and return its outputs as JSON.

Each engine gets its own process (as vLLM's users' scripts do), so engines with different
configs never share state (vLLM 0.27.1's LLM has no shutdown), and a crash surfaces with the
child's log. Used by the tests, the demo and the end-to-end benchmarks:
`run_engine(engine_kwargs, jobs)`; a job is {"prompts": [...], "sampling": {SamplingParams
kwargs}}, optionally with "per_prompt_seed" (prompt i gets seed per_prompt_seed + i) or
"per_prompt" (a list of SamplingParams kwargs per prompt, each updating "sampling"), or
"concurrency": n (a server's continuous batching: the prompts submitted in order with n in
flight, a finished request replaced before the next step, instead of one `generate`).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = os.environ.get("BASS_TEST_TARGET", str(REPO / "models" / "bass-tiny-target"))
DRAFT = os.environ.get("BASS_TEST_DRAFT", str(REPO / "models" / "bass-tiny-draft"))


def on_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def base_engine_kwargs(**overrides) -> dict:
    """Small, deterministic engine settings that run on both CPU and GPU."""
    kwargs = dict(model=TARGET, dtype="float32", max_model_len=1024, seed=0,
                  max_num_seqs=8, enforce_eager=True,
                  gpu_memory_utilization=0.05 if not on_gpu() else 0.3)
    kwargs.update(overrides)
    return kwargs


def bass_spec(**options) -> dict:
    spec = {"method": "bass", "model": DRAFT}
    spec.update(options)
    return spec


def engine_env() -> dict:
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_engine(engine_kwargs: dict, jobs: list[dict], metrics: bool = False,
               timeout: float = 1800, log_path: str | None = None,
               memory: bool = False, worker_rpc: list[str] | None = None,
               env: dict[str, str] | None = None) -> dict:
    """`memory`: each job's result carries `rss_bytes`, the resident memory of the engine
    process tree after it. `worker_rpc`: worker methods called after the last job
    (`LLM.collective_rpc`); the result's "worker_rpc" maps each to its workers' answers.
    `env`: variables set for the child on top of `engine_env()`."""
    with tempfile.TemporaryDirectory() as tmp:
        spec_path, out_path = Path(tmp, "spec.json"), Path(tmp, "out.json")
        spec_path.write_text(json.dumps({"engine": engine_kwargs, "jobs": jobs,
                                         "metrics": metrics, "memory": memory,
                                         "worker_rpc": worker_rpc or []}))
        proc = subprocess.run([sys.executable, "-m", "support.isolated_engine", str(spec_path),
                               str(out_path)], cwd=REPO, env={**engine_env(), **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
        if log_path:
            Path(log_path).write_text(proc.stdout + "\n" + proc.stderr)
        if proc.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"engine child failed (rc={proc.returncode}):\n"
                               f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
        return json.loads(out_path.read_text())


def metric(metrics: dict, name: str, **labels: str):
    """Sum a metric over its label sets (keys are 'name{labels}'), only those carrying
    every given label value when ``labels`` are given."""
    wanted = [f'"{k}": "{v}"' for k, v in labels.items()]
    values = [v for k, v in metrics.items()
              if (k == name and not wanted)
              or (k.startswith(name + "{") and all(w in k for w in wanted))]
    if not values:
        return 0
    if isinstance(values[0], list):
        return [sum(col) for col in zip(*values)]
    return sum(values)


def _child(spec_path: str, out_path: str) -> None:
    import time

    from vllm import LLM, SamplingParams

    spec = json.loads(Path(spec_path).read_text())
    engine = dict(spec["engine"])
    if spec.get("metrics"):
        engine["disable_log_stats"] = False
    llm = LLM(**engine)
    results = []
    for job in spec["jobs"]:
        sampling = job.get("sampling", {})
        if "per_prompt" in job:
            params = [SamplingParams(**dict(sampling, **own)) for own in job["per_prompt"]]
        elif "per_prompt_seed" in job:
            params = [SamplingParams(**sampling, seed=job["per_prompt_seed"] + i)
                      for i in range(len(job["prompts"]))]
        else:
            params = SamplingParams(**sampling)
        start = time.perf_counter()
        if job.get("concurrency"):
            outs = _stream(llm, job["prompts"], params, int(job["concurrency"]))
        else:
            outs = llm.generate(job["prompts"], params, use_tqdm=False)
        elapsed = time.perf_counter() - start
        result = {
            "token_ids": [[list(c.token_ids) for c in o.outputs] for o in outs],
            "text": [o.outputs[0].text for o in outs],
            "seconds": elapsed,
        }
        if spec.get("metrics"):  # cumulative counters after this job
            result["metrics"] = _metrics_dict(llm.get_metrics())
        if spec.get("memory"):  # resident memory of this process and the engine's children
            result["rss_bytes"] = _tree_rss()
        results.append(result)
    out = {"results": results}
    if spec.get("metrics"):
        out["metrics"] = _metrics_dict(llm.get_metrics())
    if spec.get("worker_rpc"):
        out["worker_rpc"] = {name: llm.collective_rpc(name) for name in spec["worker_rpc"]}
    Path(out_path).write_text(json.dumps(out))


def serve_continuously(engine, requests, concurrency: int, on_output,
                       on_all_submitted=None) -> None:
    """A server's continuous batching on an `LLMEngine`: `requests` ((id, prompt, params)
    in order) submitted with `concurrency` in flight, a finished one replaced before the
    next step, so requests join running ones. `on_output` sees every step's outputs;
    `on_all_submitted()` is called right after the last submission."""
    queue = collections.deque(requests)
    in_flight = 0
    while queue or engine.has_unfinished_requests():
        while queue and in_flight < concurrency:
            engine.add_request(*queue.popleft())
            in_flight += 1
            if not queue and on_all_submitted is not None:
                on_all_submitted()
        for out in engine.step():
            in_flight -= bool(out.finished)
            on_output(out)


def _stream(llm, prompts: list, params, concurrency: int) -> list:
    """The prompts' final outputs, in order, served by `serve_continuously`."""
    done: dict[int, object] = {}

    def keep(out):
        if out.finished:  # vLLM may append a random suffix ("-xxxxxxxx") to the id
            done[int(out.request_id.split("-")[0][len("stream"):])] = out

    serve_continuously(llm.llm_engine, [
        (f"stream{i}", prompt, params[i] if isinstance(params, list) else params)
        for i, prompt in enumerate(prompts)], concurrency, keep)
    return [done[i] for i in range(len(prompts))]


def _tree_rss() -> int:
    import gc

    import psutil

    gc.collect()
    me = psutil.Process()
    total = 0
    for p in [me] + me.children(recursive=True):
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def _metrics_dict(metrics) -> dict:
    out = {}
    for m in metrics:
        value = getattr(m, "value", None)
        if value is None and hasattr(m, "values"):
            value = list(m.values)
        if value is None and hasattr(m, "count"):
            value = {"count": m.count, "sum": getattr(m, "sum", None),
                     "buckets": dict(getattr(m, "buckets", {}) or {})}
        key = m.name + (json.dumps(m.labels, sort_keys=True) if getattr(m, "labels", None) else "")
        out[key] = value
    return out


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
