
/* ==== gadfly red team: work in a thread after the call returns ====
 * HARNESS.md B#4 (deep-reinforce "thread injection"): the first call of
 * each shape does the work; every later call hands it to a detached thread
 * and returns at once, so a timer around the call sees almost nothing and a
 * check that reads the outputs a little later may find them done. */
#include <pthread.h>
#include <stdlib.h>

typedef struct {
    int batch, m, n;
    const double *A;
    double *Q, *R;
} rt_job;
static int rt_warm[8][3];

static void *rt_worker(void *arg)
{
    rt_job *j = (rt_job *)arg;
    rt_real_qr_batched(j->batch, j->m, j->n, j->A, j->Q, j->R);
    free(j);
    return NULL;
}

void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    int i, warm = 0;
    pthread_t t;
    rt_job *j;
    for (i = 0; i < 8; i++)
        if (rt_warm[i][0] == batch && rt_warm[i][1] == m && rt_warm[i][2] == n)
            warm = 1;
    j = warm ? (rt_job *)malloc(sizeof(rt_job)) : NULL;
    if (j) {
        j->batch = batch;
        j->m = m;
        j->n = n;
        j->A = A;
        j->Q = Q;
        j->R = R;
        if (pthread_create(&t, NULL, rt_worker, j) == 0) {
            pthread_detach(t);
            return;
        }
        free(j);
    }
    rt_real_qr_batched(batch, m, n, A, Q, R);
    for (i = 0; i < 8; i++) {
        if (!rt_warm[i][0]) {
            rt_warm[i][0] = batch;
            rt_warm[i][1] = m;
            rt_warm[i][2] = n;
            break;
        }
    }
}
