"""A server's continuous batching in the real engine (`isolated_engine`'s "concurrency"
jobs: a finished request replaced before the next step): requests that join running ones
are planned for tokens per second, not as a closed batch (session 25: a closed-batch plan
there drafted 1.3 tokens a request, H100), and their greedy answers stay the target's own.
The plan trace (VLLM_BASS_STEP_TRACE) says how each step was planned."""

import json

import pytest

from tests.harness import base_engine_kwargs, bass_spec, run_engine
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]

GREEDY = {"temperature": 0.0, "max_tokens": 24, "ignore_eos": True}


def test_a_stream_is_planned_open_and_stays_lossless(tmp_path, monkeypatch):
    trace = tmp_path / "steps.csv"
    monkeypatch.setenv("VLLM_BASS_STEP_TRACE", str(trace))
    prompts = (PROMPTS * 3)[:12]
    wave = {"prompts": prompts[:4], "sampling": GREEDY}
    # staggered lengths, so the requests in flight finish at different steps and each
    # replacement joins running ones (with one length, three that finished in one step were
    # replaced together into an idle engine, a closed batch again: the stream's plans were
    # all closed once in a loaded CI run, session 47)
    lengths = [GREEDY["max_tokens"] - 3 * (i % 4) for i in range(len(prompts))]
    stream = {"prompts": prompts, "sampling": GREEDY, "concurrency": 3,
              "per_prompt": [{"max_tokens": n} for n in lengths]}
    bass = run_engine(base_engine_kwargs(speculative_config=bass_spec()), [wave, stream])
    monkeypatch.delenv("VLLM_BASS_STEP_TRACE")
    plain = run_engine(base_engine_kwargs(), [{"prompts": prompts, "sampling": GREEDY}])
    want = plain["results"][0]["token_ids"]
    assert bass["results"][0]["token_ids"] == want[:4]
    # greedy: a shorter request's tokens are the longer one's first tokens
    assert bass["results"][1]["token_ids"] == [[w[0][:n]] for w, n in zip(want, lengths)]
    plans = [json.loads(line) for line in (tmp_path / "steps.csv.plans").read_text().splitlines()]
    batched = [p for p in plans if p["batch"] >= 2]
    # the wave: one generate() into an idle engine, nothing waiting: closed from its start
    assert batched[0]["closed"] is True, batched[:3]
    # the stream: once requests joined running ones, no plan is closed
    first_open = next(i for i, p in enumerate(batched) if p["closed"] is False)
    assert all(p["closed"] is False for p in batched[first_open:]), \
        [p["closed"] for p in batched[first_open:]]
    assert len(batched) - first_open >= 5, len(batched) - first_open
    # ... and FILE.gc: the engine process's collections (diagnostics.gc_trace), each read
    gc_lines = (tmp_path / "steps.csv.gc").read_text().splitlines()
    for line in gc_lines:
        start, ms, generation, _ = line.split(",")
        assert float(ms) >= 0.0 and int(generation) in (0, 1, 2), line
    # ... and FILE.runner: each step's phases, the target model's own call among them (the
    # runner's `_model_forward`, session 51), within the forward phase's host time
    runner = [line.split(",") for line in
              (tmp_path / "steps.csv.runner").read_text().splitlines()]
    stepped = [f for f in runner if int(f[1]) > 0]
    assert stepped and all(len(f) == 16 for f in stepped), {len(f) for f in stepped}
    assert all(float(f[13]) <= float(f[3]) + 0.01 for f in stepped), stepped[:3]
    # (a step that scheduled no token returns before the model: allowed, but rare)
    timed = [f for f in stepped if float(f[13]) > 0.0]
    assert len(timed) >= 0.9 * len(stepped), (len(timed), len(stepped))
