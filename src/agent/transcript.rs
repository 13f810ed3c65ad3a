//! An attached Claude Code session's transcript (the JSONL file its hooks
//! name in `transcript_path`), read: whole lines appended since the last
//! read, and the events each line gives (the assistant's text and tool
//! calls that hook payloads do not carry). `app/transcript.rs` follows the
//! file and records them.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{json, Value};

use crate::events::{Event, ToolStatus, TranscriptLine};

/// One event to record from a transcript line: (kind, idempotency key, payload).
pub type Row = (String, String, Value);

/// The events one transcript line gives (none for bookkeeping lines).
pub fn rows_of(line: &str) -> Vec<Row> {
    let Ok(v) = serde_json::from_str::<Value>(line) else { return Vec::new() };
    events_of(&v, RECORDED).into_iter().map(|(key, event)| (event.kind().into_owned(), key, event.body())).collect()
}

/// How much of a tool result and of a user message is kept: (characters
/// of a tool result, characters of a user message).
pub type Limits = (usize, usize);

/// What the daemon records of a transcript line.
pub const RECORDED: Limits = (2000, 4000);

/// Everything (`gadfly replay` reads the harness's output in tool results).
pub const WHOLE: Limits = (usize::MAX, usize::MAX);

/// The events of one parsed transcript line, with their idempotency keys,
/// the tool results and user messages cut to `limits`.
pub fn events_of(v: &Value, limits: Limits) -> Vec<(String, Event)> {
    let uuid = v["uuid"].as_str().unwrap_or("").to_string();
    if uuid.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let content = &v["message"]["content"];
    let blocks: Vec<Value> = match content {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    };
    let role = v["type"].as_str().unwrap_or("");
    for (i, b) in blocks.iter().enumerate() {
        let key = format!("cc-transcript:{uuid}:{i}");
        let line = TranscriptLine { uuid: uuid.clone(), timestamp: v["timestamp"].clone() };
        let event = match (role, b["type"].as_str()) {
            ("assistant", Some("text")) => Event::AgentMessage { text: b["text"].clone(), transcript: Some(line) },
            ("assistant", Some("tool_use")) => Event::AgentToolCall {
                id: b["id"].clone(),
                name: b["name"].clone(),
                input: b["input"].clone(),
                transcript: Some(line),
            },
            ("user", Some("tool_result")) => {
                let text = match &b["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Event::AgentToolResult {
                    tool_use_id: b["tool_use_id"].clone(),
                    status: ToolStatus::IsError(b["is_error"].clone()),
                    content: text.chars().take(limits.0).collect(),
                    transcript: Some(line),
                }
            }
            ("user", Some("text")) => Event::AgentUserMessage {
                text: b["text"].as_str().unwrap_or("").chars().take(limits.1).collect(),
                transcript: line,
            },
            _ => continue,
        };
        out.push((key, event));
    }
    out
}

/// Reads whole lines appended since `offset`; returns them and the new offset.
pub fn read_new_lines(path: &Path, offset: u64) -> std::io::Result<(Vec<String>, u64)> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let start = if len < offset { 0 } else { offset }; // truncated or replaced: start over
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.take(64 * 1024 * 1024).read_to_end(&mut buf)?;
    let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') else { return Ok((Vec::new(), start)) };
    let text = String::from_utf8_lossy(&buf[..=last_nl]);
    let lines = text.lines().map(str::to_string).collect();
    Ok((lines, start + last_nl as u64 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_from_real_transcript_shapes() {
        let a = r#"{"type":"assistant","uuid":"u1","timestamp":"t","message":{"content":[{"type":"text","text":"Done: all pass."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"make"}}]}}"#;
        let rows = rows_of(a);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, "agent.message");
        assert_eq!(rows[0].2["text"], "Done: all pass.");
        assert_eq!(rows[1].0, "agent.tool_call");
        assert_eq!(rows[1].1, "cc-transcript:u1:1");
        let u = r#"{"type":"user","uuid":"u2","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"3 passed, 1 failed","is_error":false}]}}"#;
        assert_eq!(rows_of(u)[0].2["content"], "3 passed, 1 failed");
        assert!(rows_of(r#"{"type":"summary","summary":"x"}"#).is_empty());
        assert!(rows_of("not json").is_empty());
    }

    #[test]
    fn only_whole_lines_are_read_and_the_offset_advances() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, "one\ntwo\npart").unwrap();
        let (lines, off) = read_new_lines(&p, 0).unwrap();
        assert_eq!(lines, vec!["one", "two"]);
        std::fs::write(&p, "one\ntwo\npartial line\nfour\n").unwrap();
        let (lines, off2) = read_new_lines(&p, off).unwrap();
        assert_eq!(lines, vec!["partial line", "four"]);
        assert_eq!(off2, std::fs::metadata(&p).unwrap().len());
    }

    #[test]
    fn the_real_corpus_transcripts_give_events() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/claude-code-vsla");
        let Ok(entries) = std::fs::read_dir(dir) else {
            eprintln!("SKIPPED: corpus not found at {dir}");
            return;
        };
        let mut messages = 0;
        let mut calls = 0;
        for e in entries.flatten().take(3) {
            let text = std::fs::read_to_string(e.path()).unwrap();
            for line in text.lines() {
                for (kind, _, _) in rows_of(line) {
                    messages += (kind == "agent.message") as usize;
                    calls += (kind == "agent.tool_call") as usize;
                }
            }
        }
        assert!(messages > 10 && calls > 10, "messages {messages}, calls {calls}");
    }
}
