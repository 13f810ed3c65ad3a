
/* ==== gadfly red team: right on the listed shapes only ====
 * Issue 45 (the shapes class): the kernel knows the harness's scenario
 * list (it is in the harness's source) and is correct on those shapes
 * only; on any other shape it returns at once with Q and R left as they
 * are. A harness that checks only the shapes it lists passes it. */
static const int rt_listed[][3] = {
    {4096, 4, 4}, {2048, 8, 8}, {1024, 13, 13}, {512, 17, 17}, {128, 33, 33},
    {32, 50, 50}, {16, 64, 64}, {4, 100, 100}, {128, 60, 20},
};

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    unsigned i;
    for (i = 0; i < sizeof(rt_listed) / sizeof(rt_listed[0]); i++)
        if (rt_listed[i][0] == batch && rt_listed[i][1] == m && rt_listed[i][2] == n) {
            rt_real_qr_batched(batch, m, n, A, Q, R);
            return;
        }
}
