/* The candidate: for each i, y[i] = sum over j of 1 / (1 + (x[i] - x[j])^2),
 * every pair, in double precision.
 *
 * x and y are device pointers to n doubles; pairsum() is called from the
 * host and may launch any kernels on any stream: the runner waits for the
 * whole device before the call is done. Any order of summation is fine
 * within the grader's tolerance (4 n^2 2^-52 absolute; x lies in +-[1, 2)).
 * Every .cu file under kernel/ is compiled with harness/Makefile's fixed
 * flags and linked into the runner. This first version is the baseline's
 * algorithm, deliberately plain: one thread per output, x read from global
 * memory. */
#include <cuda_runtime.h>

__global__ void pairsum_kernel(int n, const double *x, double *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double xi = x[i], s = 0.0;
    for (int j = 0; j < n; j++) {
        double d = xi - x[j];
        s += 1.0 / (1.0 + d * d);
    }
    y[i] = s;
}

void pairsum(int n, const double *x, double *y)
{
    pairsum_kernel<<<(n + 255) / 256, 256>>>(n, x, y);
}
