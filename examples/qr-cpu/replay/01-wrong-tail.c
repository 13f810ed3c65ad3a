/*
 * Replay version 1 of 3 for the qr-cpu demo: faster, but WRONG on some
 * scenarios (a deliberate bug).
 *
 * This version keeps every reflector as a full length-m column (zeros above
 * the diagonal) so the dot products and axpys can always run over whole
 * columns, and unrolls those loops by 4.  The bug: the unrolled loops stop at
 * the last multiple of 4 and never handle the remaining m % 4 rows.  When m is
 * a multiple of 4 (m = 4, 8, 60, 64, 100) the results are right; for m = 13,
 * 17, 33, 50 the bottom rows are never updated and the factors are wrong.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* dot product of two length-m columns, 4 at a time (BUG: tail dropped) */
static double dot4(int m, const double *x, const double *y)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int i;
    for (i = 0; i + 4 <= m; i += 4) {
        s0 += x[i] * y[i];
        s1 += x[i + 1] * y[i + 1];
        s2 += x[i + 2] * y[i + 2];
        s3 += x[i + 3] * y[i + 3];
    }
    return (s0 + s1) + (s2 + s3);
}

/* y -= s * x over a length-m column, 4 at a time (BUG: tail dropped) */
static void axpy4(int m, double s, const double *x, double *y)
{
    int i;
    for (i = 0; i + 4 <= m; i += 4) {
        y[i] -= s * x[i];
        y[i + 1] -= s * x[i + 1];
        y[i + 2] -= s * x[i + 2];
        y[i + 3] -= s * x[i + 3];
    }
}

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    double *v = malloc(sizeof(double) * (size_t)m * n); /* reflectors, full length */
    double *beta = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    int p, i, j, k;

    for (p = 0; p < batch; p++) {
        const double *a = A + (size_t)p * m * n;
        double *q = Q + (size_t)p * m * n;
        double *r = R + (size_t)p * n * n;
        double *w = q; /* factor in the Q buffer, then rebuild Q there */

        memcpy(w, a, sizeof(double) * (size_t)m * n);
        for (k = 0; k < n; k++) {
            double *vk = v + (size_t)k * m, *wk = w + (size_t)k * m;
            double norm2 = 0.0, norm, alpha, vv;

            for (i = k; i < m; i++)
                norm2 += wk[i] * wk[i];
            norm = sqrt(norm2);
            alpha = (wk[k] >= 0.0) ? -norm : norm;
            for (i = 0; i < m; i++)
                vk[i] = (i < k) ? 0.0 : wk[i];
            vk[k] -= alpha;
            vv = dot4(m, vk, vk);
            beta[k] = (vv == 0.0) ? 0.0 : 2.0 / vv;
            if (beta[k] == 0.0)
                continue;
            for (j = k; j < n; j++) {
                double *wj = w + (size_t)j * m;
                axpy4(m, beta[k] * dot4(m, vk, wj), vk, wj);
            }
        }
        for (j = 0; j < n; j++)
            for (i = 0; i < n; i++)
                r[i + (size_t)j * n] = (i <= j) ? w[i + (size_t)j * m] : 0.0;

        /* thin Q: apply the reflectors, last first, to [I_n; 0] */
        for (j = 0; j < n; j++)
            for (i = 0; i < m; i++)
                q[i + (size_t)j * m] = (i == j) ? 1.0 : 0.0;
        for (k = n - 1; k >= 0; k--) {
            const double *vk = v + (size_t)k * m;
            if (beta[k] == 0.0)
                continue;
            for (j = k; j < n; j++) {
                double *qj = q + (size_t)j * m;
                axpy4(m, beta[k] * dot4(m, vk, qj), vk, qj);
            }
        }
    }
    free(beta);
    free(v);
}
