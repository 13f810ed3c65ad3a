#!/usr/bin/env bash
# Red-team checks of qrbench (harness/cpu): each attack is played as a
# candidate library written here, built with cc, and judged by qrbench built
# from this folder's sources in a temporary directory; the results JSON is
# read with python3.  One line per check; exit status 1 if any failed.
#
#   bash harness/cpu/tests/attacks.sh     (needs cc and python3, not make)
#
# About 15-60 s on a 2-core VM.  KEEP=1 keeps the work folder (logs,
# results).  On a loaded machine some scenarios may say cannot_tell; the
# checks allow it where it is a truthful answer and never allow a wrong
# verdict or a pass at a forged speedup.
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)          # harness/cpu
ROOT=$(cd "$HERE/../.." && pwd)
KERNEL="$ROOT/examples/qr-cpu/workspace/kernel/qr.c"
REPLAY="$ROOT/examples/qr-cpu/replay"
CC=${CC:-cc}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qrbench-attacks.XXXXXX")
STOPPER_PID=
cleanup() {
    [ -n "$STOPPER_PID" ] && kill "$STOPPER_PID" 2>/dev/null
    if [ -n "${KEEP:-}" ]; then echo "(kept $WORK)"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
FAILS=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

# ---------------------------------------------------------------- build
if ! $CC -O2 -Wall -Wextra -Werror -fPIC -o "$WORK/qrbench" "$HERE"/*.c -lm -ldl 2>"$WORK/build.log" ||
    ! $CC -O2 -Wall -fPIC -shared -o "$WORK/libbaseline.so" "$HERE/baseline_qr.c" -lm 2>>"$WORK/build.log"; then
    bad "qrbench builds warning-free with -O2 -Wall -Wextra"; cat "$WORK/build.log"; exit 1
fi
ok "qrbench builds warning-free with -O2 -Wall -Wextra"

# kernel NAME SOURCE... [-- EXTRA CC ARGS]: builds $WORK/NAME.so as the Makefile does
kernel() {
    local name=$1; shift
    local srcs=() extra=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do srcs+=("$1"); shift; done
    [ $# -gt 0 ] && shift && extra=("$@")
    $CC -O2 -Wall -fPIC -shared -o "$WORK/$name.so" "${srcs[@]}" -lm "${extra[@]}" 2>"$WORK/$name.build" ||
        { bad "$name: candidate does not build"; cat "$WORK/$name.build"; return 1; }
}

# bench NAME ARGS...: runs qrbench on $WORK/NAME.so, results in $WORK/NAME.jsonl
bench() {
    local name=$1; shift
    timeout 300 "$WORK/qrbench" --lib "$WORK/$name.so" --out "$WORK/$name.jsonl" "$@" >"$WORK/$name.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
        bad "$name: qrbench exited with $rc"; cat "$WORK/$name.log"; return 1
    fi
}

# check NAME MODE [ARG]: asserts on $WORK/NAME.jsonl (see check.py)
cat >"$WORK/check.py" <<'PY'
import json, sys
path, mode = sys.argv[1], sys.argv[2]
arg = sys.argv[3] if len(sys.argv) > 3 else ""
LISTED = {(4, 4), (8, 8), (13, 13), (17, 17), (33, 33), (50, 50), (64, 64), (100, 100), (60, 20)}
lines = [json.loads(l) for l in open(path) if l.strip()]
errs, notes = [], []
if not lines:
    errs.append("no result lines")
for s in lines:
    name, ok, ct = s["scenario"], s["correct"], s.get("cannot_tell")
    speed = s["baseline_us"] / s["time_us"]
    why = s.get("reason", "")
    if "disturbed" not in s or not isinstance(s["disturbed"], int):
        errs.append(f"{name}: no integer field disturbed")
    if mode != "no-held-out":
        h = s.get("held_out", "")
        try:
            b, m, n = (int(x[1:]) for x in h.split("_"))
            if (m, n) in LISTED or m < n:
                errs.append(f"{name}: held-out shape {h} is a listed shape or has m < n")
        except ValueError:
            errs.append(f"{name}: no held_out field naming a shape: {h!r}")
    # never, whatever the mode: a correct scenario, told, at a speedup an
    # unchanged kernel cannot have, unless the mode expects a faster kernel
    # (The unchanged kernel's own figures are timing: on a shared machine
    # they wander, so for it they are notes, never a failure of this test.)
    if mode not in ("faster", "correct", "same") and ok and not ct and speed > 1.4:
        errs.append(f"{name}: passes at a forged speedup {speed:.2f}")
    if mode == "same":          # the baseline as candidate
        if not ok:
            errs.append(f"{name}: incorrect: {why}")
        elif ct:
            if arg == "idle":
                errs.append(f"{name}: cannot_tell on an idle machine: {ct}")
            else:
                notes.append(f"{name}: cannot_tell (machine loaded): {ct[:140]}")
        elif not 0.75 <= speed <= 1.33:
            notes.append(f"{name}: speedup {speed:.3f}, not about 1 (timing on a shared machine: a note, not a failure)")
    elif mode == "sched":       # a scheduling change the grader cannot undo
        if not ok:
            errs.append(f"{name}: incorrect: {why}")
        elif not ct or "scheduling was changed" not in ct:
            errs.append(f"{name}: no cannot_tell naming the scheduling change: {ct}")
    elif mode == "correct":
        if not ok:
            errs.append(f"{name}: incorrect: {why}")
    elif mode == "faster":      # a good kernel
        if not ok:
            errs.append(f"{name}: incorrect: {why}")
        elif ct:
            notes.append(f"{name}: cannot_tell (machine loaded): {ct[:140]}")
        elif speed < 1.3:
            errs.append(f"{name}: speedup {speed:.3f}, expected > 1.3")
    elif mode == "caught":      # a process left behind, or the samples thrown away
        if ok and not ct:
            errs.append(f"{name}: correct and told (speedup {speed:.2f}): the helper was not seen")
        elif not ok and "process" not in why:
            errs.append(f"{name}: incorrect for another reason: {why}")
        if not ok and arg and arg not in why:
            errs.append(f"{name}: reason does not say {arg!r}: {why}")
    elif mode == "refused":     # a library mapped that is not the runtime's
        if ok or "mapped" not in why or arg not in why:
            errs.append(f"{name}: not refused by name {arg!r}: correct={ok} {why}")
    elif mode == "held-out":    # right only on the listed shapes
        if ok or f"held-out shape {s.get('held_out')}:" not in why:
            errs.append(f"{name}: not failed on its held-out shape: correct={ok} {why}")
        elif "call 1:" in why or why.startswith("differs"):
            errs.append(f"{name}: failed on a listed shape, the kernel was meant to be right there: {why}")
    elif mode == "stalled":     # an outside process stops the baseline
        if not ok:
            errs.append(f"{name}: incorrect (an outside stall is never the candidate's fault): {why}")
        elif not ct:
            errs.append(f"{name}: no cannot_tell under an outside stall (speedup {speed:.2f}, disturbed {s['disturbed']})")
        elif s["disturbed"] < 1:
            errs.append(f"{name}: cannot_tell without a disturbed sample")
    elif mode == "wrong-tail":  # replay 01: wrong wherever m % 4 != 0
        m = int(name.split("_")[1][1:])
        if ok:
            errs.append(f"{name}: correct, expected incorrect")
        elif m % 4 == 0 and "held-out shape" not in why:
            errs.append(f"{name}: right on its listed m = {m}, so it must fail on its held-out shape: {why}")
    elif mode == "no-held-out":
        if "held_out" in s:
            errs.append(f"{name}: held_out reported under --no-held-out")
for n in notes:
    print("     note: " + n)
for e in errs:
    print("     " + e)
sys.exit(1 if errs else 0)
PY
check() {
    local name=$1 mode=$2 arg=${3:-} what=$4
    if python3 "$WORK/check.py" "$WORK/$name.jsonl" "$mode" "$arg"; then ok "$what"; else bad "$what"; fi
}

load1() { cut -d' ' -f1 /proc/loadavg; }
idle_flag() { python3 -c "import sys; print('idle' if max(map(float, sys.argv[1:])) < 0.5 else 'loaded')" "$@"; }

# ---------------------------------------------------------------- a. the baseline as candidate
L0=$(load1)
kernel same "$KERNEL" &&
bench same --scenarios b2048_m8_n8,b128_m60_n20 &&
check same same "$(idle_flag "$L0" "$(load1)")" "a. the unchanged baseline kernel: correct everywhere, speedup about 1"

# ---------------------------------------------------------------- b. a helper process stops the baseline
# The helper is forked by a SECOND thread of the candidate's runner, which
# stays alive (so the helper stays that thread's child, not the main
# thread's), and stops the baseline's runner 3 ms in every 4.  Against the
# former harness this passed at a forged 2.2-3.7x.
cat >"$WORK/stopper.h" <<'C'
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* the baseline's runner: a child of the grader (our parent) running with
 * "--runner baseline" */
static pid_t rt_find_baseline(pid_t grader)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && (e = readdir(d)) && !found) {
        char path[64], buf[512];
        FILE *f;
        size_t k, i;
        long ppid = 0;
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        if (!(f = fopen(path, "r")))
            continue;
        k = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[k] = 0;
        if (!strrchr(buf, ')') || sscanf(strrchr(buf, ')') + 1, " %*c %ld", &ppid) != 1 || ppid != grader)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
        if (!(f = fopen(path, "r")))
            continue;
        k = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        for (i = 0; i < k; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[k] = 0;
        if (strstr(buf, "--runner baseline"))
            found = pid;
    }
    if (d)
        closedir(d);
    return found;
}
static void rt_stop_loop(pid_t b)
{
    for (;;) {
        if (kill(b, SIGSTOP) != 0)
            _exit(0);
        usleep(3000);
        kill(b, SIGCONT);
        usleep(1000);
    }
}
C
cat >"$WORK/thread_fork.c" <<C
#include "$WORK/stopper.h"
static void *rt_thread(void *arg)
{
    pid_t b = rt_find_baseline(*(pid_t *)arg);
    if (b > 0 && fork() == 0)
        rt_stop_loop(b);
    for (;;)
        pause(); /* the forking thread stays: the helper stays its child */
    return NULL;
}
static pid_t rt_grader;
__attribute__((constructor)) static void rt_start(void)
{
    pthread_t t;
    rt_grader = getppid();
    pthread_create(&t, NULL, rt_thread, &rt_grader);
}
C
kernel thread_fork "$WORK/thread_fork.c" "$KERNEL" -- -pthread &&
bench thread_fork --scenarios b2048_m8_n8,b128_m60_n20 --repeats 15 &&
check thread_fork caught "" "b. a helper forked by a second thread that stops the baseline: caught, never a forged pass"

# the same helper, double-forked and setsid'd from a second thread (an
# orphan: the grader's child as a subreaper)
cat >"$WORK/orphan.c" <<C
#include "$WORK/stopper.h"
static pid_t rt_grader;
static void *rt_thread(void *arg)
{
    pid_t b = rt_find_baseline(*(pid_t *)arg);
    if (b > 0 && fork() == 0) {
        if (fork() == 0) {
            setsid();
            rt_stop_loop(b);
        }
        _exit(0);
    }
    for (;;)
        pause();
    return NULL;
}
__attribute__((constructor)) static void rt_start(void)
{
    pthread_t t;
    rt_grader = getppid();
    pthread_create(&t, NULL, rt_thread, &rt_grader);
}
C
kernel orphan "$WORK/orphan.c" "$KERNEL" -- -pthread &&
bench orphan --scenarios b2048_m8_n8,b128_m60_n20 --repeats 15 &&
check orphan caught "" "b2. the helper double-forked and setsid'd from a second thread: caught"

# a candidate that renices the baseline's runner (and the grader) to 19 and
# pins it to one CPU at the end of each of its calls.  It checks at the
# start of its next call, if the baseline ran in between (its CPU time,
# read through a descriptor opened in the constructor, changed), that the
# baseline is back at its first nice value and affinity, and answers wrong
# otherwise: correct everywhere means every change was undone in time.
# Only a privileged grader can lower a nice value again: run unprivileged,
# the candidate does not check, and every baseline sample must be
# disturbed instead (cannot_tell naming the change).
cat >"$WORK/renice.c" <<C
#define _GNU_SOURCE
#include "$WORK/stopper.h"
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#define qr_batched rt_inner_qr_batched
#include "$KERNEL"
#undef qr_batched
static pid_t rt_b;
static int rt_fd = -1, rt_nice0;
static unsigned long long rt_last = ~0ULL;
static cpu_set_t rt_cpus0;
static unsigned long long rt_cpu(void)
{
    char buf[128];
    ssize_t k = pread(rt_fd, buf, sizeof(buf) - 1, 0);
    if (k <= 0)
        return 0;
    buf[k] = 0;
    return strtoull(buf, NULL, 10);
}
__attribute__((constructor)) static void rt_start(void)
{
    char path[64];
    rt_b = rt_find_baseline(getppid());
    snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)rt_b);
    rt_fd = open(path, O_RDONLY);
    rt_nice0 = getpriority(PRIO_PROCESS, (id_t)rt_b);
    sched_getaffinity(rt_b, sizeof(rt_cpus0), &rt_cpus0);
}
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    int bad = 0;
    if (RT_CHECK && rt_b > 0 && rt_fd >= 0 && rt_last != ~0ULL && rt_cpu() != rt_last) {
        cpu_set_t now;
        if (getpriority(PRIO_PROCESS, (id_t)rt_b) != rt_nice0)
            bad = 1;
        if (sched_getaffinity(rt_b, sizeof(now), &now) == 0 && !CPU_EQUAL(&now, &rt_cpus0))
            bad = 1;
    }
    rt_inner_qr_batched(batch, m, n, A, Q, R);
    if (bad)
        memset(Q, 0, sizeof(double) * (size_t)batch * m * n);
    if (rt_b > 0 && rt_fd >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        setpriority(PRIO_PROCESS, (id_t)rt_b, 19);
        sched_setaffinity(rt_b, sizeof(one), &one);
        setpriority(PRIO_PROCESS, (id_t)getppid(), 19);
        rt_last = rt_cpu();
    }
}
C
if [ "$(id -u)" = 0 ]; then
    kernel renice "$WORK/renice.c" -- -DRT_CHECK=1 &&
    bench renice --scenarios b2048_m8_n8,b128_m60_n20 --repeats 9 &&
    check renice same loaded "b3. a kernel that renices and re-pins the baseline after each call: every change undone before the baseline runs"
else
    kernel renice "$WORK/renice.c" -- -DRT_CHECK=0 &&
    bench renice --scenarios b2048_m8_n8,b128_m60_n20 --repeats 9 &&
    check renice sched "" "b3. a kernel that renices the baseline (unprivileged grader, cannot undo it): cannot_tell, never a forged pass"
fi

# ---------------------------------------------------------------- c. copies of real libraries
LIBM=$(ldd "$WORK/qrbench" | awk '/libm\.so\.6/ {print $3}')
LIBZ=$(ldconfig -p 2>/dev/null | awk '/libz\.so\.1 .*x86-64|libz\.so\.1 .*AArch64/ {print $NF; exit}')
[ -n "$LIBZ" ] || LIBZ=$LIBM
mkdir -p "$WORK/x" "$WORK/y"
cp "$LIBM" "$WORK/x/libm.so.6-"            # passed the former name-prefix rule
cp "$LIBZ" "$WORK/y/libm.so.6"             # a banned library under a runtime library's exact name
cp "$LIBZ" "$WORK/y/libgomp.so.1"
for v in "x/libm.so.6-" "y/libm.so.6" "y/libgomp.so.1"; do
    tag=$(echo "$v" | tr -c 'a-z0-9\n' '_')
    cat >"$WORK/lib_$tag.c" <<C
#include <dlfcn.h>
static void *rt_keep;
__attribute__((constructor)) static void rt_load(void) { rt_keep = dlopen("$WORK/$v", RTLD_NOW | RTLD_LOCAL); }
C
    kernel "lib_$tag" "$WORK/lib_$tag.c" "$KERNEL" -- -ldl &&
    bench "lib_$tag" --scenarios b2048_m8_n8,b128_m60_n20 --repeats 3 &&
    check "lib_$tag" refused "$WORK/$v" "c. a copy of a real library loaded as $v: refused by name"
done
# a copy in a memory file of the candidate's own (dlopen through /proc/self/fd)
cat >"$WORK/lib_memfd.c" <<C
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
static void *rt_keep;
__attribute__((constructor)) static void rt_load(void)
{
    char buf[65536], path[64];
    int in = open("$LIBZ", O_RDONLY), fd = memfd_create("qrbench-buffers", 0);
    ssize_t k;
    while (in >= 0 && fd >= 0 && (k = read(in, buf, sizeof(buf))) > 0)
        if (write(fd, buf, (size_t)k) != k)
            return;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    rt_keep = dlopen(path, RTLD_NOW | RTLD_LOCAL);
}
C
kernel lib_memfd "$WORK/lib_memfd.c" "$KERNEL" -- -ldl &&
bench lib_memfd --scenarios b2048_m8_n8 --repeats 3 &&
check lib_memfd refused "/memfd:qrbench-buffers" "c2. a library copied into a memory file named like the harness's: refused"
# control: an OpenMP kernel (libgomp, threads) that also loads libstdc++ and
# libatomic, the runtime libraries themselves: accepted and correct
cat >"$WORK/runtime.c" <<C
#include <dlfcn.h>
#include <omp.h>
#define qr_batched rt_inner_qr_batched
#include "$KERNEL"
#undef qr_batched
static void *rt_a, *rt_b;
__attribute__((constructor)) static void rt_load(void)
{
    rt_a = dlopen("libstdc++.so.6", RTLD_NOW);
    rt_b = dlopen("libatomic.so.1", RTLD_NOW);
}
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
#pragma omp parallel
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int lo = batch * t / T, hi = batch * (t + 1) / T;
        rt_inner_qr_batched(hi - lo, m, n, A + (size_t)lo * m * n, Q + (size_t)lo * m * n, R + (size_t)lo * n * n);
    }
}
C
kernel runtime "$WORK/runtime.c" -- -fopenmp -ldl &&
bench runtime --scenarios b2048_m8_n8,b128_m60_n20 --repeats 5 &&
check runtime correct "" "c3. an OpenMP kernel that also loads libstdc++ and libatomic: accepted, correct"

# ---------------------------------------------------------------- d. right only on the listed shapes
cat >"$WORK/listed.c" <<C
#include <string.h>
#define qr_batched rt_inner_qr_batched
#include "$KERNEL"
#undef qr_batched
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    static const int listed[][3] = {{4096, 4, 4}, {2048, 8, 8}, {1024, 13, 13}, {512, 17, 17}, {128, 33, 33},
                                    {32, 50, 50}, {16, 64, 64}, {4, 100, 100}, {128, 60, 20}};
    unsigned i;
    for (i = 0; i < sizeof(listed) / sizeof(listed[0]); i++)
        if (listed[i][0] == batch && listed[i][1] == m && listed[i][2] == n) {
            rt_inner_qr_batched(batch, m, n, A, Q, R);
            return;
        }
    memset(Q, 0, sizeof(double) * (size_t)batch * m * n); /* anything else: wrong */
    memset(R, 0, sizeof(double) * (size_t)batch * n * n);
}
C
kernel listed "$WORK/listed.c" &&
bench listed --repeats 1 &&
check listed held-out "" "d. a kernel right only on the 9 listed shapes: incorrect on every scenario, by its held-out shape"
# the same with another seed: other held-out shapes, still caught
bench listed --repeats 1 --seed 7 --scenarios b4096_m4_n4,b4_m100_n100,b128_m60_n20 &&
check listed held-out "" "d2. the same with --seed 7 (other held-out shapes)"
# and --no-held-out: the listed shapes alone pass it (the check is what catches it)
bench listed --repeats 1 --no-held-out --scenarios b2048_m8_n8 &&
check listed no-held-out "" "d3. --no-held-out drops the field"

# ---------------------------------------------------------------- e. an outside process stops the baseline
# The candidate is the baseline kernel that also fails if it ever sees the
# same inputs twice (so the redone rounds must bring fresh inputs), and
# waits in its constructor until the stopper (started by this script, not
# by the candidate) has found the baseline's runner.
cat >"$WORK/fresh.c" <<C
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define qr_batched rt_inner_qr_batched
#include "$KERNEL"
#undef qr_batched
static uint64_t rt_seen[4096];
static int rt_nseen;
__attribute__((constructor)) static void rt_wait(void)
{
    struct stat st;
    int i;
    for (i = 0; i < 2000 && stat("$WORK/stopper.ready", &st) != 0; i++)
        usleep(5000);
}
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    uint64_t h = 1469598103934665603ULL;
    size_t i, len = (size_t)batch * m * n;
    int k, again = 0;
    for (i = 0; i < len; i += 7) {
        uint64_t x;
        memcpy(&x, A + i, 8);
        h = (h ^ x) * 1099511628211ULL;
    }
    for (k = 0; k < rt_nseen; k++)
        if (rt_seen[k] == h)
            again = 1;
    if (rt_nseen < 4096)
        rt_seen[rt_nseen++] = h;
    rt_inner_qr_batched(batch, m, n, A, Q, R);
    if (again)
        memset(Q, 0, sizeof(double) * len); /* seen before: answer wrong */
}
C
cat >"$WORK/outside.c" <<C
#include <time.h>
#include "$WORK/stopper.h"
/* outside GRADER READY: finds the baseline's runner of the grader, says
 * so in READY, then stops it 2 ms in every 2.5 ms until it is gone */
int main(int argc, char **argv)
{
    pid_t b = 0;
    int i;
    FILE *f;
    struct timespec stop = {0, 2000000}, go = {0, 500000};
    for (i = 0; i < 10000 && b <= 0; i++) {
        b = rt_find_baseline((pid_t)atoi(argv[1]));
        if (b <= 0)
            usleep(2000);
    }
    if (argc < 3 || !(f = fopen(argv[2], "w")))
        return 1;
    fprintf(f, "%d\n", (int)b);
    fclose(f);
    while (b > 0 && kill(b, SIGSTOP) == 0) {
        nanosleep(&stop, NULL);
        kill(b, SIGCONT);
        nanosleep(&go, NULL);
    }
    return 0;
}
C
if kernel fresh "$WORK/fresh.c" && $CC -O2 -o "$WORK/outside" "$WORK/outside.c"; then
    # control first: no stopper, the fresh-inputs kernel is correct (no
    # input is ever seen twice), then the same under the stopper
    touch "$WORK/stopper.ready"
    bench fresh --scenarios b2048_m8_n8,b128_m60_n20 &&
    check fresh same loaded "e0. no input is ever given twice (round 0, held-out, warm-up and timed rounds)"
    rm -f "$WORK/stopper.ready"
    "$WORK/qrbench" --lib "$WORK/fresh.so" --out "$WORK/stalled.jsonl" \
        --scenarios b2048_m8_n8,b128_m60_n20 --repeats 15 >"$WORK/stalled.log" 2>&1 &
    QPID=$!
    "$WORK/outside" "$QPID" "$WORK/stopper.ready" &
    STOPPER_PID=$!
    if wait "$QPID"; then
        check stalled stalled "" "e. an outside process stops the baseline 2 ms in 2.5: cannot_tell, correct, no forged pass"
    else
        bad "e. qrbench failed under an outside stall"; cat "$WORK/stalled.log"
    fi
    kill "$STOPPER_PID" 2>/dev/null; wait "$STOPPER_PID" 2>/dev/null; STOPPER_PID=
fi

# ---------------------------------------------------------------- existing behaviour: the replay kernels
kernel good "$REPLAY/03-good.c" &&
bench good --scenarios b2048_m8_n8,b128_m60_n20,b4_m100_n100 &&
check good faster "" "f. replay 03-good: correct and faster"
kernel wrongtail "$REPLAY/01-wrong-tail.c" &&
bench wrongtail --scenarios b1024_m13_n13,b128_m60_n20 --repeats 3 &&
check wrongtail wrong-tail "" "g. replay 01-wrong-tail: incorrect on m = 13, and on m = 60 by its held-out shape (m = 50)"

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all checks passed"
