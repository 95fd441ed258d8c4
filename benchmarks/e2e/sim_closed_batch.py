"""Closed batches without a device: the real BASS scheduler (policy, cost model, auto-off,
token budget) against a simulated H100 whose step time follows the law fitted to the
session-18 H100 trace of the 7B-shape pair (4x1024 draft), with per-request geometric
acceptance. One batch of `batch` requests, 128 new tokens each, no replacements: the
makespan is what `vs_vllm.py` measures (ms/token = batch wall time / tokens per request),
so this is where the tail of a closed batch (stragglers, long drafts for a few requests)
shows up before a device call is spent on it.

    python benchmarks/e2e/sim_closed_batch.py --batches 8,64,256 --acceptance 0.8,mix

Reports, per (acceptance, batch), plain decoding's makespan over BASS's and over a fixed-K
policy without auto-off (vLLM draft_model's shape of plan, not its host costs). Plain
decoding runs on the same simulated device and scheduler, drafting nothing (`NeverDraft`):
its prefill and its contexts' growth are timed as BASS's are (before session 38 its
makespan was max_tokens decode steps at the prompt's context, which flattered BASS's ratio
at long prompts).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

MIX_PATTERN = (0.9, 0.6, 0.9, 0.3)
# each step's time scaled by a uniform factor in 1 +- this (--jitter; the H100's async step
# times scatter about +-15%)
JITTER = [0.0]  # as vs_vllm.py: request i draws MIX_PATTERN[i % 4]


# a prefill token: the 7B shape's ~14 GFLOP at ~700 TFLOP/s (an assumption, not fitted:
# session 18's trace timed pure-decode steps only)
PREFILL_TOKEN_MS = 0.02


# Long contexts (`CONTEXT_LAW`, --context-law): each cached token a decode step reads beyond
# the ~190 of session 18's trace (128-token prompts) costs its KV bytes at the copy bandwidth
# (7B shape: 512 KiB / ~3.2 TB/s), and each draft step the draft's (4x1024: 16 KiB). The
# session-29 profile at batch 64, ~1100 cached tokens: a K=3 step 21.6 ms of GPU time, this
# law 21.1 ms.
CONTEXT_LAW = [False]
LAW_CONTEXT = 190
KV_MS_PER_CACHED_TOKEN = 0.00016
DRAFT_KV_MS_PER_CACHED_TOKEN = 0.000005
# The GEMMs' knee (`KNEE_LAW`, --knee-law): past ~256 tokens a step (the scheduler's
# verify_knee_tokens) the target's forward turns compute-bound and each further decode token
# costs ~0.016 ms more than the law's linear 0.0072 (H100, session 30 call 3, 128-token
# prompts, batch 64: vLLM K=3 -> K=4 took ~+1.5 ms a decode step for 64 more tokens once
# the prefill's share and a draft step are taken out; ~0.017 ms is a 7B token's 13 GFLOP
# at ~800 TFLOP/s). A prefill chunk in the step fills the knee first.
KNEE_LAW = [False]
KNEE_TOKENS = 256
KNEE_EXTRA_MS_PER_TOKEN = 0.016
# the 7B shape's KV bytes per cached token over its weight bytes (the scheduler's knee
# price; `scheduler.kv_bytes_per_weight_byte` of a Llama-2-7B config): the simulated
# scheduler runs the embedded tiny pair, whose ratio is not the law's
def _dense_model(width: int, layers: int, heads: int, inter: int):
    """A model config as the scheduler's size helpers read it (Llama-shaped, bf16)."""
    from types import SimpleNamespace

    import torch

    return SimpleNamespace(quantization=None, dtype=torch.bfloat16, hf_text_config=SimpleNamespace(
        hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=heads, intermediate_size=inter, vocab_size=32000))


def kv_per_weight_7b() -> float:
    from types import SimpleNamespace

    from vllm_bass.scheduler import kv_bytes_per_weight_byte

    return kv_bytes_per_weight_byte(SimpleNamespace(
        model_config=_dense_model(4096, 32, 32, 11008),
        cache_config=SimpleNamespace(cache_dtype="auto")))


def draft_floor_4x1024_7b() -> float:
    """The step-cost fit's draft-step floor (`scheduler.draft_step_cost_floor`) for the pair
    the law was measured on, 4x1024 on the 7B shape (~0.0063 of a plain step); the
    scheduler's own config is the embedded tiny pair's (0.11)."""
    from types import SimpleNamespace

    from vllm_bass.scheduler import draft_step_cost_floor

    return draft_step_cost_floor(SimpleNamespace(
        model_config=_dense_model(4096, 32, 32, 11008),
        speculative_config=SimpleNamespace(draft_model_config=_dense_model(1024, 4, 16, 2816))))


# the draft's terms of the law scaled by this (--draft-cost-scale): a held-out draft shape
# dearer than session 18's 4x1024 (a 5x1280 draft's weights are 1.56x)
DRAFT_COST_SCALE = [1.0]
# A step that drafts exactly one token costs this much more (ms; --one-draft-premium-ms).
# Session 40 (H200, 5x1280, batch 4, 256-token prompts): one-draft steps took 6.84 ms
# against 5.69 for three drafts and 4.67 off, in one engine (cause open: idle device time
# in the target's forward phase); a linear fit then prices every draft step dear.
ONE_DRAFT_PREMIUM_MS = [0.0]


# The H200 law (--h200-law): session 49's call-1 step trace of BASS's engine on our
# attention (4x1024 draft, the mix, batch 16-256, 128-token prompts; robust fit with the
# draft step held at its measured graph time, 165 us; median abs. residual 0.9 ms): an
# off-step 4.15 ms + 0.0378 ms per request (plain vLLM's FA3 decode step is dearer: 10.2
# against 8.3 ms at batch 128, session 49's profile); drafting at all 0.69 + 0.0205 ms per
# request; each draft step 0.165 ms; a verified draft token 0.003 ms while the step's decode
# tokens stay within H200_KNEE_TOKENS (the GEMMs weight-bound; past a batch of more requests
# than that, every verified token is past it), 0.0126 ms past it
# (compute-bound: a batch-128 one-draft step's target forward 1.4 ms more GEMM than an
# off-step's, the profile). The other switches but DRAFT_COST_SCALE do not apply.
H200_LAW = [False]
H200_KNEE_TOKENS = 128

# Session 53's H200 law (--h200-law-s53): 6310 decode steps of nine step traces of sessions
# 52-53 (BASS's engine on our attention, 4x1024 draft, the mix and alpha 0.8, batch 1-256,
# 128-token prompts; the default, fixed K=1 and the fit before session 53; five hosts). A
# plain step from the off-steps' medians by batch (H200_S53_OFF_MS, interpolated: it grows
# faster than linearly, 5.94 ms at 64 and 13.73 at 256, which session 49's line could not
# follow), then a robust fit of the rest: drafting at all 0.255 ms, each draft step 0.134
# ms, a verified draft token 0.013 ms and 0.0073 more past H200_S53_KNEE_TOKENS decode
# tokens. Median abs. residual 0.31 ms; batch 64 one draft 7.18 against 6.96 measured,
# two 8.15 / 8.02, batch 128 one 10.27 / 10.23, batch 256 one 19.40 / 19.11.
H200_S53_LAW = [False]
H200_S53_OFF_MS = {1: 4.50, 2: 4.51, 4: 4.52, 8: 4.52, 16: 4.78, 32: 5.15, 64: 5.94,
                   128: 8.32, 256: 13.73}
H200_S53_KNEE_TOKENS = 256


def h200_s53_step_ms(batch: int, draft_steps: int, verify_tokens: int,
                     other_tokens: int = 0) -> float:
    """One step of session 53's H200 law (H200_S53_LAW)."""
    sizes = sorted(H200_S53_OFF_MS)
    # linear between the table's batch sizes, and past its last one at the last slope
    low = max([b for b in sizes[:-1] if b <= batch] or sizes[:1])
    high = sizes[sizes.index(low) + 1]
    plain = H200_S53_OFF_MS[low] + ((H200_S53_OFF_MS[high] - H200_S53_OFF_MS[low])
                                     * (batch - low) / (high - low))
    past_knee = max(0, batch + verify_tokens - max(H200_S53_KNEE_TOKENS, batch))
    ms = (plain + 0.013 * verify_tokens + 0.0073 * past_knee
          + PREFILL_TOKEN_MS * other_tokens)
    if draft_steps:
        ms += DRAFT_COST_SCALE[0] * (0.255 + 0.134 * draft_steps)
    return ms


def h200_step_ms(batch: int, draft_steps: int, verify_tokens: int,
                 other_tokens: int = 0) -> float:
    """One step of the H200 law (H200_LAW)."""
    past_knee = max(0, batch + verify_tokens - max(H200_KNEE_TOKENS, batch))
    ms = (4.15 + 0.0378 * batch + 0.003 * verify_tokens + 0.0096 * past_knee
          + PREFILL_TOKEN_MS * other_tokens)
    if draft_steps:
        ms += DRAFT_COST_SCALE[0] * (0.69 + 0.0205 * batch + 0.165 * draft_steps)
    return ms


def h100_step_ms(batch: int, draft_steps: int, verify_tokens: int,
                 other_tokens: int = 0, cached_tokens: int = 0) -> float:
    """Robust least-squares fit over the 4057 decode steps of session 18's call-1 H100 trace
    (BASS default, 4x1024 draft, alpha 0.3 and the mix, batch 1-256, drafter graphs;
    `session18/traces_call1.tgz`; median abs. residual 0.5 ms): a plain step is 5.68 ms +
    0.049 ms per request; drafting at all adds 0.55 ms + 0.006 ms per request (the first
    pass), each draft step 0.17 + 0.0036 ms per request, each verified draft token 0.0072 ms.
    The switches below reshape it (LAW_SWITCHES), HOST_FLOOR_DRAFTS among them; H200_LAW
    replaces it."""
    if H200_S53_LAW[0]:
        return h200_s53_step_ms(batch, draft_steps, verify_tokens, other_tokens)
    if H200_LAW[0]:
        return h200_step_ms(batch, draft_steps, verify_tokens, other_tokens)
    ms = 5.68 + 0.049 * batch + 0.0072 * verify_tokens + PREFILL_TOKEN_MS * other_tokens
    one_draft = draft_steps == 1
    if draft_steps:  # a host-bound device bills at least HOST_FLOOR_DRAFTS draft steps
        draft_steps = max(draft_steps, HOST_FLOOR_DRAFTS[0])
        ms += DRAFT_COST_SCALE[0] * (0.55 + 0.006 * batch
                                     + draft_steps * (0.17 + 0.0036 * batch))
    if one_draft:
        ms += ONE_DRAFT_PREMIUM_MS[0]
    if KNEE_LAW[0]:
        decode_tokens = batch + verify_tokens
        past = min(decode_tokens, max(0, decode_tokens + other_tokens - KNEE_TOKENS))
        ms += KNEE_EXTRA_MS_PER_TOKEN * past
    if CONTEXT_LAW[0] and cached_tokens:  # cached tokens of the step's decoding requests
        extra = max(0, cached_tokens - LAW_CONTEXT * batch)
        ms += (KV_MS_PER_CACHED_TOKEN * extra
               + DRAFT_COST_SCALE[0] * DRAFT_KV_MS_PER_CACHED_TOKEN * extra * draft_steps)
    return ms


# A host-bound device (--host-floor-drafts N): a drafting step lasts at least what the law
# gives N draft steps, so up to N they cost the same; the host's work, not the GPU's, sets
# the period. Session 41's H200 traces (5x1280, 256-token prompts): at batch 16 one-, two-
# and three-draft steps took 6.62 / 6.80 / 6.60 ms (step medians) while the runner's host
# phases plus the scheduler took ~6 ms against 5.1-5.5 ms of kernels. 0: the law alone.
HOST_FLOOR_DRAFTS = [0]


# An engine's warm-up (--warmup-steps N --warmup-extra F): its first N steps take up to
# 1 + F times the law, falling linearly to 1 (session 43's H200 trace, 3x1536, batch 8:
# the first ~46 steps of a new engine took 7-14 ms where later ones of the same shape took
# 6.1-6.7). Counted over the scheduler's life, not one batch's.
WARMUP = [0, 0.0]


def warmup_factor(sched) -> float:
    """This step's warm-up factor, and one more step counted on `sched`."""
    steps, extra = WARMUP
    k = getattr(sched, "_sim_steps", 0)
    sched._sim_steps = k + 1
    return 1.0 + extra * max(0.0, 1.0 - k / steps) if steps else 1.0


MAX_MODEL_LEN = [512]  # raised for long prompts (--prompt-len)
# the module's switches (one-element lists) that shape the simulated device's law
LAW_SWITCHES = ("JITTER", "CONTEXT_LAW", "KNEE_LAW", "DRAFT_COST_SCALE", "MAX_MODEL_LEN",
                "ONE_DRAFT_PREMIUM_MS", "HOST_FLOOR_DRAFTS", "WARMUP", "H200_LAW",
                "H200_S53_LAW")


def law_state() -> tuple:
    """The switches' current values, in LAW_SWITCHES order."""
    return tuple(tuple(globals()[name]) for name in LAW_SWITCHES)


def scheduler(batch: int, policy: str, k: int, auto_off: bool, async_scheduling: bool,
              token_budget: int | None):
    """The engine's scheduler on a real VllmConfig (tests/test_scheduler.py builds it), with
    vLLM's largest CUDA-graph size as the verification budget, as on the GPU."""
    from tests.test_scheduler import _scheduler

    sched = _scheduler(async_scheduling, max_model_len=MAX_MODEL_LEN[0], measured_costs=True,
                       max_num_seqs=batch, draft_length_policy=policy,
                       num_speculative_tokens=k, auto_off=auto_off)
    sched.bass_token_budget = token_budget
    sched.bass_kv_per_weight = kv_per_weight_7b()
    sched.bass_costs.draft_step_floor = DRAFT_COST_SCALE[0] * draft_floor_4x1024_7b()
    return sched


class NeverDraft:
    """Plain decoding's plan: no drafts, ever (a `DraftLengthPolicy`). On BASS's scheduler
    and the simulated device, plain decoding's steps are scheduled, prefilled and timed as
    BASS's are."""

    name, stops_at_knee = "plain", False

    def plan(self, req_ids):
        from vllm_bass.policy.policies import DraftPlan

        return DraftPlan(0)

    def observe(self, verified) -> None:
        pass

    def forget(self, req_id: str) -> None:
        pass


def system_scheduler(system: str, batch: int):
    """`plain`: no drafts (`NeverDraft`); `kN`: fixed K=N without auto-off (vLLM
    draft_model's shape of plan, not its host costs); anything else: BASS's default policy
    (per_request, bound 16, auto-off); all async, with vLLM's largest CUDA-graph size (512)
    as the verification budget."""
    if system == "plain":
        sched = scheduler(batch, "fixed", 1, False, True, 512)
        sched.bass_policy = NeverDraft()
        return sched
    if system.startswith("k"):
        return scheduler(batch, "fixed", int(system[1:]), False, True, 512)
    return scheduler(batch, "per_request", 16, True, True, 512)


class SimulatedH100:
    """The device under a scheduler: geometric acceptance per request (`alpha_of`), each
    step's time from `h100_step_ms` with +-JITTER scatter on a virtual clock that the
    scheduler's `time.perf_counter` reads while the simulation runs (`with`)."""

    def __init__(self, sched, alpha_of: dict[str, float], seed: int):
        self.sched, self.alpha_of = sched, alpha_of
        self.rng = random.Random(seed)
        self.ms, self.steps, self.verified = 0.0, 0, 0

    def __enter__(self):
        import vllm_bass.scheduler as module

        self._module, self._real_time = module, module.time
        module.time = type("VirtualTime", (), {
            "perf_counter": staticmethod(lambda: self.ms / 1e3)})
        return self

    def __exit__(self, *exc):
        self._module.time = self._real_time

    def execute(self, out):
        """Run one scheduled step: accept each request's drafts, advance the clock."""
        accepted, verify = {}, 0
        for rid, drafts in out.scheduled_spec_decode_tokens.items():
            n = 0
            while n < len(drafts) and self.rng.random() < self.alpha_of[rid]:
                n += 1
            accepted[rid] = n
            verify += len(drafts)
        n = len(out.num_scheduled_tokens)
        drafted = self.sched.bass_draft_steps_run(out.num_spec_tokens_to_schedule, verify,
                                                  out.total_num_scheduled_tokens - n - verify)
        requests = self.sched.requests
        cached = sum(requests[r].num_computed_tokens for r in out.num_scheduled_tokens
                     if r in requests and requests[r].num_output_tokens > 0)
        self.ms += (h100_step_ms(n, drafted, verify, out.total_num_scheduled_tokens - n - verify,
                                 cached)
                    * self.rng.uniform(1 - JITTER[0], 1 + JITTER[0]) * warmup_factor(self.sched))
        self.steps += 1
        self.verified += verify
        return runner_output(self.sched, out, accepted)

    def step(self, pending: list) -> None:
        """One engine-core iteration (async keeps one step in flight): schedule, and
        execute and update the oldest scheduled step when its turn has come."""
        from tests.test_scheduler import _drafts

        sched = self.sched
        if sched.requests:
            pending.append(sched.schedule())
        if not pending or (sched.bass_async and len(pending) < 2 and sched.requests):
            return
        done = pending.pop(0)
        sched.update_from_output(done, self.execute(done))
        if not sched.bass_async:
            sched.update_draft_token_ids(_drafts(sched, done))


def run_batch(sched, alphas: list[float], max_tokens: int, seed: int,
              prompt_len: int = 8) -> dict:
    """Virtual wall time (ms) until every request of the closed batch finished."""
    from tests.test_scheduler import _add

    # ids unique per batch, as the engine's are: a reused id would inherit the previous
    # batch's per-request estimates (the scheduler forgets a request only once it is gone)
    alpha_of = {f"b{seed}r{i}": a for i, a in enumerate(alphas)}
    with SimulatedH100(sched, alpha_of, seed) as device:
        for rid in alpha_of:
            _add(sched, rid, prompt_len=prompt_len, max_tokens=max_tokens)
        pending: list = []
        while sched.requests or pending:
            device.step(pending)
            if device.steps > 20 * max_tokens:
                raise RuntimeError("no progress")
    return {"ms": device.ms, "steps": device.steps, "verified": device.verified}


def runner_output(sched, out, accepted: dict[str, int]):
    """The runner's output for `out`: per request 1 + accepted tokens, none for a prefill
    chunk that does not reach the prompt's end (chunked prefill of long prompts)."""
    from tests.test_scheduler import _output

    computed = {r.req_id: r.num_computed_tokens for r in out.scheduled_new_reqs}
    cached = out.scheduled_cached_reqs
    computed.update(zip(cached.req_ids, cached.num_computed_tokens))
    result = _output(out, accepted)
    for i, rid in enumerate(result.req_ids):
        request = sched.requests.get(rid)
        if request is not None and (computed.get(rid, 0) + out.num_scheduled_tokens[rid]
                                    < request.num_prompt_tokens):
            result.sampled_token_ids[i] = []
    return result


def run_continuous(sched, alphas: list[float], max_tokens: int, concurrency: int,
                   seed: int, prompt_len: int = 128) -> dict:
    """`vs_vllm.py --workload continuous` on the simulated H100: the requests of `alphas`
    (in order) with `concurrency` kept in flight, a finished request replaced before the
    next step; tokens per virtual ms until the last request is submitted (the tail after
    it is not counted, as there)."""
    from tests.test_scheduler import _add

    alpha_of = {f"c{seed}r{i}": a for i, a in enumerate(alphas)}
    queue = list(alpha_of)
    finished_tokens, window = 0, None
    with SimulatedH100(sched, alpha_of, seed) as device:
        pending: list = []
        while sched.requests or pending or queue:
            while queue and len(sched.requests) < concurrency:
                _add(sched, queue.pop(0), prompt_len=prompt_len, max_tokens=max_tokens)
            if not queue and window is None:
                running = sum(r.num_output_tokens for r in sched.requests.values())
                window = (device.ms, finished_tokens + running)
            before = set(sched.requests)
            device.step(pending)
            finished_tokens += max_tokens * len(before - set(sched.requests))
            if device.steps > 20 * max_tokens * len(alphas):
                raise RuntimeError("no progress")
    return {"tokens_per_ms": window[1] / window[0], "steps": device.steps}


def plain_makespan_ms(batch: int, max_tokens: int, prompt_len: int, seeds: int = 1) -> float:
    """Plain decoding's closed batch on the simulated device (its prefill and context growth
    included), the mean over `seeds` (the step-time jitter). It does not depend on the
    acceptance or the policy: the A/Bs ask once per batch size, not once per cell."""
    return _plain_makespan_ms(batch, max_tokens, prompt_len, seeds, *law_state())


@functools.lru_cache(maxsize=64)
def _plain_makespan_ms(batch: int, max_tokens: int, prompt_len: int, seeds: int,
                       *law) -> float:
    """(`law`: the module's switches, so a changed law is simulated afresh.)"""
    times = []
    for seed in range(seeds):
        sched = system_scheduler("plain", batch)
        if WARMUP[0]:  # warmed up as the variants are (`sim_policy_ab.makespan_ratio`)
            run_batch(sched, [0.0] * batch, max_tokens, 1000 + 17 * seed, prompt_len)
        times.append(run_batch(sched, [0.0] * batch, max_tokens, seed, prompt_len)["ms"])
    return statistics.mean(times)


def alphas_for(acceptance: str, batch: int) -> list[float]:
    if acceptance == "mix":
        return [MIX_PATTERN[i % 4] for i in range(batch)]
    return [float(acceptance)] * batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="1,8,32,64,128,256")
    ap.add_argument("--acceptance", default="0.6,0.8,0.9,mix")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--fixed-k", default="1,3,5")
    ap.add_argument("--sync", action="store_true", help="sync scheduling (default: async)")
    ap.add_argument("--warm-batches", type=int, default=1,
                    help="closed batches run first on the same scheduler (cost fit, pool)")
    ap.add_argument("--jitter", type=float, default=0.0)
    ap.add_argument("--prompt-len", type=int, default=8,
                    help="prompt tokens (their prefill costs PREFILL_TOKEN_MS a token)")
    ap.add_argument("--context-law", action="store_true",
                    help="decode steps pay for their cached tokens (CONTEXT_LAW)")
    ap.add_argument("--knee-law", action="store_true",
                    help="decode tokens past the GEMMs' knee cost more (KNEE_LAW)")
    ap.add_argument("--draft-cost-scale", type=float, default=1.0,
                    help="the law's draft terms times this (a dearer draft shape)")
    ap.add_argument("--h200-law", action="store_true",
                    help="session 49's H200 law in place of the H100's (H200_LAW)")
    ap.add_argument("--h200-law-s53", action="store_true",
                    help="session 53's H200 law in place of the H100's (H200_S53_LAW)")
    ap.add_argument("--one-draft-premium-ms", type=float, default=0.0,
                    help="a one-draft step costs this much more (session 40's H200 trace)")
    ap.add_argument("--host-floor-drafts", type=int, default=0,
                    help="a drafting step lasts at least N draft steps (host-bound device)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    JITTER[0] = args.jitter
    DRAFT_COST_SCALE[0] = args.draft_cost_scale
    ONE_DRAFT_PREMIUM_MS[0] = args.one_draft_premium_ms
    HOST_FLOOR_DRAFTS[0] = args.host_floor_drafts
    CONTEXT_LAW[0] = args.context_law
    KNEE_LAW[0] = args.knee_law
    H200_LAW[0] = args.h200_law
    H200_S53_LAW[0] = args.h200_law_s53
    MAX_MODEL_LEN[0] = max(512, args.prompt_len + args.max_tokens + 64)
    rows = []
    for acceptance in args.acceptance.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            alphas = alphas_for(acceptance, batch)
            plain = plain_makespan_ms(batch, args.max_tokens, args.prompt_len, args.seeds)
            row = {"acceptance": acceptance, "batch": batch, "plain_ms": plain}
            systems = [("bass", "per_request", 16, True)] + [
                (f"k{k}", "fixed", int(k), False) for k in args.fixed_k.split(",") if k]
            for name, policy, k, auto_off in systems:
                times = []
                for seed in range(args.seeds):
                    sched = scheduler(batch, policy, k, auto_off, not args.sync, 512)
                    for w in range(args.warm_batches):
                        run_batch(sched, alphas, args.max_tokens, 1000 + 17 * seed + w,
                                  args.prompt_len)
                    times.append(run_batch(sched, alphas, args.max_tokens, seed,
                                           args.prompt_len)["ms"])
                row[name] = plain / statistics.mean(times)
            rows.append(row)
            print(f"{acceptance:>4} b{batch:<4} " + " ".join(
                f"{n}={row[n]:.2f}x" for n, *_ in systems), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
