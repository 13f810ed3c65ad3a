//! Soak: many agent sessions sending hook events at once for a while, to a
//! real daemon on loopback. Records what a person running gadfly for days
//! wants to know: throughput, latency percentiles, errors, the daemon's
//! resident memory over the run, and that every answered call is stored
//! exactly once. Latency and memory are printed, never asserted (the
//! machines are shared and noisy); errors and lost calls are asserted.
//!
//! CI runs the short form (100 sessions, 5 s). The long form:
//!
//!     GADFLY_SOAK_SECONDS=60 cargo test --release --test soak -- --nocapture
//!
//! `GADFLY_SOAK_SESSIONS` changes the number of sessions. Each session makes
//! one hook call at a time, like an agent: a post-tool-use per tool call,
//! with a short think time, and a stop every 20 calls (judged on a cached
//! evaluation).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Daemon, Fixture, ALL_PASS};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[test]
fn many_sessions_send_hook_events_for_a_while_and_nothing_is_lost() {
    let sessions = env_or("GADFLY_SOAK_SESSIONS", 100) as usize;
    let seconds = env_or("GADFLY_SOAK_SECONDS", 5);
    let f = Fixture::new("");
    f.set_candidate(ALL_PASS);
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    let pid = d.child.id();
    let backend = if std::env::var("GADFLY_TEST_DATABASE_URL").is_ok() { "postgres" } else { "sqlite" };

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let rss_start = rss_kib(pid);
    let peak = Arc::new(AtomicU64::new(rss_start));
    let (latencies, errors, calls, stops, elapsed) = runtime.block_on(async {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).no_proxy().build().unwrap();
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let sampler = {
            let peak = peak.clone();
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        let mut tasks = Vec::new();
        for s in 0..sessions {
            let (client, url, token, id) = (client.clone(), d.url.clone(), d.token.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut errors = Vec::new();
                let mut stops = 0u64;
                let mut n = 0u64;
                while Instant::now() < deadline {
                    n += 1;
                    let stop = n % 20 == 0;
                    let (event, body) = if stop {
                        stops += 1;
                        ("stop", serde_json::json!({"session_id": format!("soak-{s}"), "hook_event_name": "Stop", "last_assistant_message": format!("Done ({n}).")}))
                    } else {
                        (
                            "post-tool-use",
                            serde_json::json!({"session_id": format!("soak-{s}"), "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": format!("toolu_{s}_{n}")}),
                        )
                    };
                    let t = Instant::now();
                    let r = client
                        .post(format!("{url}/api/v1/campaigns/{id}/hooks/claude-code/{event}"))
                        .bearer_auth(&token)
                        .header("x-gadfly-call-id", format!("soak-{s}-{n}"))
                        .json(&body)
                        .send()
                        .await;
                    let ok = match r {
                        Ok(resp) if resp.status().is_success() => resp.bytes().await.is_ok(),
                        Ok(resp) => {
                            errors.push(format!("HTTP {}", resp.status()));
                            false
                        }
                        Err(e) => {
                            errors.push(e.to_string());
                            false
                        }
                    };
                    if ok {
                        lat.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (lat, errors, n, stops)
            }));
        }
        let mut latencies = Vec::new();
        let mut errors = Vec::new();
        let (mut calls, mut stops) = (0u64, 0u64);
        for t in tasks {
            let (l, e, n, s) = t.await.unwrap();
            latencies.extend(l);
            errors.extend(e);
            calls += n;
            stops += s;
        }
        let elapsed = started.elapsed().as_secs_f64();
        sampler.abort();
        (latencies, errors, calls, stops, elapsed)
    });
    let rss_end = rss_kib(pid);
    let mut sorted = latencies.clone();
    sorted.sort_by(f64::total_cmp);

    // Every answered call is in the store, once.
    // The whole log, page by page (the API caps a page).
    let mut events: Vec<serde_json::Value> = Vec::new();
    loop {
        let after = events.last().map(|e| e["id"].as_i64().unwrap()).unwrap_or(0);
        let page = d.api_get(&format!("/campaigns/{id}/log?after={after}&limit=5000"));
        let page = page.as_array().unwrap();
        if page.is_empty() {
            break;
        }
        events.extend(page.iter().cloned());
    }
    let posts = events.iter().filter(|e| e["kind"] == "hook.post_tool_use").count() as u64;
    let stored_stops = events.iter().filter(|e| e["kind"] == "hook.stop").count() as u64;
    let decisions = d.api_get(&format!("/campaigns/{id}/stops")).as_array().unwrap().len() as u64;

    println!(
        "soak ({backend}, debug build unless --release): {sessions} sessions for {elapsed:.1} s\n  \
         calls {calls} ({:.0}/s), errors {}\n  \
         latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}\n  \
         daemon RSS MiB: start {:.1}  peak {:.1}  end {:.1}  growth {:+.1}\n  \
         stored: post-tool-use {posts}, stop {stored_stops} ({decisions} judged)",
        calls as f64 / elapsed,
        errors.len(),
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.9),
        percentile(&sorted, 0.99),
        sorted.last().copied().unwrap_or(f64::NAN),
        rss_start as f64 / 1024.0,
        peak.load(Ordering::Relaxed) as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        (rss_end as f64 - rss_start as f64) / 1024.0,
    );
    assert!(errors.is_empty(), "{} errors, first: {:?}", errors.len(), errors.first());
    assert_eq!(posts + stored_stops, calls, "every call stored exactly once");
    assert_eq!(stored_stops, stops);
    assert_eq!(decisions, stops, "every stop judged once");
    assert!(calls >= sessions as u64, "every session made calls");
}
