//! Prometheus metrics at /metrics: what a stop attempt, an evaluation and a
//! question leave there, and that it takes the master token.

mod common;

use std::process::Command;

use common::{reason, Daemon, Fixture};

fn scrape(d: &Daemon, token: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("{}/metrics", d.url))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap(), body.to_string())
}

/// The value of the sample whose line starts with `prefix`.
fn sample(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample {prefix} in:\n{text}"))
}

#[test]
fn a_blocked_stop_shows_in_the_metrics() {
    let f = Fixture::new("");
    let d = Daemon::start(&f.data_dir());
    let id = d.create_campaign(&f.spec());
    assert!(reason(&d.stop(&id, "Done.")).contains("you may not stop yet"));
    let (code, text) = scrape(&d, &d.token);
    assert_eq!(code, 200, "{text}");
    assert_eq!(sample(&text, "gadfly_hook_calls_total{event=\"stop\",outcome=\"ok\"}"), 1.0);
    assert_eq!(sample(&text, "gadfly_decisions_total{decision=\"block\"}"), 1.0);
    assert_eq!(sample(&text, "gadfly_evaluations_total{result=\"fails\"}"), 1.0);
    assert_eq!(sample(&text, "gadfly_hook_duration_seconds_count{event=\"stop\"}"), 1.0);
    // The start question waits (no hook could carry it yet); the stop's was delivered.
    assert_eq!(sample(&text, "gadfly_questions_waiting"), 1.0);
    assert!(sample(&text, "gadfly_questions_total{state=\"delivered\",source=\"bank\"}") >= 1.0);
    assert!(sample(&text, "gadfly_events_recorded_total") >= 4.0);
    assert!(text.trim_end().ends_with("# EOF"));
    // The master token only: not a hook token, not none.
    let hook_token = d.api_get(&format!("/campaigns/{id}/hook-token"))["token"].as_str().unwrap().to_string();
    assert_eq!(scrape(&d, &hook_token).0, 403);
    assert_eq!(scrape(&d, "wrong").0, 401);
}
