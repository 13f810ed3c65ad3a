//! The attacks written once per language (`redteam/generic/`): each one,
//! planned against a real candidate file, is compiled (or run) with the
//! real toolchain and driven by a small program that checks it does what
//! its manifest says: skips a call it has seen, replays the previous
//! output, skips a timed repetition. An attack that silently did nothing
//! would make every harness look sound.

use std::path::Path;
use std::process::Command;

use super::*;

fn attack(name: &str) -> &'static Attack {
    battery().unwrap().attacks.iter().find(|a| a.manifest.name == name).unwrap_or_else(|| panic!("no attack {name}"))
}

fn spec() -> CampaignSpec {
    let dir = tempfile::tempdir().unwrap();
    Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap();
    let text =
        "name='t'\nworkspace='.'\n[harness]\nrun='true {results}'\nscenarios=['a']\n[predicate]\nmin_speedup=1.1\n";
    crate::campaign::parse(text, "t.toml", dir.path()).unwrap()
}

/// The candidate file as the attack leaves it.
fn applied(name: &str, path: &str, text: &str) -> String {
    let spec = spec();
    let files = vec![CandidateFile { path: path.into(), text: text.into() }];
    let host = HostFacts::default();
    let ctx = Context { spec: &spec, files: &files, host: &host };
    let plan = plan(attack(name), &ctx).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(plan.writes.len(), 1, "{name}");
    assert_eq!(plan.writes[0].path, path);
    String::from_utf8(plan.writes[0].content.clone()).unwrap()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// A C candidate with the qr-cpu example's entry point (and a second
/// exported function returning a value), and a driver that reports what
/// each call wrote.
const KERNEL_C: &str = r#"#include <stddef.h>
static double twice(double x) { return 2 * x; }
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    size_t i;
    for (i = 0; i < (size_t)batch * m * n; i++) Q[i] = twice(A[i]);
    for (i = 0; i < (size_t)batch * n * n; i++) R[i] = A[0];
}
double total(const double *x, int n)
{
    double s = 0; int i;
    for (i = 0; i < n; i++) s += x[i];
    return s;
}
"#;

const DRIVER_C: &str = r#"#include <stdio.h>
#include <string.h>
#include <unistd.h>
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R);
double total(const double *x, int n);
int main(void)
{
    double A[4] = {1, 2, 3, 4}, B[4] = {5, 6, 7, 8}, Q[4], R[1];
    qr_batched(1, 4, 1, A, Q, R);
    memset(Q, 0, sizeof Q);
    qr_batched(1, 4, 1, A, Q, R);         /* the same call again */
    printf("same %g\n", Q[3]);
    usleep(100000);
    memset(Q, 0, sizeof Q);
    qr_batched(1, 4, 1, B, Q, R);         /* new inputs, same shape */
    printf("new %g\n", Q[3]);
    A[0] = 100;
    printf("total %g %g\n", total(A, 4), total(A, 4));
    return 0;
}
"#;

fn c_outputs(name: &str, compiler: &str, lang: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = if lang == "c++" { "kernel/qr.cpp" } else { "kernel/qr.c" };
    let text = applied(name, file, KERNEL_C);
    assert!(text.contains("#define qr_batched rt_real_qr_batched") && text.contains("#define total rt_real_total"));
    assert!(!text.contains("rt_real_twice"), "a static function is not wrapped");
    let k = dir.path().join("k.src");
    std::fs::write(&k, &text).unwrap();
    std::fs::write(dir.path().join("d.c"), DRIVER_C).unwrap();
    let exe = dir.path().join("a.out");
    // The kernel as its language, the driver as C (the C++ kernel is
    // compiled alone, for its syntax: its names are mangled).
    if lang == "c++" {
        run(Command::new(compiler)
            .args(["-x", "c++", "-std=c++17", "-Wall", "-Werror", "-c", "-o"])
            .arg(dir.path().join("k.o"))
            .arg(&k));
        return String::new();
    }
    run(Command::new(compiler)
        .args(["-x", "c", "-O2", "-Wall", "-Werror", "-Wno-unused-function"])
        .arg(&k)
        .args(["-x", "c"])
        .arg(dir.path().join("d.c"))
        .arg("-o")
        .arg(&exe));
    run(&mut Command::new(&exe))
}

#[test]
fn the_c_wrappers_build_and_do_what_they_say() {
    // Unwrapped, every call works: the reference for what follows.
    let plain = {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k.c"), KERNEL_C).unwrap();
        std::fs::write(dir.path().join("d.c"), DRIVER_C).unwrap();
        run(Command::new("cc").current_dir(dir.path()).args(["k.c", "d.c", "-o", "a.out"]));
        run(&mut Command::new(dir.path().join("a.out")))
    };
    assert_eq!(plain, "same 8\nnew 16\ntotal 109 109\n");
    // The same call again does no work; new inputs do.
    assert_eq!(c_outputs("c-memo-identity", "cc", "c"), "same 0\nnew 16\ntotal 109 109\n");
    // After the first call of a shape, nothing is computed.
    assert_eq!(c_outputs("c-previous-output", "cc", "c"), "same 0\nnew 0\ntotal 109 109\n");
    // Back to back: skipped; after a pause: real.
    assert_eq!(c_outputs("c-timing-loop", "cc", "c"), "same 0\nnew 16\ntotal 109 109\n");
    for name in ["c-memo-identity", "c-previous-output", "c-timing-loop"] {
        c_outputs(name, "c++", "c++");
    }
}

#[test]
fn the_c_wrappers_keep_cuda_and_cpp_linkage_and_skip_kernels() {
    let cu = "#include <cuda_runtime.h>\n__global__ void k(float *y, int n) { y[0] = n; }\nextern \"C\" void launch(const float *x, float *y, int n)\n{\n    k<<<1, 1>>>(y, n);\n}\n";
    let text = applied("c-memo-identity", "kernel/attention.cu", cu);
    assert!(text.contains("#define launch rt_real_launch"), "{text}");
    assert!(!text.contains("#define k "), "a __global__ kernel is launched, not called: never wrapped\n{text}");
    assert!(text.contains("extern \"C\" void launch(const float *x, float *y, int n)\n{"), "{text}");
    // A file with nothing to stand in for says so.
    let spec = spec();
    let files = vec![CandidateFile { path: "k.c".into(), text: "static int f(int x) { return x; }\n".into() }];
    let host = HostFacts::default();
    let ctx = Context { spec: &spec, files: &files, host: &host };
    let why = plan(attack("c-memo-identity"), &ctx).unwrap_err();
    assert!(why.contains("no function of k.c"), "{why}");
}

const KERNEL_RS: &str = r#"/// y = 2x.
#[no_mangle]
pub extern "C" fn scale(x: *const f64, y: *mut f64, n: usize) {
    for i in 0..n {
        unsafe { *y.add(i) = 2.0 * *x.add(i) };
    }
}

pub fn total(xs: &[f64], mut acc: f64) -> f64 {
    for x in xs {
        acc += x;
    }
    acc
}

fn main() {
    let a = [1.0, 2.0, 3.0, 4.0];
    let b = [5.0, 6.0, 7.0, 8.0];
    let mut y = [0.0; 4];
    scale(a.as_ptr(), y.as_mut_ptr(), 4);
    y = [0.0; 4];
    scale(a.as_ptr(), y.as_mut_ptr(), 4);
    println!("same {}", y[3]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    y = [0.0; 4];
    scale(b.as_ptr(), y.as_mut_ptr(), 4);
    println!("new {}", y[3]);
    let mut v = vec![1.0, 2.0];
    let first = total(&v, 0.0);
    v[0] = 10.0;
    println!("total {} {}", first, total(&v, 0.0));
}
"#;

fn rust_outputs(name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let text = if name.is_empty() { KERNEL_RS.to_string() } else { applied(name, "src/main.rs", KERNEL_RS) };
    let src = dir.path().join("main.rs");
    std::fs::write(&src, &text).unwrap();
    let exe = dir.path().join("main");
    run(Command::new("rustc").args(["--edition", "2021", "-O", "-D", "warnings", "-o"]).arg(&exe).arg(&src));
    run(&mut Command::new(&exe))
}

#[test]
fn the_rust_wrappers_build_and_do_what_they_say() {
    assert_eq!(rust_outputs(""), "same 8\nnew 16\ntotal 3 12\n");
    // `total(&v)` twice on the same vector (same address, same length)
    // with new contents: identity sees the same call.
    assert_eq!(rust_outputs("rust-memo-identity"), "same 0\nnew 16\ntotal 3 3\n");
    assert_eq!(rust_outputs("rust-previous-output"), "same 0\nnew 0\ntotal 3 3\n");
    assert_eq!(rust_outputs("rust-timing-loop"), "same 0\nnew 16\ntotal 3 3\n");
    let text = applied("rust-memo-identity", "src/main.rs", KERNEL_RS);
    assert!(text.contains("pub extern \"C\" fn rt_real_scale("), "renamed in place");
    assert!(text.contains("#[no_mangle]\n#[allow(unused_mut, clippy::all)]\npub extern \"C\" fn scale("), "{text}");
    assert!(!text.contains("rt_real_main"), "main is the program, not an entry");
}

/// A Python candidate, and a driver that calls it as an in-process
/// harness would: the same list twice, a copy of it, new contents.
const KERNEL_PY: &str =
    "def work(xs, out=None):\n    r = [2 * x for x in xs]\n    if out is not None:\n        out[:] = r\n    return r\n";

const DRIVER_PY: &str = r#"import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("kern", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
xs = [1.0, 2.0, 3.0]
out = [0.0] * 3
m.work(xs, out)
out[:] = [0.0] * 3
print("same", m.work(xs, out)[2], out[2])
print("copy", m.work(list(xs), [0.0] * 3)[2])
time.sleep(0.1)
print("new", m.work([4.0, 5.0, 6.0], [0.0] * 3)[2])
"#;

fn python_outputs(name: &str, tmp: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let text = if name.is_empty() { KERNEL_PY.to_string() } else { applied(name, "kernel/kern.py", KERNEL_PY) };
    std::fs::write(dir.path().join("kern.py"), &text).unwrap();
    std::fs::write(dir.path().join("driver.py"), DRIVER_PY).unwrap();
    run(Command::new("python3")
        .arg(dir.path().join("driver.py"))
        .arg(dir.path().join("kern.py"))
        .env("TMPDIR", tmp)
        .env("HOME", tmp))
}

#[test]
fn the_python_wrappers_do_what_they_say() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(python_outputs("", tmp.path()), "same 6.0 6.0\ncopy 6.0\nnew 12.0\n");
    // The same objects again: the earlier output, written back.
    assert_eq!(python_outputs("py-memo-identity", tmp.path()), "same 6.0 6.0\ncopy 6.0\nnew 12.0\n");
    assert_eq!(python_outputs("py-memo-content", tmp.path()), "same 6.0 6.0\ncopy 6.0\nnew 12.0\n");
    // Every call of shape (list of 3) after the first: the first's output.
    assert_eq!(python_outputs("py-previous-output", tmp.path()), "same 6.0 6.0\ncopy 6.0\nnew 6.0\n");
    assert_eq!(python_outputs("py-timing-loop", tmp.path()), "same 6.0 6.0\ncopy 6.0\nnew 12.0\n");
    assert_eq!(python_outputs("py-stall-untimed", tmp.path()), "same 6.0 6.0\ncopy 6.0\nnew 12.0\n");
    // The disk cache outlives the process: a second process finds it.
    assert_eq!(python_outputs("py-disk-cache", tmp.path()), "same 6.0 6.0\ncopy 6.0\nnew 12.0\n");
    let cache = tmp.path().join("rt-gadfly-cache");
    assert!(std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0) >= 2, "nothing cached in {}", cache.display());
    // Poison the cache: a process that finds it returns the poisoned value.
    for e in std::fs::read_dir(&cache).unwrap() {
        let p = e.unwrap().path();
        let poisoned = Command::new("python3")
            .args(["-c", "import pickle,sys; p=sys.argv[1]; o,s=pickle.load(open(p,'rb')); pickle.dump(([-1.0]*len(o), s), open(p,'wb'))"])
            .arg(&p)
            .status()
            .unwrap();
        assert!(poisoned.success());
    }
    let again = python_outputs("py-disk-cache", tmp.path());
    assert!(again.contains("new -1.0"), "the second process did not read the first's cache:\n{again}");
}
