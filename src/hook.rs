//! `gadfly hook AGENT EVENT --campaign ID`: the command an agent's hook
//! configuration runs. It reads the hook's JSON on stdin, hands it to the
//! daemon and prints what the agent expects on stdout.
//!
//! Claude Code lets an agent through when a hook times out, crashes or
//! prints something invalid, so the Stop gate fails closed here: if the
//! daemon cannot be reached before the deadline, a stop is blocked with a
//! reason that says so. A campaign the daemon does not know never blocks.

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::campaign::GateSpec;
use crate::client::{ApiFailure, Client};
use crate::config::ClientConfig;

pub const CLAUDE_CODE_EVENTS: &[&str] = &[
    "stop",
    "subagent-stop",
    "post-tool-use",
    "pre-tool-use",
    "user-prompt-submit",
    "session-start",
    "session-end",
    "notification",
    "pre-compact",
    "stop-failure",
];

const MAX_PAYLOAD: usize = 16 * 1024 * 1024;

/// What the hook process does: its stdout, its stderr and its exit code.
#[derive(Debug, PartialEq)]
pub struct HookExit {
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub code: u8,
}

/// Checks the payload the agent gave on stdin: a JSON object.
pub fn read_payload(input: &[u8]) -> Result<Value, String> {
    if input.len() > MAX_PAYLOAD {
        return Err(format!("the hook payload on stdin is {} bytes, over the {} byte limit", input.len(), MAX_PAYLOAD));
    }
    let text = std::str::from_utf8(input).map_err(|e| format!("the hook payload on stdin is not UTF-8: {e}"))?;
    if text.trim().is_empty() {
        return Err("the hook payload on stdin is empty: expected one JSON object from the agent".into());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        format!("the hook payload on stdin is not valid JSON (line {}, column {}): {e}", e.line(), e.column())
    })?;
    if !value.is_object() {
        return Err(format!("the hook payload on stdin must be a JSON object, got {}", kind(&value)));
    }
    Ok(value)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// How long a hook keeps retrying a daemon it cannot connect to at all
/// (down, restarting) before it answers on its own; a daemon that took the
/// connection is waited for up to the deadline (an evaluation may be slow).
const CONNECT_WAIT: Duration = Duration::from_secs(20);

/// At most this long is spent replaying spooled calls in one hook run.
const REPLAY_BUDGET: Duration = Duration::from_secs(3);

/// Runs the hook for `agent`/`event` on `input`. `gate` is the campaign's
/// policy for a stop the daemon cannot judge.
pub async fn run(agent: &str, event: &str, campaign: &str, input: &[u8], gate: GateSpec) -> HookExit {
    if agent == "claude-code" && !CLAUDE_CODE_EVENTS.contains(&event) {
        return HookExit {
            stdout: None,
            stderr: Some(format!(
                "gadfly hook: unknown Claude Code event `{event}`; expected one of: {}",
                CLAUDE_CODE_EVENTS.join(", ")
            )),
            code: 2,
        };
    }
    let payload = match read_payload(input) {
        Ok(p) => p,
        Err(e) => return HookExit { stdout: None, stderr: Some(format!("gadfly hook {event}: {e}")), code: 2 },
    };
    let is_stop = event == "stop";
    // The stop gate may wait for a whole evaluation (the deadline stays
    // below the 600 s timeout gadfly writes for it); other events must not
    // slow the agent down: they fail open fast.
    let deadline = Duration::from_secs_f64(
        std::env::var("GADFLY_HOOK_DEADLINE_S").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(if is_stop {
            540.0
        } else {
            2.0
        }),
    );
    let connect_wait = CONNECT_WAIT.min(deadline);
    let call_id: String = (0..16).map(|_| format!("{:02x}", rand::random::<u8>())).collect();
    let unreachable = |why: String| Unreachable {
        agent,
        event,
        campaign,
        call_id: call_id.clone(),
        payload: payload.clone(),
        why,
        gate,
    };
    let config = ClientConfig::from_env();
    let client = match Client::new(&config, deadline) {
        Ok(c) => c,
        Err(e) => return unreachable(format!("cannot build an HTTP client: {e}")).answer(),
    };
    let spool_dir = crate::spool::dir();
    let path = format!("/campaigns/{campaign}/hooks/{agent}/{event}");
    let body = serde_json::to_vec(&payload).unwrap_or_default();
    let started = Instant::now();
    let mut backoff = Duration::from_millis(100);
    let mut replayed = false;
    loop {
        // What an earlier hook could not deliver goes first, in order.
        if !replayed {
            replayed = replay(&client, &spool_dir).await;
        }
        match client.post_raw(&path, body.clone(), &call_id).await {
            Ok(reply) => {
                let stdout = match &reply["output"] {
                    Value::Null => None,
                    v => Some(v.to_string()),
                };
                return HookExit { stdout, stderr: None, code: 0 };
            }
            Err(e) => {
                if let Some(api) = e.downcast_ref::<ApiFailure>() {
                    if api.status == 404 {
                        // Never block a session gadfly cannot tie to a campaign.
                        return HookExit {
                            stdout: None,
                            stderr: Some(format!("gadfly hook: {} (this hook call is not gated)", api.message)),
                            code: 0,
                        };
                    }
                    if api.status < 500 && api.status != 408 && api.status != 429 {
                        return fail_refused(is_stop, &api.to_string());
                    }
                }
                let no_connection =
                    e.chain().any(|c| c.downcast_ref::<reqwest::Error>().is_some_and(|r| r.is_connect()));
                let limit = if no_connection { connect_wait } else { deadline };
                if started.elapsed() + backoff >= limit {
                    return unreachable(format!("{e:#}")).answer();
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// Sends the spooled calls to the daemon, oldest first, within
/// [`REPLAY_BUDGET`]; true when the spool was emptied (or was empty).
async fn replay(client: &Client, dir: &std::path::Path) -> bool {
    let (pending, _damaged) = crate::spool::pending(dir);
    let started = Instant::now();
    for (path, call) in pending {
        if started.elapsed() > REPLAY_BUDGET {
            return false;
        }
        let Some(claimed) = crate::spool::claim(&path) else { continue };
        let replay_path = format!(
            "/campaigns/{}/hooks/{}/{}?spooled_at={}&outcome={}&why={}",
            call.campaign,
            call.agent,
            call.event,
            urlencode(&call.spooled_at),
            urlencode(&call.outcome),
            urlencode(&call.why)
        );
        let body = serde_json::to_vec(&call.payload).unwrap_or_default();
        match client.post_raw(&replay_path, body, &call.call_id).await {
            Ok(_) => crate::spool::done(&claimed),
            // A campaign the daemon does not know, or a call it refuses:
            // replaying again will not help; keep the file aside.
            Err(e) if e.downcast_ref::<ApiFailure>().is_some_and(|a| a.status < 500 && a.status != 429) => {
                let kept = path.with_extension("rejected");
                let _ = std::fs::rename(&claimed, &kept);
                eprintln!("gadfly hook: a spooled call was refused by the daemon ({e:#}); kept in {}", kept.display());
            }
            Err(_) => {
                crate::spool::release(&claimed, &path);
                return false;
            }
        }
    }
    true
}

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A hook call the daemon could not take.
struct Unreachable<'a> {
    agent: &'a str,
    event: &'a str,
    campaign: &'a str,
    call_id: String,
    payload: Value,
    why: String,
    gate: GateSpec,
}

impl Unreachable<'_> {
    /// Answers on the daemon's behalf and spools the call. A stop is
    /// blocked with "supervisor unavailable" (fail closed) at most
    /// `unavailable_blocks` times in a row for a session, then let through;
    /// with `fail open` it is let through at once; other events pass.
    fn answer(self) -> HookExit {
        let dir = crate::spool::dir();
        let session = self.payload.get("session_id").and_then(Value::as_str).map(str::to_string);
        let (outcome, exit) = if self.event != "stop" {
            ("passed", HookExit { stdout: None, stderr: Some(format!("gadfly hook: {}", self.why)), code: 0 })
        } else {
            let blocked = crate::spool::blocked_stops(&dir, self.campaign, session.as_deref());
            let limit = self.gate.unavailable_blocks as usize;
            if self.gate.fail_closed && blocked < limit {
                let reason = format!(
                    "gadfly: supervisor unavailable, so this stop is not allowed yet ({} of {limit}): {}. The supervisor may be restarting; try to stop again shortly, and tell the person supervising if this repeats.",
                    blocked + 1,
                    self.why
                );
                (
                    "blocked",
                    HookExit {
                        stdout: Some(json!({"decision": "block", "reason": reason}).to_string()),
                        stderr: Some(format!("gadfly hook: {}", self.why)),
                        code: 0,
                    },
                )
            } else {
                let why = if self.gate.fail_closed {
                    format!("the supervisor stayed unavailable through {limit} blocked stops; this stop goes through ungated")
                } else {
                    "the campaign fails open; this stop goes through ungated".to_string()
                };
                (
                    "allowed",
                    HookExit { stdout: None, stderr: Some(format!("gadfly hook: {}: {why}", self.why)), code: 0 },
                )
            }
        };
        let call = crate::spool::SpooledCall {
            campaign: self.campaign.to_string(),
            agent: self.agent.to_string(),
            event: self.event.to_string(),
            call_id: self.call_id,
            payload: self.payload,
            spooled_at: crate::store::now(),
            outcome: outcome.to_string(),
            why: self.why,
        };
        match crate::spool::write(&dir, &call) {
            Ok(_) => exit,
            Err(e) => {
                // Nothing durable holds this call: say so where a person looks.
                let mut exit = exit;
                let note = format!("gadfly hook: could not spool this call to {}: {e:#}", dir.display());
                exit.stderr = Some(match exit.stderr {
                    Some(s) => format!("{s}\n{note}"),
                    None => note,
                });
                exit
            }
        }
    }
}

/// The daemon refused the call (a 4xx other than 404): a stop is blocked
/// with the daemon's message (it is up, so the agent can fix its call or
/// retry), any other event goes through with a warning.
fn fail_refused(is_stop: bool, why: &str) -> HookExit {
    if is_stop {
        let reason = format!(
            "gadfly could not judge this stop attempt, so it is not allowed: {why}. Tell the person supervising if this repeats."
        );
        HookExit {
            stdout: Some(json!({"decision": "block", "reason": reason}).to_string()),
            stderr: Some(format!("gadfly hook: {why}")),
            code: 0,
        }
    } else {
        HookExit { stdout: None, stderr: Some(format!("gadfly hook: {why}")), code: 0 }
    }
}

/// Reads all of stdin (bounded).
pub fn read_stdin() -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::io::stdin().take(MAX_PAYLOAD as u64 + 1).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_errors_say_what_is_wrong() {
        assert!(read_payload(b"").unwrap_err().contains("empty"));
        let e = read_payload(b"{\"a\":\n  1,,}").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        assert!(read_payload(b"[1]").unwrap_err().contains("an array"));
        assert!(read_payload(&[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
        assert!(read_payload(b"{\"session_id\":\"x\"}").is_ok());
    }

    #[tokio::test]
    async fn a_stop_is_blocked_a_bounded_number_of_times_when_the_daemon_is_down_and_every_call_is_spooled() {
        let spool = tempfile::tempdir().unwrap();
        std::env::set_var("GADFLY_SPOOL_DIR", spool.path());
        std::env::set_var("GADFLY_URL", "http://127.0.0.1:9");
        std::env::set_var("GADFLY_HOOK_DEADLINE_S", "0.3");
        let closed = GateSpec { fail_closed: true, unavailable_blocks: 2 };
        let stop = br#"{"session_id":"s"}"#;
        for n in 1..=2 {
            let out = run("claude-code", "stop", "c1", stop, closed).await;
            assert_eq!(out.code, 0);
            let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
            assert_eq!(v["decision"], "block");
            let reason = v["reason"].as_str().unwrap();
            assert!(reason.contains("supervisor unavailable") && reason.contains(&format!("({n} of 2)")), "{reason}");
        }
        let out = run("claude-code", "stop", "c1", stop, closed).await;
        assert_eq!(out.stdout, None, "the third stop goes through");
        assert!(out.stderr.unwrap().contains("ungated"));
        // Another session has its own count; a campaign that fails open lets it through at once.
        let other = run("claude-code", "stop", "c1", br#"{"session_id":"t"}"#, closed).await;
        assert!(other.stdout.is_some());
        let open = GateSpec { fail_closed: false, unavailable_blocks: 3 };
        let out = run("claude-code", "stop", "c2", stop, open).await;
        assert_eq!(out.stdout, None);
        let out = run("claude-code", "post-tool-use", "c1", stop, closed).await;
        assert_eq!((out.code, out.stdout), (0, None));
        let out = run("claude-code", "stopp", "c1", b"{}", closed).await;
        assert_eq!(out.code, 2);
        let (calls, bad) = crate::spool::pending(spool.path());
        assert!(bad.is_empty(), "{bad:?}");
        let outcomes: Vec<(&str, &str)> = calls.iter().map(|(_, c)| (c.event.as_str(), c.outcome.as_str())).collect();
        assert_eq!(
            outcomes,
            [
                ("stop", "blocked"),
                ("stop", "blocked"),
                ("stop", "allowed"),
                ("stop", "blocked"),
                ("stop", "allowed"),
                ("post-tool-use", "passed")
            ]
        );
        assert!(calls.iter().all(|(_, c)| c.why.contains("127.0.0.1:9") || !c.why.is_empty()));
    }
}
