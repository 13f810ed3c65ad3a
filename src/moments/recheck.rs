//! A suspicious gain does not count until it survives a re-evaluation that
//! gadfly runs itself: the same tree, built afresh, run with another seed
//! (fresh inputs, other memory contents), the harness timing it again
//! against the initial kernel. A scenario that turns incorrect, a run that
//! fails, or speedups that do not reproduce, reject the gain: the tree's
//! evaluation then fails the predicate, with the reason.

use std::collections::BTreeMap;

use anyhow::anyhow;

use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::events::Event;
use crate::harness;
use crate::supervisor::Supervisor;

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

/// Re-checks the evaluation `eval` (stored under `eval.id`); returns the
/// evaluation as it now stands (failing, when the gain was rejected).
pub async fn recheck(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    eval: &Evaluation,
) -> anyhow::Result<Evaluation> {
    let id = eval.id.ok_or_else(|| anyhow!("recheck of an unsaved evaluation"))?;
    let (row, _) = sup.campaign(campaign_id).await.map_err(|e| anyhow!("{e}"))?;
    let protected: BTreeMap<String, String> = serde_json::from_str(&row.protected_json)?;
    let seed = loop {
        let s = rand::random::<u32>() as u64;
        if s != harness::DEFAULT_SEED {
            break s;
        }
    };
    sup.record_event(campaign_id, None, None, Event::GainRecheck { evaluation_id: id, tree: eval.tree.clone(), seed })
        .await?;
    let pristine = sup.pristine(campaign_id).await?;
    let store = crate::snapshot::store_path(sup.data_dir(), campaign_id);
    let inputs = harness::Inputs {
        spec,
        campaign_id,
        tree: &eval.tree,
        protected: &protected,
        pristine: &pristine,
        seed,
        store: &store,
    };
    let mut second = crate::jobs::evaluate(sup.store(), &inputs, &sup.data_dir().join("evaluations")).await?;
    second.tree = format!("{}+recheck-{seed}", eval.tree);
    let second_id = sup.store().insert_evaluation(campaign_id, &second).await?;
    let problems = disagreements(eval, &second, seed);
    if problems.is_empty() {
        let confirmed = Event::GainConfirmed { evaluation_id: id, recheck_id: second_id, seed };
        sup.record_event(campaign_id, None, None, confirmed).await?;
        return Ok(eval.clone());
    }
    let mut rejected = eval.clone();
    rejected.verdict.failures.push(format!("the gain did not survive gadfly's re-evaluation: {}", problems.join("; ")));
    rejected.verdict.holds = false;
    sup.store().replace_evaluation_body(id, &rejected).await?;
    let rejected_event = Event::GainRejected { evaluation_id: id, recheck_id: second_id, seed, reasons: problems };
    sup.record_event(campaign_id, None, None, rejected_event).await?;
    Ok(rejected)
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
