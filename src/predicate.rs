//! The stop predicate: it holds only when every required scenario is
//! present, correct, at least `min_speedup` faster than the initial kernel
//! and (when asked for) at least `min_compare_speedup` against the
//! comparison implementation the harness times, each geometric mean asked
//! for clears its own bar, and the evaluation itself raised no failure. The
//! verdict names every failing scenario with its reason and numbers.
//!
//! A bar is met only beyond noise. Each figure comes with an interval
//! ([`noise`]): from the harness's samples and spread when it reports them,
//! never narrower than `[predicate] noise` for one evaluation, and
//! `[predicate] noise_unknown` wide when the harness reports no spread.
//! A figure whose whole interval clears its bar passes; one whose whole
//! interval is below it fails; one whose interval straddles it is
//! [`WITHIN_NOISE`]: it does not pass (an unchanged kernel is never "faster"
//! by luck), it is not called slower either, and gadfly measures it again
//! before deciding ([`pool`]: several evaluations of one tree, pooled,
//! narrow the interval). Two evaluations whose intervals overlap can
//! therefore never be judged one passing and the other failing the bar.

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
    /// The speedup's interval `[low, high]` (see [`noise`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// A bar this scenario is held to lies inside its interval: neither
    /// met nor missed beyond noise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub within_noise: bool,
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
    /// The geometric mean's interval `[low, high]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geomean_interval: Option<[f64; 2]>,
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
    /// How many evaluations of this tree the figures pool (1 unless gadfly
    /// measured it again because a figure was within noise of its bar).
    #[serde(default = "one_run", skip_serializing_if = "is_one_run")]
    pub runs: u32,
}

fn one_run() -> u32 {
    1
}

fn is_one_run(r: &u32) -> bool {
    *r == 1
}

/// What a figure within noise of its bar is called in a verdict's reasons.
pub const WITHIN_NOISE: &str = "within noise:";

/// The half-width of a scenario's speedup interval, in log space (about a
/// relative uncertainty: 0.01 is 1%). From the harness's samples when it
/// reports them: twice the standard error of a median
/// (`1.25 * cv / sqrt(samples)`) of the candidate and of the initial
/// kernel (`baseline_cv`, else the candidate's own `cv`), never below
/// `[predicate] noise` nor the scenario's calibrated noise
/// ([`PredicateSpec::calibrated`]); `noise_unknown` when it reports no
/// spread. `runs`
/// pooled evaluations narrow it by `sqrt(runs)`.
pub fn noise(spec: &PredicateSpec, m: &ScenarioResult, runs: u32) -> f64 {
    // The harness's calibration of this scenario widens the floor: the
    // spread it showed from run to run.
    let calibrated = spec.calibrated.get(&m.scenario).copied().filter(|c| c.is_finite()).unwrap_or(0.0);
    let floor = spec.noise.max(calibrated).max(0.0);
    let one = match (m.cv, m.samples) {
        (Some(cv), Some(n)) if n >= 2 && cv.is_finite() && cv >= 0.0 => {
            let base = m.baseline_cv.filter(|c| c.is_finite() && *c >= 0.0).unwrap_or(cv);
            (2.0 * 1.25 * ((cv * cv + base * base) / n as f64).sqrt()).max(floor)
        }
        _ => spec.noise_unknown.max(floor),
    };
    one / f64::from(runs.max(1)).sqrt()
}

/// Where a figure stands against its bar, given its half-width `u` in
/// log space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgainstBar {
    /// The whole interval is at or above the bar.
    Met,
    /// The whole interval is below it.
    Missed,
    /// The bar is inside the interval.
    WithinNoise,
}

pub fn against_bar(figure: f64, u: f64, bar: f64) -> AgainstBar {
    let (f, b) = (figure.ln(), bar.ln());
    if f - u >= b {
        AgainstBar::Met
    } else if f + u < b {
        AgainstBar::Missed
    } else {
        AgainstBar::WithinNoise
    }
}

/// `[low, high]` of a figure with half-width `u` in log space.
pub fn interval(figure: f64, u: f64) -> [f64; 2] {
    [figure * (-u).exp(), figure * u.exp()]
}

fn shown(i: [f64; 2]) -> String {
    format!("{:.3}x to {:.3}x", i[0], i[1])
}

/// Whether two figures differ beyond noise: `a`'s whole interval above
/// `b`'s.
pub fn beyond_noise_above(a: f64, a_interval: [f64; 2], b: f64, b_interval: [f64; 2]) -> bool {
    a > b && a_interval[0] > b_interval[1]
}

/// Judges measured scenarios against the predicate. `required` is the
/// spec's scenario list; `failures` are evaluation-level problems already
/// found (they make the verdict fail on their own).
pub fn judge(spec: &PredicateSpec, required: &[String], measured: &[ScenarioResult], failures: Vec<String>) -> Verdict {
    judge_runs(spec, required, measured, failures, 1)
}

/// [`judge`] of figures that pool `runs` evaluations of one tree ([`pool`]).
pub fn judge_runs(
    spec: &PredicateSpec,
    required: &[String],
    measured: &[ScenarioResult],
    failures: Vec<String>,
    runs: u32,
) -> Verdict {
    let runs = runs.max(1);
    let mut failures = failures;
    let mut scenarios = Vec::with_capacity(required.len());
    let mut uncertainties = Vec::with_capacity(required.len());
    for name in required {
        let Some(m) = measured.iter().find(|r| &r.scenario == name) else {
            scenarios.push(ScenarioVerdict {
                scenario: name.clone(),
                present: false,
                correct: false,
                speedup: None,
                compare_speedup: None,
                interval: None,
                within_noise: false,
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
        let u = noise(spec, m, runs);
        uncertainties.push(u);
        let iv = interval(speedup, u);
        // A timing the harness could not trust passes nothing, whatever it
        // says: "cannot tell", not a verdict on the candidate.
        let untrusted = m.cannot_tell.as_deref().map(str::trim).filter(|w| !w.is_empty());
        if let Some(why) = untrusted {
            reasons.push(format!("{CANNOT_TELL} {why} (not the candidate's doing: measure again)"));
        }
        let mut within_noise = false;
        let mut fast_enough = true;
        let min_speedup = spec.min_speedup_for(name);
        match against_bar(speedup, u, min_speedup) {
            AgainstBar::Met => {}
            AgainstBar::Missed => {
                fast_enough = false;
                reasons.push(format!(
                    "speedup {:.2}x < {:.2}x ({:.1} us vs initial {:.1} us; {} with noise)",
                    speedup,
                    min_speedup,
                    m.time_us,
                    m.baseline_us,
                    shown(iv)
                ));
            }
            AgainstBar::WithinNoise => {
                fast_enough = false;
                within_noise = true;
                reasons.push(format!(
                    "{WITHIN_NOISE} speedup {speedup:.3}x ({} with noise) straddles the bar {min_speedup:.2}x: not \
                     shown beyond noise ({:.1} us vs initial {:.1} us)",
                    shown(iv),
                    m.time_us,
                    m.baseline_us
                ));
            }
        }
        let compare_speedup = m.compare_us.map(|c| c / m.time_us);
        if let Some(min_c) = spec.min_compare_speedup_for(name) {
            match (compare_speedup, m.compare_us) {
                (Some(c), Some(cu)) => match against_bar(c, u, min_c) {
                    AgainstBar::Met => {}
                    AgainstBar::Missed => {
                        fast_enough = false;
                        reasons.push(format!(
                            "vs comparison {c:.2}x < {min_c:.2}x ({:.1} us vs comparison {cu:.1} us)",
                            m.time_us
                        ));
                    }
                    AgainstBar::WithinNoise => {
                        fast_enough = false;
                        within_noise = true;
                        reasons.push(format!(
                            "{WITHIN_NOISE} vs comparison {c:.3}x ({} with noise) straddles the bar {min_c:.2}x ({:.1} \
                             us vs comparison {cu:.1} us)",
                            shown(interval(c, u)),
                            m.time_us
                        ));
                    }
                },
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
            interval: Some(iv),
            within_noise,
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
    // The mean's own uncertainty: the scenarios' combined, never below one
    // evaluation's floor (drift moves every scenario of a run together).
    let u_mean = (uncertainties.len() == required.len() && !uncertainties.is_empty()).then(|| {
        let n = uncertainties.len() as f64;
        (uncertainties.iter().map(|u| u * u).sum::<f64>().sqrt() / n).max(spec.noise.max(0.0) / f64::from(runs).sqrt())
    });
    let geomean_interval = geomean.zip(u_mean).map(|(g, u)| interval(g, u));
    let compare_speedups: Vec<f64> = scenarios.iter().filter_map(|s| s.compare_speedup).collect();
    let geomean_compare = geometric_mean(&compare_speedups, required.len());
    let worst =
        scenarios.iter().filter_map(|s| s.speedup.map(|v| (s.scenario.clone(), v))).min_by(|a, b| a.1.total_cmp(&b.1));
    for (what, figure, bar, count) in [
        ("geometric mean speedup", geomean, spec.min_geomean_speedup, speedups.len()),
        ("geometric mean vs comparison", geomean_compare, spec.min_compare_geomean, compare_speedups.len()),
    ] {
        let Some(min_g) = bar else { continue };
        match (figure, u_mean) {
            (Some(g), Some(u)) => match against_bar(g, u, min_g) {
                AgainstBar::Met => {}
                AgainstBar::Missed => failures.push(format!("{what} {g:.2}x < {min_g:.2}x")),
                AgainstBar::WithinNoise => failures.push(format!(
                    "{WITHIN_NOISE} {what} {g:.3}x ({} with noise) straddles the bar {min_g:.2}x: not shown beyond noise",
                    shown(interval(g, u))
                )),
            },
            _ => failures.push(format!(
                "{what} unknown ({count} of {} scenarios {}); it must reach {min_g:.2}x",
                required.len(),
                if what.ends_with("comparison") { "have a comparison time" } else { "measured" }
            )),
        }
    }
    let failing_count = scenarios.iter().filter(|s| !s.passes).count();
    Verdict {
        holds: failing_count == 0 && failures.is_empty(),
        scenarios,
        geomean_speedup: geomean,
        geomean_interval,
        geomean_compare_speedup: geomean_compare,
        worst_scenario: worst.as_ref().map(|w| w.0.clone()),
        worst_speedup: worst.map(|w| w.1),
        failures,
        failing_count,
        runs,
    }
}

impl Verdict {
    /// True when the verdict fails only because figures are within noise
    /// of their bars: every failing scenario is correct, present and
    /// trusted, and fails only within noise; every failure of the whole is
    /// a mean within noise. Measuring again may then decide it.
    pub fn only_within_noise(&self) -> bool {
        !self.holds
            && (self.scenarios.iter().any(|s| s.within_noise)
                || self.failures.iter().any(|f| f.starts_with(WITHIN_NOISE)))
            && self.scenarios.iter().filter(|s| !s.passes).all(|s| {
                s.present && s.correct && s.within_noise && s.reasons.iter().all(|r| r.starts_with(WITHIN_NOISE))
            })
            && self.failures.iter().all(|f| f.starts_with(WITHIN_NOISE))
    }
}

/// Several evaluations of one tree as one: per scenario, the geometric
/// means of the times (candidate, initial kernel, comparison), correct only
/// when every run was, the largest errors and spread, the first reason and
/// the first "cannot tell". A scenario missing from any run is missing.
/// Judge the result with [`judge_runs`] and the number of runs.
pub fn pool(runs: &[&[ScenarioResult]]) -> Vec<ScenarioResult> {
    let Some(first) = runs.first() else { return vec![] };
    let gm = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
    let max_opt =
        |v: Vec<Option<f64>>| v.into_iter().flatten().fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
    first
        .iter()
        .filter_map(|f| {
            let all: Vec<&ScenarioResult> =
                runs.iter().map(|r| r.iter().find(|x| x.scenario == f.scenario)).collect::<Option<_>>()?;
            let compare: Option<Vec<f64>> = all.iter().map(|x| x.compare_us).collect();
            Some(ScenarioResult {
                scenario: f.scenario.clone(),
                correct: all.iter().all(|x| x.correct),
                time_us: gm(&all.iter().map(|x| x.time_us).collect::<Vec<_>>()),
                baseline_us: gm(&all.iter().map(|x| x.baseline_us).collect::<Vec<_>>()),
                max_abs_err_ref: max_opt(all.iter().map(|x| x.max_abs_err_ref).collect()),
                max_abs_err_hi: max_opt(all.iter().map(|x| x.max_abs_err_hi).collect()),
                tolerance: f.tolerance,
                rtol: f.rtol,
                max_tol_ratio: max_opt(all.iter().map(|x| x.max_tol_ratio).collect()),
                compare_us: compare.map(|c| gm(&c)),
                bound_us: f.bound_us,
                samples: all.iter().map(|x| x.samples).collect::<Option<Vec<u64>>>().and_then(|s| s.into_iter().min()),
                cv: max_opt(all.iter().map(|x| x.cv).collect()),
                baseline_cv: max_opt(all.iter().map(|x| x.baseline_cv).collect()),
                reason: all.iter().find_map(|x| x.reason.clone()),
                cannot_tell: all.iter().find_map(|x| x.cannot_tell.clone()),
            })
        })
        .collect()
}

/// How a scenario whose timing the harness could not trust is reported.
pub const CANNOT_TELL: &str = "cannot tell:";

/// Whether an evaluation failure is one of the geometric-mean bars that
/// [`judge`] adds (a figure below its bar), not a failure of the
/// evaluation itself.
pub fn is_bar_failure(failure: &str) -> bool {
    let f = failure.strip_prefix(WITHIN_NOISE).map_or(failure, str::trim_start);
    f.starts_with("geometric mean speedup ") || f.starts_with("geometric mean vs comparison ")
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
            baseline_cv: None,
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

    /// The unchanged initial kernel against itself: whatever the harness
    /// says of its spread (none, tiny, large), a figure at parity never
    /// meets a bar of 1.0x; it is within noise, never a coin flip.
    #[test]
    fn the_unchanged_kernel_never_passes_a_bar_of_one() {
        let req = names(&["a"]);
        for (time, cv, samples) in [
            (100.0, Some(0.0), Some(1000)),
            (99.6, Some(0.001), Some(500)),
            (99.0, Some(0.05), Some(10)),
            (99.5, None, None),
            (100.4, Some(0.002), Some(3)),
        ] {
            let m = ScenarioResult { cv, samples, ..r("a", true, time, 100.0) };
            let v = judge(&spec(1.0, Some(1.0)), &req, &[m], vec![]);
            assert!(!v.holds, "{time} us vs 100 us, cv {cv:?}: {:?}", v.scenarios[0]);
            assert!(v.scenarios[0].within_noise, "{:?}", v.scenarios[0].reasons);
            assert!(v.scenarios[0].reasons[0].starts_with(WITHIN_NOISE), "{:?}", v.scenarios[0].reasons);
            assert!(v.only_within_noise(), "{v:?}");
            assert!(v.failures.iter().all(|f| is_bar_failure(f)), "{:?}", v.failures);
        }
    }

    /// Over a grid of figures and spreads: two evaluations whose intervals
    /// overlap are never judged one meeting the bar and the other missing
    /// it.
    #[test]
    fn overlapping_figures_never_flip_the_decision() {
        let req = names(&["a"]);
        let mut verdicts = Vec::new();
        for i in 0..80 {
            let time = 90.0 + i as f64 * 0.25;
            for (cv, samples) in [(None, None), (Some(0.002), Some(50)), (Some(0.03), Some(10))] {
                let m = ScenarioResult { cv, samples, ..r("a", true, time, 100.0) };
                verdicts.push(judge(&spec(1.0, None), &req, &[m], vec![]).scenarios.remove(0));
            }
        }
        let mut met = 0;
        for a in &verdicts {
            met += usize::from(a.passes);
            for b in &verdicts {
                let (ia, ib) = (a.interval.unwrap(), b.interval.unwrap());
                if ia[0] <= ib[1] && ib[0] <= ia[1] {
                    assert!(!(a.passes && !b.passes && !b.within_noise), "{a:?} vs {b:?}");
                }
            }
        }
        assert!(met > 0 && met < verdicts.len(), "the grid spans both sides of the bar");
    }

    /// A 0.8% gain is within noise of one evaluation (1% floor); pooled
    /// over four (gadfly measuring again), it is shown.
    #[test]
    fn pooling_evaluations_narrows_the_interval() {
        let req = names(&["a", "b"]);
        let one = |t: f64| ScenarioResult { cv: Some(0.004), samples: Some(40), ..r("a", true, t, 100.0) };
        let run = |ta: f64, tb: f64| vec![one(ta), ScenarioResult { scenario: "b".into(), ..one(tb) }];
        let first = run(99.2, 99.3);
        let v = judge(&spec(1.0, Some(1.0)), &req, &first, vec![]);
        assert!(v.only_within_noise(), "{v:?}");
        let (r2, r3, r4) = (run(99.1, 99.2), run(99.3, 99.2), run(99.2, 99.1));
        let pooled = pool(&[&first, &r2, &r3, &r4]);
        let v = judge_runs(&spec(1.0, Some(1.0)), &req, &pooled, vec![], 4);
        assert!(v.holds, "{v:?}");
        assert_eq!(v.runs, 4);
        assert!((v.scenarios[0].measured.as_ref().unwrap().time_us - 99.2).abs() < 0.01);
        // Pooling keeps the worst of each run: one incorrect run is incorrect.
        let mut bad = run(99.2, 99.2);
        bad[1].correct = false;
        let v = judge_runs(&spec(1.0, Some(1.0)), &req, &pool(&[&first, &bad]), vec![], 2);
        assert!(!v.holds && !v.only_within_noise());
        assert!(!v.scenarios[1].correct);
        // A scenario missing from one run is missing.
        let v = judge_runs(&spec(1.0, None), &req, &pool(&[&first, &run(99.0, 99.0)[..1]]), vec![], 2);
        assert!(!v.scenarios[1].present);
    }

    /// Within noise is not "only within noise" when anything else fails.
    #[test]
    fn only_within_noise_needs_every_other_check_to_pass() {
        let req = names(&["a", "b"]);
        let near = r("a", true, 99.9, 100.0);
        let v = judge(&spec(1.0, None), &req, &[near.clone(), r("b", true, 50.0, 100.0)], vec![]);
        assert!(v.only_within_noise());
        let v = judge(&spec(1.0, None), &req, &[near.clone(), r("b", true, 150.0, 100.0)], vec![]);
        assert!(!v.only_within_noise(), "b is slower beyond noise");
        let v = judge(&spec(1.0, None), &req, &[near.clone(), r("b", true, 50.0, 100.0)], vec!["build failed".into()]);
        assert!(!v.only_within_noise());
        let v = judge(&spec(1.0, None), &req, &[near], vec![]);
        assert!(!v.only_within_noise(), "b is missing");
        let v = judge(&spec(1.0, None), &req, &[r("a", true, 50.0, 100.0), r("b", true, 50.0, 100.0)], vec![]);
        assert!(v.holds && !v.only_within_noise());
    }
}
