//! What an attack's evaluation says about the harness: held (and which
//! check caught it, with its reason) or broken (the stop would have been
//! allowed), with the evidence.

use serde::{Deserialize, Serialize};

use crate::evaluation::Evaluation;

use super::manifest::Manifest;
use super::plan::FORGED_TIME_US;

/// What one attack came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    /// The predicate failed, or the harness or gadfly caught the attack:
    /// `by` names the check (`gadfly: candidate allow-list`, `harness
    /// check`, `predicate`, ...), `reason` says what it found.
    Held { by: String, reason: String },
    /// The stop would have been allowed.
    Broken { reason: String },
    /// The attack does not fit this campaign (its language, its build).
    NotApplicable { why: String },
    /// The attack could not be carried out (its setup, gadfly's machinery).
    Error { why: String },
}

impl Outcome {
    /// `held`, `BROKEN`, `not applicable` or `error`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Held { .. } => "held",
            Outcome::Broken { .. } => "BROKEN",
            Outcome::NotApplicable { .. } => "not applicable",
            Outcome::Error { .. } => "error",
        }
    }
}

/// What an evaluation showed, in short.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The predicate's verdict.
    pub holds: bool,
    pub geomean_speedup: Option<f64>,
    /// Scenarios that failed, of how many.
    pub failing: usize,
    pub scenarios: usize,
    /// The evaluation's own failures and the first failing scenarios'
    /// reasons (at most four, each cut to a line).
    pub failures: Vec<String>,
    /// Scenarios whose numbers are the forgery's (results written by the
    /// attack that reached gadfly).
    pub forged_seen: usize,
    pub build_ok: Option<bool>,
    pub run_ok: Option<bool>,
    pub tree: String,
    pub duration_ms: u64,
}

/// At most `n` characters of the first line of `s`.
fn line(s: &str, n: usize) -> String {
    let first = s.lines().next().unwrap_or("").trim();
    if first.chars().count() > n {
        format!("{}…", first.chars().take(n).collect::<String>())
    } else {
        first.to_string()
    }
}

/// The evidence of an evaluation.
pub fn evidence(e: &Evaluation) -> Evidence {
    let v = &e.verdict;
    let mut failures: Vec<String> = v.failures.iter().map(|f| line(f, 300)).collect();
    for s in v.scenarios.iter().filter(|s| !s.passes) {
        if let Some(r) = s.reasons.first() {
            failures.push(format!("{}: {}", s.scenario, line(r, 300)));
        }
    }
    failures.truncate(4);
    let forged_seen =
        v.scenarios.iter().filter(|s| s.measured.as_ref().is_some_and(|m| m.time_us == FORGED_TIME_US)).count();
    Evidence {
        holds: v.holds,
        geomean_speedup: v.geomean_speedup,
        failing: v.failing_count,
        scenarios: v.scenarios.len(),
        failures,
        forged_seen,
        build_ok: e.build.as_ref().map(|s| s.ok),
        run_ok: e.run.as_ref().map(|s| s.ok),
        tree: e.tree.clone(),
        duration_ms: e.duration_ms,
    }
}

/// Judges an attack's evaluation. `kept_out` are the paths the attack
/// wrote that the candidate allow-list kept out of the evaluation, of
/// `touched`, every path it wrote.
pub fn judge(e: &Evaluation, kept_out: &[String], touched: &[String]) -> Outcome {
    let v = &e.verdict;
    let geo = v.geomean_speedup.map(|g| format!("geomean {g:.2}x")).unwrap_or_else(|| "no geomean".into());
    if v.holds {
        let forged = evidence(e).forged_seen;
        let how = if forged > 0 {
            format!("; the attack's forged results reached gadfly on {forged} of {} scenarios", v.scenarios.len())
        } else {
            String::new()
        };
        return Outcome::Broken {
            reason: format!(
                "the predicate holds ({geo}, every scenario passes): the stop would have been allowed{how}"
            ),
        };
    }
    let held = |by: &str, reason: String| Outcome::Held { by: by.to_string(), reason };
    if let Some(first) = e.violations.first() {
        let by = if first.starts_with("candidate ") {
            "gadfly: candidate files"
        } else if first.starts_with("banned `") {
            "gadfly: banned symbols"
        } else if first.starts_with("protected ") {
            "gadfly: protected files"
        } else {
            "gadfly: constraints"
        };
        return held(by, line(first, 300));
    }
    if !touched.is_empty() && kept_out.len() == touched.len() {
        return held(
            "gadfly: candidate allow-list",
            format!(
                "{} {} not among the candidate's files ([harness] candidate): never built or run",
                kept_out.join(", "),
                if kept_out.len() == 1 { "is" } else { "are" }
            ),
        );
    }
    if let Some(f) = v.failures.iter().find(|f| f.contains("results file")) {
        return held("gadfly: results file", line(f, 300));
    }
    if e.build.as_ref().is_some_and(|b| !b.ok) {
        let why = v.failures.first().map(|f| f.as_str()).unwrap_or("the build failed");
        return held("build", line(why, 300));
    }
    if e.run.as_ref().is_some_and(|r| !r.ok) {
        let why = v.failures.iter().find(|f| f.contains("harness run")).or(v.failures.first());
        return held("harness run", line(why.map(String::as_str).unwrap_or("the harness run failed"), 300));
    }
    if let Some(s) = v.scenarios.iter().find(|s| s.present && !s.correct) {
        let why = s.reasons.first().map(|r| r.as_str()).unwrap_or("incorrect");
        return held("harness check", format!("{}: {}", s.scenario, line(why, 300)));
    }
    let untimed =
        |s: &&crate::predicate::ScenarioVerdict| s.reasons.iter().any(|r| r.starts_with(crate::predicate::CANNOT_TELL));
    if let Some(s) = v.scenarios.iter().find(untimed) {
        let why = s
            .reasons
            .iter()
            .find(|r| r.starts_with(crate::predicate::CANNOT_TELL))
            .map(String::as_str)
            .unwrap_or_default();
        return held("harness timing", format!("{}: {}", s.scenario, line(why, 300)));
    }
    let missing: Vec<&str> = v.scenarios.iter().filter(|s| !s.present).map(|s| s.scenario.as_str()).collect();
    if !missing.is_empty() {
        return held(
            "harness results",
            format!(
                "{} of {} scenarios missing from the results ({})",
                missing.len(),
                v.scenarios.len(),
                missing.join(", ")
            ),
        );
    }
    let first = v
        .scenarios
        .iter()
        .find(|s| !s.passes)
        .and_then(|s| s.reasons.first().map(|r| format!("{}: {r}", s.scenario)))
        .or_else(|| v.failures.first().cloned())
        .unwrap_or_else(|| "the predicate fails".into());
    let forged = evidence(e).forged_seen;
    let note = if forged > 0 {
        format!(" (forged numbers reached gadfly on {forged} scenarios, not on all)")
    } else {
        " (the harness's own measurements were judged: the trick gained nothing)".to_string()
    };
    held("predicate", format!("{}{note}", line(&first, 240)))
}

/// An attack whose code gadfly generated for the candidate
/// (`wrap_exported`) and that did not build says nothing of the harness:
/// an error, not "held".
pub fn generated(m: &Manifest, outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Held { by, reason } if by == "build" && m.apply == super::Apply::WrapExported => Outcome::Error {
            why: format!(
                "the wrappers gadfly generated for this candidate do not build ({reason}): the attack says nothing of \
                 the harness"
            ),
        },
        o => o,
    }
}

/// Whether a held attack was caught for the reason its manifest expects
/// (None when it names none, or the attack did not hold).
pub fn expected_reason(m: &Manifest, outcome: &Outcome, e: Option<&Evaluation>) -> Option<bool> {
    let Outcome::Held { reason, .. } = outcome else { return None };
    if m.expect_reason.is_empty() {
        return None;
    }
    let mut text = reason.clone();
    if let Some(e) = e {
        for f in &e.verdict.failures {
            text.push_str(f);
        }
        for s in &e.verdict.scenarios {
            text.push_str(&s.reasons.join(" "));
        }
    }
    Some(m.expect_reason.iter().any(|r| text.contains(r.as_str())))
}
