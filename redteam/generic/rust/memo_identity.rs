// memoize by identity: a call whose arguments are the same addresses and
// values as an earlier one does no work (what it wrote is still where the
// caller reads it; a value it returned is returned again).
@@ATTRS@@
#[allow(unused_mut, clippy::all)]
@@DECL@@ @@FN@@(@@PARAMS@@) -> @@RET@@ {
    static RT_SEEN: ::std::sync::Mutex<Vec<(Vec<u8>, @@RET@@)>> = ::std::sync::Mutex::new(Vec::new());
    let mut rt_k: Vec<u8> = Vec::new();
    @@KEY_ALL_ARGS@@
    if let Some((_, r)) = RT_SEEN.lock().unwrap().iter().find(|(k, _)| *k == rt_k) {
        return r.clone();
    }
    let rt_r = rt_real_@@FN@@(@@ARGS@@);
    RT_SEEN.lock().unwrap().push((rt_k, rt_r.clone()));
    rt_r
}
