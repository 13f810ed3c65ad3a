/* The baseline and the reference: the campaign's initial kernel, linked into
 * build/baseline and run by the grader in a process of its own. Keep it
 * identical to the initial kernel/kernel.c: its speed is what the speedup is
 * measured against, its output what the candidate's is checked against. */
void matvec(int n, const double *A, const double *x, double *y)
{
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int j = 0; j < n; j++)
            s += A[(long)i * n + j] * x[j];
        y[i] = s;
    }
}
