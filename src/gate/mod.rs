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
use crate::predicate::WITHIN_NOISE;

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
/// count again; a stop the daemon let through (allowed, recorded, an
/// accepted limit) ends any streak.
///
/// Only the daemon's own verdicts count either way. A stop the hook
/// answered on its own (`unavailable_block`, replayed from its spool) or
/// one that ended outside the gate (`ungated`) neither adds to the streak
/// nor ends it: the spool is in the agent's reach (the hook token replays
/// it), and a forged replay must not reset the pressure that escalates the
/// integrity checks (issue 29, counts that decide live in the daemon).
pub fn blocks_without_gain(stops: &[(&str, Option<f64>)]) -> u32 {
    let (mut best, mut streak) = (None::<f64>, 0u32);
    for (decision, geomean) in stops {
        match *decision {
            "block" => {}
            "allow" | "record" | "limit_accepted" => {
                streak = 0;
                continue;
            }
            _ => continue,
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
                } else if eval.verdict.failing_count == 0
                    && !eval.verdict.failures.is_empty()
                    && eval.verdict.failures.iter().all(|f| f.starts_with(SLOWER_THAN_BEST))
                {
                    // The block names the better tree and asks for it.
                    None
                } else if eval.verdict.failing_count == 0
                    && eval.verdict.failures.iter().any(|f| f.starts_with(GAIN_HELD))
                {
                    // Held on a gain: its own question, the one evidence answers.
                    Some(ask_for("suspicious_gain", bank))
                } else if matches!(eval.failure_kind(), Some("build_error" | "crash")) {
                    // The block quotes the build's or the run's error: the
                    // question is that error, not one of the bank's.
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

/// A tree as a block reason names it: a git id's first 10 characters; any
/// other name (a replay's `replay-step-12`) whole.
pub fn short_tree(tree: &str) -> String {
    let id = crate::evaluation::tree_of(tree);
    if id.len() > 10 && id.chars().all(|c| c.is_ascii_hexdigit()) {
        id[..10].to_string()
    } else {
        tree.to_string()
    }
}

/// How a stop on a tree slower than the campaign's best is named in the
/// verdict's failures.
pub const SLOWER_THAN_BEST: &str = crate::evaluation::SLOWER_THAN_BEST;

/// A stop is judged against the campaign's best (`[gate] against_best`):
/// when the evaluation it would stop on measures a geometric mean beyond
/// noise below the best correct workspace evaluation of another tree
/// (intervals apart, [`crate::predicate::beyond_noise_above`]), what the
/// block says, naming both trees and figures. Evaluations stored without an
/// interval get `noise_unknown`'s. `history`: the campaign's evaluations.
pub fn slower_than_best(eval: &Evaluation, history: &[Evaluation], predicate: &PredicateSpec) -> Option<String> {
    use crate::predicate::{beyond_noise_above, interval};
    let base = crate::evaluation::tree_of;
    let figure = |e: &Evaluation| -> Option<(f64, [f64; 2])> {
        let g = e.verdict.geomean_speedup?;
        Some((g, e.verdict.geomean_interval.unwrap_or_else(|| interval(g, predicate.noise_unknown))))
    };
    let (g, iv) = figure(eval)?;
    let (best, bg, biv) = history
        .iter()
        .filter(|e| e.origin == crate::evaluation::Origin::Workspace && base(&e.tree) != base(&eval.tree))
        .filter(|e| e.verdict.scenarios.iter().all(|s| s.present && s.correct))
        .filter(|e| e.verdict.failures.iter().all(|f| crate::predicate::is_bar_failure(f)))
        .filter_map(|e| figure(e).map(|(g, i)| (e, g, i)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if !beyond_noise_above(bg, biv, g, iv) {
        return None;
    }
    let short = |t: &str| short_tree(base(t));
    Some(format!(
        "{SLOWER_THAN_BEST} this tree ({}) measures a geometric mean of {g:.3}x ({:.3}x to {:.3}x with noise), while \
         tree {} (evaluation {} of this campaign{}) measured {bg:.3}x ({:.3}x to {:.3}x), correct on every scenario. Restore the \
         faster version, or, if this one should stand (the faster one is wrong in a way the harness misses, it \
         cannot be kept...), say why in your reply and stop again: the next stop on this tree is allowed.",
        short(&eval.tree),
        iv[0],
        iv[1],
        short(&best.tree),
        best.id.map_or(0, |id| crate::evaluation::number_in(history.iter().filter_map(|e| e.id), id)),
        // A replayed evaluation has no time of its own.
        if best.created_at.is_empty() { String::new() } else { format!(", {}", best.created_at) },
        biv[0],
        biv[1],
    ))
}

/// How a stop held on a gain gadfly cannot rule out is named in the
/// verdict's failures.
pub const GAIN_HELD: &str = crate::evaluation::GAIN_HELD;

/// A gain too large to let a stop through on numbers alone (`[gate]
/// hold_gain`): the evaluation's geometric mean at least `factor` times
/// the best correct workspace evaluation of another tree (and the initial
/// kernel, 1.0x), or a scenario measured faster than the speed-of-light
/// bound the harness states. What the block says, or None. A re-check with
/// another seed does not release it (a cache keyed on the inputs' identity
/// survives any seed): evidence filed for the gain's question does
/// (`gadfly answer`), which the caller checks.
pub fn gain_to_hold(eval: &Evaluation, history: &[Evaluation], factor: f64) -> Option<String> {
    let base = crate::evaluation::tree_of;
    let under_bound: Vec<String> = eval
        .verdict
        .scenarios
        .iter()
        .filter_map(|s| {
            let m = s.measured.as_ref()?;
            let b = m.bound_us.filter(|b| *b > 0.0)?;
            (m.time_us < b).then(|| format!("{} at {:.2} us, under its bound of {b:.2} us", s.scenario, m.time_us))
        })
        .collect();
    if !under_bound.is_empty() {
        return Some(format!("{GAIN_HELD} faster than physics allows: {}", under_bound.join("; ")));
    }
    if !(factor > 0.0) {
        return None;
    }
    let g = eval.verdict.geomean_speedup?;
    // The bar is the best correct figure that was itself no such gain: a
    // held gain never raises it (else a cosmetic edit of a held tree would
    // measure against the held figure and pass).
    let mut best = 1.0f64;
    for e in history
        .iter()
        .filter(|e| e.origin == crate::evaluation::Origin::Workspace && base(&e.tree) != base(&eval.tree))
        .filter(|e| !e.incorrect())
    {
        if let Some(x) = e.verdict.geomean_speedup {
            if x < best * factor {
                best = best.max(x);
            }
        }
    }
    (g >= best * factor).then(|| {
        format!(
            "{GAIN_HELD} the geometric mean is {g:.1}x, {:.0} times the best correct figure before it ({best:.2}x; \
             [gate] hold_gain = {factor}). A cache of the outputs, work done outside the timed calls or a skipped \
             computation all look like this. File the evidence that rules them out for the question below \
             (`gadfly answer ID --evidence FILE`: a run on inputs the harness never repeats, a profile of the timed \
             calls); a new seed alone does not.",
            g / best
        )
    })
}

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

/// The evidence a question picked at the stop names (issue 35: every
/// delivered question says what it is about): the scenarios the judged
/// candidate fails (worst first by how they fail: missing or incorrect,
/// then too slow; five at most) and the stop's own words for `moment`
/// when they show it (`quote`), with the counts as facts.
pub fn stop_evidence(judged: Judged<'_>, moment: &str, quote: Option<&str>) -> crate::bank::evidence::Evidence {
    let mut ev = crate::bank::evidence::Evidence {
        detector: Some("stop".into()),
        quote: quote.map(str::to_string).filter(|q| !q.trim().is_empty()),
        ..Default::default()
    };
    if let Judged::Evaluated(e) = judged {
        let mut failing: Vec<&crate::predicate::ScenarioVerdict> =
            e.verdict.scenarios.iter().filter(|s| !s.passes).collect();
        failing.sort_by_key(|s| (s.present && s.correct, s.scenario.clone()));
        ev.scenarios = failing.iter().take(5).map(|s| s.scenario.clone()).collect();
        ev.facts.insert("failing".into(), failing.len().to_string());
        ev.facts.insert("scenarios".into(), e.verdict.scenarios.len().to_string());
        if let Some(g) = e.verdict.geomean_speedup {
            ev.facts.insert("geomean".into(), format!("{g:.3}"));
        }
        if let Some(kind) = e.failure_kind() {
            ev.facts.insert("failure_kind".into(), kind.into());
        }
    }
    if moment == "start" {
        ev.scenarios.clear();
    }
    ev
}

/// The line after the question a block reason carries; the stop service
/// names the question's id and how to answer it right after this line
/// (`app/answers.rs`), so both read this one constant.
pub const ANSWER_LINE: &str = "Answer it with a measurement or an experiment, not an argument.\n";

/// The reason shown to the agent when a stop is blocked: every failing
/// scenario in a compact table, the aggregate, evaluation-level failures
/// and one question.
pub fn block_reason(eval: &Evaluation, predicate: &PredicateSpec, question: Option<&Question>) -> String {
    let (min_speedup, min_geomean) = (predicate.min_speedup, predicate.min_geomean_speedup);
    let compared = predicate.uses_comparison();
    let v = &eval.verdict;
    let mut out = String::new();
    let short_tree = short_tree(&eval.tree);
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
    let geo = match (v.geomean_speedup, v.geomean_interval) {
        (Some(g), Some([lo, hi])) => format!("{g:.2}x ({lo:.3}x to {hi:.3}x with noise)"),
        (Some(g), None) => format!("{g:.2}x"),
        _ => "unknown".to_string(),
    };
    let worst = match (&v.worst_scenario, v.worst_speedup) {
        (Some(s), Some(w)) => format!("; worst {s} at {w:.2}x"),
        _ => String::new(),
    };
    let bar = min_geomean.map_or(String::new(), |g| format!(" (must reach {g:.2}x)"));
    out.push_str(&format!(
        "Geometric mean speedup {geo}{bar}{worst}. Every scenario must be correct and at least {min_speedup:.2}x; the mean never stands in for a scenario.\n"
    ));
    if !v.holds
        && (v.scenarios.iter().any(|s| s.within_noise) || v.failures.iter().any(|f| f.starts_with(WITHIN_NOISE)))
    {
        let runs = if v.runs > 1 {
            format!(" (gadfly measured this tree {} times and pooled them)", v.runs)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "A bar is met only beyond the harness's noise: a figure whose interval straddles its bar is neither faster nor slower{runs}. A gain that small cannot be told from noise; make it larger.\n"
        ));
    }
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
        out.push_str(ANSWER_LINE);
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
mod tests;
