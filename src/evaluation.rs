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

impl Evaluation {
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
