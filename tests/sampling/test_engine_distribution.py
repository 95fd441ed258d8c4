"""Sampled BASS output follows the target distribution, in the real engine.

Many samples of short continuations of fixed prompts at temperature 1 (and one top-k/top-p
setting) from the plain engine and from BASS; at each generated position past the first
(the first comes from the prefill, not from speculation) the two token distributions are
compared with a two-sample chi-square test. BASS samples each setting twice: unseeded (exact
rejection sampling) and with a different seed per request (the position-keyed coupling over
1500 seeds). Rejection threshold p < 1e-3 per comparison (8 tests of 3 positions). Seeds
are fixed and the engine core runs in-process, so a run is deterministic; an inexact sampler
shifts these marginals and fails (vLLM 0.27.1's own CPU draft-model path does, grossly).
In-process because with the core in its own process the first steps batch whichever requests
have arrived, so the unseeded draws, and their p-values, were a fresh draw every run (a CI
run failed at p = 9.4e-4 where 18,000 pooled samples of the same path showed no bias).
Also: a seeded request gives the same tokens twice through BASS.
"""

import numpy as np
import pytest
from scipy import stats

from tests.harness import base_engine_kwargs, bass_spec, run_engine

pytestmark = [pytest.mark.cpu, pytest.mark.gpu, pytest.mark.slow]

PROMPT = "def "
N = 1500
POSITIONS = (1, 2, 3)
ALPHA = 1e-3
SETTINGS = {"t1": {"temperature": 1.0}, "topk": {"temperature": 0.8, "top_k": 20, "top_p": 0.9}}


def _jobs(unseeded: bool = False):
    """Per setting N seeded requests (1500 seeds), a seeded pair for reproduction and,
    for BASS, the settings again without seeds."""
    sampled = [{"prompts": [PROMPT] * N, "per_prompt_seed": 1000 * i,
                "sampling": dict(s, max_tokens=max(POSITIONS) + 1, ignore_eos=True)}
               for i, s in enumerate(SETTINGS.values())]
    repro = [{"prompts": ["class Foo:\n"] * 4, "per_prompt_seed": 7,
              "sampling": {"temperature": 1.0, "max_tokens": 24, "ignore_eos": True}}] * 2
    plain = [{k: v for k, v in job.items() if k != "per_prompt_seed"} for job in sampled]
    return sampled + repro + (plain if unseeded else [])


IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}  # every request queued before step 1


def _engine(**kw):
    return base_engine_kwargs(max_num_seqs=64, max_model_len=256, seed=1, **kw)


@pytest.fixture(scope="module")
def plain():
    return run_engine(_engine(), _jobs(), env=IN_PROCESS)


@pytest.fixture(scope="module", params=["probabilistic", "greedy"])
def bass(request):
    # auto_off=False: at batch 64 auto-off would skip most drafting, and with it the test
    return request.param, run_engine(
        _engine(speculative_config=bass_spec(num_speculative_tokens=4,
                                             draft_length_policy="fixed", auto_off=False,
                                             draft_sample_method=request.param)),
        _jobs(unseeded=True), metrics=True, env=IN_PROCESS)


def two_sample_pvalue(a: list[int], b: list[int]) -> float:
    cats = sorted(set(a) | set(b))
    table = np.array([[a.count(c) for c in cats], [b.count(c) for c in cats]], dtype=float)
    expected = table.sum(0) * table.sum(1)[:, None] / table.sum()
    big = expected.min(0) >= 5
    merged = np.concatenate([table[:, big], table[:, ~big].sum(1, keepdims=True)], 1)
    merged = merged[:, merged.sum(0) > 0]
    return float(stats.chi2_contingency(merged)[1])


@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "unseeded"])
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_bass_samples_follow_target_distribution(plain, bass, setting, seeded):
    method, got = bass
    idx = list(SETTINGS).index(setting)
    ref = plain["results"][idx]["token_ids"]
    spec = got["results"][idx if seeded else len(SETTINGS) + 2 + idx]["token_ids"]
    for pos in POSITIONS:
        a = [t[0][pos] for t in ref]
        b = [t[0][pos] for t in spec]
        p = two_sample_pvalue(a, b)
        assert p > ALPHA, (f"{method}/{setting}/{'seeded' if seeded else 'unseeded'}: "
                           f"position {pos} distribution differs (p={p:.2e})")


def test_seeded_requests_reproduce(bass):
    method, got = bass
    first = got["results"][len(SETTINGS)]["token_ids"]
    second = got["results"][len(SETTINGS) + 1]["token_ids"]
    assert first == second, f"{method}: the same seeds gave different tokens"
