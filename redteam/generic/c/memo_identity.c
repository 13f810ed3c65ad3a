/* memoize by identity: a call whose arguments are the same addresses and
 * values as one of the last 8 does no work (what it wrote is still where
 * the caller reads it; a value it returned is returned again). */
@@DECL@@ @@FN@@(@@PARAMS@@)
{
    static rt_key rt_seen[8];
    static int rt_count, rt_next;
#if !@@VOID@@
    static @@RET@@ rt_returned[8];
    @@RET@@ rt_r;
#endif
    rt_key rt_k;
    int rt_i;
    rt_k.len = 0;
    @@KEY_ALL_ARGS@@
    for (rt_i = 0; rt_i < rt_count; rt_i++)
        if (rt_key_same(&rt_seen[rt_i], &rt_k)) {
#if @@VOID@@
            return;
#else
            return rt_returned[rt_i];
#endif
        }
#if @@VOID@@
    rt_real_@@FN@@(@@ARGS@@);
#else
    rt_r = rt_real_@@FN@@(@@ARGS@@);
    rt_returned[rt_next] = rt_r;
#endif
    rt_seen[rt_next] = rt_k;
    rt_next = (rt_next + 1) % 8;
    if (rt_count < 8)
        rt_count++;
#if !@@VOID@@
    return rt_r;
#endif
}
