"""BASS scheduler policy: vLLM's Scheduler (or AsyncScheduler), plus what ragged adaptive
drafts need.

* The draft-length policy lives here, in the one scheduler process: every tensor-parallel
  rank gets the same plan, and the plan exists before the step runs, which async scheduling
  needs (the scheduler reserves the next step's draft slots before this step's drafts
  exist). At schedule time of step t the policy has seen the verifications up to step t-1
  (sync) or t-2 (async, one step in flight); it answers how many tokens each sequence drafts
  during step t (verified in step t+1). The plan reaches the runner as
  `num_spec_tokens_to_schedule` (the drafter's length; 0 = off-step); per-request lengths
  are applied to the drafts here (sync: `update_draft_token_ids` cuts them; async: each
  request's placeholders have its own length and the runner scatters only those drafts).
* Lookahead: vLLM reserves `num_speculative_tokens` KV slots per running sequence for the
  draft model's lookahead; with BASS that is the most any sequence may draft (l_limit), so a
  sequence can grow its draft without a reallocation stall. Drafts that do not fit the token
  budget or max_model_len are cut by the base class; preempted sequences drop their drafts
  (base class) and re-draft after resuming.
* vLLM pads *new* decode requests to 1 + K tokens to keep full CUDA graphs; with adaptive
  lengths up to 32 that padding would waste a whole draft's verification, so it is off.
* Token budget: a verification holds at most vLLM's largest CUDA-graph size in tokens
  (`within_token_budget`): above it the step runs without graphs, 3-4x slower at batch
  32-64; from batch 128 up the budget grows to LARGE_BATCH_TOKENS_PER_REQUEST per request.
* Step costs: every step is timed (the period between the ends of consecutive steps'
  `update_from_output`, which in async mode is the pipelined step time; a prefill's tokens
  are a term of their own) and fitted by
  `StepCostEstimator`; the policy uses the relative cost model for the step's batch size to
  turn drafting off when it does not pay (auto-off) and, for per_request, to choose the draft
  lengths. Off-steps measure plain decoding; auto-off takes one when that measurement is
  stale (one off-step; under async scheduling, where an off-step that verifies drafts beside
  a prefill runs a one-token draft pass, that step is timed as such).
BASS statistics are derived in the front end (`vllm_bass.metrics`) from the stats this
scheduler already ships.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.utils import record_function_or_nullcontext

from vllm_bass import envs
from vllm_bass.config import DEFAULT_VERIFY_KNEE_TOKENS, bass_config_from_vllm
from vllm_bass.diagnostics import open_trace
from vllm_bass.policy.auto_off import with_test_off_cycle
from vllm_bass.policy.cost_model import (SESSION51_PRIOR, SUB_KNEE_TOKEN_SHARE,
                                         StepCostEstimator, knee_price)
from vllm_bass.policy.factory import make_policy
from vllm_bass.policy.policies import DraftPlan, Verified, within_token_budget

logger = logging.getLogger("vllm.bass")

# Decayed count of measured off-steps (per batch bucket) below which auto-off takes an
# occasional off-step, to measure what plain decoding costs (about one in 35 steps).
OFF_SAMPLES_WANTED = 0.5
PLAN_TRACE_STEPS = 20000  # bounded diagnostics file
# A batch is closed (planned for its end, `closed_batch_cap`) when no request waits and none
# has joined running ones lately. Requests that reach an idle engine within
# CLOSED_WAVE_STEPS scheduler steps are one wave, as `LLM.generate` adds them (the engine
# core may take a few steps to receive them all); one that arrives later, while others
# still run, joins them: the engine serves a stream (a server's continuous batching),
# where the next arrival takes a finished request's place even with an empty queue and
# every token counts alike. Planning such a batch for its end drafted 1.3 tokens a request
# for the mix at batch 32 / 64 (continuous workload, H100, session 25: 1.03x / 0.88x vLLM
# K=3). A stream is remembered for STREAM_MEMORY_STEPS steps after its last join (longer
# than a request's life, so a lull does not make one closed batch of the stream).
CLOSED_WAVE_STEPS = 8
STREAM_MEMORY_STEPS = 256


def verified_from_output(scheduled_spec: dict[str, list[int]], sampled_token_ids,
                         req_id_to_index: dict[str, int], probe: bool) -> list[Verified]:
    """(draft length, accepted count) of every request that verified drafts in a step.
    Requests whose output was discarded (preempted, finished early) are left out."""
    out = []
    for rid, drafts in scheduled_spec.items():
        idx = req_id_to_index.get(rid)
        if not drafts or idx is None or not sampled_token_ids:
            continue
        generated = sampled_token_ids[idx]
        if len(generated) == 0:
            continue
        out.append(Verified(rid, len(drafts), max(0, min(len(generated) - 1, len(drafts))),
                            probe))
    return out


# At large batches the budget grows to this many tokens per request: there the step is
# GPU-bound, a graph-less launch is hidden behind it, and the capture size alone left one
# draft token per request at batch 256 (mean acceptance length 1.8), where vLLM's
# draft_model verifying 3 per request ran 1.24x plain and BASS 1.11x (H100, session 10).
LARGE_BATCH_TOKENS_PER_REQUEST = 4
# Below that, a verification holds at most BassConfig.verify_knee_tokens (config.py says
# why): per_request prices the knee (`priced_step_budget`), bass stops there, fixed drafts
# its K (`policy_step_budget`; `FixedDraftLength` says why).
KNEE_TOKENS = DEFAULT_VERIFY_KNEE_TOKENS


def step_token_budget(capture_budget: int | None, batch: int,
                      knee: int = KNEE_TOKENS) -> int | None:
    """The verification budget of a step of `batch` requests (None: unlimited): `knee`
    tokens (or LARGE_BATCH_TOKENS_PER_REQUEST per request, the larger; knee 0: none),
    within what keeps the
    draft's first pass, which adds one slot per request to the verified tokens, inside the
    largest CUDA graph (eager there, it cost the host ~3 ms more per step at batch 128 on
    the H100, session 11)."""
    if capture_budget is None:
        return None
    if knee <= 0:
        return capture_budget - batch
    return max(min(capture_budget - batch, knee),
               LARGE_BATCH_TOKENS_PER_REQUEST * batch)


KNEE_PRICE_MODES = ("max", "sum")


def knee_price_is_sum() -> bool:
    """VLLM_BASS_KNEE_PRICE: `sum` (before session 32) or `max` (the default); anything
    else is refused when the engine starts, not ignored."""
    mode = envs.get("VLLM_BASS_KNEE_PRICE").strip().lower() or "max"
    if mode not in KNEE_PRICE_MODES:
        raise ValueError(f"VLLM_BASS_KNEE_PRICE must be one of {', '.join(KNEE_PRICE_MODES)}, "
                         f"got {mode!r}")
    return mode == "sum"


def priced_step_budget(capture_budget: int | None, batch: int,
                       knee: int = KNEE_TOKENS) -> int | None:
    """The verification budget when the knee is priced (`cost_model.knee_price`), not a
    bound: the largest graph's room, or `step_token_budget`'s where that is more (its
    large-batch floor: without it a batch of 256 under a 512-token graph had no room to
    draft at all, closed-batch simulation, session 29)."""
    if capture_budget is None:
        return None
    return max(step_token_budget(capture_budget, batch, knee),
               step_token_budget(capture_budget, batch, 0))


def policy_step_budget(policy, capture_budget: int | None, batch: int,
                       knee: int = KNEE_TOKENS) -> int | None:
    """`policy`'s verification budget before any knee price: the hard knee
    (`step_token_budget`) where the policy stops at it (`stops_at_knee`: bass, and
    per_request until the scheduler prices the knee); else the largest graph's room, never
    below the large-batch floor (`priced_step_budget`): fixed drafts its K like vLLM's."""
    if policy.stops_at_knee:
        return step_token_budget(capture_budget, batch, knee)
    return priced_step_budget(capture_budget, batch, knee)


def _dense_decoder_shape(model) -> tuple[float, float] | None:
    """(weight elements read per step, KV elements per cached token) of a dense decoder with
    full attention only, from its config (None otherwise: MoE, quantized weights, sliding
    windows, unknown fields)."""
    cfg = getattr(model, "hf_text_config", None)
    try:
        if getattr(model, "quantization", None) or any(
                getattr(cfg, k, None) for k in ("num_experts", "num_local_experts",
                                                "n_routed_experts", "moe_intermediate_size")):
            return None
        if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
            return None  # (Qwen2's configs name a window they do not use)
        h, layers = int(cfg.hidden_size), int(cfg.num_hidden_layers)
        heads = int(cfg.num_attention_heads)
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(cfg, "head_dim", None) or h // heads)
        inter, vocab = int(cfg.intermediate_size), int(cfg.vocab_size)
    except (AttributeError, TypeError, ValueError):
        return None
    # q, k, v, o projections, a gated MLP (3 matrices; 2 would only raise the share of KV),
    # the LM head (the embedding is gathered, not read whole)
    params = layers * (2 * h * heads * head_dim + 2 * h * kv_heads * head_dim
                       + 3 * h * inter) + vocab * h
    return float(params), float(2 * layers * kv_heads * head_dim)


def kv_bytes_per_weight_byte(vllm_config) -> float | None:
    """One cached token's KV bytes over the target's weight bytes read per step (both
    divide alike under tensor parallelism), from the model's config (`_dense_decoder_shape`;
    None where it is not a plain dense decoder: the hard knee bound stays there). 7B shape:
    512 KiB per token / 13 GB."""
    model = vllm_config.model_config
    shape = _dense_decoder_shape(model)
    if shape is None or shape[0] <= 0:
        return None
    params, kv_elements = shape
    cache_dtype = str(vllm_config.cache_config.cache_dtype)
    kv_element = 1 if cache_dtype.startswith("fp8") else model.dtype.itemsize
    return kv_elements * kv_element / (params * model.dtype.itemsize)


def draft_step_cost_floor(vllm_config) -> float | None:
    """The least a draft step can cost in plain target steps: half the smaller of the draft's
    weight and KV sizes over the target's. A one-token step reads both models' weights and
    each sequence's KV once (or, compute-bound, does work in the same proportion), and a
    small model runs no more efficiently than a large one; the half leaves room for the
    ratio the config gives being rough. None where either model is not a plain dense
    decoder. The step-cost fit is held at or above it: on steps whose timing drifts (a
    run's warm-up, a closed batch's shrinking tail) the free fit priced a draft step at
    0 and the plan drafted 5-7 tokens at alpha 0.3 (session 44) and 16 at alpha 0.7
    (session 43; H200)."""
    spec = getattr(vllm_config, "speculative_config", None)
    draft_model = getattr(spec, "draft_model_config", None)
    if draft_model is None:
        return None
    target = _dense_decoder_shape(vllm_config.model_config)
    draft = _dense_decoder_shape(draft_model)
    if target is None or draft is None or min(target) <= 0:
        return None
    return 0.5 * min(draft[0] / target[0], draft[1] / target[1])


def verification_token_budget(vllm_config) -> int | None:
    """The most tokens a verification step may hold and still replay a CUDA graph (vLLM's
    largest capture size; None without graphs: eager engines, the CPU)."""
    from vllm.config import CUDAGraphMode

    compilation = vllm_config.compilation_config
    size = getattr(compilation, "max_cudagraph_capture_size", None)
    if (not size or getattr(vllm_config.model_config, "enforce_eager", False)
            or compilation.cudagraph_mode in (None, CUDAGraphMode.NONE)):
        return None
    return int(size)


# id(vllm_config) -> {batch size: seconds of one draft step}, from the engine's start-up
# (`patches.engine_core_measured_costs`) to the scheduler EngineCore builds right after;
# taken (popped) by that scheduler, so at most one entry per engine being built
_MEASURED_DRAFT_STEPS: dict[int, dict[int, float]] = {}


def stash_measured_draft_steps(vllm_config, seconds_by_rows: dict[int, float]) -> None:
    if seconds_by_rows:
        _MEASURED_DRAFT_STEPS[id(vllm_config)] = dict(seconds_by_rows)


def take_measured_draft_steps(vllm_config) -> dict[int, float]:
    return _MEASURED_DRAFT_STEPS.pop(id(vllm_config), {})


class BassScheduler(Scheduler):
    """Constructed through this class for both modes: `__new__` returns the async variant
    when vLLM runs async scheduling (the class path is fixed before vLLM decides that)."""

    def __new__(cls, *args, **kwargs):
        if cls is BassScheduler:
            vllm_config = kwargs.get("vllm_config", args[0] if args else None)
            if vllm_config is not None and vllm_config.scheduler_config.async_scheduling:
                cls = BassAsyncScheduler
        return super().__new__(cls)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.bass_async = isinstance(self, AsyncScheduler)
        # A non-None dynamic-SD table turns off vLLM's pad-new-decodes-to-1+K path
        # (scheduler.py, "Pad new decode requests to uniform spec decoding size"); the table
        # itself just returns K, and the policy picks the real length each step.
        if self.num_spec_tokens > 0:
            self.dynamic_sd_lookup = [self.num_spec_tokens] * (
                self.scheduler_config.max_num_seqs + 1)
        self.bass_config = bass_config_from_vllm(self.vllm_config)
        if self.bass_config is None:
            raise RuntimeError("BassScheduler started without additional_config['bass']; use "
                               "--spec-worker bass or speculative_config={'method': 'bass'}")
        self.bass_policy = with_test_off_cycle(make_policy(self.bass_config), os.environ)
        # the plan whose drafts are being produced (verified by the next scheduled step)
        self.bass_plan = DraftPlan(self.num_spec_tokens)
        self._bass_known_reqs: set[str] = set()
        # arrivals (`is_closed_batch`): the step of the current wave's first request and of
        # the last request that joined running ones after the wave
        self._bass_schedule_steps = 0
        self._bass_wave_start = 0
        self._bass_last_join: int | None = None
        cost_fit = envs.get("VLLM_BASS_COST_FIT").strip()
        # the A/B fits of earlier sessions keep the prior they ran with and plan each batch
        # size with its own fit (cost_model.PRIOR_COSTS says what changed in session 52)
        earlier = cost_fit in ("session29", "one_draft", "session51")
        # a verified token below the knee costs at least SUB_KNEE_TOKEN_SHARE of the knee's
        # price (`_bass_knee_priced`); VLLM_BASS_COST_FIT=session52 and the earlier fits: no
        # floor
        self._bass_token_floor = 0.0 if earlier or cost_fit == "session52" else \
            SUB_KNEE_TOKEN_SHARE
        self.bass_costs = StepCostEstimator(prior=SESSION51_PRIOR if earlier else None,
                                            session29_fit=cost_fit == "session29",
                                            one_draft_term=cost_fit == "one_draft",
                                            draft_step_floor=draft_step_cost_floor(
                                                self.vllm_config),
                                            borrow_young=not earlier)
        # a draft step's GPU time by batch size, timed at start-up: the fit's floor (the
        # engine measures and hands it over unless VLLM_BASS_MEASURED_DRAFT_STEP=0; the
        # default since session 49: docs/design.md)
        measured = take_measured_draft_steps(self.vllm_config)
        if measured:
            self.bass_costs.set_measured_draft_steps(measured)
            logger.info("vllm-bass: draft step priced at least its measured time, us by "
                        "batch size: %s", {rows: round(t * 1e6, 1)
                                           for rows, t in sorted(measured.items())})
        # vLLM's largest CUDA-graph size; each step's budget: step_token_budget
        self.bass_token_budget = verification_token_budget(self.vllm_config)
        # the knee as a price (`cost_model.knee_price`) where the weights' share of a step's
        # memory traffic is known: with long contexts a verification past the knee is cheap
        self.bass_kv_per_weight = (kv_bytes_per_weight_byte(self.vllm_config)
                                   if self.bass_config.verify_knee_tokens > 0 else None)
        # VLLM_BASS_PLAN_REUSE=0: a large batch's plan solved afresh as before session 54
        if hasattr(self.bass_policy, "plan_reuse_steps") and \
                envs.get("VLLM_BASS_PLAN_REUSE").strip() == "0":
            self.bass_policy.plan_reuse_steps = 0
        # VLLM_BASS_KNEE_PRICE=sum: the knee priced as before session 32 (`_bass_knee_priced`)
        self._bass_knee_sum = knee_price_is_sum()
        self._bass_last_end: float | None = None  # end of the previous update_from_output
        # Diagnostics: VLLM_BASS_STEP_TRACE=FILE appends
        # "end_s,batch,draft_steps,verify_tokens,ms,other_tokens" for every timed step (what
        # the cost model is fitted to; other_tokens: prefill tokens in the step).
        trace = envs.get("VLLM_BASS_STEP_TRACE")
        self._bass_trace = open_trace(trace) if trace else None
        # ... and FILE.plans: per planned step the cost model, each sequence's acceptance
        # estimate and draft length, and whether the batch was planned as closed (first
        # PLAN_TRACE_STEPS steps)
        self._bass_plan_trace = open_trace(trace + ".plans") if trace else None
        if trace:  # ... and FILE.gc: this process's garbage-collection pauses
            from vllm_bass.diagnostics import gc_trace

            gc_trace.install(trace + ".gc")
        self._bass_plans_left = PLAN_TRACE_STEPS

    def add_request(self, request) -> None:
        step = self._bass_schedule_steps
        if not self.requests:
            self._bass_wave_start = step
        elif step - self._bass_wave_start > CLOSED_WAVE_STEPS:
            self._bass_last_join = step
        super().add_request(request)

    def is_closed_batch(self) -> bool:
        """No request waits and none joined running ones in the last STREAM_MEMORY_STEPS
        steps: nothing is expected to take a finished request's place, so the batch is
        done with its slowest request."""
        if self.waiting or self.skipped_waiting:
            return False
        last_join = self._bass_last_join
        return last_join is None or self._bass_schedule_steps - last_join > STREAM_MEMORY_STEPS

    # -- planning ---------------------------------------------------------------------
    def _update_after_schedule(self, scheduler_output) -> None:
        self._bass_schedule_steps += 1
        if self.num_spec_tokens > 0:
            with record_function_or_nullcontext("bass_scheduler: plan"):
                self._bass_plan_step(scheduler_output)
        super()._update_after_schedule(scheduler_output)
        plan = self.bass_plan
        if self.bass_async and plan.per_request is not None and self.num_spec_tokens > 0:
            # AsyncScheduler gave every request num_spec_tokens_to_schedule placeholders;
            # per-request plans reserve (and so verify) fewer for some sequences
            longest = scheduler_output.num_spec_tokens_to_schedule
            for rid in scheduler_output.num_scheduled_tokens:
                request = self.requests[rid]
                n = min(plan.length_for(rid), longest)
                if not request.is_prefill_chunk and n != len(request.spec_token_ids):
                    request.spec_token_ids = [-1] * n

    def _bass_plan_step(self, out) -> None:
        req_ids = list(out.num_scheduled_tokens)
        self._bass_forget_finished()
        policy = self.bass_policy
        budget = policy_step_budget(policy, self.bass_token_budget, len(req_ids),
                                    self.bass_config.verify_knee_tokens)
        if hasattr(policy, "cost"):
            policy.cost = self.bass_costs.model_for(len(req_ids))
            if (budget is not None and req_ids and self.bass_kv_per_weight is not None
                    and hasattr(policy, "token_budget")):
                # the knee priced, not a bound
                policy.cost = self._bass_knee_priced(policy.cost, req_ids, budget)
                budget = priced_step_budget(self.bass_token_budget, len(req_ids),
                                            self.bass_config.verify_knee_tokens)
        probes = getattr(policy, "probes", None)
        if probes is not None:
            probes.need_off_sample = (
                self.bass_costs.off_weight(len(req_ids)) < OFF_SAMPLES_WANTED)
        if getattr(policy, "explore_enabled", False):  # off by default: no work then
            policy.explore_lengths = self.bass_costs.lengths_unvaried(len(req_ids))
        # the step scheduled now verifies the drafts of the previous plan
        out.bass_verified_probe = self.bass_plan.probe
        if hasattr(policy, "token_budget"):
            policy.token_budget = budget
        if hasattr(policy, "remaining"):
            # a batch that cannot be refilled is done with its slowest request, so its plan
            # minimises the time until then (`closed_batch_cap`); with requests waiting or
            # arriving, one that finishes early admits the next, and every token counts alike
            requests = self.requests
            closed = self.is_closed_batch()
            policy.remaining = {
                r: requests[r].max_tokens - requests[r].num_output_tokens
                for r in req_ids if r in requests} if closed else None
            if closed:
                policy.per_request_share = self.bass_costs.per_request_share(len(req_ids))
        plan = policy.plan(req_ids) if req_ids else self.bass_plan
        if req_ids and budget is not None:
            estimates = getattr(policy, "estimates", None)
            plan = within_token_budget(plan, req_ids, budget,
                                       estimates.alpha if estimates is not None else None)
        self.bass_plan = plan
        if self._bass_plan_trace is not None and req_ids and self._bass_plans_left > 0:
            self._bass_plans_left -= 1
            self._bass_write_plan(req_ids, plan)
        out.num_spec_tokens_to_schedule = max(0, min(plan.batch_length, self.num_spec_tokens))

    def _bass_knee_priced(self, cost, req_ids: list[str], knee_budget: int):
        """`cost` with the knee's price: up to the knee bound's drafts a token costs the
        fitted price, at least SUB_KNEE_TOKEN_SHARE of `knee_price` (the weights' share of
        this step's memory traffic over the knee), past it the knee's price."""
        requests = self.requests
        cached = sum(requests[r].num_computed_tokens for r in req_ids if r in requests)
        share = 1.0 / (1.0 + self.bass_kv_per_weight * cached)
        price = knee_price(share, self.bass_config.verify_knee_tokens)
        floor = self._bass_token_floor * price
        if cost.per_verify_token < floor:
            cost = dataclasses.replace(cost, per_verify_token=floor)
        if not self._bass_knee_sum:
            # a token past the knee costs the larger of the fitted token price and the
            # compute price, not their sum: a price is no bound, so once plans pass the
            # knee the fit's steps do too and its token price holds the knee's cost (session
            # 32, batch 64, ~1100 cached tokens: fitted 0.0012-0.0013 plain steps, knee price
            # 0.00106, ~0.02 ms a token on the H100; the sum doubled it and planned 3-4
            # drafts where 5, unpriced, decoded 7% faster). Plans held at the knee leave the
            # fit's price near 0 and the knee's stands.
            price = max(0.0, price - cost.per_verify_token)
        return dataclasses.replace(cost, knee_drafts=max(0, knee_budget - len(req_ids)),
                                   past_knee_price=price)

    def _bass_write_plan(self, req_ids, plan) -> None:
        import json

        policy = self.bass_policy
        cost = getattr(policy, "cost", None)
        estimates = getattr(policy, "estimates", None)
        self._bass_plan_trace.write(json.dumps({
            "t": round(time.perf_counter(), 6), "batch": len(req_ids),
            "cost": None if cost is None else [cost.base, cost.draft_pass,
                                               cost.per_draft_step, cost.per_verify_token,
                                               cost.one_draft],
            "knee": None if cost is None or cost.knee_drafts is None else [
                cost.knee_drafts, cost.past_knee_price],
            "alpha": None if estimates is None else [round(estimates.alpha(r), 3)
                                                     for r in req_ids],
            "lengths": [plan.length_for(r) for r in req_ids], "probe": plan.probe,
            # the policy holds the remaining tokens only while it plans a closed batch
            "closed": (policy.remaining is not None) if hasattr(policy, "remaining")
            else None}) + "\n")

    def _bass_forget_finished(self) -> None:
        current = set(self.requests)
        for gone in self._bass_known_reqs - current:
            self.bass_policy.forget(gone)
        self._bass_known_reqs = current

    def bass_draft_steps_run(self, planned: int, verify_tokens: int,
                             other_tokens: int = 0) -> int:
        """Draft steps the runner ran in a step: the plan, except that under async
        scheduling an off-step that verified drafts beside a prefill runs a one-token pass
        (model_runner), which must not be timed as plain decoding. In pure decoding it
        runs none since session 43 (only vLLM's bookkeeping of the accepted counts)."""
        if planned == 0 and self.bass_async and verify_tokens > 0 and other_tokens > 0:
            return 1
        return planned

    # -- drafts (sync mode) -------------------------------------------------------------
    def update_draft_token_ids(self, draft_token_ids) -> None:
        plan = self.bass_plan
        if plan.per_request is not None:
            draft_token_ids.draft_token_ids = [
                list(tokens[: plan.length_for(rid)])
                for rid, tokens in zip(draft_token_ids.req_ids, draft_token_ids.draft_token_ids)]
        super().update_draft_token_ids(draft_token_ids)

    # -- observing ------------------------------------------------------------------------
    def update_from_output(self, scheduler_output, model_runner_output):
        if self.num_spec_tokens > 0 and scheduler_output.scheduled_spec_decode_tokens:
            # requests that finished meanwhile (async: a step was still in flight) are left
            # out: observing them would re-create per-request state after it was forgotten
            with record_function_or_nullcontext("bass_scheduler: observe"):
                self.bass_policy.observe([v for v in verified_from_output(
                    scheduler_output.scheduled_spec_decode_tokens,
                    model_runner_output.sampled_token_ids,
                    model_runner_output.req_id_to_index,
                    getattr(scheduler_output, "bass_verified_probe", False))
                    if v.req_id in self.requests])
        result = super().update_from_output(scheduler_output, model_runner_output)
        self._bass_time_step(scheduler_output)
        return result

    def _bass_time_step(self, out) -> None:
        """Every step with requests is timed, prefills included (`StepCostEstimator`'s
        other tokens); the first after the engine was idle is not (its period holds the
        idle time)."""
        end = time.perf_counter()
        last = self._bass_last_end
        self._bass_last_end = end if self.requests else None
        batch = len(out.num_scheduled_tokens)
        if last is None or batch == 0:
            return
        verify_tokens = sum(len(s) for s in out.scheduled_spec_decode_tokens.values())
        other_tokens = out.total_num_scheduled_tokens - batch - verify_tokens
        draft_steps = self.bass_draft_steps_run(out.num_spec_tokens_to_schedule, verify_tokens,
                                                other_tokens)
        self.bass_costs.observe(batch, draft_steps, verify_tokens, end - last, other_tokens)
        if self._bass_trace is not None:
            self._bass_trace.write(f"{end:.6f},{batch},{draft_steps},{verify_tokens},"
                                   f"{(end - last) * 1e3:.4f},{other_tokens}\n")


class BassAsyncScheduler(BassScheduler, AsyncScheduler):
    """BASS on vLLM's async scheduling (opt-in, CUDA only): step t+1 is scheduled while step t
    runs; drafts stay on the GPU and land in the placeholders reserved here."""
