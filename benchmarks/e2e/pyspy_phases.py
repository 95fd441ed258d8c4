"""Where each engine's serving host time goes, from a py-spy `record -f raw --subprocesses`
file over `vs_vllm.py` (one child per system, each with its engine-core process): samples
under the engine core's step, less the stacks that compile (Triton, dynamo), by the
functions in --phases (inclusive seconds at the sampling rate). Session 41 read the BASS
engine's extra host work against vLLM's draft_model this way.

    python benchmarks/e2e/pyspy_phases.py pyspy.txt --systems 529=bass_default,982=vllm_k2
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.e2e.pyspy_summary import _name  # noqa: E402

PHASES = ["Scheduler.schedule", "BassScheduler._bass_plan_step", "StepCostEstimator.model_for",
          "PerRequestDraftLength.plan",
          "BassScheduler._bass_write_plan",  # the plan trace (diagnostics)
          "update_from_output", "GPUModelRunner.execute_model",
          "GPUModelRunner._prepare_inputs", "count_correction", "GPUModelRunner._model_forward",
          "GPUModelRunner._update_states",
          # the host waiting for the previous step's counts (async): host ahead of the device
          "GPUModelRunner._get_valid_sampled_token_count", "GPUModelRunner.sample_tokens",
          "GPUModelRunner._sample", "BassRejectionSampler.forward",
          "GPUModelRunner.propose_draft_token_ids", "set_inputs_first_pass"]
COMPILING = ("_do_compile", "compile_wrapper", "ConvertFrame")


def phases(path: Path, systems: dict[str, str], rate: float) -> dict:
    out = {}
    stacks: dict[str, list] = {name: [] for name in systems.values()}
    for line in path.read_text().splitlines():
        if " " not in line:
            continue
        frames, count = line.rsplit(" ", 1)
        parts = frames.split(";")
        if len(parts) < 3 or not parts[2].startswith("process"):
            continue  # not an engine-core process under a system's child
        m = re.match(r"process (\d+)", parts[1])
        system = systems.get(m.group(1), systems.get("*")) if m else None
        if system is None:
            continue
        names = [_name(p) for p in parts[3:]]
        if any(n.startswith("EngineCore.step") for n in names):
            stacks[system].append((names, int(count)))
    for system, st in stacks.items():
        clean = [(n, c) for n, c in st if not any(k in f for f in n for k in COMPILING)]
        inclusive = collections.Counter()
        for names, count in clean:
            for phase in PHASES:
                if any(phase in f for f in names):
                    inclusive[phase] += count
        out[system] = {"step_s": round(sum(c for _, c in st) / rate, 3),
                       "compiling_s": round(sum(c for _, c in st) / rate
                                            - sum(c for _, c in clean) / rate, 3),
                       "serving_s": round(sum(c for _, c in clean) / rate, 3),
                       "phases_s": {p: round(inclusive[p] / rate, 3) for p in PHASES
                                    if inclusive[p]}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path)
    ap.add_argument("--systems", required=True,
                    help="PID=name of each system's child process (*=name: every child, for "
                         "a recording of one system)")
    ap.add_argument("--rate", type=float, default=200.0, help="py-spy's samples per second")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    systems = dict(item.split("=", 1) for item in args.systems.split(","))
    result = phases(args.raw, systems, args.rate)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
