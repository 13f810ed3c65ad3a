//! Red team, libraries loaded at run time (issue #36's finding on the
//! hardened qr-cpu harness): a kernel that opens a library with `dlopen`
//! (LAPACK under a name stored backwards, say) shows no banned symbol in
//! the built binary. The harness's candidate process may map only its own
//! library and the C runtime (checked in /proc/PID/maps after every call),
//! and may open no file once the library is loaded (a seccomp filter).
//! libz stands in for the banned library: it is on every Debian host.

mod common;

use std::path::{Path, PathBuf};

use common::Daemon;
use serde_json::Value;

/// The qr-cpu example as `gadfly demo` sets it up, in `root`, cut to two
/// scenarios. Returns the spec and the workspace.
fn qr_cpu(root: &Path) -> (PathBuf, PathBuf) {
    let spec = gadfly::demo::materialize_example(root).unwrap();
    let text = std::fs::read_to_string(&spec).unwrap();
    let start = text.find("scenarios = [").unwrap();
    let end = start + text[start..].find(']').unwrap() + 1;
    let text = format!("{}scenarios = [\"b128_m33_n33\", \"b4_m100_n100\"]{}", &text[..start], &text[end..]);
    std::fs::write(&spec, text).unwrap();
    (spec, root.join("workspace"))
}

/// Evaluates the shipped kernel with `before` put ahead of it and `after`
/// appended; returns the evaluation.
fn evaluate_kernel(before: &str, after: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (spec, ws) = qr_cpu(&dir.path().join("example"));
    let d = Daemon::start(&data);
    let id = d.create_campaign(&spec);
    let kernel = ws.join("kernel/qr.c");
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, format!("{before}{text}{after}")).unwrap();
    let out = d.run(&["eval", &id, "--json"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn scenario_reasons(e: &Value) -> Vec<String> {
    e["scenarios"].as_array().unwrap_or_else(|| panic!("no scenarios: {e}")).iter().map(|s| s.to_string()).collect()
}

/// Loaded by the library's constructor and kept: the grader sees the map.
#[test]
fn a_library_the_kernel_loads_at_start_up_fails_every_scenario_by_name() {
    let e = evaluate_kernel(
        "",
        r#"
#include <dlfcn.h>
static void *rt_zlib;
__attribute__((constructor)) static void rt_load(void) { rt_zlib = dlopen("libz.so.1", RTLD_NOW); }
"#,
    );
    assert_eq!(e["holds"], false, "{e}");
    for s in scenario_reasons(&e) {
        assert!(s.contains("mapped") && s.contains("libz.so"), "the scenario names the library: {s}");
        assert!(s.contains("\"correct\":false"), "and fails: {s}");
    }
}

/// Opened during a call: refused. The kernel answers wrong (zeroes Q) if
/// it managed to open the library, right if it did not: every scenario
/// correct means no call could open it.
#[test]
fn a_library_the_kernel_opens_during_a_call_cannot_be_opened() {
    let e = evaluate_kernel(
        "#define qr_batched rt_inner_qr_batched\n",
        r#"
#undef qr_batched
#include <dlfcn.h>
#include <string.h>
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    void *h = dlopen("libz.so.1", RTLD_NOW);
    rt_inner_qr_batched(batch, m, n, A, Q, R);
    if (h) {
        memset(Q, 0, sizeof(double) * (size_t)batch * (size_t)m * (size_t)n);
        dlclose(h);
    }
}
"#,
    );
    let reasons = scenario_reasons(&e);
    assert_eq!(reasons.len(), 2, "{e}");
    for s in reasons {
        assert!(s.contains("\"correct\":true"), "dlopen during a call was not refused: {s}");
    }
}

/// The control: the same wrapper without dlopen is correct too, so the
/// test above fails only if the library could be opened.
#[test]
fn the_wrapped_kernel_alone_is_correct() {
    let e = evaluate_kernel(
        "#define qr_batched rt_inner_qr_batched\n",
        r#"
#undef qr_batched
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    rt_inner_qr_batched(batch, m, n, A, Q, R);
}
"#,
    );
    for s in scenario_reasons(&e) {
        assert!(s.contains("\"correct\":true"), "{s}");
    }
}
