//! The Stop hook with no daemon behind it, with the real deadlines (no
//! shortened `GADFLY_HOOK_DEADLINE_S`): it answers under the campaign's
//! `[gate]` policy within 20 s when nothing answers (THREATS.md row 6: it
//! used to wait 540 s), at once when the campaign fails open, within
//! `--deadline` when one is given, and it still counts its blocks when the
//! spool cannot be written (it used to block for ever).

mod common;

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A loopback port with nothing listening on it.
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Answer {
    decision: Option<String>,
    reason: String,
    stderr: String,
    seconds: f64,
}

/// One stop through the real hook command against `port`.
fn stop(port: u16, spool: &Path, session: &str, extra: &[&str]) -> Answer {
    let payload = serde_json::json!({
        "session_id": session, "transcript_path": "/nonexistent.jsonl", "cwd": "/tmp",
        "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "Done."
    });
    let mut cmd = common::gadfly();
    cmd.args(["hook", "claude-code", "stop"])
        .args(extra)
        .args(["--campaign", "c-deadlines"])
        .env("GADFLY_URL", format!("http://127.0.0.1:{port}"))
        .env("GADFLY_TOKEN", "not-a-token")
        .env("GADFLY_SPOOL_DIR", spool)
        .env_remove("GADFLY_HOOK_DEADLINE_S")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let v: Option<Value> = (!stdout.is_empty()).then(|| serde_json::from_str(&stdout).unwrap());
    Answer {
        decision: v.as_ref().and_then(|v| v["decision"].as_str()).map(str::to_string),
        reason: v.as_ref().and_then(|v| v["reason"].as_str()).unwrap_or("").to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        seconds,
    }
}

fn spooled(dir: &Path) -> Vec<Value> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter_map(|t| serde_json::from_str(&t).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn session(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}

#[test]
fn with_nothing_listening_a_stop_is_blocked_within_20_s_and_spooled() {
    let spool = tempfile::tempdir().unwrap();
    let a = stop(dead_port(), spool.path(), &session("closed"), &[]);
    eprintln!("answered in {:.1} s", a.seconds);
    assert_eq!(a.decision.as_deref(), Some("block"), "{}", a.stderr);
    assert!(a.reason.contains("supervisor unavailable") && a.reason.contains("(1 of 3)"), "{}", a.reason);
    assert!(a.seconds >= 15.0 && a.seconds < 30.0, "answered after {:.1} s, not about 20 s", a.seconds);
    let calls = spooled(spool.path());
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["outcome"], "blocked");
}

#[test]
fn a_campaign_that_fails_open_lets_the_stop_through_at_once_and_records_it() {
    let spool = tempfile::tempdir().unwrap();
    let a = stop(dead_port(), spool.path(), &session("open"), &["--fail", "open"]);
    eprintln!("answered in {:.1} s", a.seconds);
    assert_eq!(a.decision, None, "let through: {}", a.reason);
    assert!(a.seconds < 5.0, "answered after {:.1} s, not at once", a.seconds);
    let calls = spooled(spool.path());
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["outcome"], "allowed");
}

#[test]
fn a_deadline_below_the_connect_wait_is_kept() {
    let spool = tempfile::tempdir().unwrap();
    let a = stop(dead_port(), spool.path(), &session("deadline"), &["--deadline", "3"]);
    eprintln!("answered in {:.1} s", a.seconds);
    assert_eq!(a.decision.as_deref(), Some("block"));
    assert!(a.seconds < 8.0, "answered after {:.1} s with --deadline 3", a.seconds);
}

#[test]
fn an_unwritable_spool_still_counts_the_blocks() {
    // A path under a regular file: no spool folder can be made there, even as root.
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("file"), "").unwrap();
    let spool = scratch.path().join("file/spool");
    let s = session("unwritable");
    let port = dead_port();
    let first = stop(port, &spool, &s, &["--unavailable-blocks", "1"]);
    assert_eq!(first.decision.as_deref(), Some("block"), "{}", first.stderr);
    assert!(first.stderr.contains("could not spool"), "{}", first.stderr);
    let second = stop(port, &spool, &s, &["--unavailable-blocks", "1"]);
    assert_eq!(second.decision, None, "the block count did not advance: {}", second.reason);
    assert!(second.stderr.contains("through ungated"), "{}", second.stderr);
    eprintln!("answered in {:.1} s and {:.1} s", first.seconds, second.seconds);
}

#[test]
fn a_daemon_that_dies_mid_request_and_stays_down_is_answered_for_within_the_window() {
    // A server that takes the connection, says nothing, then goes away.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(4));
        drop(conn);
        drop(listener);
    });
    let spool = tempfile::tempdir().unwrap();
    let a = stop(port, spool.path(), &session("dies"), &[]);
    server.join().unwrap();
    eprintln!("answered in {:.1} s", a.seconds);
    assert_eq!(a.decision.as_deref(), Some("block"), "{}", a.stderr);
    assert!(a.reason.contains("supervisor unavailable"), "{}", a.reason);
    assert!(a.seconds < 30.0, "answered after {:.1} s", a.seconds);
}

/// Issue 31: whatever Stop timeout the campaign sets (`[gate]
/// stop_timeout_s`), `gadfly attach` writes that timeout and a hook
/// deadline below it together, so the exact command Claude Code would run
/// answers before Claude Code would kill it, even with nothing listening.
#[test]
fn the_stop_command_attach_writes_answers_within_the_timeout_it_writes() {
    let f = common::Fixture::new("[gate]\nstop_timeout_s = 8\n");
    let mut d = common::Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["attach", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(f.ws().join(".claude/settings.local.json")).unwrap()).unwrap();
    let stop_hook = &settings["hooks"]["Stop"][0]["hooks"][0];
    assert_eq!(stop_hook["timeout"], 8, "{stop_hook}");
    let command = stop_hook["command"].as_str().unwrap().to_string();
    assert!(command.contains("--deadline 7.2"), "{command}");
    let url = d.url.clone();
    d.kill();
    let spool = tempfile::tempdir().unwrap();
    let payload = serde_json::json!({
        "session_id": session("attached"), "transcript_path": "/nonexistent.jsonl", "cwd": "/tmp",
        "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "Done."
    });
    let started = Instant::now();
    let mut child = std::process::Command::new("sh")
        .args(["-c", &command])
        .env("GADFLY_URL", &url)
        .env("GADFLY_TOKEN", "not-a-token")
        .env("GADFLY_SPOOL_DIR", spool.path())
        .env_remove("GADFLY_HOOK_DEADLINE_S")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("answered in {seconds:.1} s under an 8 s timeout");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(answer["decision"], "block", "{}", String::from_utf8_lossy(&out.stderr));
    assert!(seconds < 8.0, "answered after {seconds:.1} s, past the 8 s timeout");
    assert_eq!(spooled(spool.path()).len(), 1, "spooled before the timeout");
}
