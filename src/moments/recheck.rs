//! What makes a suspicious gain's re-evaluation disagree with the first:
//! a scenario that turns incorrect with fresh inputs, a run that fails, a
//! speedup that no longer clears the bar when timed again. Evaluations in,
//! reasons out; the re-evaluation itself (another seed, the same tree
//! built afresh) is run by the application layer, `src/app/recheck.rs`.

use crate::evaluation::Evaluation;

/// What makes the second evaluation disagree with the first.
pub fn disagreements(first: &Evaluation, second: &Evaluation, seed: u64) -> Vec<String> {
    let mut out = Vec::new();
    for f in &second.verdict.failures {
        if !first.verdict.failures.contains(f) {
            out.push(format!("the re-evaluation failed: {f}"));
        }
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
        // Timing noise is not a verdict: only a scenario that no longer
        // clears the predicate when timed again disagrees.
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
}
