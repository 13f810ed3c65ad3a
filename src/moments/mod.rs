//! The moments where agents go wrong, noticed without a human watching:
//! numeric detectors over evaluations ([`detect`]), edit loops
//! ([`edit_loop`]), the text classifier over the agent's messages
//! ([`crate::classify`]), and the disagreements a gain's re-evaluation
//! shows ([`recheck`]). Pure detection: evaluations, text and diffs in,
//! findings with their evidence out (no `Supervisor`, no `Store`; the one
//! I/O is [`edit_loop`]'s `git diff` in gadfly's private snapshot store).
//!
//! Acting on the findings (recording each moment, asking its question by
//! mode, the re-check's second evaluation) is the application layer's, in
//! `src/app/moments.rs` and `src/app/recheck.rs`; the rules it acts by
//! (cooldowns, held moments, repeated claims, the action by mode, words
//! seen once) are data here, in [`plan`], which `gadfly replay`
//! (`crate::replay`) follows too. The bank groups that fit each moment are
//! [`crate::bank::groups`].

pub mod detect;
pub mod edit_loop;
pub mod gain_claim;
pub mod plan;
pub mod pressure;
pub mod recheck;

use crate::classify::{HybridClassifier, Label};
use crate::evaluation::Evaluation;
use crate::events::{self, MomentEvidence, MomentOutcome};
use detect::{Finding, Settings};

/// What the numeric detectors and the edit-loop check find after a new
/// evaluation. `history`: the campaign's evaluations, oldest first, the
/// new one last (gadfly's own re-checks left out); `store`: gadfly's
/// private snapshot store, where the evaluated trees are.
pub fn after_evaluation(store: &std::path::Path, history: &[Evaluation], settings: &Settings) -> Vec<Finding> {
    let mut findings = detect::detect(history, settings);
    if let Some(f) = edit_loop_finding(store, history, settings) {
        findings.push(f);
    }
    findings
}

/// The idle plateau: the agent's tool calls since the last evaluation
/// went from `from` to `n` since the detector last looked. Found once
/// when the count crosses a multiple of the campaign's threshold
/// ([`detect::idle_threshold`] of `cadence`, the counts between its recent
/// evaluations).
pub fn after_tool_calls(from: usize, n: usize, cadence: &[usize], settings: &Settings) -> Option<Finding> {
    let p = detect::idle_threshold(cadence, settings);
    if p == 0 || n == 0 || n / p <= from / p {
        return None;
    }
    detect::idle_plateau(n, p)
}

/// `store`: gadfly's private snapshot store, where the evaluated trees are.
fn edit_loop_finding(store: &std::path::Path, history: &[Evaluation], s: &Settings) -> Option<Finding> {
    if history.len() < 3 {
        return None;
    }
    let trees: Vec<&str> = history.iter().map(|e| e.tree.split('+').next().unwrap_or(&e.tree)).collect();
    let from = trees.len().saturating_sub(s.edit_loop_window + 1);
    let mut diffs = Vec::new();
    // Earlier diffs supply the deletions that later additions may repeat.
    for w in trees.windows(2) {
        if w[0] != w[1] {
            diffs.push(edit_loop::git_diff(store, w[0], w[1]).ok()?);
        }
    }
    let window = s.edit_loop_window.min(trees.len() - from);
    let (re, total) = edit_loop::readded(&diffs, window);
    if total < 5 || (re as f64) < s.edit_loop_share * total as f64 {
        return None;
    }
    Some(Finding {
        moment: "edit_loop".into(),
        detector: "edit_loop".into(),
        evaluations: history.iter().rev().take(window + 1).filter_map(|e| e.id).collect(),
        scenarios: vec![],
        detail: format!(
            "{re} of the {total} lines added over the last {window} snapshots ({:.0}%) are identical to lines deleted earlier",
            re as f64 / total as f64 * 100.0
        ),
        facts: [
            ("readded_lines".to_string(), re.to_string()),
            ("added_lines".to_string(), total.to_string()),
            ("snapshots".to_string(), window.to_string()),
        ]
        .into(),
    })
}

static CLASSIFIER: std::sync::LazyLock<HybridClassifier> = std::sync::LazyLock::new(HybridClassifier::default);

/// The text classifier, trained at first use (a fraction of a second in a
/// release build; the daemon warms it at start, off the request path).
pub fn classifier() -> &'static HybridClassifier {
    &CLASSIFIER
}

/// A moment the agent's own words show.
#[derive(Debug, Clone)]
pub struct ClaimMoment {
    pub finding: Finding,
    pub quote: String,
    /// A question for this moment already waits to be delivered (the
    /// caller, who reads the queue, sets it; [`claims_in`] leaves it false).
    pub waiting: bool,
}

/// The moments a message shows (text classifier), the ones that ask a
/// question first: a dismissal, then a claimed limit, then a claimed gain;
/// a completion claim is judged at the stop. One per moment kind, whatever
/// the number of sentences that show it (its first sentence is quoted):
/// two sentences of one claim are one claim, never a question each nor a
/// repeat of each other.
pub fn claims_in(text: &str) -> Vec<ClaimMoment> {
    let labels = classifier().explain(text);
    let mut out: Vec<ClaimMoment> = Vec::new();
    for (label, quote) in labels {
        let moment = claim_moment(label);
        if out.iter().any(|c| c.finding.moment == moment) {
            continue;
        }
        out.push(ClaimMoment {
            finding: Finding {
                moment: moment.into(),
                detector: format!("text:{}", label.as_str()),
                evaluations: vec![],
                scenarios: vec![],
                detail: format!("the agent wrote: \"{quote}\""),
                ..Default::default()
            },
            waiting: false,
            quote,
        });
    }
    let rank = |m: &str| match m {
        "correctness_dismissal" => 0,
        "limit_claim" => 1,
        "suspicious_gain" => 2,
        _ => 3,
    };
    out.sort_by_key(|c| rank(&c.finding.moment));
    out
}

/// The moment a classifier label shows.
fn claim_moment(label: Label) -> &'static str {
    match label {
        Label::LimitClaim => "limit_claim",
        Label::CorrectnessDismissal => "correctness_dismissal",
        Label::SuspiciousGainClaim => "suspicious_gain",
        Label::CompletionClaim => "completion_claim",
    }
}

/// The start of a campaign is a moment too.
pub fn at_start() -> Finding {
    Finding {
        moment: "start".into(),
        detector: "start".into(),
        evaluations: vec![],
        scenarios: vec![],
        detail: "the campaign starts".into(),
        ..Default::default()
    }
}

/// A moment event: the finding and its evidence (recorded only, until
/// something is done about it). `count`: the campaign's evaluations so far.
pub fn finding_moment(f: &Finding, source: &str, count: usize) -> events::Moment {
    events::Moment {
        moment: f.moment.clone(),
        detector: f.detector.clone(),
        detail: f.detail.clone(),
        source: source.to_string(),
        evidence: MomentEvidence::Finding {
            evaluations: f.evaluations.clone(),
            scenarios: f.scenarios.clone(),
            evaluation_count: count,
        },
        claim: None,
        beam: None,
        outcome: MomentOutcome::Recorded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 48, item 3: a claim's moment quotes the sentence that makes
    /// the claim, wherever it sits in the message, not the message's start.
    #[test]
    fn a_claim_quotes_its_own_sentence_not_the_start_of_the_message() {
        let preamble = "I re-ran the benchmark script on all four shapes after rebuilding the extension, \
                        compared the timings with the previous run, and read the profiler's summary of the \
                        memory traffic for the largest shape once more.";
        let claim = "We are at the memory bandwidth limit now, so no further kernel change can help.";
        let text = format!("{preamble}\n\n{claim}\n\nI will write the summary next.");
        let found = claims_in(&text);
        let limit = found.iter().find(|c| c.finding.moment == "limit_claim").expect("a limit claim");
        assert_eq!(limit.quote, claim);
        assert!(limit.finding.detail.contains(claim), "{}", limit.finding.detail);
        assert!(!limit.quote.contains("re-ran the benchmark"), "the start of the message is not the claim");
    }

    #[test]
    fn the_idle_plateau_is_found_once_per_crossing() {
        let s = Settings { plateau_tool_calls: 10, ..Default::default() };
        assert!(after_tool_calls(0, 9, &[], &s).is_none());
        let f = after_tool_calls(9, 10, &[], &s).expect("crossed 10");
        assert_eq!((f.moment.as_str(), f.detector.as_str()), ("plateau", "tool_calls_without_evaluation"));
        assert!(after_tool_calls(10, 19, &[], &s).is_none(), "no new multiple crossed");
        assert!(after_tool_calls(12, 25, &[], &s).is_some(), "crossed 20");
        assert!(after_tool_calls(0, 0, &[], &s).is_none());
        let off = Settings { plateau_tool_calls: 0, ..Default::default() };
        assert!(after_tool_calls(0, 100, &[8, 8, 8], &off).is_none(), "0 switches it off");
    }

    /// The idle threshold follows the campaign's cadence: an agent that
    /// evaluates every 8 calls has stalled after 24 without one; the
    /// fixed threshold stands until three evaluations set a cadence, and
    /// bounds it.
    #[test]
    fn the_idle_plateau_adapts_to_the_campaigns_cadence() {
        let s = Settings::default();
        assert_eq!(detect::idle_threshold(&[], &s), 60);
        assert_eq!(detect::idle_threshold(&[8, 8], &s), 60, "two evaluations set no cadence yet");
        assert_eq!(detect::idle_threshold(&[6, 8, 10, 9], &s), 27);
        assert_eq!(detect::idle_threshold(&[1, 2, 1], &s), 15, "never below 15");
        assert_eq!(detect::idle_threshold(&[40, 50, 45], &s), 60, "never above plateau_tool_calls");
        assert!(after_tool_calls(23, 24, &[8, 8, 8], &s).is_some(), "3 x 8");
        assert!(after_tool_calls(0, 23, &[8, 8, 8], &s).is_none());
        let f = after_tool_calls(23, 24, &[8, 8, 8], &s).unwrap();
        assert_eq!(f.facts["threshold"], "24");
    }

    #[test]
    fn a_finding_becomes_a_recorded_moment_with_its_evidence() {
        let f = Finding {
            moment: "plateau".into(),
            detector: "plateau".into(),
            evaluations: vec![3, 4],
            scenarios: vec!["a".into()],
            detail: "flat".into(),
            ..Default::default()
        };
        let m = finding_moment(&f, "numeric", 4);
        assert_eq!(m.source, "numeric");
        assert_eq!(m.outcome, MomentOutcome::Recorded);
        assert_eq!(
            m.evidence,
            MomentEvidence::Finding { evaluations: vec![3, 4], scenarios: vec!["a".into()], evaluation_count: 4 }
        );
        assert_eq!(at_start().moment, "start");
    }

    #[test]
    fn plain_words_show_no_moment() {
        assert!(claims_in("I renamed a variable.").is_empty());
    }
}
