//! Codex's `exec --json` lines: each recorded as events, with the thread
//! id, the claim (the last agent message) and what the turn did.

use serde_json::{json, Value};

use super::run::{truncate, RunCtx};
use crate::events::{self, Event};

/// What a `codex exec --json` process said of its turn.
#[derive(Default)]
pub(super) struct TurnSeen {
    pub(super) started: bool,
    pub(super) completed: bool,
}

/// Records one `codex exec --json` line; keeps the thread id and the last
/// agent message (the claim).
pub(super) async fn record_codex_line(
    ctx: &RunCtx,
    line: &str,
    session: &mut Option<String>,
    claim: &mut String,
    turn: &mut TurnSeen,
) {
    let Ok(ev) = serde_json::from_str::<Value>(line) else {
        if !line.trim().is_empty() {
            ctx.record(session.as_deref(), None, Event::AgentOutput { line: truncate(line, 2000) }).await;
        }
        return;
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
            // Kept at once: a daemon that takes this run over resumes the thread.
            let _ = ctx.sup.store().update_run(ctx.run_id, Some(t), 0).await;
            let opened = events::AgentSession::Codex { session_id: t.to_string() };
            ctx.record(session.as_deref(), None, Event::AgentSession(opened)).await;
        }
        return;
    }
    let item = &ev["item"];
    let key = item["id"].as_str().zip(session.as_deref()).map(|(i, s)| format!("codex:{s}:{kind}:{i}"));
    match (kind, item["type"].as_str()) {
        ("item.completed", Some("agent_message")) => {
            let text = item["text"].as_str().unwrap_or("").to_string();
            let message = Event::AgentMessage { text: Value::String(text.clone()), transcript: None };
            ctx.record(session.as_deref(), key, message).await;
            *claim = text;
        }
        ("item.started", Some("command_execution")) => {
            let call = Event::AgentToolCall {
                id: item["id"].clone(),
                name: json!("exec_command"),
                input: json!({"cmd": item["command"]}),
                transcript: None,
            };
            ctx.record(session.as_deref(), key, call).await;
        }
        ("item.completed", Some("command_execution")) => {
            let result = Event::AgentToolResult {
                tool_use_id: item["id"].clone(),
                status: events::ToolStatus::ExitCode(item["exit_code"].clone()),
                content: truncate(item["aggregated_output"].as_str().unwrap_or(""), 2000),
                transcript: None,
            };
            ctx.record(session.as_deref(), key, result).await;
        }
        ("turn.completed", _) | ("turn.failed", _) | ("error", _) => {
            let result = events::AgentResult::Codex { event: kind.to_string(), detail: ev.clone() };
            ctx.record(session.as_deref(), None, Event::AgentResult(result)).await;
        }
        _ => {
            ctx.record(session.as_deref(), key, Event::AgentEvent { event: ev.clone() }).await;
        }
    }
}
