/* The candidate: y = A x, a dense matrix-vector product in double precision.
 *
 * A is n x n, row-major (A[i*n + j]), x and y have n entries; y is written,
 * nothing else. Any order of summation is fine within the grader's tolerance
 * (4 n^2 2^-52 absolute; A and x lie in +-[1, 2)). This file (and anything
 * else under kernel/) is compiled with harness/Makefile's fixed flags and
 * linked into the runner. This first version is the baseline's algorithm,
 * deliberately plain. */
void matvec(int n, const double *A, const double *x, double *y)
{
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int j = 0; j < n; j++)
            s += A[(long)i * n + j] * x[j];
        y[i] = s;
    }
}
