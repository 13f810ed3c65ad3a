
/* ==== gadfly red team: a library mapped under a runtime library's name ====
 * Issue 45 (the library class): a check that lets the candidate's process
 * map "the C runtime" by file name (anything whose name starts with
 * `libm.so`) is fooled by a copy of any library under such a name. The
 * constructor copies the math library it was linked with (standing in for
 * a banned one) to /tmp as `libm.so.6-rt` and keeps it mapped. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void *rt_copy;

__attribute__((constructor)) static void rt_map_copy(void)
{
    Dl_info info;
    char cmd[1024];
    double (*volatile f)(double) = cos;
    if (!dladdr((void *)f, &info) || !info.dli_fname)
        return;
    snprintf(cmd, sizeof(cmd), "cp '%s' /tmp/libm.so.6-rt 2>/dev/null", info.dli_fname);
    if (system(cmd) != 0)
        return;
    rt_copy = dlopen("/tmp/libm.so.6-rt", RTLD_NOW | RTLD_LOCAL);
}
