//! What makes a suspicious gain's re-evaluation disagree with the first:
//! a scenario that turns incorrect with fresh inputs, a run that fails, a
//! speedup that no longer clears the bar when timed again. Evaluations in,
//! reasons out; the re-evaluation itself (another seed, the same tree
//! built afresh) is run by the application layer, `src/app/recheck.rs`.

use crate::evaluation::Evaluation;

/// What makes the second evaluation disagree with the first: its verdict
/// ([`verdict_disagreements`]), then its timing ([`timing_disagreements`]).
pub fn disagreements(first: &Evaluation, second: &Evaluation, seed: u64) -> Vec<String> {
    let mut out = verdict_disagreements(first, second, seed);
    out.extend(timing_disagreements(first, second));
    out
}

/// A failure the first evaluation did not have, or a scenario correct in
/// the first and incorrect with fresh inputs: never noise.
pub fn verdict_disagreements(first: &Evaluation, second: &Evaluation, seed: u64) -> Vec<String> {
    let mut out = Vec::new();
    for f in new_failures(first, second).filter(|f| !timing_failure(f)) {
        out.push(format!("the re-evaluation failed: {f}"));
    }
    for s1 in &first.verdict.scenarios {
        let Some(s2) = second.verdict.scenarios.iter().find(|s| s.scenario == s1.scenario) else { continue };
        if s1.correct && s1.present && !s2.correct {
            out.push(format!(
                "scenario {} is incorrect with fresh inputs (seed {seed}): {}",
                s1.scenario,
                if s2.reasons.is_empty() { "missing".to_string() } else { s2.reasons.join("; ") }
            ));
        }
    }
    out
}

/// The scenarios that passed in the first evaluation, are still correct in
/// the second, and no longer clear the bar when timed again. Timing noise
/// is not a verdict: a scenario whose speedup merely moves is fine.
pub fn timing_disagreements(first: &Evaluation, second: &Evaluation) -> Vec<String> {
    let mut out: Vec<String> = new_failures(first, second)
        .filter(|f| timing_failure(f))
        .map(|f| format!("the re-evaluation failed: {f}"))
        .collect();
    for s1 in &first.verdict.scenarios {
        let Some(s2) = second.verdict.scenarios.iter().find(|s| s.scenario == s1.scenario) else { continue };
        if s1.passes && s2.correct && !s2.passes {
            if let (Some(a), Some(b)) = (s1.speedup, s2.speedup) {
                out.push(format!(
                    "scenario {} measured {a:.2}x, then {b:.2}x when timed again, below the bar",
                    s1.scenario
                ));
            }
        }
    }
    out
}

/// One slow re-measurement on a shared machine is not proof that a gain
/// was fake (a correct kernel once measured 2.20x, then 0.82x, on a loaded
/// 2-core host): when the second evaluation disagrees on timing only, the
/// application times the tree a third time, and only the scenarios below
/// the bar in both re-evaluations reject the gain, with both figures. A
/// gain that came from a trick (cached outputs, inputs it recognised)
/// disappears every time.
pub fn timing_disagreements_twice(first: &Evaluation, second: &Evaluation, third: &Evaluation) -> Vec<String> {
    let below = |e: &Evaluation, name: &str| {
        e.verdict.scenarios.iter().find(|s| s.scenario == name).is_some_and(|s| s.correct && !s.passes)
    };
    let speedup = |e: &Evaluation, name: &str| {
        e.verdict.scenarios.iter().find(|s| s.scenario == name).and_then(|s| s.speedup).unwrap_or(f64::NAN)
    };
    let third_failures: Vec<&String> = new_failures(first, third).filter(|f| timing_failure(f)).collect();
    let mut out: Vec<String> = new_failures(first, second)
        .filter(|f| timing_failure(f))
        .filter_map(|f| {
            let again = third_failures.iter().find(|g| g.split(" < ").nth(1) == f.split(" < ").nth(1))?;
            Some(format!("the re-evaluation failed twice: {f}, then {again}"))
        })
        .collect();
    out.extend(
        first
            .verdict
            .scenarios
            .iter()
            .filter(|s1| s1.passes && below(second, &s1.scenario) && below(third, &s1.scenario))
            .map(|s1| {
                format!(
                    "scenario {} measured {:.2}x, then {:.2}x and {:.2}x when timed twice again, below the bar",
                    s1.scenario,
                    s1.speedup.unwrap_or(f64::NAN),
                    speedup(second, &s1.scenario),
                    speedup(third, &s1.scenario)
                )
            }),
    );
    out
}

/// The failures of `second` that `first` did not have.
fn new_failures<'a>(first: &'a Evaluation, second: &'a Evaluation) -> impl Iterator<Item = &'a String> {
    second.verdict.failures.iter().filter(|f| !first.verdict.failures.contains(f))
}

/// A failure about speed alone (a geometric mean measured below the
/// predicate's bar, see `crate::predicate`), which timing noise can cause;
/// a mean that is unknown (scenarios missing) is a verdict.
fn timing_failure(f: &str) -> bool {
    f.starts_with("geometric mean ") && !f.contains(" unknown (")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::PredicateSpec;
    use crate::predicate::judge;
    use crate::results::ScenarioResult;

    fn ev(rows: &[(&str, bool, f64)]) -> Evaluation {
        let spec = PredicateSpec { correct: true, min_speedup: 1.0, min_geomean_speedup: None, ..Default::default() };
        let names: Vec<String> = rows.iter().map(|r| r.0.to_string()).collect();
        let m: Vec<ScenarioResult> = rows
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
                cannot_tell: None,
                baseline_cv: None,
            })
            .collect();
        Evaluation {
            id: Some(1),
            tree: "t".into(),
            verdict: judge(&spec, &names, &m, vec![]),
            build: None,
            run: None,
            violations: vec![],
            duration_ms: 1,
            created_at: String::new(),
            cached: false,
            origin: Default::default(),
        }
    }

    #[test]
    fn fresh_inputs_and_re_timing_must_agree() {
        let first = ev(&[("a", true, 3.0), ("b", true, 3.0)]);
        assert!(
            disagreements(&first, &ev(&[("a", true, 1.6), ("b", true, 3.1)]), 7).is_empty(),
            "noisy but still passing"
        );
        let d = disagreements(&first, &ev(&[("a", false, 3.0), ("b", true, 0.9)]), 7);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("scenario a is incorrect with fresh inputs (seed 7)"));
        assert!(d[1].contains("scenario b measured 3.00x, then 0.90x when timed again, below the bar"));
    }

    #[test]
    fn a_gain_is_rejected_on_timing_only_when_two_re_measurements_miss_the_bar() {
        let first = ev(&[("a", true, 2.2), ("b", true, 3.0)]);
        let noisy = ev(&[("a", true, 0.82), ("b", true, 3.0)]);
        assert_eq!(verdict_disagreements(&first, &noisy, 7), Vec::<String>::new(), "timing only");
        assert_eq!(timing_disagreements(&first, &noisy).len(), 1);
        // The third measurement clears the bar: one slow measurement was noise.
        assert!(timing_disagreements_twice(&first, &noisy, &ev(&[("a", true, 2.1), ("b", true, 2.9)])).is_empty());
        // Both miss it: the gain is gone, with the three figures.
        let d = timing_disagreements_twice(&first, &noisy, &ev(&[("a", true, 0.9), ("b", true, 2.9)]));
        assert_eq!(d, ["scenario a measured 2.20x, then 0.82x and 0.90x when timed twice again, below the bar"]);
        // Each re-measurement missing the bar on a different scenario is noise too.
        let other = ev(&[("a", true, 2.1), ("b", true, 0.5)]);
        assert!(timing_disagreements_twice(&first, &noisy, &other).is_empty());
        // A scenario turned incorrect is a verdict at once, never timed again.
        assert_eq!(verdict_disagreements(&first, &ev(&[("a", false, 2.2), ("b", true, 3.0)]), 7).len(), 1);
    }
}
