//! What one evaluation of a candidate found: the tree evaluated, the
//! predicate's verdict, the build and run steps and the violations. The
//! harness produces it; the store keeps it, the gate, the moment detectors
//! and the event vocabulary read it. A plain data type, so those readers do
//! not depend on the machine that runs evaluations.

use serde::{Deserialize, Serialize};

use crate::predicate::Verdict;

/// One command of an evaluation and how it ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Step {
    pub command: String,
    pub ok: bool,
    pub exit: String,
    pub seconds: f64,
    /// The last lines the command printed.
    pub output_tail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evaluation {
    /// The database id once stored.
    #[serde(default)]
    pub id: Option<i64>,
    /// The git tree id of the snapshot that was evaluated.
    pub tree: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    pub build: Option<Step>,
    pub run: Option<Step>,
    pub violations: Vec<String>,
    pub duration_ms: u64,
    pub created_at: String,
    /// True when this answer came from the cache, not a new run.
    #[serde(default)]
    pub cached: bool,
    /// Whose candidate this is (the store keeps it in its own column).
    #[serde(default)]
    pub origin: Origin,
}

/// Whose candidate an evaluation measured. Only the workspace's are the
/// campaign's verdict, figures and progress; a beam family's belong to
/// the family (the beam view); a re-check is gadfly's second measurement
/// of a workspace tree, whose outcome is written into that tree's own
/// evaluation.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The workspace the agent presents (a stop attempt, `gadfly eval`),
    /// also a beam candidate's tree once the workspace presents it.
    #[default]
    Workspace,
    /// Only a beam family's candidate commit (`gadfly beam list`).
    Beam,
    /// gadfly's re-evaluation of a suspicious gain, with another seed.
    Recheck,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Workspace => "workspace",
            Origin::Beam => "beam",
            Origin::Recheck => "recheck",
        }
    }

    /// The column's text; anything unknown reads as the workspace's.
    pub fn parse(s: &str) -> Origin {
        match s {
            "beam" => Origin::Beam,
            "recheck" => Origin::Recheck,
            _ => Origin::Workspace,
        }
    }
}

/// A tree key without the suffix a forced re-run or gadfly's own run adds
/// (`TREE+3`, `TREE+recheck-…`, `TREE+remeasure-…`): the same tree
/// measured again.
pub fn tree_of(key: &str) -> &str {
    key.split_once('+').map_or(key, |(tree, _)| tree)
}

/// The number a person sees for record `id` among its campaign's `ids`
/// (issue #49): its place in the order of record, 1 for the first. The
/// store's ids are global across campaigns, so a campaign's first
/// evaluation may be id 16; what gadfly says (block reasons, `campaign
/// show`, the console) is this number, and the API keeps the ids.
pub fn number_in(ids: impl IntoIterator<Item = i64>, id: i64) -> usize {
    ids.into_iter().filter(|&i| i <= id).count()
}

/// The kinds of failure [`Evaluation::failure_kind`] tells apart, as bank
/// entries name them (`applies.failures`).
pub const FAILURE_KINDS: [&str; 6] =
    ["build_error", "crash", "missing_scenario", "far_from_tolerance", "near_tolerance", "wrong_values"];

/// How far a scenario's error is from its tolerance: the harness's own
/// `max_tol_ratio`, else the largest error over an absolute tolerance.
fn tolerance_ratio(m: &crate::results::ScenarioResult) -> Option<f64> {
    if let Some(r) = m.max_tol_ratio {
        return Some(r);
    }
    let err = [m.max_abs_err_ref, m.max_abs_err_hi]
        .into_iter()
        .flatten()
        .fold(None, |a: Option<f64>, e| Some(if e.is_nan() { f64::INFINITY } else { a.map_or(e, |a| a.max(e)) }))?;
    match m.tolerance {
        Some(t) if t > 0.0 && m.rtol.is_none_or(|r| r == 0.0) => Some(err / t),
        _ => None,
    }
}

/// What a rejected gain's failure starts with (`app/recheck.rs`).
pub const GAIN_NOT_CONFIRMED: &str = "the gain did not survive gadfly's re-evaluation:";
/// What a constraint's failure starts with (the harness).
pub const CONSTRAINT_VIOLATED: &str = "constraint violated:";
/// What the gate's failures start with when it judges a stop against the
/// campaign's history (`gate::SLOWER_THAN_BEST`, `gate::GAIN_HELD`).
pub const SLOWER_THAN_BEST: &str = "slower than the campaign's best:";
pub const GAIN_HELD: &str = "held on a gain gadfly cannot rule out:";

/// Whether a failure of a verdict says the predicate does not hold on what
/// was measured (a geometric-mean bar missed, a constraint violated, a gain
/// gadfly's re-evaluation did not confirm, or the gate's own judgement
/// against the campaign's history), rather than that the evaluation itself
/// failed: the build, the harness run, its results file or a timeout, so
/// that nothing was measured ([`Evaluation::evaluation_failures`]).
pub fn is_predicate_failure(failure: &str) -> bool {
    crate::predicate::is_bar_failure(failure)
        || [CONSTRAINT_VIOLATED, GAIN_NOT_CONFIRMED, SLOWER_THAN_BEST, GAIN_HELD].iter().any(|p| failure.starts_with(p))
}

impl Evaluation {
    /// The failures that say the evaluation itself failed (the build, the
    /// harness run, its results file, a timeout): no result. The other
    /// failures are the predicate's ([`Self::predicate_failures`]).
    pub fn evaluation_failures(&self) -> Vec<&str> {
        self.verdict.failures.iter().map(String::as_str).filter(|f| !is_predicate_failure(f)).collect()
    }

    /// The failures that say the evaluation ran and the predicate does not
    /// hold on what it measured ([`is_predicate_failure`]); a failing
    /// scenario's reasons are its own.
    pub fn predicate_failures(&self) -> Vec<&str> {
        self.verdict.failures.iter().map(String::as_str).filter(|f| is_predicate_failure(f)).collect()
    }

    /// Why this evaluation's figures are no result, so neither progress
    /// nor a "best": scenarios that are incorrect or missing, or the
    /// evaluation itself failed (a build or run, the results file, a
    /// constraint, a gain that did not survive gadfly's re-check: every
    /// failure but a geometric-mean bar missed). None when every scenario
    /// was measured correct and nothing failed.
    pub fn incorrect_reason(&self) -> Option<String> {
        let v = &self.verdict;
        let wrong = v.scenarios.iter().filter(|s| s.present && !s.correct).count();
        let missing = v.scenarios.iter().filter(|s| !s.present).count();
        let failed: Vec<&String> = v.failures.iter().filter(|f| !crate::predicate::is_bar_failure(f)).collect();
        let plural = |n: usize| if n == 1 { "scenario" } else { "scenarios" };
        let mut why = Vec::new();
        if wrong > 0 {
            why.push(format!("{wrong} {} incorrect", plural(wrong)));
        }
        if missing > 0 {
            why.push(format!("{missing} {} missing", plural(missing)));
        }
        if let Some(first) = failed.first() {
            let line = first.lines().next().unwrap_or("");
            let line = if line.chars().count() > 160 {
                format!("{}…", line.chars().take(160).collect::<String>())
            } else {
                line.to_string()
            };
            why.push(format!("the evaluation failed ({line})"));
        }
        (!why.is_empty()).then(|| why.join(", "))
    }

    /// What kind of failure this evaluation shows, for the question that
    /// follows it to fit ([`FAILURE_KINDS`]): the build failed; the run
    /// failed or crashed (no results, or a scenario missing); an incorrect
    /// scenario's error far beyond its tolerance (over 10 times, or not
    /// finite) or near it; an incorrect scenario with no figures to tell.
    /// The first that applies, in that order; None when nothing is wrong.
    pub fn failure_kind(&self) -> Option<&'static str> {
        if self.build.as_ref().is_some_and(|b| !b.ok) {
            return Some("build_error");
        }
        let v = &self.verdict;
        if self.run.as_ref().is_some_and(|r| !r.ok) {
            return Some("crash");
        }
        if v.scenarios.iter().any(|s| !s.present) {
            return Some("missing_scenario");
        }
        let mut kind = None;
        for s in v.scenarios.iter().filter(|s| s.present && !s.correct) {
            let ratio = s.measured.as_ref().and_then(tolerance_ratio);
            match ratio {
                Some(r) if !r.is_finite() || r > 10.0 => return Some("far_from_tolerance"),
                Some(_) => kind = Some("near_tolerance"),
                None => kind = kind.or(Some("wrong_values")),
            }
        }
        kind
    }

    /// True when its figures are no result (see [`Self::incorrect_reason`]).
    pub fn incorrect(&self) -> bool {
        self.incorrect_reason().is_some()
    }

    /// Why its geometric mean does not count ("geomean 24.70x does not
    /// count: 3 scenarios incorrect"), when it has one that does not.
    pub fn geomean_note(&self) -> Option<String> {
        let g = self.verdict.geomean_speedup?;
        self.incorrect_reason().map(|why| format!("geomean {g:.2}x does not count: {why}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #49: "the evaluation failed" only when nothing was measured;
    /// a bar missed, a constraint or a rejected gain is the predicate's.
    #[test]
    fn failures_say_whether_the_evaluation_failed_or_the_predicate_does_not_hold() {
        for f in [
            "build exited with status 2; last output: error",
            "harness run timed out after 600 s",
            "the harness wrote no results file",
            "reading the results file failed: denied",
        ] {
            assert!(!is_predicate_failure(f), "{f}");
        }
        for f in [
            "geometric mean speedup 1.11x < 1.50x",
            "within noise: geometric mean vs comparison 1.049x (1.01x to 1.09x with noise) straddles the bar 1.05x",
            "constraint violated: harness/run.sh was modified",
            "the gain did not survive gadfly's re-evaluation: a 2.00x vs 1.00x",
        ] {
            assert!(is_predicate_failure(f), "{f}");
        }
    }
}
