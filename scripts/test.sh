#!/usr/bin/env bash
# The test command: set up this CPU machine (first run only), then run every CPU test,
# kernels included (Triton interpreter on small shapes). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_cpu.sh
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
exec python3 -m pytest -m cpu -v -rs "$@" tests
