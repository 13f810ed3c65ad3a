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
            let (url, token, id, answered, data) =
                (url.clone(), token.clone(), id.clone(), answered.clone(), data.clone());
            std::thread::spawn(move || {
                for i in 0..30 {
                    let tool = format!("toolu_{w}_{i}");
                    let payload =
                        serde_json::json!({"session_id": format!("s{w}"), "tool_name": "Bash", "tool_use_id": tool});
                    let mut child = common::gadfly()
                        .args(["hook", "claude-code", "post-tool-use", "--campaign", &id])
                        .env("GADFLY_URL", &url)
                        .env("GADFLY_TOKEN", &token)
                        .env("GADFLY_SPOOL_DIR", data.join("spool"))
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
    // Calls the hook answered on its own (the daemon was restarting for
    // longer than the hook's 2 s) were spooled: the next call replays them.
    let spooled_before = spooled_files(&data.join("spool")).len();
    let mut last = d
        .cmd()
        .args(["hook", "claude-code", "post-tool-use", "--campaign", &id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    last.stdin.take().unwrap().write_all(br#"{"session_id":"s-last","tool_use_id":"toolu_last"}"#).unwrap();
    assert!(last.wait_with_output().unwrap().status.success());
    assert!(spooled_files(&data.join("spool")).is_empty(), "the spool was replayed");
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let stored: Vec<String> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "hook.post_tool_use")
        .map(|e| e["payload"]["payload"]["tool_use_id"].as_str().unwrap().to_string())
        .filter(|t| t != "toolu_last")
        .collect();
    let answered = answered.lock().unwrap();
    eprintln!(
        "kills {kills}, calls 240, answered by the daemon {}, spooled by the hook and replayed {spooled_before}, stored {}",
        answered.len(),
        stored.len()
    );
    // Nothing lost: every call is in the store, answered or spooled.
    assert_eq!(stored.len(), 240, "every call is stored exactly once");
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

/// Runs a hook command line (as an agent would, through `sh -c`) with
/// `payload` on stdin; returns (stdout, stderr).
fn run_hook_line(line: &str, env: &[(&str, String)], payload: &Value) -> (String, String) {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", line]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).trim().to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

fn spooled_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The daemon is down: the Stop hook gadfly wrote into the agent's settings
/// blocks with "supervisor unavailable" as often as the campaign's `[gate]`
/// allows, then lets the stop through; an observational hook passes at
/// once; every call is spooled (fsynced) and, when the daemon is back,
/// replayed into the store once, the stop that got through shown as an
/// ungated stop. A session that ends while its last stop was blocked is an
/// ungated stop too.
#[test]
fn hook_calls_made_while_the_daemon_is_down_are_spooled_bounded_and_replayed_once() {
    let f = Fixture::new("[gate]\nfail = \"closed\"\nunavailable_blocks = 2\n");
    let data = f.data_dir();
    let mut d = Daemon::start(&data);
    let id = d.create_campaign(&f.spec());
    let out = d.run(&["attach", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(f.ws().join(".claude/settings.local.json")).unwrap()).unwrap();
    let stop_line = settings["hooks"]["Stop"][0]["hooks"][0]["command"].as_str().unwrap().to_string();
    let post_line = settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"].as_str().unwrap().to_string();
    assert!(stop_line.contains("--fail closed --unavailable-blocks 2"), "{stop_line}");
    let spool = data.join("spool");
    let token = d.token.clone();
    // A short deadline while the daemon is down (nothing answers); a long
    // one once it is back (a stop waits for its evaluation).
    let env = |url: &str, deadline: &str| {
        vec![
            ("GADFLY_URL", url.to_string()),
            ("GADFLY_TOKEN", token.clone()),
            ("GADFLY_SPOOL_DIR", spool.display().to_string()),
            ("GADFLY_HOOK_DEADLINE_S", deadline.to_string()),
        ]
    };
    let down_url = d.url.clone();
    let down = env(&down_url, "1");
    d.kill();

    let stop = serde_json::json!({"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "All done."});
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(run_hook_line(&stop_line, &down, &stop));
    }
    for (n, (stdout, _)) in answers[..2].iter().enumerate() {
        let v: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
        assert_eq!(v["decision"], "block");
        let reason = v["reason"].as_str().unwrap();
        assert!(reason.contains("supervisor unavailable") && reason.contains(&format!("({} of 2)", n + 1)), "{reason}");
    }
    assert_eq!(answers[2].0, "", "the third stop goes through: {:?}", answers[2]);
    assert!(answers[2].1.contains("ungated"), "{}", answers[2].1);
    let post = serde_json::json!({"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_down_1"});
    let (stdout, stderr) = run_hook_line(&post_line, &down, &post);
    assert_eq!(stdout, "");
    assert!(stderr.contains("gadfly hook"), "{stderr}");
    let files = spooled_files(&spool);
    assert_eq!(files.len(), 4, "every call is spooled: {files:?}");
    let backup = tempfile::tempdir().unwrap();
    for p in &files {
        std::fs::copy(p, backup.path().join(p.file_name().unwrap())).unwrap();
    }

    // The daemon comes back and replays its data dir's spool at start.
    let d = Daemon::start(&data);
    assert!(spooled_files(&spool).is_empty(), "the spool was replayed: {:?}", spooled_files(&spool));
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let decisions: Vec<&str> = stops.as_array().unwrap().iter().map(|s| s["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["unavailable_block", "unavailable_block", "ungated"], "{stops}");
    assert!(stops[2]["reason"].as_str().unwrap().contains("supervisor was unavailable"), "{stops}");
    assert_eq!(stops[2]["claim"], "All done.");
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let events = log.as_array().unwrap();
    let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    assert_eq!(count("hook.stop"), 3);
    assert_eq!(count("hook.post_tool_use"), 1);
    assert_eq!(count("stop.ungated"), 1);
    let replayed = events.iter().find(|e| e["kind"] == "hook.post_tool_use").unwrap();
    assert_eq!(replayed["payload"]["spooled"]["outcome"], "passed", "{replayed}");
    assert_eq!(replayed["payload"]["payload"]["tool_use_id"], "toolu_down_1");

    // The same spooled calls again (a replay that was cut short and
    // retried), sent by the next hook that reaches the daemon: nothing is
    // recorded twice.
    for p in spooled_files(backup.path()) {
        std::fs::copy(&p, spool.join(p.file_name().unwrap())).unwrap();
    }
    let up = env(&d.url, "120");
    let post2 = serde_json::json!({"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_up_1"});
    let (_, stderr) = run_hook_line(&post_line, &up, &post2);
    assert_eq!(stderr, "", "answered by the daemon");
    assert!(spooled_files(&spool).is_empty());
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=10000"));
    let events = log.as_array().unwrap();
    let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    assert_eq!((count("hook.stop"), count("hook.post_tool_use"), count("stop.ungated")), (3, 2, 1));
    assert_eq!(d.api_get(&format!("/campaigns/{id}/stops")).as_array().unwrap().len(), 3);

    // A session whose last stop was blocked, then ends: an ungated stop.
    let stop2 = serde_json::json!({"session_id": "s2", "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "Finished."});
    let (stdout, _) = run_hook_line(&stop_line, &up, &stop2);
    assert!(stdout.contains("you may not stop yet"), "{stdout}");
    let end_line = settings["hooks"]["SessionEnd"][0]["hooks"][0]["command"].as_str().unwrap().to_string();
    run_hook_line(
        &end_line,
        &up,
        &serde_json::json!({"session_id": "s2", "hook_event_name": "SessionEnd", "reason": "other"}),
    );
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    let last = stops.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["decision"], "ungated", "{stops}");
    assert_eq!(last["session_id"], "s2");
    assert!(last["reason"].as_str().unwrap().contains("last stop was blocked"), "{last}");
    // An allowed session's end is not an ungated stop.
    f.set_candidate(common::ALL_PASS);
    let stop3 = serde_json::json!({"session_id": "s3", "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "Done."});
    let (stdout, _) = run_hook_line(&stop_line, &up, &stop3);
    assert_eq!(stdout, "", "allowed");
    run_hook_line(
        &end_line,
        &up,
        &serde_json::json!({"session_id": "s3", "hook_event_name": "SessionEnd", "reason": "other"}),
    );
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops.as_array().unwrap().last().unwrap()["decision"], "allow", "{stops}");
}

/// `curl` with a bearer token: the HTTP status.
fn status_with(url: &str, token: &str, method: &str, path: &str, body: &str) -> u16 {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .args(["-H", "content-type: application/json", "--data-binary", body])
        .arg(format!("{url}/api/v1{path}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A campaign's hook token (what spawned agents get) posts that campaign's
/// hook events and asks for its evaluation, and nothing else: no questions,
/// no runs, no other campaign, no campaign made or read; a tampered one is
/// refused; no token shows up in the daemon's log.
#[test]
fn a_hook_token_posts_its_own_campaigns_hook_events_and_nothing_else() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let other = d.create_campaign(&f.spec());
    let token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    assert!(token.starts_with(&format!("gfh1.{id}.")), "{token}");
    let hook = r#"{"session_id":"s1","tool_name":"Bash","tool_use_id":"toolu_1"}"#;
    let ok = [
        ("POST", format!("/campaigns/{id}/hooks/claude-code/post-tool-use"), hook),
        ("POST", format!("/campaigns/{id}/evaluate"), "{}"),
        ("GET", format!("/campaigns/{id}/beam"), ""),
    ];
    for (m, p, b) in &ok {
        assert_eq!(status_with(&d.url, &token, m, p, b), 200, "{m} {p}");
    }
    let spec = serde_json::json!({"spec_path": f.spec(), "spec_toml": std::fs::read_to_string(f.spec()).unwrap()});
    let spec = spec.to_string();
    let refused = [
        ("POST", format!("/campaigns/{other}/hooks/claude-code/post-tool-use"), hook),
        ("POST", format!("/campaigns/{id}/questions"), r#"{"text":"answer yourself"}"#),
        ("GET", format!("/campaigns/{id}/questions"), ""),
        ("GET", format!("/campaigns/{id}"), ""),
        ("GET", format!("/campaigns/{id}/log"), ""),
        ("POST", format!("/campaigns/{id}/runs"), r#"{"agent":"claude-code"}"#),
        ("POST", format!("/campaigns/{id}/runs/stop"), "{}"),
        ("POST", format!("/campaigns/{id}/beam/abandon"), r#"{"family":"x","reason":"y"}"#),
        ("GET", format!("/campaigns/{id}/hook-token"), ""),
        ("GET", "/campaigns".to_string(), ""),
        ("POST", "/campaigns".to_string(), spec.as_str()),
        ("GET", "/bank".to_string(), ""),
    ];
    for (m, p, b) in &refused {
        assert_eq!(status_with(&d.url, &token, m, p, b), 403, "{m} {p}");
    }
    // One character changed (never to itself: a last `0` becomes `1`).
    let last = if token.ends_with('0') { '1' } else { '0' };
    let tampered = format!("{}{last}", &token[..token.len() - 1]);
    assert_ne!(tampered, token);
    assert_eq!(status_with(&d.url, &tampered, "POST", &ok[0].1, hook), 401);
    let moved = token.replace(&id, &other);
    assert_eq!(status_with(&d.url, &moved, "POST", &format!("/campaigns/{other}/hooks/claude-code/stop"), hook), 401);

    // The hook command with the hook token: a stop is judged as usual.
    let mut child = common::gadfly()
        .args(["hook", "claude-code", "stop", "--campaign", &id])
        .env("GADFLY_URL", &d.url)
        .env("GADFLY_TOKEN", &token)
        .env("GADFLY_SPOOL_DIR", f.data_dir().join("spool"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(br#"{"session_id":"s1","last_assistant_message":"Done."}"#).unwrap();
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["decision"], "block", "{v}");
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops.as_array().unwrap().len(), 1);

    // Tokens never reach the daemon's log.
    let logs: String = std::fs::read_dir(f.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("daemon-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(!logs.is_empty());
    let mac = token.rsplit('.').next().unwrap();
    assert!(!logs.contains(&d.token) && !logs.contains(mac), "a token is in the daemon's log");
}

/// Two daemons on one fresh PostgreSQL database, or None on SQLite.
fn two_daemons_on_postgres(f: &Fixture) -> Option<(Daemon, Daemon)> {
    let data = f.data_dir();
    let url = common::postgres_for(&data)?;
    let a = Daemon::start(&data);
    let data_b = f.dir.path().join("data-b");
    std::fs::create_dir_all(&data_b).unwrap();
    Some((a, Daemon::start_with(&data_b, Some(&url))))
}

/// Two daemons on one PostgreSQL database: a campaign made through one is
/// visible through the other, and the other's live event stream (what its
/// console shows) carries the events the first records. Skipped on SQLite
/// (one daemon per file).
#[test]
fn a_second_daemon_on_the_same_postgres_sees_the_campaign_and_its_live_events() {
    let f = Fixture::new("");
    let Some((a, b)) = two_daemons_on_postgres(&f) else {
        eprintln!("SKIPPED: needs GADFLY_TEST_DATABASE_URL (PostgreSQL)");
        return;
    };
    let id = a.create_campaign(&f.spec());
    assert_eq!(b.api_get(&format!("/campaigns/{id}"))["id"], id.as_str(), "visible from the other daemon");
    // Follow b's live stream from now on, then record through a.
    let last = b.api_get(&format!("/campaigns/{id}/log?tail=1"));
    let after = last.as_array().unwrap().last().map(|e| e["id"].as_i64().unwrap()).unwrap_or(0);
    let stream = Command::new("curl")
        .args(["-sN", "--max-time", "8", "-H"])
        .arg(format!("Authorization: Bearer {}", b.token))
        .arg(format!("{}/api/v1/campaigns/{id}/events?after={after}", b.url))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let hook = serde_json::json!({"session_id": "s-a", "tool_name": "Bash", "tool_use_id": "toolu_from_a"});
    let out = a.hook("post-tool-use", &id, &hook.to_string());
    assert!(out.status.success());
    let seen = stream.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&seen.stdout);
    assert!(text.contains("toolu_from_a"), "b's live stream did not carry a's event:\n{text}");
    assert_eq!(text.matches("toolu_from_a").count(), 1, "once:\n{text}");
}

/// Two daemons on one PostgreSQL database: a question a person asks through
/// one reaches an agent whose hooks talk to the other, at its next tool
/// call, even though that daemon had already looked and found none queued
/// (it remembers that, so that hook calls do not query for questions at
/// every event, and forgets it when the first daemon announces a question).
#[test]
fn a_question_asked_through_one_daemon_is_delivered_by_the_other() {
    let f = Fixture::new("");
    let Some((a, b)) = two_daemons_on_postgres(&f) else {
        eprintln!("SKIPPED: needs GADFLY_TEST_DATABASE_URL (PostgreSQL)");
        return;
    };
    let id = a.create_campaign(&f.spec());
    let tool = |n: u32| {
        serde_json::json!({"session_id": "s-b", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": format!("toolu_b_{n}")})
            .to_string()
    };
    // b's first tool call carries the start question the campaign queued;
    // the next ones look for a queued question and find none.
    let first = b.hook("post-tool-use", &id, &tool(0));
    assert!(String::from_utf8_lossy(&first.stdout).contains("start moment"), "{first:?}");
    for n in 1..3 {
        let out = b.hook("post-tool-use", &id, &tool(n));
        assert!(out.status.success() && out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    }
    let out = a.run(&["ask", &id, "Which scenario is slowest, and by how much?"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The announcement reaches b within moments; the next tool calls carry it.
    let mut delivered = String::new();
    for n in 3..40 {
        let out = b.hook("post-tool-use", &id, &tool(n));
        assert!(out.status.success());
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        if !stdout.trim().is_empty() {
            delivered = stdout;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let v: serde_json::Value = serde_json::from_str(delivered.trim())
        .unwrap_or_else(|e| panic!("b never delivered the question ({e}): {delivered:?}"));
    let context = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or_default();
    assert!(context.contains("Which scenario is slowest"), "{v}");
    let qs = a.api_get(&format!("/campaigns/{id}/questions"));
    let human = qs.as_array().unwrap().iter().find(|q| q["source"] == "human").expect("the human question");
    assert_eq!(human["status"], "delivered", "{qs}");
}

/// Hook events posted at the same moment by several sessions are written
/// in groups (one commit for those that arrive together): each call is
/// answered with its own event, and a call posted twice at once (a retry
/// racing the first attempt) is recorded once, both answers naming the
/// same event. On SQLite and, in CI, on PostgreSQL.
#[test]
fn hook_events_posted_at_once_are_each_recorded_once() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let client = reqwest::blocking::Client::builder().no_proxy().build().unwrap();
    let post = |tool_use: &str| -> i64 {
        let body = serde_json::json!({"session_id": format!("s-{}", &tool_use[..1]), "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": tool_use});
        d.post_hook(&client, "post-tool-use", &id, &body)["event_id"].as_i64().expect("an event id")
    };
    // Two threads post the same 100 calls of one group, two others those
    // of another group: every call is sent twice, at about the same time.
    let answers: Vec<Vec<(String, i64)>> = std::thread::scope(|s| {
        let threads: Vec<_> = ["A", "A", "B", "B"]
            .into_iter()
            .map(|group| {
                let post = &post;
                s.spawn(move || {
                    (0..100).map(|i| format!("{group}{i}")).map(|t| (t.clone(), post(&t))).collect::<Vec<_>>()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut by_call: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for (call, event) in answers.into_iter().flatten() {
        by_call.entry(call).or_default().push(event);
    }
    assert_eq!(by_call.len(), 200);
    for (call, events) in &by_call {
        assert_eq!(events.len(), 2);
        assert_eq!(events[0], events[1], "call {call} was answered with two different events");
    }
    let log = d.api_get(&format!("/campaigns/{id}/log?tail=5000"));
    let recorded: Vec<&Value> = log.as_array().unwrap().iter().filter(|e| e["kind"] == "hook.post_tool_use").collect();
    assert_eq!(recorded.len(), 200, "each call recorded once");
    let mut ids: Vec<i64> = recorded.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    ids.sort();
    let mut answered: Vec<i64> = by_call.values().map(|v| v[0]).collect();
    answered.sort();
    assert_eq!(ids, answered, "the answers name the recorded events");
}

/// THREATS.md row 18: a daemon SIGKILLed mid-evaluation cannot end its
/// harness, which held the CPU (or the GPU) through the next evaluations.
/// The next daemon on the same data dir kills what was left running in its
/// evaluation folders before it serves.
#[test]
fn a_harness_left_running_by_a_killed_daemon_is_killed_by_the_next_one() {
    // A harness that runs long, double-forks a helper and records both pids.
    let marker = tempfile::tempdir().unwrap();
    let pids = marker.path().join("pids");
    let run = format!(
        "sh -c 'sleep 120' & echo $! >> {p}; (setsid sh -c \"sleep 120\" & echo $! >> {p}); echo $$ >> {p}; sleep 120 # {{results}}",
        p = pids.display()
    );
    let f = Fixture::with_run("", &run.replace('"', "\\\""));
    // The pids go to a file of the host's, and the point is a harness that
    // outlives its daemon: the sandbox (on by default) hides the first and
    // prevents the second (its PID namespace dies with the daemon), so this
    // campaign opts out.
    let spec = std::fs::read_to_string(f.spec())
        .unwrap()
        .replace("timeout_s = 20", "timeout_s = 300")
        .replace("[harness]\n", "[harness]\nsandbox = \"none\"\n");
    std::fs::write(f.spec(), spec).unwrap();
    let data = f.data_dir();
    let mut d = Daemon::start(&data);
    let id = d.create_campaign(&f.spec());
    // Start an evaluation and kill the daemon while the harness runs.
    let url = format!("{}/api/v1/campaigns/{id}/evaluate", d.url);
    let token = d.token.clone();
    std::thread::spawn(move || {
        let _ = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(200))
            .build()
            .unwrap()
            .post(url)
            .bearer_auth(token)
            .send();
    });
    common::wait_until("the harness wrote its pids", || {
        std::fs::read_to_string(&pids).is_ok_and(|t| t.lines().count() >= 3)
    });
    d.kill();
    let alive = |pid: &str| std::path::Path::new(&format!("/proc/{pid}")).exists() && !zombie(pid);
    let text = std::fs::read_to_string(&pids).unwrap();
    let list: Vec<&str> = text.lines().collect();
    std::thread::sleep(Duration::from_millis(300));
    assert!(list.iter().all(|p| alive(p)), "the harness outlived its daemon (the fault this test is about): {list:?}");
    let _d = Daemon::start(&data);
    common::wait_until("the next daemon killed the leftover harness", || list.iter().all(|p| !alive(p)));
}

fn zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
}

/// THREATS.md rows 11 and 22: a page served from another port of the same
/// host is same-site, so the browser sends it the console's cookie; it must
/// still not act. Writes need the daemon's own origin (port included) and,
/// with the cookie, the CSRF token written into the daemon's pages; the
/// cookie is not the master token; no page can be framed.
#[test]
fn the_console_cookie_cannot_be_used_from_another_origin() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let http = reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let login = http.get(format!("{}/login?token={}", d.url, d.token)).send().unwrap();
    let set_cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    assert!(!cookie.contains(&d.token), "the cookie is the master token: {cookie}");
    let page = http.get(format!("{}/campaigns/{id}", d.url)).header("cookie", &cookie).send().unwrap();
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("frame-ancestors 'none'"));
    let html = page.text().unwrap();
    let csrf = html
        .split("<meta name=\"gadfly-csrf\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| panic!("no CSRF token in the page: {html}"));
    let own_origin = d.url.clone();
    let other_origin = d.url.rsplit_once(':').map(|(h, _)| format!("{h}:1")).unwrap();
    let ask = |origin: Option<&str>, csrf: Option<&str>, cookie: Option<&str>, bearer: Option<&str>| {
        let mut r = http
            .post(format!("{}/api/v1/campaigns/{id}/questions", d.url))
            .header("content-type", "application/json")
            .body(r#"{"text":"Queued by whom?"}"#);
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        if let Some(c) = csrf {
            r = r.header("x-gadfly-csrf", c);
        }
        if let Some(c) = cookie {
            r = r.header("cookie", c);
        }
        if let Some(b) = bearer {
            r = r.bearer_auth(b);
        }
        r.send().unwrap().status().as_u16()
    };
    // The reproduction: another loopback port, the cookie, even the token.
    assert_eq!(ask(Some(&other_origin), Some(csrf), Some(&cookie), None), 403, "another port's page acted");
    // The daemon's own origin but no CSRF token (a form, a no-cors fetch).
    assert_eq!(ask(Some(&own_origin), None, Some(&cookie), None), 403);
    assert_eq!(ask(None, None, Some(&cookie), None), 403);
    assert_eq!(ask(Some(&own_origin), Some("0000"), Some(&cookie), None), 403);
    // The master token as a cookie is no longer a session.
    assert_eq!(ask(Some(&own_origin), Some(csrf), Some(&format!("gadfly_session={}", d.token)), None), 401);
    let queued = d.api_get(&format!("/campaigns/{id}/questions"));
    let ours = |q: &&Value| q["text"] == "Queued by whom?";
    assert_eq!(
        queued.as_array().unwrap().iter().filter(ours).count(),
        0,
        "a refused request queued a question: {queued}"
    );
    // What the console's own page sends, and what the CLI sends, still work.
    assert_eq!(ask(Some(&own_origin), Some(csrf), Some(&cookie), None), 201);
    assert_eq!(ask(None, None, None, Some(&d.token)), 201);
    // Reads with the cookie need no token.
    let r = http.get(format!("{}/api/v1/campaigns/{id}/questions", d.url)).header("cookie", &cookie).send().unwrap();
    assert_eq!(r.status(), 200);
}

/// THREATS.md row 14: the real body limit was 2 MiB (axum's extractor
/// default under the documented 16 MiB layer), and a larger PostToolUse was
/// dropped. A 3 MiB PostToolUse through the real hook is now stored and a
/// 3 MiB stop is judged.
#[test]
fn hook_calls_up_to_the_documented_limit_are_taken_and_larger_ones_spooled() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let big = "x".repeat(3 * 1024 * 1024);
    let tool = serde_json::json!({"session_id": "s-big", "hook_event_name": "PostToolUse", "tool_name": "Write",
        "tool_use_id": "t-big", "tool_input": {"file_path": "data.bin", "content": big}, "tool_response": {}});
    let out = d.hook("post-tool-use", &id, &tool.to_string());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let log = d.api_get(&format!("/campaigns/{id}/log?limit=1000"));
    assert!(
        log.as_array().unwrap().iter().any(|e| e["kind"] == "hook.post_tool_use" && e["session_id"] == "s-big"),
        "the 3 MiB PostToolUse was not stored: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stop = serde_json::json!({"session_id": "s-big", "hook_event_name": "Stop", "stop_hook_active": false,
        "last_assistant_message": big});
    let out = d.hook("stop", &id, &stop.to_string());
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(answer["reason"].as_str().unwrap().contains("you may not stop yet"), "judged, not refused: {answer}");
    // (A call the daemon refuses for its size is spooled, not dropped:
    // `hook::tests::a_call_refused_for_its_size_is_spooled_not_dropped`.)
}

/// THREATS.md row 20: a damaged SQLite file started and reported healthy.
/// The daemon now checks it (`PRAGMA quick_check`) and refuses to serve,
/// saying what is wrong and what to do.
#[test]
fn a_damaged_database_is_refused_at_start_with_a_clear_message() {
    if std::env::var_os("GADFLY_TEST_DATABASE_URL").is_some() {
        eprintln!("SKIPPED on PostgreSQL: the check is SQLite's");
        return;
    }
    let f = Fixture::new("");
    let data = f.data_dir();
    let mut d = Daemon::start(&data);
    for _ in 0..3 {
        d.create_campaign(&f.spec());
    }
    assert!(d.terminate().success());
    // Overwrite pages in the middle of the file (not the header).
    let db = data.join("gadfly.db");
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 8 * 4096, "a database of {} bytes", bytes.len());
    for (i, b) in bytes[2 * 4096..6 * 4096].iter_mut().enumerate() {
        *b = (i * 131 % 251) as u8;
    }
    std::fs::write(&db, bytes).unwrap();
    let err = data.join("serve.err");
    let mut child = common::gadfly()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(status.is_some_and(|s| !s.success()), "the daemon served from a damaged database: {stderr}");
    assert!(stderr.contains("is damaged") && stderr.contains("quick_check"), "{stderr}");
}

/// THREATS.md row 16: forced evaluations with the hook token (each one runs
/// the harness) were unbounded. Once a minute per campaign now; the master
/// token and unforced evaluations are not limited.
#[test]
fn a_hook_token_forces_an_evaluation_at_most_once_a_minute() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let hook_token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let http = reqwest::blocking::Client::new();
    let eval = |token: &str, force: bool| {
        let r = http
            .post(format!("{}/api/v1/campaigns/{id}/evaluate?force={force}", d.url))
            .bearer_auth(token)
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json::<Value>().unwrap())
    };
    let count = || d.api_get(&format!("/campaigns/{id}/evaluations")).as_array().unwrap().len();
    assert_eq!(eval(&hook_token, true).0, 200);
    assert_eq!(count(), 1);
    let (status, body) = eval(&hook_token, true);
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["code"], "too_many");
    assert!(body["message"].as_str().unwrap().contains("once a minute"), "{body}");
    assert_eq!(count(), 1, "the refused call ran no harness");
    // Unforced ones and the master token's are not limited.
    assert_eq!(eval(&hook_token, false).0, 200);
    assert_eq!(eval(&d.token, true).0, 200);
    assert_eq!(count(), 3);
}

/// THREATS.md row 19 (slowloris): 200 connections trickling header bytes
/// and 10 idle ones were all held open for 75 s. Headers must now arrive
/// whole within 10 s, or the daemon closes the connection; meanwhile it
/// answers everyone else.
#[test]
fn connections_that_trickle_their_headers_or_stay_idle_are_closed() {
    use std::io::Read;
    use std::net::TcpStream;
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let addr = d.url.trim_start_matches("http://").to_string();
    let mut trickling = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
        trickling.push(s);
    }
    let idle: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    let closed = |s: &TcpStream| {
        let mut s = s;
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Ok(0) => true,
            Ok(_) => true, // the daemon answered (a 408) and will close
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        }
    };
    let started = std::time::Instant::now();
    let mut all_closed_after = None;
    while started.elapsed() < Duration::from_secs(40) {
        for s in trickling.iter_mut() {
            let _ = s.write_all(b"X-Slow: 1\r\n");
        }
        // Everyone else is still served.
        let health = reqwest::blocking::Client::new()
            .get(format!("{}/api/v1/health", d.url))
            .timeout(Duration::from_secs(5))
            .send();
        assert!(health.is_ok_and(|r| r.status().is_success()), "the daemon stopped answering");
        if trickling.iter().all(closed) && idle.iter().all(closed) {
            all_closed_after = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let after = all_closed_after.expect("connections still open after 40 s");
    eprintln!("all 60 slow or idle connections closed after {:.1} s", after.as_secs_f64());
    assert!(after >= Duration::from_secs(5), "closed too early ({after:?}): not the header deadline");
}

/// Issue 31: a console login must not leave the master token where it
/// lasts. `gadfly console` prints a one-time link (a code good for one
/// login within ten minutes); the login form posts the token in its body;
/// a hook token cannot mint codes. (`/login?token=` still works: it is a
/// contract; tests/console shows what each leaves in Chromium's history.)
#[test]
fn a_console_login_link_is_good_once_and_the_form_keeps_the_token_out_of_urls() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let http = reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let out = d.run(&["console"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let link = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(link.starts_with(&format!("{}/login?code=", d.url)), "{link}");
    assert!(!link.contains(&d.token), "the link carries the master token: {link}");
    let first = http.get(&link).send().unwrap();
    assert_eq!(first.status().as_u16(), 303, "a fresh code logs in");
    assert_eq!(first.headers()["location"], "/");
    assert_eq!(first.headers()["cache-control"], "no-store");
    let cookie = first.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let page = http.get(format!("{}/campaigns/{id}", d.url)).header("cookie", &cookie).send().unwrap();
    assert_eq!(page.status().as_u16(), 200, "the cookie from a code opens the console");
    let again = http.get(&link).send().unwrap();
    assert_eq!(again.status().as_u16(), 401, "a spent code logs nobody in");
    assert!(again.headers().get("set-cookie").is_none());
    assert!(again.text().unwrap().contains("used already"), "the page says why");
    // The form posts the token in its body.
    let form = http
        .post(format!("{}/login", d.url))
        .header("origin", &d.url)
        .form(&[("token", d.token.as_str())])
        .send()
        .unwrap();
    assert_eq!(form.status().as_u16(), 303);
    assert!(form.headers()["set-cookie"].to_str().unwrap().starts_with("gadfly_session="));
    let wrong = http.post(format!("{}/login", d.url)).form(&[("token", "nope")]).send().unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    // A page of another origin cannot log the browser in (login CSRF).
    let other = d.url.rsplit_once(':').map(|(h, _)| format!("{h}:1")).unwrap();
    let forged = http
        .post(format!("{}/login", d.url))
        .header("origin", &other)
        .form(&[("token", d.token.as_str())])
        .send()
        .unwrap();
    assert_eq!(forged.status().as_u16(), 403);
    // The login page's form posts.
    let html = http.get(format!("{}/login", d.url)).send().unwrap().text().unwrap();
    assert!(html.contains("method=\"post\" action=\"/login\""), "{html}");
    // Only the master token mints codes.
    let hook_token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let minted = http.post(format!("{}/api/v1/login-codes", d.url)).bearer_auth(&hook_token).send().unwrap();
    assert_eq!(minted.status().as_u16(), 403, "a hook token minted a login code");
    let none = http.post(format!("{}/api/v1/login-codes", d.url)).send().unwrap();
    assert_eq!(none.status().as_u16(), 401);
}

/// Issue 31: the hook token that replays spooled calls is the agent's too.
/// A replay is taken only in the shape the hook's spool writes: forged
/// shapes (an "allowed" tool call, a "passed" stop, a time in the future or
/// before the campaign, no reason) are refused, naming the field, and
/// record nothing; the hook's own shape is still recorded once.
#[test]
fn a_replay_the_hook_could_not_have_spooled_is_refused() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let hook_token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let http = reqwest::blocking::Client::new();
    let replay = |event: &str, at: &str, outcome: &str, why: &str, call: &str| {
        let res = http
            .post(format!("{}/api/v1/campaigns/{id}/hooks/claude-code/{event}", d.url))
            .query(&[("spooled_at", at), ("outcome", outcome), ("why", why)])
            .bearer_auth(&hook_token)
            .header("x-gadfly-call-id", call)
            .header("content-type", "application/json")
            .body(serde_json::json!({"session_id": "s-forged", "last_assistant_message": "Done."}).to_string())
            .send()
            .unwrap();
        (res.status().as_u16(), res.text().unwrap())
    };
    let now = chrono::Utc::now();
    let recent = (now - chrono::TimeDelta::seconds(30)).to_rfc3339();
    let future = (now + chrono::TimeDelta::days(3)).to_rfc3339();
    let ancient = "2020-01-01T00:00:00Z";
    let forged = [
        ("post-tool-use", recent.as_str(), "allowed", "connection refused", "outcome"),
        ("stop", recent.as_str(), "passed", "connection refused", "outcome"),
        ("stop", future.as_str(), "allowed", "connection refused", "future"),
        ("stop", ancient, "allowed", "connection refused", "before the campaign"),
        ("stop", "last tuesday", "allowed", "connection refused", "RFC 3339"),
        ("stop", recent.as_str(), "allowed", "", "why"),
    ];
    for (n, (event, at, outcome, why, names)) in forged.iter().enumerate() {
        let (status, body) = replay(event, at, outcome, why, &format!("forged-{n}"));
        assert_eq!(status, 400, "forged replay {n} taken: {body}");
        assert!(body.contains("not a call the hook spooled") && body.contains(names), "{n}: {body}");
    }
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops.as_array().unwrap().len(), 0, "a refused replay recorded a stop: {stops}");
    // What the hook writes is still taken, once.
    for _ in 0..2 {
        let (status, body) = replay("stop", &recent, "allowed", "connection refused", "real-1");
        assert_eq!(status, 200, "{body}");
    }
    let stops = d.api_get(&format!("/campaigns/{id}/stops"));
    assert_eq!(stops.as_array().unwrap().len(), 1, "{stops}");
    assert_eq!(stops[0]["decision"], "ungated", "{stops}");
}

/// Issue 29: a stop the hook let through while the daemon was down can be
/// seen twice once it is back: in the agent's transcript (the escape watch)
/// and in the hook's spool, replayed later. It is one ungated stop; another
/// session's replay is still recorded.
#[test]
fn a_stop_seen_in_the_transcript_and_then_replayed_from_the_spool_is_one_ungated_stop() {
    let f = Fixture::new("");
    let data = f.data_dir();
    let config = f.dir.path().join("claude-config");
    let ws = std::fs::canonicalize(f.ws()).unwrap();
    let project = config.join("projects").join("ws");
    std::fs::create_dir_all(&project).unwrap();
    let mut serve = Daemon::serve_command(&data);
    serve.env("GADFLY_CLAUDE_CONFIG_DIRS", &config).env("GADFLY_ESCAPE_GRACE_S", "1");
    let d = Daemon::start_cmd(&data, serve);
    let id = d.create_campaign(&f.spec());
    // The turn ended 25 s ago; the hook, finding no daemon, let it through
    // 20 s later and spooled it.
    let ended = chrono::Utc::now() - chrono::TimeDelta::seconds(25);
    let spooled_at = (ended + chrono::TimeDelta::seconds(20)).to_rfc3339();
    let line = serde_json::json!({
        "type": "assistant", "sessionId": "s-twice", "cwd": ws.display().to_string(), "uuid": "u-end",
        "timestamp": ended.to_rfc3339(),
        "message": {"role": "assistant", "content": [{"type": "text", "text": "All done."}], "stop_reason": "end_turn"}
    });
    std::fs::write(project.join("s-twice.jsonl"), format!("{line}\n")).unwrap();
    let ungated = |session: &str| {
        d.api_get(&format!("/campaigns/{id}/stops"))
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["decision"] == "ungated" && s["session_id"] == session)
            .count()
    };
    common::wait_until("the transcript watch recorded the turn", || ungated("s-twice") == 1);
    let hook_token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let replay = |session: &str, call: &str| {
        let res = reqwest::blocking::Client::new()
            .post(format!("{}/api/v1/campaigns/{id}/hooks/claude-code/stop", d.url))
            .query(&[("spooled_at", spooled_at.as_str()), ("outcome", "allowed"), ("why", "connection refused")])
            .bearer_auth(&hook_token)
            .header("x-gadfly-call-id", call)
            .header("content-type", "application/json")
            .body(serde_json::json!({"session_id": session, "last_assistant_message": "All done."}).to_string())
            .send()
            .unwrap();
        assert_eq!(res.status().as_u16(), 200, "{}", res.text().unwrap());
    };
    replay("s-twice", "spooled-1");
    replay("s-other", "spooled-2");
    assert_eq!(ungated("s-twice"), 1, "the same stop recorded twice");
    assert_eq!(ungated("s-other"), 1, "another session's replay was dropped");
}

/// The daemon's log as written so far (every `daemon-*.log` that
/// [`Daemon::start_cmd`] left in `dir`), without its colour codes.
fn daemon_log(dir: &std::path::Path) -> String {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("daemon-"))
        .collect();
    files.sort();
    let text: String = files.iter().map(|p| std::fs::read_to_string(p).unwrap_or_default()).collect();
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An SGR sequence: ESC [ ... m
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Issue 33: one stop can be followed in the log. The lines written while
/// the hook call is handled, its evaluation's included, carry the hook
/// call's span (campaign, call id, session), and the evaluation's carry
/// its own (campaign, tree, seed, where).
#[test]
fn the_log_lines_of_one_stop_carry_its_call_id_from_the_hook_to_the_evaluation() {
    let f = Fixture::new("");
    let data = f.data_dir();
    let mut serve = Daemon::serve_command(&data);
    serve.env("RUST_LOG", "info,gadfly=debug");
    let d = Daemon::start_cmd(&data, serve);
    let id = d.create_campaign(&f.spec());
    f.set_candidate("a false 50 100\n");
    let res = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/campaigns/{id}/hooks/claude-code/stop", d.url))
        .bearer_auth(&d.token)
        .header("x-gadfly-call-id", "trace-call-1")
        .json(&serde_json::json!({
            "session_id": "sess-trace", "hook_event_name": "Stop", "stop_hook_active": false,
            "last_assistant_message": "Done."
        }))
        .send()
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let reply: Value = res.json().unwrap();
    assert_eq!(reply["decision"], "block", "{reply}");

    let log = daemon_log(f.dir.path());
    let hook_span =
        format!("hook{{campaign={id} agent=claude-code event=stop call_id=trace-call-1 session=sess-trace}}");
    let of_the_call: Vec<&str> = log.lines().filter(|l| l.contains(&hook_span)).collect();
    let answered = of_the_call.iter().find(|l| l.contains("hook call answered"));
    assert!(answered.is_some_and(|l| l.contains("decision=\"block\"")), "no answer line in the hook's span:\n{log}");
    assert!(of_the_call.iter().any(|l| l.contains("hook call recorded")), "{log}");
    let evaluated = of_the_call
        .iter()
        .find(|l| l.contains(&format!("}}:evaluation{{campaign={id} tree=")) && l.contains(" evaluated"))
        .unwrap_or_else(|| panic!("the evaluation's line is not in the hook call's span:\n{log}"));
    // The evaluation's seed is its secret one (issue 45), never the former constant.
    assert!(evaluated.contains("where=local"), "{evaluated}");
    let seed = evaluated.split(" seed=").nth(1).and_then(|r| r.split(['}', ' ']).next()).unwrap_or_default();
    assert!(seed.parse::<u64>().is_ok_and(|s| s != 1), "{evaluated}");
    // Another call's lines carry its own call id, not this one's.
    assert!(!log.lines().any(|l| l.contains("call_id=trace-call-1") && !l.contains(&hook_span)), "{log}");
}

/// Issue 33: at SIGTERM the daemon stops every background task it runs (the
/// watches, the lease keeper, the relay, the moment worker, a transcript
/// follower, an agent run) and waits for them, for a bounded time: none is
/// left, and the bound is not what ended the wait.
#[test]
fn the_daemon_stops_every_background_task_at_shutdown_within_its_bound() {
    const AGENT: &str = "#!/bin/sh\nsleep 60\n";
    let f = Fixture::new(
        "[agent]\nkind = \"command\"\nstart = \"sh ../agent.sh {prompt}\"\nresume = \"sh ../agent.sh {message}\"\n",
    );
    std::fs::write(f.dir.path().join("agent.sh"), AGENT).unwrap();
    let bank = f.dir.path().join("bank");
    std::fs::create_dir_all(&bank).unwrap();
    for e in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/question_bank")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            std::fs::copy(&p, bank.join(p.file_name().unwrap())).unwrap();
        }
    }
    let data = f.data_dir();
    let mut serve = Daemon::serve_command(&data);
    serve.arg("--bank-dir").arg(&bank).env("RUST_LOG", "info,gadfly=debug");
    let mut d = Daemon::start_cmd(&data, serve);
    let id = d.create_campaign(&f.spec());
    // An attached session: its transcript is followed.
    let transcript = f.dir.path().join("sess-bg.jsonl");
    std::fs::write(&transcript, "").unwrap();
    let start = serde_json::json!({"session_id": "sess-bg", "hook_event_name": "SessionStart",
        "transcript_path": transcript.display().to_string()});
    d.post_hook(&reqwest::blocking::Client::new(), "session-start", &id, &start);
    let out = d.run(&["run", &id, "--agent", "command", "--detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let started = |name: &str| {
        daemon_log(f.dir.path())
            .lines()
            .any(|l| l.contains(&format!("task{{name={name}")) && l.contains("task started"))
    };
    for name in
        ["moment-worker", "bank-watch", "lease-keeper", "event-relay", "escape-watch", "transcript-follower", "run "]
    {
        common::wait_until(&format!("the task {name} to start"), || started(name));
    }
    assert_eq!(d.api_get(&format!("/campaigns/{id}/runs"))[0]["status"], "running");
    // Let the agent's process start.
    std::thread::sleep(Duration::from_millis(500));

    let status = d.terminate();
    assert!(status.success(), "graceful shutdown on SIGTERM: {status:?}");
    let log = daemon_log(f.dir.path());
    assert!(!log.contains("background tasks still running at shutdown"), "the bound ran out:\n{log}");
    assert!(log.contains("every background task stopped"), "{log}");
    assert!(log.contains("agent run suspended for the daemon's shutdown"), "{log}");
    // Every task that started ended.
    let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    assert_eq!(count("task started"), count("task ended"), "{log}");
    assert!(log.contains("gadfly daemon stopped"), "{log}");
    if std::env::var_os("GADFLY_TEST_SHOW_LOG").is_some() {
        eprintln!("{log}");
    }
}

/// Issue 33: a stored body that does not decode (a damaged row, a hand
/// edit) is an error naming its table and row when it is read alone, never
/// a silent default; the scans over a list skip it, say so once in the
/// log, and keep going. On SQLite, or on PostgreSQL when the tests use it.
#[test]
fn a_stored_body_that_does_not_decode_is_named_and_list_scans_skip_it() {
    let f = Fixture::new("");
    let data = f.data_dir();
    let url = common::postgres_for(&data).unwrap_or_else(|| format!("sqlite:{}", data.join("gadfly.db").display()));
    let d = Daemon::start(&data);
    let id = d.create_campaign(&f.spec());
    let candidates = [
        "a true 50 100\nb true 40 100\nc true 80 100\n",
        "a true 60 100\nb true 40 100\nc true 80 100\n",
        "a true 70 100\nb true 40 100\nc true 80 100\n",
    ];
    let mut evals = Vec::new();
    for c in candidates {
        f.set_candidate(c);
        let out = d.run(&["eval", &id, "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let e: Value = serde_json::from_slice(&out.stdout).unwrap();
        evals.push(e["id"].as_i64().unwrap());
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    sqlx::any::install_default_drivers();
    let pool = rt.block_on(sqlx::AnyPool::connect(&url)).unwrap();
    let damage = |sql: &str, text: &str, id: i64| {
        let done = rt.block_on(sqlx::query(sql).bind(text.to_string()).bind(id).execute(&pool)).unwrap();
        assert_eq!(done.rows_affected(), 1, "{sql}");
    };
    damage("update evaluations set body = $1 where id = $2", r#"{"tree": 1}"#, evals[1]);

    // The list skips the damaged row and keeps going, warning once.
    for _ in 0..2 {
        let listed = d.api_get(&format!("/campaigns/{id}/evaluations"));
        let ids: Vec<i64> = listed.as_array().unwrap().iter().map(|e| e["id"].as_i64().unwrap()).collect();
        assert_eq!(ids, vec![evals[0], evals[2]]);
    }
    let warned = |row: i64| {
        daemon_log(f.dir.path())
            .lines()
            .filter(|l| l.contains("a stored row does not decode: skipped") && l.contains(&format!("id={row} ")))
            .count()
    };
    assert_eq!(warned(evals[1]), 1, "{}", daemon_log(f.dir.path()));
    // Read alone (the cached answer for its tree), it is an error naming the row.
    f.set_candidate(candidates[1]);
    let out = d.run(&["eval", &id, "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a damaged evaluation was answered: {}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains(&format!("evaluations row {} does not decode (body: invalid type", evals[1])), "{err}");
    // The campaign pages show a campaign whose latest evaluation is damaged as having none.
    damage("update evaluations set body = $1 where id = $2", "not json", evals[2]);
    assert!(d.api_get(&format!("/campaigns/{id}"))["latest_evaluation"].is_null());
    let list = d.api_get("/campaigns");
    assert_eq!(list[0]["id"], id.as_str());
    assert!(list[0]["holds"].is_null());
    assert_eq!(d.api_get(&format!("/campaigns/{id}/evaluations")).as_array().unwrap().len(), 1);

    // A campaign's spec, read by the store (as a worker reads it).
    rt.block_on(async {
        let store = gadfly::store::Store::connect(&url).await.unwrap();
        let (_, spec, _) = store.get_campaign_spec(&id).await.unwrap().unwrap();
        assert_eq!(spec.name, "fixture");
        sqlx::query("update campaigns set spec_json = $1 where id = $2")
            .bind("{}")
            .bind(&id)
            .execute(&pool)
            .await
            .unwrap();
        let e = store.get_campaign_spec(&id).await.unwrap_err();
        match e.downcast_ref::<gadfly::store::StoreError>() {
            Some(gadfly::store::StoreError::Corrupt { table, id: row, message }) => {
                assert_eq!((*table, row.as_str()), ("campaigns", id.as_str()));
                assert!(message.starts_with("spec_json: missing field"), "{message}");
            }
            None => panic!("not a Corrupt error: {e:#}"),
        }
        store.close().await;
        pool.close().await;
    });
}

/// Issue 49, item 1: the spool keeps each campaign's records apart. With
/// the daemon down, hooks of two campaigns spool their calls in one spool
/// (outside the data dir: the daemon does not import it at start); back
/// up, a hook of campaign B replays B's records only, with B's token, and
/// leaves A's pending (not refused, not set aside); A's next hook replays
/// A's. Every call is recorded once, under its own campaign.
#[test]
fn spooled_records_of_two_campaigns_are_each_replayed_by_their_own_hooks() {
    let f = Fixture::new("");
    let g = Fixture::new("");
    let data = f.data_dir();
    let mut d = Daemon::start(&data);
    let a = d.create_campaign(&f.spec());
    let b = d.create_campaign(&g.spec());
    let token =
        |d: &Daemon, id: &str| d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    let (ta, tb) = (token(&d, &a), token(&d, &b));
    let spool = tempfile::tempdir().unwrap();
    let hook = |url: &str, id: &str, tok: &str, n: usize| {
        let payload = serde_json::json!({"session_id": format!("s-{id}"), "hook_event_name": "PostToolUse",
            "tool_name": "Bash", "tool_use_id": format!("toolu_{id}_{n}")});
        let mut child = common::gadfly()
            .args(["hook", "claude-code", "post-tool-use", "--campaign", id, "--deadline", "2"])
            .env("GADFLY_URL", url)
            .env("GADFLY_TOKEN", tok)
            .env("GADFLY_SPOOL_DIR", spool.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let down = d.url.clone();
    d.kill();
    assert!(hook(&down, &a, &ta, 1).status.success());
    assert!(hook(&down, &b, &tb, 1).status.success());
    assert_eq!(spooled_files(spool.path()).len(), 2, "both calls spooled");

    let d = Daemon::start(&data);
    assert!(hook(&d.url, &b, &tb, 2).status.success());
    let left = spooled_files(spool.path());
    assert_eq!(left.len(), 1, "B's hook replayed B's record only: {left:?}");
    let aside: Vec<_> = std::fs::read_dir(spool.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "rejected"))
        .collect();
    assert!(aside.is_empty(), "nothing was set aside as refused: {aside:?}");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&left[0]).unwrap()).unwrap();
    assert_eq!(kept["campaign"], a.as_str(), "{kept}");
    // A hook of A's campaign holding a wrong token (stale, forged) is
    // refused, replays nothing and discards nothing: A's record stays
    // pending, nothing is set aside, and its own call is not kept either.
    let refused = hook(&d.url, &a, "not-the-campaigns-token", 9);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("gadfly hook"), "{refused:?}");
    assert_eq!(spooled_files(spool.path()), left, "the refused hook left A's record where it was");
    let aside = std::fs::read_dir(spool.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "rejected"));
    assert_eq!(aside.count(), 0, "a refused token sets nothing aside");
    assert!(hook(&d.url, &a, &ta, 2).status.success());
    assert!(spooled_files(spool.path()).is_empty(), "A's hook replayed A's record");
    for id in [&a, &b] {
        let log = d.api_get(&format!("/campaigns/{id}/log?limit=1000"));
        let calls: Vec<String> = log
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "hook.post_tool_use")
            .map(|e| e["payload"]["payload"]["tool_use_id"].as_str().unwrap_or("?").to_string())
            .collect();
        assert_eq!(calls.len(), 2, "{id}: both calls recorded once, under their campaign: {calls:?}");
    }
}
