//! Embedded folders (include_dir!) are rebuilt into the binary when a file
//! in them is added, removed or changed.
//!
//! On Linux x86-64 the `gadfly` binary is linked as a fixed-address
//! executable (-no-pie): agents start it at every hook, and a
//! position-independent one spent about a third of its start relocating
//! some 32,000 pointers (and faulting in the pages that hold them). See
//! BENCHMARKS.md, "Hook round trip".
fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target == "x86_64-unknown-linux-gnu" && std::env::var_os("GADFLY_PIE").is_none() {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-env-changed=GADFLY_PIE");
    for dir in
        ["web", "question_bank", "examples/qr-cpu", "harness/cpu", "migrations", "redteam", "harness/cuda/exploits"]
    {
        println!("cargo:rerun-if-changed={dir}");
    }
}
