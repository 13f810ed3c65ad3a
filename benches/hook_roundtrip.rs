//! The Stop hook's round trip on a cached evaluation, as an agent pays it:
//! spawn the hook command, hand it the payload, read its answer. Side by
//! side, in one run and interleaved: `gadfly hook`, a minimal Python hook
//! (urllib, the way most hook authors write one) and a shell+curl hook
//! making the same HTTP call. Prints figures; asserts none.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/goals.rs"]
mod goals;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PYTHON_HOOK: &str = r#"
import json, os, sys, urllib.request
payload = sys.stdin.buffer.read()
req = urllib.request.Request(
    os.environ["GADFLY_URL"] + "/api/v1/campaigns/" + sys.argv[1] + "/hooks/claude-code/stop",
    data=payload, method="POST",
    headers={"Authorization": "Bearer " + os.environ["GADFLY_TOKEN"], "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=600) as resp:
    out = json.load(resp).get("output")
if out is not None:
    print(json.dumps(out))
"#;

const CURL_HOOK: &str = r#"curl -s -X POST -H "Authorization: Bearer $GADFLY_TOKEN" -H 'Content-Type: application/json' --data-binary @- "$GADFLY_URL/api/v1/campaigns/$1/hooks/claude-code/$2" >/dev/null"#;

fn time_one(mut cmd: Command, payload: &[u8]) -> Duration {
    let start = Instant::now();
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn hook");
    child.stdin.take().unwrap().write_all(payload).unwrap();
    let out = child.wait_with_output().unwrap();
    let elapsed = start.elapsed();
    assert!(out.status.success(), "hook failed");
    elapsed
}

fn stats(samples: &mut [Duration]) -> (f64, f64, f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let pct = |p: f64| ms(samples[((samples.len() as f64 - 1.0) * p).round() as usize]);
    (pct(0.5), pct(0.99), ms(samples[0]), pct(0.75) - pct(0.25))
}

/// The daemon's count of `event` hook calls and their total time in
/// seconds, from its metrics (zeros when it has none).
fn hook_time(d: &common::Daemon, event: &str) -> (f64, f64) {
    let metrics = reqwest::blocking::Client::new()
        .get(format!("{}/metrics", d.url))
        .bearer_auth(&d.token)
        .send()
        .and_then(|r| r.text())
        .unwrap_or_default();
    common::hook_time_by_event(&metrics)
        .into_iter()
        .find(|(e, _, _)| e == event)
        .map(|(_, n, mean_ms)| (n, n * mean_ms / 1e3))
        .unwrap_or((0.0, 0.0))
}

fn main() {
    let calls: usize = std::env::var("BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let f = common::Fixture::new("");
    f.set_candidate(common::ALL_PASS);
    let d = common::Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    assert_eq!(d.stop(&id, "warm the cache"), None);
    let dir = tempfile::tempdir().unwrap();
    let py = dir.path().join("hook.py");
    std::fs::write(&py, PYTHON_HOOK).unwrap();
    let sh = dir.path().join("hook.sh");
    std::fs::write(&sh, CURL_HOOK).unwrap();
    let payload = serde_json::json!({
        "session_id": "bench", "transcript_path": "/tmp/x.jsonl", "cwd": "/tmp",
        "hook_event_name": "Stop", "stop_hook_active": false, "tool_name": "Bash",
        "last_assistant_message": "Done: every scenario is faster.",
    })
    .to_string();

    // BENCH_HOOK_EVENTS: the events timed (every hook gadfly installs that
    // Claude Code runs in an ordinary turn, by default).
    let events: Vec<String> = std::env::var("BENCH_HOOK_EVENTS")
        .unwrap_or_else(|_| "stop,post-tool-use,user-prompt-submit,session-start".into())
        .split(',')
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect();
    for event in events.iter().map(String::as_str) {
        let make = |kind: usize| -> Command {
            let mut c = match kind {
                0 => {
                    let mut c = d.cmd();
                    c.args(["hook", "claude-code", event, "--campaign", &id]);
                    c
                }
                1 => {
                    let mut c = Command::new("python3");
                    c.arg(&py).arg(&id).arg(event);
                    c
                }
                _ => {
                    let mut c = Command::new("sh");
                    c.arg(&sh).arg(&id).arg(event);
                    c
                }
            };
            c.env("GADFLY_URL", &d.url).env("GADFLY_TOKEN", &d.token);
            c
        };
        let names = ["gadfly hook (Rust)", "python3 + urllib", "sh + curl"];
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); 3];
        for _ in 0..5 {
            for k in 0..3 {
                time_one(make(k), payload.as_bytes());
            }
        }
        let (n0, sum0) = hook_time(&d, event);
        for _ in 0..calls {
            for (k, s) in samples.iter_mut().enumerate() {
                s.push(time_one(make(k), payload.as_bytes()));
            }
        }
        println!(
            "\n{event} hook round trip{}, {calls} calls each, interleaved (spawn + HTTP + answer)",
            if event == "stop" { " on a cached evaluation" } else { "" }
        );
        println!("{:<22} {:>10} {:>10} {:>10} {:>10}", "hook", "median ms", "p99 ms", "min ms", "IQR ms");
        let mut medians = Vec::new();
        for (k, s) in samples.iter_mut().enumerate() {
            let (med, p99, min, iqr) = stats(s);
            medians.push(med);
            println!("{:<22} {:>10.2} {:>10.2} {:>10.2} {:>10.2}", names[k], med, p99, min, iqr);
        }
        let faster = medians[1] / medians[0];
        println!("python/gadfly median ratio: {faster:.1}x; curl/gadfly: {:.1}x", medians[2] / medians[0]);
        goals::verdict(
            &format!("{event} hook round trip at least 10x faster than a Python hook and under 5 ms median"),
            &format!("{:.2} ms median, {faster:.1}x faster than the Python hook", medians[0]),
            Some(faster >= 10.0 && medians[0] < 5.0),
        );
        // The daemon's own share: its mean time per call of this event
        // over the timed calls (all three hooks), from its metrics.
        let (n1, sum1) = hook_time(&d, event);
        let (n, sum) = (n1 - n0, sum1 - sum0);
        if n > 0.0 {
            println!(
                "the daemon's own time per {event} call (its hook_duration_seconds metric, {n:.0} calls): mean {:.2} ms",
                sum / n * 1e3
            );
        }
    }
}
