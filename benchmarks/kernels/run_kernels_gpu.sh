#!/bin/bash
# On the GPU host, from the repo root:  bash benchmarks/kernels/run_kernels_gpu.sh [pytest args]
# GPU kernel tests, then the paged-attention benchmark; logs and results under $OUT.
set -o pipefail
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
source .gpubundle/setup.sh
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu_info.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu_info.txt"
timeout ${TEST_TIMEOUT:-170} python3 -m pytest tests/kernels -m gpu -q -rfEs -p no:cacheprovider "$@" 2>&1 | tee "$OUT/gpu_tests.txt"
echo "pytest rc=$?"
timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/kernels/bench_paged_attention.py --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_log.txt"
echo "bench rc=$?"
