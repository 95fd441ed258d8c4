"""The BASS scheduler owns the draft-length plan, in sync and in async scheduling.

Driven here without a model: a real VllmConfig from the embedded pair, vLLM's own KV cache
manager, and a fake runner that answers each step with chosen accepted counts. The async
variant cannot run in the CPU engine (vLLM forces sync scheduling on CPU), so this is where
its placeholder bookkeeping is checked on CPU; the GPU engine tests run it for real.
"""

import pytest

from tests.harness import DRAFT, TARGET

pytestmark = [pytest.mark.cpu, pytest.mark.gpu]


def _scheduler(async_scheduling: bool, max_model_len: int = 512, measured_costs: bool = False,
               max_num_seqs: int = 8, **spec):
    import torch
    from vllm.engine.arg_utils import EngineArgs
    from vllm.sampling_params import SamplingParams  # noqa: F401
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig,
                                            KVCacheGroupSpec)
    from vllm.v1.structured_output import StructuredOutputManager

    from vllm_bass.scheduler import BassScheduler

    args = EngineArgs(model=TARGET, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                      dtype="float32",
                      enable_prefix_caching=False,
                      speculative_config={"method": "bass", "model": DRAFT, **spec})
    config = args.create_engine_config()
    config.scheduler_config.async_scheduling = async_scheduling
    block = 16
    blocks = max_num_seqs * (max_model_len // block + 4)
    config.cache_config.num_gpu_blocks = blocks  # what the engine sets after profiling
    kv = KVCacheConfig(num_blocks=blocks, kv_cache_tensors=[], kv_cache_groups=[
        KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=block, num_kv_heads=1,
                                                      head_size=8, dtype=torch.float32))])
    sched = BassScheduler(vllm_config=config, kv_cache_config=kv,
                          structured_output_manager=StructuredOutputManager(config),
                          block_size=block, log_stats=True)
    assert isinstance(sched, BassScheduler)
    if not measured_costs:
        # the step cost model keeps its prior: this test's step times are not a GPU's
        sched.bass_costs.observe = lambda *args: None
    assert isinstance(sched, AsyncScheduler) == async_scheduling
    return sched


def _add(sched, rid: str, prompt_len: int = 8, max_tokens: int = 200):
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    sched.add_request(Request(rid, list(range(1, prompt_len + 1)),
                              SamplingParams(max_tokens=max_tokens, ignore_eos=True), None))


def _output(out, accepted: dict[str, int]):
    """What a runner returns for `out`: per request 1 + accepted tokens (capped)."""
    from vllm.v1.outputs import ModelRunnerOutput

    ids = list(out.num_scheduled_tokens)
    sampled = []
    for rid in ids:
        n_draft = len(out.scheduled_spec_decode_tokens.get(rid, ()))
        sampled.append([7] * (1 + min(accepted.get(rid, 0), n_draft)))
    return ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                             sampled_token_ids=sampled)


def _drafts(sched, out):
    from vllm.v1.outputs import DraftTokenIds

    ids = list(out.num_scheduled_tokens)
    return DraftTokenIds(ids, [[5] * out.num_spec_tokens_to_schedule for _ in ids])


def _drive(sched, steps: int, execute, after_step=None):
    """Drive `steps` engine steps the way vLLM's engine core orders the calls: sync =
    schedule, update, drafts; async = one step in flight (schedule t+1 before update t).
    `execute(out)` is the runner (returns its ModelRunnerOutput). Returns
    [(scheduler output, drafts verified per request)]."""
    log, pending = [], []
    for _ in range(steps):
        out = sched.schedule()
        log.append((out, {r: len(s) for r, s in out.scheduled_spec_decode_tokens.items()}))
        pending.append(out)
        if sched.bass_async and len(pending) < 2:
            continue
        done = pending.pop(0)
        sched.update_from_output(done, execute(done))
        if not sched.bass_async:
            sched.update_draft_token_ids(_drafts(sched, done))
        if after_step is not None:
            after_step()
    return log


def _run(sched, steps: int, accepted: dict[str, int]):
    """`_drive` with a runner that accepts `accepted[req]` drafts of each request."""
    return _drive(sched, steps, lambda out: _output(out, accepted))


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_algorithm1_plan_reaches_the_drafter_and_the_verification(async_scheduling):
    """Every sequence accepts its whole draft: Algorithm 1 grows 7, 9, 11, ...; each step
    tells the drafter the current length, and the next step verifies exactly that many."""
    sched = _scheduler(async_scheduling, draft_length_policy="bass", auto_off=False)
    for r in ("a", "b"):
        _add(sched, r)
    log = _run(sched, 8, accepted={"a": 99, "b": 99})
    lengths = [out.num_spec_tokens_to_schedule for out, _ in log]
    assert lengths[0] == 7 and lengths[-1] > 7 and lengths == sorted(lengths), lengths
    assert all(b - a in (0, 2) for a, b in zip(lengths, lengths[1:])), lengths
    for (prev, _), (_, verified) in zip(log, log[1:]):
        if verified:
            assert set(verified.values()) == {prev.num_spec_tokens_to_schedule}, verified


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_per_request_lengths_are_ragged_in_the_verification(async_scheduling):
    """per_request: a sequence that always accepts drafts long, one that never accepts drafts
    short (or not at all); the verification batch carries both lengths at once."""
    from vllm_bass.policy.cost_model import StepCostModel

    sched = _scheduler(async_scheduling, draft_length_policy="per_request",
                       num_speculative_tokens=8, max_num_seqs=2)
    # a verified token costs 5% of a plain step (a GPU-bound step): drafting for the
    # sequence that never accepts would cost more than any uniform_plan_margin
    sched.bass_costs.model_for = lambda batch: StepCostModel(1.0, 0.12, 0.05, 0.05)
    # a third request waits: the batch is open, so every token counts (a closed one would
    # plan for its end, which "bad" sets whatever "good" drafts)
    for r in ("good", "bad", "queued"):
        _add(sched, r)
    log = _run(sched, 30, accepted={"good": 99, "bad": 0})
    # (a request planned no draft drafts one token now and then, which re-measures it; one
    # alone in the batch after the other finished is auto-off's probe)
    late = [v for _, v in log[-10:] if "good" in v]
    assert late, "no verification in the last steps"
    assert all(v["good"] > v.get("bad", 0) for v in late), late
    assert max(v["good"] for v in late) >= 4, late


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_auto_off_schedules_no_drafts_and_probes(async_scheduling):
    """Nothing is ever accepted: auto-off turns the batch off (0 drafts scheduled, drafter
    told 0) and probes with one token now and then."""
    sched = _scheduler(async_scheduling, draft_length_policy="bass")
    for r in ("a", "b", "c"):
        _add(sched, r)
    log = _run(sched, 80, accepted={})
    lengths = [out.num_spec_tokens_to_schedule for out, _ in log]
    assert lengths[-40:].count(0) >= 35, lengths
    assert 1 in lengths[10:], f"no probe: {lengths}"
    # a step never verifies drafts that its predecessor did not plan
    for (prev, _), (_, verified) in zip(log, log[1:]):
        assert max(verified.values(), default=0) <= prev.num_spec_tokens_to_schedule


def test_policy_forgets_finished_requests():
    sched = _scheduler(False, draft_length_policy="per_request")
    _add(sched, "short", max_tokens=3)
    _add(sched, "long")
    _run(sched, 12, accepted={"short": 99, "long": 99})
    assert "short" not in sched.bass_policy.estimates.successes
    assert "long" in sched.bass_policy.estimates.successes


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_plain_step_measurements_are_real_off_steps(async_scheduling, monkeypatch):
    """While plain decoding is unmeasured, auto-off takes measuring off-steps among paying
    drafting steps, one at a time, and they are timed as steps without a draft pass: under
    async scheduling too, where the first off-step verifies the last drafts (it ran a
    one-token draft pass until session 43, and two were taken in a row). (Every plan here
    counts as marginal: with all drafts accepted it is far ahead of plain decoding, where no
    measurement is taken.)"""
    from vllm_bass.policy import auto_off

    monkeypatch.setattr(auto_off, "CONFIDENT_SPEEDUP", float("inf"))
    sched = _scheduler(async_scheduling, draft_length_policy="fixed", num_speculative_tokens=4)
    timed = []
    sched.bass_costs.observe = lambda batch, draft_steps, verify, seconds, other=0: timed.append(
        (draft_steps, verify))
    for r in ("a", "b"):
        _add(sched, r)
    log = _run(sched, 40, accepted={"a": 99, "b": 99})
    lengths = [out.num_spec_tokens_to_schedule for out, _ in log]
    runs = [len(run) for run in "".join("0" if n == 0 else "x" for n in lengths[2:]).split("x")
            if run]
    assert runs and set(runs) == {1}, lengths
    if async_scheduling:
        assert (0, 8) in timed, timed  # the off-step that verified the last drafts
        assert (1, 8) not in timed, timed  # ... timed without a draft pass
    assert any(steps == 0 for steps, _ in timed), timed


def test_an_async_off_step_beside_a_prefill_is_timed_with_its_draft_pass():
    """The runner skips the draft pass of an off-step that verified drafts only in pure
    decoding; beside a prefill chunk it still runs a one-token pass, timed as one."""
    sched = _scheduler(True, draft_length_policy="fixed", num_speculative_tokens=4)
    assert sched.bass_draft_steps_run(0, 8, 0) == 0
    assert sched.bass_draft_steps_run(0, 8, 100) == 1
    assert sched.bass_draft_steps_run(0, 0, 100) == 0
    assert sched.bass_draft_steps_run(3, 8, 100) == 3
    sync = _scheduler(False, draft_length_policy="fixed", num_speculative_tokens=4)
    assert sync.bass_draft_steps_run(0, 8, 100) == 0


# Closed loop: the scheduler's cost model, the policies and auto-off against a simulated
# device whose step time follows a known cost law (relative to a plain step = 1) and whose
# drafts are accepted geometrically with rate alpha. Measured as the engine measures:
# the virtual clock advances by each step's cost before its output is processed.
HOST_BOUND_PAIR = dict(base=1.0, draft_pass=0.5, per_draft_step=0.5, per_verify_token=0.01)
SEVEN_B_PAIR = dict(base=1.0, draft_pass=0.05, per_draft_step=0.04, per_verify_token=0.002)
# the 7B-shape dummy pair as measured on the H100 (session-4 traces, batch 1: off-step 8 ms,
# host-bound draft steps ~2.2 ms, first pass ~1.6 ms): drafting pays above alpha ~0.7
SEVEN_B_MEASURED = dict(base=1.0, draft_pass=0.2, per_draft_step=0.27, per_verify_token=0.005)


def _simulate(sched, cost: dict, alpha: float, steps: int, batch: int = 4, seed: int = 0,
              max_tokens: int = 400, stall: float = 0.0, stall_repeats: int = 1,
              jitter: float = 0.0):
    """Tokens per unit of virtual time, BASS over plain decoding (plain: `batch` tokens
    per `base`); finished requests (`max_tokens` each) are replaced at once. `stall`: the
    first `stall_repeats` steps drafting each length take that much longer (a compile),
    time the rate leaves out: it measures the decisions taken after the stalls. `jitter`:
    each step's time is scaled by a uniform factor in 1 +- jitter (async scheduling's
    step timings scatter so on the H100)."""
    import random

    import vllm_bass.scheduler as module

    rng = random.Random(seed)
    clock = [0.0]
    real_time = module.time
    module.time = type("VirtualTime", (), {"perf_counter": staticmethod(lambda: clock[0])})
    emitted, next_id, stall_time = [0], [0], [0.0]
    stalls_of_length = {}

    def add():
        _add(sched, f"r{next_id[0]}", max_tokens=max_tokens)
        next_id[0] += 1

    def execute(out):
        """The runner's step: accepted counts, emitted tokens, the step's cost."""
        accepted, verify = {}, 0
        for rid, drafts in out.scheduled_spec_decode_tokens.items():
            n = 0
            while n < len(drafts) and rng.random() < alpha:
                n += 1
            accepted[rid] = n
            verify += len(drafts)
        result = _output(out, accepted)
        emitted[0] += sum(len(t) for t in result.sampled_token_ids)
        drafted = sched.bass_draft_steps_run(out.num_spec_tokens_to_schedule, verify)
        clock[0] += (cost["base"] + cost["per_verify_token"] * verify
                     + (cost["draft_pass"] + cost["per_draft_step"] * drafted
                        if drafted else 0.0)) * rng.uniform(1 - jitter, 1 + jitter)
        if stall and drafted and stalls_of_length.get(drafted, 0) < stall_repeats:
            stalls_of_length[drafted] = stalls_of_length.get(drafted, 0) + 1
            clock[0] += stall
            stall_time[0] += stall
        return result

    def keep_batch_full():
        for _ in range(batch - len(sched.running) - len(sched.waiting)):
            add()

    try:
        keep_batch_full()
        _drive(sched, steps, execute, keep_batch_full)
    finally:
        module.time = real_time
    return (emitted[0] / (clock[0] - stall_time[0])) / (batch / cost["base"])


@pytest.mark.parametrize("async_scheduling", [False, True])
@pytest.mark.parametrize("policy", ["bass", "per_request", "fixed"])
def test_auto_off_keeps_speculation_from_losing_on_a_host_bound_pair(policy, async_scheduling):
    """Draft steps cost half a plain step and drafts are accepted at 0.5: speculation cannot
    pay (about 0.6x at best); the measured cost law and auto-off must bring the batch close
    to plain decoding (off-steps, rare probes and plain-step measurements cost a little)."""
    sched = _scheduler(async_scheduling, max_model_len=2048, measured_costs=True,
                       draft_length_policy=policy, num_speculative_tokens=8)
    speedup = _simulate(sched, HOST_BOUND_PAIR, alpha=0.5, steps=600)
    assert speedup >= 0.9, f"{policy}: {speedup:.2f}x plain decoding"


@pytest.mark.parametrize("async_scheduling", [False, True])
@pytest.mark.parametrize("policy", ["bass", "per_request", "fixed"])
def test_speculation_stays_on_where_it_pays(policy, async_scheduling):
    """A 7B-like pair: draft steps cost 4% of a plain step, acceptance 0.8 (about 2.5x
    possible); auto-off must leave speculation on."""
    sched = _scheduler(async_scheduling, max_model_len=2048, measured_costs=True,
                       draft_length_policy=policy, num_speculative_tokens=8)
    speedup = _simulate(sched, SEVEN_B_PAIR, alpha=0.8, steps=400)
    assert speedup >= 1.8, f"{policy}: {speedup:.2f}x plain decoding"


@pytest.mark.parametrize("policy", ["bass", "per_request"])
@pytest.mark.parametrize("stall_repeats, jitter", [(1, 0.0), (2, 0.3)])
def test_compile_stalls_do_not_switch_speculation_off(policy, stall_repeats, jitter):
    """The 7B-shape pair's measured costs, 128-token requests, batch 1, and a compile stall
    of 100 plain steps the first time (the first two times, as session 7's H100 trace
    showed, with async scheduling's scattered step times) each draft length runs: the
    decisions afterwards must be as good as without stalls (within 3%)."""
    rates = []
    for stall in (0.0, 100.0):
        sched = _scheduler(False, max_model_len=2048, measured_costs=True,
                           draft_length_policy=policy, num_speculative_tokens=7)
        rates.append(_simulate(sched, SEVEN_B_MEASURED, alpha=0.8, steps=400, batch=1,
                               max_tokens=128, stall=stall, stall_repeats=stall_repeats,
                               jitter=jitter))
    assert rates[0] >= 1.25, f"{policy}: {rates[0]:.2f}x plain decoding without stalls"
    assert rates[1] >= 0.97 * rates[0], (
        f"{policy}: {rates[1]:.2f}x with stalls, {rates[0]:.2f}x without")


@pytest.mark.parametrize("async_scheduling", [False, True])
@pytest.mark.parametrize("policy", ["per_request", "bass"])
def test_verification_stays_within_the_cuda_graph_token_budget(async_scheduling, policy):
    """With CUDA graphs (budget = vLLM's largest capture size) no verification step holds
    more tokens than the budget, whatever the policy asks; the drafter is told the cut
    length and every request verifies at most what it was given."""
    from vllm_bass.scheduler import verification_token_budget

    sched = _scheduler(async_scheduling, draft_length_policy=policy, num_speculative_tokens=16,
                       max_model_len=2048)
    assert verification_token_budget(sched.vllm_config) is None  # the CPU: no graphs
    sched.bass_token_budget = 30
    if hasattr(sched.bass_policy, "token_budget"):
        sched.bass_policy.token_budget = 30
    for r in "abcd":
        _add(sched, r, max_tokens=400)
    log = _run(sched, 30, accepted={r: 99 for r in "abcd"})
    decode = [(out, verified) for out, verified in log[3:]]
    assert decode
    assert any(out.num_spec_tokens_to_schedule > 0 for out, _ in decode)
    for out, verified in decode:
        assert sum(verified.values()) + len(out.num_scheduled_tokens) <= 30, verified
    # without the cut these plans verify 4 x (1 + 7..16) tokens
    sched.bass_token_budget = None
    if hasattr(sched.bass_policy, "token_budget"):
        sched.bass_policy.token_budget = None
    log = _run(sched, 10, accepted={r: 99 for r in "abcd"})
    assert any(sum(v.values()) + len(out.num_scheduled_tokens) > 30 for out, v in log)


@pytest.mark.parametrize("async_scheduling", [False, True])
@pytest.mark.parametrize("policy", ["per_request", "bass"])
def test_per_request_state_stays_bounded_over_many_requests(async_scheduling, policy):
    """A long-running server: 300 short requests through one scheduler (4 live at a time);
    afterwards the scheduler's and the policy's per-request state holds only live requests,
    and the cost model's buffers stay within their fixed bounds."""
    from vllm_bass.policy.cost_model import WINDOW

    sched = _scheduler(async_scheduling, draft_length_policy=policy, measured_costs=True,
                       num_speculative_tokens=8)
    added = [0]

    def top_up():
        while len(sched.requests) < 4 and added[0] < 300:
            _add(sched, f"r{added[0]}", max_tokens=6)
            added[0] += 1

    top_up()
    _drive(sched, 1500, lambda out: _output(out, {r: 2 for r in out.num_scheduled_tokens}),
           after_step=top_up)
    assert added[0] == 300
    live = set(sched.requests)
    assert len(live) <= 4
    policy_obj = sched.bass_policy
    estimates = getattr(policy_obj, "estimates", None)
    assert estimates is not None
    assert set(estimates.successes) <= live and set(estimates.failures) <= live
    assert set(getattr(policy_obj, "_undrafted", {})) <= live
    assert len(sched._bass_known_reqs) <= 4
    history = getattr(getattr(policy_obj, "inner", policy_obj), "history", None)
    if history is not None:
        assert len(history) <= history.maxlen
    assert len(sched.bass_costs.fits) <= 4  # batch buckets 1, 2, 4 (and 8)
    assert all(len(f.steps) <= WINDOW for f in sched.bass_costs.fits.values())


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_closed_batch_plans_only_when_the_batch_cannot_be_refilled(async_scheduling):
    """per_request plans for the batch's finish (`closed_batch_cap`, from the tokens each
    request has left) only while nothing waits: a closed batch is done with its slowest
    request, but with requests queued one that finishes early admits the next (in an
    open-loop simulation at batch 256, session 18's remaining-token weights left 15% of the
    requests undrafted and cost 1-1.5% of the token rate)."""
    sched = _scheduler(async_scheduling, draft_length_policy="per_request", max_num_seqs=2)
    for rid, tokens in (("a", 50), ("b", 10), ("c", 10)):
        _add(sched, rid, max_tokens=tokens)
    accepted = {r: 1 for r in "abc"}
    _run(sched, 3, accepted)
    assert len(sched.waiting) == 1 and sched.bass_policy.remaining is None
    from vllm.v1.request import RequestStatus

    sched.finish_requests("c", RequestStatus.FINISHED_ABORTED)  # nothing waits any more
    _run(sched, 2, accepted)
    remaining = sched.bass_policy.remaining
    assert set(remaining) == {"a", "b"} and remaining["a"] > remaining["b"] > 0
    assert 0.0 <= sched.bass_policy.per_request_share < 1.0


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_a_stream_of_arrivals_is_not_a_closed_batch(async_scheduling, monkeypatch):
    """With an empty queue a batch is closed only if its requests came in one wave: one that
    joins running requests later means a server's continuous batching, where the next
    arrival takes a finished request's place, and the plan counts every token alike (a
    closed-batch plan drafted 1.3 tokens a request there, H100, session 25). The stream is
    remembered for STREAM_MEMORY_STEPS steps after its last join."""
    import vllm_bass.scheduler as module

    monkeypatch.setattr(module, "STREAM_MEMORY_STEPS", 12)
    sched = _scheduler(async_scheduling, draft_length_policy="per_request", max_num_seqs=8)
    policy = sched.bass_policy
    for rid in ("a", "b"):  # one wave into an idle engine: closed
        _add(sched, rid, max_tokens=400)
    accepted = {r: 1 for r in "abcd"}
    _run(sched, 3, accepted)
    assert sched.is_closed_batch() and set(policy.remaining) == {"a", "b"}
    _run(sched, module.CLOSED_WAVE_STEPS, accepted)
    _add(sched, "c", max_tokens=400)  # joins the running requests: a stream
    _run(sched, 3, accepted)
    assert not sched.waiting and not sched.is_closed_batch() and policy.remaining is None
    _run(sched, 8, accepted)
    assert policy.remaining is None  # still within the stream's memory
    _run(sched, 8, accepted)
    assert sched.is_closed_batch() and set(policy.remaining) == {"a", "b", "c"}


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_steps_with_prefills_are_timed_with_their_prefill_tokens(async_scheduling):
    """Every step is timed for the cost model, a prefill's tokens as a term of their own
    (a server's steps mostly carry one); not the first step after the engine was idle,
    whose period holds the idle time."""
    sched = _scheduler(async_scheduling, draft_length_policy="fixed", num_speculative_tokens=2,
                       auto_off=False)
    timed = []
    sched.bass_costs.observe = (lambda batch, draft_steps, verify, seconds, other=0:
                                timed.append((batch, verify, other)))
    _add(sched, "a", prompt_len=8, max_tokens=400)
    _run(sched, 6, {"a": 0, "b": 0})
    first = len(timed)
    assert first >= 3 and all(other == 0 for _, _, other in timed), timed  # pure decode
    _add(sched, "b", prompt_len=40, max_tokens=400)  # b's prefill rides in a decode step
    _run(sched, 4, {"a": 0, "b": 0})
    assert (2, 2, 39) in timed[first:], timed  # a's token + 2 drafts, b's 40 prompt tokens


def test_draft_step_cost_floor_from_the_two_models_sizes():
    """A draft step costs at least the draft's share of the weights and KV a plain step
    reads (the smaller share, halved): 4x1024 against the 7B shape ~0.0063 of a plain
    step (weights 1.3%, KV 3.1%); an MoE draft, or none, gives no floor."""
    from types import SimpleNamespace

    from vllm_bass.scheduler import draft_step_cost_floor

    def model(layers, width, heads, inter, quantization=None, **extra):
        hf = SimpleNamespace(hidden_size=width, num_hidden_layers=layers,
                             num_attention_heads=heads, num_key_value_heads=heads,
                             intermediate_size=inter, vocab_size=32000, **extra)
        return SimpleNamespace(hf_text_config=hf, quantization=quantization)

    def config(draft):
        return SimpleNamespace(model_config=model(32, 4096, 32, 11008),
                               speculative_config=SimpleNamespace(draft_model_config=draft))

    def params(layers, width, inter):
        return layers * (4 * width * width + 3 * width * inter) + 32000 * width

    floor = draft_step_cost_floor(config(model(4, 1024, 16, 2816)))
    weights = params(4, 1024, 2816) / params(32, 4096, 11008)
    assert weights < (4 * 1024) / (32 * 4096)  # the weights' share is the smaller here
    assert floor == pytest.approx(0.5 * weights)
    assert 0.005 < floor < 0.008
    # a draft as wide as the target but with one KV head in eight: its KV share bounds
    gqa = model(4, 4096, 32, 11008)
    gqa.hf_text_config.num_key_value_heads = 4
    assert draft_step_cost_floor(config(gqa)) == pytest.approx(0.5 * (4 * 4) / (32 * 32))
    assert draft_step_cost_floor(config(model(32, 4096, 32, 11008))) == pytest.approx(0.5)
    assert draft_step_cost_floor(config(model(4, 1024, 16, 2816, num_local_experts=8))) is None
    assert draft_step_cost_floor(config(None)) is None
    assert draft_step_cost_floor(SimpleNamespace(model_config=model(32, 4096, 32, 11008),
                                                 speculative_config=None)) is None
    # vLLM's own config of the embedded pair reaches the scheduler's fit: the tiny draft is
    # half the target's width and layers (weights 23%, KV 25%)
    sched = _scheduler(async_scheduling=False)
    assert sched.bass_costs.draft_step_floor == pytest.approx(0.5 * 0.227, rel=0.01)


def test_kv_bytes_per_weight_byte_of_a_7b_shape_and_where_unknown():
    """The knee's price needs the weights' share of a step's traffic: a Llama-2-7B shape
    holds 512 KiB of KV per cached token against ~13 GB of weights read per step; an MoE
    or quantized target keeps the hard bound (None)."""
    from types import SimpleNamespace

    import torch

    from vllm_bass.scheduler import kv_bytes_per_weight_byte

    def config(quantization=None, **extra):
        hf = SimpleNamespace(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                             num_key_value_heads=32, intermediate_size=11008, vocab_size=32000,
                             **extra)
        return SimpleNamespace(
            model_config=SimpleNamespace(hf_text_config=hf, dtype=torch.bfloat16,
                                         quantization=quantization),
            cache_config=SimpleNamespace(cache_dtype="auto"))

    ratio = kv_bytes_per_weight_byte(config())
    assert ratio == pytest.approx(2 * 32 * 4096 * 2 / (6.6e9 * 2), rel=0.05)
    assert kv_bytes_per_weight_byte(config(num_local_experts=8)) is None
    assert kv_bytes_per_weight_byte(config(quantization="awq")) is None
    assert kv_bytes_per_weight_byte(config(sliding_window=4096)) is None  # reads < context
    assert kv_bytes_per_weight_byte(config(sliding_window=None)) == ratio
    assert kv_bytes_per_weight_byte(config(sliding_window=4096, use_sliding_window=False)) == ratio
    # 1100 cached tokens per request at batch 64: the weights ~26% of the traffic
    assert 1 / (1 + ratio * 64 * 1100) == pytest.approx(0.26, abs=0.03)


def test_a_priced_knee_keeps_the_large_batch_floor():
    """With the knee priced the graph's room bounds a verification, but never below what
    the hard knee allowed (4 tokens a request at large batches)."""
    from vllm_bass.scheduler import priced_step_budget, step_token_budget

    assert priced_step_budget(None, 64) is None
    assert priced_step_budget(512, 256, 256) == step_token_budget(512, 256, 256) == 1024
    assert priced_step_budget(512, 128, 256) == 512
    assert priced_step_budget(1536, 64, 256) == 1536 - 64 > step_token_budget(1536, 64, 256)
    assert priced_step_budget(1536, 8, 256) == 1528


def test_fixed_ignores_the_knee_and_bass_stops_at_it():
    """The step budget per policy: `fixed` drafts its K, bounded only by the largest graph's
    room (session 32, H100: the knee held K=5 at 3 drafts at batch 64 / 1024-token prompts,
    where vLLM's K=5 was best), also wrapped in auto-off; `bass` stops at the knee."""
    from vllm_bass.policy.policies import BassAlgorithm1, FixedDraftLength
    from vllm_bass.scheduler import policy_step_budget, step_token_budget

    fixed, bass = FixedDraftLength(5), BassAlgorithm1(initial=5, limit=5)
    assert policy_step_budget(bass, 512, 64, 256) == step_token_budget(512, 64, 256) == 256
    assert policy_step_budget(fixed, 512, 64, 256) == 512 - 64
    assert policy_step_budget(fixed, 512, 256, 256) == 1024  # the large-batch floor stays
    assert policy_step_budget(fixed, None, 64, 256) is None
    wrapped = _scheduler(False, draft_length_policy="fixed", num_speculative_tokens=5,
                         auto_off=True).bass_policy
    assert wrapped.name == "fixed" and policy_step_budget(wrapped, 512, 64, 256) == 448


@pytest.mark.parametrize("async_scheduling", [False, True])
@pytest.mark.parametrize("policy, drafts", [("fixed", 5), ("bass", 3)])
def test_fixed_k_is_not_cut_at_the_knee(async_scheduling, policy, drafts):
    """Batch 64 under a 512-token graph: fixed K=5 verifies 5 drafts a request (the knee
    cut it to (256 - 64) / 64 = 3 before session 33); bass at K=5 stays within the knee."""
    sched = _scheduler(async_scheduling, draft_length_policy=policy, num_speculative_tokens=5,
                       initial_draft_length=5, auto_off=False, max_num_seqs=64)
    sched.bass_token_budget = 512
    rids = [f"r{i}" for i in range(64)]
    for r in rids:
        _add(sched, r, max_tokens=400)
    log = _run(sched, 8, accepted={r: 99 for r in rids})
    decode = [(out, verified) for out, verified in log[3:] if verified]
    assert decode
    for out, verified in decode:
        assert out.num_spec_tokens_to_schedule == drafts
        assert set(verified) == set(rids) and set(verified.values()) == {drafts}, verified
        assert sum(verified.values()) + len(out.num_scheduled_tokens) <= (
            512 - 64 if policy == "fixed" else 256)


@pytest.mark.parametrize("mode", [None, "max", "sum", " SUM "])
def test_the_knee_price_tops_the_fitted_token_price_or_adds_to_it(mode, monkeypatch):
    """The default (VLLM_BASS_KNEE_PRICE=max) prices a token past the knee at the larger of
    the fitted token price and the knee's compute price; `sum` (before session 32) at their
    sum."""
    from vllm_bass.policy.cost_model import StepCostModel, knee_price

    if mode is None:
        monkeypatch.delenv("VLLM_BASS_KNEE_PRICE", raising=False)
    else:
        monkeypatch.setenv("VLLM_BASS_KNEE_PRICE", mode)
    summed = mode is not None and mode.strip().lower() == "sum"
    sched = _scheduler(True)
    sched.bass_kv_per_weight = 1e-5  # no requests held: the weights are all the traffic
    knee = sched.bass_config.verify_knee_tokens
    full = knee_price(1.0, knee)
    for fitted in (0.0, full / 4, full / 2, 2 * full):
        cost = sched._bass_knee_priced(StepCostModel(per_verify_token=fitted), [], knee)
        assert cost.knee_drafts == knee
        below = max(fitted, full / 2)  # SUB_KNEE_TOKEN_SHARE of the knee's price at least
        assert cost.per_verify_token == pytest.approx(below)
        expected = full if summed else max(0.0, full - below)
        assert cost.past_knee_price == pytest.approx(expected)
        assert cost.per_verify_token + cost.past_knee_price == pytest.approx(
            below + full if summed else max(fitted, full))


@pytest.mark.parametrize("fit", [None, "session52", "session51"])
def test_a_verified_token_below_the_knee_costs_at_least_half_the_knee_price(fit, monkeypatch):
    """A bucket that drafts one length and measures no plain step prices its verified
    tokens at 0 (they follow the batch, and the plain step takes them): session 53's H200
    batch-32 mix then drafted two where fixed K=1 decoded 5% faster. Since session 53 a
    token below the knee costs at least SUB_KNEE_TOKEN_SHARE of the knee's price, which
    falls as the KV cache takes more of the step's traffic; VLLM_BASS_COST_FIT=session52
    (and the earlier fits) keep the fitted price."""
    from vllm_bass.policy.cost_model import SUB_KNEE_TOKEN_SHARE, StepCostModel, knee_price

    if fit is None:
        monkeypatch.delenv("VLLM_BASS_COST_FIT", raising=False)
    else:
        monkeypatch.setenv("VLLM_BASS_COST_FIT", fit)
    monkeypatch.delenv("VLLM_BASS_KNEE_PRICE", raising=False)
    sched = _scheduler(True)
    sched.bass_kv_per_weight = 4e-5  # the 7B shape: 512 KiB of KV a token over 13 GB
    knee = sched.bass_config.verify_knee_tokens
    rids = [f"r{i}" for i in range(32)]
    for r in rids:
        _add(sched, r, max_tokens=64)
    floors = []
    for cached in (200, 2000):
        for r in rids:
            sched.requests[r].num_computed_tokens = cached
        share = 1.0 / (1.0 + 4e-5 * cached * len(rids))
        cost = sched._bass_knee_priced(StepCostModel(per_verify_token=0.0), rids, knee)
        floor = SUB_KNEE_TOKEN_SHARE * knee_price(share, knee) if fit is None else 0.0
        assert cost.per_verify_token == pytest.approx(floor)
        assert cost.per_verify_token + cost.past_knee_price == pytest.approx(
            knee_price(share, knee))
        # a fitted price above the floor stands
        dear = sched._bass_knee_priced(StepCostModel(per_verify_token=0.01), rids, knee)
        assert dear.per_verify_token == 0.01
        floors.append(cost.per_verify_token)
    if fit is None:
        assert 0.0 < floors[1] < floors[0]  # longer contexts: a token is a smaller share


def _fitted_token_prices_at_batch_64(trace_name: str) -> list[float]:
    """The step-cost fit's price of a verified token at every drafting step of batch 64,
    replaying one of session 32's H100 step traces (BASS, 4x1024 draft, alpha 0.8)."""
    import csv
    import gzip
    from pathlib import Path

    from vllm_bass.policy.cost_model import StepCostEstimator

    trace = (Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "session32"
             / f"step_trace_{trace_name}.csv.gz")
    est, prices = StepCostEstimator(), []
    with gzip.open(trace, "rt") as fh:
        for row in csv.reader(fh):
            batch, steps, tokens, ms, other = (int(row[1]), int(row[2]), int(row[3]),
                                               float(row[4]), int(row[5]))
            est.observe(batch, steps, tokens, ms / 1000, other)
            fit = est.fits.get(64)
            if batch == 64 and other == 0 and steps > 0 and fit is not None \
                    and fit.weight >= est.min_weight:
                prices.append(est.model_for(64).per_verify_token)
    return prices


def test_the_fit_holds_the_knee_once_plans_pass_it():
    """Why a token past the knee costs the larger of the two prices, not their sum: at
    1024-token prompts (batch 64, ~1100 cached tokens a request) the plans pass the knee
    (192 drafts), so the fit's steps do and its token price is at or above the knee's
    compute price: the sum doubled it (3-4 drafts planned where 5 decoded 7% faster). At
    128-token prompts the plans stay at the knee (3 drafts), the fit prices a token near 0
    and the knee's price stands either way."""
    import statistics
    from types import SimpleNamespace

    import torch

    from vllm_bass.policy.cost_model import knee_price
    from vllm_bass.scheduler import kv_bytes_per_weight_byte

    hf = SimpleNamespace(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=32, intermediate_size=11008, vocab_size=32000)
    kv_per_weight = kv_bytes_per_weight_byte(SimpleNamespace(
        model_config=SimpleNamespace(hf_text_config=hf, dtype=torch.bfloat16, quantization=None),
        cache_config=SimpleNamespace(cache_dtype="auto")))
    long_knee = knee_price(1.0 / (1.0 + kv_per_weight * 64 * 1100), 256)
    short_knee = knee_price(1.0 / (1.0 + kv_per_weight * 64 * 200), 256)
    assert 0.0009 < long_knee < 0.0012 and short_knee > 2 * long_knee
    for trace in ("call4_bass_default", "call4_bass_knee_sum"):
        prices = _fitted_token_prices_at_batch_64(trace)
        assert len(prices) > 80
        assert statistics.median(prices) >= long_knee
    short = _fitted_token_prices_at_batch_64("call5_bass_default")
    assert len(short) > 80 and statistics.median(short) < short_knee / 4


def test_a_bad_knee_price_mode_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("VLLM_BASS_KNEE_PRICE", "over_fit")
    with pytest.raises(ValueError, match="VLLM_BASS_KNEE_PRICE must be one of max, sum"):
        _scheduler(True)


@pytest.mark.parametrize("fit", [None, "borrow", "linear", "session51", "session29"])
def test_cost_fit_borrows_and_prices_compute_by_default(fit, monkeypatch):
    """Since session 52 the scheduler's step-cost fit lends a young batch size the nearest
    mature one's costs and its prior prices a verified token at one token's compute
    (0.0025 of a plain step); VLLM_BASS_COST_FIT=session51 (and the older A/B fits) plan
    each batch size with its own fit from the earlier prior (0.01)."""
    from vllm_bass.policy.cost_model import PRIOR_COSTS, SESSION51_PRIOR

    if fit is None:
        monkeypatch.delenv("VLLM_BASS_COST_FIT", raising=False)
    else:
        monkeypatch.setenv("VLLM_BASS_COST_FIT", fit)
    costs = _scheduler(False).bass_costs
    earlier = fit in ("session51", "session29")
    assert costs.borrow_young is not earlier
    assert costs.prior == (SESSION51_PRIOR if earlier else PRIOR_COSTS)
    assert costs.model_for(64).per_verify_token == (0.01 if earlier else 0.0025)


@pytest.mark.parametrize("reuse", [None, "1", "0", " 0 "])
def test_plan_reuse_is_the_default_and_plan_reuse_0_turns_it_off(reuse, monkeypatch):
    """A batch of PLAN_REUSE_MIN_BATCH+ requests keeps a solved plan PLAN_REUSE_STEPS calls
    (session 54: host time); VLLM_BASS_PLAN_REUSE=0 solves it as before, for A/Bs."""
    from vllm_bass.policy.per_request import PLAN_REUSE_STEPS

    if reuse is None:
        monkeypatch.delenv("VLLM_BASS_PLAN_REUSE", raising=False)
    else:
        monkeypatch.setenv("VLLM_BASS_PLAN_REUSE", reuse)
    sched = _scheduler(True)
    off = reuse is not None and reuse.strip() == "0"
    assert sched.bass_policy.plan_reuse_steps == (0 if off else PLAN_REUSE_STEPS)
    assert PLAN_REUSE_STEPS > 0
