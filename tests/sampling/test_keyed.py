"""Position-keyed sampling (`vllm_bass.sampling.keyed`) and seeded verification: the noise is
a deterministic, well-spread Exp(1) / Gumbel function of (seed, position, token); keyed
samples follow the distribution and are independent across positions (chi-square, fixed
seeds, false-alarm rate 1e-4 per test); and a seeded request's speculative output is the
token-by-token keyed sequence whatever was drafted and however positions were grouped."""

import pytest
import torch
from scipy import stats

from vllm_bass.sampling.keyed import (
    keyed_draft_tokens,
    keyed_exponential,
    keyed_sample,
    keyed_uniform,
    signed_seed,
)
from vllm_bass.sampling.rejection import draw_randomness, rejection_sample

pytestmark = pytest.mark.cpu

ALPHA = 1e-4


def _t(values):
    return torch.tensor(values, dtype=torch.int64)


def test_noise_is_a_deterministic_function_of_seed_position_token():
    seeds, pos = _t([1, 1, 2, 1, signed_seed(2 ** 64 - 3)]), _t([5, 6, 5, 5, 5])
    a = keyed_uniform(seeds, pos, 1000)
    assert torch.equal(a, keyed_uniform(seeds, pos, 1000))
    assert torch.equal(a[0], a[3]), "same (seed, position): same noise"
    assert not torch.equal(a[0], a[1]) and not torch.equal(a[0], a[2])
    assert not torch.equal(a[0], a[4]) and not torch.equal(a[2], a[4])
    # a longer vocabulary extends a row without changing it
    assert torch.equal(keyed_uniform(seeds, pos, 1500)[:, :1000], a)
    for row in a:
        assert row.unique().numel() == 1000, "a row never ties two tokens"
    assert bool(((a > 0) & (a < 1)).all())
    # seeds that differ only in their high 32 bits get different noise
    assert not torch.equal(keyed_uniform(_t([7]), _t([0]), 64),
                           keyed_uniform(_t([7 + (1 << 32)]), _t([0]), 64))


def test_noise_is_exponential():
    e = keyed_exponential(torch.arange(200), torch.arange(200) * 7 + 3, 500).flatten()
    p = stats.kstest(e.numpy(), "expon").pvalue
    assert p > ALPHA, f"keyed noise is not Exp(1) (KS p={p:.2e})"


def test_noise_is_independent_across_positions_and_seeds():
    """Joint 10x10 histogram of u at (seed, t, v) and its neighbour (seed, t+1, v), and of
    seed s and s+1 at the same (t, v): independent uniforms fill it evenly."""
    n = 400
    for other_seeds, other_pos in ((torch.arange(n), torch.arange(n) + 1),
                                   (torch.arange(n) + 1, torch.arange(n))):
        u = keyed_uniform(torch.arange(n), torch.arange(n), 256).flatten()
        w = keyed_uniform(other_seeds, other_pos, 256).flatten()
        table = torch.zeros(10, 10)
        idx = (u * 10).long() * 10 + (w * 10).long()
        table.view(-1).index_add_(0, idx, torch.ones_like(idx, dtype=torch.float32))
        p = stats.chisquare(table.flatten().numpy()).pvalue
        assert p > ALPHA, f"neighbouring keys are correlated (p={p:.2e})"


def test_keyed_samples_follow_the_distribution_over_seeds():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, float("-inf")])
    n = 20000
    tokens = keyed_sample(logits.expand(n, -1), torch.arange(n) + 10 ** 6, _t([37] * n))
    assert int((tokens == 5).sum()) == 0, "a filtered token (-inf) was sampled"
    counts = torch.bincount(tokens, minlength=6)[:5].double()
    expected = torch.softmax(logits[:5].double(), -1) * n
    p = stats.chisquare(counts.numpy(), expected.numpy()).pvalue
    assert p > ALPHA, f"keyed samples do not follow softmax(logits) (p={p:.2e})"


def test_keyed_samples_are_independent_across_positions():
    logits = torch.tensor([1.0, 0.0, 0.5, -0.5])
    n = 20000
    seeds = torch.arange(n)
    first = keyed_sample(logits.expand(n, -1), seeds, _t([10] * n))
    second = keyed_sample(logits.expand(n, -1), seeds, _t([11] * n))
    table = torch.zeros(4, 4)
    table.view(-1).index_add_(0, first * 4 + second, torch.ones(n))
    p = stats.chi2_contingency(table.numpy())[1]
    assert p > ALPHA, f"one seed's samples at t and t+1 are dependent (p={p:.2e})"


def test_keyed_draft_tokens_positions():
    # 4 requests with 2, 0, 3, 1 drafts; rows 0, 2, 3 seeded, bonus positions 100, 200, 300
    k = keyed_draft_tokens([2, 0, 3, 1], [0, 2, 3], _t([7, 8, 9]), _t([100, 200, 300]))
    assert k.index.tolist() == [0, 1, 2, 3, 4, 5]
    assert k.seeds.tolist() == [7, 7, 8, 8, 8, 9]
    assert k.positions.tolist() == [98, 99, 197, 198, 199, 299]
    empty = keyed_draft_tokens([0, 3], [0], _t([7]), _t([50]))
    assert empty.index.numel() == 0


VOCAB = 12


def _target_logits(prefix: list[int]) -> torch.Tensor:
    """A deterministic 'model': logits as a function of the whole prefix."""
    g = torch.Generator().manual_seed(hash(tuple(prefix)) % (2 ** 31))
    return torch.randn(VOCAB, generator=g, dtype=torch.float64).float() * 1.5


def _keyed_decode(prompt, seed, steps):
    seq = list(prompt)
    for _ in range(steps):
        seq.append(int(keyed_sample(_target_logits(seq)[None], _t([seed]), _t([len(seq)]))))
    return seq[len(prompt):]


def _speculate(prompts, seeds, steps, gen, max_draft):
    """Speculative decoding of a batch through `rejection_sample` with random drafts of
    random lengths (a copy of the right token half of the time), the bonus token from the
    keyed sampler at the bonus position (what the engine's hooked Sampler does); rows with
    seed None sample unseeded."""
    seqs = [list(p) for p in prompts]
    made = [0] * len(prompts)
    rows = [i for i, s in enumerate(seeds) if s is not None]
    while min(made) < steps:
        counts = [int(torch.randint(0, max_draft + 1, (1,), generator=gen)) for _ in seqs]
        drafts, logits = [], []
        for i, seq in enumerate(seqs):
            ctx = list(seq)
            for _ in range(counts[i]):
                right = int(torch.randint(0, VOCAB, (1,), generator=gen))
                if seeds[i] is not None and torch.rand(1, generator=gen) < 0.5:
                    right = int(keyed_sample(_target_logits(ctx)[None], _t([seeds[i]]),
                                             _t([len(ctx)])))
                logits.append(_target_logits(ctx))
                drafts.append(right)
                ctx.append(right)
        bonus = []
        for i, seq in enumerate(seqs):
            ctx = seq + drafts[sum(counts[:i]):sum(counts[:i + 1])]
            bonus.append(int(torch.randint(0, VOCAB, (1,), generator=gen)) if seeds[i] is None
                         else int(keyed_sample(_target_logits(ctx)[None], _t([seeds[i]]),
                                               _t([len(ctx)]))))
        next_pos = _t([len(seqs[r]) + counts[r] for r in rows])
        keyed = keyed_draft_tokens(counts, rows, _t([seeds[r] for r in rows]), next_pos)
        out = rejection_sample(
            torch.tensor(drafts, dtype=torch.long), counts,
            torch.stack(logits) if logits else torch.zeros(0, VOCAB), torch.tensor(bonus),
            torch.zeros(len(seqs), dtype=torch.bool), None,
            draw_randomness(counts, VOCAB, None, torch.device("cpu")), keyed=keyed)
        for i, row in enumerate(out.tolist()):
            emitted = [t for t in row if t >= 0]
            seqs[i] += emitted
            made[i] += len(emitted)
    return [seq[len(p):][:steps] for seq, p in zip(seqs, prompts)]


@pytest.mark.parametrize("case", range(6))
def test_seeded_speculation_equals_token_by_token_keyed_decoding(case):
    """Whatever is drafted, with any grouping of positions into steps (draft lengths 0..6,
    1 = one position at a time), next to unseeded rows: each seeded row's output is the
    keyed sequence decoded one token at a time."""
    gen = torch.Generator().manual_seed(case)
    prompts = [[1, 2, 3], [4], [5, 6], [1, 2, 3], [7, 7, 7, 7]]
    seeds = [11, 12, None, 11, signed_seed(2 ** 63 + case)]
    want = [_keyed_decode(p, s, 20) if s is not None else None for p, s in zip(prompts, seeds)]
    got = _speculate(prompts, seeds, 20, gen, max_draft=(6 if case % 2 else 1))
    for i, (w, g) in enumerate(zip(want, got)):
        if w is not None:
            assert g == w, f"row {i}: speculative keyed output differs from keyed decoding"
    assert got[0] == got[3], "same seed and prompt, different outputs"


def test_keyed_rows_leave_the_other_rows_alone():
    """Unseeded and greedy rows give exactly what they give without any keyed row."""
    g = torch.Generator().manual_seed(5)
    counts = [3, 2, 4, 1]
    t = sum(counts)
    logits = torch.randn(t, 9, generator=g)
    draft = torch.randint(0, 9, (t,), generator=g)
    bonus = torch.tensor([1, 2, 3, 4])
    greedy = torch.tensor([False, True, False, False])
    rnd = draw_randomness(counts, 9, None, torch.device("cpu"))
    plain = rejection_sample(draft, counts, logits, bonus, greedy, None, rnd)
    keyed = keyed_draft_tokens(counts, [2], _t([3]), _t([40]))
    mixed = rejection_sample(draft, counts, logits, bonus, greedy, None, rnd, keyed=keyed)
    assert torch.equal(mixed[[0, 1, 3]], plain[[0, 1, 3]])
    # row 2: emitted tokens are the keyed samples at positions 36..39, then the bonus
    sample = keyed_sample(logits[5:9], _t([3] * 4), _t([36, 37, 38, 39]))
    row = [x for x in mixed[2].tolist() if x >= 0]
    n = len(row) - 1
    assert row[:n] == draft[5:5 + n].tolist() == sample[:n].tolist()
    assert row[n] == (int(sample[n]) if n < 4 else 4)
