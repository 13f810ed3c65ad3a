//! The Stop gate's decision, as a pure function of the campaign's mode, the
//! verdict and the question to carry: block while the predicate fails (or
//! a person's question waits), allow otherwise, never block in audit mode.
//! [`plan_stop`] is the whole stop decision (which question a blocked stop
//! carries, the tamper override, what becomes of the claim moments), as
//! data in, data out. Also the text of the block reason the agent reads.

use serde::{Deserialize, Serialize};

use crate::bank::groups::groups_for;
use crate::bank::select;
use crate::campaign::{Mode, PredicateSpec};
use crate::evaluation::Evaluation;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Block,
    Allow,
    /// Audit mode: the attempt is recorded and let through whatever the verdict.
    Record,
    /// A person accepted the agent's limit claim: the stop is let through
    /// as an accepted limit, never as a success.
    LimitAccepted,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Block => "block",
            Decision::Allow => "allow",
            Decision::Record => "record",
            Decision::LimitAccepted => "limit_accepted",
        }
    }
}

/// Blocked stops in a row without a gain, at the end of `stops` (oldest
/// first: each stop's decision and the geometric mean it was judged on). A
/// block whose geomean beats every earlier one is a gain and starts the
/// count again; an allowed stop ends any streak.
pub fn blocks_without_gain(stops: &[(&str, Option<f64>)]) -> u32 {
    let (mut best, mut streak) = (None::<f64>, 0u32);
    for (decision, geomean) in stops {
        if *decision != "block" {
            streak = 0;
            continue;
        }
        // As the run's budget counts it (`agent::budget`): a gain beats the
        // best by more than 0.1%.
        let gained = match (geomean, best) {
            (Some(g), Some(b)) => *g > b * 1.001,
            (Some(_), None) => true,
            _ => false,
        };
        if gained {
            best = *geomean;
            streak = 0;
        } else {
            streak += 1;
        }
    }
    streak
}

/// What a block reason adds after `after` or more blocked stops in a row
/// without a gain (`blocks`): the sanctioned exit, and that editing what
/// judges the work is recorded. None below the threshold.
pub fn limit_reminder(blocks: u32, after: u32) -> Option<String> {
    (blocks >= after.max(1)).then(|| {
        format!(
            "\ngadfly: {blocks} blocked stops in a row without a gain. If you believe the goal cannot be reached, \
             do not stop again and do not work around the check: claim the limit with your evidence, \
             `\"$GADFLY_BIN\" claim limit --why \"...\" --evidence FILE`, and a person will judge it. \
             Editing what judges your work (the harness, the protected files, gadfly's hooks) is recorded \
             and never makes the predicate hold.\n"
        )
    })
}

/// A question to carry in a block reason.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Question {
    /// The queued question's row id, when it came from the queue.
    pub queued_id: Option<i64>,
    /// The bank entry's id, or `human` for a person's question.
    pub source: String,
    pub moment: String,
    pub text: String,
}

pub fn decide(mode: Mode, holds: bool, human_question_waiting: bool) -> Decision {
    match mode {
        Mode::Audit => Decision::Record,
        _ if !holds => Decision::Block,
        _ if human_question_waiting => Decision::Block,
        _ => Decision::Allow,
    }
}

/// The moments of a stop's words the evaluation is to hold back (no
/// question of their own from the detectors): in autonomous mode the stop
/// asks the first of them itself. Completion claims are judged by the stop
/// and never held.
pub fn held_moments(mode: Mode, claims: &[&str]) -> Vec<String> {
    if mode != Mode::Autonomous {
        return vec![];
    }
    claims.iter().filter(|m| **m != "completion_claim").map(|m| m.to_string()).collect()
}

/// What the stop's evaluation gave.
#[derive(Debug, Clone, Copy)]
pub enum Judged<'a> {
    /// The candidate was evaluated: the verdict the gate judges.
    Evaluated(&'a Evaluation),
    /// It could not be evaluated: why (the error as `{e:#}` writes it).
    Unevaluated(&'a str),
}

/// A question waiting in the campaign's queue, as the stop weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The queued question's row id.
    pub id: i64,
    /// A person's question (else one queued from the bank for a moment).
    pub human: bool,
    /// The moment it was queued for.
    pub moment: Option<String>,
}

/// Everything the stop decision depends on, gathered beforehand: no I/O
/// in [`plan_stop`].
#[derive(Debug, Clone)]
pub struct StopInput<'a> {
    pub campaign_id: &'a str,
    pub mode: Mode,
    pub predicate: &'a PredicateSpec,
    pub judged: Judged<'a>,
    /// What changed in the hooks gadfly installed (empty: untouched).
    pub tampered: &'a [String],
    /// The queued questions, oldest first (not read when the candidate
    /// could not be evaluated).
    pub waiting: Vec<Waiting>,
    /// The moments the stop's own words show, in the order the classifier
    /// found them (`completion_claim` among them).
    pub claims: Vec<&'a str>,
}

impl StopInput<'_> {
    /// The waiting question `id` was delivered by someone else since the
    /// queue was read (a PostToolUse hook claimed it): it waits no longer.
    /// Plan again: the next choice in the chain, or no block at all when
    /// that question was all that blocked.
    pub fn delivered_elsewhere(&mut self, id: i64) {
        self.waiting.retain(|q| q.id != id);
    }
}

/// The question a blocked stop carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// A waiting question, by its row id.
    Queued(i64),
    /// A fresh pick from the bank for `moment`, preferring `groups` (queued
    /// and delivered at once).
    Pick { moment: String, groups: Vec<&'static str> },
}

/// What becomes of one claim moment of the stop's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimPlan {
    /// Its question is the one the stop carries.
    AskedAtStop,
    /// Acted on by mode (its question queued for later, suggestions...).
    Ask,
    /// Recorded only, with why no question is asked.
    RecordOnly(&'static str),
}

/// One part of a stop's reason; the parts are joined in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReasonPart {
    /// The hooks were tampered with: this line (first, with a newline).
    Tampered(String),
    /// The candidate could not be evaluated: this text.
    Unevaluated(String),
    /// The verdict's [`block_reason`], with the question the stop carries.
    Verdict,
}

/// What a stop attempt comes to: carried out by the caller (deliver the
/// question, raise the claim moments, record the attempt).
#[derive(Debug, Clone, PartialEq)]
pub struct StopPlan {
    pub decision: Decision,
    /// The question to deliver in the block reason (only when the verdict
    /// blocks; a block for tampered hooks alone carries none).
    pub ask: Option<Ask>,
    /// One per claim moment of the input, in its order.
    pub claims: Vec<ClaimPlan>,
    /// The reason, in parts (none: no reason).
    pub reason: Vec<ReasonPart>,
    /// The waiting questions that expire (row ids): once a stop is allowed
    /// nobody is left to answer them, so none waits for ever (see
    /// [`expiry_reason`]).
    pub expire: Vec<i64>,
}

/// The stop decision. The question a blocked stop carries, first that
/// applies:
/// 1. the person's oldest waiting question;
/// 2. human mode: nothing more (the person picks the questions; the
///    moments offer them suggestions, and no bank question is sent);
/// 3. correctness first: on a candidate with an incorrect scenario, a
///    correctness question and nothing else. The stop's words' dismissal
///    of a failure when they show one (its waiting question, else a fresh
///    pick for it), else the latest waiting [`CORRECTNESS_MOMENT`]
///    question, else a fresh completion-claim pick in the correctness
///    group; the claim moments it passes over are asked by mode;
/// 4. autonomous mode only: for the first claim moment of the stop's words
///    (completion claims excluded), the latest question waiting for that
///    moment, else a fresh pick for it;
/// 5. the latest waiting moment question (never the `start` one: it waits
///    for a hook that can carry context);
/// 6. a fresh completion-claim pick, preferring the groups that fit what
///    failed (the bank's builtin questions are the picker's fallback).
///
/// A candidate that could not be evaluated blocks (fail closed), with no
/// question. Tampered hooks block whatever the verdict, their line first.
/// Audit mode only records.
pub fn plan_stop(input: &StopInput) -> StopPlan {
    let mode = input.mode;
    let mut asked_claim = None;
    let (decision, ask, mut reason) = match input.judged {
        Judged::Unevaluated(why) => {
            let d = if mode == Mode::Audit { Decision::Record } else { Decision::Block };
            let text = format!(
                "gadfly could not evaluate the candidate, so the stop predicate is not known to hold: {why}. Fix what this names (or ask the person supervising), then try to stop again."
            );
            (d, None, vec![ReasonPart::Unevaluated(text)])
        }
        Judged::Evaluated(eval) => {
            let human = input.waiting.iter().find(|q| q.human);
            let decision = decide(mode, eval.verdict.holds, human.is_some());
            if decision != Decision::Block {
                (decision, None, vec![])
            } else {
                let mut bank = input.waiting.iter().rev().filter(|q| !q.human);
                // The first held moment (see `held_moments`; none outside
                // autonomous mode).
                let claim =
                    held_moments(mode, &input.claims).first().and_then(|m| input.claims.iter().position(|c| c == m));
                let ask = if let Some(q) = human {
                    Some(Ask::Queued(q.id))
                } else if mode == Mode::Human {
                    None
                } else if incorrect(eval) {
                    match claim.filter(|&i| input.claims[i] == CORRECTNESS_MOMENT) {
                        Some(i) => {
                            asked_claim = Some(i);
                            Some(ask_for(CORRECTNESS_MOMENT, bank))
                        }
                        None => Some(match bank.find(|q| q.moment.as_deref() == Some(CORRECTNESS_MOMENT)) {
                            Some(q) => Ask::Queued(q.id),
                            None => Ask::Pick { moment: "completion_claim".into(), groups: prefer_groups(eval) },
                        }),
                    }
                } else if let Some(i) = claim {
                    asked_claim = Some(i);
                    Some(ask_for(input.claims[i], bank))
                } else {
                    Some(match bank.find(|q| q.moment.as_deref() != Some("start")) {
                        Some(q) => Ask::Queued(q.id),
                        None => Ask::Pick { moment: "completion_claim".into(), groups: prefer_groups(eval) },
                    })
                };
                (decision, ask, vec![ReasonPart::Verdict])
            }
        }
    };
    // Hooks the agent tampered with: no stop until they are restored.
    let decision = if !input.tampered.is_empty() && mode != Mode::Audit {
        reason.insert(
            0,
            ReasonPart::Tampered(format!(
                "gadfly: you may not stop: the hooks that supervise this campaign were tampered with: {}. Restore them (the person supervising can run `gadfly attach {}` again), then try to stop again.",
                input.tampered.join("; "),
                input.campaign_id
            )),
        );
        Decision::Block
    } else {
        decision
    };
    // The other claim moments: asked by mode, except that nobody is left
    // to answer once an autonomous agent's stop is allowed.
    let claims = (0..input.claims.len())
        .map(|i| {
            if Some(i) == asked_claim {
                ClaimPlan::AskedAtStop
            } else if mode == Mode::Autonomous && decision != Decision::Block {
                ClaimPlan::RecordOnly("the stop was allowed: the predicate holds")
            } else {
                ClaimPlan::Ask
            }
        })
        .collect();
    // Allowed: what still waits will never be answered.
    let expire = match decision {
        Decision::Allow => input.waiting.iter().map(|q| q.id).collect(),
        _ => vec![],
    };
    StopPlan { decision, ask, claims, reason, expire }
}

/// Why a question still waiting expires when a stop is allowed. A
/// suspicious gain's question says whether gadfly's own re-evaluation of
/// the gain (another seed, before the allow) confirmed it.
pub fn expiry_reason(moment: Option<&str>, gain_confirmed: bool) -> &'static str {
    match moment {
        Some("suspicious_gain") if gain_confirmed => {
            "the stop was allowed: gadfly's re-evaluation with another seed confirmed the gain"
        }
        _ => "the stop was allowed",
    }
}

/// The question for a claim moment: the latest of `bank` (the waiting
/// moment questions, latest first) queued for `moment`, else a fresh pick
/// for it.
fn ask_for<'a>(moment: &str, mut bank: impl Iterator<Item = &'a Waiting>) -> Ask {
    match bank.find(|q| q.moment.as_deref() == Some(moment)) {
        Some(q) => Ask::Queued(q.id),
        None => Ask::Pick { moment: moment.to_string(), groups: groups_for(moment).to_vec() },
    }
}

impl StopPlan {
    /// The reason's text, with `question` the one the stop carries; none
    /// when the plan has no reason.
    pub fn reason_text(&self, input: &StopInput, question: Option<&Question>) -> Option<String> {
        if self.reason.is_empty() {
            return None;
        }
        let mut out = String::new();
        for part in &self.reason {
            match part {
                ReasonPart::Tampered(line) => {
                    out.push_str(line);
                    out.push('\n');
                }
                ReasonPart::Unevaluated(text) => out.push_str(text),
                ReasonPart::Verdict => {
                    if let Judged::Evaluated(eval) = input.judged {
                        out.push_str(&block_reason(eval, input.predicate, question));
                    }
                }
            }
        }
        Some(out)
    }

    /// The plan once a person accepted the agent's limit claim: the stop is
    /// let through as an accepted limit, asking nothing; what waits expires.
    pub fn limit_accepted(mut self, input: &StopInput) -> StopPlan {
        self.decision = Decision::LimitAccepted;
        self.expire = input.waiting.iter().map(|q| q.id).collect();
        self.ask = None;
        self.reason.clear();
        self.claims = self
            .claims
            .iter()
            .map(|_| ClaimPlan::RecordOnly("the stop was allowed: a person accepted the limit"))
            .collect();
        self
    }

    /// The plan with no question to carry (every choice was delivered
    /// elsewhere meanwhile): the claim moment it would have asked is asked
    /// by mode instead.
    pub fn without_question(mut self) -> StopPlan {
        self.ask = None;
        for c in &mut self.claims {
            if *c == ClaimPlan::AskedAtStop {
                *c = ClaimPlan::Ask;
            }
        }
        self
    }
}

/// The moment whose questions are correctness questions: what the
/// detectors queue for a scenario that turned incorrect, and what the
/// stop's words show when they explain a failure away.
pub const CORRECTNESS_MOMENT: &str = "correctness_dismissal";

/// Whether any scenario the harness measured is incorrect.
pub fn incorrect(eval: &Evaluation) -> bool {
    eval.verdict.scenarios.iter().any(|s| s.present && !s.correct)
}

/// The bank groups that fit what failed: correctness questions for a wrong
/// scenario, bound and gap questions for a slow one, measurement and
/// benchmark questions when the evaluation itself broke.
pub fn prefer_groups(eval: &Evaluation) -> Vec<&'static str> {
    let v = &eval.verdict;
    if incorrect(eval) {
        vec!["correctness"]
    } else if v.scenarios.iter().any(|s| s.present && !s.passes) {
        vec!["gap_analysis", "bound", "measurement"]
    } else if !v.failures.is_empty() || v.scenarios.iter().any(|s| !s.present) {
        vec!["benchmark_validity", "measurement", "correctness"]
    } else {
        vec![]
    }
}

/// The reason shown to the agent when a stop is blocked: every failing
/// scenario in a compact table, the aggregate, evaluation-level failures
/// and one question.
pub fn block_reason(eval: &Evaluation, predicate: &PredicateSpec, question: Option<&Question>) -> String {
    let (min_speedup, min_geomean) = (predicate.min_speedup, predicate.min_geomean_speedup);
    let compared = predicate.uses_comparison();
    let v = &eval.verdict;
    let mut out = String::new();
    let short_tree: String = eval.tree.chars().take(10).collect();
    if v.holds {
        out.push_str(&format!(
            "gadfly: the predicate holds on all {} scenarios (tree {short_tree}), but the person supervising this campaign has a question for you before you stop.\n",
            v.scenarios.len()
        ));
    } else {
        out.push_str(&format!(
            "gadfly: you may not stop yet. The stop predicate fails on {} of {} scenarios (tree {short_tree}).\n",
            v.failing_count,
            v.scenarios.len()
        ));
        let failing: Vec<_> = v.scenarios.iter().filter(|s| !s.passes).collect();
        if !failing.is_empty() {
            let width = failing.iter().map(|s| s.scenario.len()).max().unwrap_or(8).max(8);
            let vs_head = if compared { "  vs comparison" } else { "" };
            out.push_str(&format!("{:<width$}  correct  speedup{vs_head}  reason\n", "scenario"));
            for s in failing {
                let correct = if !s.present {
                    "-"
                } else if s.correct {
                    "yes"
                } else {
                    "NO"
                };
                let speedup = s.speedup.map_or("-".to_string(), |x| format!("{x:.2}x"));
                let vs = if compared {
                    format!("  {:>13}", s.compare_speedup.map_or("-".to_string(), |x| format!("{x:.2}x")))
                } else {
                    String::new()
                };
                out.push_str(&format!(
                    "{:<width$}  {:<7}  {:>7}{vs}  {}\n",
                    s.scenario,
                    correct,
                    speedup,
                    s.reasons.join("; ")
                ));
            }
        }
        for f in &v.failures {
            out.push_str(&format!("- {f}\n"));
        }
    }
    let geo = v.geomean_speedup.map_or("unknown".to_string(), |g| format!("{g:.2}x"));
    let worst = match (&v.worst_scenario, v.worst_speedup) {
        (Some(s), Some(w)) => format!("; worst {s} at {w:.2}x"),
        _ => String::new(),
    };
    let bar = min_geomean.map_or(String::new(), |g| format!(" (must reach {g:.2}x)"));
    out.push_str(&format!(
        "Geometric mean speedup {geo}{bar}{worst}. Every scenario must be correct and at least {min_speedup:.2}x; the mean never stands in for a scenario.\n"
    ));
    if compared {
        let geo_c = v.geomean_compare_speedup.map_or("unknown".to_string(), |g| format!("{g:.2}x"));
        let each = predicate
            .min_compare_speedup
            .map_or(String::new(), |c| format!(" Every scenario must reach at least {c:.2}x the comparison."));
        let bar = predicate.min_compare_geomean.map_or(String::new(), |g| format!(" (must reach {g:.2}x)"));
        out.push_str(&format!(
            "Against the comparison implementation (its time / yours): geometric mean {geo_c}{bar}.{each}\n"
        ));
    }
    if let Some(q) = question {
        let label = if q.source == "human" {
            "Question from the person supervising".to_string()
        } else {
            format!("Question ({})", q.source)
        };
        out.push_str(&format!("\n{label}: {}\n", q.text));
        out.push_str("Answer it with a measurement or an experiment, not an argument.\n");
    }
    if !v.holds {
        out.push_str("Keep working until every scenario passes, then try to stop again.");
    }
    out
}

/// The question for `moment`: the bank's pick ([`select::pick`]), or,
/// when no entry applies, the next of the built-in completion questions
/// (in turn, by how many of them the campaign was asked). The daemon's
/// `pick_question`, `gadfly replay` and `gadfly bank pick` all choose with
/// it. The text names the moment's evidence (`bank::evidence::deliver`).
pub fn choose_question(entries: &[crate::bank::Entry], req: &select::Request<'_>) -> Question {
    // `prefer` weighs groups up, except on an incorrect candidate at the
    // stop (`prefer_groups`: correctness alone): then the question comes
    // from that group while one of its entries applies.
    let within: Vec<crate::bank::Entry>;
    let entries = if req.prefer == ["correctness"] {
        within = entries.iter().filter(|e| e.group == "correctness").cloned().collect();
        if select::pick(&within, req).is_some() {
            &within[..]
        } else {
            entries
        }
    } else {
        entries
    };
    if let Some(choice) = select::pick(entries, req) {
        return Question {
            queued_id: None,
            source: choice.entry.id,
            moment: req.moment.to_string(),
            text: crate::bank::evidence::deliver(&choice.text, req.moment, req.evidence),
        };
    }
    let builtin = BUILTIN_COMPLETION_QUESTIONS;
    let n: usize = req.asked.iter().filter(|a| a.bank_id.starts_with("builtin-")).map(|a| a.times).sum();
    let (id, text) = builtin[n % builtin.len()];
    let text = crate::bank::evidence::deliver(text, req.moment, req.evidence);
    Question { queued_id: None, source: id.to_string(), moment: req.moment.to_string(), text }
}

/// A small set of completion-claim questions, used when no bank entry fits.
pub const BUILTIN_COMPLETION_QUESTIONS: &[(&str, &str)] = &[
    ("builtin-completion-1", "Which failing scenario above is furthest from its target, and what does a measurement of where its time goes say about why?"),
    ("builtin-completion-2", "If you re-run the harness on the failing scenarios alone, do the numbers reproduce, and what changed since the last version that passed them?"),
    ("builtin-completion-3", "What is the fastest this slowest scenario could possibly run, by a bytes-moved or operations-count estimate, and how far from that is it now?"),
    ("builtin-completion-4", "Does your change help every shape the same way, or does a different algorithm suit the small or odd-sized scenarios better?"),
    ("builtin-completion-5", "Which assumption behind 'done' did you check with a measurement, and which did you only reason about?"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::PredicateSpec;
    use crate::predicate::judge;
    use crate::results::ScenarioResult;

    fn eval(results: &[(&str, bool, f64)]) -> Evaluation {
        eval_of(results, &["gone"])
    }

    /// An evaluation of `results`, with the `missing` scenarios required
    /// but not measured.
    fn eval_of(results: &[(&str, bool, f64)], missing: &[&str]) -> Evaluation {
        let spec =
            PredicateSpec { correct: true, min_speedup: 1.0, min_geomean_speedup: Some(1.1), ..Default::default() };
        let names: Vec<String> =
            results.iter().map(|r| r.0.to_string()).chain(missing.iter().map(|m| m.to_string())).collect();
        let measured: Vec<ScenarioResult> = results
            .iter()
            .map(|(n, c, s)| ScenarioResult {
                scenario: n.to_string(),
                correct: *c,
                time_us: 100.0 / s,
                baseline_us: 100.0,
                max_abs_err_ref: None,
                max_abs_err_hi: None,
                tolerance: None,
                rtol: None,
                max_tol_ratio: None,
                compare_us: None,
                bound_us: None,
                samples: None,
                cv: None,
                reason: None,
            })
            .collect();
        Evaluation {
            id: Some(1),
            tree: "0123456789abcdef".into(),
            verdict: judge(&spec, &names, &measured, vec![]),
            build: None,
            run: None,
            violations: vec![],
            duration_ms: 1,
            created_at: String::new(),
            cached: false,
            origin: Default::default(),
        }
    }

    // -----------------------------------------------------------------
    // plan_stop: the stop decision, data in, data out.
    // -----------------------------------------------------------------

    /// b is incorrect: the predicate fails (a correctness question fits).
    fn failing() -> Evaluation {
        eval_of(&[("a", true, 2.0), ("b", false, 2.0)], &[])
    }

    fn holding() -> Evaluation {
        let e = eval_of(&[("a", true, 2.0), ("b", true, 2.0)], &[]);
        assert!(e.verdict.holds);
        e
    }

    /// Every scenario correct, b too slow: the predicate fails on speed.
    fn slow() -> Evaluation {
        let e = eval_of(&[("a", true, 2.0), ("b", true, 0.5)], &[]);
        assert!(!e.verdict.holds && !incorrect(&e));
        e
    }

    fn person(id: i64) -> Waiting {
        Waiting { id, human: true, moment: None }
    }

    fn queued(id: i64, moment: &str) -> Waiting {
        Waiting { id, human: false, moment: Some(moment.into()) }
    }

    fn stop<'a>(mode: Mode, judged: Judged<'a>, waiting: Vec<Waiting>, claims: &[&'a str]) -> StopInput<'a> {
        StopInput {
            campaign_id: "c1",
            mode,
            predicate: Box::leak(Box::default()),
            judged,
            tampered: &[],
            waiting,
            claims: claims.to_vec(),
        }
    }

    fn pick(moment: &str, groups: &[&'static str]) -> Option<Ask> {
        Some(Ask::Pick { moment: moment.into(), groups: groups.to_vec() })
    }

    use ClaimPlan::{Ask as AskByMode, AskedAtStop};

    #[test]
    fn a_persons_oldest_question_comes_first() {
        let e = failing();
        let waiting = vec![queued(1, "correctness_dismissal"), person(2), person(3), queued(4, "suspicious_gain")];
        // The stop's words show a claimed limit too: the person still wins.
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting, &["limit_claim"]));
        assert_eq!(plan.decision, Decision::Block);
        assert_eq!(plan.ask, Some(Ask::Queued(2)), "the oldest person's question");
        assert_eq!(plan.claims, [AskByMode], "the claimed limit lost the stop: raised by mode");
        assert_eq!(plan.reason, [ReasonPart::Verdict]);
    }

    #[test]
    fn then_the_first_claim_moment_of_the_stops_words_in_autonomous_mode() {
        let e = slow();
        let waiting = vec![
            queued(1, "start"),
            queued(2, "correctness_dismissal"),
            queued(3, "correctness_dismissal"),
            queued(4, "suspicious_gain"),
        ];
        // The classifier's order (dismissal, then limit, then gain); a
        // completion claim is never the one asked. The latest question
        // waiting for that moment is carried.
        let claims = ["correctness_dismissal", "limit_claim", "completion_claim"];
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting.clone(), &claims));
        assert_eq!(plan.ask, Some(Ask::Queued(3)));
        assert_eq!(plan.claims, [AskedAtStop, AskByMode, AskByMode]);
        // No question waits for it: a fresh pick for that moment, in its groups.
        let claims = ["completion_claim", "limit_claim", "suspicious_gain"];
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting.clone(), &claims));
        assert_eq!(plan.ask, pick("limit_claim", groups_for("limit_claim")));
        assert_eq!(plan.claims, [AskByMode, AskedAtStop, AskByMode]);
        // Human mode: the words ask nothing themselves, and no bank
        // question is sent (the moments offer suggestions to the person).
        let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&e), waiting, &claims));
        assert_eq!((plan.decision, plan.ask), (Decision::Block, None));
        assert_eq!(plan.claims, [AskByMode; 3]);
    }

    #[test]
    fn then_the_latest_queued_moment_question_never_the_start_one() {
        let e = slow();
        let waiting = vec![queued(1, "correctness_dismissal"), queued(2, "suspicious_gain"), queued(3, "start")];
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting, &["completion_claim"]));
        assert_eq!(plan.ask, Some(Ask::Queued(2)));
        assert_eq!(plan.claims, [AskByMode], "a completion claim is judged by the stop itself");
        // Only the start question waits: a completion-claim pick.
        let e = failing();
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), vec![queued(3, "start")], &[]));
        assert_eq!(plan.ask, pick("completion_claim", &["correctness"]));
    }

    #[test]
    fn then_a_completion_claim_pick_preferring_the_groups_that_fit_what_failed() {
        let cases = [
            (eval_of(&[("a", true, 2.0), ("b", false, 2.0)], &[]), vec!["correctness"]),
            (eval_of(&[("a", true, 2.0), ("b", true, 0.5)], &[]), vec!["gap_analysis", "bound", "measurement"]),
            (eval_of(&[("a", true, 2.0)], &["gone"]), vec!["benchmark_validity", "measurement", "correctness"]),
        ];
        for (e, groups) in cases {
            assert!(!e.verdict.holds);
            let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), vec![], &[]));
            assert_eq!(plan.ask, pick("completion_claim", &groups));
            assert_eq!(plan.reason, [ReasonPart::Verdict]);
        }
        assert!(prefer_groups(&holding()).is_empty());
    }

    #[test]
    fn allowed_when_the_predicate_holds_and_no_persons_question_waits() {
        let e = holding();
        // Moment questions do not block; the claims are recorded only.
        let waiting = vec![queued(1, "start"), queued(2, "plateau")];
        let claims = ["limit_claim", "completion_claim"];
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), waiting, &claims));
        let allowed = ClaimPlan::RecordOnly("the stop was allowed: the predicate holds");
        assert_eq!(
            plan,
            StopPlan {
                decision: Decision::Allow,
                ask: None,
                claims: vec![allowed, allowed],
                reason: vec![],
                expire: vec![1, 2],
            },
            "nobody is left to answer the waiting questions: they expire"
        );
        let input = stop(Mode::Autonomous, Judged::Evaluated(&e), vec![], &[]);
        assert_eq!(plan_stop(&input).reason_text(&input, None), None);
        // A person's question waiting blocks it, and is carried.
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&e), vec![person(7)], &claims));
        assert_eq!((plan.decision, plan.ask), (Decision::Block, Some(Ask::Queued(7))));
        assert_eq!(plan.claims, [AskByMode; 2]);
    }

    #[test]
    fn human_mode_blocks_a_failing_stop_and_allows_a_holding_one() {
        let (bad, good) = (failing(), holding());
        let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&bad), vec![queued(1, "start")], &["limit_claim"]));
        assert_eq!(plan.decision, Decision::Block);
        assert_eq!(plan.ask, None, "no bank question in human mode");
        assert_eq!(plan.reason, [ReasonPart::Verdict]);
        assert_eq!(plan.claims, [AskByMode]);
        let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&good), vec![], &["limit_claim"]));
        assert_eq!((plan.decision, plan.ask), (Decision::Allow, None));
        assert_eq!(plan.claims, [AskByMode], "asked by mode: a person is there to answer");
        let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&good), vec![person(3)], &[]));
        assert_eq!((plan.decision, plan.ask), (Decision::Block, Some(Ask::Queued(3))));
    }

    #[test]
    fn audit_mode_only_records_even_with_a_persons_question_waiting() {
        for e in [failing(), holding()] {
            let plan = plan_stop(&stop(
                Mode::Audit,
                Judged::Evaluated(&e),
                vec![person(1), queued(2, "plateau")],
                &["limit_claim"],
            ));
            assert_eq!(
                plan,
                StopPlan {
                    decision: Decision::Record,
                    ask: None,
                    claims: vec![AskByMode],
                    reason: vec![],
                    expire: vec![]
                }
            );
        }
    }

    #[test]
    fn a_stop_that_cannot_be_evaluated_blocks_with_no_question_and_is_recorded_in_audit_mode() {
        let why = "taking a snapshot of the workspace: gone";
        let text = format!(
            "gadfly could not evaluate the candidate, so the stop predicate is not known to hold: {why}. Fix what this names (or ask the person supervising), then try to stop again."
        );
        for (mode, decision) in
            [(Mode::Autonomous, Decision::Block), (Mode::Human, Decision::Block), (Mode::Audit, Decision::Record)]
        {
            let input = stop(mode, Judged::Unevaluated(why), vec![person(1)], &["limit_claim"]);
            let plan = plan_stop(&input);
            assert_eq!(plan.decision, decision, "{mode:?}");
            assert_eq!(plan.ask, None, "no question without an evaluation");
            assert_eq!(plan.reason, [ReasonPart::Unevaluated(text.clone())], "kept in audit mode too");
            assert_eq!(plan.reason_text(&input, None).as_deref(), Some(text.as_str()));
            assert_eq!(plan.claims, [AskByMode]);
        }
    }

    #[test]
    fn tampered_hooks_block_outside_audit_mode_their_line_first() {
        let tampered = ["hooks were disabled".to_string(), "the hook binary changed".to_string()];
        let line = "gadfly: you may not stop: the hooks that supervise this campaign were tampered with: hooks were disabled; the hook binary changed. Restore them (the person supervising can run `gadfly attach c1` again), then try to stop again.";
        let (good, bad) = (holding(), failing());
        // The predicate holds: blocked, with the tamper line alone and no question.
        let mut input = stop(Mode::Autonomous, Judged::Evaluated(&good), vec![queued(1, "plateau")], &["limit_claim"]);
        input.tampered = &tampered;
        let plan = plan_stop(&input);
        assert_eq!(plan.decision, Decision::Block);
        assert_eq!(plan.ask, None);
        assert_eq!(plan.reason, [ReasonPart::Tampered(line.into())]);
        assert_eq!(plan.reason_text(&input, None), Some(format!("{line}\n")));
        assert_eq!(plan.claims, [AskByMode], "blocked: the claim is asked by mode");
        assert!(plan.expire.is_empty(), "blocked: the plateau question still waits");
        // The predicate fails: the tamper line, then the verdict's reason and question.
        let mut input = stop(Mode::Autonomous, Judged::Evaluated(&bad), vec![], &[]);
        input.tampered = &tampered;
        let plan = plan_stop(&input);
        assert_eq!(plan.decision, Decision::Block);
        assert_eq!(plan.ask, pick("completion_claim", &["correctness"]));
        assert_eq!(plan.reason, [ReasonPart::Tampered(line.into()), ReasonPart::Verdict]);
        let q = Question {
            queued_id: None,
            source: "correct-001".into(),
            moment: "completion_claim".into(),
            text: "Why?".into(),
        };
        let text = plan.reason_text(&input, Some(&q)).unwrap();
        let (first, rest) = text.split_once('\n').unwrap();
        assert_eq!(first, line);
        assert_eq!(rest, block_reason(&bad, input.predicate, Some(&q)));
        // Not evaluated: the tamper line, then why.
        let mut input = stop(Mode::Autonomous, Judged::Unevaluated("no workspace"), vec![], &[]);
        input.tampered = &tampered;
        let plan = plan_stop(&input);
        assert!(matches!(plan.reason.as_slice(), [ReasonPart::Tampered(_), ReasonPart::Unevaluated(_)]));
        // Audit mode: recorded, no reason.
        for judged in [Judged::Evaluated(&good), Judged::Evaluated(&bad)] {
            let mut input = stop(Mode::Audit, judged, vec![], &[]);
            input.tampered = &tampered;
            let plan = plan_stop(&input);
            assert_eq!((plan.decision, plan.ask, plan.reason), (Decision::Record, None, vec![]));
        }
    }

    #[test]
    fn a_question_delivered_elsewhere_meanwhile_gives_way_to_the_next_choice() {
        let (bad, good) = (slow(), holding());
        let waiting = vec![person(1), person(2), queued(3, "limit_claim"), queued(4, "plateau")];
        let mut input = stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting, &["limit_claim"]);
        let mut asked = vec![];
        loop {
            let plan = plan_stop(&input);
            match plan.ask {
                Some(Ask::Queued(id)) => {
                    asked.push((id, plan.claims.clone()));
                    input.delivered_elsewhere(id);
                }
                other => {
                    assert_eq!(other, pick("limit_claim", groups_for("limit_claim")));
                    break;
                }
            }
        }
        // The next person's question, then the claim moment's waiting
        // question, then a fresh pick for it (the plateau question waits).
        assert_eq!(asked, [(1, vec![AskByMode]), (2, vec![AskByMode]), (3, vec![AskedAtStop])]);
        assert_eq!(input.waiting, [queued(4, "plateau")]);
        // A person's question was all that blocked a holding stop: once it
        // is delivered elsewhere, the stop is allowed.
        let mut input = stop(Mode::Autonomous, Judged::Evaluated(&good), vec![person(5)], &[]);
        assert_eq!(plan_stop(&input).ask, Some(Ask::Queued(5)));
        input.delivered_elsewhere(5);
        let plan = plan_stop(&input);
        assert_eq!((plan.decision, plan.ask, plan.reason), (Decision::Allow, None, vec![]));
        assert!(plan.expire.is_empty(), "the person's question was delivered, not expired");
        // An id not waiting changes nothing.
        let before = plan_stop(&input);
        input.delivered_elsewhere(99);
        assert_eq!(plan_stop(&input), before);
    }

    #[test]
    fn a_plan_without_its_question_asks_the_claim_moment_by_mode() {
        let e = slow();
        let input = stop(Mode::Autonomous, Judged::Evaluated(&e), vec![], &["limit_claim", "suspicious_gain"]);
        let plan = plan_stop(&input);
        assert_eq!(plan.claims, [AskedAtStop, AskByMode]);
        let bare = plan.clone().without_question();
        assert_eq!(bare, StopPlan { ask: None, claims: vec![AskByMode, AskByMode], ..plan });
    }

    /// Issue #32: on a kernel wrong everywhere, the stop's words "10x
    /// faster" (a claimed gain) took the stop from the correctness question
    /// a regression had queued. On an incorrect candidate a correctness
    /// question wins over every benchmark or performance one.
    #[test]
    fn correctness_first_on_an_incorrect_candidate() {
        let (bad, slow) = (failing(), slow());
        let waiting = vec![queued(1, "correctness_dismissal"), queued(2, "suspicious_gain"), queued(3, "plateau")];
        let claims = ["suspicious_gain", "completion_claim"];
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting.clone(), &claims));
        assert_eq!(plan.ask, Some(Ask::Queued(1)), "the waiting correctness question, not the gain's");
        assert_eq!(plan.claims, [AskByMode, AskByMode], "the claimed gain is asked by mode");
        // The same stop on a correct (slow) candidate: the claimed gain wins.
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&slow), waiting, &claims));
        assert_eq!(plan.ask, Some(Ask::Queued(2)));
        assert_eq!(plan.claims, [AskedAtStop, AskByMode]);
        // No correctness question waits: a fresh one, never the claim's
        // groups (benchmark validity first) nor a waiting plateau question.
        let waiting = vec![queued(2, "suspicious_gain"), queued(3, "plateau")];
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting, &claims));
        assert_eq!(plan.ask, pick("completion_claim", &["correctness"]));
        assert_eq!(plan.claims, [AskByMode, AskByMode]);
        // Words that explain the failure away: that moment is the one asked,
        // with its latest waiting question, else a fresh pick for it.
        let waiting =
            vec![queued(1, "correctness_dismissal"), queued(4, "limit_claim"), queued(5, "correctness_dismissal")];
        let claims = ["correctness_dismissal", "limit_claim"];
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting, &claims));
        assert_eq!(plan.ask, Some(Ask::Queued(5)));
        assert_eq!(plan.claims, [AskedAtStop, AskByMode]);
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), vec![queued(4, "limit_claim")], &claims));
        assert_eq!(plan.ask, pick("correctness_dismissal", &["correctness", "measurement"]));
        assert_eq!(plan.claims, [AskedAtStop, AskByMode]);
        // A person's question still comes first.
        let waiting = vec![queued(1, "correctness_dismissal"), person(6)];
        let plan = plan_stop(&stop(Mode::Autonomous, Judged::Evaluated(&bad), waiting, &["suspicious_gain"]));
        assert_eq!(plan.ask, Some(Ask::Queued(6)));
    }

    /// Issue #32: in human mode the person chooses every question; a
    /// blocked stop carries theirs, or none (never a bank pick or a
    /// question queued for a moment).
    #[test]
    fn human_mode_carries_only_a_persons_question() {
        let bad = failing();
        let waiting = vec![queued(1, "correctness_dismissal"), queued(2, "plateau")];
        for claims in [&["limit_claim", "completion_claim"][..], &["correctness_dismissal"], &[]] {
            let input = stop(Mode::Human, Judged::Evaluated(&bad), waiting.clone(), claims);
            let plan = plan_stop(&input);
            assert_eq!((plan.decision, &plan.ask), (Decision::Block, &None), "{claims:?}");
            assert_eq!(plan.claims, vec![AskByMode; claims.len()], "raised by mode: suggestions");
            let text = plan.reason_text(&input, None).unwrap();
            assert!(text.starts_with("gadfly: you may not stop yet.") && !text.contains("Question"), "{text}");
        }
        let mut with_person = waiting.clone();
        with_person.push(person(3));
        let plan = plan_stop(&stop(Mode::Human, Judged::Evaluated(&bad), with_person, &["limit_claim"]));
        assert_eq!(plan.ask, Some(Ask::Queued(3)));
    }

    /// Issue #32: questions queued for a campaign whose stop was allowed
    /// waited for ever as "waiting". An allowed stop expires every question
    /// still waiting (a suspicious gain's one queued by the allowing
    /// evaluation included), with why; a block or an audit record expires
    /// none.
    #[test]
    fn an_allowed_stop_expires_what_still_waits_with_why() {
        let (good, bad) = (holding(), failing());
        let waiting = vec![queued(1, "start"), queued(2, "plateau"), queued(3, "suspicious_gain")];
        for mode in [Mode::Autonomous, Mode::Human] {
            let plan = plan_stop(&stop(mode, Judged::Evaluated(&good), waiting.clone(), &["completion_claim"]));
            assert_eq!((plan.decision, plan.expire), (Decision::Allow, vec![1, 2, 3]), "{mode:?}");
        }
        for (mode, judged) in [
            (Mode::Autonomous, Judged::Evaluated(&bad)),
            (Mode::Human, Judged::Evaluated(&bad)),
            (Mode::Audit, Judged::Evaluated(&good)),
            (Mode::Autonomous, Judged::Unevaluated("gone")),
        ] {
            let plan = plan_stop(&stop(mode, judged, waiting.clone(), &[]));
            assert_ne!(plan.decision, Decision::Allow);
            assert!(plan.expire.is_empty(), "{mode:?}: {plan:?}");
        }
        assert_eq!(expiry_reason(Some("plateau"), true), "the stop was allowed");
        assert_eq!(expiry_reason(None, false), "the stop was allowed");
        assert_eq!(expiry_reason(Some("suspicious_gain"), false), "the stop was allowed");
        assert_eq!(
            expiry_reason(Some("suspicious_gain"), true),
            "the stop was allowed: gadfly's re-evaluation with another seed confirmed the gain"
        );
    }

    #[test]
    fn decisions_by_mode() {
        assert_eq!(decide(Mode::Autonomous, false, false), Decision::Block);
        assert_eq!(decide(Mode::Human, true, false), Decision::Allow);
        assert_eq!(decide(Mode::Human, true, true), Decision::Block);
        assert_eq!(decide(Mode::Audit, false, true), Decision::Record);
    }

    #[test]
    fn reason_names_every_failing_scenario_and_the_question() {
        let e = eval(&[("fast", true, 2.0), ("wrong", false, 3.0), ("slow", true, 0.5)]);
        let q = Question {
            queued_id: None,
            source: "bench-001".into(),
            moment: "completion_claim".into(),
            text: "Why?".into(),
        };
        let spec = PredicateSpec { min_geomean_speedup: Some(1.1), ..Default::default() };
        let r = block_reason(&e, &spec, Some(&q));
        assert!(r.contains("fails on 3 of 4 scenarios"), "{r}");
        for name in ["wrong", "slow", "gone"] {
            assert!(r.lines().any(|l| l.starts_with(name)), "{name} missing in {r}");
        }
        assert!(!r.lines().any(|l| l.starts_with("fast")), "{r}");
        assert!(r.contains("0.50x"));
        assert!(r.contains("Question (bench-001): Why?"));
    }

    #[test]
    fn blocks_without_gain_count_from_the_last_gain_or_allow() {
        assert_eq!(blocks_without_gain(&[]), 0);
        // The first judged block sets the best; three more without gain.
        let stuck = [("block", Some(1.2)), ("block", Some(1.2)), ("block", Some(1.19)), ("block", None)];
        assert_eq!(blocks_without_gain(&stuck), 3);
        // A real gain starts the count again; a 0.05% gain is noise.
        let gained = [("block", Some(1.2)), ("block", Some(1.2)), ("block", Some(1.5)), ("block", Some(1.5005))];
        assert_eq!(blocks_without_gain(&gained), 1);
        // An allowed stop ends a streak.
        let allowed = [("block", Some(1.2)), ("block", Some(1.1)), ("allow", Some(2.0)), ("block", Some(1.0))];
        assert_eq!(blocks_without_gain(&allowed), 1);
    }

    #[test]
    fn the_block_reason_reminds_of_the_limit_claim_after_n_blocks_without_gain() {
        assert_eq!(limit_reminder(0, 3), None);
        assert_eq!(limit_reminder(2, 3), None, "below the threshold: nothing added");
        let r = limit_reminder(3, 3).expect("at the threshold");
        assert!(r.contains("3 blocked stops in a row without a gain"), "{r}");
        assert!(r.contains("\"$GADFLY_BIN\" claim limit --why"), "the exit, as the agent runs it: {r}");
        assert!(r.contains("--evidence FILE"), "{r}");
        assert!(r.contains("is recorded"), "editing what judges it is recorded: {r}");
        assert!(limit_reminder(7, 3).unwrap().contains("7 blocked stops"));
        // A threshold of 0 is read as 1.
        assert!(limit_reminder(1, 0).is_some());
    }
}
