
/* ==== gadfly red team: writing nothing (stale outputs) ====
 * HARNESS.md B#7: the first call of each shape does the work; every later
 * call returns at once, leaving whatever the output buffers hold (the last
 * call's answer, if the harness reuses them unpoisoned). */
static int rt_seen[8][3];

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    int i;
    for (i = 0; i < 8; i++) {
        if (rt_seen[i][0] == batch && rt_seen[i][1] == m && rt_seen[i][2] == n)
            return;
    }
    rt_real_qr_batched(batch, m, n, A, Q, R);
    for (i = 0; i < 8; i++) {
        if (!rt_seen[i][0]) {
            rt_seen[i][0] = batch;
            rt_seen[i][1] = m;
            rt_seen[i][2] = n;
            break;
        }
    }
}
