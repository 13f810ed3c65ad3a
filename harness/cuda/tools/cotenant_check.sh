#!/usr/bin/env bash
# The co-tenant check on a GPU: the unchanged initial kernel of the attention
# example evaluated once alone and once while another process
# (tools/cotenant_load.py) runs matrix products on the same GPU; NVML read
# costs; the device's compute mode; whether bubblewrap runs here.  Logs go to
# $VAL (default /tmp/gadfly-cotenant), packed into $OUT/cotenant.tgz after
# every stage when $OUT is set (the device tool).
#
#   bash harness/cuda/tools/cotenant_check.sh [all|env|alone|shared|cheat|tests|exploits]...
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
H=$repo/harness/cuda
VAL=${VAL:-/tmp/gadfly-cotenant}
L=$VAL
B=$VAL/build
mkdir -p "$VAL" "$B" "$L"
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(all)
[ "${stages[0]}" = all ] && stages=(env alone shared cheat tests exploits)
export PYTHONUNBUFFERED=1
build() {
  [ -f "$B/initial.so" ] || python3 -I "$H/build.py" --src "$repo/examples/attention-h200/workspace/kernel" \
      --out "$B/initial.so" --baseline "$H/problems/attention/baseline.cu" --baseline-out "$B/baseline.so" >"$L/build.log" 2>&1
}
load_start() {   # a co-tenant: another process's matrix products on the same GPU
  rm -f "$VAL/ready"
  python3 "$H/tools/cotenant_load.py" --ready "$VAL/ready" --seconds 240 >"$L/cotenant_load_$1.log" 2>&1 &
  LOAD=$!
  for _ in $(seq 1 120); do [ -s "$VAL/ready" ] && break; sleep 0.5; done
  echo "co-tenant PID $LOAD (ready: $(cat "$VAL/ready" 2>/dev/null))" | tee -a "$L/cotenant_load_$1.log"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader >>"$L/cotenant_load_$1.log" 2>&1
}
load_stop() { kill "$LOAD" 2>/dev/null; wait "$LOAD" 2>/dev/null; }
evaluate() {   # name candidate [args...]
  local n=$1 c=$2; shift 2
  local t0=$(date +%s%N)
  python3 -I "$H/evaluate.py" --problem attention --candidate "$c" --baseline "$B/baseline.so" \
      --out "$L/$n.jsonl" --summary "$VAL/$n.summary.json" "$@" 2>"$L/$n.log"
  echo "$n: exit $? in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$L/$n.log"
}
for s in "${stages[@]}"; do
  case $s in
    env)
      { date -u; nvidia-smi --query-gpu=name,pci.bus_id,driver_version,compute_mode --format=csv
        echo "## bwrap"; command -v bwrap || echo "bwrap: not found"
        if command -v bwrap >/dev/null; then bwrap --version
          bwrap --ro-bind / / --dev-bind /dev /dev --proc /proc --unshare-pid --unshare-user true; echo "bwrap ... true: exit $?"; fi
        echo "## NVML read costs (harness/cuda/gadfly_cuda/cotenant.py)"
        python3 - "$H" <<'PY'
import sys, time
sys.path.insert(0, sys.argv[1])
from gadfly_cuda import cotenant
s = cotenant.NvmlSource(None, 0)
print(s.describe(), "compute mode", s.compute_mode())
for name, f in (("compute_processes", s.compute_processes), ("busy_since", lambda: s.busy_since(int(time.time() * 1e6) - 10**6))):
    t = []
    for _ in range(200):
        t0 = time.perf_counter(); r = f(); t.append(time.perf_counter() - t0)
    t.sort(); print(f"{name}: median {t[100]*1e6:.0f} us, max {t[-1]*1e6:.0f} us; last {r}; util_supported={s.util_supported}")
smi = cotenant.SmiSource(None)
t0 = time.perf_counter(); r = smi.compute_processes(); print(f"nvidia-smi query: {(time.perf_counter()-t0)*1e3:.0f} ms; {r}")
PY
      } >"$L/env.txt" 2>&1 ;;
    alone) build; evaluate initial_alone "$B/initial.so" ;;
    shared) build; load_start shared; evaluate initial_shared "$B/initial.so"; load_stop ;;
    cheat)   # a cheat on a shared device gets cannot_tell (does not pass); alone it fails as before
      python3 -I "$H/build.py" --src "$repo/examples/attention-h200/candidates/cheat_side_stream.cu" --out "$B/cheat.so" >>"$L/build.log" 2>&1
      sc=b4_h16_s333_d64_causal,b2_h12_s1000_d64_full
      load_start cheat; evaluate cheat_side_stream_shared "$B/cheat.so" --scenarios $sc; load_stop ;;
    tests) python3 -m unittest discover -s "$H/tests" >"$L/tests.log" 2>&1; echo "tests: exit $?" | tee -a "$L/tests.log" ;;
    exploits) python3 "$H/exploits/run_all.py" --out-dir "$VAL/exploits" >"$L/exploits.log" 2>&1; echo "exploits: exit $?" | tee -a "$L/exploits.log" ;;
  esac
  [ -n "${OUT:-}" ] && tar czf "$OUT/cotenant.tgz" -C "$VAL" --exclude build --exclude ready .
done
# the lines, short
python3 - "$VAL" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    print("==", os.path.basename(f))
    for line in open(f):
        r = json.loads(line)
        print(f"  {r['scenario']:28s} correct={r['correct']!s:5s} t={r['time_us']:.0f} b={r['baseline_us']:.0f} "
              f"cmp={r.get('compare_us') or 0:.0f} stop={r.get('stop','')[:40]!r} "
              + (f"CANNOT_TELL={r['cannot_tell'][:90]!r} " if r.get('cannot_tell') else "")
              + (f"VOIDED={r['voided'][:60]!r} " if r.get('voided') else "")
              + (f"REASON={r['reason'][:80]!r} " if r.get('reason') else "")
              + f"check={r.get('cotenant_check','')[:70]!r}")
PY
