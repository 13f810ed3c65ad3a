//! What a replay reports: the options it runs under, each step's judgment
//! and the summary figures computed from the steps (see the parent module
//! for how a replay runs).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::campaign::Mode;
use crate::events::Via;
use crate::gate::Decision;

use super::timeline::RecordedStop;

/// How to replay.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The mode to judge in (default: the spec's).
    pub mode: Option<Mode>,
    /// 0: the bank's sampling seeded as the daemon seeded it for the
    /// recorded campaign; any other value, another draw.
    pub seed: u64,
}

/// What a replay found: every step with what gadfly did there, and the
/// summary.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub source: String,
    pub campaign: Option<String>,
    pub spec: String,
    pub mode: Mode,
    pub seed: u64,
    /// What the replay could not do, one sentence each.
    pub notes: Vec<String>,
    /// Step 0 is the campaign's start; the timeline's steps are 1..=N.
    pub steps: Vec<StepReport>,
    pub summary: Summary,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub step: usize,
    pub t: f64,
    pub kind: String,
    /// The step's text, cut short.
    pub excerpt: String,
    /// What gadfly did at this step, in order.
    pub did: Vec<Did>,
}

/// One thing gadfly did (or would have done).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Did {
    /// A moment, with its evidence and what became of it.
    Moment {
        moment: String,
        detector: String,
        source: String,
        detail: String,
        evaluations: Vec<i64>,
        scenarios: Vec<String>,
        evaluation_count: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        quote: Option<String>,
        /// A claim in an agent message, classified once the stream's grace
        /// was over: the step of the message.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_step: Option<usize>,
        repeated: bool,
        /// `question` (queued, or asked at the stop), `suggestions`,
        /// `recorded`, `no_question`, or `withheld` (left without its
        /// question by `[questions] withhold`: the control arm of the
        /// bank's uplift; `why` says so).
        outcome: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        question: Option<QuestionRef>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        suggestions: Vec<QuestionRef>,
        #[serde(skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// A repeated claim, escalated.
    Escalated { moment: String, why: String, quote: String },
    /// A question queued (for a moment, or a person's).
    Queued { question: QuestionRef },
    /// A question put to the agent: `via` `stop_hook_reason` (in a blocked
    /// stop's reason) or `hook_additional_context` (mid-turn, with the next
    /// tool result, as a PostToolUse hook delivers it).
    Delivered { question: QuestionRef, via: String },
    /// Questions still waiting when a stop was allowed: never answered.
    Expired { question: QuestionRef, reason: String },
    /// An evaluation's verdict.
    Evaluated {
        evaluation: i64,
        holds: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        geomean_speedup: Option<f64>,
        /// The geometric mean's interval with noise (`[low, high]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        geomean_interval: Option<[f64; 2]>,
        failing: Vec<Failing>,
        failures: Vec<String>,
        /// The daemon's cache gave it (no detectors ran).
        cached: bool,
        /// Its figures are no result (`Evaluation::incorrect`): a scenario
        /// incorrect or missing, or the evaluation failed.
        incorrect: bool,
    },
    /// A suspicious gain on a candidate that passes: the daemon re-runs
    /// the harness with another seed before it counts; a replay cannot.
    RecheckNotReplayed { evaluation: i64 },
    /// A stop judged.
    Stop {
        decision: Decision,
        /// None when the candidate could not be evaluated.
        #[serde(skip_serializing_if = "Option::is_none")]
        holds: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        evaluation: Option<i64>,
        failing: Vec<Failing>,
        failures: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        unevaluated: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        question: Option<QuestionRef>,
        /// The block reason the agent would have read.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The live daemon's decision, when the timeline recorded it.
        #[serde(skip_serializing_if = "Option::is_none")]
        recorded: Option<RecordedStop>,
    },
    /// A person's message, shown beside gadfly's questions.
    Human { text: String, queued: bool },
}

/// A failing scenario and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Failing {
    pub scenario: String,
    pub reasons: Vec<String>,
}

/// A question, as the report names it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct QuestionRef {
    /// The replay's queue id (none for a suggestion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// The bank entry's id, or `human`.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moment: Option<String>,
    pub text: String,
}

/// The figures of a replay.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub steps: usize,
    pub evaluations: usize,
    /// Stop attempts judged.
    pub stops: usize,
    /// How many would have been blocked (those that could not be
    /// evaluated included)...
    pub blocked: usize,
    pub allowed: usize,
    /// ...or recorded (audit mode).
    pub recorded: usize,
    /// Stops with no evaluation to judge (blocked, failing closed; or
    /// recorded in audit mode).
    pub unevaluated: usize,
    /// Against the live decisions, when the timeline has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agreement: Option<Agreement>,
    /// Moments by kind: how many, and the step of the first.
    pub moments: BTreeMap<String, MomentTally>,
    pub escalations: usize,
    pub questions_queued: usize,
    /// Questions put to the agent, at stops and mid-turn.
    pub questions_asked: usize,
    pub asked_at_stop: usize,
    pub asked_mid_turn: usize,
    /// Moments that offered a person suggestions (human mode).
    pub suggested: usize,
    /// Each recorded human message, with gadfly's nearest question before it.
    pub humans: Vec<HumanNote>,
}

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Agreement {
    pub compared: usize,
    pub agree: usize,
    /// The steps where the replay decided otherwise.
    pub differ: Vec<usize>,
}

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct MomentTally {
    pub count: usize,
    pub first_step: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct HumanNote {
    pub step: usize,
    pub t: f64,
    pub text: String,
    pub queued: bool,
    /// gadfly's nearest question before it (asked, or offered to a person).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nearest: Option<Nearest>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Nearest {
    pub step: usize,
    pub steps_earlier: usize,
    pub seconds_earlier: f64,
    /// `stop_hook_reason`, `hook_additional_context` or `suggested`.
    pub via: String,
    pub question: QuestionRef,
}

/// The figures of a replay, from its steps.
pub(super) fn summarize(steps: &[StepReport]) -> Summary {
    let mut s = Summary { steps: steps.len().saturating_sub(1), ..Default::default() };
    let mut agreement = Agreement::default();
    // Every question gadfly put to the agent or offered to a person: (step, t, via, question).
    let mut asked: Vec<(usize, f64, String, QuestionRef)> = vec![];
    for st in steps {
        for d in &st.did {
            match d {
                Did::Moment { moment, outcome, suggestions, .. } => {
                    let tally =
                        s.moments.entry(moment.clone()).or_insert(MomentTally { count: 0, first_step: st.step });
                    tally.count += 1;
                    if outcome == "suggestions" {
                        s.suggested += 1;
                        for q in suggestions {
                            asked.push((st.step, st.t, "suggested".into(), q.clone()));
                        }
                    }
                }
                Did::Escalated { .. } => s.escalations += 1,
                Did::Queued { .. } => s.questions_queued += 1,
                Did::Delivered { question, via } => {
                    s.questions_asked += 1;
                    if via == Via::StopHookReason.as_str() {
                        s.asked_at_stop += 1;
                    } else {
                        s.asked_mid_turn += 1;
                    }
                    asked.push((st.step, st.t, via.clone(), question.clone()));
                }
                Did::Evaluated { cached: false, .. } => s.evaluations += 1,
                Did::Stop { decision, unevaluated, recorded, .. } => {
                    s.stops += 1;
                    match decision {
                        Decision::Block => s.blocked += 1,
                        Decision::Allow | Decision::LimitAccepted => s.allowed += 1,
                        Decision::Record => s.recorded += 1,
                    }
                    s.unevaluated += unevaluated.is_some() as usize;
                    if let Some(r) = recorded {
                        agreement.compared += 1;
                        if r.decision == decision.as_str() {
                            agreement.agree += 1;
                        } else {
                            agreement.differ.push(st.step);
                        }
                    }
                }
                Did::Human { text, queued } => {
                    let nearest =
                        asked.iter().rev().find(|(step, ..)| *step < st.step).map(|(step, t, via, q)| Nearest {
                            step: *step,
                            steps_earlier: st.step - step,
                            seconds_earlier: ((st.t - t) * 1000.0).round() / 1000.0,
                            via: via.clone(),
                            question: q.clone(),
                        });
                    s.humans.push(HumanNote { step: st.step, t: st.t, text: text.clone(), queued: *queued, nearest });
                }
                _ => {}
            }
        }
    }
    if agreement.compared > 0 {
        s.agreement = Some(agreement);
    }
    s
}
