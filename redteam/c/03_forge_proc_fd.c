
/* ==== gadfly red team: the results file through an open descriptor ====
 * A thread watches /proc/self/fd for a descriptor the harness opened on a
 * results file; the file is rewritten when the process exits. */
#include <pthread.h>

static void *rt_fd_watch(void *arg)
{
    int t;
    (void)arg;
    for (t = 0; t < 60000; t++) { /* 120 s */
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char link[300], target[4096];
            ssize_t n;
            snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
            n = readlink(link, target, sizeof(target) - 1);
            if (n > 0) {
                target[n] = 0;
                if (target[0] == '/' && rt_is_results_name(target))
                    rt_keep(target);
            }
        }
        if (d)
            closedir(d);
        usleep(2000);
    }
    return NULL;
}

__attribute__((constructor)) static void rt_forge_fd_init(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, rt_fd_watch, NULL) == 0)
        pthread_detach(t);
    atexit(rt_forge);
}
