/*
 * Initial kernel for the qr-cpu campaign: a plain, unoptimised batched
 * Householder QR.  It is correct but makes no effort to be fast:
 *
 *   - every matrix gets freshly allocated scratch buffers;
 *   - each reflector is kept as a full length-m vector and applied to
 *     every row and every column, even where it is known to be zero;
 *   - loops walk the column-major matrices row by row (strided access);
 *   - the orthogonal factor is built as a full m x m matrix by multiplying
 *     the identity by each reflector in turn, and only its first n columns
 *     are kept at the end.
 *
 * Interface (do not change):
 *   A: batch matrices, each m x n (m >= n), column-major, stored one after
 *      another with leading dimension m.  Read only.
 *   Q: batch thin factors, each m x n, column-major (leading dimension m).
 *   R: batch upper triangular factors, each n x n, column-major, with
 *      zeros below the diagonal.
 */
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

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    int p;
    for (p = 0; p < batch; p++)
        qr_single(m, n,
                  A + (size_t)p * m * n,
                  Q + (size_t)p * m * n,
                  R + (size_t)p * n * n);
}
