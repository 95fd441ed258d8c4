#!/usr/bin/env bash
# On the GPU host, after `source .gpubundle/setup.sh`: the gpu-marked tests (engine, server
# through `vllm serve`, bad input, distribution, CUSTOM attention backend), logs into $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
python3 -m pytest -m gpu -v -rs --durations=15 -p no:cacheprovider "$@" tests \
  --ignore=tests/kernels 2>&1 | tee "$OUT/gpu_tests.txt"
