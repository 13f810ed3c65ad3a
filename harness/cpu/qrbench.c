/*
 * qrbench: correctness and timing harness for a batched Householder QR
 * kernel on the CPU.
 *
 *   qrbench --lib PATH.so --out RESULTS.jsonl [--baseline-lib PATH.so]
 *           [--scenarios a,b,c] [--repeats N] [--seed S] [--no-held-out] [--list]
 *
 * The candidate library must export
 *   void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R);
 * It is compared against the baseline (the initial kernel, as a library
 * built with the candidate's flags, by default libbaseline.so beside this
 * program, loaded the candidate's way) and a long double reference.  One JSON object per scenario is
 * written to the results file; see README.md for the fields.
 *
 * Two kinds of process (README.md, "Processes"):
 *  - the GRADER (this program as started) never loads candidate code.  It
 *    makes the inputs, checks every output, times every call with its own
 *    clock and writes the results file, atomically, at the very end, after
 *    every process it started (and every process those started) is dead;
 *  - two RUNNERS, this same program exec'd fresh in runner mode
 *    (`--runner candidate|baseline`): one dlopens the candidate, the other
 *    the baseline (from a sealed in-memory copy); both run under the same
 *    system-call filter, so that the initial kernel against itself is
 *    1.00x.  A runner gets a scrubbed environment, no seed and
 *    no results path; it receives requests over a private pipe, calls the
 *    kernel on buffers in a memory file shared with the grader, and answers
 *    over another pipe.
 *
 * The grader sees every process below it (the children of every thread,
 * the whole tree), allows the candidate's process only the files a runner
 * without candidate maps (by device, inode and path), checks a held-out
 * shape drawn from the seed for every scenario, and throws away (and
 * redoes) timed rounds that something other than the kernel stretched
 * (README.md, "Disturbed samples").
 *
 * Exit status: 0 when every selected scenario has a result line (whether or
 * not the candidate was correct), 2 on bad usage or I/O errors, 3 when the
 * candidate library or its symbol cannot be loaded, 4 when memory runs out.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

typedef void (*qr_fn)(int batch, int m, int n, const double *A, double *Q, double *R);

typedef struct {
    const char *name;
    int batch, m, n;
} scenario_t;

/* Batch sizes are chosen so one call of the initial kernel takes a few
 * milliseconds; the single tall case is b128_m60_n20. */
static const scenario_t SCENARIOS[] = {
    {"b4096_m4_n4", 4096, 4, 4},
    {"b2048_m8_n8", 2048, 8, 8},
    {"b1024_m13_n13", 1024, 13, 13},
    {"b512_m17_n17", 512, 17, 17},
    {"b128_m33_n33", 128, 33, 33},
    {"b32_m50_n50", 32, 50, 50},
    {"b16_m64_n64", 16, 64, 64},
    {"b4_m100_n100", 4, 100, 100},
    {"b128_m60_n20", 128, 60, 20},
};
#define N_SCENARIOS ((int)(sizeof(SCENARIOS) / sizeof(SCENARIOS[0])))

/* tolerance = TOL_FACTOR * max(m, n) * DBL_EPSILON (inputs are scaled so the
 * largest column 2-norm of every matrix is 1, see make_inputs) */
#define TOL_FACTOR 100.0
/* Timing: repeats are picked so candidate + baseline timed calls take about
 * TIME_BUDGET_S per scenario, clamped to [MIN_REPEATS, MAX_REPEATS]. */
#define TIME_BUDGET_S 0.15
#define MIN_REPEATS 9
/* Fewer timed rounds than this left after interference: cannot tell. */
#define MIN_SAMPLES 3
#define MAX_REPEATS 101
/* canary doubles on each side of every buffer handed to the candidate */
#define GUARD 32
#define DEFAULT_SEED 20240601ULL

static const uint64_t CANARY_BITS = 0xFFF5C0DEC0DEC0DEULL; /* a NaN */
static const uint64_t POISON_BITS = 0x7FF8BAD0BAD0BAD0ULL; /* a NaN */

/* ------------------------------------------------------------------ utils */

static void die_oom(void)
{
    fprintf(stderr, "qrbench: out of memory\n");
    exit(4);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        die_oom();
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static double uniform_pm1(uint64_t *state)
{
    return (double)(splitmix64(state) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001B3ULL;
    }
    return h;
}

/* Guarded buffers (in the memory shared with a runner): GUARD canary
 * doubles before and after the payload at p. */
static void gbuf_arm(double *p, size_t n)
{
    size_t i;
    for (i = 0; i < GUARD; i++) {
        memcpy(p - GUARD + i, &CANARY_BITS, sizeof(double));
        memcpy(p + n + i, &CANARY_BITS, sizeof(double));
    }
}

/* 0 = intact, -1 = damaged before the payload, 1 = damaged after it */
static int gbuf_check(const double *p, size_t n)
{
    size_t i;
    for (i = 0; i < GUARD; i++) {
        if (memcmp(p - GUARD + i, &CANARY_BITS, sizeof(double)) != 0)
            return -1;
        if (memcmp(p + n + i, &CANARY_BITS, sizeof(double)) != 0)
            return 1;
    }
    return 0;
}

static void poison(double *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        memcpy(p + i, &POISON_BITS, sizeof(double));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------- inputs */

/* Each matrix: entries uniform in [-1, 1), plus a diagonal shift of
 * random sign and magnitude 1.5 (sqrt(m) + sqrt(n)) so the condition number
 * stays small (about 2-5), then the whole matrix is divided by its largest
 * column 2-norm.  Deterministic in (seed, scenario name, round): every
 * round of calls gets new inputs, so an output cache cannot pass. */
static void make_inputs(const scenario_t *sc, uint64_t seed, int round, double *A)
{
    uint64_t st = seed ^ hash_name(sc->name) ^ ((uint64_t)(round + 1) * 0xD1B54A32D192ED03ULL);
    int m = sc->m, n = sc->n, p, i, j;
    double shift = 1.5 * (sqrt((double)m) + sqrt((double)n));

    splitmix64(&st);
    for (p = 0; p < sc->batch; p++) {
        double *a = A + (size_t)p * m * n, colmax = 0.0;
        for (j = 0; j < n; j++)
            for (i = 0; i < m; i++)
                a[i + (size_t)j * m] = uniform_pm1(&st);
        for (j = 0; j < n; j++)
            a[j + (size_t)j * m] += (splitmix64(&st) & 1) ? shift : -shift;
        for (j = 0; j < n; j++) {
            double s = 0.0;
            for (i = 0; i < m; i++)
                s += a[i + (size_t)j * m] * a[i + (size_t)j * m];
            if (s > colmax)
                colmax = s;
        }
        colmax = sqrt(colmax);
        for (i = 0; i < m * n; i++)
            a[i] /= colmax;
    }
}

/* ------------------------------------------------------------- checks */

typedef struct {
    int nonfinite;       /* a NaN or Inf was found in Q or R */
    double recon;        /* max |Q R - A| */
    double orth;         /* max |Q^T Q - I| */
    double lower;        /* max |R[i][j]|, i > j */
    double err_ref;      /* max abs diff to the baseline, up to signs */
    double err_hi;       /* max abs diff to the long double result, up to signs */
} metrics_t;

static void upd_max(double *acc, double v)
{
    if (v > *acc)
        *acc = v;
}

static double sign_of(double d) { return d >= 0.0 ? 1.0 : -1.0; }
static double sign_of_l(long double d) { return d >= 0.0L ? 1.0 : -1.0; }

/* Every check on one set of candidate outputs.  Rows of R and columns of Q
 * are normalised so that diag(R) >= 0 before comparing to references. */
static void measure(const scenario_t *sc, const double *A0, const double *Q, const double *R,
                    const double *Qref, const double *Rref,
                    const long double *Qhi, const long double *Rhi, metrics_t *mt)
{
    int m = sc->m, n = sc->n, p, i, j, k;
    size_t nq = (size_t)sc->batch * m * n, nr = (size_t)sc->batch * n * n, t;
    double *sc_c = xmalloc(sizeof(double) * (size_t)n);
    double *sc_r = xmalloc(sizeof(double) * (size_t)n);
    double *sc_h = xmalloc(sizeof(double) * (size_t)n);

    memset(mt, 0, sizeof(*mt));
    for (t = 0; t < nq; t++)
        if (!isfinite(Q[t]))
            mt->nonfinite = 1;
    for (t = 0; t < nr; t++)
        if (!isfinite(R[t]))
            mt->nonfinite = 1;
    if (mt->nonfinite) {
        mt->recon = mt->orth = mt->lower = mt->err_ref = mt->err_hi = NAN;
        goto done;
    }

    for (p = 0; p < sc->batch; p++) {
        const double *a = A0 + (size_t)p * m * n;
        const double *q = Q + (size_t)p * m * n, *r = R + (size_t)p * n * n;
        const double *qr_ = Qref + (size_t)p * m * n, *rr = Rref + (size_t)p * n * n;
        /* without a long double reference (later calls), err_hi stays 0 */
        const long double *qh = Qhi ? Qhi + (size_t)p * m * n : NULL, *rh = Rhi ? Rhi + (size_t)p * n * n : NULL;

        for (j = 0; j < n; j++)
            for (i = j + 1; i < n; i++)
                upd_max(&mt->lower, fabs(r[i + (size_t)j * n]));

        /* reconstruction, using all of R (anything below the diagonal counts) */
        for (j = 0; j < n; j++)
            for (i = 0; i < m; i++) {
                double s = -a[i + (size_t)j * m];
                for (k = 0; k < n; k++)
                    s += q[i + (size_t)k * m] * r[k + (size_t)j * n];
                upd_max(&mt->recon, fabs(s));
            }

        /* orthogonality of the columns of Q */
        for (j = 0; j < n; j++)
            for (k = 0; k <= j; k++) {
                double s = (j == k) ? -1.0 : 0.0;
                for (i = 0; i < m; i++)
                    s += q[i + (size_t)j * m] * q[i + (size_t)k * m];
                upd_max(&mt->orth, fabs(s));
            }

        for (k = 0; k < n; k++) {
            sc_c[k] = sign_of(r[k + (size_t)k * n]);
            sc_r[k] = sign_of(rr[k + (size_t)k * n]);
            sc_h[k] = rh ? sign_of_l(rh[k + (size_t)k * n]) : 1.0;
        }
        for (j = 0; j < n; j++)
            for (i = 0; i < n; i++) {
                double c = sc_c[i] * r[i + (size_t)j * n];
                upd_max(&mt->err_ref, fabs(c - sc_r[i] * rr[i + (size_t)j * n]));
                if (rh)
                    upd_max(&mt->err_hi, (double)fabsl((long double)c - sc_h[i] * rh[i + (size_t)j * n]));
            }
        for (j = 0; j < n; j++)
            for (i = 0; i < m; i++) {
                double c = sc_c[j] * q[i + (size_t)j * m];
                upd_max(&mt->err_ref, fabs(c - sc_r[j] * qr_[i + (size_t)j * m]));
                if (qh)
                    upd_max(&mt->err_hi, (double)fabsl((long double)c - sc_h[j] * qh[i + (size_t)j * m]));
            }
    }
done:
    free(sc_c);
    free(sc_r);
    free(sc_h);
}

/* Appends a failure description to reason (first failures win if long). */
static void add_reason(char *reason, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(reason);
    va_list ap;
    if (len + 4 >= cap)
        return;
    if (len > 0) {
        snprintf(reason + len, cap - len, "; ");
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(reason + len, cap - len, fmt, ap);
    va_end(ap);
}

/* Returns 1 if the metrics pass; otherwise adds the reasons. */
static int judge(const metrics_t *mt, double tol, const char *when, char *reason, size_t cap)
{
    int ok = 1;
    if (mt->nonfinite) {
        add_reason(reason, cap, "%sNaN or Inf in the outputs", when);
        return 0;
    }
    if (!(mt->recon <= tol)) {
        add_reason(reason, cap, "%sreconstruction error max|QR-A| %.3g > tolerance %.3g", when, mt->recon, tol);
        ok = 0;
    }
    if (!(mt->orth <= tol)) {
        add_reason(reason, cap, "%sorthogonality error max|Q^T Q-I| %.3g > tolerance %.3g", when, mt->orth, tol);
        ok = 0;
    }
    if (!(mt->lower <= tol)) {
        add_reason(reason, cap, "%sR not upper triangular: max below-diagonal %.3g > tolerance %.3g", when, mt->lower, tol);
        ok = 0;
    }
    if (!(mt->err_ref <= tol)) {
        add_reason(reason, cap, "%sdiffers from the baseline by %.3g > tolerance %.3g", when, mt->err_ref, tol);
        ok = 0;
    }
    if (!(mt->err_hi <= tol)) {
        add_reason(reason, cap, "%sdiffers from the long double reference by %.3g > tolerance %.3g", when, mt->err_hi, tol);
        ok = 0;
    }
    return ok;
}

/* Guards intact and input untouched after a candidate call?  Returns 1 if so. */
static int check_integrity(const double *Ac, const double *A0, size_t na,
                           const double *Qc, size_t nq, const double *Rc, size_t nr,
                           const char *when, char *reason, size_t cap)
{
    int ok = 1, g;
    if ((g = gbuf_check(Qc, nq)) != 0) {
        add_reason(reason, cap, "%swrote outside Q (canary %s the buffer damaged)", when, g < 0 ? "before" : "after");
        ok = 0;
    }
    if ((g = gbuf_check(Rc, nr)) != 0) {
        add_reason(reason, cap, "%swrote outside R (canary %s the buffer damaged)", when, g < 0 ? "before" : "after");
        ok = 0;
    }
    if ((g = gbuf_check(Ac, na)) != 0) {
        add_reason(reason, cap, "%swrote outside A (canary %s the buffer damaged)", when, g < 0 ? "before" : "after");
        ok = 0;
    }
    if (memcmp(Ac, A0, na * sizeof(double)) != 0) {
        add_reason(reason, cap, "%smodified its input A", when);
        ok = 0;
    }
    return ok;
}

/* Cheap per-call check: the largest difference between the candidate's and
 * the baseline's outputs on the same inputs, after the same sign
 * normalisation as measure(); NaN or Inf anywhere counts as +inf. */
static double signed_diff(const scenario_t *sc, const double *Q, const double *R, const double *Qb, const double *Rb)
{
    int m = sc->m, n = sc->n, p, i, j;
    double mx = 0.0;
    for (p = 0; p < sc->batch; p++) {
        const double *q = Q + (size_t)p * m * n, *r = R + (size_t)p * n * n;
        const double *qb = Qb + (size_t)p * m * n, *rb = Rb + (size_t)p * n * n;
        for (j = 0; j < n; j++) {
            double sc_c = sign_of(r[j + (size_t)j * n]), sc_b = sign_of(rb[j + (size_t)j * n]), d;
            for (i = 0; i < n; i++) {
                /* row j of R */
                d = fabs(sc_c * r[j + (size_t)i * n] - sc_b * rb[j + (size_t)i * n]);
                if (!(d <= mx))
                    mx = isnan(d) ? INFINITY : d;
            }
            for (i = 0; i < m; i++) {
                /* column j of Q */
                d = fabs(sc_c * q[i + (size_t)j * m] - sc_b * qb[i + (size_t)j * m]);
                if (!(d <= mx))
                    mx = isnan(d) ? INFINITY : d;
            }
        }
    }
    return mx;
}

/* ------------------------------------------------------------- output */

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}


/* ------------------------------------------------------------- protocol */

/* The grader and a runner talk over two private pipes (fds 3 and 4 in the
 * runner) with fixed-size messages; the buffers a call works on live in a
 * memory file (fd 5 in the runner) that both map.  Nothing else is shared:
 * the runner never sees the seed, the expected outputs or the results path. */
#define MSG_MAGIC 0x31425251u /* "QRB1" */
enum { OP_HELLO = 1, OP_CALL = 2, OP_PING = 3 };
enum { ST_OK = 0, ST_LOADFAIL = 1, ST_BADREQ = 2 };
#define RUNNER_REQ_FD 3
#define RUNNER_REP_FD 4
#define RUNNER_SHM_FD 5
#define RUNNER_LIB_FD 6 /* the baseline's runner: its library, a sealed in-memory copy */
/* a call that takes longer than this is reported as hung */
#define CALL_TIMEOUT_MS 60000

typedef struct {
    uint32_t magic, op;
    uint64_t nonce;
    int32_t batch, m, n, pad;
    uint64_t off_a, off_q, off_r; /* byte offsets in the memory file */
} req_t;

typedef struct {
    uint32_t magic, status;
    uint64_t nonce;
    char msg[240];
} rep_t;

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* 0 on success, -1 on EOF or error, -2 on timeout (timeout_ms < 0: none) */
static int read_all(int fd, void *buf, size_t n, int timeout_ms)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k;
        if (timeout_ms >= 0) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int r = poll(&pfd, 1, timeout_ms);
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0)
                return -2;
            if (r < 0)
                return -1;
        }
        k = read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* ------------------------------------------------------------- runner */

/* After the candidate's library is loaded, its process may open no file
 * and start no program: a seccomp filter answers open, openat, openat2,
 * creat, open_by_handle_at, execve, execveat and io_uring_setup with EPERM.
 * A kernel computes on the buffers
 * it is handed; what it would open during a call is a library it did not
 * link (a BLAS or LAPACK through dlopen, invisible to the banned-symbol
 * scan) or a file of answers.  What its constructor loaded stays mapped and
 * is seen by the grader's map check.  0 if the filter is in place. */
static int forbid_opening_files(void)
{
#if defined(__x86_64__)
#define QRB_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define QRB_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif
#ifdef QRB_AUDIT_ARCH
#define QRB_DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, QRB_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __NR_open
        QRB_DENY(__NR_open),
#endif
#ifdef __NR_creat
        QRB_DENY(__NR_creat),
#endif
#ifdef __NR_openat2
        QRB_DENY(__NR_openat2),
#endif
        QRB_DENY(__NR_openat),
        QRB_DENY(__NR_execve),
#ifdef __NR_execveat
        QRB_DENY(__NR_execveat),
#endif
#ifdef __NR_open_by_handle_at
        QRB_DENY(__NR_open_by_handle_at),
#endif
#ifdef __NR_io_uring_setup
        /* an io_uring's OPENAT is not a system call the filter sees */
        QRB_DENY(__NR_io_uring_setup),
#endif
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
#undef QRB_DENY
    struct sock_fprog prog = {(unsigned short)(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0 ? -1 : 0;
#else
    return -1;
#endif
}

/* The runtime libraries a kernel may link besides the C library, by
 * soname, as the dynamic loader of a runner finds them: the probe loads
 * each and reports the files it then has mapped (see load_runtime_files). */
static const char *const runtime_sonames[] = {
    "libm.so.6", "libmvec.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1",
    "libgcc_s.so.1", "libstdc++.so.6", "libgomp.so.1", "libatomic.so.1", NULL,
};

/* Probe mode: this program exec'd fresh with a runner's environment, never
 * given candidate code.  It loads the runtime libraries above (those that
 * exist) and writes its own /proc/self/maps to the answer pipe: the files a
 * runner with no candidate maps, as the grader's allow-list. */
static int probe_main(void)
{
    char buf[8192];
    int i, fd;
    ssize_t k;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (i = 0; runtime_sonames[i]; i++)
        dlopen(runtime_sonames[i], RTLD_NOW | RTLD_LOCAL);
    fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 2;
    while ((k = read(fd, buf, sizeof(buf))) > 0)
        if (write_all(RUNNER_REP_FD, buf, (size_t)k) != 0)
            return 2;
    close(fd);
    return k < 0 ? 2 : 0;
}

/* Runner mode: the only place candidate code is ever loaded.  It has no
 * results path, no seed and a scrubbed environment (see spawn_runner). */
static int runner_main(const char *kind, const char *lib)
{
    struct stat st;
    char *base;
    qr_fn fn = NULL;
    req_t rq;
    rep_t rep;

    if (!strcmp(kind, "probe"))
        return probe_main();
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the grader */
    memset(&rep, 0, sizeof(rep));
    rep.magic = MSG_MAGIC;
    if (!strcmp(kind, "baseline")) {
        /* the candidate runs as the same user: no ptrace, no /proc/PID/mem
         * of the baseline's process (for users without CAP_SYS_PTRACE) */
        prctl(PR_SET_DUMPABLE, 0);
        /* Loaded exactly as the candidate's library is (dlopen, RTLD_NOW,
         * a -fPIC shared object built with the same flags): the initial
         * kernel against itself is the same code reached the same way. */
        void *handle = dlopen("/proc/self/fd/6", RTLD_NOW | RTLD_LOCAL);
        if (handle)
            *(void **)(&fn) = dlsym(handle, "qrbench_baseline_qr");
        if (!fn) {
            const char *err = dlerror();
            rep.status = ST_LOADFAIL;
            snprintf(rep.msg, sizeof(rep.msg), "cannot load the baseline library: %s", err ? err : "no qrbench_baseline_qr");
        }
    } else if (!strcmp(kind, "candidate") && lib) {
        void *handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            rep.status = ST_LOADFAIL;
            snprintf(rep.msg, sizeof(rep.msg), "cannot load candidate library '%s': %s", lib, dlerror());
        } else {
            dlerror();
            *(void **)(&fn) = dlsym(handle, "qr_batched");
            if (!fn) {
                const char *err = dlerror();
                rep.status = ST_LOADFAIL;
                snprintf(rep.msg, sizeof(rep.msg), "symbol qr_batched not found in '%s': %s", lib,
                         err ? err : "null symbol");
            }
        }
    } else {
        fprintf(stderr, "qrbench: runner mode is started by qrbench itself\n");
        return 2;
    }
    if (fstat(RUNNER_SHM_FD, &st) != 0 || st.st_size <= 0)
        return 2;
    base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, RUNNER_SHM_FD, 0);
    if (base == MAP_FAILED)
        return 2;
    /* Both runners under the same filter: the same cost on every system
     * call (a kernel that allocates per matrix makes many). */
    if (rep.status == ST_OK && forbid_opening_files() != 0) {
        rep.status = ST_LOADFAIL;
        snprintf(rep.msg, sizeof(rep.msg), "cannot forbid the %s's process to open files (seccomp): %s", kind,
                 strerror(errno));
    }
    if (read_all(RUNNER_REQ_FD, &rq, sizeof(rq), -1) != 0 || rq.magic != MSG_MAGIC || rq.op != OP_HELLO)
        return 2;
    rep.nonce = rq.nonce;
    if (write_all(RUNNER_REP_FD, &rep, sizeof(rep)) != 0 || rep.status != ST_OK)
        return 3;
    for (;;) {
        if (read_all(RUNNER_REQ_FD, &rq, sizeof(rq), -1) != 0)
            return 0; /* the grader is gone */
        memset(&rep, 0, sizeof(rep));
        rep.magic = MSG_MAGIC;
        rep.nonce = rq.nonce;
        if (rq.magic != MSG_MAGIC) {
            rep.status = ST_BADREQ;
        } else if (rq.op == OP_CALL) {
            uint64_t size = (uint64_t)st.st_size;
            uint64_t na = (uint64_t)(rq.batch > 0 ? rq.batch : 0) * (uint64_t)(rq.m > 0 ? rq.m : 0) *
                          (uint64_t)(rq.n > 0 ? rq.n : 0) * sizeof(double);
            uint64_t nr = (uint64_t)(rq.batch > 0 ? rq.batch : 0) * (uint64_t)(rq.n > 0 ? rq.n : 0) *
                          (uint64_t)(rq.n > 0 ? rq.n : 0) * sizeof(double);
            if (rq.batch <= 0 || rq.m <= 0 || rq.n <= 0 || rq.m > 100000 || rq.n > 100000 ||
                rq.off_a % 8 || rq.off_q % 8 || rq.off_r % 8 || rq.off_a > size || na > size - rq.off_a ||
                rq.off_q > size || na > size - rq.off_q || rq.off_r > size || nr > size - rq.off_r) {
                rep.status = ST_BADREQ;
            } else {
                fn(rq.batch, rq.m, rq.n, (const double *)(base + rq.off_a), (double *)(base + rq.off_q),
                   (double *)(base + rq.off_r));
            }
        } else if (rq.op != OP_PING) {
            rep.status = ST_BADREQ;
        }
        if (write_all(RUNNER_REP_FD, &rep, sizeof(rep)) != 0)
            return 0;
    }
}

/* ------------------------------------------------------------- processes */

/* A mapped file as /proc/PID/maps shows it: device ("fd:01"), inode and
 * path (without a trailing " (deleted)").  Two maps lines name the same
 * file when all three are equal. */
typedef struct {
    char dev[32];
    unsigned long long ino;
    char *path;
} fileid_t;

typedef struct {
    const char *kind; /* "candidate" or "baseline" */
    pid_t pid;
    int req_fd, rep_fd, shm_fd;
    char *base;
    size_t size;
    uint64_t nonce;
    int dead;
    int stopped_in_call; /* stopped (and maybe let go on) by someone else during the last call */
    fileid_t shm_id;     /* its memory file, as its maps show it */
    char why[256];       /* how it died */
} runner_t;

static char self_exe[4096];
/* The baseline's library (build/libbaseline.so, built from baseline_qr.c
 * with the candidate's own flags and loaded the candidate's way): copied
 * into a sealed memory file before any runner starts, so that nothing the
 * candidate does to the file on disk reaches the baseline. */
static int baseline_lib_fd = -1;

/* how many processes a listing of the tree below the grader holds */
#define MAX_PROCS 4096

static void describe_status(int status, char *buf, size_t cap)
{
    if (WIFSIGNALED(status))
        snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(buf, cap, "stopped");
}

/* Reads a whole /proc file into buf (NUL-terminated).  Returns its length,
 * -1 if it cannot be opened or read (errno set), -2 if it does not fit. */
static ssize_t read_proc(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    if (fd < 0)
        return -1;
    for (;;) {
        ssize_t k = read(fd, buf + len, cap - 1 - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (k == 0)
            break;
        len += (size_t)k;
        if (len >= cap - 1) {
            close(fd);
            return -2;
        }
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* State letter of a process or thread (/proc/.../stat: R, S, D, T, t, Z,
 * ...), 0 when it is gone.  dir is "/proc/PID" or "/proc/PID/task/TID". */
static char state_at(const char *dir)
{
    char path[96], buf[1024], *rp;
    snprintf(path, sizeof(path), "%s/stat", dir);
    if (read_proc(path, buf, sizeof(buf)) <= 0)
        return 0;
    rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

static char proc_state(pid_t pid)
{
    char dir[32];
    snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
    return state_at(dir);
}

/* Appends to out[n..) every process whose parent is `parent`, found by
 * scanning /proc (the parent in /proc/PID/stat is a process, whichever of
 * its threads forked).  Returns the new count (it may exceed cap: the
 * caller then knows the list is incomplete). */
static int scan_children(pid_t parent, pid_t *out, int n, int cap)
{
    char path[64], buf[1024];
    DIR *d = opendir("/proc");
    struct dirent *e;
    if (!d)
        return n;
    while ((e = readdir(d)) != NULL) {
        char *end, *rp;
        long pid = strtol(e->d_name, &end, 10), ppid;
        if (*end || pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        if (read_proc(path, buf, sizeof(buf)) <= 0)
            continue;
        rp = strrchr(buf, ')');
        if (!rp || sscanf(rp + 1, " %*c %ld", &ppid) != 1)
            continue;
        if (ppid == (long)parent) {
            if (n < cap)
                out[n] = (pid_t)pid;
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Appends to out[n..) the children of process `parent`: of EVERY one of its
 * threads (a process forked by a second thread is that thread's child and
 * is not in the main thread's list), from /proc/PID/task/TID/children.
 * Falls back to scanning /proc when the kernel has no such file or a list
 * does not fit.  Returns the new count (it may exceed cap). */
static int list_children(pid_t parent, pid_t *out, int n, int cap)
{
    static char buf[65536];
    char path[96];
    DIR *d;
    struct dirent *e;
    int start = n;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)parent);
    d = opendir(path);
    if (!d)
        return scan_children(parent, out, n, cap);
    while ((e = readdir(d)) != NULL) {
        char *end, *s;
        long tid = strtol(e->d_name, &end, 10);
        ssize_t k;
        if (*end || tid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%ld/children", (int)parent, tid);
        k = read_proc(path, buf, sizeof(buf));
        if (k == -1) {
            char dir[64];
            snprintf(dir, sizeof(dir), "/proc/%d/task/%ld", (int)parent, tid);
            if (!state_at(dir))
                continue; /* the thread is gone; its children moved to another */
        }
        if (k < 0) {
            closedir(d);
            return scan_children(parent, out, start, cap);
        }
        for (s = buf;;) {
            long v = strtol(s, &end, 10);
            if (end == s)
                break;
            if (n < cap)
                out[n] = (pid_t)v;
            n++;
            s = end;
        }
    }
    closedir(d);
    return n;
}

/* Every process below `root` (children, their children, ...), breadth
 * first.  Returns how many (at most cap are stored). */
static int list_descendants(pid_t root, pid_t *out, int cap)
{
    int n = list_children(root, out, 0, cap), i;
    for (i = 0; i < n && i < cap; i++)
        n = list_children(out[i], out, n, cap);
    return n;
}

static void comm_of(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    int fd;
    ssize_t k;
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    snprintf(buf, cap, "?");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    k = read(fd, buf, cap - 1);
    close(fd);
    if (k > 0) {
        buf[k] = '\0';
        if (buf[k - 1] == '\n')
            buf[k - 1] = '\0';
    }
}

/* What the scheduler says of one process, summed over its threads
 * (/proc/PID/task/TID/schedstat: nanoseconds on a CPU, nanoseconds
 * runnable but waiting for a CPU).  These counts are exact for a thread
 * that is not running when they are read (a stopped one, say); a running
 * thread's CPU time lags by up to a scheduler tick. */
typedef struct {
    uint64_t cpu_ns, wait_ns;
    int threads;
    int not_stopped; /* threads in neither T nor t state (when asked) */
} sched_use_t;

/* 0, or -1 when the process is gone or its counts cannot be read. */
static int read_sched_use(pid_t pid, sched_use_t *u, int states)
{
    char path[96], buf[256];
    DIR *d;
    struct dirent *e;
    memset(u, 0, sizeof(*u));
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    d = opendir(path);
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        unsigned long long cpu, wait;
        if (*end || tid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%ld/schedstat", (int)pid, tid);
        if (read_proc(path, buf, sizeof(buf)) <= 0 || sscanf(buf, "%llu %llu", &cpu, &wait) != 2)
            continue; /* the thread is gone */
        u->cpu_ns += cpu;
        u->wait_ns += wait;
        u->threads++;
        if (states) {
            char st;
            snprintf(path, sizeof(path), "/proc/%d/task/%ld", (int)pid, tid);
            st = state_at(path);
            if (st && st != 'T' && st != 't')
                u->not_stopped++;
        }
    }
    closedir(d);
    return u->threads > 0 ? 0 : -1;
}

/* The same counts for the main thread of process pid alone (the thread
 * that makes a runner's calls). */
static int read_main_sched(pid_t pid, uint64_t *cpu_ns, uint64_t *wait_ns)
{
    char path[96], buf[256];
    unsigned long long cpu, wait;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)pid);
    if (read_proc(path, buf, sizeof(buf)) <= 0 || sscanf(buf, "%llu %llu", &cpu, &wait) != 2)
        return -1;
    *cpu_ns = cpu;
    *wait_ns = wait;
    return 0;
}

/* ------------------------------------------------------------- mapped files */

/* Splits a /proc/PID/maps line in place: start address, device, inode and
 * path (NULL for an anonymous mapping; a trailing " (deleted)" removed).
 * 0 on success. */
static int parse_map_line(char *line, unsigned long *start, fileid_t *id)
{
    int pos = 0;
    char *p, *end;
    memset(id, 0, sizeof(*id));
    if (sscanf(line, "%lx-%*x %*s %*x %31s %llu %n", start, id->dev, &id->ino, &pos) < 3 || pos <= 0)
        return -1;
    p = line + pos;
    end = strchr(p, '\n');
    if (end)
        *end = '\0';
    end = p + strlen(p);
    if (end - p >= 10 && strcmp(end - 10, " (deleted)") == 0)
        end[-10] = '\0';
    id->path = *p ? p : NULL;
    return 0;
}

static int same_file(const fileid_t *a, const fileid_t *b)
{
    return a->path && b->path && a->ino == b->ino && strcmp(a->dev, b->dev) == 0 && strcmp(a->path, b->path) == 0;
}

/* The runtime files a candidate's process may map: every file the probe
 * (this program with a runner's environment and every runtime library of
 * runtime_sonames loaded, no candidate) and the baseline's runner map,
 * each by device, inode and path. */
#define MAX_RUNTIME_FILES 256
static fileid_t runtime_files[MAX_RUNTIME_FILES];
static int n_runtime_files;

static void allow_file(const fileid_t *id)
{
    int i;
    if (!id->path || id->path[0] != '/' || strncmp(id->path, "/memfd:", 7) == 0)
        return; /* no memory file is a runtime file: each runner's own is allowed apart */
    for (i = 0; i < n_runtime_files; i++)
        if (same_file(&runtime_files[i], id))
            return;
    if (n_runtime_files >= MAX_RUNTIME_FILES)
        return;
    runtime_files[n_runtime_files] = *id;
    runtime_files[n_runtime_files].path = strdup(id->path);
    if (!runtime_files[n_runtime_files].path)
        die_oom();
    n_runtime_files++;
}

static int runtime_file(const fileid_t *id)
{
    int i;
    for (i = 0; i < n_runtime_files; i++)
        if (same_file(&runtime_files[i], id))
            return 1;
    return 0;
}

/* Adds every file named in the maps text `text` to the runtime files. */
static void allow_maps_text(char *text)
{
    char *line = text, *next;
    for (; line && *line; line = next) {
        unsigned long start;
        fileid_t id;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (parse_map_line(line, &start, &id) == 0)
            allow_file(&id);
    }
}

/* The identity of the mapping of this process that starts at addr (from
 * /proc/self/maps), with its path copied.  0 on success. */
static int own_map_identity(const void *addr, fileid_t *out)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char *line = NULL;
    size_t cap = 0;
    int rc = -1;
    if (!f)
        return -1;
    while (rc != 0 && getline(&line, &cap, f) > 0) {
        unsigned long start;
        fileid_t id;
        if (parse_map_line(line, &start, &id) == 0 && start == (unsigned long)(uintptr_t)addr && id.path) {
            *out = id;
            out->path = strdup(id.path);
            if (!out->path)
                die_oom();
            rc = 0;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

/* The identity the candidate's library will have in its runner's maps: the
 * grader maps one page of it, read only (nothing in it runs), and reads its
 * own maps.  0 on success. */
static int file_identity(const char *path, fileid_t *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc;
    void *p;
    if (fd < 0)
        return -1;
    p = mmap(NULL, 1, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    rc = own_map_identity(p, out);
    munmap(p, 1);
    return rc;
}

/* Runs the probe (probe_main) with a runner's environment and adds every
 * file it has mapped to the runtime files.  0 on success. */
static int load_runtime_files(void)
{
    int pipefd[2], status, nul;
    pid_t pid;
    size_t len = 0, cap = 1 << 16;
    char *text = xmalloc(cap);

    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        free(text);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        free(text);
        return -1;
    }
    if (pid == 0) {
        char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", NULL};
        char *argv_p[] = {"qrbench-runner", "--runner", "probe", NULL};
        int w = fcntl(pipefd[1], F_DUPFD, 10);
        nul = open("/dev/null", O_RDONLY);
        if (w < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(w, RUNNER_REP_FD) < 0)
            _exit(127);
        execve(self_exe, argv_p, envp);
        _exit(127);
    }
    close(pipefd[1]);
    for (;;) {
        struct pollfd pfd = {pipefd[0], POLLIN, 0};
        ssize_t k;
        if (len + 4096 >= cap) {
            char *t = realloc(text, cap * 2);
            if (!t)
                die_oom();
            text = t;
            cap *= 2;
        }
        if (poll(&pfd, 1, 10000) <= 0) {
            kill(pid, SIGKILL); /* hung */
            break;
        }
        k = read(pipefd[0], text + len, cap - 1 - len);
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(pipefd[0]);
    text[len] = '\0';
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(text);
        return -1;
    }
    allow_maps_text(text);
    free(text);
    return 0;
}

/* Adds the files the baseline's runner has mapped, when its maps can be
 * read (it is not dumpable: an unprivileged grader cannot; the probe's are
 * the same program's with the same environment). */
static void allow_maps_of(pid_t pid)
{
    char path[64], *text;
    ssize_t k;
    size_t cap = 1 << 20;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    text = xmalloc(cap);
    k = read_proc(path, text, cap);
    if (k > 0)
        allow_maps_text(text);
    free(text);
}

/* Starts a runner: this program exec'd fresh in runner mode, with the
 * request pipe, the answer pipe and the memory file as fds 3-5, stdin from
 * /dev/null, every other descriptor closed, and a scrubbed environment (no
 * GADFLY_* variable, no seed, no results path).  0 on success; on a load
 * failure, 3 with the message in r->why. */
static int spawn_runner(runner_t *r, const char *kind, const char *lib, size_t size)
{
    int req[2], rep[2], status;
    pid_t pid;
    req_t rq;
    rep_t rp;

    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->size = size;
    r->shm_fd = memfd_create("qrbench-buffers", MFD_CLOEXEC);
    if (r->shm_fd < 0 || ftruncate(r->shm_fd, (off_t)size) != 0) {
        snprintf(r->why, sizeof(r->why), "memory file: %s", strerror(errno));
        return 2;
    }
    r->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->shm_fd, 0);
    if (r->base == MAP_FAILED) {
        snprintf(r->why, sizeof(r->why), "mmap: %s", strerror(errno));
        return 4;
    }
    if (own_map_identity(r->base, &r->shm_id) != 0) {
        snprintf(r->why, sizeof(r->why), "cannot find its memory file in /proc/self/maps");
        return 2;
    }
    if (pipe2(req, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
        snprintf(r->why, sizeof(r->why), "pipe: %s", strerror(errno));
        return 2;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        snprintf(r->why, sizeof(r->why), "fork: %s", strerror(errno));
        return 2;
    }
    if (pid == 0) {
        char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", NULL};
        char *argv_c[] = {"qrbench-runner", "--runner", (char *)kind, "--lib", (char *)lib, NULL};
        char *argv_b[] = {"qrbench-runner", "--runner", (char *)kind, NULL};
        int a = fcntl(req[0], F_DUPFD, 10), b = fcntl(rep[1], F_DUPFD, 10), c = fcntl(r->shm_fd, F_DUPFD, 10);
        int d = lib ? -1 : fcntl(baseline_lib_fd, F_DUPFD, 10);
        int nul = open("/dev/null", O_RDONLY), fd;
        long maxfd = sysconf(_SC_OPEN_MAX);
        if (a < 0 || b < 0 || c < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(a, RUNNER_REQ_FD) < 0 ||
            dup2(b, RUNNER_REP_FD) < 0 || dup2(c, RUNNER_SHM_FD) < 0 || (!lib && (d < 0 || dup2(d, RUNNER_LIB_FD) < 0)))
            _exit(127);
        if (maxfd < 0 || maxfd > 65536)
            maxfd = 65536;
        for (fd = lib ? RUNNER_SHM_FD + 1 : RUNNER_LIB_FD + 1; fd < maxfd; fd++)
            close(fd);
        execve(self_exe, lib ? argv_c : argv_b, envp);
        _exit(127);
    }
    close(req[0]);
    close(rep[1]);
    r->pid = pid;
    r->req_fd = req[1];
    r->rep_fd = rep[0];
    /* hello: the runner answers once the candidate is loaded */
    memset(&rq, 0, sizeof(rq));
    rq.magic = MSG_MAGIC;
    rq.op = OP_HELLO;
    rq.nonce = r->nonce = ((uint64_t)pid << 32) ^ (uint64_t)(now_s() * 1e9);
    if (write_all(r->req_fd, &rq, sizeof(rq)) != 0 || read_all(r->rep_fd, &rp, sizeof(rp), CALL_TIMEOUT_MS) != 0 ||
        rp.magic != MSG_MAGIC || rp.nonce != rq.nonce) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        r->dead = 1;
        describe_status(status, r->why, sizeof(r->why));
        return 2;
    }
    if (rp.status != ST_OK) {
        rp.msg[sizeof(rp.msg) - 1] = '\0';
        snprintf(r->why, sizeof(r->why), "%s", rp.msg);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        r->dead = 1;
        return 3;
    }
    return 0;
}

static void reap_runner(runner_t *r)
{
    int status;
    if (r->pid > 0 && !r->dead) {
        kill(r->pid, SIGKILL);
        if (waitpid(r->pid, &status, 0) == r->pid && !r->why[0])
            describe_status(status, r->why, sizeof(r->why));
        r->dead = 1;
    }
    if (r->req_fd > 0)
        close(r->req_fd);
    if (r->rep_fd > 0)
        close(r->rep_fd);
    r->req_fd = r->rep_fd = -1;
}

static void free_runner(runner_t *r)
{
    reap_runner(r);
    if (r->base && r->base != MAP_FAILED)
        munmap(r->base, r->size);
    if (r->shm_fd > 0)
        close(r->shm_fd);
    r->base = NULL;
    r->shm_fd = -1;
    free(r->shm_id.path);
    r->shm_id.path = NULL;
}

/* A report of the runner (the grader is its parent) that it was stopped or
 * let go on since the last one the grader took, left in place (WNOWAIT)
 * when `keep`.  0 if none, else CLD_STOPPED or CLD_CONTINUED. */
static int stop_report(const runner_t *r, int keep)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)r->pid, &si, WSTOPPED | WCONTINUED | WNOHANG | (keep ? WNOWAIT : 0)) != 0 ||
        si.si_pid != r->pid)
        return 0;
    return si.si_code == CLD_STOPPED || si.si_code == CLD_CONTINUED ? si.si_code : 0;
}

/* One request and its answer, timed by the grader's own clock around the
 * whole round trip.  The runner is stopped (see freeze) until the clock has
 * started: no thread of the candidate can look at the inputs, already in
 * the shared memory, before the timed region.  Right after letting it go on,
 * the grader takes the "continued" report this produces; any report left
 * at the end of the call means someone else stopped the runner during it
 * (r->stopped_in_call).  0 on success; otherwise the runner is dead or hung
 * (killed), and r->why says how. */
static int round_trip(runner_t *r, const req_t *proto, double *secs)
{
    req_t rq = *proto;
    rep_t rp;
    double t0, t1;
    int rc, status;
    siginfo_t si;

    if (r->dead)
        return -1;
    rq.magic = MSG_MAGIC;
    rq.nonce = ++r->nonce;
    r->stopped_in_call = 0;
    t0 = now_s();
    kill(r->pid, SIGCONT);
    waitid(P_PID, (id_t)r->pid, &si, WCONTINUED | WNOHANG); /* our own SIGCONT's report */
    if (write_all(r->req_fd, &rq, sizeof(rq)) != 0)
        rc = -1;
    else
        rc = read_all(r->rep_fd, &rp, sizeof(rp), CALL_TIMEOUT_MS);
    t1 = now_s();
    r->stopped_in_call = stop_report(r, 1) != 0; /* a stop is left for freeze to take */
    if (rc == 0 && (rp.magic != MSG_MAGIC || rp.nonce != rq.nonce || rp.status != ST_OK)) {
        snprintf(r->why, sizeof(r->why), "answered out of protocol");
        rc = -1;
    }
    if (rc != 0) {
        if (rc == -2)
            snprintf(r->why, sizeof(r->why), "did not return within %d s", CALL_TIMEOUT_MS / 1000);
        kill(r->pid, SIGKILL);
        if (waitpid(r->pid, &status, 0) == r->pid && !r->why[0])
            describe_status(status, r->why, sizeof(r->why));
        r->dead = 1;
        return -1;
    }
    *secs = t1 - t0;
    return 0;
}

/* Stops every thread of the runner (SIGSTOP cannot be caught or ignored).
 * A runner stays stopped except during its own calls: nothing in it can
 * write the shared buffers while the grader reads them, watch for the next
 * inputs, or compete for the CPU while the other side is timed.  0 once
 * stopped. */
static int freeze(runner_t *r)
{
    int status;
    if (kill(r->pid, SIGSTOP) != 0)
        return -1;
    if (waitpid(r->pid, &status, WUNTRACED) != r->pid)
        return -1;
    if (WIFSTOPPED(status))
        return 0;
    describe_status(status, r->why, sizeof(r->why));
    r->dead = 1;
    return -1;
}

/* Kills every process started by this one, however deep and however
 * detached (setsid, double fork): each pass kills the whole tree below the
 * grader (the children of every thread, recursively), reaps what died, and
 * lists it again, until the grader has no child left.  As a child subreaper
 * the grader inherits every orphan, so nothing forked during a pass
 * escapes the next one. */
static void kill_descendants(void)
{
    static pid_t all[MAX_PROCS];
    int i, n, status, idle = 0;
    for (;;) {
        pid_t w;
        n = list_descendants(getpid(), all, MAX_PROCS);
        for (i = 0; i < n && i < MAX_PROCS; i++)
            kill(all[i], SIGKILL);
        while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
        }
        if (w < 0 && errno == ECHILD)
            return;
        {
            struct timespec ts = {0, 1000000};
            if (++idle > 30000) /* 30 s: something is very wrong */
                return;
            nanosleep(&ts, NULL);
        }
    }
}

/* ------------------------------------------------------------- one scenario */

typedef struct {
    size_t na, nq, nr;
    uint64_t off_a, off_q, off_r; /* byte offsets of the payloads */
} layout_t;

static uint64_t align_up(uint64_t v) { return (v + 63) & ~(uint64_t)63; }

static layout_t layout_for(const scenario_t *sc)
{
    layout_t l;
    l.na = (size_t)sc->batch * sc->m * sc->n;
    l.nq = l.na;
    l.nr = (size_t)sc->batch * sc->n * sc->n;
    l.off_a = GUARD * sizeof(double);
    l.off_q = align_up(l.off_a + (l.na + GUARD) * sizeof(double)) + GUARD * sizeof(double);
    l.off_r = align_up(l.off_q + (l.nq + GUARD) * sizeof(double)) + GUARD * sizeof(double);
    return l;
}

static size_t layout_size(const layout_t *l) { return align_up(l->off_r + (l->nr + GUARD) * sizeof(double)); }

/* The held-out shape of a scenario, drawn from the seed (which the
 * candidate never sees): n moved by 1 to max(2, n/5) either way (at least
 * 2); for a square scenario m = n plus 0 to 3, for a tall one m moved like
 * n; always m >= n (the kernel's contract), and never the (m, n) of a
 * listed scenario, so a kernel that recognises the listed shapes meets one
 * it does not know.  The batch is at least 2 (at most the scenario's) and
 * at most the one that keeps a call's work m n^2 per matrix no larger than
 * the scenario's.  Its name, b<batch>_m<m>_n<n>, goes to name. */
static void held_out_shape(const scenario_t *sc, uint64_t seed, scenario_t *v, char *name, size_t cap)
{
    uint64_t st = seed ^ hash_name(sc->name) ^ 0x48454C444F555431ULL; /* "HELDOUT1" */
    int m = sc->m, n = sc->n, vm = m + 1, vn = n + 1, tries, i, clash = 1, bmax, lo;
    double work;

    splitmix64(&st);
    for (tries = 0; tries < 1000 && clash; tries++) {
        int sn = n / 5 > 2 ? n / 5 : 2, sm = m / 5 > 2 ? m / 5 : 2;
        int dn = 1 + (int)(splitmix64(&st) % (uint64_t)sn);
        vn = n + ((splitmix64(&st) & 1) ? dn : -dn);
        if (m == n) {
            vm = vn + (int)(splitmix64(&st) % 4);
        } else {
            int dm = 1 + (int)(splitmix64(&st) % (uint64_t)sm);
            vm = m + ((splitmix64(&st) & 1) ? dm : -dm);
        }
        if (vn < 2 || vm < vn)
            continue;
        clash = 0;
        for (i = 0; i < N_SCENARIOS; i++)
            if (SCENARIOS[i].m == vm && SCENARIOS[i].n == vn)
                clash = 1;
    }
    if (clash) { /* not reached with the listed scenarios */
        vn = n + 1;
        vm = m + 2;
    }
    work = (double)sc->batch * m * n * n / ((double)vm * vn * vn);
    bmax = work >= (double)sc->batch ? sc->batch : (int)work;
    lo = (bmax + 1) / 2;
    if (lo < 2)
        lo = 2;
    if (bmax < lo)
        bmax = lo;
    if (bmax > sc->batch)
        bmax = lo = sc->batch;
    v->batch = lo + (int)(splitmix64(&st) % (uint64_t)(bmax - lo + 1));
    v->m = vm;
    v->n = vn;
    snprintf(name, cap, "b%d_m%d_n%d", v->batch, v->m, v->n);
    v->name = name;
}

#define SHM_A(r, l) ((double *)((r)->base + (l)->off_a))
#define SHM_Q(r, l) ((double *)((r)->base + (l)->off_q))
#define SHM_R(r, l) ((double *)((r)->base + (l)->off_r))

/* A process or thread the candidate left behind: a failure of this and of
 * every later scenario. */
static char sticky[512];

static runner_t *runners[2]; /* the candidate's [0] and the baseline's [1] */

static int live_runner(pid_t pid)
{
    int j;
    for (j = 0; j < 2; j++)
        if (runners[j] && runners[j]->pid == pid && !runners[j]->dead)
            return 1;
    return 0;
}

/* Every process below the grader but the two live runners: what the
 * candidate started (the baseline's runner starts nothing), alive or a
 * zombie, however deep.  The tree is read twice: a process that forks and
 * exits while it is read moves up (its child is reparented to the grader,
 * a child subreaper, whose list was read first), and the second reading
 * finds it there, alive or as a zombie (the grader reaps no stray
 * between the two).  Returns how many (at most cap are stored). */
static int list_strays(pid_t *out, int cap)
{
    static pid_t all[MAX_PROCS];
    int pass, n, i, j, k = 0;
    for (pass = 0; pass < 2; pass++) {
        n = list_descendants(getpid(), all, MAX_PROCS);
        if (n > MAX_PROCS)
            k += n - MAX_PROCS; /* too many to list: counted all the same */
        for (i = 0; i < n && i < MAX_PROCS; i++) {
            int seen = 0;
            if (live_runner(all[i]))
                continue;
            for (j = 0; j < k && j < cap; j++)
                if (out[j] == all[i])
                    seen = 1;
            if (seen)
                continue;
            if (k < cap)
                out[k] = all[i];
            k++;
        }
    }
    return k;
}

/* Kills every stray until none is left alive: kill, reap, list again, since
 * a process can fork while it is being killed and orphans reparent to the
 * grader.  A zombie whose parent is the (stopped) candidate's runner cannot
 * run and cannot be reaped by the grader; it goes with its parent. */
static void kill_strays(void)
{
    static pid_t s[MAX_PROCS];
    int n, i, live, pass, status;
    for (pass = 0; pass < 5000; pass++) {
        struct timespec ts = {0, 1000000};
        n = list_strays(s, MAX_PROCS);
        live = 0;
        for (i = 0; i < n && i < MAX_PROCS; i++) {
            char st = proc_state(s[i]);
            if (st && st != 'Z' && st != 'X') {
                kill(s[i], SIGKILL);
                live++;
            }
            waitpid(s[i], &status, WNOHANG); /* the grader's own children */
        }
        if (live == 0 && n <= MAX_PROCS)
            return;
        nanosleep(&ts, NULL);
    }
}

/* Checks, while the runners are stopped, that no process the candidate
 * started exists anywhere below the grader: among the children of any
 * thread of the candidate's runner, their children, or the grader's own
 * (an orphan of a double fork or of a setsid).  A process, unlike a
 * thread, is not stopped with the runner and could compete with the
 * baseline's calls or stop them.  Kills what it finds.  1 if clean. */
static int check_leftovers(const char *when, char *reason, size_t cap)
{
    pid_t kids[64];
    int n = list_strays(kids, 64);
    char comm[64];
    if (n == 0)
        return 1;
    comm_of(kids[0], comm, sizeof(comm));
    add_reason(reason, cap, "%sthe candidate started %d process(es) (pid %d, %s%s); a kernel may not start processes", when, n,
               (int)kids[0], comm, proc_state(kids[0]) == 'Z' ? ", exited" : "");
    if (!sticky[0])
        snprintf(sticky, sizeof(sticky), "the candidate started a process in an earlier scenario (pid %d, %s)", (int)kids[0], comm);
    kill_strays();
    /* and its runner, which may start more (its zombies go with it); a
     * fresh one serves the next scenario */
    if (runners[0] && runners[0]->pid > 0 && !runners[0]->dead) {
        snprintf(runners[0]->why, sizeof(runners[0]->why), "was killed: it started a process");
        reap_runner(runners[0]);
        kill_strays();
    }
    return 0;
}

/* The candidate's library, as its runner's maps will show it (device,
 * inode and real path), and the program's. */
static fileid_t candidate_lib;

/* Checks, while the candidate's runner is stopped, every file its process
 * has mapped (/proc/PID/maps), each by device, inode and path: its program
 * and the runtime libraries as a runner without candidate maps them (see
 * load_runtime_files), the candidate's library, its own memory file, and
 * nothing else.  A copy of a library under another name or path, a file
 * put at a runtime library's path, another memory file, an io_uring's
 * rings: all refused.  A map that cannot be read (a candidate that made
 * itself non-dumpable) fails closed.  1 if clean. */
static int check_mapped_files(runner_t *r, const char *when, char *reason, size_t cap)
{
    char path[64], *line = NULL;
    size_t lcap = 0;
    FILE *f;
    int ok = 1;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)r->pid);
    f = fopen(path, "r");
    if (!f) {
        add_reason(reason, cap, "%sthe candidate's memory map cannot be read (%s): a kernel may not hide its process", when, strerror(errno));
        if (!sticky[0])
            snprintf(sticky, sizeof(sticky), "the candidate hid its process's memory map in an earlier scenario");
        return 0;
    }
    while (ok && getline(&line, &lcap, f) > 0) {
        unsigned long start;
        fileid_t id;
        const char *file;
        if (parse_map_line(line, &start, &id) != 0) {
            file = "a line it cannot parse";
        } else {
            /* anonymous, or the kernel's own ([heap], [stack], [vdso], ...) */
            if (!id.path || id.path[0] == '[')
                continue;
            if (runtime_file(&id) || same_file(&id, &candidate_lib) || same_file(&id, &r->shm_id))
                continue;
            file = id.path;
        }
        add_reason(reason, cap, "%sthe candidate's process mapped %s at run time; a kernel may load only its own library and the C runtime", when, file);
        if (!sticky[0])
            snprintf(sticky, sizeof(sticky), "the candidate's process mapped %.300s in an earlier scenario", file);
        ok = 0;
    }
    free(line);
    fclose(f);
    return ok;
}

/* ------------------------------------------------------------- disturbed samples */

/* A timed call is disturbed in one of two ways, told apart because only
 * one of them can be aimed at a side:
 *  - INTERFERENCE: the runner was stopped, or (the baseline's) asleep while
 *    it should compute, or its scheduling was changed, or a process of the
 *    candidate's existed or ran during the baseline's call.  Nothing on an
 *    honest machine does this; it is what slows one side on purpose.  The
 *    round is thrown away; when more than a third of the rounds suffer it,
 *    the scenario is `cannot_tell`.
 *  - CONTENTION: the runner (or the grader, to read its answer) waited for a
 *    CPU.  Ambient load does this to both sides of the interleaved pairs
 *    alike.  The round is set aside: the median is taken over clean rounds
 *    when enough are clean, and over clean and contended ones otherwise
 *    (a loaded machine measures noisily, never "cannot tell").
 * A share counts when it is more than DISTURB_SHARE of the call and more
 * than DISTURB_MIN_S: the round trip's own wake-ups cost a few microseconds. */
#define DISTURB_SHARE 0.25
#define DISTURB_MIN_S 50e-6
#define INTERFERENCE 1
#define CONTENTION 2

/* The scheduling the grader had at its start (before any candidate code
 * ran): policy, nice, priority, utilisation clamps, CPU affinity.  The
 * baseline's runner is put back to it before each of its calls. */
struct qrb_sched_attr {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
    uint32_t sched_util_min, sched_util_max;
};
#define QRB_RESET_ON_FORK 0x01 /* SCHED_FLAG_RESET_ON_FORK */
static struct qrb_sched_attr grader_attr;
static cpu_set_t grader_cpus;
static int have_attr, have_cpus;

static int get_sched_attr(pid_t pid, struct qrb_sched_attr *a)
{
    memset(a, 0, sizeof(*a));
#ifdef SYS_sched_getattr
    return (int)syscall(SYS_sched_getattr, (int)pid, a, (unsigned)sizeof(*a), 0u);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

static void save_grader_sched(void)
{
    have_attr = get_sched_attr(0, &grader_attr) == 0;
    have_cpus = sched_getaffinity(0, sizeof(grader_cpus), &grader_cpus) == 0;
}

/* Puts the scheduling of process `pid` (one thread: the baseline's runner,
 * or the grader itself) back to the grader's at the start, if anything
 * changed it: the candidate runs as the same user and may renice, re-pin
 * or change the policy of any process of the harness.  0 if it is (now)
 * as at the start; -1 with why when a change could not be undone (an
 * unprivileged user can raise a nice value, not lower it). */
static int reset_sched(pid_t pid, char *why, size_t cap)
{
    struct qrb_sched_attr a;
    cpu_set_t cpus;
    int rc = 0;
    if (have_attr && get_sched_attr(pid, &a) == 0 &&
        (a.sched_policy != grader_attr.sched_policy || a.sched_nice != grader_attr.sched_nice ||
         a.sched_priority != grader_attr.sched_priority || a.sched_util_min != grader_attr.sched_util_min ||
         a.sched_util_max != grader_attr.sched_util_max ||
         (a.sched_flags & QRB_RESET_ON_FORK) != (grader_attr.sched_flags & QRB_RESET_ON_FORK))) {
        struct qrb_sched_attr set = grader_attr;
        int err = 0;
        set.size = sizeof(set);
        set.sched_flags &= QRB_RESET_ON_FORK;
        if (a.sched_util_min != grader_attr.sched_util_min || a.sched_util_max != grader_attr.sched_util_max)
            set.sched_flags |= 0x60; /* SCHED_FLAG_UTIL_CLAMP_MIN | _MAX */
#ifdef SYS_sched_setattr
        if (syscall(SYS_sched_setattr, (int)pid, &set, 0u) != 0)
            err = errno;
#else
        err = ENOSYS;
#endif
        if (err) {
            snprintf(why, cap, "its scheduling was changed (policy %u, nice %d) and cannot be reset: %s", a.sched_policy,
                     (int)a.sched_nice, strerror(err));
            rc = -1;
        }
    }
    if (have_cpus && sched_getaffinity(pid, sizeof(cpus), &cpus) == 0 && !CPU_EQUAL(&cpus, &grader_cpus) &&
        sched_setaffinity(pid, sizeof(grader_cpus), &grader_cpus) != 0) {
        snprintf(why, cap, "its CPU affinity was changed and cannot be reset: %s", strerror(errno));
        rc = -1;
    }
    return rc;
}

/* The candidate's processes (every process below the grader but the
 * baseline's runner: the candidate's runner, stopped, and anything it
 * started) and the CPU time each has used. */
#define MAX_WATCH 64
typedef struct {
    int n;                /* processes (at most MAX_WATCH are stored) */
    pid_t pid[MAX_WATCH];
    uint64_t cpu_ns[MAX_WATCH];
    int runner_running;   /* threads of the candidate's runner not stopped */
} cand_snap_t;

static void snap_candidate(const runner_t *cr, const runner_t *br, cand_snap_t *s)
{
    static pid_t all[MAX_PROCS];
    int n = list_descendants(getpid(), all, MAX_PROCS), i;
    memset(s, 0, sizeof(*s));
    for (i = 0; i < n && i < MAX_PROCS; i++) {
        sched_use_t u;
        if (all[i] == br->pid)
            continue;
        if (s->n < MAX_WATCH) {
            s->pid[s->n] = all[i];
            if (read_sched_use(all[i], &u, all[i] == cr->pid) == 0) {
                s->cpu_ns[s->n] = u.cpu_ns;
                if (all[i] == cr->pid)
                    s->runner_running = u.not_stopped;
            }
        }
        s->n++;
    }
    if (n > MAX_PROCS)
        s->n += n - MAX_PROCS;
}

/* What one baseline call needs watched around it (see baseline_disturbed). */
typedef struct {
    cand_snap_t cand;  /* the candidate's processes */
    char why[256];     /* a scheduling change that could not be undone */
} call_watch_t;

/* A timed call's scheduling, from the main thread of its runner: CPU time
 * from before the call to after the runner is stopped again (exact: it is
 * not running at either reading), time waiting for a CPU from before the
 * call to its answer (a wait counts when the thread gets its CPU, so a
 * reading then is exact too; the wait to handle the stop afterwards is
 * left out), and the grader's own wait for a CPU during the call. */
typedef struct {
    double cpu, wait, grader_wait;
    int ok; /* all three read */
} call_sched_t;

/* Before a baseline's timed call, while both runners are stopped (and
 * the baseline's scheduling was put back, see one_call): makes sure the
 * candidate's runner is stopped, and takes the counts. */
static void watch_before(runner_t *cr, runner_t *br, call_watch_t *w, const char *sched_why)
{
    memset(w, 0, sizeof(*w));
    snprintf(w->why, sizeof(w->why), "%s", sched_why);
    if (!cr->dead && stop_report(cr, 0) == CLD_CONTINUED) {
        freeze(cr); /* someone let the candidate's runner go on: stop it again */
    }
    snap_candidate(cr, br, &w->cand);
}

/* After the baseline's timed call of `secs` seconds, once its runner is
 * stopped again: 0 if clean, INTERFERENCE or CONTENTION (with why). */
static int baseline_disturbed(runner_t *cr, runner_t *br, const call_watch_t *w, const call_sched_t *cs, double secs,
                              char *why, size_t cap)
{
    cand_snap_t after;
    double off, asleep;
    int i, j, rep = cr->dead ? 0 : stop_report(cr, 0);

    if (rep == CLD_CONTINUED)
        freeze(cr);
    snap_candidate(cr, br, &after);
    if (w->why[0]) {
        snprintf(why, cap, "the baseline's process: %s", w->why);
        return INTERFERENCE;
    }
    if (br->stopped_in_call) {
        snprintf(why, cap, "the baseline's process was stopped during a %.3f ms call", secs * 1e3);
        return INTERFERENCE;
    }
    if (!cs->ok) {
        snprintf(why, cap, "the baseline's CPU time cannot be read (/proc/PID/task/TID/schedstat)");
        return INTERFERENCE;
    }
    off = secs - cs->cpu;
    asleep = off - cs->wait - cs->grader_wait;
    if (rep) {
        snprintf(why, cap, "the candidate's process was let go on during the baseline's call");
        return INTERFERENCE;
    }
    if (after.runner_running) {
        snprintf(why, cap, "%d thread(s) of the candidate's process were not stopped during the baseline's call", after.runner_running);
        return INTERFERENCE;
    }
    for (i = 0; i < after.n && i < MAX_WATCH; i++) {
        int found = 0;
        char comm[64];
        for (j = 0; j < w->cand.n && j < MAX_WATCH; j++)
            if (w->cand.pid[j] == after.pid[i]) {
                found = 1;
                if (after.cpu_ns[i] > w->cand.cpu_ns[j]) {
                    comm_of(after.pid[i], comm, sizeof(comm));
                    snprintf(why, cap, "a process of the candidate's (pid %d, %s) ran %.3f ms during the baseline's %.3f ms call",
                             (int)after.pid[i], comm, (double)(after.cpu_ns[i] - w->cand.cpu_ns[j]) * 1e-6, secs * 1e3);
                    return INTERFERENCE;
                }
            }
        if (!found) {
            comm_of(after.pid[i], comm, sizeof(comm));
            snprintf(why, cap, "a process of the candidate's (pid %d, %s) started during the baseline's call", (int)after.pid[i], comm);
            return INTERFERENCE;
        }
    }
    if (w->cand.n > 1 || after.n > 1) {
        snprintf(why, cap, "%d process(es) of the candidate's besides its runner existed during the baseline's call",
                 (after.n > w->cand.n ? after.n : w->cand.n) - 1);
        return INTERFERENCE;
    }
    if (asleep > DISTURB_SHARE * secs && asleep > DISTURB_MIN_S) {
        snprintf(why, cap,
                 "the baseline's process ran %.3f ms of a %.3f ms call and was stopped or asleep %.3f ms of it (it "
                 "waited %.3f ms for a CPU, the grader %.3f ms)",
                 cs->cpu * 1e3, secs * 1e3, asleep * 1e3, cs->wait * 1e3, cs->grader_wait * 1e3);
        return INTERFERENCE;
    }
    if (off > DISTURB_SHARE * secs && off > DISTURB_MIN_S) {
        snprintf(why, cap, "the baseline's process waited %.3f ms for a CPU during a %.3f ms call (the grader %.3f ms)",
                 cs->wait * 1e3, secs * 1e3, cs->grader_wait * 1e3);
        return CONTENTION;
    }
    return 0;
}

/* One call of one side on the inputs A0: while the runner is stopped,
 * copies the inputs in and poisons the outputs; times the round trip (which
 * lets the runner go on); stops the runner again, then copies the outputs
 * out to Qo/Ro and checks the canaries, the input and what the process left
 * behind.  Returns 1 if the call ran and left everything intact; the time
 * goes to *secs.  With `disturbed` (a timed call), *disturbed says whether
 * the sample is to be thrown away, and dwhy why: for the baseline, see
 * baseline_disturbed; for the candidate, a stop by someone else or its main
 * thread waiting for a CPU beyond the thresholds (its own sleeping is its
 * own work: a kernel must not be able to throw away its samples at will). */
static int one_call(runner_t *r, const scenario_t *sc, const layout_t *l, const double *A0, double *Qo, double *Ro,
                    double *secs, int check, const char *when, char *reason, size_t cap, int *disturbed, char *dwhy,
                    size_t dcap)
{
    req_t rq;
    int ok = 1, is_base = r == runners[1], rd = 0;
    call_watch_t w;
    call_sched_t cs;
    uint64_t c0 = 0, q0 = 0, c1 = 0, q1 = 0, g0 = 0, g1 = 0, x;
    char sched_why[256] = "", ignore[256];
    memcpy(SHM_A(r, l), A0, l->na * sizeof(double));
    poison(SHM_Q(r, l), l->nq);
    poison(SHM_R(r, l), l->nr);
    memset(&rq, 0, sizeof(rq));
    rq.op = OP_CALL;
    rq.batch = sc->batch;
    rq.m = sc->m;
    rq.n = sc->n;
    rq.off_a = l->off_a;
    rq.off_q = l->off_q;
    rq.off_r = l->off_r;
    if (is_base) {
        /* every baseline call runs with the grader's scheduling as at its
         * start, whatever the candidate did to the baseline or the grader */
        reset_sched(0, ignore, sizeof(ignore));
        reset_sched(r->pid, sched_why, sizeof(sched_why));
    }
    if (disturbed) {
        *disturbed = 0;
        if (is_base)
            watch_before(runners[0], r, &w, sched_why);
        rd = read_main_sched(r->pid, &c0, &q0) == 0 && read_main_sched(getpid(), &x, &g0) == 0;
    }
    if (round_trip(r, &rq, secs) != 0) {
        add_reason(reason, cap, "%sthe %s process %s", when, r->kind, r->why);
        return 0;
    }
    if (disturbed)
        rd = rd && read_main_sched(r->pid, &x, &q1) == 0 && read_main_sched(getpid(), &x, &g1) == 0;
    if (freeze(r) != 0) {
        add_reason(reason, cap, "%sthe %s process %s", when, r->kind, r->why[0] ? r->why : "could not be stopped");
        return 0;
    }
    if (disturbed) {
        rd = rd && read_main_sched(r->pid, &c1, &x) == 0 && c1 >= c0 && q1 >= q0 && g1 >= g0;
        cs.ok = rd;
        cs.cpu = rd ? (double)(c1 - c0) * 1e-9 : 0.0;
        cs.wait = rd ? (double)(q1 - q0) * 1e-9 : 0.0;
        cs.grader_wait = rd ? (double)(g1 - g0) * 1e-9 : 0.0;
        if (is_base) {
            *disturbed = baseline_disturbed(runners[0], r, &w, &cs, *secs, dwhy, dcap);
        } else if (r->stopped_in_call) {
            snprintf(dwhy, dcap, "the candidate's process was stopped during a %.3f ms call", *secs * 1e3);
            *disturbed = INTERFERENCE;
        } else if (rd && cs.wait + cs.grader_wait > DISTURB_SHARE * *secs && cs.wait + cs.grader_wait > DISTURB_MIN_S) {
            snprintf(dwhy, dcap, "the candidate's process waited %.3f ms for a CPU during a %.3f ms call (the grader %.3f ms)",
                     cs.wait * 1e3, *secs * 1e3, cs.grader_wait * 1e3);
            *disturbed = CONTENTION;
        }
    }
    memcpy(Qo, SHM_Q(r, l), l->nq * sizeof(double));
    memcpy(Ro, SHM_R(r, l), l->nr * sizeof(double));
    if (check) {
        ok &= check_integrity(SHM_A(r, l), A0, l->na, SHM_Q(r, l), l->nq, SHM_R(r, l), l->nr, when, reason, cap);
        ok &= check_leftovers(when, reason, cap);
        if (!r->dead) /* check_leftovers kills a runner that started a process */
            ok &= check_mapped_files(r, when, reason, cap);
    }
    return ok;
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void arm_guards(runner_t *r, const layout_t *l)
{
    gbuf_arm(SHM_A(r, l), l->na);
    gbuf_arm(SHM_Q(r, l), l->nq);
    gbuf_arm(SHM_R(r, l), l->nr);
}

/* The held-out call (README.md, "Held-out shapes"): one set of inputs of
 * the shape v, its own (v's name enters make_inputs), run untimed by both
 * sides and checked like the first call: against the baseline and the
 * long double reference, canaries, input, processes, maps.  Failures go to
 * reason, named after the shape.  Returns 0, or 2 when the baseline failed
 * (berr says how). */
static int check_held_out(const scenario_t *v, runner_t *cr, runner_t *br, uint64_t seed, int *ok, int *cand_alive,
                          char *reason, size_t cap, char *berr, size_t bcap)
{
    layout_t l = layout_for(v);
    int m = v->m, n = v->n, p, rc = 0;
    double tol = TOL_FACTOR * (double)(m > n ? m : n) * DBL_EPSILON, t;
    double *A = xmalloc(l.na * sizeof(double));
    double *Qb = xmalloc(l.nq * sizeof(double)), *Rb = xmalloc(l.nr * sizeof(double));
    double *Qc = xmalloc(l.nq * sizeof(double)), *Rc = xmalloc(l.nr * sizeof(double));
    long double *Qhi = xmalloc(l.nq * sizeof(long double)), *Rhi = xmalloc(l.nr * sizeof(long double));
    char when[96];
    metrics_t mt;

    snprintf(when, sizeof(when), "held-out shape %s: ", v->name);
    make_inputs(v, seed, 0, A);
    for (p = 0; p < v->batch; p++)
        qrbench_hiprec_qr(m, n, A + (size_t)p * m * n, Qhi + (size_t)p * m * n, Rhi + (size_t)p * n * n);
    arm_guards(cr, &l);
    arm_guards(br, &l);
    if (!one_call(br, v, &l, A, Qb, Rb, &t, 0, "", berr, bcap, NULL, NULL, 0)) {
        rc = 2;
        goto done;
    }
    if (!one_call(cr, v, &l, A, Qc, Rc, &t, 1, when, reason, cap, NULL, NULL, 0)) {
        *ok = 0;
        *cand_alive = !cr->dead;
    }
    if (*cand_alive) {
        measure(v, A, Qc, Rc, Qb, Rb, Qhi, Rhi, &mt);
        *ok &= judge(&mt, tol, when, reason, cap);
    }
done:
    free(A);
    free(Qb);
    free(Rb);
    free(Qc);
    free(Rc);
    free(Qhi);
    free(Rhi);
    return rc;
}

/* Returns 0, or 2 when the baseline's own process failed (a harness error). */
static int run_scenario(const scenario_t *sc, runner_t *cr, runner_t *br, int repeats_opt, uint64_t seed,
                        double overhead_us, int held_out, FILE *out)
{
    int m = sc->m, n = sc->n, p, r, repeats, ok = 1, cand_alive = 1, max_attempts;
    layout_t l = layout_for(sc);
    size_t na = l.na, nq = l.nq, nr = l.nr;
    double tol = TOL_FACTOR * (double)(m > n ? m : n) * DBL_EPSILON;
    double *A0 = xmalloc(na * sizeof(double));
    double *Qb = xmalloc(nq * sizeof(double)), *Rb = xmalloc(nr * sizeof(double));
    double *Qc = xmalloc(nq * sizeof(double)), *Rc = xmalloc(nr * sizeof(double));
    long double *Qhi = xmalloc(nq * sizeof(long double)), *Rhi = xmalloc(nr * sizeof(long double));
    double *tc_s = NULL, *tb_s = NULL, tc = 0.0, tb = 0.0, t_cand, t_base, mean, var, cv;
    metrics_t first;
    char reason[1024] = "", when[64], berr[512] = "", hname[64] = "", first_why[320] = "", cannot[512] = "";
    int samples = 0, attempts = 0, disturbed = 0, interfered = 0, contended = 0;
    double *tc_x = NULL, *tb_x = NULL;

    memset(&first, 0, sizeof(first));
    first.err_ref = first.err_hi = NAN;
    if (sticky[0]) {
        add_reason(reason, sizeof(reason), "%s", sticky);
        ok = 0;
    }
    arm_guards(cr, &l);
    arm_guards(br, &l);

    /* round 0: the baseline's output is the float64 reference, the
     * candidate's gets the full check against it and the long double one */
    make_inputs(sc, seed, 0, A0);
    for (p = 0; p < sc->batch; p++)
        qrbench_hiprec_qr(m, n, A0 + (size_t)p * m * n, Qhi + (size_t)p * m * n, Rhi + (size_t)p * n * n);
    if (!one_call(br, sc, &l, A0, Qb, Rb, &tb, 0, "", berr, sizeof(berr), NULL, NULL, 0))
        goto baseline_failed;
    if (!one_call(cr, sc, &l, A0, Qc, Rc, &tc, 1, "call 1: ", reason, sizeof(reason), NULL, NULL, 0)) {
        ok = 0;
        cand_alive = !cr->dead;
    }
    if (cand_alive) {
        measure(sc, A0, Qc, Rc, Qb, Rb, Qhi, Rhi, &first);
        ok &= judge(&first, tol, "", reason, sizeof(reason));
    }

    /* the held-out shape, checked once, untimed */
    if (held_out) {
        scenario_t v;
        held_out_shape(sc, seed, &v, hname, sizeof(hname));
        if (cand_alive && check_held_out(&v, cr, br, seed, &ok, &cand_alive, reason, sizeof(reason), berr, sizeof(berr)) != 0)
            goto baseline_failed;
        arm_guards(cr, &l);
        arm_guards(br, &l);
    }

    if (repeats_opt > 0) {
        repeats = repeats_opt;
    } else {
        double want = TIME_BUDGET_S / (tb + tc + 1e-9);
        repeats = want > MAX_REPEATS ? MAX_REPEATS : (int)ceil(want);
        if (repeats < MIN_REPEATS)
            repeats = MIN_REPEATS;
    }
    /* the planned rounds, and up to twice as many again to replace
     * disturbed ones */
    max_attempts = 3 * repeats;
    tc_s = xmalloc(sizeof(double) * (size_t)max_attempts);
    tb_s = xmalloc(sizeof(double) * (size_t)max_attempts);
    tc_x = xmalloc(sizeof(double) * (size_t)max_attempts);
    tb_x = xmalloc(sizeof(double) * (size_t)max_attempts);

    /* round 1 is the untimed warm-up; rounds 2, 3, ... are timed until
     * `repeats` of them are clean.  Every round gets fresh inputs (a redone
     * round too: r only grows), the same for both sides; the order of the
     * pair alternates.  Every candidate output is compared with the
     * baseline's on the same inputs, and checked fully when it differs by
     * more than the tolerance; a disturbed round is checked like any. */
    for (r = 1; cand_alive; r++) {
        int timed = r >= 2, cand_first = r & 1, side, call_ok, dc = 0, db = 0;
        double t_c = 0.0, t_b = 0.0;
        char why_c[320] = "", why_b[320] = "";
        /* stop once the clean samples are in, the budget is spent, or so
         * many rounds were disturbed that cannot_tell is certain */
        if (timed && (samples >= repeats || attempts >= max_attempts || 2 * interfered > repeats))
            break;
        make_inputs(sc, seed, r, A0);
        snprintf(when, sizeof(when), "call %d: ", r + 1);
        for (side = 0; side < 2; side++) {
            if ((side == 0) == cand_first) {
                call_ok = one_call(cr, sc, &l, A0, Qc, Rc, &t_c, ok, when, reason, sizeof(reason), timed ? &dc : NULL,
                                   why_c, sizeof(why_c));
                if (!call_ok && cr->dead) {
                    ok = 0;
                    cand_alive = 0;
                    break;
                }
                ok &= call_ok;
            } else {
                if (!one_call(br, sc, &l, A0, Qb, Rb, &t_b, 0, "", berr, sizeof(berr), timed ? &db : NULL, why_b,
                              sizeof(why_b)))
                    goto baseline_failed;
            }
        }
        if (!cand_alive)
            break;
        if (timed) {
            attempts++;
            if (db == INTERFERENCE || dc == INTERFERENCE) {
                disturbed++;
                interfered++;
                if (!first_why[0])
                    snprintf(first_why, sizeof(first_why), "%s", db == INTERFERENCE ? why_b : why_c);
            } else if (db || dc) {
                disturbed++;
                tc_x[contended] = t_c;
                tb_x[contended] = t_b;
                contended++;
            } else {
                tc_s[samples] = t_c;
                tb_s[samples] = t_b;
                samples++;
            }
        }
        if (ok && signed_diff(sc, Qc, Rc, Qb, Rb) > tol) {
            metrics_t again;
            measure(sc, A0, Qc, Rc, Qb, Rb, NULL, NULL, &again);
            if (judge(&again, tol, when, reason, sizeof(reason)))
                add_reason(reason, sizeof(reason), "%sdiffers from the baseline beyond the tolerance", when);
            ok = 0;
        }
    }
    if (!check_leftovers("", reason, sizeof(reason)))
        ok = 0;
    /* Too many disturbed rounds: the clean ones may be disturbed too, below
     * the threshold.  Only a correct scenario says so: an incorrect one
     * fails on its own account. */
    if (ok && cand_alive && 3 * interfered > attempts)
        snprintf(cannot, sizeof(cannot), "%s; %d of %d timed rounds interfered with, %d clean of %d wanted", first_why,
                 interfered, attempts, samples, repeats);
    /* Not enough clean rounds because the machine was loaded: the rounds
     * that only waited for a CPU (both sides of a pair alike) count too. */
    if (samples < repeats) {
        for (r = 0; r < contended; r++) {
            tc_s[samples] = tc_x[r];
            tb_s[samples] = tb_x[r];
            samples++;
        }
    }
    if (ok && cand_alive && !cannot[0] && samples < MIN_SAMPLES)
        snprintf(cannot, sizeof(cannot), "only %d timed rounds were not interfered with (%d wanted; first: %s)", samples,
                 repeats, first_why[0] ? first_why : "none");

    if (samples > 0) {
        t_cand = median_of(tc_s, samples);
        t_base = median_of(tb_s, samples);
        mean = 0.0;
        for (r = 0; r < samples; r++)
            mean += tc_s[r];
        mean /= samples;
        var = 0.0;
        for (r = 0; r < samples; r++)
            var += (tc_s[r] - mean) * (tc_s[r] - mean);
        var = samples > 1 ? var / (samples - 1) : 0.0;
        cv = mean > 0.0 ? sqrt(var) / mean : 0.0;
    } else {
        /* the candidate never completed a clean timed call */
        t_cand = 1e3;
        t_base = tb > 0.0 ? tb : 1e3;
        cv = 0.0;
    }
    if (!(t_cand > 1e-9))
        t_cand = 1e-9;
    if (!(t_base > 1e-9))
        t_base = 1e-9;

    fprintf(out, "{\"scenario\":");
    json_str(out, sc->name);
    fprintf(out, ",\"correct\":%s,\"max_abs_err_ref\":", ok ? "true" : "false");
    json_num(out, first.err_ref);
    fputs(",\"max_abs_err_hi\":", out);
    json_num(out, first.err_hi);
    fputs(",\"tolerance\":", out);
    json_num(out, tol);
    fputs(",\"time_us\":", out);
    json_num(out, t_cand * 1e6);
    fputs(",\"baseline_us\":", out);
    json_num(out, t_base * 1e6);
    fprintf(out, ",\"samples\":%d,\"cv\":", samples);
    json_num(out, cv);
    fputs(",\"call_overhead_us\":", out);
    json_num(out, overhead_us);
    fprintf(out, ",\"disturbed\":%d", disturbed);
    if (hname[0]) {
        fputs(",\"held_out\":", out);
        json_str(out, hname);
    }
    if (cannot[0]) {
        fputs(",\"cannot_tell\":", out);
        json_str(out, cannot);
    }
    if (!ok) {
        fputs(",\"reason\":", out);
        json_str(out, reason);
    }
    fputs("}\n", out);

    printf("%-16s %-9s time %10.1f us  baseline %10.1f us  speedup %6.3f  n=%-3d cv=%.3f  disturbed=%d  err_ref=%.2g err_hi=%.2g tol=%.2g%s%s%s%s\n",
           sc->name, ok ? (cannot[0] ? "cannot-tell" : "correct") : "WRONG", t_cand * 1e6, t_base * 1e6,
           t_cand > 0.0 ? t_base / t_cand : 0.0, samples, cv, disturbed, first.err_ref, first.err_hi, tol, ok ? "" : "  ",
           ok ? "" : reason, cannot[0] ? "  " : "", cannot);
    fflush(stdout);

    free(tc_s);
    free(tc_x);
    free(tb_x);
    free(tb_s);
    free(Qhi);
    free(Rhi);
    free(Qb);
    free(Rb);
    free(Qc);
    free(Rc);
    free(A0);
    return 0;

baseline_failed:
    fprintf(stderr, "qrbench: scenario %s: the baseline failed: %s\n", sc->name, berr);
    free(tc_s);
    free(tc_x);
    free(tb_x);
    free(tb_s);
    free(Qhi);
    free(Rhi);
    free(Qb);
    free(Rb);
    free(Qc);
    free(Rc);
    free(A0);
    return 2;
}

/* ------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qrbench --lib PATH.so --out RESULTS.jsonl [--baseline-lib PATH.so] [--scenarios a,b,c]\n"
            "               [--repeats N] [--seed S] [--no-held-out]\n"
            "       qrbench --list\n");
}

static int find_scenario(const char *name, size_t len)
{
    int i;
    for (i = 0; i < N_SCENARIOS; i++)
        if (strlen(SCENARIOS[i].name) == len && strncmp(SCENARIOS[i].name, name, len) == 0)
            return i;
    return -1;
}

/* Writes the results file in one step: a new file beside it (O_EXCL,
 * O_NOFOLLOW), then rename over whatever is at the path (a file, a link or
 * a FIFO the candidate may have put there is replaced, never followed). */
static int write_atomically(const char *path, const char *data, size_t len)
{
    char tmp[8192], dir[4096];
    const char *slash = strrchr(path, '/');
    int attempt, fd = -1;
    if (slash) {
        size_t dl = (size_t)(slash - path);
        if (dl == 0)
            dl = 1;
        if (dl >= sizeof(dir))
            return -1;
        memcpy(dir, path, dl);
        dir[dl] = '\0';
    } else {
        snprintf(dir, sizeof(dir), ".");
    }
    for (attempt = 0; attempt < 16 && fd < 0; attempt++) {
        uint64_t rnd = ((uint64_t)getpid() << 40) ^ (uint64_t)(now_s() * 1e9) ^ ((uint64_t)attempt << 20);
        snprintf(tmp, sizeof(tmp), "%s/.qrbench-%016llx.tmp", dir, (unsigned long long)rnd);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return -1;
    if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

extern char **environ;

/* Blanks this process's own command line and GADFLY_* variables in place,
 * so /proc/PID/cmdline and /proc/PID/environ of the grader name no results
 * path (defence in depth: the results file is written last anyway). */
static void hide_arguments(int argc, char **argv)
{
    int i;
    char **e;
    for (i = 1; i < argc; i++)
        memset(argv[i], 0, strlen(argv[i]));
    for (e = environ; e && *e; e++)
        if (!strncmp(*e, "GADFLY_", 7))
            memset(*e, 0, strlen(*e));
}

/* Copies the baseline's library into a sealed memory file (see
 * baseline_lib_fd).  0 on success. */
static int load_baseline_lib(const char *path)
{
    char buf[65536];
    ssize_t k;
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    baseline_lib_fd = memfd_create("qrbench-baseline", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (baseline_lib_fd < 0) {
        close(in);
        return -1;
    }
    while ((k = read(in, buf, sizeof(buf))) > 0)
        if (write_all(baseline_lib_fd, buf, (size_t)k) != 0) {
            k = -1;
            break;
        }
    close(in);
    if (k < 0)
        return -1;
    return fcntl(baseline_lib_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
}

int main(int argc, char **argv)
{
    const char *lib = NULL, *outpath = NULL, *list = NULL, *runner = NULL, *baseline_lib = NULL;
    char *out_copy, *lib_real, *buf = NULL;
    size_t buflen = 0, shm_size = 0;
    int repeats = 0, i, selected[64], nsel = 0, rc, held_out = 1;
    uint64_t seed = DEFAULT_SEED;
    runner_t cr, br;
    FILE *out;
    double t0 = now_s(), overhead_us = NAN;
    ssize_t k;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--runner") && has_val) {
            runner = argv[++i];
        } else if (!strcmp(a, "--lib") && has_val) {
            lib = argv[++i];
        } else if (!strcmp(a, "--baseline-lib") && has_val) {
            baseline_lib = argv[++i];
        } else if (!strcmp(a, "--out") && has_val) {
            outpath = argv[++i];
        } else if (!strcmp(a, "--scenarios") && has_val) {
            list = argv[++i];
        } else if (!strcmp(a, "--repeats") && has_val) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 100000) {
                fprintf(stderr, "qrbench: --repeats wants a positive integer\n");
                return 2;
            }
            repeats = (int)v;
        } else if (!strcmp(a, "--seed") && has_val) {
            char *end;
            seed = strtoull(argv[++i], &end, 0);
            if (*end) {
                fprintf(stderr, "qrbench: --seed wants an integer\n");
                return 2;
            }
        } else if (!strcmp(a, "--no-held-out")) {
            held_out = 0;
        } else if (!strcmp(a, "--list")) {
            for (i = 0; i < N_SCENARIOS; i++)
                printf("%s\n", SCENARIOS[i].name);
            return 0;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "qrbench: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (runner)
        return runner_main(runner, lib);
    if (!lib || !outpath) {
        usage(stderr);
        return 2;
    }

    /* The grader: no core dumps, no ptrace or /proc/PID/mem by the same
     * user, and every orphan of the candidate becomes its child. */
    prctl(PR_SET_DUMPABLE, 0);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        fprintf(stderr, "qrbench: cannot become a child subreaper: %s\n", strerror(errno));
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    k = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    if (k <= 0 || (size_t)k >= sizeof(self_exe) - 1) {
        fprintf(stderr, "qrbench: cannot find its own program (/proc/self/exe)\n");
        return 2;
    }
    self_exe[k] = '\0';
    {
        /* by default beside this program: build/libbaseline.so */
        char path[4096 + 32];
        const char *slash = strrchr(self_exe, '/');
        if (!baseline_lib) {
            snprintf(path, sizeof(path), "%.*s/libbaseline.so", slash ? (int)(slash - self_exe) : 1,
                     slash ? self_exe : ".");
            baseline_lib = path;
        }
        if (load_baseline_lib(baseline_lib) != 0) {
            fprintf(stderr,
                    "qrbench: cannot read the baseline's library '%s': %s (the Makefile builds it from "
                    "harness/cpu/baseline_qr.c with the candidate's flags)\n",
                    baseline_lib, strerror(errno));
            return 2;
        }
    }
    out_copy = strdup(outpath);
    lib_real = realpath(lib, NULL);
    if (!out_copy)
        die_oom();
    if (!lib_real || file_identity(lib_real, &candidate_lib) != 0) {
        fprintf(stderr, "qrbench: cannot load candidate library '%s': %s\n", lib, strerror(errno));
        return 3;
    }
    /* before any process is started: the scheduling the baseline's runner
     * is held to, and the files a runner without candidate maps */
    save_grader_sched();
    if (load_runtime_files() != 0) {
        fprintf(stderr, "qrbench: cannot list the runtime libraries (the probe process failed)\n");
        return 2;
    }

    if (list) {
        const char *s = list;
        while (*s) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            if (len > 0) {
                int idx = find_scenario(s, len);
                if (idx < 0) {
                    fprintf(stderr, "qrbench: unknown scenario '%.*s'; known:", (int)len, s);
                    for (i = 0; i < N_SCENARIOS; i++)
                        fprintf(stderr, " %s", SCENARIOS[i].name);
                    fputc('\n', stderr);
                    return 2;
                }
                if (nsel < 64)
                    selected[nsel++] = idx;
            }
            if (!e)
                break;
            s = e + 1;
        }
        if (nsel == 0) {
            fprintf(stderr, "qrbench: --scenarios selected nothing\n");
            return 2;
        }
    } else {
        for (i = 0; i < N_SCENARIOS; i++)
            selected[nsel++] = i;
    }
    hide_arguments(argc, argv);
    outpath = out_copy;

    for (i = 0; i < nsel; i++) {
        layout_t l = layout_for(&SCENARIOS[selected[i]]);
        scenario_t v;
        char vname[64];
        if (layout_size(&l) > shm_size)
            shm_size = layout_size(&l);
        held_out_shape(&SCENARIOS[selected[i]], seed, &v, vname, sizeof(vname));
        l = layout_for(&v);
        if (held_out && layout_size(&l) > shm_size)
            shm_size = layout_size(&l);
    }
    runners[0] = &cr;
    runners[1] = &br;
    memset(&cr, 0, sizeof(cr));
    rc = spawn_runner(&br, "baseline", NULL, shm_size);
    if (rc != 0) {
        fprintf(stderr, "qrbench: cannot start the baseline process: %s\n", br.why);
        kill_descendants();
        return 2;
    }
    allow_maps_of(br.pid);
    rc = spawn_runner(&cr, "candidate", lib_real, shm_size);
    if (rc != 0) {
        fprintf(stderr, "qrbench: %s%s\n", rc == 3 ? "" : "cannot start the candidate process: ", cr.why);
        kill_descendants();
        return rc == 3 ? 3 : 2;
    }
    if (freeze(&cr) != 0 || freeze(&br) != 0) {
        fprintf(stderr, "qrbench: cannot stop a runner between calls\n");
        kill_descendants();
        return 2;
    }

    /* the fixed cost of one call (let the runner go on, a request, an
     * answer, no work), measured on the baseline's process; both sides pay
     * it on every timed call */
    {
        double pings[64], t;
        req_t rq;
        int np = 0;
        memset(&rq, 0, sizeof(rq));
        rq.op = OP_PING;
        for (i = 0; i < 64; i++) {
            if (round_trip(&br, &rq, &t) == 0)
                pings[np++] = t;
            if (freeze(&br) != 0)
                break;
        }
        if (np > 0)
            overhead_us = median_of(pings, np) * 1e6;
    }

    out = open_memstream(&buf, &buflen);
    if (!out)
        die_oom();
    rc = 0;
    for (i = 0; i < nsel && rc == 0; i++) {
        if (cr.dead) {
            /* the candidate crashed in an earlier scenario: a fresh process */
            free_runner(&cr);
            if (spawn_runner(&cr, "candidate", lib_real, shm_size) != 0 || freeze(&cr) != 0) {
                fprintf(stderr, "qrbench: cannot restart the candidate process: %s\n", cr.why);
                rc = 2;
                break;
            }
        }
        rc = run_scenario(&SCENARIOS[selected[i]], &cr, &br, repeats, seed, overhead_us, held_out, out);
    }
    if (fclose(out) != 0)
        die_oom();

    /* Nothing the candidate started may outlive this point: every runner and
     * every orphan is killed and reaped before the results file exists. */
    reap_runner(&cr);
    reap_runner(&br);
    kill_descendants();
    if (rc != 0)
        return rc;
    if (write_atomically(outpath, buf, buflen) != 0) {
        fprintf(stderr, "qrbench: cannot write the results file: %s\n", strerror(errno));
        return 2;
    }
    printf("qrbench: %d scenario(s) in %.2f s, round-trip overhead %.1f us per call, results written\n", nsel,
           now_s() - t0, overhead_us);
    free(buf);
    return 0;
}
