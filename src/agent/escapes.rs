//! Claude Code's own transcripts, read for turns that end outside the
//! gate (THREATS.md row 21): where they are (`projects_dirs`), which were
//! written lately and from where to read them (`recent_transcripts`), and
//! what one line says about the end of a turn (`read_line`). The watch
//! that judges those turn ends is `app/escapes.rs`.
//!
//! Where it looks: `$CLAUDE_CONFIG_DIR/projects`, `$HOME/.claude/projects`
//! and each folder of `$GADFLY_CLAUDE_CONFIG_DIRS` (colon-separated config
//! dirs, for agents run as another user or with their own config dir).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

/// Transcripts untouched for longer than this are not read again.
const RECENT: Duration = Duration::from_secs(6 * 3600);

/// The Claude Code project folders to read.
pub fn projects_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(d) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        out.push(PathBuf::from(d).join("projects"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        out.push(PathBuf::from(h).join(".claude/projects"));
    }
    if let Some(list) = std::env::var_os("GADFLY_CLAUDE_CONFIG_DIRS") {
        out.extend(std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()).map(|p| p.join("projects")));
    }
    out.dedup();
    out
}

/// What one transcript line says about the end of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub session: String,
    pub cwd: String,
    pub uuid: String,
    pub timestamp: String,
    /// An assistant message with text and no tool call: the model's turn
    /// is over unless a later line says otherwise.
    pub ends_turn: bool,
    pub text: String,
}

/// Reads one transcript line (None for lines that are not messages).
pub fn read_line(line: &str) -> Option<Line> {
    let v: Value = serde_json::from_str(line).ok()?;
    let kind = v["type"].as_str()?;
    if kind != "assistant" && kind != "user" {
        return None;
    }
    let blocks: Vec<Value> = match &v["message"]["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    };
    let has_tool = blocks.iter().any(|b| b["type"] == "tool_use");
    let text: String = blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n");
    let stop = v["message"]["stop_reason"].as_str();
    Some(Line {
        session: v["sessionId"].as_str().or(v["session_id"].as_str()).unwrap_or("").to_string(),
        cwd: v["cwd"].as_str().unwrap_or("").to_string(),
        uuid: v["uuid"].as_str().unwrap_or("").to_string(),
        timestamp: v["timestamp"].as_str().unwrap_or("").to_string(),
        ends_turn: kind == "assistant" && !has_tool && !text.trim().is_empty() && stop != Some("tool_use"),
        text,
    })
}

/// Transcripts written in the last hours, with the offset to read from.
pub fn recent_transcripts(dirs: &[PathBuf], known: &HashMap<PathBuf, u64>) -> Vec<(PathBuf, u64)> {
    let now = SystemTime::now();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(projects) = std::fs::read_dir(dir) else { continue };
        for project in projects.flatten() {
            let Ok(files) = std::fs::read_dir(project.path()) else { continue };
            for file in files.flatten() {
                let path = file.path();
                if path.extension().is_none_or(|e| e != "jsonl") {
                    continue;
                }
                let Ok(md) = file.metadata() else { continue };
                let recent = md.modified().ok().and_then(|m| now.duration_since(m).ok()).is_some_and(|d| d < RECENT);
                let offset = known.get(&path).copied();
                if recent && offset != Some(md.len()) {
                    out.push((path, offset.unwrap_or_else(|| start_offset(&md))));
                }
            }
        }
    }
    out
}

/// A transcript first seen is read from its last 4 MiB: only its end can
/// hold a turn that ends now.
fn start_offset(md: &std::fs::Metadata) -> u64 {
    md.len().saturating_sub(4 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_only_assistant_message_ends_a_turn_a_tool_call_does_not() {
        let end = r#"{"type":"assistant","sessionId":"s1","cwd":"/w","uuid":"u1","timestamp":"2026-12-06T03:00:00.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn"}}"#;
        let l = read_line(end).unwrap();
        assert!(l.ends_turn);
        assert_eq!((l.session.as_str(), l.cwd.as_str(), l.text.as_str()), ("s1", "/w", "Done."));
        let tool = r#"{"type":"assistant","sessionId":"s1","cwd":"/w","uuid":"u2","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}],"stop_reason":null}}"#;
        assert!(!read_line(tool).unwrap().ends_turn);
        // Streamed text before a tool call (stop_reason tool_use) is not an end.
        let before_tool = r#"{"type":"assistant","sessionId":"s1","uuid":"u3","message":{"content":[{"type":"text","text":"Let me look."}],"stop_reason":"tool_use"}}"#;
        assert!(!read_line(before_tool).unwrap().ends_turn);
        let user = r#"{"type":"user","sessionId":"s1","uuid":"u4","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#;
        assert!(!read_line(user).unwrap().ends_turn);
        assert!(read_line(r#"{"type":"summary","summary":"x"}"#).is_none());
        assert!(read_line("not json").is_none());
    }
}
