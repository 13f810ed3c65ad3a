//! Codex's `exec --json` lines: the events each gives, with the thread
//! id, the claim (the last agent message) and what the turn did.

use serde_json::{json, Value};

use super::{truncate, Keyed};
use crate::events::{self, Event};

/// What a `codex exec --json` process said of its turn.
#[derive(Default)]
pub struct TurnSeen {
    pub started: bool,
    pub completed: bool,
}

/// Reads one `codex exec --json` line: the events to record (with their
/// idempotency keys; all of the session as it stands after the line);
/// keeps the thread id (a `thread.started` line gives an
/// [`events::AgentSession::Codex`] event, for the thread to be kept at
/// once), the last agent message (the claim) and what the turn did.
pub fn codex_line(line: &str, session: &mut Option<String>, claim: &mut String, turn: &mut TurnSeen) -> Vec<Keyed> {
    let mut out: Vec<Keyed> = Vec::new();
    let Ok(ev) = serde_json::from_str::<Value>(line) else {
        if !line.trim().is_empty() {
            out.push((None, Event::AgentOutput { line: truncate(line, 2000) }));
        }
        return out;
    };
    let kind = ev["type"].as_str().unwrap_or("");
    match kind {
        "turn.started" => turn.started = true,
        "turn.completed" => turn.completed = true,
        _ => {}
    }
    if kind == "thread.started" {
        if let Some(t) = ev["thread_id"].as_str() {
            *session = Some(t.to_string());
            let opened = events::AgentSession::Codex { session_id: t.to_string() };
            out.push((None, Event::AgentSession(opened)));
        }
        return out;
    }
    let item = &ev["item"];
    let key = item["id"].as_str().zip(session.as_deref()).map(|(i, s)| format!("codex:{s}:{kind}:{i}"));
    match (kind, item["type"].as_str()) {
        ("item.completed", Some("agent_message")) => {
            let text = item["text"].as_str().unwrap_or("").to_string();
            let message = Event::AgentMessage { text: Value::String(text.clone()), transcript: None };
            out.push((key, message));
            *claim = text;
        }
        ("item.started", Some("command_execution")) => {
            let call = Event::AgentToolCall {
                id: item["id"].clone(),
                name: json!("exec_command"),
                input: json!({"cmd": item["command"]}),
                transcript: None,
            };
            out.push((key, call));
        }
        ("item.completed", Some("command_execution")) => {
            let result = Event::AgentToolResult {
                tool_use_id: item["id"].clone(),
                status: events::ToolStatus::ExitCode(item["exit_code"].clone()),
                content: truncate(item["aggregated_output"].as_str().unwrap_or(""), 2000),
                transcript: None,
            };
            out.push((key, result));
        }
        ("turn.completed", _) | ("turn.failed", _) | ("error", _) => {
            let result = events::AgentResult::Codex { event: kind.to_string(), detail: ev.clone() };
            out.push((None, Event::AgentResult(result)));
        }
        _ => {
            out.push((key, Event::AgentEvent { event: ev.clone() }));
        }
    }
    out
}
