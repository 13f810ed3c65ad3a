//! A replay report read back as the bank's learning history
//! ([`bank::learn::History`]), so that `gadfly bank stats --replay` can
//! compute the figures and the uplift of `gadfly bank stats` offline.
//!
//! It reads the report's JSON (`gadfly replay --json`), not the
//! [`super::Report`] type: a report is a file written earlier, perhaps by
//! another build. What it takes from each step:
//!
//! - **asked**: each `delivered` question whose `source` is a bank id (not
//!   `human`), at the moment the question names, marked `claim` when a
//!   moment that quotes the agent's claim asked it (never withheld: it
//!   stays out of the uplift);
//! - **withheld**: each `moment` whose `outcome` is `withheld`;
//! - **evals**: each `evaluated` that is not `cached` (the daemon's cache
//!   gave it: it is an earlier evaluation judged again), as the
//!   workspace's own, correct unless `incorrect`, never re-checked (a
//!   replay re-checks nothing).
//!
//! The time of each is a stamp made of the step's `t` and the thing's
//! place in the report, so string order is the report's order: an
//! evaluation before a question in the same step counts as before it, as
//! the replay did it.
//!
//! On a recorded campaign the agent never read the replay's questions, so
//! what follows them is what followed anyway: the uplift measured there is
//! the estimator's rate of false uplift, not the bank's effect
//! (docs/REPLAY.md, "Learning on a replay").

use std::collections::HashSet;

use serde_json::Value;

use crate::bank::learn::{Asked, EvalPoint, Evaluated, History, Withheld};

/// The learning history of one replay report, as campaign `campaign`.
/// Errors name the step (its index in `steps`), the thing done (its index
/// in the step's `did`) and the field.
pub fn history_of(report: &Value, campaign: &str) -> Result<History, String> {
    let steps = report
        .as_object()
        .ok_or("not a replay report: not a JSON object")?
        .get("steps")
        .ok_or("not a replay report: no `steps`")?
        .as_array()
        .ok_or("not a replay report: `steps` is not an array")?;
    let mut h = History::default();
    let mut ids = Ids::default();
    let mut seq = 0usize;
    // The report's ids of questions asked at a claim in the agent's words
    // (a moment with a `quote`): never withheld, out of the uplift.
    let mut at_claims = std::collections::HashSet::new();
    for (i, step) in steps.iter().enumerate() {
        let at = |what: &str| format!("step {i}: {what}");
        let step = step.as_object().ok_or_else(|| at("not an object"))?;
        let t = step.get("t").and_then(Value::as_f64).ok_or_else(|| at("`t` is not a number"))?;
        if !(t.is_finite() && t >= 0.0) {
            return Err(at(&format!("`t` is {t}, not a number of seconds >= 0")));
        }
        let dids = step.get("did").and_then(Value::as_array).ok_or_else(|| at("`did` is not an array"))?;
        for (j, d) in dids.iter().enumerate() {
            seq += 1;
            let stamp = format!("{t:015.3}#{seq:08}");
            let field = |f: &str, what: &str| format!("step {i}: did {j}: `{f}` {what}");
            let str_of = |f: &str| -> Result<&str, String> {
                d.get(f).and_then(Value::as_str).ok_or_else(|| field(f, "is not a string"))
            };
            match str_of("what")? {
                "delivered" => {
                    let q = d
                        .get("question")
                        .filter(|q| q.is_object())
                        .ok_or_else(|| field("question", "is not an object"))?;
                    let source = q
                        .get("source")
                        .and_then(Value::as_str)
                        .ok_or_else(|| field("question.source", "is not a string"))?;
                    let moment = match q.get("moment") {
                        None | Some(Value::Null) => None,
                        Some(m) => Some(m.as_str().ok_or_else(|| field("question.moment", "is not a string"))?),
                    };
                    let id = match q.get("id") {
                        None | Some(Value::Null) => None,
                        Some(v) => Some(v.as_i64().ok_or_else(|| field("question.id", "is not an integer"))?),
                    };
                    if source == "human" {
                        continue;
                    }
                    h.asked.push(Asked {
                        claim: id.is_some_and(|id| at_claims.contains(&id)),
                        question_id: ids.asked.take(id),
                        campaign_id: campaign.to_string(),
                        bank_id: Some(source.to_string()),
                        delivered_at: stamp,
                        moment: moment.map(str::to_string),
                    });
                }
                "moment" => {
                    if let (Some(Value::String(_)), Some(id)) =
                        (d.get("quote"), d.get("question").and_then(|q| q.get("id")).and_then(Value::as_i64))
                    {
                        at_claims.insert(id);
                    }
                    if str_of("outcome")? != "withheld" {
                        continue;
                    }
                    h.withheld.push(Withheld {
                        id: ids.withheld.take(None),
                        campaign_id: campaign.to_string(),
                        moment: str_of("moment")?.to_string(),
                        at: stamp,
                    });
                }
                "evaluated" => {
                    let flag =
                        |f: &str| d.get(f).and_then(Value::as_bool).ok_or_else(|| field(f, "is not true or false"));
                    if flag("cached")? {
                        continue;
                    }
                    let id = d
                        .get("evaluation")
                        .and_then(Value::as_i64)
                        .ok_or_else(|| field("evaluation", "is not an integer"))?;
                    let geomean = match d.get("geomean_speedup") {
                        None | Some(Value::Null) => None,
                        Some(g) => Some(g.as_f64().ok_or_else(|| field("geomean_speedup", "is not a number"))?),
                    };
                    h.evals.push(Evaluated {
                        point: EvalPoint {
                            id: ids.evals.take(Some(id)),
                            campaign_id: campaign.to_string(),
                            created_at: stamp,
                            geomean,
                        },
                        workspace: true,
                        correct: !flag("incorrect")?,
                        rejected: false,
                    });
                }
                _ => {}
            }
        }
    }
    Ok(h)
}

/// The ids given out in one campaign, one set per kind of thing.
#[derive(Default)]
struct Ids {
    asked: IdSet,
    withheld: IdSet,
    evals: IdSet,
}

#[derive(Default)]
struct IdSet {
    used: HashSet<i64>,
    next: i64,
}

impl IdSet {
    /// `want` when it is free, else the next id not used yet.
    fn take(&mut self, want: Option<i64>) -> i64 {
        let id = match want {
            Some(id) if !self.used.contains(&id) => id,
            _ => {
                while self.used.contains(&(self.next + 1)) {
                    self.next += 1;
                }
                self.next + 1
            }
        };
        self.used.insert(id);
        self.next = self.next.max(id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A report as `gadfly replay --json` writes it, cut to what learning
    /// reads (and a few things it does not).
    fn report() -> Value {
        json!({"campaign": "c", "steps": [
            {"step": 0, "t": 0.0, "kind": "start", "did": [
                {"what": "moment", "moment": "start", "outcome": "question",
                 "question": {"id": 1, "source": "gap-001", "moment": "start", "text": "?"}},
                {"what": "queued", "question": {"id": 1, "source": "gap-001", "moment": "start", "text": "?"}}]},
            {"step": 1, "t": 2.5, "kind": "evaluation", "did": [
                {"what": "evaluated", "evaluation": 1, "holds": true, "geomean_speedup": 1.2,
                 "failing": [], "failures": [], "cached": false, "incorrect": false}]},
            {"step": 2, "t": 3.0, "kind": "tool_result", "did": [
                {"what": "delivered", "question": {"id": 1, "source": "gap-001", "moment": "start", "text": "?"},
                 "via": "hook_additional_context"}]},
            {"step": 3, "t": 9.0, "kind": "stop", "did": [
                {"what": "evaluated", "evaluation": 2, "holds": false, "geomean_speedup": 3.0,
                 "failing": [{"scenario": "a", "reasons": ["incorrect"]}], "failures": [], "cached": false, "incorrect": true},
                {"what": "moment", "moment": "plateau", "outcome": "withheld", "why": "withheld: ..."},
                {"what": "moment", "moment": "plateau", "outcome": "no_question", "why": "held"},
                {"what": "delivered", "question": {"id": 2, "source": "human", "text": "why?"}, "via": "stop_hook_reason"},
                {"what": "stop", "decision": "block"}]},
            {"step": 4, "t": 12.0, "kind": "stop", "did": [
                {"what": "evaluated", "evaluation": 2, "holds": false, "geomean_speedup": 3.0,
                 "failing": [], "failures": [], "cached": true, "incorrect": true},
                {"what": "delivered", "question": {"id": 3, "source": "bench-002", "moment": "plateau", "text": "?"},
                 "via": "stop_hook_reason"}]},
            {"step": 5, "t": 100.25, "kind": "evaluation", "did": [
                {"what": "evaluated", "evaluation": 3, "holds": true,
                 "failing": [], "failures": [], "cached": false, "incorrect": false}]}
        ]})
    }

    #[test]
    fn a_report_reads_as_its_questions_withheld_moments_and_evaluations() {
        let h = history_of(&report(), "c#1").unwrap();
        let asked: Vec<(i64, Option<&str>, Option<&str>, &str)> = h
            .asked
            .iter()
            .map(|a| (a.question_id, a.bank_id.as_deref(), a.moment.as_deref(), a.campaign_id.as_str()))
            .collect();
        assert_eq!(asked, [(1, Some("gap-001"), Some("start"), "c#1"), (3, Some("bench-002"), Some("plateau"), "c#1")]);
        assert_eq!(h.withheld.len(), 1);
        assert_eq!((h.withheld[0].moment.as_str(), h.withheld[0].id), ("plateau", 1));
        let evals: Vec<(i64, Option<f64>, bool, bool)> =
            h.evals.iter().map(|e| (e.point.id, e.point.geomean, e.correct, e.workspace)).collect();
        assert_eq!(evals, [(1, Some(1.2), true, true), (2, Some(3.0), false, true), (3, None, true, true)]);
        assert!(h.evals.iter().all(|e| !e.rejected));
        // The stamps order as the report does: by t, then by place.
        let mut stamps: Vec<&str> = h.evals.iter().map(|e| e.point.created_at.as_str()).collect();
        stamps.extend(h.asked.iter().map(|a| a.delivered_at.as_str()));
        stamps.push(&h.withheld[0].at);
        stamps.sort_unstable();
        let order: Vec<&str> = [
            &h.evals[0].point.created_at,
            &h.asked[0].delivered_at,
            &h.evals[1].point.created_at,
            &h.withheld[0].at,
            &h.asked[1].delivered_at,
            &h.evals[2].point.created_at,
        ]
        .into_iter()
        .map(String::as_str)
        .collect();
        assert_eq!(stamps, order);
        assert!(h.evals[2].point.created_at.starts_with("00000000100.250#"), "{}", h.evals[2].point.created_at);
    }

    /// A question asked at a claim in the agent's words (its moment quotes
    /// the claim) is marked so: such a moment is never withheld.
    #[test]
    fn a_question_asked_at_a_claim_is_marked() {
        let r = report();
        assert!(history_of(&r, "c").unwrap().asked.iter().all(|a| !a.claim));
        let mut r = r;
        let claim = json!({"what": "moment", "moment": "plateau", "outcome": "question", "quote": "This is the ceiling.",
                           "question": {"id": 3, "source": "bench-002", "moment": "plateau", "text": "t"}});
        r["steps"][1]["did"].as_array_mut().unwrap().push(claim);
        let h = history_of(&r, "c").unwrap();
        let claims: Vec<(i64, bool)> = h.asked.iter().map(|a| (a.question_id, a.claim)).collect();
        assert_eq!(claims, [(1, false), (3, true)]);
    }

    /// Two questions with one id (a report edited by hand) still get ids
    /// of their own.
    #[test]
    fn ids_stay_unique_within_a_campaign() {
        let mut r = report();
        r["steps"][4]["did"][1]["question"]["id"] = json!(1);
        let h = history_of(&r, "c").unwrap();
        let ids: Vec<i64> = h.asked.iter().map(|a| a.question_id).collect();
        assert_eq!(ids, [1, 2]);
    }

    #[test]
    fn a_malformed_step_is_refused_with_its_step_and_field() {
        let mut r = report();
        r["steps"][4]["did"][1]["question"]["source"] = json!(12);
        assert_eq!(history_of(&r, "c").unwrap_err(), "step 4: did 1: `question.source` is not a string");
        let mut r = report();
        r["steps"][3]["did"][0]["incorrect"] = json!("no");
        assert_eq!(history_of(&r, "c").unwrap_err(), "step 3: did 0: `incorrect` is not true or false");
        let mut r = report();
        r["steps"][1]["t"] = json!(-1);
        assert_eq!(history_of(&r, "c").unwrap_err(), "step 1: `t` is -1, not a number of seconds >= 0");
        let mut r = report();
        r["steps"][2]["did"][0]["what"] = json!(null);
        assert_eq!(history_of(&r, "c").unwrap_err(), "step 2: did 0: `what` is not a string");
        assert_eq!(history_of(&json!({"summary": {}}), "c").unwrap_err(), "not a replay report: no `steps`");
        assert_eq!(history_of(&json!([1, 2]), "c").unwrap_err(), "not a replay report: not a JSON object");
    }
}
