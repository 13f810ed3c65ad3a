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
    // The daemon is gone once it exits: the audit is printed, not a
    // command that no daemon answers (issue #32), and the line on the kept
    // data names a folder that is there.
    let tail = stdout.split("replay done:").nth(1).unwrap();
    assert!(tail.contains("# Audit of campaign"), "{tail}");
    assert!(tail.contains("3 completion claims, 2 premature"), "{tail}");
    assert!(!tail.contains("audit: gadfly audit campaign"), "{tail}");
    let kept = tail.lines().find(|l| l.starts_with("the demo's data is kept in ")).expect("where the data is kept");
    let folder = kept.trim_start_matches("the demo's data is kept in ").split(':').next().unwrap();
    assert_eq!(std::fs::canonicalize(folder).unwrap(), std::fs::canonicalize(dir.path().join("data")).unwrap());
    assert!(kept.contains("gadfly audit campaign "), "{kept}");
}

/// Without --data-dir the demo's data lives in a temporary folder removed
/// at exit: nothing printed after the replay may point into it.
#[test]
fn the_demo_without_a_data_dir_prints_no_command_whose_data_is_gone() {
    let out = common::gadfly().args(["demo", "--exit", "--listen", "127.0.0.1:0"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let scratch = stdout
        .lines()
        .find_map(|l| l.strip_prefix("gadfly demo: daemon at ").and_then(|r| r.split("(SQLite in ").nth(1)))
        .map(|d| d.trim_end_matches(')').to_string())
        .expect("the data folder is named");
    assert!(!std::path::Path::new(&scratch).exists(), "{scratch} is left behind");
    let tail = stdout.split("replay done:").nth(1).unwrap();
    assert!(tail.contains("# Audit of campaign"), "{tail}");
    assert!(tail.contains("removed on exit (--data-dir DIR keeps it)"), "{tail}");
    let scratch_root = std::path::Path::new(&scratch).parent().unwrap().display().to_string();
    assert!(!tail.contains(&scratch_root), "a line after the replay points into the removed folder:\n{tail}");
}
