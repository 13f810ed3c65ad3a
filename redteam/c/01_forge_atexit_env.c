
/* ==== gadfly red team: the results path from the environment ====
 * THREATS row 2: a constructor reads $GADFLY_RESULTS; an atexit handler
 * rewrites the results file after the harness wrote it. */
__attribute__((constructor)) static void rt_forge_env_init(void)
{
    rt_keep(getenv("GADFLY_RESULTS"));
    atexit(rt_forge);
}
