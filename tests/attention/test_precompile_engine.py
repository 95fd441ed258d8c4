"""On the GPU, in a real engine with CUDA graphs: the precompile compiles our attention's
binaries before the capture, and the captures then compile none it did not foresee (the
replay plans every captured graph as the capture does). Greedy output stays the target's."""

from __future__ import annotations

import re

import pytest

from tests.harness import base_engine_kwargs, bass_spec, on_gpu, run_engine

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
    ahead = re.search(r"compiled (\d+) attention kernel binaries for the CUDA graphs ahead", text)
    missed = re.search(r"captures compiled (\d+) attention kernel binaries the precompile",
                       text)
    assert ahead and int(ahead.group(1)) > 0, text[-3000:]
    assert missed and int(missed.group(1)) == 0, text[-3000:]
    plain = run_engine(base_engine_kwargs(**engine), [JOB])
    assert bass["results"][0]["token_ids"] == plain["results"][0]["token_ids"]
