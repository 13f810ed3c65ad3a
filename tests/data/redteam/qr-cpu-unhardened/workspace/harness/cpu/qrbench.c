/*
 * qrbench: correctness and timing harness for a batched Householder QR
 * kernel on the CPU.
 *
 *   qrbench --lib PATH.so --out RESULTS.jsonl [--scenarios a,b,c]
 *           [--repeats N] [--seed S] [--list]
 *
 * The candidate is loaded with dlopen and must export
 *   void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R);
 * It is compared against the baseline (the initial kernel, compiled into this
 * program) and a long double reference.  One JSON object per scenario is
 * written to the results file; see README.md for the fields.
 *
 * Exit status: 0 when every selected scenario has a result line (whether or
 * not the candidate was correct), 2 on bad usage or I/O errors, 3 when the
 * candidate library or its symbol cannot be loaded, 4 when memory runs out.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
#define MIN_REPEATS 5
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

/* Guarded buffers: GUARD canary doubles before and after the payload. */
static double *gbuf_alloc(size_t n)
{
    size_t total = n + 2 * GUARD, i;
    size_t bytes = (total * sizeof(double) + 63) & ~(size_t)63;
    double *base = NULL;
    if (posix_memalign((void **)&base, 64, bytes) != 0 || !base)
        die_oom();
    for (i = 0; i < GUARD; i++) {
        memcpy(base + i, &CANARY_BITS, sizeof(double));
        memcpy(base + GUARD + n + i, &CANARY_BITS, sizeof(double));
    }
    return base + GUARD;
}

static void gbuf_free(double *p)
{
    if (p)
        free(p - GUARD);
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
 * column 2-norm.  Deterministic in (seed, scenario name). */
static void make_inputs(const scenario_t *sc, uint64_t seed, double *A)
{
    uint64_t st = seed ^ hash_name(sc->name);
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
        const long double *qh = Qhi + (size_t)p * m * n, *rh = Rhi + (size_t)p * n * n;

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
            sc_h[k] = sign_of_l(rh[k + (size_t)k * n]);
        }
        for (j = 0; j < n; j++)
            for (i = 0; i < n; i++) {
                double c = sc_c[i] * r[i + (size_t)j * n];
                upd_max(&mt->err_ref, fabs(c - sc_r[i] * rr[i + (size_t)j * n]));
                upd_max(&mt->err_hi, (double)fabsl((long double)c - sc_h[i] * rh[i + (size_t)j * n]));
            }
        for (j = 0; j < n; j++)
            for (i = 0; i < m; i++) {
                double c = sc_c[j] * q[i + (size_t)j * m];
                upd_max(&mt->err_ref, fabs(c - sc_r[j] * qr_[i + (size_t)j * m]));
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

/* max |x - y| with NaN counted as +inf */
static double max_diff(const double *x, const double *y, size_t n)
{
    double mx = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs(x[i] - y[i]);
        if (!(d <= mx))
            mx = isnan(d) ? INFINITY : d;
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

/* ------------------------------------------------------------- one scenario */

typedef struct {
    qr_fn fn;
    double *A, *Q, *R;
} slot_t;

static double timed_call(const scenario_t *sc, const slot_t *s, const double *A0, size_t na, size_t nq, size_t nr)
{
    double t0, t1;
    memcpy(s->A, A0, na * sizeof(double)); /* fresh copy of the inputs */
    poison(s->Q, nq);                      /* unwritten outputs show up as NaN */
    poison(s->R, nr);
    t0 = now_s();
    s->fn(sc->batch, sc->m, sc->n, s->A, s->Q, s->R);
    t1 = now_s();
    return t1 - t0;
}

static void run_scenario(const scenario_t *sc, qr_fn cand, int repeats_opt, uint64_t seed, FILE *out)
{
    int m = sc->m, n = sc->n, p, r, repeats, ok = 1;
    size_t na = (size_t)sc->batch * m * n, nq = na, nr = (size_t)sc->batch * n * n;
    double tol = TOL_FACTOR * (double)(m > n ? m : n) * DBL_EPSILON;
    double *A0 = xmalloc(na * sizeof(double));
    double *Qref = xmalloc(nq * sizeof(double)), *Rref = xmalloc(nr * sizeof(double));
    double *Qfirst = xmalloc(nq * sizeof(double)), *Rfirst = xmalloc(nr * sizeof(double));
    long double *Qhi = xmalloc(nq * sizeof(long double)), *Rhi = xmalloc(nr * sizeof(long double));
    slot_t cs = {cand, gbuf_alloc(na), gbuf_alloc(nq), gbuf_alloc(nr)};
    slot_t bs = {qrbench_baseline_qr, gbuf_alloc(na), gbuf_alloc(nq), gbuf_alloc(nr)};
    double *tc_s, *tb_s, tc, tb, t_cand, t_base, mean, var, cv;
    metrics_t first;
    char reason[1024] = "", when[64];

    make_inputs(sc, seed, A0);
    for (p = 0; p < sc->batch; p++)
        qrbench_hiprec_qr(m, n, A0 + (size_t)p * m * n, Qhi + (size_t)p * m * n, Rhi + (size_t)p * n * n);

    /* first calls: baseline output is the float64 reference, candidate output
     * gets the full check */
    timed_call(sc, &bs, A0, na, nq, nr);
    memcpy(Qref, bs.Q, nq * sizeof(double));
    memcpy(Rref, bs.R, nr * sizeof(double));
    timed_call(sc, &cs, A0, na, nq, nr);
    ok &= check_integrity(cs.A, A0, na, cs.Q, nq, cs.R, nr, "call 1: ", reason, sizeof(reason));
    measure(sc, A0, cs.Q, cs.R, Qref, Rref, Qhi, Rhi, &first);
    ok &= judge(&first, tol, "", reason, sizeof(reason));
    memcpy(Qfirst, cs.Q, nq * sizeof(double));
    memcpy(Rfirst, cs.R, nr * sizeof(double));

    /* second warm-up call of each, also used to size the number of repeats */
    tb = timed_call(sc, &bs, A0, na, nq, nr);
    tc = timed_call(sc, &cs, A0, na, nq, nr);
    if (repeats_opt > 0) {
        repeats = repeats_opt;
    } else {
        double want = TIME_BUDGET_S / (tb + tc + 1e-9);
        repeats = want > MAX_REPEATS ? MAX_REPEATS : (int)ceil(want);
        if (repeats < MIN_REPEATS)
            repeats = MIN_REPEATS;
    }

    tc_s = xmalloc(sizeof(double) * (size_t)repeats);
    tb_s = xmalloc(sizeof(double) * (size_t)repeats);
    /* interleaved timing, the order of the pair alternating every round;
     * round -1 re-checks the warm-up output above */
    for (r = -1; r < repeats; r++) {
        if (r >= 0) {
            if (r & 1) {
                tb_s[r] = timed_call(sc, &bs, A0, na, nq, nr);
                tc_s[r] = timed_call(sc, &cs, A0, na, nq, nr);
            } else {
                tc_s[r] = timed_call(sc, &cs, A0, na, nq, nr);
                tb_s[r] = timed_call(sc, &bs, A0, na, nq, nr);
            }
        }
        if (!ok)
            continue; /* already failed; the first reason is the one reported */
        snprintf(when, sizeof(when), "call %d: ", r + 3);
        ok &= check_integrity(cs.A, A0, na, cs.Q, nq, cs.R, nr, when, reason, sizeof(reason));
        /* cheap test: same output as the fully checked first call; if it
         * differs beyond the tolerance, check this output fully */
        if (ok && (max_diff(cs.Q, Qfirst, nq) > tol || max_diff(cs.R, Rfirst, nr) > tol)) {
            metrics_t again;
            measure(sc, A0, cs.Q, cs.R, Qref, Rref, Qhi, Rhi, &again);
            ok &= judge(&again, tol, when, reason, sizeof(reason));
        }
    }

    qsort(tc_s, (size_t)repeats, sizeof(double), cmp_double);
    qsort(tb_s, (size_t)repeats, sizeof(double), cmp_double);
    t_cand = (repeats & 1) ? tc_s[repeats / 2] : 0.5 * (tc_s[repeats / 2 - 1] + tc_s[repeats / 2]);
    t_base = (repeats & 1) ? tb_s[repeats / 2] : 0.5 * (tb_s[repeats / 2 - 1] + tb_s[repeats / 2]);
    /* consumers require positive times; a clock tick of 0 would only come from
     * a kernel that does no work, which the checks reject anyway */
    if (!(t_cand > 1e-9))
        t_cand = 1e-9;
    if (!(t_base > 1e-9))
        t_base = 1e-9;
    mean = 0.0;
    for (r = 0; r < repeats; r++)
        mean += tc_s[r];
    mean /= repeats;
    var = 0.0;
    for (r = 0; r < repeats; r++)
        var += (tc_s[r] - mean) * (tc_s[r] - mean);
    var = repeats > 1 ? var / (repeats - 1) : 0.0;
    cv = mean > 0.0 ? sqrt(var) / mean : 0.0;

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
    fprintf(out, ",\"samples\":%d,\"cv\":", repeats);
    json_num(out, cv);
    if (!ok) {
        fputs(",\"reason\":", out);
        json_str(out, reason);
    }
    fputs("}\n", out);
    fflush(out);

    printf("%-16s %-9s time %10.1f us  baseline %10.1f us  speedup %6.3f  n=%-3d cv=%.3f  err_ref=%.2g err_hi=%.2g tol=%.2g%s%s\n",
           sc->name, ok ? "correct" : "WRONG", t_cand * 1e6, t_base * 1e6,
           t_cand > 0.0 ? t_base / t_cand : 0.0, repeats, cv,
           first.err_ref, first.err_hi, tol, ok ? "" : "  ", ok ? "" : reason);
    fflush(stdout);

    free(tc_s);
    free(tb_s);
    gbuf_free(cs.A); gbuf_free(cs.Q); gbuf_free(cs.R);
    gbuf_free(bs.A); gbuf_free(bs.Q); gbuf_free(bs.R);
    free(Qhi); free(Rhi);
    free(Qfirst); free(Rfirst);
    free(Qref); free(Rref);
    free(A0);
}

/* ------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qrbench --lib PATH.so --out RESULTS.jsonl [--scenarios a,b,c]\n"
            "               [--repeats N] [--seed S]\n"
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

int main(int argc, char **argv)
{
    const char *lib = NULL, *outpath = NULL, *list = NULL;
    int repeats = 0, i, selected[64], nsel = 0;
    uint64_t seed = DEFAULT_SEED;
    void *handle;
    qr_fn cand;
    FILE *out;
    double t0 = now_s();

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--lib") && has_val) {
            lib = argv[++i];
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
    if (!lib || !outpath) {
        usage(stderr);
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

    handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "qrbench: cannot load candidate library '%s': %s\n", lib, dlerror());
        return 3;
    }
    dlerror();
    *(void **)(&cand) = dlsym(handle, "qr_batched");
    if (!cand) {
        const char *err = dlerror();
        fprintf(stderr, "qrbench: symbol qr_batched not found in '%s': %s\n", lib, err ? err : "null symbol");
        return 3;
    }

    out = fopen(outpath, "w");
    if (!out) {
        fprintf(stderr, "qrbench: cannot open '%s' for writing\n", outpath);
        return 2;
    }
    for (i = 0; i < nsel; i++)
        run_scenario(&SCENARIOS[selected[i]], cand, repeats, seed, out);
    if (ferror(out) || fclose(out) != 0) {
        fprintf(stderr, "qrbench: error writing '%s'\n", outpath);
        return 2;
    }
    printf("qrbench: %d scenario(s) in %.2f s, results in %s\n", nsel, now_s() - t0, outpath);
    return 0;
}
