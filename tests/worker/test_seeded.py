"""The keyed wrapper on vLLM's real Sampler (`vllm_bass.worker.seeded`): without seeded rows
it is vLLM's own sampling, draw for draw; with them, the seeded rows get their position-keyed
sample of the processed logits (temperature, top-k) whatever the global RNG does, the other
rows still sample, and the request generators advance as vLLM expects."""

import pytest
import torch

from vllm_bass.sampling.keyed import keyed_sample, signed_seed
from vllm_bass.worker.seeded import KeyedSampling, seeded_rows

pytestmark = pytest.mark.cpu

V = 50


def _metadata(temps, generators, top_k=None):
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    b = len(temps)
    return SamplingMetadata(
        temperature=torch.tensor(temps), all_greedy=False, all_random=True, top_p=None,
        top_k=top_k, generators=generators, max_num_logprobs=None, no_penalties=True,
        prompt_token_ids=None, frequency_penalties=torch.zeros(b),
        presence_penalties=torch.zeros(b), repetition_penalties=torch.ones(b),
        output_token_ids=[[] for _ in range(b)], allowed_token_ids_mask=None,
        bad_words_token_ids={}, logitsprocs=LogitsProcessors())


def _sample(sampler, logits, metadata, rng_seed):
    torch.manual_seed(rng_seed)
    return sampler(logits.clone(), metadata).sampled_token_ids.view(-1)


def test_without_seeded_rows_it_is_vllms_sampling():
    from vllm.v1.sample.sampler import Sampler

    logits = torch.randn(4, V, generator=torch.Generator().manual_seed(0))
    plain, hooked = Sampler(), Sampler()
    keyed = KeyedSampling(hooked)
    meta = _metadata([0.8] * 4, {})
    for rng in range(3):
        assert torch.equal(_sample(plain, logits, meta, rng), _sample(hooked, logits, meta, rng))
    # a step's seeded rows, but this call has no generators: vLLM's path too
    keyed.current = seeded_rows({1: torch.Generator().manual_seed(3)}, torch.tensor([5] * 4),
                                torch.device("cpu"))
    assert torch.equal(_sample(plain, logits, meta, 9), _sample(hooked, logits, meta, 9))
    with pytest.raises(RuntimeError):
        KeyedSampling(hooked)


@pytest.mark.parametrize("top_k", [None, 5])
def test_seeded_rows_sample_keyed(top_k):
    from vllm.v1.sample.sampler import Sampler

    logits = torch.randn(4, V, generator=torch.Generator().manual_seed(1))
    sampler = Sampler()
    keyed = KeyedSampling(sampler)
    temps = [0.8, 1.0, 0.7, 1.3]
    k = None if top_k is None else torch.tensor([top_k] * 4)
    outs = []
    for rng in range(6):
        gens = {3: torch.Generator().manual_seed(7), 1: torch.Generator().manual_seed(-2)}
        before = {i: g.get_state().clone() for i, g in gens.items()}
        keyed.current = seeded_rows(gens, torch.tensor([30, 41, 50, 62], dtype=torch.int32),
                                    torch.device("cpu"))
        outs.append(_sample(sampler, logits, _metadata(temps, gens, k), rng))
        assert all(not torch.equal(before[i], g.get_state()) for i, g in gens.items()), (
            "the request generators must advance as in vLLM's own sampling")
    processed = logits / torch.tensor(temps)[:, None]
    if top_k is not None:
        cut = processed.topk(top_k, dim=-1).values[:, -1:]
        processed = processed.masked_fill(processed < cut, float("-inf"))
    want = keyed_sample(processed[[1, 3]], torch.tensor([signed_seed(-2), 7]),
                        torch.tensor([41, 62]))
    for out in outs:
        assert out[[1, 3]].tolist() == want.tolist()
        if top_k is not None:
            assert all(bool(processed[i, out[i]] > float("-inf")) for i in range(4))
    assert len({tuple(o[[0, 2]].tolist()) for o in outs}) > 1, "unseeded rows stopped sampling"


def test_seeded_rows_of_a_step():
    assert seeded_rows({}, torch.zeros(3), torch.device("cpu")) is None
    gens = {3: torch.Generator().manual_seed(5), 1: torch.Generator().manual_seed(-2)}
    rows = seeded_rows(gens, torch.tensor([10, 11, 12, 13], dtype=torch.int32),
                       torch.device("cpu"))
    assert rows.rows == [1, 3] and rows.rows_device.tolist() == [1, 3]
    assert rows.seeds.tolist() == [-2, 5]
    assert rows.next_positions.tolist() == [11, 13]
    assert rows.next_positions.dtype == torch.int64
