//! Notifications (`[notify]`, see [`crate::campaign::NotifySpec`]): which
//! recorded events a person is told of, the JSON a webhook gets, and its
//! signature. Pure: events in, notifications and bytes out. Delivering
//! them (in the background, retried, each attempt recorded) is
//! `app/notify.rs`.
//!
//! A webhook gets a `POST` with a JSON body ([`body`]) and these headers:
//!
//! - `X-Gadfly-Timestamp`: the Unix time of the attempt, in seconds;
//! - `X-Gadfly-Signature`: `sha256=` and the lowercase hex HMAC-SHA256,
//!   under the secret, of the timestamp, a `.`, and the body's bytes;
//! - `X-Gadfly-Delivery`: the notification's id, the same for every
//!   attempt (a receiver drops a second copy with it);
//! - `X-Gadfly-Notification`: the notification's kind (`plateau`, ...).
//!
//! A receiver checks the signature over the bytes it received (before any
//! JSON parsing), compares it in constant time, and refuses a timestamp
//! more than a few minutes from its own clock: a captured request replayed
//! later fails, and the timestamp cannot be changed without the secret
//! ([`verify`] does all three).

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::events::kind;

pub const SIGNATURE_HEADER: &str = "X-Gadfly-Signature";
pub const TIMESTAMP_HEADER: &str = "X-Gadfly-Timestamp";
pub const DELIVERY_HEADER: &str = "X-Gadfly-Delivery";
pub const KIND_HEADER: &str = "X-Gadfly-Notification";

/// How far a receiver lets a timestamp be from its clock, by default.
pub const DEFAULT_TOLERANCE_S: i64 = 300;

/// The moments that are claims.
const CLAIM_MOMENTS: &[&str] = &["limit_claim", "completion_claim", "correctness_dismissal"];

/// A recorded event that makes a notification: its kind and a line for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub kind: &'static str,
    pub text: String,
}

/// True for the event kinds that may make a notification (the others are
/// not worth handing to the notifier).
pub fn may_notify(event_kind: &str) -> bool {
    matches!(
        event_kind,
        kind::MOMENT
            | kind::MOMENT_ESCALATED
            | kind::DECISION
            | kind::STOP_UNGATED
            | kind::VIOLATION
            | kind::RUN_ENDED
            | kind::NOTIFY_CONFIGURED
            | kind::QUESTION_ESCALATED
    )
}

fn short(v: &Value, n: usize) -> String {
    let s = v.as_str().unwrap_or("");
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

/// The notification an event makes, if any. `streak` is the campaign's
/// count of blocked stop attempts in a row, kept by the caller: a
/// `decision` counts it (a block adds one, anything else starts it over),
/// and a `block_streak` notification goes at every `block_streak`-th block.
pub fn notification_of(event_kind: &str, payload: &Value, block_streak: u32, streak: &mut u32) -> Option<Notification> {
    let n = |kind: &'static str, text: String| Some(Notification { kind, text });
    match event_kind {
        kind::MOMENT => {
            let moment = payload["moment"].as_str().unwrap_or("");
            if moment == "plateau" {
                return n("plateau", format!("Plateau: {}", short(&payload["detail"], 300)));
            }
            if CLAIM_MOMENTS.contains(&moment) {
                let quote = payload["quote"].as_str().map(|_| short(&payload["quote"], 300));
                let what = moment.replace('_', " ");
                return n(
                    "claim",
                    match quote {
                        Some(q) if !q.is_empty() => format!("The agent makes a {what}: “{q}”"),
                        _ => format!("The agent makes a {what}: {}", short(&payload["detail"], 300)),
                    },
                );
            }
            None
        }
        kind::MOMENT_ESCALATED => n(
            "claim",
            format!(
                "The agent repeats a {} without fresh evidence: “{}”",
                payload["moment"].as_str().unwrap_or("claim").replace('_', " "),
                short(&payload["quote"], 300)
            ),
        ),
        kind::DECISION => {
            if payload["decision"] != "block" {
                *streak = 0;
                return None;
            }
            *streak += 1;
            (block_streak > 0 && streak.is_multiple_of(block_streak))
                .then(|| match *streak {
                    1 => "A stop attempt was blocked: the predicate still fails".to_string(),
                    k => format!("{k} stop attempts in a row were blocked: the predicate still fails"),
                })
                .and_then(|t| n("block_streak", t))
        }
        kind::STOP_UNGATED => {
            n("ungated_stop", format!("A turn ended without the gate's decision: {}", short(&payload["why"], 300)))
        }
        kind::VIOLATION => {
            let changes: Vec<String> =
                payload["changes"].as_array().into_iter().flatten().take(3).map(|c| short(c, 200)).collect();
            let what = match payload["kind"].as_str() {
                Some("hooks_changed") => "gadfly's hooks were changed",
                Some("turn_ended_ungated") => "a turn ended with no Stop hook call",
                _ => "a violation",
            };
            n("violation", format!("Violation: {what}: {}", changes.join("; ")))
        }
        kind::RUN_ENDED => n(
            "run_ended",
            format!(
                "Run {} ended ({}): {}",
                payload["run_id"],
                short(&payload["outcome"], 40),
                short(&payload["detail"], 300)
            ),
        ),
        kind::QUESTION_ESCALATED => n(
            "question_escalated",
            format!(
                "Question {} went unanswered for {} turns, asked again {} time(s): “{}”",
                payload["question_id"],
                payload["turns"],
                payload["reasks"].as_array().map_or(0, Vec::len),
                short(&payload["text"], 300)
            ),
        ),
        _ => None,
    }
}

/// What a notification tells of: the campaign and the event.
#[derive(Debug, Clone)]
pub struct About<'a> {
    pub campaign_id: &'a str,
    pub campaign_name: &'a str,
    pub event_id: i64,
    pub event_kind: &'a str,
    pub session_id: Option<&'a str>,
    pub created_at: &'a str,
    pub payload: &'a Value,
    /// The console's address (no trailing `/`).
    pub console_url: &'a str,
}

/// The id of notification `n` of an event to webhook `webhook`: the same
/// for every attempt.
pub fn delivery_id(campaign_id: &str, event_id: i64, webhook: usize) -> String {
    format!("{campaign_id}:{event_id}:{webhook}")
}

/// The campaign's page on the console.
pub fn link(console_url: &str, campaign_id: &str) -> String {
    let id: String = campaign_id
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("{}/campaigns/{id}", console_url.trim_end_matches('/'))
}

/// The JSON body a webhook gets.
pub fn body(n: &Notification, about: &About<'_>, delivery: &str) -> Value {
    json!({
        "gadfly": 1,
        "delivery": delivery,
        "notification": n.kind,
        "text": n.text,
        "campaign": {"id": about.campaign_id, "name": about.campaign_name},
        "event": {
            "id": about.event_id,
            "kind": about.event_kind,
            "session_id": about.session_id,
            "created_at": about.created_at,
            "payload": about.payload,
        },
        "link": link(about.console_url, about.campaign_id),
    })
}

/// The `X-Gadfly-Signature` value of `body` sent at `timestamp`.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Why a delivery's signature does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the timestamp is not a whole number of seconds")]
    BadTimestamp,
    #[error("the timestamp is {0} s away from now: a replay, or a clock far off")]
    Stale(i64),
    #[error("the signature is not `sha256=` and 64 hex digits")]
    BadSignature,
    #[error("the signature does not match the body and timestamp under this secret")]
    Mismatch,
}

/// Checks a delivery as a receiver does: the signature over the timestamp
/// and the raw body, in constant time, and the timestamp within
/// `tolerance_s` of `now` (Unix seconds).
pub fn verify(
    secret: &[u8],
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now: i64,
    tolerance_s: i64,
) -> Result<(), VerifyError> {
    let ts: i64 = timestamp.trim().parse().map_err(|_| VerifyError::BadTimestamp)?;
    let off = now.saturating_sub(ts);
    if off.abs() > tolerance_s {
        return Err(VerifyError::Stale(off));
    }
    let hex_part = signature.trim().strip_prefix("sha256=").ok_or(VerifyError::BadSignature)?;
    let given = hex::decode(hex_part).map_err(|_| VerifyError::BadSignature)?;
    if given.len() != 32 {
        return Err(VerifyError::BadSignature);
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(ts.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&given).map_err(|_| VerifyError::Mismatch)
}

/// The wait before attempt `attempt + 1`: 1 s, 2 s, 4 s, ... at most a minute.
pub fn backoff(attempt: u32) -> std::time::Duration {
    std::time::Duration::from_secs((1u64 << attempt.saturating_sub(1).min(6)).min(60))
}

/// Whether an HTTP status is worth another attempt: a server error, a
/// timeout or a "too many requests" (not any other 4xx: the request itself
/// is wrong, and another attempt sends it again).
pub fn retryable(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

/// A webhook URL as the log and the console show it: its scheme, host and
/// port, with the path and query (which often hold a token) hidden.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => {
            let host = u.host_str().unwrap_or("");
            let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
            let hidden = (u.path() != "/" && !u.path().is_empty()) || u.query().is_some();
            format!("{}://{host}{port}{}", u.scheme(), if hidden { "/…" } else { "/" })
        }
        Err(_) => "(not a URL)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_and_a_change_anywhere_does_not() {
        let (secret, body) = (b"s3cr3t".as_slice(), br#"{"notification":"plateau"}"#.as_slice());
        let sig = sign(secret, 1_700_000_000, body);
        // The known answer, as `printf '1700000000.{"notification":"plateau"}' | openssl dgst -sha256 -hmac s3cr3t` gives it.
        assert_eq!(sig, "sha256=06d5ed6822d5a5dfca2f0cc2fb98e584d8e6ebbf4f837c1adf9c6a20f2d77cab");
        assert_eq!(verify(secret, "1700000000", &sig, body, 1_700_000_010, 300), Ok(()));
        assert_eq!(verify(b"other", "1700000000", &sig, body, 1_700_000_010, 300), Err(VerifyError::Mismatch));
        assert_eq!(
            verify(secret, "1700000000", &sig, br#"{"notification":"plateaU"}"#, 1_700_000_010, 300),
            Err(VerifyError::Mismatch)
        );
        // A replay with a fresh timestamp fails: the timestamp is signed.
        assert_eq!(verify(secret, "1700000500", &sig, body, 1_700_000_500, 300), Err(VerifyError::Mismatch));
        // A replay later with the old one is stale.
        assert_eq!(verify(secret, "1700000000", &sig, body, 1_700_001_000, 300), Err(VerifyError::Stale(1000)));
        assert_eq!(verify(secret, "yesterday", &sig, body, 0, 300), Err(VerifyError::BadTimestamp));
        assert_eq!(verify(secret, "1700000000", "sha1=ab", body, 1_700_000_000, 300), Err(VerifyError::BadSignature));
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let sig = sign(b"Jefe", 0, b"what do ya want for nothing?");
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"0.what do ya want for nothing?");
        assert_eq!(sig, format!("sha256={}", hex::encode(mac.finalize().into_bytes())));
        // And the HMAC itself is the standard one.
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn events_make_the_notifications_a_person_asked_for() {
        let mut streak = 0;
        let mut of = |k: &str, p: Value| notification_of(k, &p, 3, &mut streak).map(|n| n.kind);
        assert_eq!(of("moment", json!({"moment": "plateau", "detail": "no gain in 5 evaluations"})), Some("plateau"));
        assert_eq!(
            of("moment", json!({"moment": "limit_claim", "quote": "this is the hardware limit"})),
            Some("claim")
        );
        assert_eq!(of("moment", json!({"moment": "start"})), None);
        assert_eq!(of("moment.escalated", json!({"moment": "limit_claim", "quote": "q"})), Some("claim"));
        assert_eq!(of("stop.ungated", json!({"why": "session ended"})), Some("ungated_stop"));
        assert_eq!(of("violation", json!({"kind": "hooks_changed", "changes": ["Stop removed"]})), Some("violation"));
        assert_eq!(
            of("run.ended", json!({"run_id": 1, "outcome": "stopped_by_budget", "detail": "x"})),
            Some("run_ended")
        );
        assert_eq!(of("agent.output", json!({"line": "x"})), None);
        let escalated = json!({"question_id": 7, "turns": 6, "reasks": [9], "text": "Why?"});
        assert_eq!(of("question.escalated", escalated.clone()), Some("question_escalated"));
        assert!(may_notify("question.escalated"));
        let told = notification_of("question.escalated", &escalated, 3, &mut 0).unwrap().text;
        assert_eq!(told, "Question 7 went unanswered for 6 turns, asked again 1 time(s): “Why?”");
        // Blocks in a row: the third and the sixth notify; an allow starts over.
        let blocks: Vec<Option<&str>> = (0..6).map(|_| of("decision", json!({"decision": "block"}))).collect();
        assert_eq!(blocks, [None, None, Some("block_streak"), None, None, Some("block_streak")]);
        assert_eq!(of("decision", json!({"decision": "allow"})), None);
        assert_eq!(of("decision", json!({"decision": "block"})), None);
        let mut s = 2;
        let n = notification_of("decision", &json!({"decision": "block"}), 3, &mut s).unwrap();
        assert_eq!(n.text, "3 stop attempts in a row were blocked: the predicate still fails");
        for k in ["moment", "moment.escalated", "decision", "stop.ungated", "violation", "run.ended"] {
            assert!(may_notify(k), "{k}");
        }
        assert!(!may_notify("agent.output") && !may_notify("notify.delivery"));
    }

    #[test]
    fn the_body_carries_the_kind_campaign_text_payload_and_link() {
        let payload = json!({"run_id": 2, "outcome": "completed", "detail": "the predicate holds"});
        let n = Notification { kind: "run_ended", text: "Run 2 ended".into() };
        let about = About {
            campaign_id: "qr cpu/1",
            campaign_name: "qr",
            event_id: 41,
            event_kind: "run.ended",
            session_id: None,
            created_at: "2026-01-01T00:00:00Z",
            payload: &payload,
            console_url: "http://127.0.0.1:7070/",
        };
        let b = body(&n, &about, &delivery_id("qr cpu/1", 41, 0));
        assert_eq!(b["notification"], "run_ended");
        assert_eq!(b["campaign"], json!({"id": "qr cpu/1", "name": "qr"}));
        assert_eq!(b["event"]["payload"], payload);
        assert_eq!(b["link"], "http://127.0.0.1:7070/campaigns/qr%20cpu%2F1");
        assert_eq!(b["delivery"], "qr cpu/1:41:0");
    }

    #[test]
    fn retries_back_off_and_urls_hide_their_tokens() {
        let waits: Vec<u64> = (1..=8).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert!(retryable(500) && retryable(503) && retryable(429) && retryable(408));
        assert!(!retryable(400) && !retryable(401) && !retryable(404));
        assert_eq!(redact_url("https://hooks.slack.com/services/T0/B0/XXXX"), "https://hooks.slack.com/…");
        assert_eq!(redact_url("http://127.0.0.1:9000/"), "http://127.0.0.1:9000/");
        assert_eq!(redact_url("https://ntfy.sh?auth=tok"), "https://ntfy.sh/…");
    }
}
