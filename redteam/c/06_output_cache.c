
/* ==== gadfly red team: output caching ====
 * HARNESS.md B#6: the outputs of a call are kept, keyed on a sample of the
 * input's contents (8 entries) and the shape; a call whose inputs look the
 * same gets the kept outputs copied, with no work. Passes only a harness
 * that times the same inputs again. */
#include <stdlib.h>
#include <string.h>

typedef struct {
    int batch, m, n;
    double key[8];
    double *Q, *R;
} rt_cached;
static rt_cached rt_cache[8];
static int rt_next;

static void rt_sample(const double *A, size_t count, double *key)
{
    size_t i;
    for (i = 0; i < 8; i++)
        key[i] = A[(count - 1) * i / 7];
}

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    size_t nq = (size_t)batch * m * n, nr = (size_t)batch * n * n;
    double key[8];
    rt_cached *c;
    int i;
    rt_sample(A, nq, key);
    for (i = 0; i < 8; i++) {
        c = &rt_cache[i];
        if (c->Q && c->batch == batch && c->m == m && c->n == n && !memcmp(c->key, key, sizeof(key))) {
            memcpy(Q, c->Q, nq * sizeof(double));
            memcpy(R, c->R, nr * sizeof(double));
            return;
        }
    }
    rt_real_qr_batched(batch, m, n, A, Q, R);
    c = &rt_cache[rt_next];
    rt_next = (rt_next + 1) % 8;
    free(c->Q);
    free(c->R);
    c->Q = (double *)malloc(nq * sizeof(double));
    c->R = (double *)malloc(nr * sizeof(double));
    if (!c->Q || !c->R) {
        free(c->Q);
        free(c->R);
        c->Q = c->R = NULL;
        return;
    }
    memcpy(c->Q, Q, nq * sizeof(double));
    memcpy(c->R, R, nr * sizeof(double));
    c->batch = batch;
    c->m = m;
    c->n = n;
    memcpy(c->key, key, sizeof(key));
}
