//! The stop predicate: it holds only when every required scenario is
//! present, correct and at least `min_speedup` faster than the initial
//! kernel, the geometric mean (when asked for) clears its own bar, and the
//! evaluation itself raised no failure. The verdict names every failing
//! scenario with its reason and numbers.

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
        if speedup < spec.min_speedup {
            reasons.push(format!(
                "speedup {:.2}x < {:.2}x ({:.1} us vs initial {:.1} us)",
                speedup, spec.min_speedup, m.time_us, m.baseline_us
            ));
        }
        let passes = (correct || !spec.correct) && speedup >= spec.min_speedup;
        if !spec.correct {
            reasons.retain(|r| !r.starts_with("incorrect"));
        }
        scenarios.push(ScenarioVerdict {
            scenario: name.clone(),
            present: true,
            correct,
            speedup: Some(speedup),
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
    let geomean = if speedups.len() == required.len() && !speedups.is_empty() {
        Some((speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len() as f64).exp())
    } else {
        None
    };
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
    let failing_count = scenarios.iter().filter(|s| !s.passes).count();
    Verdict {
        holds: failing_count == 0 && failures.is_empty(),
        scenarios,
        geomean_speedup: geomean,
        worst_scenario: worst.as_ref().map(|w| w.0.clone()),
        worst_speedup: worst.map(|w| w.1),
        failures,
        failing_count,
    }
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
/// not believed: errors above the tolerance, or non-finite errors.
fn harness_contradiction(m: &ScenarioResult) -> Option<String> {
    let tol = m.tolerance?;
    for (name, err) in [("reference", m.max_abs_err_ref), ("high-precision reference", m.max_abs_err_hi)] {
        if let Some(e) = err {
            if !e.is_finite() || e > tol {
                return Some(format!(
                    "incorrect: error vs {name} {e:.3e} exceeds the tolerance {tol:.3e} the harness reported"
                ));
            }
        }
    }
    None
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
            compare_us: None,
            bound_us: None,
            samples: Some(10),
            cv: Some(0.01),
            reason: None,
        }
    }

    fn spec(min: f64, geo: Option<f64>) -> PredicateSpec {
        PredicateSpec { correct: true, min_speedup: min, min_geomean_speedup: geo }
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
}
