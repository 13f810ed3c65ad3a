
/* ==== gadfly red team: modifying the inputs ====
 * HARNESS.md B#8 (KernelBench zero_out_kernel): the input is zeroed in
 * place and zeros are returned, so a reference computed afterwards on the
 * same buffer agrees; no factorisation is done. */
#include <string.h>

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    size_t nq = (size_t)batch * m * n, nr = (size_t)batch * n * n;
    memset((void *)A, 0, nq * sizeof(double));
    memset(Q, 0, nq * sizeof(double));
    memset(R, 0, nr * sizeof(double));
    if (0)
        rt_real_qr_batched(batch, m, n, A, Q, R);
}
