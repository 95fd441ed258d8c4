#!/usr/bin/env bash
# On the GPU host, after `source .gpubundle/setup.sh`: session 7's measurements, each part
# sized for one 600 s device call (set-up included). Results and logs under $OUT, packed so
# that what comes back stays under the device tool's 8-file limit.
#   bash scripts/gpu_bench.sh async7b   # 7B shape: plain vs bass sync vs bass/per_request async
#   bash scripts/gpu_bench.sh attn      # session 7: where async off-steps wait (sync debug,
#                                       # batch 32), then our attention vs FA3 end to end under
#                                       # per_request + async and plain decoding, with traces
#   bash scripts/gpu_bench.sh final     # session 7, ~4 min: per_request + async with the
#                                       # stall-robust non-negative cost fit, FA3 vs our
#                                       # attention for the target only (attention: target)
#   bash scripts/gpu_bench.sh kernels   # kernel GPU tests, the 96-shape kernel benchmark (with
#                                       # the any-batch grid vs the direct grid),
#                                       # then the engine tests outside the engine part
set -uo pipefail
OUT=${OUT:-/tmp/out}
W=/tmp/gpu_bench
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
bench() { timeout "$1" python3 benchmarks/e2e/bench_policies.py "${@:2}"; }
pack() {  # the tables come back as files, everything else in one archive
  cp "$W"/*.md "$OUT"/ 2>/dev/null
  tar czf "$OUT/$1.tgz" -C "$W" .
}
case "${1:-}" in
  async7b)
    bench 480 --pair llama7b --configs plain,bass,bass_async,per_request_async \
      --out "$W/e2e_llama7b_async" 2>&1 | tee "$W/async7b.log"
    pack async7b ;;
  attn)
    bench 120 --pair llama7b --configs bass_async --batch-sizes 32 --max-tokens 64 \
      --sync-debug-dir "$W" --out "$W/syncs7b" 2>&1 | tee "$W/syncs.log"
    mkdir -p "$W/traces"
    bench 420 --pair llama7b --trace-dir "$W/traces" \
      --configs per_request_async,per_request_async_bass_attn,plain,plain_triton_attn \
      --out "$W/e2e_llama7b_attn" 2>&1 | tee "$W/attn.log"
    pack attn ;;
  final)
    mkdir -p "$W/traces"
    bench 220 --pair llama7b --trace-dir "$W/traces" \
      --configs per_request_async_target_attn,per_request_async \
      --out "$W/e2e_llama7b_final" 2>&1 | tee "$W/final.log"
    pack final ;;
  kernels)
    timeout 170 python3 -m pytest tests/kernels -m gpu -q -rfEs -p no:cacheprovider 2>&1 \
      | tee "$W/kernel_tests.txt"
    timeout 150 python3 benchmarks/kernels/bench_paged_attention.py --any-batch \
      --no-eager --out "$W" 2>&1 | tee "$W/kernel_bench.log"
    OUT="$W" timeout 170 bash scripts/gpu_tests.sh rest -k "attention or model_runner or server" \
      > /dev/null 2>&1
    pkill -9 -f "[v]llm.entrypoints" || true  # a server the timeout left behind
    pack kernels ;;
  *) echo "usage: $0 async7b|attn|final|kernels" >&2; exit 2 ;;
esac
