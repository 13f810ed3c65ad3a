/*
 * Replay version 3 of 3 for the qr-cpu demo: a good kernel.
 *
 * Correct on every scenario and well ahead of the initial kernel on all of
 * them.  Changes from the initial kernel:
 *   - no per-matrix allocation: the factorisation runs in place in the Q
 *     output (reflectors below the diagonal, R on and above it) and only a
 *     small tau array is allocated once per call;
 *   - LAPACK-style reflectors H = I - tau u u^T with u[k] = 1, applied to
 *     the trailing columns only, one column at a time as a contiguous dot
 *     product followed by an axpy (column-major friendly);
 *   - the thin Q is formed in place by backward accumulation
 *     (H_0 ... H_{n-1} applied to the first n columns of the identity),
 *     touching only the part of Q each reflector can change.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Factor the m x n matrix held in w (leading dimension m) in place. */
static void factor_in_place(int m, int n, double *w, double *tau)
{
    int i, j, k;

    for (k = 0; k < n; k++) {
        double *col = w + (size_t)k * m;
        double x0 = col[k], sigma = 0.0, norm, beta, scale, t;

        for (i = k + 1; i < m; i++)
            sigma += col[i] * col[i];
        if (sigma == 0.0) {
            tau[k] = 0.0;
            continue;
        }
        norm = sqrt(x0 * x0 + sigma);
        beta = (x0 >= 0.0) ? -norm : norm;
        t = (beta - x0) / beta;
        tau[k] = t;
        scale = 1.0 / (x0 - beta);
        for (i = k + 1; i < m; i++)
            col[i] *= scale;
        col[k] = beta;

        for (j = k + 1; j < n; j++) {
            double *cj = w + (size_t)j * m;
            double s = cj[k];
            for (i = k + 1; i < m; i++)
                s += col[i] * cj[i];
            s *= t;
            cj[k] -= s;
            for (i = k + 1; i < m; i++)
                cj[i] -= s * col[i];
        }
    }
}

/* Turn the reflectors stored below the diagonal of w into the thin Q. */
static void form_q_in_place(int m, int n, double *w, const double *tau)
{
    int i, j, k;

    for (k = n - 1; k >= 0; k--) {
        double *u = w + (size_t)k * m; /* u[k] = 1 implied */
        double t = tau[k];

        /* columns to the right already hold part of Q */
        for (j = k + 1; j < n; j++) {
            double *qj = w + (size_t)j * m;
            double s = 0.0;
            for (i = k + 1; i < m; i++)
                s += u[i] * qj[i];
            s *= t;
            qj[k] = -s; /* row k of these columns was zero */
            for (i = k + 1; i < m; i++)
                qj[i] -= s * u[i];
        }
        /* column k itself is H_k e_k */
        for (i = k + 1; i < m; i++)
            u[i] *= -t;
        u[k] = 1.0 - t;
        for (i = 0; i < k; i++)
            u[i] = 0.0;
    }
}

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    double *tau = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    int p, i, j;

    for (p = 0; p < batch; p++) {
        const double *a = A + (size_t)p * m * n;
        double *q = Q + (size_t)p * m * n;
        double *r = R + (size_t)p * n * n;

        memcpy(q, a, sizeof(double) * (size_t)m * n);
        factor_in_place(m, n, q, tau);
        for (j = 0; j < n; j++) {
            for (i = 0; i <= j; i++)
                r[i + (size_t)j * n] = q[i + (size_t)j * m];
            for (; i < n; i++)
                r[i + (size_t)j * n] = 0.0;
        }
        form_q_in_place(m, n, q, tau);
    }
    free(tau);
}
