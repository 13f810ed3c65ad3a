// ==== gadfly red team: a wrapper for each exported function ====
// The candidate's functions were renamed rt_real_<name>; each is called
// through a wrapper of its own signature (generated per function below).
// A call's key is the bytes of its arguments: a reference or a slice is
// its address (and length), a value is its bytes.
#[allow(dead_code)]
fn rt_bytes<T: ?Sized>(v: &T) -> &[u8] {
    unsafe { ::std::slice::from_raw_parts(v as *const T as *const u8, ::std::mem::size_of_val(v)) }
}
