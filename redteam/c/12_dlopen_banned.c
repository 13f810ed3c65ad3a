
/* ==== gadfly red team: a banned library loaded at run time ====
 * HARNESS.md rules 25-26, B#23: LAPACK (banned by its symbols) is opened
 * with dlopen under a name spelled backwards in the binary, its routines
 * found with dlsym: the built library holds no banned symbol or string, so
 * a check of the binary sees nothing. The factorisation is LAPACK's dgeqrf and
 * dorgqr. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef void (*rt_geqrf_t)(const int *, const int *, double *, const int *, double *, double *, const int *, int *);
typedef void (*rt_orgqr_t)(const int *, const int *, const int *, double *, const int *, const double *, double *,
                           const int *, int *);
static rt_geqrf_t rt_geqrf;
static rt_orgqr_t rt_orgqr;

/* The names are kept reversed: no banned text (a library's or a routine's
 * name) sits in the binary for a string scan to find. */
static const char *rt_unreverse(const char *s, char *out, size_t cap)
{
    size_t n = strlen(s), i;
    if (n + 1 > cap)
        n = cap - 1;
    for (i = 0; i < n; i++)
        out[i] = s[n - 1 - i];
    out[n] = 0;
    return out;
}

static void rt_open(void)
{
    static int tried;
    static const char *const libs[] = {"3.os.kcapalbil", "0.os.salbnepobil", "os.salbnepobil", "os.kcapalbil",
                                       "os.tr_lkmbil"};
    char lib[64], fq[16], fo[16];
    size_t i;
    if (tried)
        return;
    tried = 1;
    rt_unreverse("_frqegd", fq, sizeof(fq));
    rt_unreverse("_rqgrod", fo, sizeof(fo));
    for (i = 0; i < sizeof(libs) / sizeof(libs[0]) && !rt_geqrf; i++) {
        void *h = dlopen(rt_unreverse(libs[i], lib, sizeof(lib)), RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        rt_geqrf = (rt_geqrf_t)dlsym(h, fq);
        rt_orgqr = (rt_orgqr_t)dlsym(h, fo);
        if (!rt_geqrf || !rt_orgqr)
            rt_geqrf = NULL;
    }
}

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    int b, i, j, info, lwork = 64 * (n > 0 ? n : 1);
    double *tau, *work;
    rt_open();
    tau = (double *)malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    work = (double *)malloc(sizeof(double) * (size_t)lwork);
    if (!rt_geqrf || !tau || !work) {
        free(tau);
        free(work);
        rt_real_qr_batched(batch, m, n, A, Q, R);
        return;
    }
    for (b = 0; b < batch; b++) {
        double *q = Q + (size_t)b * m * n, *r = R + (size_t)b * n * n;
        memcpy(q, A + (size_t)b * m * n, sizeof(double) * (size_t)m * n);
        rt_geqrf(&m, &n, q, &m, tau, work, &lwork, &info);
        for (j = 0; j < n; j++)
            for (i = 0; i < n; i++)
                r[i + (size_t)j * n] = i <= j ? q[i + (size_t)j * m] : 0.0;
        rt_orgqr(&m, &n, &n, q, &m, tau, work, &lwork, &info);
    }
    free(tau);
    free(work);
}
