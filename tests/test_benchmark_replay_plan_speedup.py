"""`replay_plan_speedup.py`: a trace replayed through the fit with and without the one-draft
premium (session 40), on a synthetic trace whose one-draft steps carry a premium."""

import gzip
import random

import pytest

from benchmarks.e2e import replay_plan_speedup

pytestmark = [pytest.mark.cpu]


def test_the_premium_fit_promises_longer_drafts_the_line_misprices(tmp_path):
    rng = random.Random(0)
    lines = []
    for i in range(240):  # batch 4: off 4.67 ms, K drafts 5.38 + 0.1 K, one draft 1.2 more
        k = (0, 1, 3, 2, 1, 4, 3, 0)[i % 8]
        ms = 4.67 + (0.71 + 0.1 * k if k else 0.0) + (1.2 if k == 1 else 0.0)
        lines.append(f"{i * 0.01:.3f},4,{k},{4 * k},{ms * rng.uniform(0.98, 1.02):.4f},0")
    trace = tmp_path / "t.csv.gz"
    with gzip.open(trace, "wt") as f:
        f.write("\n".join(lines) + "\n")
    steps = replay_plan_speedup.read_steps(trace)
    assert len(steps) == 240 and steps[1][:3] == (4, 1, 4)
    rows = replay_plan_speedup.replay(steps, {4}, alpha=0.4, every=60)
    assert [r["step"] for r in rows] == [60, 120, 180, 240]
    last = rows[-1]
    assert last["one_draft"]["one_draft"] > 0.2 and last["linear"]["one_draft"] == 0.0
    # measured: three drafts 5.68 ms for 1.624 tokens against 4.67 a token off: 1.34x
    assert last["one_draft"]["speedup"][3] == pytest.approx(1.34, abs=0.04)
    assert last["linear"]["speedup"][3] < last["one_draft"]["speedup"][3] - 0.04
