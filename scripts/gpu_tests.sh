#!/usr/bin/env bash
# On the GPU host, after `source .gpubundle/setup.sh`: the gpu-marked tests, logs into $OUT.
# The whole set takes ~10 min, more than one 600 s device call with the set-up, so it comes
# in two parts that each fit one call:
#   bash scripts/gpu_tests.sh engine   # greedy equality (every policy, preemption, auto-off,
#                                      # catch-up), distribution, synthetic acceptance
#   bash scripts/gpu_tests.sh rest     # server via `vllm serve`, CUSTOM attention engine,
#                                      # bad input, patches, plugin, scheduler, runner
#   bash scripts/gpu_tests.sh          # both (two calls' worth)
#   bash scripts/gpu_tests.sh multigpu # 2+ GPUs: tensor parallel 2, multiprocessing and Ray
#                                      # (Ray: source .gpubundle-ray/setup.sh first)
#   bash scripts/gpu_tests.sh files F... # the gpu-marked tests of those files only (one
#                                      # GPU's share when two run at once: gpu_bench.sh tests53)
# Extra arguments go to pytest. The kernel tests: benchmarks/kernels/run_kernels_gpu.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
part=${1:-all}
[ $# -gt 0 ] && shift
ENGINE=(tests/test_engine_greedy.py tests/test_engine_greedy_async.py tests/sampling)
case "$part" in
  engine) targets=("${ENGINE[@]}"); ignore=() ;;
  rest) targets=(tests); ignore=(--ignore=tests/test_engine_greedy.py
        --ignore=tests/test_engine_greedy_async.py --ignore=tests/sampling) ;;
  all) targets=(tests); ignore=() ;;
  multigpu) targets=(tests/test_engine_tensor_parallel.py); ignore=() ;;
  files) targets=(); ignore=() ;;  # the files come as pytest arguments
  *) echo "usage: $0 [engine|rest|all|multigpu|files] [pytest args]" >&2; exit 2 ;;
esac
marker=gpu
[ "$part" = multigpu ] && marker=multigpu
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
python3 -m pytest -m "$marker" -v -rs --durations=15 -p no:cacheprovider "$@" "${targets[@]}" \
  --ignore=tests/kernels "${ignore[@]}" 2>&1 | tee "$OUT/gpu_tests_$part.txt"
