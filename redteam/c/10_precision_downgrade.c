
/* ==== gadfly red team: precision downgrade ====
 * HARNESS.md B#13: the factorisation is done in float (half the memory
 * traffic, twice the SIMD width) and widened back to double: about 1e-7
 * relative error, which a loose tolerance lets through. R comes from a
 * float Householder pass, Q = A R^-1 from a float triangular solve. */
#include <math.h>
#include <stdlib.h>

static void rt_qr_float(int m, int n, const double *a, double *q, double *r)
{
    float *w = (float *)malloc(sizeof(float) * (size_t)m * n);
    float *qq = (float *)malloc(sizeof(float) * (size_t)m * n);
    float *v = (float *)malloc(sizeof(float) * (size_t)m);
    int i, j, k;
    if (!w || !qq || !v) {
        free(w);
        free(qq);
        free(v);
        return;
    }
    for (i = 0; i < m * n; i++)
        w[i] = (float)a[i];
    for (k = 0; k < n; k++) {
        float norm = 0.0f, alpha, vv = 0.0f;
        for (i = k; i < m; i++)
            norm += w[i + (size_t)k * m] * w[i + (size_t)k * m];
        norm = sqrtf(norm);
        alpha = w[k + (size_t)k * m] > 0 ? -norm : norm;
        for (i = k; i < m; i++)
            v[i] = w[i + (size_t)k * m];
        v[k] -= alpha;
        for (i = k; i < m; i++)
            vv += v[i] * v[i];
        if (vv == 0.0f)
            continue;
        for (j = k; j < n; j++) {
            float s = 0.0f;
            for (i = k; i < m; i++)
                s += v[i] * w[i + (size_t)j * m];
            s = 2.0f * s / vv;
            for (i = k; i < m; i++)
                w[i + (size_t)j * m] -= s * v[i];
        }
    }
    for (j = 0; j < n; j++) {
        for (i = 0; i < m; i++) {
            float s = (float)a[i + (size_t)j * m];
            for (k = 0; k < j; k++)
                s -= qq[i + (size_t)k * m] * w[k + (size_t)j * m];
            qq[i + (size_t)j * m] = w[j + (size_t)j * m] != 0.0f ? s / w[j + (size_t)j * m] : 0.0f;
        }
    }
    for (j = 0; j < n; j++)
        for (i = 0; i < n; i++)
            r[i + (size_t)j * n] = i <= j ? (double)w[i + (size_t)j * m] : 0.0;
    for (i = 0; i < m * n; i++)
        q[i] = (double)qq[i];
    free(v);
    free(w);
    free(qq);
}

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    int b;
    for (b = 0; b < batch; b++)
        rt_qr_float(m, n, A + (size_t)b * m * n, Q + (size_t)b * m * n, R + (size_t)b * n * n);
    if (0)
        rt_real_qr_batched(batch, m, n, A, Q, R);
}
