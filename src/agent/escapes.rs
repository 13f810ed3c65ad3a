//! Claude Code's own transcripts, read for turns that end outside the
//! gate (THREATS.md row 21): where they are (`projects_dirs`), which were
//! written lately and from where to read them (`recent_transcripts`), and
//! what one line says about the end of a turn (`read_line`). The watch
//! that judges those turn ends is `app/escapes.rs`. Also whether a session
//! that ended ever got a prompt (`session_start`): one that failed at
//! start-up had no turn, so no stop escaped the gate (`app/hooks.rs`).
//!
//! Where it looks: `$CLAUDE_CONFIG_DIR/projects`, `$HOME/.claude/projects`
//! and each folder of `$GADFLY_CLAUDE_CONFIG_DIRS` (colon-separated config
//! dirs, for agents run as another user or with their own config dir).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
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
    // Claude Code's own stand-in for a reply that failed ("API Error: ...",
    // model `<synthetic>`): the model did not end the turn, the request
    // failed (a StopFailure hook call tells the gate).
    let api_error = v["isApiErrorMessage"].as_bool() == Some(true);
    Some(Line {
        session: v["sessionId"].as_str().or(v["session_id"].as_str()).unwrap_or("").to_string(),
        cwd: v["cwd"].as_str().unwrap_or("").to_string(),
        uuid: v["uuid"].as_str().unwrap_or("").to_string(),
        timestamp: v["timestamp"].as_str().unwrap_or("").to_string(),
        ends_turn: kind == "assistant"
            && !has_tool
            && !text.trim().is_empty()
            && stop != Some("tool_use")
            && !api_error,
        text,
    })
}

/// What a session's transcript says of its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// The model answered (a reply that is not Claude Code's stand-in for a
    /// failed request): the session had a turn.
    Answered,
    /// A prompt was given, and every reply is Claude Code's stand-in for a
    /// failed request ("API Error: ...", "Invalid API key · Please run
    /// /login"): the model never took a turn. The first error recorded.
    Unanswered { error: Option<String> },
    /// No prompt and no reply; the first error the transcript records (a
    /// failed API request), if any.
    NoPrompt { error: Option<String> },
}

/// How much of a transcript [`session_start`] reads: a prompt, if any, is
/// near its start.
const START_READ: u64 = 4 << 20;

/// Whether the session whose transcript is at `path` ever got a prompt and
/// an answer, from the transcript's first lines. Claude Code writes no
/// transcript for a session that ended before any prompt: a missing file is
/// [`Start::NoPrompt`]. None when the file cannot be read otherwise (or
/// the path is not absolute): nothing is known.
pub fn session_start(path: &Path) -> Option<Start> {
    if !path.is_absolute() {
        return None;
    }
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(Start::NoPrompt { error: None }),
        Err(_) => return None,
    };
    let mut buf = Vec::new();
    file.take(START_READ).read_to_end(&mut buf).ok()?;
    let start = read_start(&String::from_utf8_lossy(&buf));
    // Cut short: an answer may lie beyond what was read; held as answered
    // (the turn's end is then judged as ungated, the strict reading).
    if buf.len() as u64 >= START_READ && matches!(start, Start::Unanswered { .. }) {
        return Some(Start::Answered);
    }
    Some(start)
}

/// [`session_start`] of a transcript's text (JSON lines; a line cut short
/// or not JSON is skipped).
pub fn read_start(text: &str) -> Start {
    let mut error = None;
    let mut prompted = false;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        let api_error = v["isApiErrorMessage"].as_bool() == Some(true);
        match v["type"].as_str() {
            // A prompt queued, or remembered as the session's last.
            Some("queue-operation") if v["operation"] == "enqueue" => prompted = true,
            Some("last-prompt") => prompted = true,
            Some("user") if is_prompt(&v) => prompted = true,
            Some("assistant") if !api_error => return Start::Answered,
            Some("assistant") => {
                let text = v["message"]["content"].as_array().and_then(|a| a.iter().find_map(|b| b["text"].as_str()));
                error = error.or(text.map(str::to_string));
            }
            Some("system") if v["subtype"] == "api_error" => {
                let e = &v["error"];
                error = error.or(e["formatted"].as_str().or(e["message"].as_str()).map(str::to_string));
            }
            _ => {}
        }
    }
    if prompted {
        Start::Unanswered { error }
    } else {
        Start::NoPrompt { error }
    }
}

/// A user line that is a person's (or a caller's) prompt: text, not a tool
/// result, and not one Claude Code wrote itself (`isMeta`, hook feedback).
fn is_prompt(v: &Value) -> bool {
    if v["isMeta"].as_bool() == Some(true) || v["isSynthetic"].as_bool() == Some(true) {
        return false;
    }
    match &v["message"]["content"] {
        Value::String(s) => !s.trim().is_empty(),
        Value::Array(blocks) => {
            blocks.iter().any(|b| b["type"] == "text" && b["text"].as_str().is_some_and(|t| !t.trim().is_empty()))
        }
        _ => false,
    }
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

    /// Claude Code 2.1.332 with its API unreachable, `-p "hello"`
    /// (tests/data/claude-code/api-unreachable.jsonl, trimmed): the
    /// synthetic "API Error" reply is not the model ending its turn.
    #[test]
    fn an_api_error_stand_in_reply_does_not_end_a_turn() {
        let line = r#"{"parentUuid":"c720","isSidechain":false,"type":"assistant","uuid":"93ea","timestamp":"2026-12-06T09:04:09.618Z","message":{"id":"fe57","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","stop_sequence":"","type":"message","content":[{"type":"text","text":"API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"}]},"apiError":"connection_failed","error":"server_error","isApiErrorMessage":true,"cwd":"/tmp/ccprobe/proj","sessionId":"c014"}"#;
        let l = read_line(line).unwrap();
        assert!(!l.ends_turn, "{l:?}");
        assert!(l.text.starts_with("API Error"));
    }

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/claude-code").join(name)
    }

    /// Real transcripts of Claude Code 2.1.332: a session that got a prompt
    /// (then failed on its API, or ran) had a turn; one that never got a
    /// prompt writes no transcript at all; lines of bookkeeping and errors
    /// alone are no prompt, and name the error.
    #[test]
    fn whether_a_session_ever_got_a_prompt() {
        assert_eq!(
            session_start(&fixture("api-unreachable.jsonl")),
            Some(Start::Unanswered {
                error: Some(
                    "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)".into()
                )
            })
        );
        assert_eq!(session_start(&fixture("no-such-session.jsonl")), Some(Start::NoPrompt { error: None }));
        assert_eq!(session_start(Path::new("relative.jsonl")), None);
        let text = std::fs::read_to_string(fixture("failed-start.jsonl")).unwrap();
        assert_eq!(
            read_start(&text),
            Start::NoPrompt {
                error: Some("Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)".into())
            }
        );
        // The same start with a prompt after it, and no answer: no turn
        // either, the error named.
        let prompted = format!(
            "{text}{}\n",
            r#"{"type":"user","message":{"role":"user","content":"do the task"},"uuid":"u9","sessionId":"s"}"#
        );
        let unanswered = read_start(&prompted);
        assert!(
            matches!(&unanswered, Start::Unanswered { error: Some(e) } if e.contains("ECONNREFUSED")),
            "{unanswered:?}"
        );
        // Then the model's answer: a turn, whatever failed before it.
        let answered = format!(
            "{prompted}{}\n",
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}"#
        );
        assert_eq!(read_start(&answered), Start::Answered);
        // Claude Code's own user lines are no prompt: meta, hook feedback,
        // tool results.
        for own in [
            r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"<local-command-caveat>"}}"#,
            r#"{"type":"user","isSynthetic":true,"message":{"role":"user","content":[{"type":"text","text":"Stop hook feedback:"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#,
        ] {
            assert_eq!(read_start(own), Start::NoPrompt { error: None }, "{own}");
        }
        assert_eq!(
            read_start(
                "not json\n{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"Hi.\"}]}}"
            ),
            Start::Answered
        );
    }

    /// A transcript longer than what is read, with a prompt and no answer in
    /// its first part: held as answered (its end is judged as ungated).
    #[test]
    fn a_transcript_cut_short_with_no_answer_yet_counts_as_answered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.jsonl");
        let prompt = r#"{"type":"user","message":{"role":"user","content":"do the task"}}"#;
        let filler = format!("{{\"type\":\"progress\",\"data\":\"{}\"}}\n", "x".repeat(1 << 16));
        let mut text = format!("{prompt}\n");
        while (text.len() as u64) < START_READ + 10 {
            text.push_str(&filler);
        }
        std::fs::write(&path, text).unwrap();
        assert_eq!(session_start(&path), Some(Start::Answered));
    }
}
