"""The one typed, validated BASS configuration.

Users write it inside vLLM's speculative config (`{"method": "bass", "model": DRAFT, ...}`) or
through the CLI flags the plugin adds; the plugin turns it into vLLM's own `draft_model`
speculative config plus this object, which travels to every process inside
`VllmConfig.additional_config["bass"]` (a plain dict, so it pickles and serialises anywhere).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

ADDITIONAL_CONFIG_KEY = "bass"
MAX_DRAFT_TOKENS = 32  # the paper's l_limit, and the most draft tokens one step may carry
DRAFT_LENGTH_POLICIES = ("bass", "per_request", "fixed")
# Draft passes in a row that may raise (`worker/drafter/faults.py`) before speculation is
# turned off for the engine's life (plain decoding, ERROR log). Each faulting pass drafts
# nothing and costs no output; a fault this persistent is a broken draft, not a transient.
MAX_CONSECUTIVE_DRAFT_FAULTS = 5
DRAFT_SAMPLE_METHODS = ("probabilistic", "greedy")
ACCEPTANCE_MODES = ("standard", "synthetic")
ATTENTION_CHOICES = ("bass", "target", "vllm")

DraftLengthPolicyName = Literal["bass", "per_request", "fixed"]
# options that also have a CLI flag of their own (patches/engine_args_cli.py); every option
# can be given as a key of --speculative-config / speculative_config
CLI_FLAG_FIELDS = ("num_speculative_tokens", "draft_length_policy")
DEFAULT_POLICY = "per_request"
PER_REQUEST_MAX_DRAFT = 16  # see default_max_draft


def default_max_draft(policy: str) -> int:
    """Most draft tokens per sequence and step when the user gives none (also the KV
    lookahead reserved per sequence). `per_request` picks each sequence's length from
    the measured step costs, so its bound only caps long drafts, which pay at high
    acceptance: at alpha 0.9 the policy drafts 12-13 under bound 16 and sits at 8 under
    bound 8, and 16 ran 1.15x / 1.05x bound 8 at batch 1 / 8 (H100, session 23, call 6;
    elsewhere within the run-to-run spread, 0.8% faster over nine settings). Until session
    23 the bound also sized the verification graphs' attention plans, which made 16 lose
    to 8 by 3-10% at batch 8 / 32: `attention.backend.PLANNED_DRAFTS` caps those now.
    `bass` (Algorithm 1) grows to the paper's l_limit; `fixed` drafts exactly this many."""
    return {"bass": MAX_DRAFT_TOKENS, "per_request": PER_REQUEST_MAX_DRAFT,
            "fixed": 7}.get(policy, PER_REQUEST_MAX_DRAFT)


class BassConfigError(ValueError):
    """A BASS option is wrong; the message names the flag or field and what would be valid."""


# A bass verification holds at most this many tokens (the scheduler's step budget; at large
# batches 4 per request; `verify_knee_tokens` says how the other policies treat it): where
# a dense target's forward turns from reading its weights (flat in tokens) to compute
# (linear): peak bf16 FLOP/s over
# memory bytes/s, ~295 tokens on an H100 (A100 ~156, H200 ~206), whatever the model's size
# (both scale with its parameters). Past it each drafted token costs a full token of compute,
# which the step-cost model's one linear price per verified token (fitted mostly below the
# knee) underrates: BASS drafted 10.7 tokens per request at batch 32 and 5.9 at 64 where
# vLLM's K=5 and K=3 (192 / 256 tokens) ran 1.10x faster (H100, session 11). A dense bf16
# target is assumed: an MoE target (weights read >> weights used per token) or fp8 weights
# have a higher knee, where this constant is conservative (not measured).
DEFAULT_VERIFY_KNEE_TOKENS = 256


@dataclass
class BassConfig:
    """Options of the BASS speculative worker (all but `draft_model` have defaults)."""

    draft_model: str
    # Upper bound on the draft length of any sequence in any step; also what the scheduler
    # reserves as KV lookahead. For the `fixed` policy it is the draft length itself.
    num_speculative_tokens: int = PER_REQUEST_MAX_DRAFT  # see default_max_draft
    draft_length_policy: DraftLengthPolicyName = DEFAULT_POLICY
    # Paper Algorithm 1 constants (l0, l_incre, l_mod; l_limit is num_speculative_tokens).
    initial_draft_length: int = 7
    draft_length_increment: int = 2
    draft_length_shrink_divisor: int = 10
    # Stop drafting when the step cost model and the acceptance estimates predict speculation
    # is slower than plain decoding (large batches, low acceptance); a one-token probing step
    # after 16 off-steps (doubling after each rejected probe, up to 256) re-measures acceptance. `bass`/`fixed`: the whole batch, else their own plan
    # unchanged; `per_request`: per sequence too. False: always draft (at least 1 token).
    auto_off: bool = True
    # How the draft samples its tokens when the request samples (temperature > 0):
    # "probabilistic" samples from the draft's distribution q and verifies with min(1, p/q);
    # "greedy" proposes the draft argmax (q is a point mass). Both are exact.
    draft_sample_method: Literal["probabilistic", "greedy"] = "probabilistic"
    # Acceptance process. "synthetic" replaces the accept test with fixed per-position rates
    # (benchmarks on dummy weights, as vLLM's rejection_sample_method="synthetic").
    acceptance_mode: Literal["standard", "synthetic"] = "standard"
    synthetic_acceptance_rates: list[float] | None = None
    # Heterogeneous synthetic acceptance: each request draws one of these rate lists.
    synthetic_acceptance_rate_groups: list[list[float]] | None = None
    # Check that the draft's tokenizer is the target's (disable only for known-compatible pairs).
    check_tokenizer: bool = True
    # EMA factor of the per-request acceptance estimates (per_request policy and auto-off).
    # (At 0.2 the estimates of a homogeneous alpha-0.8 batch spread from 0.52 to 0.92, 10th to
    # 90th percentile, H100 trace at batch 256; 0.05 narrows that but reacts too slowly for
    # auto-off: the host-bound closed-loop test fell from >= 0.9x to 0.82x plain, session 9.)
    acceptance_ema: float = 0.2
    # Attention on CUDA: "bass" (the default) runs our Triton kernels (vLLM's CUSTOM backend)
    # for target and draft wherever the model allows it and no backend was chosen
    # explicitly (--attention-backend / the speculative config's attention_backend win;
    # other models keep vLLM's choice, `default_backend_unsupported`); "target" for the
    # target only; "vllm" leaves the choice to vLLM (FA3 on Hopper). Since the drafter's
    # first pass also replays full graphs on our backend (session 20), BASS on ours against
    # BASS on FA3, H100, 4x1024, batch 1-256: alpha 0.8 1.04 / 0.92 / 1.12 / 1.00 / 1.01 /
    # 1.05x, the mix 1.02 / 1.04 / 1.06 / 0.95 / 1.03 / 1.06x (docs/history.md, session 20).
    # CPU always uses vLLM's CPU attention.
    attention: Literal["bass", "target", "vllm"] = "bass"
    # CUDA: full CUDA graphs for the target's ragged verification batches where its
    # attention backend supports full graphs for any batch (FA3); vLLM's default runs them
    # piecewise, host-bound on a 7B shape (model_runner). False keeps vLLM's choice.
    full_graph_verification: bool = True
    # The drafter's one-token steps as full CUDA graphs, one per captured batch size
    # (drafter/draft_graphs.py), and its first pass, one per captured token count
    # (drafter/first_pass_graphs.py; VLLM_BASS_FIRST_PASS_GRAPHS=0 leaves that one to
    # vLLM); vLLM runs both piecewise with attention eager, which made drafting
    # host-bound (H100, session 16: draft host time 3.4 -> 1.2 ms a step at batch 1).
    # False keeps vLLM's draft loop.
    full_graph_drafting: bool = True
    # Verification tokens per step where the target turns compute-bound
    # (DEFAULT_VERIFY_KNEE_TOKENS says why): per_request prices the tokens past it
    # (`cost_model.knee_price`), bass stops there, fixed drafts its K (only the largest CUDA
    # graph bounds it; `FixedDraftLength` says why); 0: no knee, only the largest CUDA graph
    # bounds a verification.
    verify_knee_tokens: int = DEFAULT_VERIFY_KNEE_TOKENS
    # per_request (experimental): one draft length for all sequences (fixed K's plan and
    # engine path) unless the ragged optimum promises this fraction more tokens per unit of
    # step time under the cost model; 0: always the ragged optimum. Session 12 (H100, 8x1024
    # draft, alpha 0.8): steps of one shape took 14.1 / 21.6 ms at batch 64 / 128 under
    # per-request plans and 12.6 / 20.2 under fixed K=3 (cause not found: the scheduler's
    # host time differs by <= 0.45 ms), but the closed-batch simulation loses 4-6% with 0.1
    # (session 10, with the remaining-token weights then in use), and a mix run with
    # 0.1 took 21-54% off-steps; not the default until an A/B on one machine says so.
    uniform_plan_margin: float = 0.0
    # per_request: while the step-cost fit has seen one draft length only for a batch size,
    # every 8th drafting step drafts longer, so the costs of the draft's first pass, a
    # further draft step and a verified token separate (policy/per_request.py,
    # EXPLORE_INTERVAL). Closed-batch simulation of the H100 step law: alpha 0.6, batch 32
    # 1.11 -> 1.27x plain (the plan had settled on one token), batch 256 1.01 -> 1.06x;
    # elsewhere within +-2%. Off: on the H100 it lost 8-17% at 6 of 8 settings (8x1024,
    # alpha 0.6 and the mix, batch 8-128; session 14, docs/design.md).
    explore_draft_lengths: bool = False
    # per_request: a closed batch (no request waits or joins running ones:
    # `BassScheduler.is_closed_batch`) takes the longest draft that minimises
    # its expected remaining time (policy/per_request.py, closed_batch_cap) instead of the
    # one that maximises tokens per second; drafting at all stays the latter's call.
    # False: every batch plans for tokens per second (A/B measurements).
    closed_batch_plan: bool = True
    # per_request, a closed batch: its objective turns a drafting batch off where it expects
    # off to end the batch at least this fraction sooner than its best drafting length
    # (the mix at batch 128-256 on the H200: one draft makes a step 1.6x an off-step, and
    # the alpha-0.3 quarter holds the batch ~90+ steps at any length; closed-batch simulation
    # of session 49's H200 law +3% there, within 0.3% elsewhere; a margin of 0.06 gained
    # 4% there and lost 0.9% on the mix at batch 8, where noisy estimates of the slow
    # quarter once turned steps off: H100, session 19). None: drafting at all is the token
    # rate's call alone (before session 49).
    closed_batch_off_margin: float | None = 0.1
    # An idle engine that receives requests keeps taking those that follow within 1 ms
    # of each other, for at most this long, before its first step
    # (patches/engine_core_burst_window.py): a burst (LLM.generate over a list, a
    # fan-out) then prefills in one step instead of two. Costs an idle engine's lone
    # request one 1 ms gap of waiting. 0: off (vLLM's behaviour).
    burst_window_ms: float = 4.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def max_draft_tokens(self) -> int:
        return self.num_speculative_tokens

    def validate(self) -> None:
        def bad(name: str, valid: str, got: Any) -> BassConfigError:
            where = (f"flag --{name.replace('_', '-')} or " if name in CLI_FLAG_FIELDS else "")
            return BassConfigError(
                f"BASS option '{name}' ({where}speculative_config['{name}']) must be "
                f"{valid}; got {got!r}"
            )

        if not isinstance(self.draft_model, str) or not self.draft_model:
            raise BassConfigError(
                "--spec-worker bass needs a draft model: pass --speculative-model DRAFT "
                "(or 'model' in --speculative-config / speculative_config)"
            )
        k = self.num_speculative_tokens
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_DRAFT_TOKENS:
            raise bad("num_speculative_tokens", f"an integer in 1..{MAX_DRAFT_TOKENS}", k)
        if self.draft_length_policy not in DRAFT_LENGTH_POLICIES:
            raise bad("draft_length_policy", f"one of {DRAFT_LENGTH_POLICIES}",
                      self.draft_length_policy)
        for name in ("initial_draft_length", "draft_length_increment",
                     "draft_length_shrink_divisor"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(name, "a positive integer", v)
        m = self.uniform_plan_margin
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0.0 <= m <= 1.0:
            raise bad("uniform_plan_margin", "a number in [0, 1] (0: off)", m)
        c = self.closed_batch_off_margin
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float))
                              or not 0.0 <= c <= 1.0):
            raise bad("closed_batch_off_margin",
                      "a number in [0, 1], or null (the token rate alone decides off)", c)
        w = self.burst_window_ms
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= w <= 100.0:
            raise bad("burst_window_ms", "a number of milliseconds in [0, 100] (0: off)", w)
        v = self.verify_knee_tokens
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad("verify_knee_tokens", "a non-negative integer (0: no knee)", v)
        if self.draft_sample_method not in DRAFT_SAMPLE_METHODS:
            raise bad("draft_sample_method", f"one of {DRAFT_SAMPLE_METHODS}",
                      self.draft_sample_method)
        if self.acceptance_mode not in ACCEPTANCE_MODES:
            raise bad("acceptance_mode", f"one of {ACCEPTANCE_MODES}", self.acceptance_mode)
        if self.attention not in ATTENTION_CHOICES:
            raise bad("attention", f"one of {ATTENTION_CHOICES}", self.attention)
        for name in ("auto_off", "check_tokenizer", "full_graph_verification",
                     "full_graph_drafting", "explore_draft_lengths", "closed_batch_plan"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, "true or false", getattr(self, name))
        if not 0.0 < float(self.acceptance_ema) <= 1.0:
            raise bad("acceptance_ema", "in (0, 1]", self.acceptance_ema)
        if self.acceptance_mode == "synthetic":
            groups = self.synthetic_rate_groups()
            if not groups:
                raise bad("synthetic_acceptance_rates",
                          "a list of per-position acceptance rates when "
                          "acceptance_mode='synthetic'", None)
            for rates in groups:
                if not rates or len(rates) > MAX_DRAFT_TOKENS or any(
                        not 0.0 <= float(r) <= 1.0 for r in rates):
                    raise bad("synthetic_acceptance_rates",
                              f"1..{MAX_DRAFT_TOKENS} rates in [0, 1]", rates)
                if any(b > a for a, b in zip(rates, rates[1:])):
                    raise bad("synthetic_acceptance_rates",
                              "non-increasing (unconditional rates per position)", rates)
        elif self.synthetic_acceptance_rates or self.synthetic_acceptance_rate_groups:
            raise bad("acceptance_mode", "'synthetic' when synthetic acceptance rates are given",
                      self.acceptance_mode)

    def synthetic_rate_groups(self) -> list[list[float]]:
        groups = list(self.synthetic_acceptance_rate_groups or [])
        if self.synthetic_acceptance_rates:
            groups.insert(0, list(self.synthetic_acceptance_rates))
        return groups

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, options: dict[str, Any]) -> "BassConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise BassConfigError(
                f"unknown BASS option(s) {unknown}; valid options: {sorted(known - {'extra'})}"
            )
        return cls(**options)


def bass_config_from_vllm(vllm_config: Any) -> BassConfig | None:
    """The BassConfig carried by a VllmConfig, or None when BASS is not on."""
    extra = getattr(vllm_config, "additional_config", None) or {}
    options = extra.get(ADDITIONAL_CONFIG_KEY)
    if options is None:
        return None
    return BassConfig.from_dict(dict(options))
