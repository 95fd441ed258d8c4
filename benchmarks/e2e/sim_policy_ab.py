"""Policy A/Bs without a device: per_request variants on `sim_closed_batch.py`'s simulated
H100 (session 18's step law, step-time jitter), closed batches of 128 new tokens; plain
decoding's makespan over each variant's (higher is better), fixed K for reference.

    # session 19: the closed-batch plan
    python benchmarks/e2e/sim_policy_ab.py --variants closed_plan,open_plan \\
        --out benchmarks/results/session19/sim_closed_plan_ab.json
    # session 21: when auto-off measures plain decoding (CONFIDENT_SPEEDUP)
    python benchmarks/e2e/sim_policy_ab.py --variants confident1.3,confident1.2 \\
        --acceptance 0.3,0.4,0.5,0.6,0.7,0.8,mix --batches 1,8,32,64,128 --fixed-k 2,3 \\
        --out benchmarks/results/session21/sim_confident_speedup_ab.json

Variants: `closed_plan` / `open_plan` (`closed_batch_plan` on / off), `confidentX` (the
predicted speedup above which no off-step measures plain decoding), `hardknee` (the
256-token bound instead of the knee price), `s29fit` (the step-cost fit before session
30: no per-request term, its prior scaled by every step's mean), `sumknee` (a token past
the knee at the fitted price plus the knee's, the default before session 32; session 31's
`overfitknee` is the default since), `closed_uniform` (session 39, dropped: a closed
batch drafts its cap for every request, not ragged lengths within it), `linearfit` / `onedraftfit`
(the step-cost fit without / with session 40's one-draft premium; without is the default
again since session 41), `borrowfit` (session 51: a bucket with few drafting steps plans
with the nearest mature one, VLLM_BASS_COST_FIT=borrow), `explore`
(session 40, dropped: length exploration on), `replan_s40` / `replan_loose` (session 41:
when a plan is solved again, session 40's rule / a looser one than the default),
`nofloor` (session 53: no floor under a verified token's price below the knee,
VLLM_BASS_COST_FIT=session52), `noreuse` / `reuse8` (session 54: a batch of 32+ solves its
plan afresh as before, VLLM_BASS_PLAN_REUSE=0 / keeps it 8 steps, not 4), `draftpriorX[_Y]` (session 42: the cost prior's draft step
at X plain steps, 0.12 the default, and its first pass at Y, 0.05), `default`. (Session
40's dropped `probeN`, probes of N drafts, needed a policy hook: git history at ba0ce8e.)
`oracle` (session 43: the law's own costs in place of the fit), `closedoff` (session 43, not
adopted: a closed batch's `closed_batch_cap` may turn the batch off too; `closedoffX`,
session 49: where off is expected X sooner than drafting; the default since with X = 0.1;
`closedkeep`: the token rate alone turns a batch off, as before), `uniformX` (session 55:
one length for all unless the ragged plan promises X more, `uniform_plan_margin`), `A+B`
(both).
(Session 43's `unbounded`, against plans held within 2 of the longest draft the cost fit
was solved with, lives in git history at b708583; not adopted.)
(Session 43's `freeswitch`, an async off-step that verifies drafts without a draft pass, is
the default since; the code before it: 3653854.)
`--one-draft-premium-ms` gives the simulated device session 40's one-draft premium.
(Session 29's `offshareX`, the off-steps' least share of the cost fit, lives in git history
at c63dd22.)

    # session 53: the floor under a verified token's price, on session 53's H200 law
    python benchmarks/e2e/sim_policy_ab.py --h200-law-s53 \
        --variants measured,measured+nofloor --fixed-k 1,2,3 \
        --acceptance mix,0.3,0.6,0.8 --batches 8,32,64,128,256 \
        --out benchmarks/results/session53/sim_token_floor_ab_h200_s53_law.json
    # session 54: a large batch's plan kept 4 steps (the default) against solved afresh
    python benchmarks/e2e/sim_policy_ab.py --h200-law-s53 \
        --variants measured,measured+noreuse,measured+reuse8 --fixed-k 1,2 \
        --acceptance mix,0.3,0.6,0.8,0.9 --batches 32,64,128,256 \
        --out benchmarks/results/session54/sim_plan_reuse_h200_s53_law.json
    # session 29: the knee price at 1024-token prompts
    python benchmarks/e2e/sim_policy_ab.py --variants default,hardknee \
        --acceptance 0.6,0.8 --batches 8,32,64 --prompt-len 1024 --context-law
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import sim_closed_batch as scb  # noqa: E402

from vllm_bass.policy.auto_off import CONFIDENT_SPEEDUP as DEFAULT_CONFIDENT  # noqa: E402
from vllm_bass.policy import per_request  # noqa: E402
from vllm_bass.policy.cost_model import PRIOR_COSTS, StepCostEstimator  # noqa: E402

# when a plan is solved again (`per_request._plan_stands`): the defaults, and variants
REPLAN_DEFAULTS = {name: getattr(per_request, name) for name in (
    "REPLAN_ALPHA_CHANGE", "REPLAN_MEAN_CHANGE", "REPLAN_EVERY", "COST_TOLERANCE",
    "PLAN_REUSE_STEPS", "PLAN_REUSE_MIN_BATCH", "REPLAN_NEAR_END")}
REPLAN_VARIANTS = {
    # session 40's rule: any estimate 0.05, every 4 steps, any change of the costs
    "replan_s40": {"REPLAN_ALPHA_CHANGE": 0.05, "REPLAN_MEAN_CHANGE": 1.0,
                   "REPLAN_EVERY": 4, "COST_TOLERANCE": 0.0},
    "replan_loose": {"REPLAN_ALPHA_CHANGE": 0.2, "REPLAN_MEAN_CHANGE": 0.06,
                     "REPLAN_EVERY": 16, "COST_TOLERANCE": 0.05},
    # session 54: a large batch's plan solved afresh whenever the rules above say so, as
    # before its plan reuse (PLAN_REUSE_STEPS calls from PLAN_REUSE_MIN_BATCH requests)
    "noreuse": {"PLAN_REUSE_STEPS": 0},
    "reuse8": {"PLAN_REUSE_STEPS": 8},
    # session 56 (the default's host time at batch 8-32, where its device waits for the
    # host): plan reuse from 2 requests, not 32 / no forced replan near a closed batch's end
    # (REPLAN_NEAR_END tokens: every step once any request is that close)
    "reuse_all": {"PLAN_REUSE_MIN_BATCH": 2},
    "nearend0": {"REPLAN_NEAR_END": 0},
}


def oracle_costs(batch: int):
    """The simulated law's own relative costs at `batch` requests (the law's context term
    left out): what a perfect cost fit would give the policy."""
    from vllm_bass.policy.cost_model import StepCostModel

    plain = scb.h100_step_ms(batch, 0, 0)
    one = scb.h100_step_ms(batch, 1, 0) - plain
    step = scb.h100_step_ms(batch, 2, 0) - plain - one
    token = (scb.h100_step_ms(batch, 0, 1) - plain)
    return StepCostModel(base=1.0, per_draft_step=step / plain, per_verify_token=token / plain,
                         draft_pass=(one - step) / plain)


def configure(variant: str, sched) -> None:
    """Set the variant on a fresh scheduler's policy (and the module constants it reads,
    back to their defaults first); `A+B` sets both."""
    from vllm_bass.policy import auto_off

    auto_off.CONFIDENT_SPEEDUP = DEFAULT_CONFIDENT
    for name, value in REPLAN_DEFAULTS.items():
        setattr(per_request, name, value)
    for part in variant.split("+"):
        _configure_part(part, sched)


def _configure_part(variant: str, sched) -> None:
    from vllm_bass.policy import auto_off

    floor = sched.bass_costs.draft_step_floor  # kept by the variants that swap the fit
    if variant.startswith("confident"):
        auto_off.CONFIDENT_SPEEDUP = float(variant[len("confident"):])
    for name, value in REPLAN_VARIANTS.get(variant, {}).items():
        setattr(per_request, name, value)
    if variant in ("closed_plan", "open_plan"):
        sched.bass_policy.closed_batch_plan = variant == "closed_plan"
    elif variant == "hardknee":  # session 28's bound: no knee price
        sched.bass_kv_per_weight = None
    elif variant == "sumknee":  # VLLM_BASS_KNEE_PRICE=sum (the default before session 32)
        sched._bass_knee_sum = True
    elif variant == "nofloor":  # VLLM_BASS_COST_FIT=session52: no floor under a verified
        # token's price below the knee (the default since session 53 holds it at half the
        # knee's price)
        sched._bass_token_floor = 0.0
    elif variant == "closed_uniform":  # a closed batch drafts the cap for every request
        policy = sched.bass_policy
        policy.lengths_within = lambda alphas, cap: [cap] * len(alphas)
    elif variant == "explore":  # draft-length exploration on (off since session 14)
        sched.bass_policy.explore_enabled = True
    elif variant == "s29fit":  # the step-cost fit before session 30
        sched.bass_costs = StepCostEstimator(session29_fit=True, one_draft_term=False,
                                             draft_step_floor=floor)
    elif variant == "linearfit":  # no one-draft premium (the default again since session 41)
        sched.bass_costs = StepCostEstimator(one_draft_term=False, draft_step_floor=floor)
    elif variant == "onedraftfit":  # session 40's default: the one-draft premium
        sched.bass_costs = StepCostEstimator(one_draft_term=True, draft_step_floor=floor)
    elif variant == "borrowfit":  # session 51: a young bucket plans with the nearest mature
        sched.bass_costs = StepCostEstimator(borrow_young=True, draft_step_floor=floor)
    elif variant.startswith("draftprior"):  # the cost prior's draft step (and, after a
        # "_", its first pass), in plain steps: draftprior0.04 or draftprior0.04_0.10
        step, _, first = variant[len("draftprior"):].partition("_")
        prior = dataclasses.replace(PRIOR_COSTS, per_draft_step=float(step),
                                    draft_pass=float(first or PRIOR_COSTS.draft_pass))
        sched.bass_costs = StepCostEstimator(prior=prior, draft_step_floor=floor)
    elif variant == "oracle":  # the law's true costs in place of the fit (session 43)
        sched.bass_costs.model_for = oracle_costs
    elif variant.startswith("floor"):  # the fit's draft-step floor in plain steps (session
        # 44: the scheduler's `draft_step_cost_floor`; 4x1024 on the 7B shape: 0.0063)
        sched.bass_costs.draft_step_floor = float(variant[len("floor"):])
    elif variant == "measured":  # session 46: the fit's draft step held at or above the
        # law's own draft step (what VLLM_BASS_MEASURED_DRAFT_STEP=1 measures at start-up)
        sched.bass_costs.set_measured_draft_steps({
            rows: (scb.h100_step_ms(rows, 3, 0) - scb.h100_step_ms(rows, 2, 0)) / 1000
            for rows in (1, 2, 4, 8, 16, 32, 64, 128, 256)})
    elif variant.startswith("closedoff"):  # a closed batch's cap decides drafting at all
        # (session 43); closedoffX (session 49): only where off is expected to end the batch
        # X sooner than its best drafting length (the default since: X = 0.1)
        sched.bass_policy.closed_decides_off = True
        sched.bass_policy.closed_off_margin = float(variant[len("closedoff"):] or 0.0)
    elif variant.startswith("uniform"):  # session 55: one length for all unless the ragged
        # plan promises X more (BassConfig.uniform_plan_margin; uniform0.05)
        sched.bass_policy.uniform_plan_margin = float(variant[len("uniform"):])
    elif variant == "closedkeep":  # closed_batch_off_margin None: drafting at all is the
        # token rate's call alone (the default before session 49)
        sched.bass_policy.closed_decides_off = False
    elif (variant != "default" and not variant.startswith("confident")
          and variant not in REPLAN_VARIANTS):
        raise SystemExit(f"unknown variant {variant!r}")


def makespan_ratio(variant: str, acceptance: str, batch: int, seeds: int) -> float:
    alphas = scb.alphas_for(acceptance, batch)
    times = []
    for seed in range(seeds):
        sched = scb.system_scheduler(variant, batch)
        if not variant.startswith("k"):
            configure(variant, sched)
        scb.run_batch(sched, alphas, 128, 1000 + 17 * seed, PROMPT_LEN[0])  # warm
        times.append(scb.run_batch(sched, alphas, 128, seed, PROMPT_LEN[0])["ms"])
    return scb.plain_makespan_ms(batch, 128, PROMPT_LEN[0], seeds) / statistics.mean(times)


PROMPT_LEN = [8]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="closed_plan,open_plan")
    ap.add_argument("--acceptance", default="mix,0.6,0.9,0.3")
    ap.add_argument("--batches", default="8,32,64,256")
    ap.add_argument("--fixed-k", default="", help="fixed K without auto-off, for reference")
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--jitter", type=float, default=0.15)
    ap.add_argument("--prompt-len", type=int, default=8)
    ap.add_argument("--context-law", action="store_true",
                    help="decode steps pay for their cached tokens (sim_closed_batch)")
    ap.add_argument("--knee-law", action="store_true",
                    help="decode tokens past the GEMMs' knee cost more (KNEE_LAW)")
    ap.add_argument("--draft-cost-scale", type=float, default=1.0,
                    help="the law's draft terms times this (sim_closed_batch)")
    ap.add_argument("--h200-law", action="store_true",
                    help="session 49's H200 law in place of the H100's (sim_closed_batch)")
    ap.add_argument("--h200-law-s53", action="store_true",
                    help="session 53's H200 law in place of the H100's (sim_closed_batch)")
    ap.add_argument("--one-draft-premium-ms", type=float, default=0.0,
                    help="a one-draft step costs this much more (sim_closed_batch)")
    ap.add_argument("--host-floor-drafts", type=int, default=0,
                    help="a drafting step lasts at least N draft steps (sim_closed_batch)")
    ap.add_argument("--warmup-steps", type=int, default=0,
                    help="an engine's first N steps are slower (sim_closed_batch.WARMUP)")
    ap.add_argument("--warmup-extra", type=float, default=0.5,
                    help="... the first by this share of the law, falling to 0 at N")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    scb.JITTER[0] = args.jitter
    scb.HOST_FLOOR_DRAFTS[0] = args.host_floor_drafts
    scb.DRAFT_COST_SCALE[0] = args.draft_cost_scale
    scb.ONE_DRAFT_PREMIUM_MS[0] = args.one_draft_premium_ms
    scb.CONTEXT_LAW[0] = args.context_law
    scb.KNEE_LAW[0] = args.knee_law
    scb.H200_LAW[0] = args.h200_law
    scb.H200_S53_LAW[0] = args.h200_law_s53
    scb.WARMUP[:] = [args.warmup_steps, args.warmup_extra]
    PROMPT_LEN[0] = args.prompt_len
    scb.MAX_MODEL_LEN[0] = max(512, args.prompt_len + 128 + 64)
    variants = args.variants.split(",") + [f"k{k}" for k in args.fixed_k.split(",") if k]
    rows = []
    for acceptance in args.acceptance.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            row = {"acceptance": acceptance, "batch": batch}
            for variant in variants:
                row[variant] = makespan_ratio(variant, acceptance, batch, args.seeds)
            rows.append(row)
            print(row, flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(
            {"device": "none (simulated %s step law)" % (
                "session 53's H200" if args.h200_law_s53 else
                "H200" if args.h200_law else "H100"),
             "h200_law": args.h200_law, "h200_law_s53": args.h200_law_s53,
             "seeds": args.seeds,
             "jitter": args.jitter, "prompt_len": args.prompt_len,
             "context_law": args.context_law, "knee_law": args.knee_law,
             "draft_cost_scale": args.draft_cost_scale,
             "one_draft_premium_ms": args.one_draft_premium_ms,
             "host_floor_drafts": args.host_floor_drafts,
             "warmup": [args.warmup_steps, args.warmup_extra], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
