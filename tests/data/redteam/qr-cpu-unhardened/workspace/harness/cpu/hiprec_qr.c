/*
 * High-precision reference for qrbench: Householder QR of one matrix with
 * every intermediate in long double (80-bit extended on x86-64, wider
 * elsewhere when available).  Column-oriented, LAPACK-style reflectors
 * H = I - tau u u^T with u[k] = 1, thin Q formed by backward accumulation.
 * Speed does not matter here; it runs once per matrix per scenario.
 */
#include "harness.h"
#include <math.h>
#include <stdlib.h>

void qrbench_hiprec_qr(int m, int n, const double *a, long double *q, long double *r)
{
    long double *w = malloc(sizeof(long double) * (size_t)m * n);
    long double *tau = malloc(sizeof(long double) * (size_t)(n > 0 ? n : 1));
    int i, j, k;

    if (!w || !tau)
        abort();
    for (j = 0; j < n; j++)
        for (i = 0; i < m; i++)
            w[i + (size_t)j * m] = a[i + (size_t)j * m];

    /* factorisation: reflector k annihilates w[k+1:m, k] */
    for (k = 0; k < n; k++) {
        long double *col = w + (size_t)k * m;
        long double x0 = col[k], sigma = 0.0L, norm, beta, scale;

        for (i = k + 1; i < m; i++)
            sigma += col[i] * col[i];
        if (sigma == 0.0L) {
            tau[k] = 0.0L; /* already upper triangular in this column */
            continue;
        }
        norm = sqrtl(x0 * x0 + sigma);
        beta = (x0 >= 0.0L) ? -norm : norm;
        tau[k] = (beta - x0) / beta;
        scale = 1.0L / (x0 - beta);
        for (i = k + 1; i < m; i++)
            col[i] *= scale;
        col[k] = beta;

        for (j = k + 1; j < n; j++) {
            long double *cj = w + (size_t)j * m;
            long double s = cj[k];
            for (i = k + 1; i < m; i++)
                s += col[i] * cj[i];
            s *= tau[k];
            cj[k] -= s;
            for (i = k + 1; i < m; i++)
                cj[i] -= s * col[i];
        }
    }

    for (j = 0; j < n; j++)
        for (i = 0; i < n; i++)
            r[i + (size_t)j * n] = (i <= j) ? w[i + (size_t)j * m] : 0.0L;

    /* thin Q = H_0 H_1 ... H_{n-1} [I_n; 0], applied right to left */
    for (j = 0; j < n; j++)
        for (i = 0; i < m; i++)
            q[i + (size_t)j * m] = (i == j) ? 1.0L : 0.0L;
    for (k = n - 1; k >= 0; k--) {
        const long double *u = w + (size_t)k * m; /* u[k] = 1 implied */
        if (tau[k] == 0.0L)
            continue;
        for (j = k; j < n; j++) {
            long double *qj = q + (size_t)j * m;
            long double s = qj[k];
            for (i = k + 1; i < m; i++)
                s += u[i] * qj[i];
            s *= tau[k];
            qj[k] -= s;
            for (i = k + 1; i < m; i++)
                qj[i] -= s * u[i];
        }
    }

    free(tau);
    free(w);
}
