#!/usr/bin/env bash
# The validation behind harness/cuda/results/: builds, evaluations of the
# initial kernel and the prepared candidates, repeats for timing noise, and the
# exploit suite, on an H100/H200.  Each stage writes under $VAL (default
# /tmp/gadfly-val) and, when $OUT is set (the device tool), re-packs it into
# $OUT/val.tgz after every stage so a partial run still returns its files.
#
#   bash harness/cuda/tools/h200_validate.sh STAGE...
#   stages: env build quick exploits initial good wrong cheat_cache cheat_side_stream triton noise
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
H=$repo/harness/cuda
C=$repo/examples/attention-h200/candidates
VAL=${VAL:-/tmp/gadfly-val}
B=$VAL/build
mkdir -p "$VAL/results" "$B"
export PYTHONUNBUFFERED=1
NOISE_REPEATS=${NOISE_REPEATS:-3}
NOISE_SCENARIOS=${NOISE_SCENARIOS:-}

pack() { [ -n "${OUT:-}" ] && tar -C "$VAL" --exclude=build -czf "$OUT/val.tgz" . ; }
note() { echo "== $*" | tee -a "$VAL/commands.log"; }
run() {  # run NAME TIMEOUT CMD...: logged, timed, never aborts the script
  local name=$1 to=$2; shift 2
  echo "\$ $*" >> "$VAL/commands.log"
  local t0=$(date +%s%N)
  timeout "$to" "$@" > "$VAL/results/$name.log" 2>&1
  local rc=$?
  local dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "   -> exit $rc in ${dt} ms ($name)" | tee -a "$VAL/commands.log"
  tail -n 25 "$VAL/results/$name.log"
  pack
  return $rc
}
evaluate() {  # evaluate NAME CANDIDATE [extra args]
  local name=$1 cand=$2; shift 2
  run "$name" 560 python3 -I "$H/evaluate.py" --problem attention --candidate "$cand" --baseline "$B/baseline.so" \
    --out "$VAL/results/$name.jsonl" --summary "$VAL/results/$name.summary.json" "$@"
}

for stage in "$@"; do
  note "stage $stage ($(date -u +%FT%TZ))"
  case $stage in
    env)
      { nvidia-smi; nvcc --version; python3 -c 'import torch, triton, sys; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__); print(torch.cuda.get_device_properties(0))'; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,clocks_event_reasons.active --format=csv; uname -a; nproc; } > "$VAL/results/env.txt" 2>&1
      cat "$VAL/results/env.txt" | tail -n 30; pack ;;
    build)
      export GADFLY_CUDA_CACHE=$VAL/cache
      run build_initial 300 python3 -I "$H/build.py" --src "$repo/examples/attention-h200/workspace/kernel" --out "$B/initial.so" \
        --baseline "$H/problems/attention/baseline.cu" --baseline-out "$B/baseline.so"
      for c in good wrong cheat_cache cheat_side_stream; do
        run "build_$c" 300 python3 -I "$H/build.py" --src "$C/$c.cu" --out "$B/$c.so"
      done
      run build_good_again 300 python3 -I "$H/build.py" --src "$C/good.cu" --out "$B/good2.so"   # cache hit
      { for f in "$B"/*.so; do echo "## $f: DT_NEEDED and banned strings"; readelf -d "$f" | grep NEEDED;
          strings -n 6 "$f" | grep -i -E 'cublas|cudnn|cutlass|cute::' | head -5; done;
        grep -h -E 'registers|spill|smem' "$B"/good.so.log | sort | uniq -c; } > "$VAL/results/binaries.txt" 2>&1
      cat "$VAL/results/binaries.txt" | tail -n 30; pack ;;
    quick)
      evaluate quick_good "$B/good.so" --scenarios b16_h16_s256_d64_full,b2_h12_s1000_d128_causal,b1_h8_s2047_d128_full ;;
    exploits)
      run exploits 560 python3 "$H/exploits/run_all.py" --out-dir "$VAL/exploits" ;;
    initial) evaluate initial "$B/initial.so" ;;
    good) evaluate good "$B/good.so" ;;
    wrong) evaluate wrong "$B/wrong.so" ;;
    cheat_cache) evaluate cheat_cache "$B/cheat_cache.so" ;;
    cheat_side_stream) evaluate cheat_side_stream "$B/cheat_side_stream.so" ;;
    triton) evaluate triton_good "$C/triton_good.py" ;;
    noise)
      for i in $(seq 1 "$NOISE_REPEATS"); do
        evaluate "noise_good_$i" "$B/good.so" --no-compare ${NOISE_SCENARIOS:+--scenarios $NOISE_SCENARIOS}
      done ;;
    *) echo "unknown stage $stage" ;;
  esac
done
pack
