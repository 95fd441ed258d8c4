"""The vectorised sampler equals the float64 reference draw for draw, and is distributionally
exact (chi-square, false-alarm rate 1e-4 per test)."""

import pytest
import torch
from scipy import stats

from tests.sampling.reference import reference_rejection_sample
from vllm_bass.sampling.rejection import SpeculationRandomness, draw_randomness, rejection_sample

pytestmark = pytest.mark.cpu


def _case(seed, vocab, counts, greedy_mask, with_q):
    g = torch.Generator().manual_seed(seed)
    t = sum(counts)
    logits = torch.randn(t, vocab, generator=g, dtype=torch.float64) * 2
    q = torch.softmax(torch.randn(t, vocab, generator=g, dtype=torch.float64) * 2, -1) if with_q else None
    if q is not None:
        draft = torch.multinomial(q, 1, generator=g).squeeze(1) if t else torch.zeros(0, dtype=torch.long)
    else:
        draft = torch.randint(0, vocab, (t,), generator=g)
    # make some draft tokens the argmax so greedy rows accept a few
    if t:
        hit = torch.rand(t, generator=g) < 0.5
        draft = torch.where(hit, logits.argmax(-1), draft)
    bonus = torch.randint(0, vocab, (len(counts),), generator=g)
    rnd = SpeculationRandomness(torch.rand(t, generator=g, dtype=torch.float64),
                                torch.empty(len(counts), vocab, dtype=torch.float64).exponential_(generator=g))
    return logits, q, draft, bonus, torch.tensor(greedy_mask), rnd


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("with_q", [True, False])
def test_matches_float64_reference(seed, with_q):
    g = torch.Generator().manual_seed(1000 + seed)
    batch = int(torch.randint(1, 9, (1,), generator=g))
    counts = [int(c) for c in torch.randint(0, 6, (batch,), generator=g)]
    greedy = [bool(x) for x in torch.rand(batch, generator=g) < 0.4]
    vocab = int(torch.randint(3, 50, (1,), generator=g))
    logits, q, draft, bonus, is_greedy, rnd = _case(seed, vocab, counts, greedy, with_q)
    got = rejection_sample(draft, counts, logits.float(), bonus, is_greedy,
                           None if q is None else q.float(), rnd)
    want = reference_rejection_sample(draft, counts, logits.float(), bonus, is_greedy,
                                      None if q is None else q.float(), rnd.uniforms,
                                      rnd.recovery_noise)
    assert torch.equal(got, want), (counts, greedy, got, want)


def test_empty_batch_and_all_zero_drafts_emit_bonus():
    bonus = torch.tensor([4, 7])
    out = rejection_sample(torch.zeros(0, dtype=torch.long), [0, 0], torch.zeros(0, 9), bonus,
                           torch.tensor([False, True]), None, draw_randomness([0, 0], 9, None, torch.device("cpu")))
    assert out.tolist() == [[4], [7]]


def test_greedy_accepts_exactly_the_argmax_prefix():
    logits = torch.full((3, 5), -5.0)
    logits[0, 1] = logits[1, 2] = logits[2, 3] = 5.0
    draft = torch.tensor([1, 2, 4])  # third disagrees
    out = rejection_sample(draft, [3], logits, torch.tensor([0]), torch.tensor([True]), None, None)
    assert out.tolist() == [[1, 2, 3, -1]]


def _chi2_pvalue(samples, probs):
    counts = torch.bincount(samples, minlength=probs.numel()).double()
    expected = probs * samples.numel()
    mask = expected > 0
    assert counts[~mask].sum() == 0, "sampled a zero-probability token"
    return stats.chisquare(counts[mask].numpy(), expected[mask].numpy()).pvalue


@pytest.mark.parametrize("with_q", [True, False])
def test_output_follows_target_distribution(with_q):
    """Many independent requests, 2 draft positions each, context-free target p1, p2: the
    first emitted token follows p1, the second (when the first was accepted) follows p2."""
    torch.manual_seed(20261122 + int(with_q))  # fixed draws: deterministic, 1e-4 alarm rate
    vocab, n = 6, 40000
    p1 = torch.tensor([0.30, 0.25, 0.2, 0.15, 0.1, 0.0], dtype=torch.float64)
    p2 = torch.tensor([0.05, 0.05, 0.1, 0.2, 0.3, 0.3], dtype=torch.float64)
    q1 = torch.tensor([0.1, 0.1, 0.1, 0.2, 0.2, 0.3], dtype=torch.float64)
    q2 = torch.tensor([0.4, 0.2, 0.1, 0.1, 0.1, 0.1], dtype=torch.float64)
    logits = torch.log(torch.stack([p1, p2]).clamp_min(1e-300)).float().repeat(n, 1)
    if with_q:
        d1, d2 = torch.multinomial(q1, n, True), torch.multinomial(q2, n, True)
        q = torch.stack([q1, q2]).float().repeat(n, 1)
    else:  # deterministic draft proposing token 0 then 4
        d1, d2 = torch.zeros(n, dtype=torch.long), torch.full((n,), 4)
        q = None
    draft = torch.stack([d1, d2], 1).reshape(-1)
    bonus = torch.multinomial(p1, n, True)  # unused position-3 stand-in
    counts = [2] * n
    rnd = draw_randomness(counts, vocab, None, torch.device("cpu"))
    out = rejection_sample(draft, counts, logits, bonus, torch.zeros(n, dtype=torch.bool), q, rnd)
    first = out[:, 0].long()
    assert _chi2_pvalue(first, p1) > 1e-4
    second_given_first_accepted = out[:, 1][first == d1].long()
    assert second_given_first_accepted.numel() > 2000
    assert _chi2_pvalue(second_given_first_accepted, p2) > 1e-4


def test_seeded_generators_reproduce_draws():
    counts = [2, 0, 3]
    gens = lambda: {0: torch.Generator().manual_seed(5), 2: torch.Generator().manual_seed(9)}
    a = draw_randomness(counts, 11, gens(), torch.device("cpu"))
    b = draw_randomness(counts, 11, gens(), torch.device("cpu"))
    assert torch.equal(a.uniforms[:2], b.uniforms[:2]) and torch.equal(a.uniforms[2:], b.uniforms[2:])
    assert torch.equal(a.recovery_noise[[0, 2]], b.recovery_noise[[0, 2]])


def test_greedy_batch_needs_no_recovery_noise():
    """A greedy batch (synthetic acceptance included) samples from the uniforms alone: the
    same output without the [batch, vocab] recovery noise; a random request still needs it."""
    counts, vocab = [3, 0, 2, 4], 11
    logits, _, draft, bonus, _, _ = _case(7, vocab, counts, [True] * 4, with_q=False)
    greedy = torch.ones(4, dtype=torch.bool)
    rates = torch.full((4, 8), 0.6, dtype=torch.float64)
    torch.manual_seed(3)
    full = draw_randomness(counts, vocab, None, torch.device("cpu"))
    lean = SpeculationRandomness(full.uniforms.clone(), None)
    assert draw_randomness(counts, vocab, None, torch.device("cpu"),
                           recovery=False).recovery_noise is None
    for rates_or_none in (rates, None):
        a = rejection_sample(draft, counts, logits, bonus, greedy, None, full,
                             synthetic_conditional_rates=rates_or_none, all_greedy=True)
        b = rejection_sample(draft, counts, logits, bonus, greedy, None, lean,
                             synthetic_conditional_rates=rates_or_none, all_greedy=True)
        assert torch.equal(a, b)
    with pytest.raises(AssertionError, match="recovery noise"):
        rejection_sample(draft, counts, logits, bonus, torch.tensor([True, False, True, True]),
                         None, lean, all_greedy=False)
    with pytest.raises(AssertionError, match="generators"):
        draw_randomness(counts, vocab, {0: torch.Generator()}, torch.device("cpu"),
                        recovery=False)
