#!/usr/bin/env bash
# vs_vllm.py split over the GPUs of one host, one process a GPU at the same time, then one
# merged JSON + table + plot. Each process keeps its own torch.compile caches (two engines
# compiling into one cache at once would race).
# VS_VLLM_PART_SECONDS=N: each part stops after N s (its rows so far are kept, the engines
# it left are killed), so the merge still runs within a device call's limit.
#   benchmarks/e2e/vs_vllm_gpus.sh OUT "SYSTEMS_GPU0" "SYSTEMS_GPU1" [...] -- [vs_vllm args]
# e.g. vs_vllm_gpus.sh $OUT/vs "bass_default,plain" "vllm_k3,vllm_k5" -- --drafts 5x1280
set -uo pipefail
out=$1; shift
groups=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do groups+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#groups[@]} -gt 0 ] || { echo "usage: $0 OUT SYSTEMS_GPU0 [SYSTEMS_GPU1 ...] -- [args]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
parts=() pids=()
for i in "${!groups[@]}"; do
  part="${out}_gpu$i"
  parts+=("$part.json")
  CUDA_VISIBLE_DEVICES=$i VLLM_CACHE_ROOT="/tmp/vs_vllm_cache$i" \
    TORCHINDUCTOR_CACHE_DIR="/tmp/vs_vllm_inductor$i" \
    timeout "${VS_VLLM_PART_SECONDS:-0}" python3 "$here/vs_vllm.py" --systems "${groups[$i]}" --out "$part" "$@" \
    > "${part}_stdout.txt" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
pkill -9 -f "vs_vllm.py --child" 2>/dev/null  # engines of a part that ran out of time
existing=()
for f in "${parts[@]}"; do [ -f "$f" ] && existing+=("$f"); done
(IFS=,; python3 "$here/vs_vllm.py" --merge "${existing[*]}" --out "$out" "$@")
