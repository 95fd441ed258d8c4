#!/usr/bin/env bash
# Main job: set up this CPU machine (first run only) and run the BASS demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_cpu.sh
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
exec python3 scripts/demo.py "$@"
