"""benchmarks/e2e/sim_closed_batch.py: plain decoding's makespan comes from the same
simulated device and scheduler as BASS's, so its prefill and its contexts' growth count
(session 38 found the old baseline, decode steps at the prompt's context only, flattering
BASS at long prompts)."""

import pytest

from benchmarks.e2e import sim_closed_batch as scb

pytestmark = [pytest.mark.cpu]


@pytest.fixture
def law():
    """The module, its switches (lists) restored after the test."""
    saved = {name: list(getattr(scb, name)) for name in scb.LAW_SWITCHES}
    yield scb
    for name, value in saved.items():
        getattr(scb, name)[:] = value


def test_plain_decoding_is_simulated_with_its_prefill_and_growing_contexts(law):
    law.JITTER[0], law.CONTEXT_LAW[0] = 0.0, True
    batch, prompt, tokens = 4, 256, 32
    law.MAX_MODEL_LEN[0] = 512
    sched = law.system_scheduler("plain", batch)
    run = law.run_batch(sched, [0.0] * batch, tokens, seed=0, prompt_len=prompt)
    # one step a token (the first one the prefill's), no drafts ever
    assert run["verified"] == 0
    assert tokens <= run["steps"] <= tokens + 2
    decode_only = tokens * law.h100_step_ms(batch, 0, 0, 0, batch * prompt)
    prefill = law.PREFILL_TOKEN_MS * batch * (prompt - 1)
    # the prefill and the contexts' growth (each decode step reads one more token a request)
    growth = law.KV_MS_PER_CACHED_TOKEN * batch * tokens * (tokens - 1) / 2
    assert run["ms"] == pytest.approx(decode_only + prefill + growth, rel=0.05)
    assert law.plain_makespan_ms(batch, tokens, prompt) == pytest.approx(run["ms"])


def test_a_useless_draft_leaves_bass_near_plain_decoding_at_long_prompts(law):
    """Acceptance 0: auto-off keeps BASS within a few percent of plain decoding on the same
    simulated device (probes cost a little: 0.98x); the old baseline, which left out the
    prefill and the contexts' growth, put it 9% behind here."""
    law.JITTER[0], law.CONTEXT_LAW[0] = 0.0, True
    batch, prompt, tokens = 4, 256, 64
    law.MAX_MODEL_LEN[0] = 512
    plain = law.plain_makespan_ms(batch, tokens, prompt)
    bass = law.run_batch(law.system_scheduler("bass", batch), [0.0] * batch, tokens, seed=0,
                         prompt_len=prompt)["ms"]
    assert 0.95 <= plain / bass <= 1.0
    old_baseline = tokens * law.h100_step_ms(batch, 0, 0)
    assert old_baseline / bass < 0.93


def test_a_dearer_draft_scales_only_the_drafts_terms(law):
    law.CONTEXT_LAW[0] = False
    plain = law.h100_step_ms(8, 0, 0)
    drafting = law.h100_step_ms(8, 3, 24)
    law.DRAFT_COST_SCALE[0] = 2.0
    assert law.h100_step_ms(8, 0, 0) == plain
    verify = 0.0072 * 24
    assert law.h100_step_ms(8, 3, 24) - plain - verify == pytest.approx(
        2 * (drafting - plain - verify))


def test_a_host_floor_bills_short_drafts_as_the_floors_length(law):
    """--host-floor-drafts N: a drafting step lasts at least as long as N draft steps (a
    host-bound device: session 41's H200 batch-16 steps of 1-3 drafts all ~6.6-6.8 ms); off
    steps, the verified tokens' price and longer drafts are the law's."""
    law.CONTEXT_LAW[0], law.KNEE_LAW[0] = True, False
    cached = 8 * 300
    plain, three = law.h100_step_ms(8, 0, 0, 0, cached), law.h100_step_ms(8, 3, 8, 0, cached)
    five = law.h100_step_ms(8, 5, 8, 0, cached)
    law.HOST_FLOOR_DRAFTS[0] = 3
    assert law.h100_step_ms(8, 0, 0, 0, cached) == plain
    assert law.h100_step_ms(8, 1, 8, 0, cached) == pytest.approx(three)
    assert law.h100_step_ms(8, 2, 8, 0, cached) == pytest.approx(three)
    assert law.h100_step_ms(8, 3, 8, 0, cached) == pytest.approx(three)
    assert law.h100_step_ms(8, 5, 8, 0, cached) == pytest.approx(five)
    assert law.h100_step_ms(8, 1, 16, 0, cached) - law.h100_step_ms(8, 1, 8, 0, cached) == (
        pytest.approx(0.0072 * 8))


def test_a_warm_up_slows_an_engines_first_steps_only(law):
    """`WARMUP`: the first N steps of a scheduler's life take up to 1 + F times the law,
    over batches (an engine warms up once); plain decoding's baseline is warmed up as the
    variants are, so its timed batch runs on the law."""
    law.JITTER[0] = 0.0
    law.MAX_MODEL_LEN[0] = 512
    batch, tokens = 4, 32
    cold = law.plain_makespan_ms(batch, tokens, 8)
    law.WARMUP[:] = [20, 1.0]
    sched = law.system_scheduler("plain", batch)
    first = law.run_batch(sched, [0.0] * batch, tokens, seed=0)["ms"]
    second = law.run_batch(sched, [0.0] * batch, tokens, seed=0)["ms"]
    assert first > 1.3 * second
    assert second == pytest.approx(cold)
    assert law.plain_makespan_ms(batch, tokens, 8) == pytest.approx(cold)


def test_the_h200_law_reproduces_session_49s_step_medians(law):
    """`--h200-law` stands for session 49's call-1 trace (the mix, 4x1024, BASS on our
    attention): step medians by batch and longest draft, with the verified tokens of those
    steps. The law must land within 12% of each (its fit's median residual is 0.9 ms), and
    one draft at batch 128 must cost it what it cost the engine, ~1.6x an off-step: the
    closed objective's off (closed_batch_off_margin) was simulated on it."""
    law.H200_LAW[0] = True
    measured = {  # (batch, longest draft, mean verified tokens): median ms of the trace
        (64, 0, 22): 6.51, (64, 1, 69): 9.17, (64, 2, 116): 10.25, (128, 0, 4): 8.25,
        (128, 1, 126): 13.37, (128, 2, 209): 16.22, (256, 0, 6): 14.01, (256, 1, 240): 21.97,
        (256, 2, 443): 24.49, (32, 2, 67): 7.65}
    for (batch, drafts, verified), ms in measured.items():
        assert law.h100_step_ms(batch, drafts, verified) == pytest.approx(ms, rel=0.12), (
            batch, drafts)
    ratio = law.h100_step_ms(128, 1, 128) / law.h100_step_ms(128, 0, 0)
    assert 1.45 <= ratio <= 1.75
    law.H200_LAW[0] = False
    assert law.h100_step_ms(128, 0, 0) == pytest.approx(5.68 + 0.049 * 128)


def test_the_session53_h200_law_reproduces_its_step_medians(law):
    """`--h200-law-s53` stands for sessions 52-53's step traces (nine engines, the mix and
    alpha 0.8, batch 1-256): step medians by batch and draft length (one verified token a
    request a draft). Within 8% of each (the fit's median residual is 0.31 ms); a plain
    step grows faster than linearly with the batch, as its off-steps did, and one draft at
    batch 64 costs ~1.2x an off-step (session 52's 1.06-1.16x; session 49's law: 1.4x)."""
    law.H200_S53_LAW[0] = True
    measured = {  # (batch, draft length): median ms of the traces' steps
        (8, 0): 4.52, (8, 1): 5.05, (8, 8): 6.24, (16, 1): 5.23, (16, 2): 5.75,
        (32, 0): 5.15, (32, 1): 5.78, (32, 2): 6.49, (64, 0): 5.94, (64, 1): 6.96,
        (64, 2): 8.02, (64, 3): 8.94, (128, 0): 8.32, (128, 1): 10.23, (256, 0): 13.73,
        (256, 1): 19.11, (256, 3): 30.20}
    for (batch, drafts), ms in measured.items():
        assert law.h100_step_ms(batch, drafts, batch * drafts) == pytest.approx(
            ms, rel=0.08), (batch, drafts)
    growth = [law.h100_step_ms(b, 0, 0) for b in (32, 64, 128, 256)]
    assert growth[3] - growth[2] > 2 * (growth[2] - growth[1]) > 2 * (growth[1] - growth[0])
    assert 1.1 <= law.h100_step_ms(64, 1, 64) / law.h100_step_ms(64, 0, 0) <= 1.3
    assert law.h100_step_ms(100, 1, 100) > law.h100_step_ms(64, 1, 64)  # between the table
    law.H200_S53_LAW[0] = False
    assert law.h100_step_ms(128, 0, 0) == pytest.approx(5.68 + 0.049 * 128)
