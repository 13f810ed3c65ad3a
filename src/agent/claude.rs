//! Claude Code's stream-json lines: the events each line it prints gives,
//! the user lines gadfly writes to its stdin, and their echoes.

use serde_json::{json, Value};

use super::{truncate, Keyed};
use crate::events::{self, Event};

pub fn user_line(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": null, "session_id": ""})
        .to_string()
}

/// The text of a user message echoed by `--replay-user-messages`.
pub fn replayed_text(ev: &Value) -> Option<String> {
    if ev["type"] != "user" || ev["isReplay"] != true {
        return None;
    }
    match &ev["message"]["content"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")),
        _ => None,
    }
}

/// Reads one stream-json line of Claude Code, keeping the session id it
/// names: the events to record (with their idempotency keys; all of the
/// session as it stands after the line) and the line parsed (None for a
/// line that is not JSON).
pub fn claude_line(line: &str, session: &mut Option<String>) -> (Vec<Keyed>, Option<Value>) {
    let mut out: Vec<Keyed> = Vec::new();
    let Ok(ev) = serde_json::from_str::<Value>(line) else {
        if !line.trim().is_empty() {
            out.push((None, Event::AgentOutput { line: truncate(line, 2000) }));
        }
        return (out, None);
    };
    if let Some(s) = ev["session_id"].as_str().filter(|s| !s.is_empty()) {
        if session.as_deref() != Some(s) {
            *session = Some(s.to_string());
        }
    }
    let key = ev["uuid"].as_str().map(|u| format!("cc-stream:{u}"));
    match ev["type"].as_str().unwrap_or("") {
        "system" if ev["subtype"] == "init" => {
            let opened = events::AgentSession::ClaudeCode {
                session_id: session.clone(),
                model: ev["model"].clone(),
                cwd: ev["cwd"].clone(),
                version: ev["claude_code_version"].clone(),
            };
            out.push((key, Event::AgentSession(opened)));
        }
        "assistant" => {
            for (i, block) in ev["message"]["content"].as_array().into_iter().flatten().enumerate() {
                let k = key.as_ref().map(|k| format!("{k}:{i}"));
                match block["type"].as_str() {
                    Some("text") => {
                        let message = Event::AgentMessage { text: block["text"].clone(), transcript: None };
                        out.push((k, message))
                    }
                    Some("tool_use") => {
                        let call = Event::AgentToolCall {
                            id: block["id"].clone(),
                            name: block["name"].clone(),
                            input: block["input"].clone(),
                            transcript: None,
                        };
                        out.push((k, call))
                    }
                    _ => {}
                }
            }
        }
        "user" => {
            for (i, block) in ev["message"]["content"].as_array().into_iter().flatten().enumerate() {
                let k = key.as_ref().map(|k| format!("{k}:{i}"));
                match block["type"].as_str() {
                    Some("tool_result") => {
                        let content = match &block["content"] {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        let result = Event::AgentToolResult {
                            tool_use_id: block["tool_use_id"].clone(),
                            status: events::ToolStatus::IsError(block["is_error"].clone()),
                            content: truncate(&content, 2000),
                            transcript: None,
                        };
                        out.push((k, result))
                    }
                    Some("text") => {
                        let text = truncate(block["text"].as_str().unwrap_or(""), 4000);
                        out.push((k, Event::AgentFeedback { text }))
                    }
                    _ => {}
                }
            }
        }
        "result" => {
            let result = events::AgentResult::ClaudeCode {
                subtype: ev["subtype"].clone(),
                is_error: ev["is_error"].clone(),
                num_turns: ev["num_turns"].clone(),
                terminal_reason: ev["terminal_reason"].clone(),
                result: truncate(ev["result"].as_str().unwrap_or(""), 4000),
            };
            out.push((key, Event::AgentResult(result)));
        }
        "system" => {
            let system = Event::AgentSystem {
                subtype: ev["subtype"].clone(),
                content: ev.get("content").cloned().unwrap_or(Value::Null),
            };
            out.push((key, system));
        }
        _ => {}
    }
    (out, Some(ev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replayed_user_messages_are_recognized() {
        let echo = json!({"type": "user", "isReplay": true, "message": {"role": "user", "content": "a question"}});
        assert_eq!(replayed_text(&echo).as_deref(), Some("a question"));
        let parts = json!({"type": "user", "isReplay": true, "message": {"content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}});
        assert_eq!(replayed_text(&parts).as_deref(), Some("x\ny"));
        // Tool results and hook feedback are the CLI's own user lines, not echoes.
        let own = json!({"type": "user", "message": {"content": [{"type": "tool_result", "content": "ok"}]}});
        assert_eq!(replayed_text(&own), None);
    }

    #[test]
    fn stream_json_user_lines_are_valid() {
        let v: Value = serde_json::from_str(&user_line("say \"hi\"\nnow")).unwrap();
        assert_eq!(v["type"], "user");
        assert_eq!(v["message"]["content"], "say \"hi\"\nnow");
    }
}
