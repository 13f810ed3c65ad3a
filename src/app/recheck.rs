//! A suspicious gain does not count until it survives a re-evaluation that
//! gadfly runs itself: the same tree, built afresh, run with another seed
//! (fresh inputs, other memory contents), the harness timing it again
//! against the initial kernel. A scenario that turns incorrect or a run
//! that fails rejects the gain at once; a speedup that does not reproduce
//! rejects it only if a third measurement misses the bar too (noise on a
//! shared machine is not a verdict;
//! [`crate::moments::recheck::timing_disagreements_twice`]). A rejected
//! gain's evaluation then fails the predicate, with the reason.

use anyhow::anyhow;

use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::events::Event;
use crate::harness;
use crate::moments::recheck::{disagreements, timing_disagreements_twice, verdict_disagreements};

use super::Supervisor;

/// Re-checks the evaluation `eval` (stored under `eval.id`); returns the
/// evaluation as it now stands (failing, when the gain was rejected).
pub(super) async fn recheck(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    eval: &Evaluation,
) -> anyhow::Result<Evaluation> {
    let id = eval.id.ok_or_else(|| anyhow!("recheck of an unsaved evaluation"))?;
    // One re-evaluation of the tree with a fresh seed, stored as gadfly's
    // own measurement (not a tree the workspace presents: its outcome
    // reaches the verdict through `eval`'s own row, below).
    let remeasure = |seed: u64| async move {
        let recheck = Event::GainRecheck { evaluation_id: id, tree: eval.tree.clone(), seed };
        sup.record_event(campaign_id, None, None, recheck).await?;
        own_run(sup, campaign_id, spec, &eval.tree, seed, "recheck").await
    };
    let seed = fresh_seed(&[]);
    let (second, mut second_id) = remeasure(seed).await?;
    let mut problems = disagreements(eval, &second, seed);
    if !problems.is_empty() && verdict_disagreements(eval, &second, seed).is_empty() {
        // Timing only: a shared machine's noise is not a verdict. Time it
        // a third time; only scenarios below the bar twice reject the gain.
        let seed3 = fresh_seed(&[seed]);
        let (third, third_id) = remeasure(seed3).await?;
        problems = verdict_disagreements(eval, &third, seed3);
        problems.extend(timing_disagreements_twice(eval, &second, &third));
        second_id = third_id;
    }
    if problems.is_empty() {
        let confirmed = Event::GainConfirmed { evaluation_id: id, recheck_id: second_id, seed };
        sup.record_event(campaign_id, None, None, confirmed).await?;
        return Ok(eval.clone());
    }
    let mut rejected = eval.clone();
    rejected.verdict.failures.push(format!("{} {}", crate::evaluation::GAIN_NOT_CONFIRMED, problems.join("; ")));
    rejected.verdict.holds = false;
    sup.store().replace_evaluation_body(id, &rejected).await?;
    let rejected_event = Event::GainRejected { evaluation_id: id, recheck_id: second_id, seed, reasons: problems };
    sup.record_event(campaign_id, None, None, rejected_event).await?;
    Ok(rejected)
}

/// A figure within noise of its bar is not decided by a coin flip: when the
/// verdict fails only within noise ([`crate::predicate::Verdict::only_within_noise`]),
/// gadfly evaluates the same tree again with fresh seeds, up to
/// `[predicate] remeasure` times, pools every run's figures
/// ([`crate::predicate::pool`]) and judges them with the narrower interval,
/// stopping as soon as the bars are met or missed beyond noise (or anything
/// else fails). The pooled verdict replaces `eval`'s own; each run is kept
/// as gadfly's own measurement (`TREE+remeasure-SEED`).
pub(super) async fn remeasure_within_noise(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    eval: Evaluation,
) -> anyhow::Result<Evaluation> {
    if !eval.verdict.only_within_noise() || spec.predicate.remeasure == 0 {
        return Ok(eval);
    }
    let id = eval.id.ok_or_else(|| anyhow!("re-measuring an unsaved evaluation"))?;
    let measured = |e: &Evaluation| -> Vec<crate::results::ScenarioResult> {
        e.verdict.scenarios.iter().filter_map(|s| s.measured.clone()).collect()
    };
    let mut runs = vec![measured(&eval)];
    let (mut seeds, mut recheck_ids) = (Vec::new(), Vec::new());
    let mut now = eval.clone();
    for _ in 0..spec.predicate.remeasure {
        let seed = fresh_seed(&seeds);
        seeds.push(seed);
        let (again, again_id) = own_run(sup, campaign_id, spec, &eval.tree, seed, "remeasure").await?;
        recheck_ids.push(again_id);
        runs.push(measured(&again));
        // The evaluation's own failures (build, run, constraints) of every
        // run stand; the bars are judged again on the pooled figures.
        let failures: Vec<String> = [&eval, &again]
            .iter()
            .flat_map(|e| e.verdict.failures.iter())
            .filter(|f| !crate::predicate::is_bar_failure(f))
            .cloned()
            .collect();
        let refs: Vec<&[crate::results::ScenarioResult]> = runs.iter().map(Vec::as_slice).collect();
        let pooled = crate::predicate::pool(&refs);
        now.verdict = crate::predicate::judge_runs(
            &spec.predicate,
            &spec.harness.scenarios,
            &pooled,
            failures,
            runs.len() as u32,
        );
        if !now.verdict.only_within_noise() {
            break;
        }
    }
    sup.store().replace_evaluation_body(id, &now).await?;
    let event = Event::EvaluationRemeasured {
        evaluation_id: id,
        recheck_ids,
        seeds,
        runs: now.verdict.runs,
        holds: now.verdict.holds,
        decided: !now.verdict.only_within_noise(),
    };
    sup.record_event(campaign_id, None, None, event).await?;
    Ok(now)
}

/// One more evaluation of `tree` with `seed`, run by gadfly itself (a
/// gain's re-check, a figure within noise measured again, a calibration
/// run) and stored as its own measurement under `TREE+LABEL-SEED`, never as
/// a tree the workspace presents. Returns it with its id.
pub(super) async fn own_run(
    sup: &Supervisor,
    campaign_id: &str,
    spec: &CampaignSpec,
    tree: &str,
    seed: u64,
    label: &str,
) -> anyhow::Result<(Evaluation, i64)> {
    let (row, _) = sup.campaign(campaign_id).await.map_err(|e| anyhow!("{e}"))?;
    let protected = row.protected()?;
    let pristine = sup.pristine(campaign_id).await?;
    let store = crate::snapshot::store_path(sup.data_dir(), campaign_id);
    let inputs =
        harness::Inputs { spec, campaign_id, tree, protected: &protected, pristine: &pristine, seed, store: &store };
    let mut e = crate::jobs::evaluate(sup.store(), &inputs, &sup.data_dir().join("evaluations")).await?;
    e.tree = format!("{tree}+{label}-{seed}");
    e.origin = crate::evaluation::Origin::Recheck;
    let id = sup.store().insert_evaluation(campaign_id, &e).await?;
    Ok((e, id))
}

/// A seed for a re-evaluation: never the harness's default, never one of
/// `used`.
pub(super) fn fresh_seed(used: &[u64]) -> u64 {
    loop {
        let s = rand::random::<u32>() as u64;
        if s != harness::DEFAULT_SEED && !used.contains(&s) {
            return s;
        }
    }
}
