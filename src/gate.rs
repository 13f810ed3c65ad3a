//! The Stop gate's decision, as a pure function of the campaign's mode, the
//! verdict and the question to carry: block while the predicate fails (or
//! a person's question waits), allow otherwise, never block in audit mode.
//! Also the text of the block reason the agent reads.

use serde::{Deserialize, Serialize};

use crate::campaign::{Mode, PredicateSpec};
use crate::harness::Evaluation;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Block,
    Allow,
    /// Audit mode: the attempt is recorded and let through whatever the verdict.
    Record,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Block => "block",
            Decision::Allow => "allow",
            Decision::Record => "record",
        }
    }
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

/// The reason shown to the agent when a stop is blocked: every failing
/// scenario in a compact table, the aggregate, evaluation-level failures
/// and one question.
pub fn block_reason(eval: &Evaluation, predicate: &PredicateSpec, question: Option<&Question>) -> String {
    let (min_speedup, min_geomean) = (predicate.min_speedup, predicate.min_geomean_speedup);
    let compared = predicate.uses_comparison();
    let v = &eval.verdict;
    let mut out = String::new();
    let short_tree: String = eval.tree.chars().take(10).collect();
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
    let geo = v.geomean_speedup.map_or("unknown".to_string(), |g| format!("{g:.2}x"));
    let worst = match (&v.worst_scenario, v.worst_speedup) {
        (Some(s), Some(w)) => format!("; worst {s} at {w:.2}x"),
        _ => String::new(),
    };
    let bar = min_geomean.map_or(String::new(), |g| format!(" (must reach {g:.2}x)"));
    out.push_str(&format!(
        "Geometric mean speedup {geo}{bar}{worst}. Every scenario must be correct and at least {min_speedup:.2}x; the mean never stands in for a scenario.\n"
    ));
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
        out.push_str("Answer it with a measurement or an experiment, not an argument.\n");
    }
    if !v.holds {
        out.push_str("Keep working until every scenario passes, then try to stop again.");
    }
    out
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
mod tests {
    use super::*;
    use crate::campaign::PredicateSpec;
    use crate::predicate::judge;
    use crate::results::ScenarioResult;

    fn eval(results: &[(&str, bool, f64)]) -> Evaluation {
        let spec =
            PredicateSpec { correct: true, min_speedup: 1.0, min_geomean_speedup: Some(1.1), ..Default::default() };
        let names: Vec<String> = results.iter().map(|r| r.0.to_string()).chain(["gone".to_string()]).collect();
        let measured: Vec<ScenarioResult> = results
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
            tree: "0123456789abcdef".into(),
            verdict: judge(&spec, &names, &measured, vec![]),
            build: None,
            run: None,
            violations: vec![],
            duration_ms: 1,
            created_at: String::new(),
            cached: false,
        }
    }

    #[test]
    fn decisions_by_mode() {
        assert_eq!(decide(Mode::Autonomous, false, false), Decision::Block);
        assert_eq!(decide(Mode::Human, true, false), Decision::Allow);
        assert_eq!(decide(Mode::Human, true, true), Decision::Block);
        assert_eq!(decide(Mode::Audit, false, true), Decision::Record);
    }

    #[test]
    fn reason_names_every_failing_scenario_and_the_question() {
        let e = eval(&[("fast", true, 2.0), ("wrong", false, 3.0), ("slow", true, 0.5)]);
        let q = Question {
            queued_id: None,
            source: "bench-001".into(),
            moment: "completion_claim".into(),
            text: "Why?".into(),
        };
        let spec = PredicateSpec { min_geomean_speedup: Some(1.1), ..Default::default() };
        let r = block_reason(&e, &spec, Some(&q));
        assert!(r.contains("fails on 3 of 4 scenarios"), "{r}");
        for name in ["wrong", "slow", "gone"] {
            assert!(r.lines().any(|l| l.starts_with(name)), "{name} missing in {r}");
        }
        assert!(!r.lines().any(|l| l.starts_with("fast")), "{r}");
        assert!(r.contains("0.50x"));
        assert!(r.contains("Question (bench-001): Why?"));
    }
}
