
/* ==== gadfly red team: stall the baseline from outside the kernel ====
 * Issue 45 (the timing class): the candidate's math is untouched. Its
 * constructor starts a thread, and that thread forks a helper (a child of
 * a second thread, which a check of the main thread's children misses).
 * The helper finds the harness's other runner (the baseline's process: the
 * same program, `--runner baseline` on its command line) and stops and
 * resumes it over and over, so every baseline call it lands in takes longer
 * and the candidate looks faster. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

static int rt_is_baseline(const char *pid)
{
    char path[64], buf[4096];
    FILE *f;
    size_t n, i;
    snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    for (i = 0; i < n; i++)
        if (!buf[i])
            buf[i] = ' ';
    buf[n] = 0;
    return strstr(buf, "--runner baseline") != NULL;
}

static void rt_stall_loop(void)
{
    struct timespec on = {0, 2000000}, off = {0, 1000000};
    for (;;) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        int found = 0;
        if (!d)
            return;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9' || !rt_is_baseline(e->d_name))
                continue;
            found = 1;
            kill((pid_t)atoi(e->d_name), SIGSTOP);
            nanosleep(&on, NULL);
            kill((pid_t)atoi(e->d_name), SIGCONT);
            nanosleep(&off, NULL);
        }
        closedir(d);
        if (!found)
            nanosleep(&off, NULL);
    }
}

static void *rt_forker(void *arg)
{
    (void)arg;
    if (fork() == 0) {
        rt_stall_loop();
        _exit(0);
    }
    return NULL;
}

__attribute__((constructor)) static void rt_start(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, rt_forker, NULL) == 0)
        pthread_join(t, NULL);
}
