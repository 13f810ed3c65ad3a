//! THREATS.md row 10: the data dir's disk fills, then space comes back.
//! Writes must work again without a restart, and `/health` must say when
//! the store cannot write. Needs a small file system of its own: a tmpfs,
//! mounted by the test (root only; skipped elsewhere, and on PostgreSQL).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Daemon, Fixture};
use serde_json::Value;

struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn post(client: &reqwest::blocking::Client, d: &Daemon, id: &str, n: usize, size: usize) -> u16 {
    let body = serde_json::json!({
        "session_id": "s-full", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_use_id": format!("t-{n}"), "tool_input": {"command": "x".repeat(size)}, "tool_response": {}
    });
    client
        .post(format!("{}/api/v1/campaigns/{id}/hooks/claude-code/post-tool-use", d.url))
        .bearer_auth(&d.token)
        .json(&body)
        .send()
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[test]
fn writes_heal_after_the_disk_fills_and_space_comes_back() {
    if std::env::var_os("GADFLY_TEST_DATABASE_URL").is_some() {
        eprintln!("SKIPPED on PostgreSQL: the data dir's disk is SQLite's");
        return;
    }
    let f = Fixture::new("");
    let mnt = f.dir.path().join("small-disk");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=6m", "tmpfs"]).arg(&mnt).status();
    if !mounted.is_ok_and(|s| s.success()) {
        assert!(std::env::var_os("GADFLY_REQUIRE_MOUNT").is_none(), "cannot mount a tmpfs here");
        eprintln!("SKIPPED: mounting a tmpfs needs root");
        return;
    }
    let _mount = Mount(mnt.clone());
    let d = Daemon::start(&mnt);
    let id = d.create_campaign(&f.spec());
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    assert_eq!(post(&client, &d, &id, 0, 100), 200);
    // An evaluation before the disk fills (the snapshot store exists).
    let out = d.run(&["eval", &id, "--json"]);
    // 0: the predicate holds, 1: it fails; either way a verdict.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));

    // Fill the disk: a filler file, then hook calls until the store fails.
    let filler = mnt.join("filler");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let len = file.metadata().unwrap().len();
        file.set_len(len.saturating_sub(512 * 1024)).unwrap();
    }
    let mut failed_at = None;
    for n in 1..2000 {
        let status = post(&client, &d, &id, n, 16 * 1024);
        if status >= 500 {
            failed_at = Some(n);
            break;
        }
    }
    let failed_at = failed_at.expect("the disk never filled");
    // A new candidate: the stop below snapshots and evaluates it while full.
    f.set_candidate("a true 50 100\nb true 40 100\nc true 70 100\n");
    // A stop while full: its evaluation and its record fail to be written.
    let stop = serde_json::json!({"session_id": "s-full", "hook_event_name": "Stop", "stop_hook_active": false,
        "last_assistant_message": "Done."});
    let r = client
        .post(format!("{}/api/v1/campaigns/{id}/hooks/claude-code/stop", d.url))
        .bearer_auth(&d.token)
        .json(&stop)
        .send();
    eprintln!("full after {failed_at} calls; a stop while full answered {:?}", r.map(|r| r.status()));
    // Every other kind of write while full: an evaluation (a transaction of
    // the pool), a question, a campaign (one transaction with its files).
    for args in [&["eval", id.as_str(), "--json", "--force"][..], &["ask", id.as_str(), "While full?"][..]] {
        let out = d.run(args);
        eprintln!("{args:?} while full: {:?} {}", out.status.code(), String::from_utf8_lossy(&out.stderr).trim());
    }
    let out = d.run(&["campaign", "create", "--no-calibrate", f.spec().to_str().unwrap()]);
    eprintln!("campaign create while full: {:?} {}", out.status.code(), String::from_utf8_lossy(&out.stderr).trim());
    // /health says so (its probe runs at most every 5 s).
    std::thread::sleep(Duration::from_secs(6));
    let health: Value = client.get(format!("{}/api/v1/health", d.url)).send().unwrap().json().unwrap();
    eprintln!("health while full: {health}");
    assert_eq!(health["status"], "degraded", "{health}");
    assert!(health["store"].as_str().unwrap().starts_with("cannot write: "), "{health}");

    // Space comes back.
    std::fs::remove_file(&filler).unwrap();
    let healed_by = Instant::now() + Duration::from_secs(20);
    let mut n = 10_000;
    let healed = loop {
        n += 1;
        if post(&client, &d, &id, n, 100) == 200 {
            break true;
        }
        if Instant::now() > healed_by {
            break false;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let health: Value = client.get(format!("{}/api/v1/health", d.url)).send().unwrap().json().unwrap();
    assert!(healed, "writes still fail 20 s after space came back (health: {health})");
    // And questions, evaluations, stops: every kind of write.
    let out = d.run(&["ask", &id, "Still there?"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = d.run(&["eval", &id, "--json", "--force"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    std::thread::sleep(Duration::from_secs(6));
    let health: Value = client.get(format!("{}/api/v1/health", d.url)).send().unwrap().json().unwrap();
    assert_eq!((health["status"].as_str(), health["store"].as_str()), (Some("ok"), Some("ok")), "{health}");
}
