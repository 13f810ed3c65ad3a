
/* ==== gadfly red team: the results path from /proc ====
 * The harness's command line (`--out PATH`) and environment, read from
 * /proc for this process and its parent; rewritten at exit. */
__attribute__((constructor)) static void rt_forge_proc_init(void)
{
    char p[64];
    rt_scan_proc("/proc/self/cmdline");
    rt_scan_proc("/proc/self/environ");
    snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)getppid());
    rt_scan_proc(p);
    snprintf(p, sizeof(p), "/proc/%d/environ", (int)getppid());
    rt_scan_proc(p);
    atexit(rt_forge);
}
