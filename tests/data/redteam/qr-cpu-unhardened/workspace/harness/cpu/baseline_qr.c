/*
 * Baseline for qrbench: the campaign's initial kernel (examples/qr-cpu/
 * workspace/kernel/qr.c as shipped), same algorithm and code, exported under
 * another name so it can live next to the candidate.  It serves both as the
 * timing baseline and as the float64 reference output.
 *
 * Keep this file in step with the initial kernel: if one changes, copy the
 * other (only the exported function name differs).
 */
#include "harness.h"
#include <math.h>
#include <stdlib.h>

static void qr_single(int m, int n, const double *a, double *q, double *r)
{
    double *w = malloc(sizeof(double) * (size_t)m * n); /* becomes R */
    double *f = malloc(sizeof(double) * (size_t)m * m); /* full Q */
    double *v = malloc(sizeof(double) * (size_t)m);     /* reflector */
    double *s = malloc(sizeof(double) * (size_t)n);     /* v^T W */
    int i, j, k, l;

    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++)
            w[i + (size_t)j * m] = a[i + (size_t)j * m];

    for (i = 0; i < m; i++)
        for (j = 0; j < m; j++)
            f[i + (size_t)j * m] = (i == j) ? 1.0 : 0.0;

    for (k = 0; k < n; k++) {
        double norm2 = 0.0, norm, alpha, vv, beta;

        for (i = k; i < m; i++)
            norm2 += w[i + (size_t)k * m] * w[i + (size_t)k * m];
        norm = sqrt(norm2);
        /* pick the sign that avoids cancellation in v[k] */
        alpha = (w[k + (size_t)k * m] >= 0.0) ? -norm : norm;

        for (i = 0; i < m; i++)
            v[i] = (i < k) ? 0.0 : w[i + (size_t)k * m];
        v[k] -= alpha;

        vv = 0.0;
        for (i = 0; i < m; i++)
            vv += v[i] * v[i];
        if (vv == 0.0)
            continue; /* column is already zero: nothing to reflect */
        beta = 2.0 / vv;

        /* W := (I - beta v v^T) W, over all rows and columns */
        for (j = 0; j < n; j++)
            s[j] = 0.0;
        for (i = 0; i < m; i++)
            for (j = 0; j < n; j++)
                s[j] += v[i] * w[i + (size_t)j * m];
        for (i = 0; i < m; i++)
            for (j = 0; j < n; j++)
                w[i + (size_t)j * m] -= beta * v[i] * s[j];

        /* F := F (I - beta v v^T), one row of F at a time */
        for (i = 0; i < m; i++) {
            double t = 0.0;
            for (l = 0; l < m; l++)
                t += f[i + (size_t)l * m] * v[l];
            for (l = 0; l < m; l++)
                f[i + (size_t)l * m] -= beta * t * v[l];
        }
    }

    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            r[i + (size_t)j * n] = (i <= j) ? w[i + (size_t)j * m] : 0.0;
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++)
            q[i + (size_t)j * m] = f[i + (size_t)j * m];

    free(s);
    free(v);
    free(f);
    free(w);
}

void qrbench_baseline_qr(int batch, int m, int n, const double *A, double *Q, double *R)
{
    int p;
    for (p = 0; p < batch; p++)
        qr_single(m, n,
                  A + (size_t)p * m * n,
                  Q + (size_t)p * m * n,
                  R + (size_t)p * n * n);
}
