//! Faults and hostile input: nothing acknowledged is lost when the daemon is
//! killed mid-load, one daemon per data dir, loopback only by default, and
//! DNS-rebinding and cross-origin requests refused.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Daemon, Fixture};
use serde_json::Value;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn serve(data: &std::path::Path, port: u16) -> Daemon {
    let mut cmd = common::gadfly();
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"]).arg(data);
    if let Some(url) = common::postgres_for(data) {
        cmd.args(["--database-url", &url]);
    }
    Daemon::start_cmd(data, cmd)
}

#[test]
fn every_answered_hook_call_is_stored_exactly_once_across_sigkills() {
    let f = Fixture::new("");
    let data = f.data_dir();
    let port = free_port();
    let daemon = Arc::new(Mutex::new(serve(&data, port)));
    let (url, token) = {
        let d = daemon.lock().unwrap();
        (d.url.clone(), d.token.clone())
    };
    let id = daemon.lock().unwrap().create_campaign(&f.spec());
    let done = Arc::new(AtomicBool::new(false));

    // The nemesis: SIGKILL the daemon at irregular moments and restart it.
    let nemesis = {
        let (daemon, done, data) = (daemon.clone(), done.clone(), data.clone());
        std::thread::spawn(move || {
            let mut kills = 0;
            let mut wait = 150u64;
            while !done.load(Ordering::SeqCst) && kills < 4 {
                std::thread::sleep(Duration::from_millis(wait));
                wait = wait * 7 % 400 + 100;
                let mut d = daemon.lock().unwrap();
                d.kill(); // SIGKILL
                kills += 1;
                std::thread::sleep(Duration::from_millis(50));
                *d = serve(&data, port);
            }
            kills
        })
    };
    // The load: 8 workers, 240 post-tool-use calls, each with its own tool_use_id.
    let answered = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let (url, token, id, answered) = (url.clone(), token.clone(), id.clone(), answered.clone());
            std::thread::spawn(move || {
                for i in 0..30 {
                    let tool = format!("toolu_{w}_{i}");
                    let payload =
                        serde_json::json!({"session_id": format!("s{w}"), "tool_name": "Bash", "tool_use_id": tool});
                    let mut child = common::gadfly()
                        .args(["hook", "claude-code", "post-tool-use", "--campaign", &id])
                        .env("GADFLY_URL", &url)
                        .env("GADFLY_TOKEN", &token)
                        .env("GADFLY_HOOK_DEADLINE_S", "30")
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap();
                    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
                    let out = child.wait_with_output().unwrap();
                    // Answered: the daemon replied (the hook reports nothing on stderr).
                    if out.status.success() && out.stderr.is_empty() {
                        answered.lock().unwrap().push(tool);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let kills = nemesis.join().unwrap();
    assert!(kills >= 2, "the daemon was killed {kills} times");
    let d = daemon.lock().unwrap();
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let stored: Vec<String> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "hook.post_tool_use")
        .map(|e| e["payload"]["payload"]["tool_use_id"].as_str().unwrap().to_string())
        .collect();
    let answered = answered.lock().unwrap();
    eprintln!("kills {kills}, calls 240, answered {}, stored {}", answered.len(), stored.len());
    assert!(answered.len() >= 200, "the hook retries across restarts: {} of 240 answered", answered.len());
    for t in answered.iter() {
        assert_eq!(
            stored.iter().filter(|s| *s == t).count(),
            1,
            "{t} stored {} times",
            stored.iter().filter(|s| *s == t).count()
        );
    }
    let mut unique = stored.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), stored.len(), "no call is stored twice");
}

#[test]
fn one_daemon_per_data_dir_and_loopback_by_default() {
    let f = Fixture::new("");
    let data = f.data_dir();
    let _d = Daemon::start_with(&data, None);
    let out = common::gadfly().args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&data).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another gadfly daemon already uses the data dir"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = tempfile::tempdir().unwrap();
    let out =
        common::gadfly().args(["serve", "--listen", "0.0.0.0:0", "--data-dir"]).arg(other.path()).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address: pass --allow-remote"));
}

#[test]
fn dns_rebinding_and_cross_origin_requests_are_refused() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let code = |args: &[&str]| -> String {
        let out =
            Command::new("curl").args(["-s", "-o", "/dev/null", "-w", "%{http_code}"]).args(args).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let auth = format!("Authorization: Bearer {}", d.token);
    let list = format!("{}/api/v1/campaigns", d.url);
    assert_eq!(code(&["-H", &auth, &list]), "200");
    assert_eq!(code(&["-H", &auth, "-H", "Host: evil.example", &list]), "403");
    assert_eq!(code(&["-H", "Host: evil.example:7878", &format!("{}/", d.url)]), "403");
    let ask = format!("{}/api/v1/campaigns/{id}/questions", d.url);
    let body = r#"{"text": "is this forged?"}"#;
    assert_eq!(
        code(&[
            "-H",
            &auth,
            "-H",
            "Origin: http://evil.example",
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
            &ask
        ]),
        "403"
    );
    assert_eq!(
        code(&["-H", &auth, "-H", "Origin: null", "-H", "Content-Type: application/json", "-d", body, &ask]),
        "403"
    );
    assert_eq!(
        code(&[
            "-H",
            &auth,
            "-H",
            &format!("Origin: {}", d.url),
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
            &ask
        ]),
        "201"
    );
    let qs: Value = d.api_get(&format!("/campaigns/{id}/questions"));
    let human = qs.as_array().unwrap().iter().filter(|q| q["source"] == "human").count();
    assert_eq!(human, 1, "only the same-origin question was queued");
    // Oversized bodies are refused with a status, and the daemon carries on.
    let big = "x".repeat(17 * 1024 * 1024);
    let path = f.dir.path().join("big.json");
    std::fs::write(&path, format!("{{\"text\": \"{big}\"}}")).unwrap();
    assert_eq!(
        code(&[
            "-H",
            &auth,
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &format!("@{}", path.display()),
            &ask
        ]),
        "413"
    );
    assert_eq!(code(&[&format!("{}/api/v1/health", d.url)]), "200");
}
