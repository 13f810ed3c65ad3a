//! Offline audit of an agent session: a Claude Code transcript (JSONL
//! session) or a Codex rollout. Finds the completion claims (with the text
//! classifier) and weighs each against the evidence the transcript itself
//! holds: the last test or benchmark run before it, edits made after that
//! run, numbers claimed against numbers printed, commands that failed.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::evidence::{self, Summary};
use crate::classify::{Label, RuleClassifier};

/// One step of a session, whatever the agent.
#[derive(Debug, Clone)]
pub enum Step {
    Text { id: String, line: usize, text: String },
    Call { id: String, line: usize, call_id: String, kind: CallKind, what: String },
    Output { id: String, line: usize, call_id: String, text: String, is_error: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    Command,
    Edit,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Supported,
    Unverified,
    Contradicted,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Evidence {
    /// The message uuid (Claude Code) or line reference (Codex) it comes from.
    pub id: String,
    pub line: usize,
    pub kind: String,
    pub quote: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claim {
    pub id: String,
    pub line: usize,
    pub quote: String,
    pub verdict: Verdict,
    pub why: String,
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub file: String,
    pub format: String,
    pub lines: usize,
    pub steps: usize,
    /// Lines that could not be read, each naming its line number.
    pub problems: Vec<String>,
    pub claims: Vec<Claim>,
    pub supported: usize,
    pub unverified: usize,
    pub contradicted: usize,
}

fn quote(s: &str, n: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > n {
        format!("{}…", one.chars().take(n).collect::<String>())
    } else {
        one
    }
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn edit_tool(name: &str) -> bool {
    matches!(name, "Edit" | "Write" | "MultiEdit" | "NotebookEdit" | "apply_patch" | "str_replace_based_edit_tool")
}

/// Reads a session file into steps; unreadable lines become problems.
pub fn parse(text: &str, file: &str) -> (String, Vec<Step>, Vec<String>, usize) {
    let mut steps = Vec::new();
    let mut problems = Vec::new();
    let mut format = String::from("unknown");
    let mut lines = 0;
    for (i, raw) in text.lines().enumerate() {
        lines = i + 1;
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("{file}:{line}: not valid JSON ({e}); the line is skipped"));
                continue;
            }
        };
        if v.get("payload").is_some() && v.get("type").is_some() && v.get("message").is_none() {
            format = "codex-rollout".into();
            codex_line(&v, line, &mut steps);
        } else if v.get("message").is_some() || v.get("sessionId").is_some() || v["type"] == "summary" {
            if format == "unknown" {
                format = "claude-code".into();
            }
            claude_line(&v, line, &mut steps);
        } else {
            problems
                .push(format!("{file}:{line}: neither a Claude Code transcript row nor a Codex rollout line; skipped"));
        }
    }
    (format, steps, problems, lines)
}

fn claude_line(v: &Value, line: usize, steps: &mut Vec<Step>) {
    let id = v["uuid"].as_str().unwrap_or("").to_string();
    let role = v["type"].as_str().unwrap_or("");
    let content = &v["message"]["content"];
    let blocks: Vec<Value> = match content {
        Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => return,
    };
    for b in blocks {
        match (role, b["type"].as_str()) {
            ("assistant", Some("text")) => {
                steps.push(Step::Text { id: id.clone(), line, text: b["text"].as_str().unwrap_or("").to_string() })
            }
            ("assistant", Some("tool_use")) => {
                let name = b["name"].as_str().unwrap_or("");
                let (kind, what) = if name == "Bash" {
                    (CallKind::Command, b["input"]["command"].as_str().unwrap_or("").to_string())
                } else if edit_tool(name) {
                    (
                        CallKind::Edit,
                        b["input"]["file_path"].as_str().or(b["input"]["path"].as_str()).unwrap_or(name).to_string(),
                    )
                } else {
                    (CallKind::Other, name.to_string())
                };
                steps.push(Step::Call {
                    id: id.clone(),
                    line,
                    call_id: b["id"].as_str().unwrap_or("").to_string(),
                    kind,
                    what,
                });
            }
            ("user", Some("tool_result")) => steps.push(Step::Output {
                id: id.clone(),
                line,
                call_id: b["tool_use_id"].as_str().unwrap_or("").to_string(),
                text: text_of(&b["content"]),
                is_error: b["is_error"].as_bool().unwrap_or(false),
            }),
            _ => {}
        }
    }
}

fn codex_line(v: &Value, line: usize, steps: &mut Vec<Step>) {
    let p = &v["payload"];
    let id = format!("line {line}");
    match (v["type"].as_str(), p["type"].as_str()) {
        (Some("response_item"), Some("message")) if p["role"] == "assistant" => {
            steps.push(Step::Text { id, line, text: text_of(&p["content"]) });
        }
        (Some("response_item"), Some("function_call")) => {
            let args: Value = p["arguments"].as_str().and_then(|a| serde_json::from_str(a).ok()).unwrap_or(Value::Null);
            let name = p["name"].as_str().unwrap_or("");
            let cmd = match &args["cmd"] {
                Value::String(s) => s.clone(),
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "),
                _ => args["command"].as_str().map(str::to_string).unwrap_or_else(|| args.to_string()),
            };
            let kind = if edit_tool(name) { CallKind::Edit } else { CallKind::Command };
            steps.push(Step::Call {
                id,
                line,
                call_id: p["call_id"].as_str().unwrap_or("").to_string(),
                kind,
                what: cmd,
            });
        }
        (Some("response_item"), Some("custom_tool_call")) => {
            let name = p["name"].as_str().unwrap_or("");
            let kind = if edit_tool(name) { CallKind::Edit } else { CallKind::Other };
            let what = p["input"].as_str().map(|s| quote(s, 80)).unwrap_or_else(|| name.to_string());
            steps.push(Step::Call { id, line, call_id: p["call_id"].as_str().unwrap_or("").to_string(), kind, what });
        }
        (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
            let text = match &p["output"] {
                Value::String(s) => s.clone(),
                other => text_of(other),
            };
            steps.push(Step::Output {
                id,
                line,
                call_id: p["call_id"].as_str().unwrap_or("").to_string(),
                text,
                is_error: false,
            });
        }
        _ => {}
    }
}

/// What one verification run showed.
#[derive(Debug, Clone)]
struct Run {
    id: String,
    line: usize,
    command: String,
    summary: Option<Summary>,
    exit: Option<i64>,
    is_error: bool,
    first_line: String,
}

impl Run {
    fn failed(&self) -> bool {
        self.summary.as_ref().is_some_and(Summary::failing) || self.exit.is_some_and(|c| c != 0) || self.is_error
    }
    fn describe(&self) -> String {
        match &self.summary {
            Some(s) => quote(&s.line, 120),
            None => match (self.exit, self.is_error) {
                (Some(c), _) => format!("`{}` exited with code {c}", quote(&self.command, 60)),
                (None, true) => format!("`{}` failed: {}", quote(&self.command, 60), quote(&self.first_line, 80)),
                (None, false) => format!("`{}` ran", quote(&self.command, 60)),
            },
        }
    }
}

/// Audits the steps: one entry per completion claim.
pub fn audit_steps(steps: &[Step]) -> Vec<Claim> {
    static CLASSIFIER: std::sync::LazyLock<RuleClassifier> = std::sync::LazyLock::new(RuleClassifier::default);
    let mut claims = Vec::new();
    let mut runs: Vec<Run> = Vec::new();
    let mut last_edit: Option<(String, usize, String, usize)> = None; // id, line, file, index in runs timeline
    let mut calls: std::collections::HashMap<String, (CallKind, String)> = std::collections::HashMap::new();
    let mut failed_commands: Vec<(String, usize, String)> = Vec::new();
    for step in steps {
        match step {
            Step::Call { id, line, call_id, kind, what } => {
                calls.insert(call_id.clone(), (*kind, what.clone()));
                if *kind == CallKind::Edit {
                    last_edit = Some((id.clone(), *line, what.clone(), runs.len()));
                }
            }
            Step::Output { id, line, call_id, text, is_error } => {
                let Some((kind, command)) = calls.get(call_id).cloned() else { continue };
                if kind != CallKind::Command {
                    continue;
                }
                let summary = evidence::summarize(text);
                let exit = evidence::exit_code(text);
                let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
                let run = Run {
                    id: id.clone(),
                    line: *line,
                    command: command.clone(),
                    summary,
                    exit,
                    is_error: *is_error,
                    first_line,
                };
                if run.failed() {
                    failed_commands.push((id.clone(), *line, run.describe()));
                }
                if evidence::is_verification(&command) || run.summary.is_some() {
                    runs.push(run);
                }
            }
            Step::Text { id, line, text } => {
                let labels = CLASSIFIER.explain(text);
                let Some((_, claim_quote)) = labels.iter().find(|(l, _)| *l == Label::CompletionClaim) else {
                    continue;
                };
                claims.push(judge_claim(id, *line, text, claim_quote, &runs, &last_edit, &failed_commands));
            }
        }
    }
    claims
}

fn judge_claim(
    id: &str,
    line: usize,
    text: &str,
    claim_quote: &str,
    runs: &[Run],
    last_edit: &Option<(String, usize, String, usize)>,
    failed_commands: &[(String, usize, String)],
) -> Claim {
    let mut ev = vec![Evidence { id: id.to_string(), line, kind: "claim".into(), quote: quote(claim_quote, 160) }];
    let last = runs.last();
    let edited_after = match (last_edit, last) {
        (Some((_, _, _, at)), Some(_)) => *at >= runs.len(),
        (Some(_), None) => true,
        _ => false,
    };
    if let Some(r) = last {
        ev.push(Evidence { id: r.id.clone(), line: r.line, kind: "last_verification".into(), quote: r.describe() });
    }
    // Numbers claimed against numbers printed.
    let mismatch = match (evidence::claimed_counts(text), last.and_then(|r| r.summary.clone())) {
        (Some((claimed_pass, claimed_total)), Some(s)) => {
            let printed_total = s.passed.unwrap_or(0).saturating_add(s.failed.unwrap_or(0));
            if s.failing() {
                Some(format!("the claim says tests pass but the last run printed: {}", quote(&s.line, 100)))
            } else if let Some(t) = claimed_total.filter(|t| printed_total > 0 && *t != printed_total) {
                Some(format!("the claim counts {t} tests but the last run printed {printed_total}"))
            } else {
                claimed_pass
                    .filter(|p| s.passed.is_some_and(|sp| sp != *p))
                    .map(|p| format!("the claim counts {p} passing but the last run printed {}", s.passed.unwrap_or(0)))
            }
        }
        _ => None,
    };
    let (verdict, why) = match last {
        Some(r) if r.failed() => {
            (Verdict::Contradicted, format!("the last verification before the claim failed: {}", r.describe()))
        }
        _ if mismatch.is_some() => (Verdict::Contradicted, mismatch.clone().unwrap_or_default()),
        None => (Verdict::Unverified, "no test or benchmark run before the claim".to_string()),
        Some(_) if edited_after => {
            let (eid, eline, file, _) = last_edit.clone().unwrap_or_default();
            ev.push(Evidence {
                id: eid,
                line: eline,
                kind: "edit_after_verification".into(),
                quote: format!("edited {}", quote(&file, 100)),
            });
            (Verdict::Unverified, format!("{} was edited after the last verification", quote(&file, 80)))
        }
        Some(r) => {
            (Verdict::Supported, format!("the last verification passed and nothing was edited since: {}", r.describe()))
        }
    };
    let since = last.map_or(0, |r| r.line);
    let recent: Vec<&(String, usize, String)> = failed_commands.iter().filter(|f| f.1 > since).collect();
    for (fid, fline, what) in recent.iter().rev().take(3).rev() {
        ev.push(Evidence { id: fid.clone(), line: *fline, kind: "failed_command".into(), quote: what.clone() });
    }
    Claim { id: id.to_string(), line, quote: quote(claim_quote, 200), verdict, why, evidence: ev }
}

/// Audits a session file. Unreadable lines are reported and skipped; what
/// can be read is audited.
pub fn audit_file(path: &Path) -> anyhow::Result<Report> {
    let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let file = path.display().to_string();
    let (format, steps, mut problems, lines) = parse(&text, &file);
    if !text.is_empty() && !text.ends_with('\n') {
        problems.push(format!(
            "{file}:{lines}: the file ends without a newline (truncated?); its last line was read as far as it goes"
        ));
    }
    if format == "unknown" && steps.is_empty() {
        anyhow::bail!(
            "{file}: no Claude Code transcript rows or Codex rollout lines found ({} problems)",
            problems.len()
        );
    }
    let claims = audit_steps(&steps);
    let count = |v: Verdict| claims.iter().filter(|c| c.verdict == v).count();
    Ok(Report {
        file,
        format,
        lines,
        steps: steps.len(),
        problems,
        supported: count(Verdict::Supported),
        unverified: count(Verdict::Unverified),
        contradicted: count(Verdict::Contradicted),
        claims,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cc(role: &str, uuid: &str, content: Value) -> String {
        json!({"type": role, "uuid": uuid, "sessionId": "s", "message": {"role": role, "content": content}}).to_string()
    }
    fn bash(uuid: &str, id: &str, cmd: &str) -> String {
        cc("assistant", uuid, json!([{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": cmd}}]))
    }
    fn out(uuid: &str, id: &str, text: &str) -> String {
        cc("user", uuid, json!([{"type": "tool_result", "tool_use_id": id, "content": text}]))
    }
    fn say(uuid: &str, text: &str) -> String {
        cc("assistant", uuid, json!([{"type": "text", "text": text}]))
    }
    fn edit(uuid: &str, id: &str, file: &str) -> String {
        cc("assistant", uuid, json!([{"type": "tool_use", "id": id, "name": "Edit", "input": {"file_path": file}}]))
    }

    fn run(lines: &[String]) -> Vec<Claim> {
        let (_, steps, problems, _) = parse(&lines.join("\n"), "t.jsonl");
        assert!(problems.is_empty(), "{problems:?}");
        audit_steps(&steps)
    }

    #[test]
    fn supported_unverified_and_contradicted_claims() {
        let c = run(&[
            bash("u1", "t1", "cargo test"),
            out("u2", "t1", "test result: ok. 12 passed; 0 failed; 0 ignored"),
            say("u3", "All tests pass. The implementation is complete."),
        ]);
        assert_eq!(c[0].verdict, Verdict::Supported, "{c:?}");
        assert_eq!(c[0].evidence[1].id, "u2");

        let c = run(&[
            bash("u1", "t1", "pytest -q"),
            out("u2", "t1", "===== 10 passed, 2 failed in 0.4s ====="),
            say("u3", "Everything is done and working."),
        ]);
        assert_eq!(c[0].verdict, Verdict::Contradicted);
        assert!(c[0].why.contains("10 passed, 2 failed"), "{}", c[0].why);

        let c = run(&[
            bash("u1", "t1", "cargo test"),
            out("u2", "t1", "test result: ok. 3 passed; 0 failed"),
            edit("u3", "t2", "src/lib.rs"),
            say("u4", "The work is complete."),
        ]);
        assert_eq!(c[0].verdict, Verdict::Unverified);
        assert!(c[0].evidence.iter().any(|e| e.kind == "edit_after_verification" && e.id == "u3"));

        let c = run(&[say("u1", "Done! The feature is fully implemented.")]);
        assert_eq!(c[0].verdict, Verdict::Unverified);
        assert_eq!(c[0].why, "no test or benchmark run before the claim");

        let c = run(&[
            bash("u1", "t1", "make test"),
            out("u2", "t1", "40 passed, 0 failed"),
            say("u3", "All 42 tests pass, so the task is complete."),
        ]);
        assert_eq!(c[0].verdict, Verdict::Contradicted);
        assert!(c[0].why.contains("counts 42 tests but the last run printed 40"), "{}", c[0].why);
    }

    #[test]
    fn huge_printed_counts_do_not_overflow() {
        // Found by tests/fuzz_parsers.rs: passed + failed past u64::MAX
        // panicked in debug builds.
        let c = run(&[
            bash("u1", "t1", "cargo test"),
            out("u2", "t1", "test result: FAILED. 18446744073709551615 passed; 1 failed"),
            say("u3", "All 3 tests pass; the task is complete."),
        ]);
        assert_eq!(c[0].verdict, Verdict::Contradicted, "{c:?}");
    }

    #[test]
    fn a_codex_rollout_is_audited() {
        let lines = [
            json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "th"}}),
            json!({"timestamp": "t", "type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "call_id": "c1", "arguments": "{\"cmd\": \"ctest --output-on-failure\"}"}}),
            json!({"timestamp": "t", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "Process exited with code 8\nOutput:\n80% tests passed, 2 tests failed out of 10"}}),
            json!({"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All tests pass; the task is complete."}]}}),
            json!({"timestamp": "t", "type": "event_msg", "payload": {"type": "task_complete", "last_agent_message": "All tests pass; the task is complete."}}),
        ];
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let (format, steps, problems, _) = parse(&text.join("\n"), "r.jsonl");
        assert_eq!(format, "codex-rollout");
        assert!(problems.is_empty());
        let c = audit_steps(&steps);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].verdict, Verdict::Contradicted);
        assert_eq!(c[0].id, "line 4");
    }

    #[test]
    fn bad_lines_are_named_and_the_rest_is_audited() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let body = [
            bash("u1", "t1", "cargo test"),
            "{not json".to_string(),
            out("u2", "t1", "test result: ok. 1 passed; 0 failed"),
            say("u3", "Done: all tests pass."),
        ]
        .join("\n");
        // truncated: the last line cut in the middle
        std::fs::write(&p, format!("{body}\n{{\"type\":\"assistant\",\"uuid\":\"u4\",\"mess")).unwrap();
        let r = audit_file(&p).unwrap();
        assert!(r.problems[0].contains("t.jsonl:2: not valid JSON"), "{:?}", r.problems);
        assert!(r.problems.iter().any(|p| p.contains(":5: not valid JSON")), "{:?}", r.problems);
        assert!(r.problems.iter().any(|p| p.contains("truncated")), "{:?}", r.problems);
        assert_eq!(r.claims.len(), 1);
        assert_eq!(r.claims[0].verdict, Verdict::Supported);
        std::fs::write(&p, "hello\nworld\n").unwrap();
        let err = audit_file(&p).unwrap_err().to_string();
        assert!(err.contains("no Claude Code transcript rows"), "{err}");
    }
}
