"""Seeded multi-sample requests (n > 1, issue 18's regime) reproduce through BASS: vLLM
gives each of the n samples its own seed (seed + index), and BASS samples seeded requests
position-keyed, so a request with n = 4 and a seed gives the same 4 completions alone and
inside a batch with other requests, and the 4 are not one completion repeated."""

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, run_engine
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]

N = 4
MULTI = {"temperature": 0.8, "max_tokens": 24, "ignore_eos": True, "n": N, "seed": 5}


def test_seeded_multisample_request_reproduces_alone_and_in_a_batch():
    alone = {"prompts": [PROMPTS[0]], "per_prompt": [{}], "sampling": MULTI}
    others = [{"seed": None, "n": 1}, {"n": 2, "seed": 9}, {"seed": None, "n": 3}]
    batch = {"prompts": [PROMPTS[1], PROMPTS[0], PROMPTS[2], PROMPTS[3]],
             "per_prompt": [others[0], {}, others[1], others[2]], "sampling": MULTI}
    out = run_engine(base_engine_kwargs(speculative_config=bass_spec()),
                     [alone, batch, alone], metrics=True)
    first, in_batch, again = (r["token_ids"] for r in out["results"])
    assert len(first[0]) == N
    assert first[0] == in_batch[1] == again[0], "a seeded n=4 request changed its samples"
    assert len({tuple(t) for t in first[0]}) > 1, "the 4 samples are one completion"
    assert metric(out["metrics"], "vllm:spec_decode_num_accepted_tokens") > 0
