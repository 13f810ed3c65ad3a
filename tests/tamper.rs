//! The agent plays against what judges it, and loses: it edits the
//! harness, writes a fake results file, replaces the reference, links a
//! protected file to one of its own, or edits the hook settings gadfly
//! wrote. Each is caught and reported as a violation, and the evaluation
//! runs with gadfly's pristine copy of the harness and reference, so the
//! trick does not even change the measurement.

mod common;

use common::{git, Daemon, Fixture, ALL_PASS};
use serde_json::Value;

/// A passing candidate the real harness would still fail: scenario b is
/// wrong. Every trick below tries to make this pass.
const WRONG_B: &str = "a true 50 100\nb false 40 100\nc true 80 100\n";

fn evaluate(d: &Daemon, id: &str) -> Value {
    let out = d.run(&["eval", id, "--json"]);
    // 0: the predicate holds, 1: it fails; either way a verdict.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn scenario<'a>(e: &'a Value, name: &str) -> &'a Value {
    e["scenarios"].as_array().unwrap().iter().find(|s| s["scenario"] == name).unwrap()
}

fn violations(e: &Value) -> Vec<String> {
    e["violations"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

#[test]
fn an_edited_harness_is_a_violation_and_the_pristine_harness_runs() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(WRONG_B);
    // The agent rewrites the harness to report every scenario correct.
    let path = f.ws().join("harness/run.sh");
    let text = std::fs::read_to_string(&path).unwrap().replace("\"$correct\"", "true");
    std::fs::write(&path, text).unwrap();
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false);
    assert!(violations(&e).contains(&"protected file harness/run.sh was modified".to_string()), "{e}");
    // The pristine harness measured it: b is still wrong.
    assert_eq!(scenario(&e, "b")["correct"], false, "{e}");
}

#[test]
fn a_fake_results_file_is_never_read() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(WRONG_B);
    // Results lines that would pass, written where a harness might look.
    let fake: String = ["a", "b", "c"]
        .iter()
        .map(|s| format!("{{\"scenario\":\"{s}\",\"correct\":true,\"time_us\":10,\"baseline_us\":100}}\n"))
        .collect();
    for name in ["results.jsonl", "results", "build/results.jsonl"] {
        let p = f.ws().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, &fake).unwrap();
    }
    let first = evaluate(&d, &id);
    assert_eq!(first["holds"], false, "{first}");
    assert_eq!(scenario(&first, "b")["correct"], false);
    // The harness also cannot be pointed at it: run.sh is protected, and
    // the run uses gadfly's copy.
    std::fs::write(f.ws().join("harness/run.sh"), "#!/bin/sh\ncat results.jsonl > \"$1\"\n").unwrap();
    let second = evaluate(&d, &id);
    assert_eq!(second["holds"], false, "{second}");
    assert_eq!(scenario(&second, "b")["correct"], false, "{second}");
    assert!(violations(&second).iter().any(|v| v.contains("harness/run.sh was modified")), "{second}");
}

#[test]
fn a_replaced_reference_is_a_violation_and_the_pristine_reference_is_used() {
    // A harness that checks answer.txt against reference/expected.txt.
    let check = "sh harness/check.sh {results}";
    let f = Fixture::with_run("", check);
    let ws = f.ws();
    std::fs::create_dir_all(ws.join("reference")).unwrap();
    std::fs::write(ws.join("reference/expected.txt"), "42\n").unwrap();
    std::fs::write(
        ws.join("harness/check.sh"),
        "#!/bin/sh\nif cmp -s answer.txt reference/expected.txt; then ok=true; else ok=false; fi\nfor s in a b c; do printf '{\"scenario\":\"%s\",\"correct\":%s,\"time_us\":50,\"baseline_us\":100}\\n' $s $ok >> \"$1\"; done\n",
    )
    .unwrap();
    std::fs::write(ws.join("answer.txt"), "42\n").unwrap();
    let spec = std::fs::read_to_string(f.spec())
        .unwrap()
        .replace("protected = [\"harness/**\"]", "protected = [\"harness/**\", \"reference/**\"]");
    std::fs::write(f.spec(), spec).unwrap();
    git(&ws, &["add", "-A"]);
    git(&ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "reference"]);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    assert_eq!(evaluate(&d, &id)["holds"], true, "the right answer passes");
    // The agent's answer is wrong; it makes the reference agree with it.
    std::fs::write(ws.join("answer.txt"), "41\n").unwrap();
    std::fs::write(ws.join("reference/expected.txt"), "41\n").unwrap();
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "{e}");
    assert!(violations(&e).contains(&"protected file reference/expected.txt was modified".to_string()), "{e}");
    assert_eq!(scenario(&e, "a")["correct"], false, "checked against the pristine reference: {e}");
    // A file added under a protected path is a violation too, and removed before the run.
    std::fs::write(ws.join("reference/override.txt"), "41\n").unwrap();
    let e = evaluate(&d, &id);
    assert!(violations(&e).contains(&"protected path reference/override.txt was added".to_string()), "{e}");
}

#[test]
fn a_protected_file_replaced_by_a_symlink_is_a_violation() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(WRONG_B);
    let evil = f.ws().join("evil.sh");
    std::fs::write(&evil, "#!/bin/sh\nfor s in a b c; do echo \"{\\\"scenario\\\":\\\"$s\\\",\\\"correct\\\":true,\\\"time_us\\\":1,\\\"baseline_us\\\":100}\" >> \"$1\"; done\n").unwrap();
    let run = f.ws().join("harness/run.sh");
    std::fs::remove_file(&run).unwrap();
    std::os::unix::fs::symlink("../evil.sh", &run).unwrap();
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], false, "{e}");
    assert!(
        violations(&e).contains(&"protected file harness/run.sh was replaced by a symlink to ../evil.sh".to_string()),
        "{e}"
    );
    assert_eq!(scenario(&e, "b")["correct"], false, "the pristine harness ran: {e}");
    // Restored, the campaign carries on.
    std::fs::remove_file(&run).unwrap();
    git(&f.ws(), &["checkout", "harness/run.sh"]);
    f.set_candidate(ALL_PASS);
    let e = evaluate(&d, &id);
    assert_eq!(e["holds"], true, "{e}");
    assert!(violations(&e).is_empty(), "{e}");
}

/// Runs one of the hook command lines gadfly wrote, as Claude Code would.
fn run_hook(d: &Daemon, line: &str, payload: &Value) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .args(["-c", line])
        .env("GADFLY_URL", &d.url)
        .env("GADFLY_TOKEN", &d.token)
        .env("GADFLY_SPOOL_DIR", d.data_dir.join("spool"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn hook_line(ws: &std::path::Path, event: &str) -> String {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.join(".claude/settings.local.json")).unwrap()).unwrap();
    v["hooks"][event][0]["hooks"][0]["command"].as_str().unwrap().to_string()
}

/// The violations in the campaign's log, once the checks a SessionStart
/// starts in the background have had time to finish.
fn violations_settled(d: &Daemon, id: &str, at_least: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let v = violations_logged(d, id);
        if v.len() >= at_least || std::time::Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn violations_logged(d: &Daemon, id: &str) -> Vec<Value> {
    d.api_get(&format!("/campaigns/{id}/log?limit=10000"))
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "violation")
        .cloned()
        .collect()
}

#[test]
fn an_agent_that_edits_its_hook_settings_or_the_hook_binary_is_caught() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    let bin = tempfile::tempdir().unwrap();
    let copy = bin.path().join("gadfly");
    std::fs::copy(env!("CARGO_BIN_EXE_gadfly"), &copy).unwrap();
    let out = d.run(&["attach", &id, "--hook-bin", copy.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ws = f.ws();
    let start = serde_json::json!({"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"});
    let stop = serde_json::json!({"session_id": "s1", "hook_event_name": "Stop", "last_assistant_message": "Done."});
    run_hook(&d, &hook_line(&ws, "SessionStart"), &start);
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(violations_logged(&d, &id).is_empty(), "nothing changed yet");

    // The agent turns every hook off in the project's settings.
    std::fs::write(ws.join(".claude/settings.json"), r#"{"disableAllHooks": true}"#).unwrap();
    run_hook(&d, &hook_line(&ws, "SessionStart"), &start);
    let v = violations_settled(&d, &id, 1);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0]["payload"]["kind"], "hooks_changed");
    assert!(v[0]["payload"]["changes"][0].as_str().unwrap().contains("hooks were disabled"), "{v:?}");
    // A stop that still reaches gadfly is blocked, though the predicate holds.
    let answer = run_hook(&d, &hook_line(&ws, "Stop"), &stop);
    assert!(answer.contains("tampered with"), "{answer}");
    std::fs::remove_file(ws.join(".claude/settings.json")).unwrap();
    assert_eq!(run_hook(&d, &hook_line(&ws, "Stop"), &stop), "", "restored: the stop is allowed");

    // The agent lengthens its Stop hook's leash (an edit of gadfly's entry).
    let path = ws.join(".claude/settings.local.json");
    let text = std::fs::read_to_string(&path).unwrap().replace("\"timeout\": 600", "\"timeout\": 1");
    std::fs::write(&path, text).unwrap();
    let answer = run_hook(&d, &hook_line(&ws, "Stop"), &stop);
    assert!(answer.contains("tampered with") && answer.contains("settings.local.json"), "{answer}");
    // `gadfly attach` again restores gadfly's entries.
    let out = d.run(&["attach", &id, "--hook-bin", copy.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(run_hook(&d, &hook_line(&ws, "Stop"), &stop), "");

    // The agent swaps the hook binary.
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes.extend_from_slice(b"\0tampered");
    std::fs::write(&copy, bytes).unwrap();
    let seen = violations_logged(&d, &id).len();
    run_hook(&d, &hook_line(&ws, "SessionStart"), &start);
    let v = violations_settled(&d, &id, seen + 1);
    let last = v.last().unwrap();
    assert!(
        last["payload"]["changes"].as_array().unwrap().iter().any(|c| c.as_str().unwrap().contains("hook binary")),
        "{v:?}"
    );
    // Detach tells the daemon: the removed hooks are not a violation.
    let before = violations_logged(&d, &id).len();
    let out = d.run(&["detach", &id]);
    assert!(out.status.success());
    let ok = d.run(&["eval", &id]);
    assert!(ok.status.success());
    assert_eq!(violations_logged(&d, &id).len(), before);
}

/// With `[harness] sandbox = "bwrap"`, the build and the harness (the
/// candidate's own code) cannot write to the agent's workspace, read the
/// daemon's data dir (its token, its database) or reach the network; the
/// evaluation still runs and judges. Skipped where bubblewrap does not work
/// (CI installs it and sets GADFLY_REQUIRE_SANDBOX=1, which fails instead).
#[test]
fn a_sandboxed_build_cannot_touch_the_workspace_the_data_dir_or_the_network() {
    if !gadfly::harness::bwrap_works() {
        assert!(std::env::var_os("GADFLY_REQUIRE_SANDBOX").is_none(), "bubblewrap does not work on this host");
        eprintln!("SKIPPED: bubblewrap (bwrap) does not work on this host");
        return;
    }
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let ws = f.ws();
    let data = f.data_dir();
    let probe = format!(
        "if echo tampered >> '{ws}/candidate.txt' 2>/dev/null; then echo ws-write:allowed; else echo ws-write:denied; fi; \
         if cat '{data}/token' >/dev/null 2>&1; then echo token-read:allowed; else echo token-read:denied; fi; \
         if curl -s --max-time 3 '{url}/api/v1/health' >/dev/null 2>&1; then echo network:allowed; else echo network:denied; fi; \
         echo built > build-marker",
        ws = ws.display(),
        data = data.display(),
        url = d.url
    );
    let spec = std::fs::read_to_string(f.spec()).unwrap().replace(
        "protected = [\"harness/**\"]",
        &format!(
            "protected = [\"harness/**\"]\nsandbox = \"bwrap\"\nbuild = {}",
            serde_json::to_string(&probe).unwrap()
        ),
    );
    std::fs::write(f.spec(), spec).unwrap();
    let id = d.create_campaign(&f.spec());
    f.set_candidate(ALL_PASS);
    let e = evaluate(&d, &id);
    let out = e["build"]["output_tail"].as_str().unwrap_or_else(|| panic!("no build output: {e}"));
    for line in ["ws-write:denied", "token-read:denied", "network:denied"] {
        assert!(out.contains(line), "{line} not in the build's output:\n{out}");
    }
    assert_eq!(std::fs::read_to_string(ws.join("candidate.txt")).unwrap(), ALL_PASS, "the workspace is untouched");
    assert_eq!(e["holds"], true, "the sandboxed harness still measured and judged: {e}");
}
