/* The baseline and the reference: the campaign's initial kernel, linked into
 * build/baseline and run by the grader in a process of its own. Keep it
 * identical to the initial kernel/kernel.cu: its speed is what the speedup
 * is measured against, its output what the candidate's is checked against. */
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
