//! An experiment log as a replay timeline (`gadfly replay import
//! experiments`, docs/REPLAY.md): the table an optimization loop keeps, one
//! row per experiment, as autoresearch's `results.tsv` does (`commit`,
//! `val_bpb`, `memory_gb`, `status`, `description`) and as kernel loops do
//! with their own columns (`throughput_tflops`, `correctness`...).
//!
//! Each row becomes an experiment run (a tool call and its result, the row
//! itself), an evaluation of one scenario named after the objective's
//! column, and the row's description as the agent's words (where a limit
//! claim or a dismissed failure shows). The objective is turned into a time
//! against a baseline of 1000 us so that the speed-up is the ratio to the
//! first measured row: `1000 * value / first` when lower is better,
//! `1000 * first / value` when higher is. A row with no positive number in
//! the objective's column, or whose status says it crashed (or says it
//! failed while its description says it crashed: an OOM, a compile error),
//! measured nothing: its evaluation has a failure and no scenario. A row whose
//! status says its result was wrong is measured but incorrect.
//!
//! Tab-separated when the header has a tab, comma-separated otherwise;
//! fields are trimmed. Rows that cannot be read are left out, each named
//! with its line in the problems.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::timeline::{Header, Imported, Measured, Step, StepKind, Timeline};
use crate::results::ScenarioResult;

/// How to read the log.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The objective's column; `None`: `val_bpb` (autoresearch's).
    pub metric: Option<String>,
    /// Higher values are better (throughput); otherwise lower are (loss,
    /// latency).
    pub maximize: bool,
    /// Only the rows whose column holds this value (`kernel_type=matmul`).
    pub only: Vec<(String, String)>,
    /// Seconds between two experiments (the log has no clock).
    pub every: f64,
}

impl Default for Layout {
    fn default() -> Self {
        Layout { metric: None, maximize: false, only: vec![], every: 300.0 }
    }
}

/// The baseline every time is measured against.
const BASELINE_US: f64 = 1000.0;

/// Status words of a run that measured nothing.
const CRASHED: [&str; 8] = ["crash", "crashed", "error", "timeout", "oom", "killed", "kill", "blocked"];
/// Status words of a run whose result was wrong.
const WRONG: [&str; 7] = ["fail", "failed", "incorrect", "wrong", "mismatch", "forbidden", "invalid"];
/// Words of a row's description that say the run crashed: a `FAIL` status
/// is the loop's one word for any failure, and the row's own description
/// says which ("FP8 KV + gpu=0.92: OOM crash"). Such a run measured
/// nothing; it is no wrong result for a dismissal to wave away.
const CRASHED_IN_WORDS: [&str; 9] =
    ["oom", "out of memory", "crash", "crashed", "segfault", "compile error", "timed out", "timeout", "killed"];

/// Whether a description says the run crashed (whole words, any case).
fn crashed_in_words(said: &str) -> bool {
    let lower = said.to_ascii_lowercase();
    CRASHED_IN_WORDS.iter().any(|w| {
        lower.match_indices(w).any(|(at, _)| {
            let before = lower[..at].chars().next_back();
            let after = lower[at + w.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
    })
}

/// Reads `text` (the log) into a timeline. Errors name the line and the
/// column: a header without the objective's column, a `--where` column
/// that does not exist, a log with no row left.
pub fn import(text: &str, layout: &Layout) -> Result<Imported, String> {
    let first = text.lines().find(|l| !l.trim().is_empty()).ok_or("the log is empty: its first line is the header")?;
    let delimiter = if first.contains('\t') { b'\t' } else { b',' };
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| format!("line 1: the header cannot be read: {e}"))?
        .iter()
        .map(str::to_string)
        .collect();
    let column = |name: &str| header.iter().position(|h| h == name);
    let columns = || header.join(", ");
    let metric = layout.metric.clone().unwrap_or_else(|| "val_bpb".into());
    let Some(m) = column(&metric) else {
        let hint = if layout.metric.is_none() { " (the default, autoresearch's); say which with --metric" } else { "" };
        return Err(format!("line 1: no column `{metric}`{hint}: the columns are {}", columns()));
    };
    let mut only = vec![];
    for (name, value) in &layout.only {
        let Some(i) = column(name) else {
            return Err(format!("--where {name}={value}: no column `{name}`: the columns are {}", columns()));
        };
        only.push((i, value.as_str()));
    }
    let status = ["status", "correctness", "result"].iter().find_map(|c| column(c));
    let text_col = ["description", "notes", "note", "desc"].iter().find_map(|c| column(c));
    let label_col =
        ["commit", "experiment", "exp", "tag", "config_id", "id"].iter().find_map(|c| column(c)).unwrap_or(0);

    let mut problems = vec![];
    let mut steps = vec![];
    // The commits the rows name: a log whose rows mostly share their
    // commit with others (three rows or more a commit) tried settings of
    // one code in turn, not changes built on one another.
    let commit_col = column("commit");
    let mut commits = std::collections::BTreeSet::new();
    let mut first_value: Option<f64> = None;
    let mut rows = 0usize;
    for record in reader.records() {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                problems.push(format!("line {line}: left out: {e}"));
                continue;
            }
        };
        let line = record.position().map_or(0, |p| p.line());
        let field = |i: usize| record.get(i).unwrap_or("");
        if record.len() < header.len().min(m + 1) {
            problems.push(format!("line {line}: left out: {} fields, the header has {}", record.len(), header.len()));
            continue;
        }
        if only.iter().any(|(i, v)| field(*i) != *v) {
            continue;
        }
        let t = rows as f64 * layout.every;
        rows += 1;
        let word = status.map(|i| field(i).to_string()).unwrap_or_default();
        let lower = word.to_ascii_lowercase();
        let raw = field(m);
        let value = raw.replace(',', "").parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0);
        let label = field(label_col);
        if let Some(i) = commit_col {
            commits.insert(field(i).to_string());
        }
        let fields: Vec<String> = header
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != text_col)
            .map(|(i, h)| format!("{h}={}", field(i)))
            .collect();
        steps.push(Step { t, kind: StepKind::ToolCall { tool: "experiment".into(), text: label.to_string() } });
        steps.push(Step { t, kind: StepKind::ToolResult { text: fields.join(" ") } });
        let crashed = CRASHED.contains(&lower.as_str())
            || (WRONG.contains(&lower.as_str()) && text_col.is_some_and(|i| crashed_in_words(field(i))));
        let measured = match value {
            Some(v) if !crashed => {
                let base = *first_value.get_or_insert(v);
                let time_us = if layout.maximize { BASELINE_US * base / v } else { BASELINE_US * v / base };
                let scenario: ScenarioResult = serde_json::from_value(json!({
                    "scenario": metric, "correct": !WRONG.contains(&lower.as_str()),
                    "time_us": time_us, "baseline_us": BASELINE_US,
                }))
                .map_err(|e| format!("line {line}: {e}"))?;
                Measured { scenarios: vec![scenario], failures: vec![] }
            }
            _ => {
                let why = match (word.is_empty(), crashed && !CRASHED.contains(&lower.as_str())) {
                    (true, _) => "no status".to_string(),
                    (false, true) => format!("status `{word}`, a crash by its description"),
                    (false, false) => format!("status `{word}`"),
                };
                let got = if raw.is_empty() { "nothing".to_string() } else { format!("`{raw}`") };
                Measured {
                    scenarios: vec![],
                    failures: vec![format!("{label}: {why}, {metric} {got}: nothing measured")],
                }
            }
        };
        steps.push(Step { t, kind: StepKind::Evaluation(measured) });
        if let Some(i) = text_col {
            let said = field(i);
            if !said.is_empty() {
                steps.push(Step { t, kind: StepKind::AssistantText { text: said.to_string() } });
            }
        }
    }
    if rows == 0 {
        let which = if layout.only.is_empty() { String::new() } else { " that match --where".to_string() };
        return Err(format!("the log has no row{which} (its columns: {})", columns()));
    }
    if first_value.is_none() {
        problems.push(format!("no row measured `{metric}` (a positive number): every evaluation fails"));
    }
    let mut extra = serde_json::Map::new();
    extra.insert("metric".into(), Value::String(metric));
    extra.insert("objective".into(), Value::String(if layout.maximize { "max" } else { "min" }.into()));
    extra.insert("rows".into(), rows.into());
    // The log has no clock: its steps' times are `every` seconds apart.
    extra.insert("clock".into(), Value::String("none".into()));
    if commit_col.is_some() && rows > 1 && commits.len() * 3 <= rows {
        extra.insert("changes".into(), Value::String("settings".into()));
    }
    if !layout.only.is_empty() {
        let only: BTreeMap<&str, &str> = layout.only.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        extra.insert("where".into(), json!(only));
    }
    let header = Header { source: "experiments".into(), campaign: None, extra };
    Ok(Imported { timeline: Timeline { header, steps }, problems })
}

/// `COLUMN=VALUE`, as `--where` takes it.
pub fn column_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("`{s}` is not COLUMN=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUTORESEARCH: &str = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n\
        a1b2c3d\t1.000000\t44.0\tkeep\tbaseline\n\
        b2c3d4e\t0.950000\t44.2\tkeep\tincrease the learning rate\n\
        c3d4e5f\t0.000000\t0.0\tcrash\tdouble the width (OOM)\n\
        d4e5f6g\t0.980000\t44.0\tdiscard\tGeLU instead of ReLU squared\n";

    fn evaluations(i: &Imported) -> Vec<&Measured> {
        i.timeline
            .steps
            .iter()
            .filter_map(|s| match &s.kind {
                StepKind::Evaluation(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_autoresearch_log_becomes_one_evaluation_a_row_against_its_first_row() {
        let i = import(AUTORESEARCH, &Layout::default()).unwrap();
        assert!(i.problems.is_empty(), "{:?}", i.problems);
        let e = evaluations(&i);
        assert_eq!(e.len(), 4);
        let time = |k: usize| e[k].scenarios[0].time_us;
        assert_eq!(e[0].scenarios[0].scenario, "val_bpb");
        assert!((time(0) - 1000.0).abs() < 1e-9 && (time(1) - 950.0).abs() < 1e-9, "{e:?}");
        // The crash measured nothing: a failure, no scenario.
        assert!(e[2].scenarios.is_empty());
        assert!(e[2].failures[0].contains("c3d4e5f: status `crash`"), "{:?}", e[2].failures);
        assert!(e[3].scenarios[0].correct && (time(3) - 980.0).abs() < 1e-9);
        // The descriptions are the agent's words; one step a row every 300 s.
        let said: Vec<&str> = i
            .timeline
            .steps
            .iter()
            .filter_map(|s| match &s.kind {
                StepKind::AssistantText { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(said[1], "increase the learning rate");
        assert_eq!(i.timeline.steps.last().unwrap().t, 900.0);
        assert_eq!(i.timeline.header.extra["objective"], "min");
    }

    #[test]
    fn a_throughput_log_filtered_by_a_column_counts_higher_as_faster() {
        let log = "experiment,kernel_type,throughput_tflops,correctness,description\n\
            0,matmul,100,PASS,baseline\n\
            1,softmax,5,PASS,other kernel\n\
            2,matmul,200,PASS,tiles\n\
            3,matmul,250,FAIL,fp16 accumulate\n";
        let layout = Layout {
            metric: Some("throughput_tflops".into()),
            maximize: true,
            only: vec![("kernel_type".into(), "matmul".into())],
            every: 60.0,
        };
        let i = import(log, &layout).unwrap();
        let e = evaluations(&i);
        assert_eq!(e.len(), 3, "the softmax row is left out");
        assert!((e[1].scenarios[0].time_us - 500.0).abs() < 1e-9, "twice the throughput, half the time");
        assert!(!e[2].scenarios[0].correct, "FAIL is a wrong result");
        assert_eq!(i.timeline.header.extra["where"]["kernel_type"], "matmul");
    }

    /// A `FAIL` whose description says the run crashed (an OOM, a compile
    /// error) measured nothing: no wrong result. One whose description
    /// says the output was wrong stays a wrong result.
    #[test]
    fn a_fail_the_description_calls_a_crash_measured_nothing() {
        let log = "experiment\tdecode_tok_s\tstatus\tdescription\n\
            1\t100\tKEEP\tbaseline\n\
            2\t7.4\tFAIL\tFP8 KV + gpu=0.92: OOM crash. Too aggressive.\n\
            3\t56.3\tFAIL\tFAIL: 128 draft = garbage output (all !)\n\
            4\t90\tFAIL\tbloomier filter mismatch\n";
        let layout = Layout { metric: Some("decode_tok_s".into()), maximize: true, ..Layout::default() };
        let e = evaluations(&import(log, &layout).unwrap()).into_iter().cloned().collect::<Vec<_>>();
        assert!(e[1].scenarios.is_empty(), "an OOM crash measured nothing: {:?}", e[1]);
        assert!(e[1].failures[0].contains("status `FAIL`, a crash by its description"), "{:?}", e[1].failures);
        assert!(!e[2].scenarios[0].correct, "garbage output is a wrong result");
        assert!(!e[3].scenarios[0].correct, "`bloomier` holds no whole crash word");
        assert!(crashed_in_words("compile error in the epilogue") && !crashed_in_words("zoom in"));
    }

    /// A log whose rows mostly share their commit (three rows or more a
    /// commit) tried settings of one code; one with a commit per change, or
    /// no commit column, says nothing.
    #[test]
    fn a_log_of_one_commit_is_settings_tried_in_turn() {
        let layout = Layout { metric: Some("val_fid".into()), ..Layout::default() };
        let one = "commit\tval_fid\tstatus\tdescription\nf3b\t152\tkeep\tbase\nf3b\t127\tkeep\tdepth=2\nf3b\t97\tkeep\tdepth=4\n";
        assert_eq!(import(one, &layout).unwrap().timeline.header.extra["changes"], "settings");
        let stacked = "commit\tval_fid\tstatus\nc2a\t152\tkeep\nb67\t127\tkeep\nb67\t130\tdiscard\n";
        assert!(!import(stacked, &layout).unwrap().timeline.header.extra.contains_key("changes"));
        let no_commit = "exp\tval_fid\tstatus\n1\t152\tkeep\n2\t127\tkeep\n";
        assert!(!import(no_commit, &layout).unwrap().timeline.header.extra.contains_key("changes"));
    }

    #[test]
    fn a_log_without_the_objective_or_the_filter_column_is_refused_naming_them() {
        let e = import("commit\tloss\tstatus\nabc\t1.0\tkeep\n", &Layout::default()).unwrap_err();
        assert!(
            e.contains("no column `val_bpb`") && e.contains("--metric") && e.contains("commit, loss, status"),
            "{e}"
        );
        let layout =
            Layout { metric: Some("loss".into()), only: vec![("gpu".into(), "h100".into())], ..Layout::default() };
        let e = import("commit\tloss\tstatus\nabc\t1.0\tkeep\n", &layout).unwrap_err();
        assert!(e.contains("--where gpu=h100: no column `gpu`"), "{e}");
        let layout =
            Layout { metric: Some("loss".into()), only: vec![("status".into(), "x".into())], ..Layout::default() };
        assert!(import("commit\tloss\tstatus\nabc\t1.0\tkeep\n", &layout).unwrap_err().contains("no row that match"));
        assert!(import("\n\n", &Layout::default()).unwrap_err().contains("empty"));
        assert_eq!(column_value("kernel_type = matmul").unwrap(), ("kernel_type".into(), "matmul".into()));
        assert!(column_value("matmul").is_err());
    }

    #[test]
    fn a_short_row_is_left_out_naming_its_line_and_the_rest_is_read() {
        let log = "commit\tval_bpb\tstatus\tdescription\na\t1.0\tkeep\tbase\nb\n\nc\t0.9\tkeep\tbetter\n";
        let i = import(log, &Layout::default()).unwrap();
        assert_eq!(evaluations(&i).len(), 2);
        assert_eq!(i.problems.len(), 1, "{:?}", i.problems);
        assert!(i.problems[0].starts_with("line 3: left out"), "{:?}", i.problems);
    }
}
