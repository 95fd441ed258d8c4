"""On the GPU, in a real engine with CUDA graphs: the precompile compiles our attention's
binaries before the capture, and the captures then compile none it did not foresee (the
replay plans every captured graph as the capture does, and vLLM's eager warm-up of a FULL
graph plans as its capture). Greedy output stays the target's."""

from __future__ import annotations

import re

import pytest

from tests.harness import base_engine_kwargs, bass_spec, on_gpu, run_engine

AHEAD = re.compile(r"compiled (\d+) attention kernel binaries for the CUDA graphs ahead")
MISSED = re.compile(r"captures compiled (\d+) attention kernel binaries the precompile")

pytestmark = pytest.mark.gpu

PROMPTS = ["def fibonacci(n):", "class Stack:\n    def push(self, item):"]
JOB = {"prompts": PROMPTS, "sampling": {"temperature": 0.0, "max_tokens": 24,
                                        "ignore_eos": True}}


@pytest.mark.skipif(not on_gpu(), reason="CUDA graphs and compiled kernels need a GPU")
def test_captures_compile_nothing_the_precompile_did_not_foresee(tmp_path):
    # 64: the drafter's step graphs at 16-64 rows (session 35: 3 binaries missed there)
    engine = dict(enforce_eager=False, max_num_seqs=64)
    log = tmp_path / "bass.log"
    bass = run_engine(base_engine_kwargs(speculative_config=bass_spec(num_speculative_tokens=4),
                                         **engine), [JOB], log_path=str(log))
    text = log.read_text()
    ahead, missed = AHEAD.search(text), MISSED.search(text)
    assert ahead and int(ahead.group(1)) > 0, text[-3000:]
    assert missed and int(missed.group(1)) == 0, text[-3000:]
    plain = run_engine(base_engine_kwargs(**engine), [JOB])
    assert bass["results"][0]["token_ids"] == plain["results"][0]["token_ids"]


@pytest.mark.skipif(not on_gpu(), reason="CUDA graphs and compiled kernels need a GPU")
def test_no_unforeseen_compiles_at_the_benchmarks_head_shape(tmp_path):
    """The benchmark's target heads (32 x 128, bf16) with the default draft bound: there
    vLLM's eager warm-up of each FULL graph had compiled 3 PAD binaries inside the capture
    (session 35; the tiny pair's head shape does not show it), and steps outside the graphs
    compiled their own plans while serving (session 41), and no kernel warm-up fell back to
    its torch form (session 41's first-pass slots, found in session 42). Two dummy-weight
    layers keep it short; the output is not compared (random weights)."""
    from benchmarks.e2e.dummy_models import dummy_model_folder
    from benchmarks.e2e.vs_vllm import DRAFT_SHAPES, TARGET_SHAPE

    target = dummy_model_folder(tmp_path / "target", dict(TARGET_SHAPE, num_hidden_layers=2),
                                4096)
    draft = dummy_model_folder(tmp_path / "draft", dict(DRAFT_SHAPES["4x1024"],
                                                        num_hidden_layers=1), 4096)
    log = tmp_path / "bass.log"
    run_engine(base_engine_kwargs(
        model=target, dtype="bfloat16", load_format="dummy", max_model_len=2048,
        enforce_eager=False, max_num_seqs=64, gpu_memory_utilization=0.5,
        speculative_config={"method": "bass", "model": draft}), [JOB], log_path=str(log))
    text = log.read_text()
    ahead, missed = AHEAD.search(text), MISSED.search(text)
    assert ahead and int(ahead.group(1)) > 0, text[-3000:]
    assert missed and int(missed.group(1)) == 0, "\n".join(
        line for line in text.splitlines() if "not foreseen" in line)[-6000:]
    # nor while serving: the prompts' prefill and any uncaptured draft pass plan outside
    # the graphs, which the precompile covers since session 41 (`eager_batches`)
    serving = [line for line in text.splitlines() if "compiled while serving" in line]
    assert not serving, "\n".join(serving)[-6000:]
    # and every kernel compiled ahead compiled: a warm-up that fails hands its step to the
    # torch form with one warning and greedy output unchanged (session 41's slot kernel)
    fell_back = [line for line in text.splitlines() if "does not compile" in line]
    assert not fell_back, "\n".join(fell_back)[-3000:]
