//! `gadfly demo --exit` end to end: the qr-cpu example (real C harness), the
//! replay agent through the real hook, blocked twice then allowed.

mod common;

#[test]
fn the_demo_blocks_the_wrong_and_the_slow_kernel_then_allows_the_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::gadfly()
        .args(["demo", "--exit", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("[1/3] 01-wrong-tail.c: BLOCKED"), "{stdout}");
    assert!(stdout.contains("[2/3] 02-slow-on-one.c: BLOCKED"), "{stdout}");
    assert!(stdout.contains("[3/3] 03-good.c: ALLOWED"), "{stdout}");
    // The wrong kernel is blocked for correctness, the slow one for its one slow scenario.
    let second = stdout.split("[2/3]").nth(1).unwrap();
    assert!(second.lines().any(|l| l.trim_start().starts_with("b128_m60_n20") && l.contains("speedup")), "{second}");
    let first = stdout.split("[2/3]").next().unwrap();
    assert!(first.contains("incorrect"), "{first}");
    // The campaign and its stop attempts stay in the data dir.
    assert!(dir.path().join("data/gadfly.db").exists());
}
