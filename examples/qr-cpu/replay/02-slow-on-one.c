/*
 * Replay version 2 of 3 for the qr-cpu demo: correct everywhere and much
 * faster on square matrices, but SLOWER than the initial kernel on the one
 * tall scenario (b128_m60_n20).
 *
 * DELIBERATE DEMO FLAW: square inputs take the fast in-place path (the same
 * as replay version 3), but tall inputs (m > n) are padded to m x m with the
 * trailing columns of the identity and sent through a leftover unoptimised
 * routine that factors all m columns and builds the full m x m Q.  The extra
 * columns do not change the first n columns of Q or the leading n x n block
 * of R, so the answer is right, but for 60 x 20 the work grows several times
 * over: this version is clearly slower than the baseline on that scenario
 * while it wins everywhere else.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- leftover slow routine: square matrices only, full Q ---- */
static void slow_square_qr(int m, double *w, double *f, double *v, double *s)
{
    int i, j, k, l;

    for (i = 0; i < m; i++)
        for (j = 0; j < m; j++)
            f[i + (size_t)j * m] = (i == j) ? 1.0 : 0.0;
    for (k = 0; k < m; k++) {
        double norm2 = 0.0, norm, alpha, vv, beta;
        for (i = k; i < m; i++)
            norm2 += w[i + (size_t)k * m] * w[i + (size_t)k * m];
        norm = sqrt(norm2);
        alpha = (w[k + (size_t)k * m] >= 0.0) ? -norm : norm;
        for (i = 0; i < m; i++)
            v[i] = (i < k) ? 0.0 : w[i + (size_t)k * m];
        v[k] -= alpha;
        vv = 0.0;
        for (i = 0; i < m; i++)
            vv += v[i] * v[i];
        if (vv == 0.0)
            continue;
        beta = 2.0 / vv;
        for (j = 0; j < m; j++)
            s[j] = 0.0;
        for (i = 0; i < m; i++)
            for (j = 0; j < m; j++)
                s[j] += v[i] * w[i + (size_t)j * m];
        for (i = 0; i < m; i++)
            for (j = 0; j < m; j++)
                w[i + (size_t)j * m] -= beta * v[i] * s[j];
        for (i = 0; i < m; i++) {
            double t = 0.0;
            for (l = 0; l < m; l++)
                t += f[i + (size_t)l * m] * v[l];
            for (l = 0; l < m; l++)
                f[i + (size_t)l * m] -= beta * t * v[l];
        }
    }
}

static void tall_padded(int batch, int m, int n, const double *A, double *Q, double *R)
{
    double *w = malloc(sizeof(double) * (size_t)m * m);
    double *f = malloc(sizeof(double) * (size_t)m * m);
    double *v = malloc(sizeof(double) * (size_t)m);
    double *s = malloc(sizeof(double) * (size_t)m);
    int p, i, j;

    for (p = 0; p < batch; p++) {
        const double *a = A + (size_t)p * m * n;
        double *q = Q + (size_t)p * m * n;
        double *r = R + (size_t)p * n * n;

        memcpy(w, a, sizeof(double) * (size_t)m * n);
        /* pad with the trailing columns of the identity */
        for (j = n; j < m; j++)
            for (i = 0; i < m; i++)
                w[i + (size_t)j * m] = (i == j) ? 1.0 : 0.0;
        slow_square_qr(m, w, f, v, s);
        for (j = 0; j < n; j++)
            for (i = 0; i < n; i++)
                r[i + (size_t)j * n] = (i <= j) ? w[i + (size_t)j * m] : 0.0;
        memcpy(q, f, sizeof(double) * (size_t)m * n);
    }
    free(s);
    free(v);
    free(f);
    free(w);
}

/* ---- fast path (identical to replay version 3) ---- */
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
    if (m > n) {
        tall_padded(batch, m, n, A, Q, R); /* the deliberate slow path */
        return;
    }
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
