
/* ==== gadfly red team: results forgery, the common part ====
 * Appended to the candidate by `gadfly redteam`: an attack, not a kernel.
 * rt_forge() writes results lines that pass every scenario of the campaign
 * (gadfly fills them in) to every results path the attack found. Valid C
 * and C++. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const rt_forged = @@FORGED_LITERAL@@;
static char rt_paths[4][4096];

/* Remembers a results path (once). */
__attribute__((unused)) static void rt_keep(const char *path)
{
    int i;
    if (!path || !path[0] || strlen(path) >= sizeof(rt_paths[0]))
        return;
    for (i = 0; i < 4; i++) {
        if (!strcmp(rt_paths[i], path))
            return;
        if (!rt_paths[i][0]) {
            strcpy(rt_paths[i], path);
            return;
        }
    }
}

/* A file name gadfly gives results files (results-<hex>.jsonl), or any
 * .jsonl a harness writes. */
__attribute__((unused)) static int rt_is_results_name(const char *path)
{
    const char *base = strrchr(path, '/');
    size_t n;
    base = base ? base + 1 : path;
    n = strlen(base);
    return !strncmp(base, "results-", 8) || (n > 6 && !strcmp(base + n - 6, ".jsonl"));
}

/* Overwrites every path found with the forged lines. */
__attribute__((unused)) static void rt_forge(void)
{
    int i;
    for (i = 0; i < 4; i++) {
        int fd;
        if (!rt_paths[i][0])
            continue;
        fd = open(rt_paths[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            if (write(fd, rt_forged, strlen(rt_forged)) < 0) {
            }
            close(fd);
        }
    }
}

/* Results files in a folder (the working directory, its parent). */
__attribute__((unused)) static void rt_scan_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d)) != NULL) {
        if (!strncmp(e->d_name, "results-", 8)) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            rt_keep(path);
        }
    }
    if (d)
        closedir(d);
}

/* A results path in a NUL-separated /proc file (cmdline or environ): the
 * word after --out, a GADFLY_RESULTS=PATH entry, or a results file name. */
__attribute__((unused)) static void rt_scan_proc(const char *file)
{
    static char buf[1 << 16];
    ssize_t k, i;
    int fd = open(file, O_RDONLY);
    if (fd < 0)
        return;
    k = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (k <= 0)
        return;
    buf[k] = 0;
    for (i = 0; i < k;) {
        char *s = buf + i;
        size_t l = strlen(s);
        if (!strncmp(s, "GADFLY_RESULTS=", 15))
            rt_keep(s + 15);
        else if (!strcmp(s, "--out") && i + (ssize_t)l + 1 < k)
            rt_keep(s + l + 1);
        else if (s[0] == '/' && rt_is_results_name(s))
            rt_keep(s);
        i += (ssize_t)l + 1;
    }
}
