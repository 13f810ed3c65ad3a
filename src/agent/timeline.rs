//! Recorded agent sessions as replay timelines (`gadfly replay import`,
//! docs/REPLAY.md): a Claude Code session transcript (read with
//! [`super::transcript`], turn ends with [`super::escapes::read_line`]) and
//! a Codex session (its rollout file, or the `codex exec --json` lines read
//! with [`super::codex::codex_line`]). The harness's results come from the
//! tool results through the spec's `[replay] evaluation` pattern.

use regex::Regex;
use serde_json::Value;

use crate::events::{AgentResult, Event};
pub use crate::replay::timeline::Imported;
use crate::replay::timeline::{Header, Measured, Step, StepKind, Timeline};

/// Builds the steps in time order, with an evaluation after each tool
/// result the pattern finds scenarios in.
struct Builder<'a> {
    steps: Vec<Step>,
    pattern: Option<&'a Regex>,
    problems: Vec<String>,
    start: Option<f64>,
}

impl<'a> Builder<'a> {
    fn new(pattern: Option<&'a Regex>) -> Self {
        Builder { steps: vec![], pattern, problems: vec![], start: None }
    }

    /// Seconds since the session's first timestamp (RFC 3339); never
    /// before the previous step.
    fn t(&mut self, timestamp: Option<&str>) -> f64 {
        let last = self.steps.last().map_or(0.0, |s| s.t);
        let Some(at) = timestamp.and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok()) else { return last };
        let at = at.timestamp_millis() as f64 / 1000.0;
        let start = *self.start.get_or_insert(at);
        // To the millisecond, as the transcript's clock writes it.
        (((at - start) * 1000.0).round() / 1000.0).max(last)
    }

    fn push(&mut self, t: f64, kind: StepKind) {
        let t = t.max(self.steps.last().map_or(0.0, |s| s.t));
        self.steps.push(Step { t, kind });
    }

    fn tool_result(&mut self, t: f64, text: String, line: usize) {
        let found = self.pattern.map(|re| evaluation_in(&text, re));
        self.push(t, StepKind::ToolResult { text });
        if let Some((m, problems)) = found {
            self.problems.extend(problems.into_iter().map(|p| format!("line {line}: {p}")));
            if let Some(m) = m {
                self.push(t, StepKind::Evaluation(m));
            }
        }
    }
}

/// The scenarios `re` finds in a tool's output (one per match, the last
/// match of a scenario kept), as the results contract reads them; none
/// when nothing matches. Matches that are not a scenario (a time that is
/// not a positive number, a `correct` that is neither yes nor no) are
/// left out, each with a problem.
pub fn evaluation_in(text: &str, re: &Regex) -> (Option<Measured>, Vec<String>) {
    let mut problems = vec![];
    let mut found: Vec<Value> = vec![];
    for c in re.captures_iter(text) {
        let get = |name: &str| c.name(name).map(|m| m.as_str().trim().to_string());
        let Some(scenario) = get("scenario").filter(|s| !s.is_empty()) else { continue };
        let number = |name: &str| get(name).and_then(|v| v.replace(',', "").parse::<f64>().ok());
        // No times in the pattern: 1 us against 1 us (a correctness-only replay).
        let times = if re.capture_names().flatten().any(|n| n == "time_us") {
            (number("time_us"), number("baseline_us"))
        } else {
            (Some(1.0), Some(1.0))
        };
        let (Some(time_us), Some(baseline_us)) = times else {
            problems
                .push(format!("scenario `{scenario}`: time_us or baseline_us is not a number in \"{}\"", c[0].trim()));
            continue;
        };
        // No `correct` in the pattern: the output says nothing of it, taken as correct.
        let correct = match get("correct") {
            None => Some(true),
            Some(v) => yes_no(&v),
        };
        let Some(correct) = correct else {
            problems.push(format!(
                "scenario `{scenario}`: `correct` is neither yes nor no in \"{}\" (true/false, yes/no, ok, pass/fail, 1/0...)",
                c[0].trim()
            ));
            continue;
        };
        let mut v = serde_json::json!({
            "scenario": scenario, "correct": correct, "time_us": time_us, "baseline_us": baseline_us,
        });
        for opt in ["compare_us", "bound_us"] {
            if let Some(x) = number(opt) {
                v[opt] = x.into();
            }
        }
        found.retain(|o| o["scenario"] != v["scenario"]);
        found.push(v);
    }
    if found.is_empty() {
        return (None, problems);
    }
    // Checked as the harness's results file is.
    let lines: Vec<String> = found.iter().map(Value::to_string).collect();
    let parsed = crate::results::parse(&lines.join("\n"));
    problems.extend(parsed.problems.into_iter().map(|p| format!("evaluation pattern: {p}")));
    if parsed.scenarios.is_empty() {
        return (None, problems);
    }
    (Some(Measured { scenarios: parsed.scenarios, failures: vec![] }), problems)
}

fn yes_no(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "ok" | "pass" | "passed" | "correct" | "1" | "✓" | "✔" => Some(true),
        "false" | "no" | "n" | "fail" | "failed" | "wrong" | "incorrect" | "error" | "0" | "✗" | "✘" => Some(false),
        _ => None,
    }
}

/// A tool call's input as text: the command, else the JSON.
fn input_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("command").or(o.get("cmd")) {
            Some(Value::String(c)) => c.clone(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "),
            _ => v.to_string(),
        },
        other => other.to_string(),
    }
}

/// A tool result's content as text: the text of its blocks when it is a
/// list of them (`[{"type": "text", "text": ...}]`).
fn content_text(s: &str) -> String {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Array(blocks)) if blocks.iter().all(|b| b.get("type").is_some()) => {
            blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => s.to_string(),
    }
}

/// What a person typed that is no message to the agent: slash commands
/// and their output, an interruption.
fn not_a_message(text: &str) -> bool {
    let t = text.trim_start();
    t.is_empty()
        || t.starts_with("<command-name>")
        || t.starts_with("<command-message>")
        || t.starts_with("<local-command-stdout>")
        || t.starts_with("<local-command-stderr>")
        || t.starts_with("[Request interrupted")
}

/// A Claude Code session transcript. The agent's text, tool calls and
/// results become steps; a turn that ends with text and no tool call
/// (before the person's next message, or at the end of the file) is a
/// stop with that text, as the Stop hook would have seen it; an
/// interrupted turn is none. The person's messages are `human` steps
/// (slash commands, meta lines and compaction summaries are not); a
/// subagent's lines (`isSidechain`) are left out.
pub fn from_claude_code(text: &str, pattern: Option<&Regex>) -> anyhow::Result<Imported> {
    let mut b = Builder::new(pattern);
    let mut session = None;
    let mut rows = 0usize;
    // The last message line: whether it ended the turn, its text, its time.
    let mut last: Option<(bool, String, f64)> = None;
    let close_turn = |b: &mut Builder, last: &mut Option<(bool, String, f64)>| {
        if let Some((true, text, t)) = last.take() {
            b.push(t, StepKind::Stop { text, evaluation: None, cached: false, unevaluated: None, recorded: None });
        }
    };
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                b.problems.push(format!("line {n}: not valid JSON ({e}); skipped"));
                continue;
            }
        };
        if v.get("message").is_none() && v.get("sessionId").is_none() && v["type"] != "summary" {
            b.problems.push(format!("line {n}: not a Claude Code transcript row; skipped"));
            continue;
        }
        rows += 1;
        if v["isSidechain"] == true || v["isMeta"] == true || v["isCompactSummary"] == true {
            continue;
        }
        if session.is_none() {
            session = v["sessionId"].as_str().map(str::to_string);
        }
        let t = b.t(v["timestamp"].as_str());
        let events = super::transcript::events_of(&v, super::transcript::WHOLE);
        let human: Vec<String> = events
            .iter()
            .filter_map(|(_, e)| match e {
                Event::AgentUserMessage { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        if !human.is_empty() {
            let interrupted = human.iter().any(|h| h.trim_start().starts_with("[Request interrupted"));
            if interrupted {
                last = None; // an interrupted turn runs no Stop hook
            }
            close_turn(&mut b, &mut last);
            for h in human.into_iter().filter(|h| !not_a_message(h)) {
                b.push(t, StepKind::Human { text: h, queued: false });
            }
        }
        for (_, e) in events {
            match e {
                Event::AgentMessage { text, .. } => {
                    let text = text.as_str().map(str::to_string).unwrap_or_else(|| text.to_string());
                    b.push(t, StepKind::AssistantText { text });
                }
                Event::AgentToolCall { name, input, .. } => {
                    let tool = name.as_str().unwrap_or("tool").to_string();
                    b.push(t, StepKind::ToolCall { tool, text: input_text(&input) });
                }
                Event::AgentToolResult { content, .. } => b.tool_result(t, content_text(&content), n),
                _ => {}
            }
        }
        if let Some(l) = super::escapes::read_line(raw) {
            // A user line of tool results keeps the turn going; a person's
            // message closed it above.
            last = if l.ends_turn { Some((true, l.text, t)) } else { None };
        }
    }
    if rows == 0 {
        anyhow::bail!(
            "no Claude Code transcript rows: is this a session transcript (one JSON object a line, with `message`)?"
        );
    }
    close_turn(&mut b, &mut last);
    let mut header = Header { source: "claude-code".into(), campaign: None, extra: Default::default() };
    if let Some(s) = session {
        header.extra.insert("session".into(), Value::String(s));
    }
    Ok(Imported { timeline: Timeline { header, steps: b.steps }, problems: b.problems })
}

/// Text of a Responses API message's content (`output_text`, `input_text`).
fn message_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// A user message of a rollout that is the harness's, not a person's.
fn codex_context(text: &str) -> bool {
    let t = text.trim_start();
    ["<environment_context", "<user_instructions", "<permissions", "<hook_prompt", "<turn_aborted"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// A Codex session: its rollout file (`rollout-*.jsonl`: `response_item`
/// messages, function calls and their output, `event_msg` `task_complete`
/// as the end of a turn), or the lines of `codex exec --json` (read as the
/// daemon reads a spawned Codex; they carry no time: one second a line).
pub fn from_codex(text: &str, pattern: Option<&Regex>) -> anyhow::Result<Imported> {
    let mut b = Builder::new(pattern);
    let mut header = Header { source: "codex".into(), campaign: None, extra: Default::default() };
    let (mut rows, mut session, mut claim, mut turn) = (0usize, None, String::new(), super::codex::TurnSeen::default());
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                b.problems.push(format!("line {n}: not valid JSON ({e}); skipped"));
                continue;
            }
        };
        if v.get("payload").is_some() && v.get("type").is_some() {
            rows += 1;
            let t = b.t(v["timestamp"].as_str());
            rollout_line(&mut b, &mut header, &v, t, n);
        } else if v["type"].as_str().is_some_and(|k| k.contains('.') || k == "error") {
            rows += 1;
            let t = (n as f64).max(b.steps.last().map_or(0.0, |s| s.t));
            for (_, e) in super::codex::codex_line(raw, &mut session, &mut claim, &mut turn) {
                match e {
                    Event::AgentMessage { text, .. } => {
                        b.push(t, StepKind::AssistantText { text: text.as_str().unwrap_or("").to_string() })
                    }
                    Event::AgentToolCall { name, input, .. } => b.push(
                        t,
                        StepKind::ToolCall {
                            tool: name.as_str().unwrap_or("tool").to_string(),
                            text: input_text(&input),
                        },
                    ),
                    Event::AgentToolResult { content, .. } => b.tool_result(t, content, n),
                    Event::AgentResult(AgentResult::Codex { event, .. }) if event == "turn.completed" => {
                        b.push(
                            t,
                            StepKind::Stop {
                                text: std::mem::take(&mut claim),
                                evaluation: None,
                                cached: false,
                                unevaluated: None,
                                recorded: None,
                            },
                        );
                    }
                    _ => {}
                }
            }
        } else {
            b.problems.push(format!("line {n}: neither a Codex rollout line nor a `codex exec --json` line; skipped"));
        }
    }
    if rows == 0 {
        anyhow::bail!("no Codex lines: is this a rollout file (rollout-*.jsonl) or `codex exec --json` output?");
    }
    if let Some(s) = session {
        header.extra.entry("session").or_insert(Value::String(s));
    }
    Ok(Imported { timeline: Timeline { header, steps: b.steps }, problems: b.problems })
}

fn rollout_line(b: &mut Builder, header: &mut Header, v: &Value, t: f64, n: usize) {
    let p = &v["payload"];
    match (v["type"].as_str(), p["type"].as_str()) {
        (Some("session_meta"), _) => {
            if let Some(id) = p["id"].as_str() {
                header.extra.insert("session".into(), Value::String(id.to_string()));
            }
        }
        (Some("response_item"), Some("message")) => {
            let text = message_text(&p["content"]);
            match p["role"].as_str() {
                Some("assistant") if !text.trim().is_empty() => b.push(t, StepKind::AssistantText { text }),
                Some("user") if !codex_context(&text) && !text.trim().is_empty() => {
                    b.push(t, StepKind::Human { text, queued: false })
                }
                _ => {}
            }
        }
        (Some("response_item"), Some("function_call")) => {
            let args: Value = p["arguments"].as_str().and_then(|a| serde_json::from_str(a).ok()).unwrap_or(Value::Null);
            let tool = p["name"].as_str().unwrap_or("tool").to_string();
            b.push(t, StepKind::ToolCall { tool, text: input_text(&args) });
        }
        (Some("response_item"), Some("custom_tool_call")) => {
            let tool = p["name"].as_str().unwrap_or("tool").to_string();
            b.push(t, StepKind::ToolCall { tool, text: input_text(&p["input"]) });
        }
        (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
            let text = match &p["output"] {
                Value::String(s) => s.clone(),
                Value::Object(o) => {
                    o.get("output").and_then(Value::as_str).map_or_else(|| p["output"].to_string(), str::to_string)
                }
                other => message_text(other),
            };
            b.tool_result(t, text, n);
        }
        (Some("event_msg"), Some("task_complete")) => {
            let text = p["last_agent_message"].as_str().unwrap_or("").to_string();
            b.push(t, StepKind::Stop { text, evaluation: None, cached: false, unevaluated: None, recorded: None });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pattern() -> Regex {
        crate::campaign::check_replay_pattern(
            r"(?m)^(?P<scenario>[\w-]+)\s+(?P<correct>ok|FAIL)\s+(?P<time_us>[\d.,]+)us\s+base\s+(?P<baseline_us>[\d.,]+)us",
        )
        .unwrap()
    }

    fn cc(kind: &str, uuid: &str, ts: &str, content: Value) -> String {
        json!({"type": kind, "uuid": uuid, "sessionId": "s1", "timestamp": ts, "message": {"role": kind, "content": content}})
            .to_string()
    }

    #[test]
    fn a_claude_code_transcript_becomes_turns_with_stops_and_evaluations() {
        let lines = [
            cc("user", "u1", "2026-01-01T00:00:00Z", json!("Make the kernel faster.")),
            cc("assistant", "u2", "2026-01-01T00:00:01Z", json!([{"type": "text", "text": "Let me benchmark."}])),
            cc("assistant", "u3", "2026-01-01T00:00:02Z", json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "./bench"}}])),
            cc("user", "u4", "2026-01-01T00:00:09Z", json!([{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "small ok 50us base 100us\nlarge FAIL 40us base 100us\nodd ok 1,000us base 900us"}]}])),
            cc("assistant", "u5", "2026-01-01T00:00:10Z", json!([{"type": "text", "text": "All scenarios pass. Done."}])),
            cc("user", "u6", "2026-01-01T00:01:00Z", json!("Is large really correct?")),
            cc("assistant", "u7", "2026-01-01T00:01:01Z", json!([{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "./bench"}}])),
            cc("user", "u8", "2026-01-01T00:01:02Z", json!([{"type": "text", "text": "[Request interrupted by user]"}])),
            cc("user", "u9", "2026-01-01T00:01:03Z", json!("<command-name>/exit</command-name>")),
            json!({"type": "assistant", "uuid": "sc", "isSidechain": true, "sessionId": "s1", "timestamp": "2026-01-01T00:01:04Z", "message": {"content": [{"type": "text", "text": "subagent: done"}]}}).to_string(),
            cc("assistant", "u10", "2026-01-01T00:01:05Z", json!([{"type": "text", "text": "Stopping here."}])),
        ];
        let got = from_claude_code(&lines.join("\n"), Some(&pattern())).unwrap();
        let kinds: Vec<&str> = got.timeline.steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(
            kinds,
            [
                "human",
                "assistant_text",
                "tool_call",
                "tool_result",
                "evaluation",
                "assistant_text",
                "stop",
                "human",
                "tool_call",
                "assistant_text",
                "stop"
            ],
            "{:#?}",
            got.timeline.steps
        );
        let StepKind::Evaluation(m) = &got.timeline.steps[4].kind else { panic!() };
        let names: Vec<(&str, bool, f64)> =
            m.scenarios.iter().map(|s| (s.scenario.as_str(), s.correct, s.time_us)).collect();
        assert_eq!(names, [("small", true, 50.0), ("large", false, 40.0), ("odd", true, 1000.0)]);
        assert_eq!(got.timeline.steps[4].t, 9.0);
        let StepKind::Stop { text, .. } = &got.timeline.steps[6].kind else { panic!() };
        assert_eq!((text.as_str(), got.timeline.steps[6].t), ("All scenarios pass. Done.", 10.0));
        assert_eq!(got.timeline.steps[10].kind.name(), "stop", "the file ends after a text: a stop");
        assert_eq!(got.timeline.header.extra["session"], "s1");
        assert!(got.problems.is_empty(), "{:?}", got.problems);
        // The whole tool output is read, past the 2,000 characters the daemon records.
        let long = format!("{}\nbig ok 5us base 10us", "x".repeat(5000));
        let line = cc(
            "user",
            "u1",
            "2026-01-01T00:00:00Z",
            json!([{"type": "tool_result", "tool_use_id": "t", "content": long}]),
        );
        let got = from_claude_code(&line, Some(&pattern())).unwrap();
        assert_eq!(got.timeline.steps.last().unwrap().kind.name(), "evaluation");
        assert!(from_claude_code("not json\n{\"a\":1}", None).is_err());
    }

    #[test]
    fn bad_matches_are_named_and_left_out() {
        let re = crate::campaign::check_replay_pattern(
            r"(?m)^(?P<scenario>\w+) (?P<correct>\w+) (?P<time_us>[\d.-]+) (?P<baseline_us>[\d.]+)$",
        )
        .unwrap();
        let (m, problems) = evaluation_in("a yes 5 10\nb maybe 5 10\nc no -1 10\na no 6 10", &re);
        let m = m.unwrap();
        assert_eq!(m.scenarios.len(), 1, "{m:?}");
        assert_eq!(
            (m.scenarios[0].scenario.as_str(), m.scenarios[0].correct, m.scenarios[0].time_us),
            ("a", false, 6.0),
            "the last match of a"
        );
        assert!(problems.iter().any(|p| p.contains("`b`") && p.contains("neither yes nor no")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("time_us must be a positive number")), "{problems:?}");
        assert_eq!(evaluation_in("nothing here", &re).0, None);
        // Correctness alone: 1 us against 1 us; times alone: correct.
        let tests =
            crate::campaign::check_replay_pattern(r"Running test: (?P<scenario>.+?)\.\.\. (?P<correct>PASSED|FAILED)")
                .unwrap();
        let (m, _) = evaluation_in("Running test: Add... FAILED\nRunning test: Fill... PASSED", &tests);
        let got: Vec<(String, bool, f64, f64)> =
            m.unwrap().scenarios.into_iter().map(|s| (s.scenario, s.correct, s.time_us, s.baseline_us)).collect();
        assert_eq!(got, [("Add".into(), false, 1.0, 1.0), ("Fill".into(), true, 1.0, 1.0)]);
        let bench = crate::campaign::check_replay_pattern(
            r"\| (?P<scenario>\w+) \| (?P<time_us>[\d.]+) \| (?P<baseline_us>[\d.]+) \|",
        )
        .unwrap();
        let (m, _) = evaluation_in("| add | 5.38 | 6.13 |", &bench);
        let s = &m.unwrap().scenarios[0];
        assert_eq!((s.correct, s.time_us, s.baseline_us), (true, 5.38, 6.13));
    }

    #[test]
    fn a_codex_rollout_and_exec_lines_become_timelines() {
        let rollout = [
            json!({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "th"}}),
            json!({"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}]}}),
            json!({"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "speed it up"}]}}),
            json!({"timestamp": "2026-01-01T00:00:02Z", "type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "call_id": "c1", "arguments": "{\"cmd\": \"./bench\"}"}}),
            json!({"timestamp": "2026-01-01T00:00:05Z", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "small ok 50us base 100us"}}),
            json!({"timestamp": "2026-01-01T00:00:06Z", "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}}),
            json!({"timestamp": "2026-01-01T00:00:06Z", "type": "event_msg", "payload": {"type": "task_complete", "last_agent_message": "Done."}}),
        ];
        let text: Vec<String> = rollout.iter().map(Value::to_string).collect();
        let got = from_codex(&text.join("\n"), Some(&pattern())).unwrap();
        let kinds: Vec<&str> = got.timeline.steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(kinds, ["human", "tool_call", "tool_result", "evaluation", "assistant_text", "stop"]);
        assert_eq!(
            got.timeline.steps[1].kind,
            StepKind::ToolCall { tool: "exec_command".into(), text: "./bench".into() }
        );
        assert_eq!(
            (got.timeline.header.source.as_str(), &got.timeline.header.extra["session"]),
            ("codex", &json!("th"))
        );
        let exec = [
            r#"{"type":"thread.started","thread_id":"th2"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"./bench","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"./bench","aggregated_output":"small FAIL 50us base 100us","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"I am done."}}"#,
            r#"{"type":"turn.completed","usage":{}}"#,
        ];
        let got = from_codex(&exec.join("\n"), Some(&pattern())).unwrap();
        let kinds: Vec<&str> = got.timeline.steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(kinds, ["tool_call", "tool_result", "evaluation", "assistant_text", "stop"]);
        let StepKind::Stop { text, .. } = &got.timeline.steps[4].kind else { panic!() };
        assert_eq!(text, "I am done.");
        assert_eq!(got.timeline.header.extra["session"], "th2");
        assert!(from_codex("{\"message\": 1}", None).is_err());
    }
}
