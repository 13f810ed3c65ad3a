//! A live campaign as a timeline: its recorded events (the log, oldest
//! first) and its evaluations (with their measured scenarios), turned into
//! the steps `gadfly replay` reads. `gadfly replay export ID` fetches both
//! from the daemon's API and writes what this returns.
//!
//! - the agent's text (`agent.message`) becomes `assistant_text`; its tool
//!   calls and results (`agent.tool_call`, `agent.tool_result`, and a
//!   `hook.post_tool_use` whose call the stream did not give) `tool_call`
//!   and `tool_result`, each call once;
//! - a judged stop (`hook.stop`, then its `decision`) becomes `stop`, with
//!   the evaluation the gate ran for it when it ran one (`cached` when the
//!   daemon's cache answered with an older one), and the live decision as
//!   `recorded`; a stop that was never judged (spooled while the daemon
//!   was away) is left out;
//! - the workspace's other evaluations become `evaluation` (gadfly's own
//!   re-checks and the beam's candidates are left out);
//! - a person's question queued through gadfly becomes `human` with
//!   `queued`; what a person wrote in the session (`agent.user_message`),
//!   `human`; gadfly's own messages to the agent are left out.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::timeline::{Header, Measured, RecordedStop, Step, StepKind, Timeline};
use crate::evaluation::{Evaluation, Origin};
use crate::events::kind;

/// The timeline of a campaign: `events` as the log gives them (objects
/// with `id`, `kind`, `payload`, `created_at`), oldest first, and its
/// `evaluations` as `GET /campaigns/{id}/evaluations` gives them.
pub fn timeline(campaign: &str, events: &[Value], evaluations: &[Value]) -> anyhow::Result<Timeline> {
    let evals: HashMap<i64, Evaluation> = evaluations
        .iter()
        .filter_map(|v| {
            let e: Evaluation = serde_json::from_value(v.clone()).ok()?;
            Some((e.id?, e))
        })
        .collect();
    let start = events.iter().find_map(|e| seconds(&e["created_at"]));
    let mut steps: Vec<Step> = vec![];
    // hook.stop event id -> its step, until its decision comes.
    let mut open_stops: HashMap<i64, usize> = HashMap::new();
    let mut judged: HashSet<usize> = HashSet::new();
    let mut calls: HashSet<String> = HashSet::new();
    let mut results: HashSet<String> = HashSet::new();
    let mut latest_eval: Option<i64> = None;
    let mut header =
        Header { source: "gadfly".into(), campaign: Some(campaign.to_string()), extra: Default::default() };
    for e in events {
        let t = match (start, seconds(&e["created_at"])) {
            (Some(s), Some(at)) => (((at - s) * 1000.0).round() / 1000.0).max(0.0),
            _ => steps.last().map_or(0.0, |s: &Step| s.t),
        };
        // Steps stay in time order whatever the clocks said.
        let t = t.max(steps.last().map_or(0.0, |s| s.t));
        let p = &e["payload"];
        let push = |steps: &mut Vec<Step>, kind: StepKind| steps.push(Step { t, kind });
        match e["kind"].as_str().unwrap_or("") {
            kind::CAMPAIGN_CREATED => {
                for key in ["name", "mode"] {
                    if let Some(v) = p.get(key) {
                        header.extra.insert(key.to_string(), v.clone());
                    }
                }
            }
            kind::AGENT_MESSAGE => {
                let text = match &p["text"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if !text.trim().is_empty() {
                    push(&mut steps, StepKind::AssistantText { text });
                }
            }
            kind::AGENT_TOOL_CALL => {
                let id = id_of(&p["id"]);
                if id.as_ref().is_none_or(|i| calls.insert(i.clone())) {
                    let tool = p["name"].as_str().unwrap_or("tool").to_string();
                    push(&mut steps, StepKind::ToolCall { tool, text: input_text(&p["input"]) });
                }
            }
            kind::AGENT_TOOL_RESULT => {
                let id = id_of(&p["tool_use_id"]);
                if id.as_ref().is_none_or(|i| results.insert(i.clone())) {
                    push(&mut steps, StepKind::ToolResult { text: p["content"].as_str().unwrap_or("").to_string() });
                }
            }
            kind::HOOK_POST_TOOL_USE => {
                let call = &p["payload"];
                let id = id_of(&call["tool_use_id"]);
                if id.as_ref().is_none_or(|i| calls.insert(i.clone())) {
                    let tool = call["tool_name"].as_str().unwrap_or("tool").to_string();
                    push(&mut steps, StepKind::ToolCall { tool, text: input_text(&call["tool_input"]) });
                }
                if id.as_ref().is_none_or(|i| results.insert(i.clone())) {
                    push(&mut steps, StepKind::ToolResult { text: input_text(&call["tool_response"]) });
                }
            }
            kind::HOOK_STOP => {
                if p.get("spooled").is_some_and(|s| !s.is_null()) {
                    continue; // never judged: the daemon was away
                }
                let Some(id) = e["id"].as_i64() else { continue };
                let text = p["payload"]["last_assistant_message"].as_str().unwrap_or("").to_string();
                open_stops.insert(id, steps.len());
                push(
                    &mut steps,
                    StepKind::Stop { text, evaluation: None, cached: false, unevaluated: None, recorded: None },
                );
            }
            kind::EVALUATION => {
                let Some(id) = p["evaluation_id"].as_i64() else { continue };
                let Some(eval) = evals.get(&id) else { continue };
                if eval.origin != Origin::Workspace || eval.tree.contains("+recheck-") {
                    continue;
                }
                latest_eval = Some(id);
                let m = measured(eval);
                // Inside a stop being judged: the gate's own evaluation.
                match open_stops.values().max().copied() {
                    Some(i) => {
                        if let StepKind::Stop { evaluation, .. } = &mut steps[i].kind {
                            *evaluation = Some(m);
                        }
                    }
                    None => push(&mut steps, StepKind::Evaluation(m)),
                }
            }
            kind::DECISION => {
                let Some(i) = p["stop_event_id"].as_i64().and_then(|id| open_stops.remove(&id)) else { continue };
                let decision = p["decision"].as_str().unwrap_or("").to_string();
                let reason = p["reason"].as_str().unwrap_or("");
                let question = question_in(reason);
                if let StepKind::Stop { evaluation, cached, unevaluated, recorded, .. } = &mut steps[i].kind {
                    match p["evaluation_id"].as_i64() {
                        None => {
                            *unevaluated =
                                Some(match reason.split_once("so the stop predicate is not known to hold: ") {
                                    Some((_, why)) => {
                                        why.split(". Fix what this names").next().unwrap_or(why).to_string()
                                    }
                                    None => "the daemon could not evaluate the candidate".to_string(),
                                });
                            *evaluation = None;
                        }
                        // Judged on an older evaluation than the latest: the cache's.
                        Some(id) if evaluation.is_none() && Some(id) != latest_eval => {
                            if let Some(e) = evals.get(&id) {
                                *evaluation = Some(measured(e));
                                *cached = true;
                            }
                        }
                        Some(_) => {}
                    }
                    *recorded = Some(RecordedStop { decision, question });
                }
                judged.insert(i);
            }
            kind::QUESTION_QUEUED if p["source"] == "human" => {
                let text = p["text"].as_str().unwrap_or("").to_string();
                push(&mut steps, StepKind::Human { text, queued: true });
            }
            kind::AGENT_USER_MESSAGE => {
                let text = p["text"].as_str().unwrap_or("").to_string();
                if !text.trim().is_empty() && !gadflys_own(&text) {
                    push(&mut steps, StepKind::Human { text, queued: false });
                }
            }
            _ => {}
        }
    }
    // Stops never judged are left out.
    let steps = steps
        .into_iter()
        .enumerate()
        .filter(|(i, s)| !matches!(s.kind, StepKind::Stop { .. }) || judged.contains(i))
        .map(|(_, s)| s)
        .collect();
    Ok(Timeline { header, steps })
}

/// What an evaluation measured, as the timeline carries it: the harness's
/// results per scenario, and the failures of the evaluation itself (the
/// geometric-mean bars are the predicate's, judged again by the replay).
pub fn measured(e: &Evaluation) -> Measured {
    Measured {
        scenarios: e.verdict.scenarios.iter().filter_map(|s| s.measured.clone()).collect(),
        failures: e.verdict.failures.iter().filter(|f| !crate::predicate::is_bar_failure(f)).cloned().collect(),
    }
}

fn seconds(v: &Value) -> Option<f64> {
    let at = chrono::DateTime::parse_from_rfc3339(v.as_str()?).ok()?;
    Some(at.timestamp_millis() as f64 / 1000.0)
}

fn id_of(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

/// A tool's input or response as text: a command as it was typed, else
/// the JSON.
fn input_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => match (o.get("command"), o.get("cmd")) {
            (Some(Value::String(c)), _) | (_, Some(Value::String(c))) => c.clone(),
            _ => match (o.get("stdout"), o.get("stderr")) {
                (Some(Value::String(out)), err) => {
                    let err = err.and_then(Value::as_str).unwrap_or("");
                    if err.is_empty() {
                        out.clone()
                    } else {
                        format!("{out}\n{err}")
                    }
                }
                _ => v.to_string(),
            },
        },
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The question a block reason carried (`Question (ID): text` or
/// `Question from the person supervising: text`).
fn question_in(reason: &str) -> Option<String> {
    reason.lines().find_map(|l| {
        let rest = l.strip_prefix("Question")?;
        let (_, text) = rest.split_once(": ")?;
        Some(text.to_string())
    })
}

/// Words gadfly itself put to the agent (its first prompt, a block
/// reason, a question): not a person's.
fn gadflys_own(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("gadfly")
        || t.starts_with("Stop hook feedback")
        || t.starts_with("A question from the person supervising this campaign")
        || t.contains("supervised by gadfly")
        || t.contains("<system-reminder>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(id: i64, kind: &str, at: &str, payload: Value) -> Value {
        json!({"id": id, "kind": kind, "created_at": at, "payload": payload})
    }

    #[test]
    fn a_campaigns_events_become_steps() {
        let eval = json!({
            "id": 7, "tree": "abc", "holds": false, "scenarios": [
                {"scenario": "a", "present": true, "correct": true, "speedup": 2.0, "passes": true, "reasons": [],
                 "measured": {"scenario": "a", "correct": true, "time_us": 50.0, "baseline_us": 100.0}},
                {"scenario": "b", "present": false, "correct": false, "speedup": null, "passes": false, "reasons": ["missing"]}
            ],
            "geomean_speedup": null, "worst_scenario": null, "worst_speedup": null,
            "failures": ["geometric mean speedup unknown (1 of 2 scenarios measured); it must reach 1.20x", "build failed"],
            "failing_count": 1, "build": null, "run": null, "violations": [], "duration_ms": 5, "created_at": "x"
        });
        let events = vec![
            ev(1, "campaign.created", "2026-01-01T00:00:00Z", json!({"name": "n", "mode": "autonomous"})),
            ev(2, "agent.message", "2026-01-01T00:00:01Z", json!({"text": "Writing it."})),
            ev(
                3,
                "agent.tool_call",
                "2026-01-01T00:00:02Z",
                json!({"id": "t1", "name": "Bash", "input": {"command": "make"}}),
            ),
            ev(
                4,
                "hook.post_tool_use",
                "2026-01-01T00:00:03Z",
                json!({"payload": {"tool_use_id": "t1", "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_response": {"stdout": "ok", "stderr": ""}}}),
            ),
            ev(5, "agent.tool_result", "2026-01-01T00:00:03Z", json!({"tool_use_id": "t1", "content": "ok"})),
            ev(
                6,
                "question.queued",
                "2026-01-01T00:00:04Z",
                json!({"question_id": 2, "source": "human", "text": "Why?"}),
            ),
            ev(7, "hook.stop", "2026-01-01T00:00:05Z", json!({"payload": {"last_assistant_message": "Done."}})),
            ev(8, "evaluation", "2026-01-01T00:00:06Z", json!({"evaluation_id": 7})),
            ev(
                9,
                "decision",
                "2026-01-01T00:00:06.5Z",
                json!({"decision": "block", "stop_event_id": 7, "evaluation_id": 7, "reason": "gadfly: you may not stop yet.\nQuestion from the person supervising: Why?\n"}),
            ),
            ev(
                10,
                "hook.stop",
                "2026-01-01T00:00:08Z",
                json!({"payload": {"last_assistant_message": "x"}, "spooled": {"outcome": "allowed"}}),
            ),
            ev(11, "agent.user_message", "2026-01-01T00:00:09Z", json!({"text": "Stop hook feedback:\ngadfly: ..."})),
            ev(12, "agent.user_message", "2026-01-01T00:00:09Z", json!({"text": "try tiling"})),
        ];
        let t = timeline("c-1", &events, &[eval]).unwrap();
        assert_eq!(t.header.campaign.as_deref(), Some("c-1"));
        assert_eq!(t.header.extra["mode"], "autonomous");
        let kinds: Vec<&str> = t.steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(kinds, ["assistant_text", "tool_call", "tool_result", "human", "stop", "human"]);
        assert_eq!(t.steps[1].kind, StepKind::ToolCall { tool: "Bash".into(), text: "make".into() });
        assert_eq!(t.steps[1].t, 2.0);
        let StepKind::Stop { evaluation: Some(m), recorded: Some(r), cached: false, .. } = &t.steps[4].kind else {
            panic!("{:?}", t.steps[4])
        };
        assert_eq!(m.scenarios.len(), 1, "the missing scenario is missing again");
        assert_eq!(m.failures, ["build failed"], "the bar is the predicate's");
        assert_eq!((r.decision.as_str(), r.question.as_deref()), ("block", Some("Why?")));
        assert_eq!(t.steps[5].kind, StepKind::Human { text: "try tiling".into(), queued: false });
        // Written and read back.
        let text = super::super::timeline::write(&t);
        assert_eq!(super::super::timeline::parse(&text).unwrap(), t);
    }
}
