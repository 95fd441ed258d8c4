"""Issue 14, part 2: a long run under KV-cache pressure leaks nothing.

5,000 requests (mixed prompt lengths and max_tokens, greedy, some with a seed) through one
BASS engine whose KV cache is too small for its batch, so drafted sequences are preempted
and resumed again and again. After every round of 500: the KV cache is empty again (no
leaked blocks: vLLM's usage gauge back to 0), every output equals the first round's for the
same request (greedy and seeded), and the engine's resident memory (its whole process tree)
stops growing once warm. The figures are printed (-s shows them).
"""

import pytest

from tests.harness import base_engine_kwargs, bass_spec, metric, run_engine
from tests.prompts import PROMPTS

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]

ROUNDS, PER_ROUND = 10, 500
# 8 sequences of up to ~60 prompt + 12 new + 16 draft tokens want ~44 blocks of 16: 14 force
# preemption while drafts are held
PRESSURE = {"num_gpu_blocks_override": 14, "block_size": 16, "max_model_len": 192}
# after the first two rounds (allocator pools, compiled shapes, metric series) the tree may
# not grow by more than this over the remaining 4,000 requests
GROWTH_LIMIT = 64 * 2**20


def _round() -> dict:
    prompts, own = [], []
    for i in range(PER_ROUND):
        prompts.append(PROMPTS[i % len(PROMPTS)] * (1 + i % 3))
        params = {"max_tokens": 1 + i % 12}
        if i % 5 == 0:
            params.update(temperature=0.8, seed=i)
        own.append(params)
    return {"prompts": prompts, "per_prompt": own,
            "sampling": {"temperature": 0.0, "ignore_eos": True}}


def test_five_thousand_requests_leak_no_blocks_and_no_memory():
    got = run_engine(base_engine_kwargs(speculative_config=bass_spec(), **PRESSURE),
                     [_round() for _ in range(ROUNDS)], metrics=True, memory=True,
                     timeout=1500)
    results = got["results"]
    first = results[0]["token_ids"]
    rss = [r["rss_bytes"] for r in results]
    usage = [metric(r["metrics"], "vllm:kv_cache_usage_perc") for r in results]
    preemptions = metric(got["metrics"], "vllm:num_preemptions")
    accepted = metric(got["metrics"], "vllm:spec_decode_num_accepted_tokens")
    print(f"\nrequests {ROUNDS * PER_ROUND}, preemptions {preemptions}, accepted draft tokens "
          f"{accepted}, KV usage after each round {usage}, process-tree RSS MiB "
          f"{[round(x / 2**20) for x in rss]}, growth after round 2 "
          f"{(max(rss[2:]) - rss[1]) / 2**20:.1f} MiB")
    assert preemptions > 0, "the cache did not force preemption"
    assert accepted > 0, "speculation never ran"
    for n, r in enumerate(results[1:], 2):
        differ = [i for i, (a, b) in enumerate(zip(first, r["token_ids"])) if a != b]
        assert not differ, f"round {n}: requests {differ[:10]} differ from round 1"
    assert all(u == 0 for u in usage), f"KV blocks still held after a round: {usage}"
    assert max(rss[2:]) - rss[1] <= GROWTH_LIMIT, (
        f"memory grew {(max(rss[2:]) - rss[1]) / 2**20:.1f} MiB over rounds 3-{ROUNDS}")
