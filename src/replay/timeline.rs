//! The timeline format, version 1 (docs/REPLAY.md): JSON lines, a header
//! first (`{"v": 1, "kind": "header", ...}`), then one step a line,
//! `{"t": seconds, "kind": ..., ...}`, in time order. Read with errors that
//! name the line and the field; written back line for line.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::results::ScenarioResult;

/// The timeline version this gadfly reads and writes.
pub const VERSION: u64 = 1;

/// The kinds of step, as written in `kind`.
pub const KINDS: [&str; 6] = ["assistant_text", "tool_call", "tool_result", "evaluation", "stop", "human"];

/// A recorded session, ready to replay.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Timeline {
    pub header: Header,
    pub steps: Vec<Step>,
}

/// The first line: where the timeline comes from. Fields other than these
/// are kept as they are (`extra`), for the reader.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    /// `claude-code`, `codex`, `gadfly` (a live campaign exported), or
    /// anything the writer chose.
    pub source: String,
    /// The live campaign's id, when exported from one: the replay's bank
    /// selection seeds from it, as the daemon's did.
    pub campaign: Option<String>,
    pub extra: Map<String, Value>,
}

/// One step of the session.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Seconds since the session began.
    pub t: f64,
    pub kind: StepKind,
}

/// What an evaluation measured: the scenarios (objects of the results
/// contract, `crate::results`) and failures of the evaluation as a whole
/// (a build that failed, a banned symbol...).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Measured {
    pub scenarios: Vec<ScenarioResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

/// What the live daemon decided at a stop, when the timeline was exported
/// from a live campaign (shown beside the replay's decision).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RecordedStop {
    pub decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// Text the agent wrote.
    AssistantText { text: String },
    /// A tool call: the tool's name and its input, as text.
    ToolCall { tool: String, text: String },
    /// What a tool call gave back.
    ToolResult { text: String },
    /// The candidate was evaluated.
    Evaluation(Measured),
    /// An end of turn or stop attempt, with the agent's last message.
    /// `evaluation`: the gate evaluated the candidate at this stop and
    /// measured this (a fresh evaluation: the detectors run on it);
    /// `cached`: the stop was judged on that evaluation as the daemon's
    /// cache gave it (no detection); neither: the latest evaluation of
    /// the timeline is the verdict. `unevaluated`: the candidate could
    /// not be evaluated, and why. `recorded`: the live decision.
    Stop {
        text: String,
        evaluation: Option<Measured>,
        cached: bool,
        unevaluated: Option<String>,
        recorded: Option<RecordedStop>,
    },
    /// A person's (or another supervisor's) message. `queued`: a question
    /// queued through gadfly (`gadfly ask`), which the gate carries at the
    /// next stop as the daemon did; otherwise it is shown only.
    Human { text: String, queued: bool },
}

impl StepKind {
    pub fn name(&self) -> &'static str {
        match self {
            StepKind::AssistantText { .. } => "assistant_text",
            StepKind::ToolCall { .. } => "tool_call",
            StepKind::ToolResult { .. } => "tool_result",
            StepKind::Evaluation(_) => "evaluation",
            StepKind::Stop { .. } => "stop",
            StepKind::Human { .. } => "human",
        }
    }
}

/// A recorded session or log read as a timeline, with the lines or
/// matches that could not be used (each naming its line).
#[derive(Debug, Clone, Default)]
pub struct Imported {
    pub timeline: Timeline,
    pub problems: Vec<String>,
}

/// A timeline line that cannot be read: its line number (1-based), the
/// field (empty for the line as a whole) and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineError {
    pub line: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for TimelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "timeline line {}: {}", self.line, self.message)
        } else {
            write!(f, "timeline line {}: field `{}`: {}", self.line, self.field, self.message)
        }
    }
}

impl std::error::Error for TimelineError {}

fn err(line: usize, field: &str, message: impl Into<String>) -> TimelineError {
    TimelineError { line, field: field.to_string(), message: message.into() }
}

/// Reads a timeline. Blank lines are skipped; the first line that is not
/// blank must be the header; steps must not go back in time.
pub fn parse(text: &str) -> Result<Timeline, TimelineError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty());
    let Some((n, first)) = lines.next() else {
        return Err(err(
            1,
            "",
            "the timeline is empty: its first line is the header, {\"v\": 1, \"kind\": \"header\"}",
        ));
    };
    let header = header_of(n, &object_of(n, first)?)?;
    let mut steps = Vec::new();
    let mut last_t = 0.0f64;
    for (n, line) in lines {
        let step = step_of(n, &object_of(n, line)?)?;
        if step.t < last_t {
            return Err(err(
                n,
                "t",
                format!("{} is before the previous step's {last_t}: steps are written in time order", step.t),
            ));
        }
        last_t = step.t;
        steps.push(step);
    }
    Ok(Timeline { header, steps })
}

fn object_of(n: usize, line: &str) -> Result<Map<String, Value>, TimelineError> {
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(other) => Err(err(n, "", format!("expected a JSON object, got {}", type_name(&other)))),
        Err(e) => Err(err(n, "", format!("not valid JSON ({e})"))),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn header_of(n: usize, o: &Map<String, Value>) -> Result<Header, TimelineError> {
    match o.get("v") {
        None if o.contains_key("t") => {
            return Err(err(
                n,
                "v",
                "the first line must be the header, {\"v\": 1, \"kind\": \"header\", \"source\": ...}, not a step",
            ))
        }
        None => return Err(err(n, "v", "missing: the header says the timeline's version, {\"v\": 1}")),
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v) => {
            return Err(err(n, "v", format!("version {v} is not one this gadfly reads (it reads version {VERSION})")))
        }
    }
    match o.get("kind") {
        Some(Value::String(k)) if k == "header" => {}
        Some(other) => return Err(err(n, "kind", format!("the first line's kind is \"header\", not {other}"))),
        None => return Err(err(n, "kind", "missing: the first line is {\"v\": 1, \"kind\": \"header\", ...}")),
    }
    let source = match o.get("source") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(err(n, "source", format!("expected a string, got {}", type_name(other)))),
    };
    let campaign = match o.get("campaign") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(err(n, "campaign", format!("expected a string, got {}", type_name(other)))),
    };
    let extra = o
        .iter()
        .filter(|(k, _)| !["v", "kind", "source", "campaign"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Header { source, campaign, extra })
}

/// The fields each kind takes besides `t` and `kind`.
fn fields_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "assistant_text" | "tool_result" => &["text"],
        "tool_call" => &["tool", "text"],
        "evaluation" => &["scenarios", "failures"],
        "stop" => &["text", "scenarios", "failures", "cached", "unevaluated", "recorded"],
        "human" => &["text", "queued"],
        _ => &[],
    }
}

fn step_of(n: usize, o: &Map<String, Value>) -> Result<Step, TimelineError> {
    let t = match o.get("t") {
        Some(Value::Number(x)) => x
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| err(n, "t", format!("{x} is not a time: seconds since the session began, a number >= 0")))?,
        Some(other) => return Err(err(n, "t", format!("expected a number of seconds, got {}", type_name(other)))),
        None => return Err(err(n, "t", "missing: each step has its time, in seconds since the session began")),
    };
    let kind = match o.get("kind") {
        Some(Value::String(k)) if KINDS.contains(&k.as_str()) => k.as_str(),
        Some(Value::String(k)) => {
            return Err(err(n, "kind", format!("unknown kind \"{k}\"; expected one of {}", KINDS.join(", "))))
        }
        Some(other) => return Err(err(n, "kind", format!("expected a string, got {}", type_name(other)))),
        None => return Err(err(n, "kind", format!("missing; expected one of {}", KINDS.join(", ")))),
    };
    if let Some(unknown) = o.keys().find(|k| *k != "t" && *k != "kind" && !fields_of(kind).contains(&k.as_str())) {
        return Err(err(
            n,
            unknown,
            format!("a `{kind}` step has no such field (its fields: t, kind, {})", fields_of(kind).join(", ")),
        ));
    }
    let text = |field: &str| -> Result<String, TimelineError> {
        match o.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(err(n, field, format!("expected a string, got {}", type_name(other)))),
            None => Err(err(n, field, format!("missing: a `{kind}` step has its {field}"))),
        }
    };
    let flag = |field: &str| -> Result<bool, TimelineError> {
        match o.get(field) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(err(n, field, format!("expected true or false, got {}", type_name(other)))),
        }
    };
    let kind = match kind {
        "assistant_text" => StepKind::AssistantText { text: text("text")? },
        "tool_call" => StepKind::ToolCall { tool: text("tool")?, text: text("text")? },
        "tool_result" => StepKind::ToolResult { text: text("text")? },
        "evaluation" => match measured_of(n, o)? {
            Some(m) => StepKind::Evaluation(m),
            None => return Err(err(n, "scenarios", "missing: an evaluation has its scenarios")),
        },
        "stop" => {
            let unevaluated = match o.get("unevaluated") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(err(n, "unevaluated", format!("expected a string (why), got {}", type_name(other))))
                }
            };
            let evaluation = measured_of(n, o)?;
            let cached = flag("cached")?;
            if unevaluated.is_some() && (evaluation.is_some() || cached) {
                return Err(err(n, "unevaluated", "a stop that could not be evaluated has no scenarios"));
            }
            if cached && evaluation.is_none() {
                return Err(err(n, "cached", "a cached evaluation has its scenarios"));
            }
            let recorded = match o.get("recorded") {
                None | Some(Value::Null) => None,
                Some(v) => Some(RecordedStop::deserialize(v).map_err(|e| err(n, "recorded", e.to_string()))?),
            };
            StepKind::Stop { text: text("text")?, evaluation, cached, unevaluated, recorded }
        }
        _ => StepKind::Human { text: text("text")?, queued: flag("queued")? },
    };
    Ok(Step { t, kind })
}

/// The step's `scenarios` and `failures`, checked against the results
/// contract (`crate::results::parse`), each problem naming its entry.
fn measured_of(n: usize, o: &Map<String, Value>) -> Result<Option<Measured>, TimelineError> {
    let failures = match o.get("failures") {
        None => vec![],
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.as_str().map(str::to_string).ok_or_else(|| {
                    err(n, &format!("failures[{i}]"), format!("expected a string, got {}", type_name(f)))
                })
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(err(n, "failures", format!("expected an array of strings, got {}", type_name(other))))
        }
    };
    let list = match o.get("scenarios") {
        None if failures.is_empty() => return Ok(None),
        None => return Err(err(n, "scenarios", "missing: `failures` come with the evaluation's scenarios")),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(err(n, "scenarios", format!("expected an array of scenario objects, got {}", type_name(other))))
        }
    };
    // One line per entry, read by the harness's own results parser.
    let mut lines = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        if !s.is_object() {
            return Err(err(n, &format!("scenarios[{i}]"), format!("expected an object, got {}", type_name(s))));
        }
        lines.push(s.to_string());
    }
    let parsed = crate::results::parse(&lines.join("\n"));
    if let Some(problem) = parsed.problems.first() {
        // "results line K: ..." names the entry K-1.
        let (entry, why) = problem
            .strip_prefix("results line ")
            .and_then(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                let k: usize = digits.parse().ok()?;
                let why = rest[digits.len()..].trim_start_matches([':', ' ']);
                Some((k - 1, why.to_string()))
            })
            .unwrap_or((0, problem.clone()));
        return Err(err(n, &format!("scenarios[{entry}]"), why));
    }
    Ok(Some(Measured { scenarios: parsed.scenarios, failures }))
}

/// The timeline as JSON lines (the header first), each ending in a newline.
/// Fields are written in a fixed order (`t` and `kind` first), so a
/// timeline reads well and is written back the same.
pub fn write(t: &Timeline) -> String {
    let mut head: Vec<(&str, String)> = vec![("v", VERSION.to_string()), ("kind", "\"header\"".into())];
    head.push(("source", Value::String(t.header.source.clone()).to_string()));
    if let Some(c) = &t.header.campaign {
        head.push(("campaign", Value::String(c.clone()).to_string()));
    }
    for (k, v) in &t.header.extra {
        head.push((k.as_str(), v.to_string()));
    }
    let mut out = line(&head);
    out.push('\n');
    for s in &t.steps {
        out.push_str(&step_line(s));
        out.push('\n');
    }
    out
}

/// `{"k":v,...}` in the order given (the values already JSON).
fn line(fields: &[(&str, String)]) -> String {
    let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{}:{v}", Value::String(k.to_string()))).collect();
    format!("{{{}}}", parts.join(","))
}

fn json_text<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// One step as its line.
pub fn step_line(s: &Step) -> String {
    // Whole seconds are written as integers; the rest to the millisecond.
    let t = if s.t.fract() == 0.0 && s.t < 1e15 {
        (s.t as u64).to_string()
    } else {
        json_text(&((s.t * 1000.0).round() / 1000.0))
    };
    let mut f: Vec<(&str, String)> = vec![("t", t), ("kind", json_text(s.kind.name()))];
    let measured = |f: &mut Vec<(&str, String)>, m: &Measured| {
        f.push(("scenarios", json_text(&m.scenarios)));
        if !m.failures.is_empty() {
            f.push(("failures", json_text(&m.failures)));
        }
    };
    match &s.kind {
        StepKind::AssistantText { text } | StepKind::ToolResult { text } => f.push(("text", json_text(text))),
        StepKind::ToolCall { tool, text } => {
            f.push(("tool", json_text(tool)));
            f.push(("text", json_text(text)));
        }
        StepKind::Evaluation(m) => measured(&mut f, m),
        StepKind::Stop { text, evaluation, cached, unevaluated, recorded } => {
            f.push(("text", json_text(text)));
            if let Some(m) = evaluation {
                measured(&mut f, m);
            }
            if *cached {
                f.push(("cached", "true".into()));
            }
            if let Some(u) = unevaluated {
                f.push(("unevaluated", json_text(u)));
            }
            if let Some(r) = recorded {
                f.push(("recorded", json_text(r)));
            }
        }
        StepKind::Human { text, queued } => {
            f.push(("text", json_text(text)));
            if *queued {
                f.push(("queued", "true".into()));
            }
        }
    }
    line(&f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = r#"{"v":1,"kind":"header","source":"test","campaign":"c-1","note":"kept"}"#;

    fn one(step: &str) -> Result<Timeline, TimelineError> {
        parse(&format!("{HEAD}\n{step}\n"))
    }

    #[test]
    fn every_kind_reads_and_writes_back_the_same() {
        let text = [
            HEAD,
            r#"{"t":0,"kind":"human","text":"make it faster"}"#,
            r#"{"t":1.5,"kind":"assistant_text","text":"Let me measure."}"#,
            r#"{"t":2,"kind":"tool_call","tool":"Bash","text":"make bench"}"#,
            r#"{"t":9,"kind":"tool_result","text":"a: 50 us"}"#,
            r#"{"t":9,"kind":"evaluation","scenarios":[{"scenario":"a","correct":true,"time_us":50.0,"baseline_us":100.0}]}"#,
            r#"{"t":10,"kind":"human","text":"why?","queued":true}"#,
            r#"{"t":12,"kind":"stop","text":"Done.","scenarios":[{"scenario":"a","correct":false,"time_us":40.0,"baseline_us":100.0}],"failures":["build failed"],"recorded":{"decision":"block"}}"#,
            r#"{"t":13,"kind":"stop","text":"Done, really.","unevaluated":"no workspace"}"#,
        ]
        .join("\n");
        let t = parse(&text).unwrap();
        assert_eq!(t.header.source, "test");
        assert_eq!(t.header.campaign.as_deref(), Some("c-1"));
        assert_eq!(t.header.extra["note"], "kept");
        assert_eq!(t.steps.len(), 8);
        assert_eq!(t.steps[3].kind, StepKind::ToolResult { text: "a: 50 us".into() });
        let StepKind::Stop { evaluation: Some(m), recorded: Some(r), .. } = &t.steps[6].kind else { panic!() };
        assert_eq!(
            (m.scenarios[0].time_us, m.failures.as_slice(), r.decision.as_str()),
            (40.0, &["build failed".to_string()][..], "block")
        );
        assert_eq!(write(&t), text + "\n", "written back line for line");
        assert_eq!(parse(&write(&t)).unwrap(), t);
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let cases: &[(&str, &str)] = &[
            (r#"{"t":1,"kind":"assistant_text"}"#, "timeline line 2: field `text`: missing"),
            (
                r#"{"t":"1","kind":"human","text":"x"}"#,
                "timeline line 2: field `t`: expected a number of seconds, got a string",
            ),
            (r#"{"t":-1,"kind":"human","text":"x"}"#, "timeline line 2: field `t`: -1 is not a time"),
            (r#"{"t":1,"kind":"thought","text":"x"}"#, "timeline line 2: field `kind`: unknown kind \"thought\""),
            (r#"{"t":1,"kind":"tool_call","text":"x"}"#, "timeline line 2: field `tool`: missing"),
            (
                r#"{"t":1,"kind":"human","text":"x","urgent":true}"#,
                "timeline line 2: field `urgent`: a `human` step has no such field",
            ),
            (
                r#"{"t":1,"kind":"human","text":"x","queued":"yes"}"#,
                "timeline line 2: field `queued`: expected true or false",
            ),
            (r#"{"t":1,"kind":"evaluation"}"#, "timeline line 2: field `scenarios`: missing"),
            (r#"{"t":1,"kind":"evaluation","scenarios":{}}"#, "timeline line 2: field `scenarios`: expected an array"),
            (
                r#"{"t":1,"kind":"evaluation","scenarios":[{"scenario":"a","correct":true,"time_us":5,"baseline_us":9},{"scenario":"b","correct":true,"time_us":0,"baseline_us":9}]}"#,
                "timeline line 2: field `scenarios[1]`: (scenario `b`): time_us must be a positive number, got 0",
            ),
            (
                r#"{"t":1,"kind":"evaluation","scenarios":[{"scenario":"a","time_us":5,"baseline_us":9}]}"#,
                "timeline line 2: field `scenarios[0]`:",
            ),
            (
                r#"{"t":1,"kind":"stop","text":"x","cached":true}"#,
                "timeline line 2: field `cached`: a cached evaluation has its scenarios",
            ),
            (r#"{"t":1,"kind":"stop","text":"x","recorded":{"decision":3}}"#, "timeline line 2: field `recorded`:"),
            ("[1]", "timeline line 2: expected a JSON object, got an array"),
            ("{nope", "timeline line 2: not valid JSON"),
        ];
        for (step, says) in cases {
            let e = one(step).unwrap_err().to_string();
            assert!(e.starts_with(says), "{step}\n  gave {e}\n  want {says}");
        }
        let e = parse(&format!(
            "{HEAD}\n{{\"t\":5,\"kind\":\"human\",\"text\":\"x\"}}\n\n{{\"t\":4,\"kind\":\"human\",\"text\":\"y\"}}"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("timeline line 4: field `t`: 4 is before the previous step's 5"), "{e}");
        for (text, says) in [
            ("", "timeline line 1: the timeline is empty"),
            (r#"{"t":0,"kind":"human","text":"x"}"#, "timeline line 1: field `v`: the first line must be the header"),
            (r#"{"v":2,"kind":"header"}"#, "timeline line 1: field `v`: version 2 is not one this gadfly reads"),
            (r#"{"v":1,"kind":"step"}"#, "timeline line 1: field `kind`: the first line's kind is \"header\""),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(says), "{text}: {e}");
        }
    }
}
