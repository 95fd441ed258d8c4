"""BASS with the user's default flags against vLLM's own draft_model speculation at every
fixed K (its best K per batch size is "vLLM best") and plain decoding.

Setting (issue 13): a Llama-2-7B-shape target with dummy bf16 weights, draft shapes
4x1024 and 8x1024 (layers x width), synthetic acceptance (position j of a draft accepted
with unconditional probability alpha^j, the same process for every system), homogeneous
alpha or a heterogeneous mix (each request one group: half alpha 0.9, a quarter 0.6, a
quarter 0.3, by its index in the batch). `mix`: every system draws the same per-request
process (vLLM's one rate list per engine is turned per-request by the benchmark's worker
extension, `synthetic_control.py`); `mixavg`: vLLM gets the mix's batch-average rates
(issue 13's fallback wording; BASS runs the same per-request process as in `mix`). Random prompts of --prompt-len tokens, greedy, --max-tokens new
tokens per sequence. ms/token = wall time of the batch / new tokens per sequence (the
paper's latency metric). Batch 1 under the mix: one request of each of the 4 slots in
turn, ms/token averaged over them.

One engine process per (system, draft): the acceptance setting is changed inside the
running engine (`synthetic_control.py`, a vLLM worker extension), so every system is
measured at every setting with one start-up. vLLM runs with --async-scheduling (its
fastest mode for draft_model); BASS with nothing but the draft and the synthetic rates.
Rows append to --out.json, so the matrix can be split across calls on one machine
(`--systems`, `--drafts`, ...); `--report` writes the markdown table and the plots.
`--merge A.json,B.json` joins runs split over GPUs of one host (one process a GPU, run at
the same time) into --out and reports them together.

`--arms` (session 54): an A/B of BASS policy attributes inside each BASS engine (one
start-up, one set of graphs), the arms' timed runs interleaved A B, B A, ... so that a host
drifting over the runs weighs on each alike; rows `SYSTEM[LABEL]`.

`--workload continuous` (one workload a file): instead of a closed batch, 4x the batch in
requests with the batch kept in flight, as a server's continuous batching does; ms/token =
batch / steady-state tokens per second. A closed batch of the mix is paced by its alpha-0.3
requests (`docs/design.md`); a server replaces a finished request at once.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from vllm_bass.engine_config import bass_capture_sizes  # noqa: E402 (imports no vLLM)

TARGET_SHAPE = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=32, head_dim=128, intermediate_size=11008)
DRAFT_SHAPES = {
    "4x1024": dict(hidden_size=1024, num_hidden_layers=4, num_attention_heads=16,
                   num_key_value_heads=16, head_dim=64, intermediate_size=2816),
    "8x1024": dict(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                   num_key_value_heads=16, head_dim=64, intermediate_size=2816),
}


def draft_shape(name: str) -> dict:
    """A named shape, or any `LAYERSxWIDTH` (heads of 64, MLP 2.75x the width): held-out
    drafts are measured without editing this table."""
    if name in DRAFT_SHAPES:
        return DRAFT_SHAPES[name]
    layers, sep, width = name.partition("x")
    if not (sep and layers.isdigit() and width.isdigit() and int(width) % 64 == 0
            and int(layers) > 0):
        raise SystemExit(f"--drafts: {name!r} is neither one of {sorted(DRAFT_SHAPES)} nor "
                         "LAYERSxWIDTH with WIDTH a multiple of 64 (e.g. 12x768)")
    heads, width = int(width) // 64, int(width)
    shape = dict(hidden_size=width, num_hidden_layers=int(layers), num_attention_heads=heads,
                 num_key_value_heads=heads, head_dim=64,
                 intermediate_size=(width * 11 // 4 + 255) // 256 * 256)
    return dict(shape, **SMOKE_DRAFT) if SMOKE else shape


# BASS_VS_VLLM_SMOKE=1: tiny shapes on the CPU, to check this script (tests/benchmarks)
SMOKE = os.environ.get("BASS_VS_VLLM_SMOKE") == "1"
SMOKE_DRAFT = dict(hidden_size=128, num_attention_heads=2, num_key_value_heads=2,
                   intermediate_size=256, num_hidden_layers=1)  # any draft, under SMOKE
if SMOKE:
    TARGET_SHAPE = dict(TARGET_SHAPE, hidden_size=256, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, head_dim=64,
                        intermediate_size=512)
    DRAFT_SHAPES = {k: dict(v, **SMOKE_DRAFT) for k, v in DRAFT_SHAPES.items()}
MIX_PATTERN = (0.9, 0.6, 0.9, 0.3)  # request i of a batch draws MIX_PATTERN[i % 4]
RATES_LEN = 32
EXTENSION = "benchmarks.e2e.synthetic_control.SyntheticAcceptanceControl"
SYSTEMS = ["plain"] + [f"vllm_k{k}" for k in range(1, 9)] + ["bass_default"]


ALL_CAPTURE_SIZES = bass_capture_sizes(None)  # BASS's sizes with no max_num_seqs bound

# BASS variants for diagnosis (not part of the decision): vLLM's own draft loop, sync.
EXTRA_SYSTEMS = {"bass_vllm_draft_loop": {"full_graph_drafting": False},
                 "bass_sync": "sync", "bass_bass_attn": {"attention": "bass"},
                 "bass_fa3": {"attention": "vllm"},  # vLLM's attention choice (FA3 on H100)
                 # vLLM's own CUDA-graph sizes (up to 512 tokens), not BASS's larger set
                 "bass_capture512": {"engine": {"max_cudagraph_capture_size": 512}},
                 # every BASS capture size up to 1536 tokens whatever max_num_seqs (session
                 # 47: at max_num_seqs 8 the graphs stop at 512 tokens, and a batch's second
                 # prefill step, 640-800 tokens, ran eagerly)
                 "bass_capture1536": {"engine": {"cudagraph_capture_sizes": ALL_CAPTURE_SIZES}},
                 # fixed draft lengths (no auto-off): the step-cost curve under BASS's runtime
                 **{f"bass_fixed{k}": {"draft_length_policy": "fixed",
                                       "num_speculative_tokens": k, "auto_off": False}
                    for k in range(1, 17)},
                 # ... and without the verification knee (only the largest graph bounds it)
                 **{f"bass_fixed{k}_noknee": {"draft_length_policy": "fixed",
                                              "num_speculative_tokens": k, "auto_off": False,
                                              "verify_knee_tokens": 0} for k in range(1, 9)},
                 # ... on vLLM's attention (FA3 on Hopper): is a step shape's cost ours?
                 **{f"bass_fixed{k}_fa3": {"draft_length_policy": "fixed",
                                           "num_speculative_tokens": k, "auto_off": False,
                                           "attention": "vllm"} for k in range(1, 5)},
                 "bass_noknee": {"verify_knee_tokens": 0},
                 # the default policy under another bound on the draft length (the most
                 # drafts a request may get, the lookahead slots, the uniform graphs' size)
                 **{f"bass_kmax{k}": {"num_speculative_tokens": k} for k in (4, 6, 8, 12, 16)},
                 # ... without auto-off's off-steps and probes
                 **{f"bass_kmax{k}_noauto": {"num_speculative_tokens": k, "auto_off": False}
                    for k in (8, 16)},
                 # per_request with one length for all unless ragged promises 10% more
                 "bass_uniform": {"uniform_plan_margin": 0.1},
                 # draft-length exploration off / on (off is the default since session 14)
                 "bass_noexplore": {"explore_draft_lengths": False},
                 "bass_explore": {"explore_draft_lengths": True},
                 # every batch plans for tokens per second (session 18's plan, less the
                 # remaining-token weights), not closed batches for their end
                 "bass_open_plan": {"closed_batch_plan": False}}
# A/B of the drafter's first pass: vLLM's piecewise pass instead of BASS's full graphs
# (VLLM_BASS_FIRST_PASS_GRAPHS=0), for the default and for each fixed K
FIRST_PASS_AB = "_vllm_first_pass"
EXTRA_SYSTEMS.update({f"{name}{FIRST_PASS_AB}": extra for name, extra in list(
    EXTRA_SYSTEMS.items()) if name.startswith("bass_fixed") and "noknee" not in name})
EXTRA_SYSTEMS[f"bass_default{FIRST_PASS_AB}"] = {}
# no burst window (vLLM's own arrival handling: a burst's first step prefills what has
# arrived; patches/engine_core_burst_window.py), for the default and fixed K=5 / 6
EXTRA_SYSTEMS["bass_noburst"] = {"burst_window_ms": 0.0}
EXTRA_SYSTEMS.update({f"{name}_noburst": {**EXTRA_SYSTEMS[name], "burst_window_ms": 0.0}
                      for name in ("bass_fixed5", "bass_fixed6")})
# the closed objective never turns a drafting batch off (closed_batch_off_margin None: the
# token rate alone decides, as before session 49)
EXTRA_SYSTEMS["bass_closed_keeps_drafting"] = {"closed_batch_off_margin": None}
# BASS that drafts once and is then off for good (the test aid's forced off-cycle): what
# BASS's off-steps cost against plain decoding, the floor auto-off falls back to
EXTRA_SYSTEMS["bass_off"] = {}
# our attention without programmatic dependent launch (VLLM_BASS_ATTENTION_PDL=0): each
# kernel waits for the one before it to end (session 28's A/B)
EXTRA_SYSTEMS["bass_nopdl"] = {}
# our attention's PAD launches at 2 K/V stages, not 3 (VLLM_BASS_PAD_STAGES=2): session 50
# graph-timed them 4-7% faster at batch 64-256 and 128-384 cached tokens
EXTRA_SYSTEMS["bass_pad2stages"] = {}
# the step-cost fit before session 30 (VLLM_BASS_COST_FIT=session29): no per-request term,
# the prior scaled by every step's mean, not the off-steps' time
EXTRA_SYSTEMS["bass_s29fit"] = {}
# the step-cost fit without the one-draft premium (VLLM_BASS_COST_FIT=linear): the default
# again since session 41; and with it (VLLM_BASS_COST_FIT=one_draft, session 40's default)
EXTRA_SYSTEMS["bass_linear_fit"] = {}
EXTRA_SYSTEMS["bass_one_draft_fit"] = {}
# a batch size with few drafting steps plans with the nearest one that has them
# (VLLM_BASS_COST_FIT=borrow, session 51: a young batch-64 fit turned the mix off; part of
# the default since session 52)
EXTRA_SYSTEMS["bass_borrow_fit"] = {}
# the step-cost fit before session 52 (VLLM_BASS_COST_FIT=session51): the prior's verified
# token at 0.01 of a plain step, not 0.0025, and no borrowing between batch sizes
EXTRA_SYSTEMS["bass_session51_fit"] = {}
# the step-cost fit before session 53 (VLLM_BASS_COST_FIT=session52): a verified token below
# the knee at the fitted price alone, without the floor of half the knee's price
EXTRA_SYSTEMS["bass_session52_fit"] = {}
# a batch of 32+ requests solving its plan afresh whenever an estimate moves
# (VLLM_BASS_PLAN_REUSE=0), not once every 4 steps: session 54's host-time A/B
EXTRA_SYSTEMS["bass_noreuse"] = {}
# the draft's first-pass KV slots by vLLM's torch code (VLLM_BASS_FIRST_PASS_SLOT_KERNEL=0),
# not session 41's one launch: the host-time A/B
EXTRA_SYSTEMS["bass_vllm_slots"] = {}
# the policy's draft step priced at least at its graph's time measured at start-up
# (VLLM_BASS_MEASURED_DRAFT_STEP=1, session 46; the default since session 49), and the
# step fit alone (=0, the default before)
EXTRA_SYSTEMS["bass_measured_step"] = {}
EXTRA_SYSTEMS["bass_fit_step"] = {}
# a verified token past the knee priced at the fitted price plus the knee price, not the
# larger of them (VLLM_BASS_KNEE_PRICE=sum, the default before session 32)
EXTRA_SYSTEMS["bass_knee_sum"] = {}
# mixed-batch graphs of 4-104 tokens also captured planned for many one-draft requests
# (VLLM_BASS_SHORT_QUERY_GRAPHS=1, session 55's experiment, the default since session 57),
# and one graph a size as before (=0): the A/B
EXTRA_SYSTEMS["bass_short_graphs"] = {}
EXTRA_SYSTEMS["bass_long_graphs"] = {}
# our attention's graph binaries compiled as the capture meets them, one at a time
# (VLLM_BASS_PRECOMPILE_THREADS=0, before session 34), not ahead in parallel: start-up A/B
EXTRA_SYSTEMS["bass_noprecompile"] = {}
# plain decoding on vLLM's V1 model runner, the one every draft_model engine (vLLM's and
# BASS) runs on; vLLM 0.27.1 runs plain decoding of Llama on its V2 runner by default
PLAIN_SYSTEMS = ("plain", "plain_v1")


def host_cpu() -> str:
    """The host's CPU model and count: drafting steps are host-bound at small batches, and
    session 41's H200 machines ran BASS's sampling and draft phases 10-25% apart."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model or 'unknown CPU'} x{os.cpu_count()}"


def system_env(system: str) -> dict:
    """Environment a system's engine runs under (beside the benchmark's own)."""
    if system == "bass_off":
        return {"VLLM_BASS_TEST_OFF_CYCLE": f"1,{10 ** 9}"}
    if system == "plain_v1":
        return {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    if system == "bass_nopdl":
        return {"VLLM_BASS_ATTENTION_PDL": "0"}
    if system == "bass_pad2stages":
        return {"VLLM_BASS_PAD_STAGES": "2"}
    if system == "bass_s29fit":
        return {"VLLM_BASS_COST_FIT": "session29"}
    if system == "bass_linear_fit":
        return {"VLLM_BASS_COST_FIT": "linear"}
    if system == "bass_one_draft_fit":
        return {"VLLM_BASS_COST_FIT": "one_draft"}
    if system == "bass_borrow_fit":
        return {"VLLM_BASS_COST_FIT": "borrow"}
    if system == "bass_session51_fit":
        return {"VLLM_BASS_COST_FIT": "session51"}
    if system == "bass_session52_fit":
        return {"VLLM_BASS_COST_FIT": "session52"}
    if system == "bass_noreuse":
        return {"VLLM_BASS_PLAN_REUSE": "0"}
    if system == "bass_vllm_slots":
        return {"VLLM_BASS_FIRST_PASS_SLOT_KERNEL": "0"}
    if system == "bass_measured_step":
        return {"VLLM_BASS_MEASURED_DRAFT_STEP": "1"}
    if system == "bass_fit_step":
        return {"VLLM_BASS_MEASURED_DRAFT_STEP": "0"}
    if system == "bass_knee_sum":
        return {"VLLM_BASS_KNEE_PRICE": "sum"}
    if system == "bass_noprecompile":
        return {"VLLM_BASS_PRECOMPILE_THREADS": "0"}
    if system == "bass_short_graphs":
        return {"VLLM_BASS_SHORT_QUERY_GRAPHS": "1"}
    if system == "bass_long_graphs":
        return {"VLLM_BASS_SHORT_QUERY_GRAPHS": "0"}
    return {"VLLM_BASS_FIRST_PASS_GRAPHS": "0"} if system.endswith(FIRST_PASS_AB) else {}


def rates(alpha: float) -> list[float]:
    return [alpha ** (j + 1) for j in range(RATES_LEN)]


def acceptance_groups(name: str) -> list[list[float]]:
    """`sameA` is alpha A through the mix's per-request machinery (two equal groups): vLLM's
    `sameA` against its `A` rows is what the benchmark's per-request patch costs it
    (session 44: vLLM's mix rows ran 1.1-1.75x its `mixavg` rows, past what the mix's
    slow requests explain)."""
    if name in ("mix", "mixavg"):
        return [rates(a) for a in MIX_PATTERN]
    if name.startswith("same"):
        return [rates(float(name[len("same"):]))] * 2
    return [rates(float(name))]


def model_folders(root: Path, drafts: list[str] | None = None) -> dict[str, str]:
    """Config-only folders (weights: load_format='dummy'), the embedded pair's tokenizer."""
    from benchmarks.e2e.dummy_models import dummy_model_folder

    shapes = {"target": TARGET_SHAPE,
              **{d: draft_shape(d) for d in (drafts if drafts else DRAFT_SHAPES)}}
    return {name: dummy_model_folder(root / f"vs-vllm-{name}", shape, 8192)
            for name, shape in shapes.items()}


def engine_kwargs(system: str, target: str, draft: str, max_model_len: int,
                  max_batch: int) -> dict:
    kwargs = dict(model=target, load_format="dummy", dtype="bfloat16", seed=0,
                  max_model_len=max_model_len, max_num_seqs=max_batch,
                  gpu_memory_utilization=0.85, disable_log_stats=False,
                  worker_extension_cls=EXTENSION)
    if SMOKE:  # CPU check of this script's plumbing: tiny shapes, no speed meaning
        kwargs.update(dtype="float32", gpu_memory_utilization=0.05)
    first = rates(0.8)  # replaced per setting inside the engine
    if system.startswith("vllm_k"):
        k = int(system[len("vllm_k"):])
        kwargs["speculative_config"] = {
            "method": "draft_model", "model": draft, "num_speculative_tokens": k,
            "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": first[:k]}
        kwargs["async_scheduling"] = True
    elif system == "bass_default" or system in EXTRA_SYSTEMS:
        spec = {"method": "bass", "model": draft, "rejection_sample_method": "synthetic",
                "synthetic_acceptance_rates": first[:16]}
        extra = EXTRA_SYSTEMS.get(system)
        if extra == {}:
            extra = None
        if extra == "sync":
            kwargs["async_scheduling"] = False
        elif extra and "engine" in extra:
            kwargs.update(extra["engine"])
        elif extra:
            spec.update(extra)
        kwargs["speculative_config"] = spec
    elif system not in PLAIN_SYSTEMS:
        raise SystemExit(f"unknown system {system!r}; known: "
                         f"{SYSTEMS + list(EXTRA_SYSTEMS) + ['plain_v1']}")
    return kwargs


MAX_REPEATS = 8
# repeats added to a setting while every repeat so far compiled a Triton kernel
EXTRA_REPEATS_AFTER_JIT = 3


def closed_batch_seconds(llm, batch_prompts: list, batch_params: list) -> float:
    """One closed batch's makespan: the requests built and the client's garbage collected
    before the clock starts (until session 44 the prompts' random tokens, ~16k draws at
    batch 128, were drawn inside the timed region, for every system alike)."""
    import gc

    gc.collect()
    start = time.perf_counter()
    llm.generate(batch_prompts, batch_params, use_tqdm=False)
    end = time.perf_counter()
    RUN_WINDOWS.append((start, end))
    return end - start


# (start, end) of every closed batch on time.perf_counter, the clock of BASS's step trace
# (CLOCK_MONOTONIC: one clock for every process of the machine): what a run spent outside
# the traced steps (request set-up, the untimed first step after idle, the output after the
# last step) is the window less the steps (`run_windows.py`)
RUN_WINDOWS: list[tuple[float, float]] = []


def timed_repeats(repeats: int, warm_seconds: float, min_seconds: float) -> int:
    """Repeats of a setting: at least `repeats`, and enough to time about `min_seconds`
    (judged by the warm-up run), at most MAX_REPEATS. A batch-1 run takes ~0.5 s, and the
    best of two of them scattered by 10-15% between systems on one H100 (session 21: vLLM
    K=2 at batch 8 ran 4.92-14.43 ms/token over five repeats), more than the differences
    being measured; large batches stay at `repeats`."""
    if min_seconds <= 0 or warm_seconds <= 0:
        return repeats
    return max(repeats, min(MAX_REPEATS, math.ceil(min_seconds / warm_seconds)))


def repeat_until_clean(run_once, compiles_so_far, repeats: int,
                       extra: int = EXTRA_REPEATS_AFTER_JIT) -> tuple[list, list]:
    """`repeats` timed runs, then up to `extra` more while every run so far compiled a
    kernel (`compiles_so_far`: a count that grows with each compile). A JIT compile inside
    every repeat (session 36: vLLM's drafter at batch 4, 10.5 ms/token, slower than plain)
    would make the best-of a compile's time, not the system's. Returns each run's result
    and compiles."""
    results, compiles = [], []
    while len(results) < repeats or (all(compiles) and len(results) < repeats + extra):
        before = compiles_so_far()
        results.append(run_once())
        compiles.append(compiles_so_far() - before)
    return results, compiles


def setting_timing(batch: int, acceptance: str, reps: list[float], d: dict,
                   n_tokens: int) -> dict:
    """A setting's row from its timed runs (seconds of a closed batch, or its continuous
    equivalent; the best of them) and the counters' deltas over them."""
    seconds = min(reps)
    return {
        "batch": batch, "acceptance": acceptance, "seconds": seconds,
        "ms_per_token": 1000.0 * seconds / n_tokens,
        "tokens_per_s": batch * n_tokens / seconds,
        **speculation_means(d),
        "repeat_ms_per_token": [1000.0 * r / n_tokens for r in reps]}


def speculation_means(c: dict) -> dict:
    """From counter deltas: the share of off-steps (BASS only), the mean draft length and
    the mean acceptance length (tokens a verification emits); None where nothing counted."""
    drafts, on, off = c["vllm:spec_decode_num_drafts"], c["steps_on"], c["steps_off"]
    return {
        "mean_acceptance_length": (1 + c["vllm:spec_decode_num_accepted_tokens"] / drafts)
        if drafts else None,
        "mean_draft_length": c["vllm:spec_decode_num_draft_tokens"] / drafts
        if drafts else None,
        "off_step_fraction": off / (on + off) if on + off else None}


def repeat_speculation(counts: list[dict]) -> dict:
    """`speculation_means` per timed repeat, from its counter deltas."""
    means = [speculation_means(c) for c in counts]
    return {f"repeat_{key}": [m[key] for m in means] for key in (
        "off_step_fraction", "mean_draft_length", "mean_acceptance_length")}


def parse_arms(text: str) -> list[tuple[str, dict]]:
    """`--arms "reuse:plan_reuse_steps=4;noreuse:plan_reuse_steps=0"`: in-engine arms of an
    A/B, each a label and attributes of the BASS policy (values as JSON, else strings)."""
    arms = []
    for part in (p.strip() for p in text.split(";") if p.strip()):
        label, sep, body = part.partition(":")
        assignments = {}
        for item in (i.strip() for i in body.split(",") if i.strip()):
            name, eq, value = item.partition("=")
            if not eq or not name.strip():
                raise SystemExit(f"--arms: {item!r} is not NAME=VALUE (in arm {label!r})")
            try:
                assignments[name.strip()] = json.loads(value)
            except json.JSONDecodeError:
                assignments[name.strip()] = value.strip()
        if not sep or not label.strip() or not assignments:
            raise SystemExit(f"--arms: {part!r} is not LABEL:NAME=VALUE[,NAME=VALUE]")
        arms.append((label.strip(), assignments))
    if len({label for label, _ in arms}) != len(arms):
        raise SystemExit("--arms: two arms share a label")
    if len(arms) == 1:
        raise SystemExit("--arms: give two arms or more (an A/B)")
    return arms


def armed_order(n_arms: int, repeats: int) -> list[int]:
    """The arms' timed runs, interleaved A B, B A, A B ...: each arm runs as often, and a
    host that drifts slower over the runs (the H200 hosts' 15-25% scatter, session 54)
    weighs on every arm alike."""
    order = []
    for r in range(repeats):
        arms = list(range(n_arms))
        order += arms if r % 2 == 0 else arms[::-1]
    return order


# ---------------------------------------------------------------------------------- child
def compiled_kernels() -> collections.Counter:
    """Triton kernels compiled so far by this engine (its own cache folder), by name: those
    after start-up say what start-up compiled; a name that appears during the timed
    repeats is a JIT stall inside the timing."""
    folder = os.environ.get("TRITON_CACHE_DIR")
    names = collections.Counter()
    if folder and os.path.isdir(folder):
        for entry in Path(folder).glob("*/*.json"):
            if not entry.name.startswith("__grp__"):
                names[entry.stem] += 1
    return names


def _child(spec_path: str, out_path: str) -> None:
    import random

    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from vllm_bass.worker.sampler import SYNTHETIC_GROUP_KEY
    from support.isolated_engine import _metrics_dict, metric

    spec = json.loads(Path(spec_path).read_text())
    t0 = time.perf_counter()
    llm = LLM(**spec["engine"])
    startup = time.perf_counter() - t0
    startup_kernels = dict(compiled_kernels())
    speculative = "speculative_config" in spec["engine"]
    rng = random.Random(0)
    n_tokens, prompt_len = spec["max_tokens"], spec["prompt_len"]
    rows = []

    def prompts(n):
        return [TokensPrompt(prompt_token_ids=[rng.randrange(16, 2000) for _ in range(prompt_len)])
                for _ in range(n)]

    def params(slots, max_tokens):
        return [SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True,
                               extra_args={SYNTHETIC_GROUP_KEY: s}) for s in slots]

    def counters():
        m = _metrics_dict(llm.get_metrics())
        return {k: metric(m, k) for k in (
            "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens")} | {
            f"steps_{s}": metric(m, "vllm:bass_steps", speculation=s) for s in ("on", "off")}

    for acceptance in spec["acceptance"]:
        groups = acceptance_groups(acceptance) if speculative else [None]
        if speculative:
            llm.collective_rpc("bench_set_synthetic_acceptance",
                               args=(groups, acceptance != "mixavg"))
        for batch in spec["batches"]:
            n_slots = len(groups)
            slot_runs = ([[i] for i in range(n_slots)] if batch == 1 and n_slots > 1
                         else [[i % n_slots for i in range(batch)]])
            if spec.get("workload") == "continuous":
                slot_runs = [[i % n_slots for i in range(CONTINUOUS_REQUESTS_PER_SLOT
                                                         * max(batch, n_slots))]]

            def run(slots):
                """Seconds per token of one sequence: a closed batch's makespan over
                max_tokens, or the continuous workload's steady state."""
                if spec.get("workload") == "continuous":
                    return batch / continuous_tokens_per_s(
                        llm, prompts(len(slots)), params(slots, n_tokens), batch)
                return closed_batch_seconds(llm, prompts(len(slots)),
                                            params(slots, n_tokens)) / n_tokens

            arms = spec.get("arms") or []
            if arms:  # an in-engine A/B: its arms' runs interleaved (`armed_order`)
                rows += _armed_setting(llm, spec, arms, acceptance, batch, slot_runs, run,
                                       counters, n_tokens)
                Path(out_path).write_text(json.dumps({"rows": rows, "startup_s": startup,
                                                      "startup_kernels": startup_kernels}))
                continue
            warm_start = time.perf_counter()
            for slots in slot_runs:  # warm-up, full length: every shape of the batch's
                # tail too (JIT compiles), the cost model, the estimates
                run(slots)
            warm_seconds = (time.perf_counter() - warm_start) / len(slot_runs)
            marks = [counters()]  # the counters before the timed runs and after each
            kernels_before = compiled_kernels()
            n_repeats = timed_repeats(spec["repeats"], warm_seconds,
                                      spec.get("min_timed_seconds", 0.0))

            def timed_repeat():
                seconds = n_tokens * sum(run(slots) for slots in slot_runs) / len(slot_runs)
                marks.append(counters())  # read between the timed runs
                return seconds

            RUN_WINDOWS.clear()
            reps, rep_compiles = repeat_until_clean(  # the fastest: one-off stalls left out
                timed_repeat, lambda: sum(compiled_kernels().values()), n_repeats)
            windows = [[round(a, 6), round(b, 6)] for a, b in RUN_WINDOWS]
            rep_counts = [{k: last[k] - first[k] for k in last}
                          for first, last in zip(marks, marks[1:])]
            jit = compiled_kernels() - kernels_before
            if (batch in spec.get("profile_batches", ())
                    and acceptance in spec.get("profile_acceptance", ())):
                _profiled_run(llm, spec, acceptance, batch,
                              lambda: [run(s) for s in slot_runs])
            d = {k: marks[-1][k] - marks[0][k] for k in marks[0]}
            rows.append({
                **setting_timing(batch, acceptance, reps, d, n_tokens),
                "jit_compiles_in_repeats": dict(jit),
                "repeat_jit_compiles": rep_compiles,
                # whether a slow repeat sat off more or drafted otherwise (session 42: BASS's
                # repeats 3.87-5.45 ms/token at batch 4, 5.12-6.49 at 16; vLLM's within 9%)
                **repeat_speculation(rep_counts),
                "workload": spec.get("workload", "closed"),
                "run_windows": windows,  # the timed closed batches' (start, end)
            })
            print(f"  {spec['system']} {spec['draft']} alpha={acceptance} batch={batch}: "
                  f"{rows[-1]['ms_per_token']:.2f} ms/token", flush=True)
            # after every setting: a run cut by the parent's timeout keeps what it measured
            Path(out_path).write_text(json.dumps({"rows": rows, "startup_s": startup,
                                                  "startup_kernels": startup_kernels}))
    Path(out_path).write_text(json.dumps({"rows": rows, "startup_s": startup,
                                          "startup_kernels": startup_kernels}))


def _armed_setting(llm, spec: dict, arms: list, acceptance: str, batch: int,
                   slot_runs: list, run, counters, n_tokens: int) -> list[dict]:
    """One setting's rows of an in-engine A/B: every arm warmed up, then `spec["repeats"]`
    timed runs of each, interleaved; one row per arm (`arm`: its label), best of its runs."""
    def set_arm(i):
        llm.collective_rpc("bench_set_policy", args=(arms[i][1],))

    for i in range(len(arms)):  # warm-up: each arm's shapes, and the fits see them all
        set_arm(i)
        for slots in slot_runs:
            run(slots)
    runs = [[] for _ in arms]  # (seconds, counter deltas, kernels compiled) per arm
    order = armed_order(len(arms), spec["repeats"])
    RUN_WINDOWS.clear()
    for i in order:
        set_arm(i)
        before, kernels = counters(), sum(compiled_kernels().values())
        seconds = n_tokens * sum(run(slots) for slots in slot_runs) / len(slot_runs)
        after = counters()
        runs[i].append((seconds, {k: after[k] - before[k] for k in after},
                        sum(compiled_kernels().values()) - kernels))
    rows = []
    for (label, assignments), arm_runs in zip(arms, runs):
        reps = [r[0] for r in arm_runs]
        d = {k: sum(r[1][k] for r in arm_runs) for k in arm_runs[0][1]}
        rows.append({
            **setting_timing(batch, acceptance, reps, d, n_tokens),
            "arm": label, "arm_attributes": assignments,
            "repeat_jit_compiles": [r[2] for r in arm_runs],
            **repeat_speculation([r[1] for r in arm_runs]),
            "workload": spec.get("workload", "closed"),
            "run_order": order,
        })
        print(f"  {spec['system']}[{label}] {spec['draft']} alpha={acceptance} "
              f"batch={batch}: {rows[-1]['ms_per_token']:.2f} ms/token", flush=True)
    return rows


# The continuous workload: this many requests per slot of concurrency, submitted so that
# `batch` are always in flight; timed while the queue still holds requests
CONTINUOUS_REQUESTS_PER_SLOT = 4
_continuous_ids = itertools.count()


def continuous_tokens_per_s(llm, prompts: list, params: list, concurrency: int) -> float:
    """Generated tokens per second while `concurrency` requests are in flight and more wait:
    a finished request is replaced at once (a server's continuous batching), so no batch
    waits for its slowest request, as a closed batch does. The window ends when the last
    request is submitted; the tail after it is not counted."""
    from support.isolated_engine import serve_continuously

    tokens, seen = 0, {}
    start = time.perf_counter()
    window = None  # (seconds, tokens) when the last request was submitted

    def count(out):
        nonlocal tokens
        n = len(out.outputs[0].token_ids)
        tokens += n - seen.get(out.request_id, 0)
        seen[out.request_id] = n
        if out.finished:
            seen.pop(out.request_id)

    def mark():
        nonlocal window
        window = (time.perf_counter() - start, tokens)

    serve_continuously(llm.llm_engine, [
        (f"cont-{next(_continuous_ids)}", prompt, sp) for prompt, sp in zip(prompts, params)],
        concurrency, count, mark)
    if not window[1]:  # every request fit in flight at once: the whole run is the window
        window = (time.perf_counter() - start, tokens)
    return window[1] / window[0]


def _profiled_run(llm, spec: dict, acceptance: str, batch: int, run) -> None:
    """One more run of the setting under vLLM's torch profiler (after the timed repeats,
    so the timings are unprofiled); the trace and vLLM's kernel table are named after the
    system and setting (`profile_summary.py` reads them)."""
    name = f"{spec['system']}_{spec['draft']}_{acceptance}_b{batch}"
    folder = Path(spec["profile_dir"])
    before = set(folder.rglob("*.pt.trace.json*"))
    llm.start_profile(profile_prefix=name)
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    llm.stop_profile()
    llm.collective_rpc("bench_reset_profiler")
    for i, trace in enumerate(sorted(set(folder.rglob("*.pt.trace.json*")) - before)):
        suffix = ".pt.trace.json.gz" if trace.name.endswith(".gz") else ".pt.trace.json"
        trace.rename(folder / f"{name}{'_' + str(i) if i else ''}{suffix}")
    table = folder / "profiler_out_0.txt"
    if table.exists():
        table.rename(folder / f"{name}_kernels.txt")
    (folder / f"{name}_run.json").write_text(json.dumps(
        {"seconds": seconds, "max_tokens": spec["max_tokens"], "batch": batch}))


def acceptance_for(system: str, settings: list[str]) -> list[str]:
    """BASS runs the per-request process under `mixavg` as under `mix`: measured once."""
    if system in PLAIN_SYSTEMS:
        return ["-"]
    if system.startswith("vllm_k"):
        return list(settings)
    out = [a for a in settings if a != "mixavg"]
    if "mixavg" in settings and "mix" not in out:
        out.append("mix")
    return out


def engine_system(system: str) -> str:
    """The configuration a system name runs: `NAME@TAG` is NAME run once more in the same
    call (its rows kept apart), to see how much a system's place in the call's order moves
    its timings (session 22: the first engine of a call ran slow more than once)."""
    return system.split("@", 1)[0]


def arms_for(system: str, arms: list) -> list:
    """In-engine arms (`--arms`) set attributes of BASS's adaptive policy: vLLM's engines,
    plain decoding and BASS at a fixed K (a policy without them) run as they are."""
    config = engine_system(system)
    if not config.startswith("bass") or \
            EXTRA_SYSTEMS.get(config, {}).get("draft_length_policy") == "fixed":
        return []
    return arms


def system_timeout(engines_before: int, args) -> float:
    """Seconds an engine may take, start-up included: the call's first engine compiles
    the models that later engines load from torch.compile's cache (~2 minutes on a fresh
    machine), so it gets --first-timeout-extra more (session 49 lost both engines of a call
    to 115 s a system)."""
    return args.timeout + (args.first_timeout_extra if engines_before == 0 else 0.0)


def run_system(system: str, draft: str, folders: dict, args, log_dir: Path,
               timeout: float) -> dict:
    config = engine_system(system)
    # 2048 at least: BASS's largest CUDA-graph size (1536) stays within the context (with a
    # context shorter than the largest capture size, the BASS engines crashed in vLLM's
    # CUDA-graph memory profiling: illegal address in the drafter's dummy run; H100,
    # session 8)
    max_model_len = max(2048, args.prompt_len + args.max_tokens + 64)
    spec = {"engine": engine_kwargs(config, folders["target"], folders[draft], max_model_len,
                                    max(args.batches)),
            "system": system, "draft": draft, "max_tokens": args.max_tokens,
            "prompt_len": args.prompt_len, "batches": args.batches, "repeats": args.repeats,
            "min_timed_seconds": args.min_timed_seconds,
            "acceptance": acceptance_for(config, args.acceptance),
            "workload": args.workload, "profile_dir": args.profile_dir,
            "profile_batches": args.profile_batches,
            "profile_acceptance": args.profile_acceptance,
            "arms": arms_for(system, args.arms)}
    if args.profile_dir:  # vLLM's torch profiler, started around the chosen runs only
        spec["engine"]["profiler_config"] = {
            "profiler": "torch", "torch_profiler_dir": args.profile_dir,
            "torch_profiler_with_stack": args.profile_with_stack, "ignore_frontend": True}
    with tempfile.TemporaryDirectory() as tmp:
        spec_path, out_path = Path(tmp, "spec.json"), Path(tmp, "out.json")
        spec_path.write_text(json.dumps(spec))
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get(
            "PYTHONPATH", ""))
        # every engine compiles its own Triton kernels, as a fresh deployment does (an
        # earlier engine's disk cache would hide one system's JIT stalls from the next)
        env["TRITON_CACHE_DIR"] = str(Path(tmp, "triton_cache"))
        if args.cold_start:  # and its own torch.compile caches: start-up as on a new host
            env["VLLM_CACHE_ROOT"] = str(Path(tmp, "vllm_cache"))
            env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp, "inductor_cache"))
        env.update(system_env(config))
        if args.trace_dir:  # BASS's step and runner-phase traces (vllm_bass.utils)
            env["VLLM_BASS_STEP_TRACE"] = str(Path(args.trace_dir) / f"{system}_{draft}.csv")
        log = log_dir / f"{system}_{draft}.log"
        with open(log, "w") as fh:
            proc = subprocess.Popen([sys.executable, __file__, "--child", str(spec_path),
                                     str(out_path)], cwd=REPO, env=env, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # the whole group (the engine core included) goes, and the next system
                # still runs; rows the child wrote before its shutdown hung are kept
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = "timeout"
        if not out_path.exists():
            tail = log.read_text()[-3000:]
            print(f"{system} {draft}: FAILED (rc={rc})\n{tail}", flush=True)
            return {"rows": [], "failed": True}
        if rc != 0:
            print(f"{system} {draft}: rc={rc} after its rows were written", flush=True)
        return json.loads(out_path.read_text())


_LOG_TIME = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)")
_PHASES = {  # engine log line -> (key, how several add up)
    "torch_compile_s": (re.compile(r"torch\.compile took ([\d.]+) s in total"), sum),
    "graph_capture_s": (re.compile(r"Graph capturing finished in ([\d.]+) secs"), sum),
    "init_engine_s": (re.compile(r"init engine \(.*\) took ([\d.]+) s"), max),
    "precompiled": (re.compile(r"compiled (\d+) attention kernel binaries for the CUDA "
                               r"graphs ahead"), sum),
    "precompile_s": (re.compile(r"attention kernel binaries for the CUDA graphs ahead .* "
                                r"in ([\d.]+) s"), sum),
    "capture_misses": (re.compile(r"captures compiled (\d+) attention kernel binaries"), sum),
}


def startup_phases(log_text: str) -> dict:
    """An engine's start-up by phase, read from its log (so an engine cut before its rows
    still has one): torch.compile, graph capture and engine-init seconds, our precompile's
    binaries and seconds, the binaries the captures still compiled, the JIT compiles vLLM's
    monitor saw while serving, and the seconds from the log's first line to the engine's
    init line (`log_to_ready_s`)."""
    phases: dict = {}
    for key, (pattern, combine) in _PHASES.items():
        found = [float(x) for x in pattern.findall(log_text)]
        if found:
            phases[key] = combine(found)
    phases["jit_in_serving"] = log_text.count("JIT compilation during inference")
    lines = log_text.splitlines()
    first = next((m for m in map(_LOG_TIME.search, lines) if m), None)
    ready = next((_LOG_TIME.search(line) for line in lines if "init engine (" in line), None)
    if first and ready:  # vLLM's log stamps carry no year: 2000 (a leap year) for both
        t0, t1 = (datetime.strptime(f"2000-{m.group(1)}", "%Y-%m-%d %H:%M:%S")
                  for m in (first, ready))
        phases["log_to_ready_s"] = (t1 - t0).total_seconds() % (366 * 86400)
    return phases


# --------------------------------------------------------------------------------- report
def median_ms(row: dict) -> float:
    """A row's median over its timed repeats: the report's second view, since best-of
    favours the system whose runs scatter more (BASS's long drafts at batch 1 do)."""
    return statistics.median(row.get("repeat_ms_per_token") or [row["ms_per_token"]])


def best_vllm(rows: list[dict], draft: str, acceptance: str, batch: int,
              key=lambda r: r["ms_per_token"]) -> dict | None:
    cands = [r for r in rows if r["system"].startswith("vllm_k") and "@" not in r["system"]
             and r["draft"] == draft
             and r["acceptance"] == acceptance and r["batch"] == batch]
    return min(cands, key=key) if cands else None


def plain_row(rows, batch):
    cands = [r for r in rows if r["system"] == "plain" and r["batch"] == batch]
    return min(cands, key=lambda r: r["ms_per_token"]) if cands else None


# The H100's measured device-to-device copy bandwidth (session 7's kernel benchmark,
# `git show 82a5483:benchmarks/results/paged_attention_bench_h100_s7.json`,
# copy_bandwidth_gbps; session 27's sweep measured 3019 GB/s again): MBU is over
# what the memory system delivered, not the datasheet's 3.35 TB/s.
MEASURED_COPY_BYTES_PER_S = 3019.86e9
UTILISATION_BATCHES = (1, 8, 32, 64)


def row_utilisation(row: dict, prompt_len: int, max_tokens: int,
                    bandwidth: float = MEASURED_COPY_BYTES_PER_S) -> dict:
    """Model FLOP/s over the nominal bf16 peak (MFU) and bytes/s over the measured copy
    bandwidth (MBU) of the 7B-shape target for one measured row, by `bench.utilisation`'s
    counting (useful work only: emitted tokens, the weights once per step, each sequence's
    KV once per step), at the mean context of the run (prompt + half the new tokens).
    Steps: emitted tokens over (batch x tokens a sequence gains per step); a BASS row's
    off-steps count as its own steps of one token."""
    from benchmarks.e2e.dummy_models import TOKENIZER_FROM
    from vllm_bass.bench.utilisation import ModelShape, StepTotals, utilisation

    vocab = json.loads((TOKENIZER_FROM / "config.json").read_text())["vocab_size"]
    shape = ModelShape(layers=TARGET_SHAPE["num_hidden_layers"],
                       hidden=TARGET_SHAPE["hidden_size"],
                       intermediate=TARGET_SHAPE["intermediate_size"],
                       heads=TARGET_SHAPE["num_attention_heads"],
                       kv_heads=TARGET_SHAPE["num_key_value_heads"],
                       vocab=int(TARGET_SHAPE.get("vocab_size", vocab)),
                       head_dim=TARGET_SHAPE["head_dim"])
    batch = int(row["batch"])
    per_step = float(row.get("mean_acceptance_length") or 1.0)  # tokens a sequence gains
    off = float(row.get("off_step_fraction") or 0.0)
    per_step = off * 1.0 + (1.0 - off) * per_step
    tokens = batch * max_tokens
    steps = max(1, round(max_tokens / per_step))
    context = prompt_len + max_tokens / 2
    totals = StepTotals(steps=steps, tokens=tokens,
                        query_context=int(tokens * context),
                        kv_context=int(steps * batch * context))
    seconds = row["ms_per_token"] * max_tokens / 1e3
    u = utilisation(shape, 2, totals, seconds, bandwidth=bandwidth)
    return {"mfu": u["mfu"], "mbu": u["mbu"], "tflop_per_s": u["flop_per_s"] / 1e12,
            "tb_per_s": u["bytes_per_s"] / 1e12}


def _utilisation_lines(data: dict) -> list[str]:
    rows = data["rows"]
    prompt_len, max_tokens = int(data.get("prompt_len") or 128), int(data.get("max_tokens") or 128)
    picked = [r for r in rows if r["batch"] in UTILISATION_BATCHES]
    if not picked:
        return []
    lines = ["", "## Utilisation of the target (the paper's \"GPU utilisation\")", "",
             "Useful work of the measured rows (`row_utilisation`): MFU = model FLOP/s over "
             "the nominal bf16 peak (989 TFLOP/s), MBU = bytes/s (weights once per step, "
             "each sequence's KV once per step) over the measured copy bandwidth "
             f"({MEASURED_COPY_BYTES_PER_S / 1e12:.2f} TB/s, session 7).", "",
             "| draft | acceptance | batch | system | ms/token | tokens/step/seq | MFU | MBU |",
             "|---|---|---|---|---|---|---|---|"]
    order = {"plain": 0, "bass_default": 2}
    for r in sorted(picked, key=lambda r: (r["draft"], r["acceptance"], r["batch"],
                                           order.get(r["system"], 1), r["system"])):
        u = row_utilisation(r, prompt_len, max_tokens)
        acc = r.get("mean_acceptance_length")
        lines.append(f"| {r['draft']} | {r['acceptance']} | {r['batch']} | {r['system']} | "
                     f"{r['ms_per_token']:.2f} | {1 if acc is None else round(acc, 2)} | "
                     f"{u['mfu'] * 100:.1f}% | {u['mbu'] * 100:.1f}% |")
    return lines


def report(data: dict, out: Path) -> None:
    rows = data["rows"]
    lines = ["# BASS default vs vLLM draft_model (best fixed K) vs plain decoding",
             "", f"{data.get('device')}"
             f"{'; host ' + data['host_cpu'] if data.get('host_cpu') else ''}"
             "; 7B-shape target, dummy bf16 weights, synthetic "
             f"acceptance; prompts {data.get('prompt_len')} tokens, {data.get('max_tokens')} "
             "new tokens, greedy; ms/token per sequence (best of the repeats). `mix`: half "
             "alpha 0.9, a quarter 0.6, a quarter 0.3 per request, the same per-request "
             "process for every system; `mixavg`: vLLM with the mix's batch-average rates "
             "instead. `medians`: each system's median over its repeats, vLLM's best K by "
             "median (vLLM's slow repeats are mostly JIT compiles inside timed runs, "
             "`jit_compiles_in_repeats`; a setting whose every repeat compiled a kernel gets up "
             f"to {EXTRA_REPEATS_AFTER_JIT} more, `repeat_jit_compiles`).", "",
             *(["**Continuous workload**: each setting serves "
                f"{CONTINUOUS_REQUESTS_PER_SLOT}x the batch in requests with the batch kept "
                "in flight (a finished request replaced at once); ms/token = batch / "
                "steady-state tokens per second, no closed batch's slowest-request tail.", ""]
               if any(r.get("workload") == "continuous" for r in rows) else []),
             *([data["note"], ""] if data.get("note") else []),
             "| draft | acceptance | batch | plain | vLLM best (K) | BASS default | "
             "BASS / vLLM best | BASS / vLLM best, medians | BASS / plain | BASS acc. len | "
             "BASS draft len | BASS off |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["draft"], r["acceptance"]) for r in rows if r["system"] != "plain"})
    for draft, acc in keys:
        for batch in sorted({r["batch"] for r in rows}):
            bass_acc = "mix" if acc == "mixavg" else acc  # the same BASS run
            bass = [r for r in rows if r["system"] == "bass_default" and r["draft"] == draft
                    and r["acceptance"] == bass_acc and r["batch"] == batch]
            best, plain = best_vllm(rows, draft, acc, batch), plain_row(rows, batch)
            best_median = best_vllm(rows, draft, acc, batch, key=median_ms)
            if not bass and not best:
                continue
            b = bass[0] if bass else None

            def f(x, fmt="{:.2f}"):
                return fmt.format(x) if x is not None else "—"
            lines.append(
                f"| {draft} | {acc} | {batch} | {f(plain and plain['ms_per_token'])} | "
                f"{f(best and best['ms_per_token'])}"
                f"{' (' + best['system'][6:] + ')' if best else ''} | "
                f"{f(b and b['ms_per_token'])} | "
                f"{f(b and best and best['ms_per_token'] / b['ms_per_token'], '{:.2f}x')} | "
                f"{f(b and best_median and median_ms(best_median) / median_ms(b), '{:.2f}x')}"
                f"{' (' + best_median['system'][6:] + ')' if b and best_median else ''} | "
                f"{f(b and plain and plain['ms_per_token'] / b['ms_per_token'], '{:.2f}x')} | "
                f"{f(b and b['mean_acceptance_length'])} | {f(b and b['mean_draft_length'])} | "
                f"{f(b and b['off_step_fraction'])} |")
    lines += _utilisation_lines(data) + _startup_lines(data)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    try:
        _plot(rows, keys, out.with_suffix(".png"))
    except Exception as exc:  # matplotlib missing: the table and JSON still stand
        print(f"no plot: {exc}")


def _startup_lines(data: dict) -> list[str]:
    """Each engine's start-up: seconds (LLM() returning) and Triton kernels compiled."""
    engines = {}
    for r in data["rows"]:
        if r.get("startup_s") is not None:
            engines.setdefault((r["system"], r["draft"]), r)
    phases = data.get("startup_phases", {})
    for name in phases:
        system, draft = name.split("/", 1)
        engines.setdefault((system, draft), {})
    if not engines:
        return []
    kernels = data.get("startup_kernels", {})
    caches = ("a fresh Triton cache and empty torch.compile caches" if data.get("cold_start")
              else "a fresh Triton cache; the first engine compiled the models, later ones "
                   "reused its torch.compile cache")
    lines = ["", f"Start-up (each engine on {caches}; the first engine of a run may also "
                 "read vLLM from a cold disk cache):", "",
             "| system | draft | seconds | log to ready | torch.compile | graph capture | "
             "precompiled (s) | capture misses | JIT while serving | Triton compiles | "
             "most compiled |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(value, digits=0):
        return "—" if value is None else f"{value:.{digits}f}"

    for (system, draft), r in sorted(engines.items()):
        names = kernels.get(f"{system}/{draft}", {})
        top = ", ".join(f"{k} {v}" for k, v in sorted(names.items(), key=lambda kv: -kv[1])[:4])
        p = phases.get(f"{system}/{draft}", {})
        ahead = ("—" if "precompiled" not in p
                 else f"{p['precompiled']:.0f} ({f(p.get('precompile_s'), 1)})")
        lines.append(f"| {system} | {draft} | {f(r.get('startup_s'))} | "
                     f"{f(p.get('log_to_ready_s'))} | {f(p.get('torch_compile_s'))} | "
                     f"{f(p.get('graph_capture_s'))} | {ahead} | {f(p.get('capture_misses'))} | "
                     f"{f(p.get('jit_in_serving'))} | "
                     f"{r.get('startup_triton_compiles', '—')} | {top or '—'} |")
    return lines


def _plot(rows, keys, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(keys), 3, figsize=(15, 3.2 * len(keys)), squeeze=False)
    for (draft, acc), ax in zip(keys, axes):
        batches = sorted({r["batch"] for r in rows if r["draft"] == draft
                          and r["acceptance"] == acc})
        series = {"plain": [plain_row(rows, b) for b in batches],
                  "vLLM best": [best_vllm(rows, draft, acc, b) for b in batches],
                  "BASS default": [next((r for r in rows if r["system"] == "bass_default"
                                         and r["draft"] == draft and r["acceptance"] == (
                                             "mix" if acc == "mixavg" else acc)
                                         and r["batch"] == b), None) for b in batches]}
        for name, pts in series.items():
            xs = [b for b, p in zip(batches, pts) if p]
            ax[0].plot(xs, [p["ms_per_token"] for p in pts if p], "o-", label=name)
        ax[0].set(xscale="log" if batches else "linear",
                  title=f"draft {draft}, alpha {acc}: ms/token", xlabel="batch")
        for i, ref in ((1, "plain"), (2, "vLLM best")):
            xs, ys = [], []
            for b, r, bass in zip(batches, series[ref], series["BASS default"]):
                if r and bass:
                    xs.append(b)
                    ys.append(r["ms_per_token"] / bass["ms_per_token"])
            ax[i].plot(xs, ys, "o-")
            ax[i].axhline(1.0, color="gray", lw=0.8)
            # a panel with no pair (that reference was not run) stays linear: log of nothing
            # raised and lost every plot
            ax[i].set(xscale="log" if xs else "linear",
                      title=f"BASS default speedup over {ref}", xlabel="batch")
        ax[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def merge_results(data: dict, others: list[dict]) -> dict:
    """Rows of runs split over one host's GPUs joined into `data`: every part must be the
    same experiment (device, prompt and output length, workload); a later part's row
    replaces an earlier one under the same (system, draft, acceptance, batch)."""
    def key(r):
        return r["system"], r["draft"], r["acceptance"], r["batch"]

    def setting(d):
        return (d.get("device"), d.get("prompt_len"), d.get("max_tokens"),
                {r.get("workload", "closed") for r in d.get("rows", [])} or {"closed"})

    parts = ([data] if data.get("rows") else []) + list(others)
    if not parts:
        raise SystemExit("--merge: no rows in any part")
    for d in parts[1:]:
        if setting(d) != setting(parts[0]):
            raise SystemExit(f"--merge: parts differ in device / prompt / output length / "
                             f"workload: {setting(parts[0])} vs {setting(d)}")
    merged = {k: v for k, v in parts[0].items() if k != "rows"}
    rows: dict = {}
    for d in parts:
        for r in d["rows"]:
            rows[key(r)] = r
        for field in ("startup_kernels", "startup_phases"):
            merged.setdefault(field, {}).update(d.get(field) or {})
    merged["rows"] = list(rows.values())
    merged["merged_parts"] = len(parts)
    return merged


def run_order(systems: list[str], keep_order: bool = False) -> list[str]:
    """BASS's default first, the others as given: a call's time limit then cuts the
    baselines, not the system under test (session 40: a held-out slice of six systems ran
    out of its 430 s after plain and vLLM K=2 / 3, and BASS never ran)."""
    if keep_order or "bass_default" not in systems:
        return list(systems)
    return ["bass_default"] + [s for s in systems if s != "bass_default"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--keep-order", action="store_true",
                   help="run --systems in the order given (default: bass_default first)")
    p.add_argument("--drafts", default=",".join(DRAFT_SHAPES))
    p.add_argument("--acceptance", default="0.6,0.8,0.9,mix")
    p.add_argument("--batches", default="1,8,32,64,128,256")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds an engine may take, start-up included")
    p.add_argument("--first-timeout-extra", type=float, default=90,
                   help="more seconds for the call's first engine (it compiles the models "
                   "for the later ones)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-timed-seconds", type=float, default=3.0,
                   help="more repeats (up to MAX_REPEATS) where a run is short, so that a "
                   "setting's timed runs last about this long; 0: exactly --repeats")
    p.add_argument("--workload", choices=("closed", "continuous"), default="closed",
                   help="closed: every setting's batch starts and ends together (ms/token = "
                   "the makespan over --max-tokens, the paper's metric); continuous: "
                   f"{CONTINUOUS_REQUESTS_PER_SLOT}x the batch in requests, the batch kept in "
                   "flight (ms/token = batch / steady-state tokens per second)")
    p.add_argument("--cold-start", action="store_true",
                   help="each engine also gets empty torch.compile caches (vLLM's, "
                        "inductor's), so start-up seconds compare across systems; without "
                        "it the first engine compiles the models and later ones reuse them")
    p.add_argument("--arms", default="",
                   help="an in-engine A/B of BASS policy attributes, its arms' timed runs "
                   "interleaved: 'LABEL:NAME=VALUE[,NAME=VALUE];LABEL2:...' (e.g. "
                   "'reuse:plan_reuse_steps=4;noreuse:plan_reuse_steps=0'); rows "
                   "SYSTEM[LABEL]. Needs the worker in the engine core's process (one GPU)")
    p.add_argument("--trace-dir", default=None)
    p.add_argument("--out", default=str(REPO / "benchmarks/results/vs_vllm"))
    p.add_argument("--report", action="store_true", help="only rewrite the table and plots")
    p.add_argument("--merge", default="",
                   help="comma-separated JSONs of one experiment split over GPUs: joined "
                   "into --out, then reported (no engine runs)")
    p.add_argument("--profile-dir", default="",
                   help="diagnosis: after timing, one more run of --profile-batches x "
                   "--profile-acceptance under vLLM's torch profiler (traces here)")
    p.add_argument("--profile-batches", default="")
    p.add_argument("--profile-with-stack", action="store_true",
                   help="Python stacks in the traces (profile_summary's blocking sites)")
    p.add_argument("--profile-acceptance", default="0.8")
    args = p.parse_args()
    args.arms = parse_arms(args.arms) if args.arms else []  # fails before any engine starts
    args.profile_batches = [int(b) for b in args.profile_batches.split(",") if b]
    args.profile_acceptance = args.profile_acceptance.split(",")
    if args.profile_dir:
        args.profile_dir = str(Path(args.profile_dir).resolve())
        Path(args.profile_dir).mkdir(parents=True, exist_ok=True)
    args.batches = [int(b) for b in args.batches.split(",")]
    args.acceptance = args.acceptance.split(",")
    out = Path(args.out)
    path = out.with_suffix(".json")
    data = json.loads(path.read_text()) if path.exists() else {"rows": []}
    if args.merge:
        data = merge_results(data, [json.loads(Path(f).read_text())
                                    for f in args.merge.split(",") if f])
        path.write_text(json.dumps(data, indent=1))
    elif not args.report:
        kept = {r.get("workload", "closed") for r in data["rows"]}
        if kept - {args.workload}:
            raise SystemExit(f"{path} holds {sorted(kept)} rows; --workload {args.workload} "
                             "goes to another --out (one workload a file)")
        # rows of other prompt / output lengths are another experiment: merged, a row of
        # 128-token prompts replaced one of 1024 under the same key (session 30, call 3)
        if data["rows"] and (data.get("prompt_len"), data.get("max_tokens")) != (
                args.prompt_len, args.max_tokens):
            raise SystemExit(f"{path} holds rows of --prompt-len {data.get('prompt_len')} "
                             f"--max-tokens {data.get('max_tokens')}; these go to another "
                             "--out (one prompt and output length a file)")
        from benchmarks.e2e.bench_policies import device_name

        data.update(device=device_name(), host_cpu=host_cpu(), prompt_len=args.prompt_len,
                    max_tokens=args.max_tokens, synthetic="alpha^(j+1) per position",
                    mix=list(MIX_PATTERN), cold_start=args.cold_start)
        log_dir = out.parent / (out.name + "_logs")
        log_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            folders = model_folders(Path(tmp), sorted(set(args.drafts.split(",")) | {"4x1024"}))
            engines = 0
            for system in run_order(args.systems.split(","), args.keep_order):
                for draft in (args.drafts.split(",")
                              if engine_system(system) not in PLAIN_SYSTEMS
                              else ["-"]):
                    t0 = time.perf_counter()
                    res = run_system(system, draft if draft != "-" else "4x1024", folders,
                                     args, log_dir, system_timeout(engines, args))
                    engines += 1
                    kernels = res.get("startup_kernels") or {}
                    for r in res["rows"]:
                        r.update(system=f"{system}[{r['arm']}]" if r.get("arm") else system,
                                 draft=draft, startup_s=res.get("startup_s"),
                                 startup_triton_compiles=sum(kernels.values()))
                    names = {r["system"] for r in res["rows"]} | {system}
                    if kernels:  # Triton compiles of the engine's start-up, by kernel
                        data.setdefault("startup_kernels", {})[f"{system}/{draft}"] = kernels
                    log = log_dir / f"{system}_{draft if draft != '-' else '4x1024'}.log"
                    if log.exists():  # also for an engine that wrote no rows
                        data.setdefault("startup_phases", {})[f"{system}/{draft}"] = \
                            startup_phases(log.read_text(errors="replace"))
                    data["rows"] = [r for r in data["rows"] if not (
                        r["system"] in names and r["draft"] == draft
                        and (r["acceptance"], r["batch"]) in {
                            (x["acceptance"], x["batch"]) for x in res["rows"]})] + res["rows"]
                    data["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    path.write_text(json.dumps(data, indent=1))
                    print(f"{system} {draft}: {time.perf_counter() - t0:.0f} s "
                          f"(start-up {res.get('startup_s') or 0:.0f} s, "
                          f"{sum(kernels.values())} Triton compiles)", flush=True)
    report(data, out)
    print(out.with_suffix(".md").read_text())


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
    else:
        main()
