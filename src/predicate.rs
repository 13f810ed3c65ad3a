//! The stop predicate: it holds only when every required scenario is
//! present, correct, at least `min_speedup` faster than the initial kernel
//! and (when asked for) at least `min_compare_speedup` against the
//! comparison implementation the harness times, each geometric mean asked
//! for clears its own bar, and the evaluation itself raised no failure. The
//! verdict names every failing scenario with its reason and numbers.

use serde::{Deserialize, Serialize};

use crate::campaign::PredicateSpec;
use crate::results::ScenarioResult;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioVerdict {
    pub scenario: String,
    /// False when the scenario is missing from the results.
    pub present: bool,
    pub correct: bool,
    pub speedup: Option<f64>,
    /// `compare_us / time_us`: above 1 when faster than the comparison
    /// implementation, when the harness timed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_speedup: Option<f64>,
    pub passes: bool,
    pub reasons: Vec<String>,
    /// What the harness reported for it, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<ScenarioResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub holds: bool,
    pub scenarios: Vec<ScenarioVerdict>,
    pub geomean_speedup: Option<f64>,
    /// The geometric mean of `compare_us / time_us`, when every scenario
    /// has a comparison time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geomean_compare_speedup: Option<f64>,
    pub worst_scenario: Option<String>,
    pub worst_speedup: Option<f64>,
    /// Failures of the evaluation as a whole (build, run, results file,
    /// constraints, protected files, aggregate).
    pub failures: Vec<String>,
    pub failing_count: usize,
}

/// Judges measured scenarios against the predicate. `required` is the
/// spec's scenario list; `failures` are evaluation-level problems already
/// found (they make the verdict fail on their own).
pub fn judge(spec: &PredicateSpec, required: &[String], measured: &[ScenarioResult], failures: Vec<String>) -> Verdict {
    let mut failures = failures;
    let mut scenarios = Vec::with_capacity(required.len());
    for name in required {
        let Some(m) = measured.iter().find(|r| &r.scenario == name) else {
            scenarios.push(ScenarioVerdict {
                scenario: name.clone(),
                present: false,
                correct: false,
                speedup: None,
                compare_speedup: None,
                passes: false,
                reasons: vec!["missing from the harness results".into()],
                measured: None,
            });
            continue;
        };
        let mut reasons = Vec::new();
        let mut correct = m.correct;
        if !m.correct {
            reasons.push(match &m.reason {
                Some(r) => format!("incorrect: {r}"),
                None => format!("incorrect{}", error_summary(m)),
            });
        } else if let Some(problem) = harness_contradiction(m) {
            correct = false;
            reasons.push(problem);
        }
        let speedup = m.baseline_us / m.time_us;
        // A timing the harness could not trust passes nothing, whatever it
        // says: "cannot tell", not a verdict on the candidate.
        let untrusted = m.cannot_tell.as_deref().map(str::trim).filter(|w| !w.is_empty());
        if let Some(why) = untrusted {
            reasons.push(format!("{CANNOT_TELL} {why} (not the candidate's doing: measure again)"));
        }
        let min_speedup = spec.min_speedup_for(name);
        if speedup < min_speedup {
            reasons.push(format!(
                "speedup {:.2}x < {:.2}x ({:.1} us vs initial {:.1} us)",
                speedup, min_speedup, m.time_us, m.baseline_us
            ));
        }
        let compare_speedup = m.compare_us.map(|c| c / m.time_us);
        let mut fast_enough = speedup >= min_speedup;
        if let Some(min_c) = spec.min_compare_speedup_for(name) {
            match (compare_speedup, m.compare_us) {
                (Some(c), Some(cu)) if c < min_c => {
                    fast_enough = false;
                    reasons.push(format!(
                        "vs comparison {c:.2}x < {min_c:.2}x ({:.1} us vs comparison {cu:.1} us)",
                        m.time_us
                    ));
                }
                (Some(_), _) => {}
                _ => {
                    fast_enough = false;
                    reasons.push(format!(
                        "no comparison time (compare_us) reported; the goal is at least {min_c:.2}x the comparison"
                    ));
                }
            }
        }
        let passes = (correct || !spec.correct) && fast_enough && untrusted.is_none();
        if !spec.correct {
            reasons.retain(|r| !r.starts_with("incorrect"));
        }
        scenarios.push(ScenarioVerdict {
            scenario: name.clone(),
            present: true,
            correct,
            speedup: Some(speedup),
            compare_speedup,
            passes,
            reasons,
            measured: Some(m.clone()),
        });
    }
    for m in measured {
        if !required.contains(&m.scenario) {
            tracing::debug!(scenario = %m.scenario, "harness reported a scenario the spec does not list");
        }
    }

    let speedups: Vec<f64> = scenarios.iter().filter_map(|s| s.speedup).collect();
    let geomean = geometric_mean(&speedups, required.len());
    let compare_speedups: Vec<f64> = scenarios.iter().filter_map(|s| s.compare_speedup).collect();
    let geomean_compare = geometric_mean(&compare_speedups, required.len());
    let worst =
        scenarios.iter().filter_map(|s| s.speedup.map(|v| (s.scenario.clone(), v))).min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some(min_g) = spec.min_geomean_speedup {
        match geomean {
            Some(g) if g < min_g => {
                failures.push(format!("geometric mean speedup {g:.2}x < {min_g:.2}x"));
            }
            None => failures.push(format!(
                "geometric mean speedup unknown ({} of {} scenarios measured); it must reach {min_g:.2}x",
                speedups.len(),
                required.len()
            )),
            _ => {}
        }
    }
    if let Some(min_g) = spec.min_compare_geomean {
        match geomean_compare {
            Some(g) if g < min_g => {
                failures.push(format!("geometric mean vs comparison {g:.2}x < {min_g:.2}x"));
            }
            None => failures.push(format!(
                "geometric mean vs comparison unknown ({} of {} scenarios have a comparison time); it must reach \
                 {min_g:.2}x",
                compare_speedups.len(),
                required.len()
            )),
            _ => {}
        }
    }
    let failing_count = scenarios.iter().filter(|s| !s.passes).count();
    Verdict {
        holds: failing_count == 0 && failures.is_empty(),
        scenarios,
        geomean_speedup: geomean,
        geomean_compare_speedup: geomean_compare,
        worst_scenario: worst.as_ref().map(|w| w.0.clone()),
        worst_speedup: worst.map(|w| w.1),
        failures,
        failing_count,
    }
}

/// How a scenario whose timing the harness could not trust is reported.
pub const CANNOT_TELL: &str = "cannot tell:";

/// Whether an evaluation failure is one of the geometric-mean bars that
/// [`judge`] adds (a figure below its bar), not a failure of the
/// evaluation itself.
pub fn is_bar_failure(failure: &str) -> bool {
    failure.starts_with("geometric mean speedup ") || failure.starts_with("geometric mean vs comparison ")
}

/// The geometric mean of `values` when there is one for each of `n`
/// scenarios (a mean over fewer would flatter the verdict).
fn geometric_mean(values: &[f64], n: usize) -> Option<f64> {
    (values.len() == n && !values.is_empty())
        .then(|| (values.iter().map(|s| s.ln()).sum::<f64>() / values.len() as f64).exp())
}

fn error_summary(m: &ScenarioResult) -> String {
    let mut parts = Vec::new();
    if let Some(e) = m.max_abs_err_ref {
        parts.push(format!("error vs reference {e:.3e}"));
    }
    if let Some(e) = m.max_abs_err_hi {
        parts.push(format!("error vs high-precision reference {e:.3e}"));
    }
    if let Some(t) = m.tolerance {
        parts.push(format!("tolerance {t:.3e}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// A harness that says "correct" while its own numbers say otherwise is
/// not believed. What "its own numbers" mean follows the tolerance model
/// the harness reports (docs/RESULTS.md):
/// - a non-finite error is never correct;
/// - `max_tol_ratio` (the largest `|diff| / (atol + rtol*|ref|)`) above 1
///   contradicts "correct" under any model;
/// - with no `rtol` (or `rtol = 0`), `tolerance` bounds the largest absolute
///   error, and an error above it is a contradiction;
/// - with `rtol > 0` the absolute errors alone cannot be checked (the bound
///   of each element depends on `|ref|` there): the ratio is the check.
fn harness_contradiction(m: &ScenarioResult) -> Option<String> {
    for (name, err) in [("reference", m.max_abs_err_ref), ("high-precision reference", m.max_abs_err_hi)] {
        if let Some(e) = err {
            if !e.is_finite() {
                return Some(format!(
                    "incorrect: error vs {name} is {e}, yet the harness reported the scenario correct"
                ));
            }
        }
    }
    if let Some(r) = m.max_tol_ratio {
        if !r.is_finite() || r > 1.0 {
            return Some(format!(
                "incorrect: the largest error-to-tolerance ratio {r:.3} the harness reported exceeds 1 ({})",
                tolerance_model(m)
            ));
        }
    }
    let tol = m.tolerance?;
    if m.rtol.is_some_and(|r| r > 0.0) {
        return None;
    }
    for (name, err) in [("reference", m.max_abs_err_ref), ("high-precision reference", m.max_abs_err_hi)] {
        if let Some(e) = err {
            if e > tol {
                return Some(format!(
                    "incorrect: error vs {name} {e:.3e} exceeds the tolerance {tol:.3e} the harness reported"
                ));
            }
        }
    }
    None
}

/// The tolerance model a result line states, in words.
fn tolerance_model(m: &ScenarioResult) -> String {
    match (m.tolerance, m.rtol) {
        (Some(a), Some(r)) => format!("|diff| <= {a:.1e} + {r:.1e} * |ref|"),
        (None, Some(r)) => format!("|diff| <= {r:.1e} * |ref|"),
        (Some(a), None) => format!("|diff| <= {a:.1e}"),
        (None, None) => "no tolerance reported".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, correct: bool, time: f64, base: f64) -> ScenarioResult {
        ScenarioResult {
            scenario: name.into(),
            correct,
            time_us: time,
            baseline_us: base,
            max_abs_err_ref: Some(1e-15),
            max_abs_err_hi: Some(2e-15),
            tolerance: Some(1e-12),
            rtol: None,
            max_tol_ratio: None,
            compare_us: None,
            bound_us: None,
            samples: Some(10),
            cv: Some(0.01),
            reason: None,
            cannot_tell: None,
        }
    }

    fn spec(min: f64, geo: Option<f64>) -> PredicateSpec {
        PredicateSpec { correct: true, min_speedup: min, min_geomean_speedup: geo, ..Default::default() }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn holds_only_when_every_scenario_passes() {
        let req = names(&["a", "b"]);
        let v = judge(&spec(1.0, Some(1.2)), &req, &[r("a", true, 50.0, 100.0), r("b", true, 40.0, 100.0)], vec![]);
        assert!(v.holds);
        assert!((v.geomean_speedup.unwrap() - (2.0f64 * 2.5).sqrt()).abs() < 1e-9);
        assert_eq!(v.worst_scenario.as_deref(), Some("a"));
    }

    #[test]
    fn a_good_mean_does_not_hide_a_slow_scenario() {
        let req = names(&["a", "b", "c"]);
        let m = [r("a", true, 10.0, 100.0), r("b", true, 10.0, 100.0), r("c", true, 120.0, 100.0)];
        let v = judge(&spec(1.0, Some(1.2)), &req, &m, vec![]);
        assert!(!v.holds);
        assert!(v.geomean_speedup.unwrap() > 4.0);
        assert_eq!(v.failing_count, 1);
        let c = &v.scenarios[2];
        assert!(!c.passes);
        assert!(c.reasons[0].starts_with("speedup 0.83x < 1.00x"), "{:?}", c.reasons);
    }

    #[test]
    fn missing_incorrect_and_contradicted_scenarios_fail_with_reasons() {
        let req = names(&["a", "b", "c"]);
        let mut lying = r("b", true, 10.0, 100.0);
        lying.max_abs_err_hi = Some(1e-3);
        let mut wrong = r("a", false, 10.0, 100.0);
        wrong.reason = Some("orthogonality error 3e-2".into());
        let v = judge(&spec(1.0, None), &req, &[wrong, lying], vec![]);
        assert!(!v.holds);
        assert_eq!(v.failing_count, 3);
        assert_eq!(v.scenarios[0].reasons, vec!["incorrect: orthogonality error 3e-2"]);
        assert!(v.scenarios[1].reasons[0].contains("exceeds the tolerance"));
        assert_eq!(v.scenarios[2].reasons, vec!["missing from the harness results"]);
        assert!(v.geomean_speedup.is_none());
    }

    #[test]
    fn geomean_is_checked_in_addition_and_evaluation_failures_count() {
        let req = names(&["a"]);
        let v = judge(&spec(1.0, Some(1.5)), &req, &[r("a", true, 90.0, 100.0)], vec![]);
        assert!(!v.holds);
        assert_eq!(v.failing_count, 0);
        assert!(v.failures[0].starts_with("geometric mean speedup 1.11x < 1.50x"));
        let v = judge(&spec(1.0, None), &req, &[r("a", true, 10.0, 100.0)], vec!["build failed".into()]);
        assert!(!v.holds);
    }

    /// Every failure `judge` adds itself is a geometric-mean bar; the
    /// evaluation's own failures handed to it are not.
    #[test]
    fn the_bars_judge_adds_are_told_from_the_evaluations_failures() {
        let req = names(&["a", "b"]);
        let bars = PredicateSpec { min_compare_geomean: Some(1.1), ..spec(1.0, Some(1.5)) };
        let mut a = r("a", true, 90.0, 100.0);
        a.compare_us = Some(80.0);
        let v = judge(&bars, &req, &[a.clone(), r("b", true, 90.0, 100.0)], vec!["build failed".into()]);
        let own: Vec<&String> = v.failures.iter().filter(|f| !is_bar_failure(f)).collect();
        assert_eq!(own, vec!["build failed"], "{:?}", v.failures);
        assert_eq!(v.failures.len(), 3, "{:?}", v.failures);
        let v = judge(&bars, &req, &[a], vec![]);
        assert!(v.failures.len() == 2 && v.failures.iter().all(|f| is_bar_failure(f)), "{:?}", v.failures);
    }

    /// What the CUDA harness writes for a correct bf16 scenario: the
    /// elementwise test `|diff| <= atol + rtol*|ref|` passed everywhere, yet
    /// the largest absolute error (3.1e-2, at an element where |ref| is
    /// large) is above atol (1e-2). Read as an absolute bound, this blocked
    /// every kernel on the GPU, the correct ones too.
    fn elementwise(name: &str, err: f64, ratio: Option<f64>) -> ScenarioResult {
        ScenarioResult {
            max_abs_err_ref: Some(err),
            max_abs_err_hi: Some(err),
            tolerance: Some(1e-2),
            rtol: Some(1e-2),
            max_tol_ratio: ratio,
            ..r(name, true, 10.0, 100.0)
        }
    }

    #[test]
    fn an_elementwise_tolerance_is_judged_by_its_own_model() {
        let req = names(&["a"]);
        // Within tolerance elementwise, large absolute error: correct.
        let v = judge(&spec(1.0, None), &req, &[elementwise("a", 3.125e-2, Some(0.71))], vec![]);
        assert!(v.holds, "{:?}", v.scenarios[0].reasons);
        // The same without a ratio: the absolute error is not a bound under rtol.
        let v = judge(&spec(1.0, None), &req, &[elementwise("a", 3.125e-2, None)], vec![]);
        assert!(v.holds, "{:?}", v.scenarios[0].reasons);
        // A ratio above 1 contradicts "correct".
        let v = judge(&spec(1.0, None), &req, &[elementwise("a", 3.125e-2, Some(1.8))], vec![]);
        assert!(!v.holds);
        assert!(v.scenarios[0].reasons[0].contains("error-to-tolerance ratio 1.800 the harness reported exceeds 1"));
        assert!(v.scenarios[0].reasons[0].contains("|diff| <= 1.0e-2 + 1.0e-2 * |ref|"), "{:?}", v.scenarios[0]);
        // A harness with only an absolute bound keeps today's check.
        let mut abs = elementwise("a", 3.125e-2, None);
        abs.rtol = None;
        let v = judge(&spec(1.0, None), &req, &[abs.clone()], vec![]);
        assert!(v.scenarios[0].reasons[0].contains("exceeds the tolerance 1.000e-2"), "{:?}", v.scenarios[0]);
        abs.rtol = Some(0.0);
        assert!(!judge(&spec(1.0, None), &req, &[abs.clone()], vec![]).holds, "rtol 0 is the absolute model");
        abs.max_abs_err_ref = Some(5e-3);
        abs.max_abs_err_hi = Some(5e-3);
        assert!(judge(&spec(1.0, None), &req, &[abs], vec![]).holds);
    }

    #[test]
    fn a_non_finite_error_is_never_correct() {
        let req = names(&["a"]);
        let mut m = elementwise("a", 1e-3, Some(0.1));
        m.max_abs_err_hi = Some(f64::INFINITY);
        let v = judge(&spec(1.0, None), &req, &[m], vec![]);
        assert!(!v.holds);
        assert!(v.scenarios[0].reasons[0].contains("error vs high-precision reference is inf"), "{:?}", v.scenarios);
    }

    fn compared(name: &str, time: f64, compare: Option<f64>) -> ScenarioResult {
        ScenarioResult { compare_us: compare, ..r(name, true, time, 100.0) }
    }

    #[test]
    fn the_comparison_goal_holds_each_scenario_to_the_comparison() {
        let req = names(&["a", "b", "c"]);
        let goal = PredicateSpec { min_compare_speedup: Some(1.0), min_compare_geomean: Some(1.1), ..spec(1.0, None) };
        // 9.5x the initial kernel, but 3x slower than the comparison on b.
        let m = [compared("a", 10.0, Some(12.0)), compared("b", 10.0, Some(3.3)), compared("c", 10.0, None)];
        let v = judge(&goal, &req, &m, vec![]);
        assert!(!v.holds);
        assert_eq!(v.failing_count, 2);
        assert!(v.scenarios[0].passes);
        assert!((v.scenarios[0].compare_speedup.unwrap() - 1.2).abs() < 1e-9);
        assert_eq!(v.scenarios[1].reasons, vec!["vs comparison 0.33x < 1.00x (10.0 us vs comparison 3.3 us)"]);
        assert!(v.scenarios[2].reasons[0].starts_with("no comparison time (compare_us) reported"));
        assert!(v.geomean_compare_speedup.is_none());
        assert!(v.failures[0].starts_with("geometric mean vs comparison unknown (2 of 3"), "{:?}", v.failures);
        // The same kernel under the initial-kernel goal holds.
        assert!(judge(&spec(1.0, Some(2.0)), &req, &m, vec![]).holds);
        // Fast enough everywhere, but the mean misses its own bar.
        let m = [compared("a", 10.0, Some(10.5)), compared("b", 10.0, Some(10.5)), compared("c", 10.0, Some(10.5))];
        let v = judge(&goal, &req, &m, vec![]);
        assert_eq!(v.failing_count, 0);
        assert!((v.geomean_compare_speedup.unwrap() - 1.05).abs() < 1e-9);
        assert_eq!(v.failures, vec!["geometric mean vs comparison 1.05x < 1.10x"]);
    }

    #[test]
    fn per_scenario_thresholds_replace_the_campaign_wide_ones() {
        use crate::campaign::ScenarioThresholds;
        let req = names(&["small", "big"]);
        let mut goal = PredicateSpec { min_compare_speedup: Some(1.0), ..spec(1.5, None) };
        goal.scenarios
            .insert("small".into(), ScenarioThresholds { min_speedup: Some(1.1), min_compare_speedup: Some(0.8) });
        // small: 1.25x initial, 0.9x comparison: passes only under its own bars.
        let m = [compared("small", 80.0, Some(72.0)), compared("big", 50.0, Some(60.0))];
        let v = judge(&goal, &req, &m, vec![]);
        assert!(v.holds, "{:?}", v.scenarios);
        goal.scenarios.clear();
        let v = judge(&goal, &req, &m, vec![]);
        assert_eq!(v.failing_count, 1);
        assert_eq!(v.scenarios[0].reasons.len(), 2, "{:?}", v.scenarios[0].reasons);
    }
}
