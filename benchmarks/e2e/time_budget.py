"""HumanEval under a time budget per problem: `vllm_bass.bench.time_budget` (the same as
`vllm-bass time-budget`; every option of it), plus `--dummy-7b`: the 7B-shape target and
a draft of `vs_vllm.py` (`--dummy-draft 4x1024|8x1024`) with dummy bf16 weights, for
samples per budget and throughput on a GPU (pass rates are then meaningless; give
`--synthetic-acceptance ALPHA` so drafts are accepted as in `vs_vllm.py`). E.g.

    python benchmarks/e2e/time_budget.py --dummy-7b --synthetic-acceptance 0.8 \\
        --systems plain,vllm_k3,bass --n 1,8,32 --budgets 1,2,5 --problems 0:20 \\
        --out benchmarks/results/time_budget_h100 [--append]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    from vllm_bass.bench import time_budget

    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--dummy-7b", action="store_true")
    p.add_argument("--dummy-draft", default="4x1024", choices=["4x1024", "8x1024"])
    ours, rest = p.parse_known_args()
    if "-h" in rest or "--help" in rest:
        print(__doc__)
    with tempfile.TemporaryDirectory(prefix="time-budget-dummy-") as tmp:
        if ours.dummy_7b:  # user options come after ours, so they win (--dtype float32)
            from benchmarks.e2e.vs_vllm import model_folders

            folders = model_folders(Path(tmp))
            rest = ["--model", folders["target"], "--draft", folders[ours.dummy_draft],
                    "--load-format", "dummy", "--dtype", "bfloat16"] + rest
        time_budget.main(rest)


if __name__ == "__main__":
    main()
