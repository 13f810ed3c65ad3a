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

/// Runs the hook for `agent`/`event` on `input`.
pub async fn run(agent: &str, event: &str, campaign: &str, input: &[u8]) -> HookExit {
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
    // The stop gate may wait for a whole evaluation; other events must not slow the agent.
    let deadline = Duration::from_secs_f64(
        std::env::var("GADFLY_HOOK_DEADLINE_S").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(if is_stop {
            540.0
        } else {
            10.0
        }),
    );
    let config = ClientConfig::from_env();
    let client = match Client::new(&config, deadline) {
        Ok(c) => c,
        Err(e) => return fail(is_stop, &format!("cannot build an HTTP client: {e}")),
    };
    let path = format!("/campaigns/{campaign}/hooks/{agent}/{event}");
    let body = serde_json::to_vec(&payload).unwrap_or_default();
    let call_id: String = (0..16).map(|_| format!("{:02x}", rand::random::<u8>())).collect();
    let started = Instant::now();
    let mut backoff = Duration::from_millis(100);
    loop {
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
                        return fail(is_stop, &api.to_string());
                    }
                }
                if started.elapsed() + backoff >= deadline {
                    return fail(is_stop, &format!("{e:#}"));
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// The daemon could not answer: a stop is blocked (fail closed), any other
/// event goes through with a warning.
fn fail(is_stop: bool, why: &str) -> HookExit {
    if is_stop {
        let reason = format!(
            "gadfly could not judge this stop attempt, so it is not allowed: {why}. The supervisor may be restarting; try to stop again shortly, and tell the person supervising if this repeats."
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
    async fn stop_fails_closed_when_the_daemon_is_down() {
        std::env::set_var("GADFLY_URL", "http://127.0.0.1:9");
        std::env::set_var("GADFLY_HOOK_DEADLINE_S", "0.5");
        let out = run("claude-code", "stop", "c1", b"{\"session_id\":\"s\"}").await;
        assert_eq!(out.code, 0);
        let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v["decision"], "block");
        assert!(v["reason"].as_str().unwrap().contains("could not judge"));
        let out = run("claude-code", "post-tool-use", "c1", b"{\"session_id\":\"s\"}").await;
        assert_eq!((out.code, out.stdout), (0, None));
        let out = run("claude-code", "stopp", "c1", b"{}").await;
        assert_eq!(out.code, 2);
    }
}
