//! Following an attached Claude Code session's transcript (the JSONL file
//! its hooks name in `transcript_path`): the assistant's text and tool
//! calls that hook payloads do not carry are recorded as they are written.
//! The file is read from where the last read stopped, on every change
//! notify reports and every few seconds besides; only whole lines are read.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::events::{Event, ToolStatus, TranscriptLine};
use crate::supervisor::Supervisor;

/// One event to record from a transcript line: (kind, idempotency key, payload).
pub type Row = (String, String, Value);

/// The events one transcript line gives (none for bookkeeping lines).
pub fn rows_of(line: &str) -> Vec<Row> {
    let Ok(v) = serde_json::from_str::<Value>(line) else { return Vec::new() };
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
                    content: text.chars().take(2000).collect(),
                    transcript: Some(line),
                }
            }
            ("user", Some("text")) => Event::AgentUserMessage {
                text: b["text"].as_str().unwrap_or("").chars().take(4000).collect(),
                transcript: line,
            },
            _ => continue,
        };
        out.push((event.kind().into_owned(), key, event.body()));
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

/// Follows `path` for the session until `token` is cancelled; a final read
/// happens after cancellation so the session's last lines are kept. A
/// background task of the supervisor's (`transcript-follower`).
pub fn spawn_follower(sup: Supervisor, campaign: String, session: String, path: PathBuf, token: CancellationToken) {
    let (tasks, name) = (sup.clone(), format!("transcript-follower {campaign}/{session}"));
    tasks.spawn_task(name, async move {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(16);
        // The transcript's folder may not exist yet when the session starts
        // (a first session in a project): until it does, the file is polled
        // and the watch tried again at each poll.
        let mut watcher = watch(&path, &tx);
        let mut offset = 0u64;
        loop {
            let wait = if watcher.is_some() { WATCHED_POLL } else { UNWATCHED_POLL };
            let done = tokio::select! {
                _ = token.cancelled() => true,
                Some(()) = rx.recv() => false,
                _ = tokio::time::sleep(wait) => false,
            };
            if watcher.is_none() {
                watcher = watch(&path, &tx);
            }
            let p = path.clone();
            if let Ok(Ok((lines, next))) = tokio::task::spawn_blocking(move || read_new_lines(&p, offset)).await {
                let rows: Vec<Row> = lines.iter().flat_map(|l| rows_of(l)).collect();
                match sup.record_batch(&campaign, Some(&session), rows).await {
                    // Read again from here only once the rows are stored.
                    Ok(_) => offset = next,
                    Err(e) => tracing::warn!(error = %e, "recording transcript lines"),
                }
            }
            if done {
                break;
            }
        }
    });
}

/// How often a watched transcript is read anyway (a missed notification).
const WATCHED_POLL: Duration = Duration::from_secs(2);
/// How often a transcript is read while its folder cannot be watched.
const UNWATCHED_POLL: Duration = Duration::from_millis(500);

/// Watches the transcript's folder, telling `tx` when the transcript
/// changes; None when the folder cannot be watched (yet).
fn watch(path: &Path, tx: &tokio::sync::mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    let (watched, tx) = (path.to_path_buf(), tx.clone());
    notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            // Only what changes the file: our own reads of it are reported
            // too (open, close), and would wake the follower to read again,
            // round and round.
            let changed = matches!(ev.kind, EventKind::Create(_) | EventKind::Modify(_) | EventKind::Any);
            if changed && ev.paths.iter().any(|p| p == &watched) {
                let _ = tx.try_send(());
            }
        }
    })
    .and_then(|mut w| {
        w.watch(path.parent().unwrap_or(Path::new("/")), RecursiveMode::NonRecursive)?;
        Ok(w)
    })
    .map_err(|e| tracing::debug!(error = %e, "transcript folder not watchable yet; polling"))
    .ok()
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
