
/* ==== gadfly red team: constant output ====
 * HARNESS.md B#12: no work at all; Q is the identity's first columns and
 * R is zero, whatever the input. */
#include <string.h>

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    size_t nq = (size_t)batch * m * n, nr = (size_t)batch * n * n;
    int b, j;
    (void)A;
    memset(Q, 0, nq * sizeof(double));
    memset(R, 0, nr * sizeof(double));
    for (b = 0; b < batch; b++)
        for (j = 0; j < n && j < m; j++)
            Q[(size_t)b * m * n + (size_t)j * m + j] = 1.0;
    if (0)
        rt_real_qr_batched(batch, m, n, A, Q, R);
}
