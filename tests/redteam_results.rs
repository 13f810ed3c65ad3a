//! Red team, the results channel (issue 29, THREATS rows 2, 3 and 7): the
//! candidate tries to write the results file the daemon reads, from inside
//! the harness process, from a detached helper, through a FIFO or a link at
//! the results path, or by reading the path in its build. Each attack runs
//! against the real binary and, where it says so, the shipped qr-cpu
//! example (its real C harness and initial kernel); each must be held.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Daemon, Fixture, ALL_PASS};
use serde_json::Value;

/// The qr-cpu example as `gadfly demo` sets it up, in `root`; with `extra`
/// added to its `[harness]` table. Returns the spec and the workspace.
fn qr_cpu(root: &Path, extra: &str) -> (PathBuf, PathBuf) {
    let spec = gadfly::demo::materialize_example(root).unwrap();
    if !extra.is_empty() {
        let text = std::fs::read_to_string(&spec).unwrap().replace("[harness]\n", &format!("[harness]\n{extra}\n"));
        std::fs::write(&spec, text).unwrap();
    }
    (spec, root.join("workspace"))
}

fn evaluate(d: &Daemon, id: &str) -> Value {
    let out = d.run(&["eval", id, "--json"]);
    // 0: the predicate holds, 1: it fails; either way a verdict.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The forged numbers every attack below writes: 1 µs against 1000 µs.
const FORGED_TIME_US: f64 = 1.0;

/// C appended to the shipped initial kernel: writes results lines that pass
/// every scenario (1 µs against 1000 µs) to `path`, if it knows one.
const FORGE_C: &str = r#"
/* ---- appended by the red team ---- */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <dirent.h>
static char rt_path[4096];
static void rt_forge(void)
{
    static const char *names[] = {"b4096_m4_n4", "b2048_m8_n8", "b1024_m13_n13", "b512_m17_n17", "b128_m33_n33",
                                  "b32_m50_n50", "b16_m64_n64", "b4_m100_n100", "b128_m60_n20"};
    FILE *f;
    int i;
    if (!rt_path[0] || !(f = fopen(rt_path, "w")))
        return;
    for (i = 0; i < 9; i++)
        fprintf(f, "{\"scenario\":\"%s\",\"correct\":true,\"max_abs_err_ref\":0,\"max_abs_err_hi\":0,"
                   "\"tolerance\":1e-12,\"time_us\":1,\"baseline_us\":1000,\"samples\":9,\"cv\":0.01}\n", names[i]);
    fclose(f);
}
/* The results path from a NUL-separated /proc file: `--out PATH` or
 * `GADFLY_RESULTS=PATH`. */
static void rt_scan(const char *file)
{
    static char buf[1 << 16];
    ssize_t k, i;
    int fd = open(file, O_RDONLY);
    if (fd < 0)
        return;
    k = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (k <= 0)
        return;
    buf[k] = 0;
    for (i = 0; i < k;) {
        char *s = buf + i;
        size_t l = strlen(s);
        if (!strncmp(s, "GADFLY_RESULTS=", 15) && s[15])
            snprintf(rt_path, sizeof(rt_path), "%s", s + 15);
        if (!strcmp(s, "--out") && i + (ssize_t)l + 1 < k && s[l + 1])
            snprintf(rt_path, sizeof(rt_path), "%s", s + l + 1);
        i += (ssize_t)l + 1;
    }
}
static void rt_find_path(void)
{
    char p[64];
    const char *e = getenv("GADFLY_RESULTS");
    if (e)
        snprintf(rt_path, sizeof(rt_path), "%s", e);
    rt_scan("/proc/self/cmdline");
    rt_scan("/proc/self/environ");
    snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)getppid());
    rt_scan(p);
    snprintf(p, sizeof(p), "/proc/%d/environ", (int)getppid());
    rt_scan(p);
}
"#;

/// THREATS Details 2, as written there: a constructor that reads the path
/// and an atexit handler that rewrites the file when the harness exits.
const ATEXIT_C: &str = r#"
__attribute__((constructor)) static void rt_init(void)
{
    rt_find_path();
    atexit(rt_forge);
}
"#;

/// A detached helper (fork, setsid, fork) that waits for the results file to
/// appear beside the tree (the evaluation folder is the parent of the
/// harness's working directory) or for the path found above, then, after
/// the harness has written it, overwrites it.
const HELPER_C: &str = r#"
__attribute__((constructor)) static void rt_init(void)
{
    rt_find_path();
    if (fork() != 0)
        return;
    setsid();
    if (fork() != 0)
        _exit(0);
    for (int t = 0; t < 1200; t++) { /* 60 s */
        usleep(50000);
        if (!rt_path[0]) {
            DIR *d = opendir("..");
            struct dirent *e;
            while (d && (e = readdir(d)) != NULL)
                if (!strncmp(e->d_name, "results-", 8))
                    snprintf(rt_path, sizeof(rt_path), "../%s", e->d_name);
            if (d)
                closedir(d);
        }
        if (rt_path[0] && access(rt_path, F_OK) == 0) {
            usleep(300000);
            rt_forge();
            usleep(300000);
            rt_forge();
            _exit(0);
        }
    }
    _exit(0);
}
"#;

/// The numbers of an evaluation are the harness's real ones, not the forgery's.
fn assert_real_numbers(e: &Value) {
    let scenarios = e["scenarios"].as_array().unwrap_or_else(|| panic!("no scenarios: {e}"));
    assert!(!scenarios.is_empty(), "{e}");
    for s in scenarios {
        let m = &s["measured"];
        let t = m["time_us"].as_f64().unwrap_or(f64::NAN);
        let b = m["baseline_us"].as_f64().unwrap_or(f64::NAN);
        assert!(t != FORGED_TIME_US && t > 20.0, "forged or impossible time: {s}");
        assert!(b != 1000.0 && b > 20.0, "forged or impossible baseline: {s}");
    }
}

/// Appends `code` to the shipped initial kernel, stops, and checks the
/// stop is blocked on the real numbers; returns the evaluation.
fn forged_kernel_is_held(extra: &str, code: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let (spec, ws) = qr_cpu(&dir.path().join("example"), extra);
    let d = Daemon::start(&data);
    let id = d.create_campaign(&spec);
    let kernel = ws.join("kernel/qr.c");
    let mut text = std::fs::read_to_string(&kernel).unwrap();
    text.push_str(FORGE_C);
    text.push_str(code);
    std::fs::write(&kernel, text).unwrap();
    let answer = d.stop(&id, "qr_batched is faster on every scenario now");
    let why = common::reason(&answer);
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "{e}");
    assert_real_numbers(&e);
    assert!(!why.is_empty());
    e
}

#[test]
fn an_atexit_forgery_in_the_shipped_kernel_is_held() {
    forged_kernel_is_held("", ATEXIT_C);
}

#[test]
fn an_atexit_forgery_in_the_shipped_kernel_is_held_under_bwrap() {
    if common::skip_without_bwrap() {
        return;
    }
    forged_kernel_is_held("sandbox = \"bwrap\"", ATEXIT_C);
}

#[test]
fn a_detached_helper_that_rewrites_the_results_later_is_held() {
    let e = forged_kernel_is_held("", HELPER_C);
    // The harness saw the helper and said so.
    let text = e.to_string();
    assert!(text.contains("started") && text.contains("process"), "the helper is not reported: {e}");
}

#[test]
fn a_detached_helper_is_held_under_bwrap() {
    if common::skip_without_bwrap() {
        return;
    }
    forged_kernel_is_held("sandbox = \"bwrap\"", HELPER_C);
}

fn health_ok(d: &Daemon) -> bool {
    let out = std::process::Command::new("curl")
        .args(["-s", "--max-time", "3", &format!("{}/api/v1/health", d.url)])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("\"ok\"")
}

/// Starts `gadfly eval ID --json` in the background.
fn eval_child(d: &Daemon, id: &str) -> std::process::Child {
    d.cmd()
        .args(["eval", id, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a background evaluation, at most `limit`; None if it hangs.
fn wait_eval(mut child: std::process::Child, limit: Duration) -> Option<Value> {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
            return Some(serde_json::from_slice(&out.stdout).unwrap());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A harness that leaves a FIFO with no writer at the results path (what a
/// candidate with the path could do): the evaluation fails at once with a
/// clear message, and the daemon keeps answering, with two such evaluations
/// in flight on a 2-core machine (THREATS Details 7).
#[test]
fn a_fifo_at_the_results_path_fails_the_evaluation_and_never_wedges_the_daemon() {
    let f1 = Fixture::with_run("", "mkfifo {results}");
    let f2 = Fixture::with_run("", "mkfifo {results}");
    let d = Daemon::start(&f1.data_dir());
    let id1 = d.create_campaign(&f1.spec());
    let id2 = d.create_campaign(&f2.spec());
    f1.set_candidate(ALL_PASS);
    f2.set_candidate(ALL_PASS);
    let (c1, c2) = (eval_child(&d, &id1), eval_child(&d, &id2));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(health_ok(&d), "/health did not answer while two FIFO evaluations were in flight");
    for c in [c1, c2] {
        let e = wait_eval(c, Duration::from_secs(30)).expect("the evaluation hung on a FIFO at the results path");
        assert_eq!(e["holds"], false, "{e}");
        let text = e["failures"].to_string();
        assert!(text.contains("FIFO") && text.contains("not a regular file"), "no clear message: {e}");
    }
    assert!(health_ok(&d));
}

/// A results path made a symbolic link to results lines that would pass:
/// not followed, the evaluation fails and says why.
#[test]
fn a_symlink_at_the_results_path_is_not_followed() {
    // (The tree is read-only while the harness runs: the forged lines go
    // beside the results path, in the one folder the run may write.)
    let f =
        Fixture::with_run("", "r={results}; sh harness/run.sh ${r%/*}/forged.jsonl && ln -s ${r%/*}/forged.jsonl $r");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    let e = wait_eval(eval_child(&d, &id), Duration::from_secs(60)).expect("evaluation hung");
    assert_eq!(e["holds"], false, "a linked results file was read: {e}");
    let text = e["failures"].to_string();
    assert!(text.contains("symbolic link"), "no clear message: {e}");
    assert!(health_ok(&d));
}

/// The build step gets no results path and no seed; the run step keeps the
/// contract's variables (a harness must not pass them on to the candidate).
#[test]
fn the_build_never_sees_the_results_path_or_the_seed() {
    let f = Fixture::with_run("", "env | grep ^GADFLY_ | sed s/^/run-env:/ ; sh harness/run.sh {results}");
    let spec = std::fs::read_to_string(f.spec())
        .unwrap()
        .replace("[harness]\n", "[harness]\nbuild = \"env | grep ^GADFLY_ | sed s/^/build-env:/ ; true\"\n");
    std::fs::write(f.spec(), spec).unwrap();
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    let e = evaluate(&d, &id);
    let build = e["build"]["output_tail"].as_str().unwrap_or_else(|| panic!("no build output: {e}"));
    assert!(build.contains("build-env:GADFLY_CAMPAIGN="), "the probe did not run: {build}");
    assert!(!build.contains("GADFLY_RESULTS"), "the build was handed the results path: {build}");
    assert!(!build.contains("GADFLY_SEED"), "the build was handed the seed: {build}");
    let run = e["run"]["output_tail"].as_str().unwrap_or_else(|| panic!("no run output: {e}"));
    assert!(run.contains("run-env:GADFLY_RESULTS="), "{run}");
    assert_eq!(e["holds"], true, "{e}");
}
