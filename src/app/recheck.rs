//! A suspicious gain does not count until it survives a re-evaluation that
//! gadfly runs itself: the same tree, built afresh, run with another seed
//! (fresh inputs, other memory contents), the harness timing it again
//! against the initial kernel. A scenario that turns incorrect, a run that
//! fails, or speedups that do not reproduce
//! ([`crate::moments::recheck::disagreements`]), reject the gain: the
//! tree's evaluation then fails the predicate, with the reason.

use anyhow::anyhow;

use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::events::Event;
use crate::harness;
use crate::moments::recheck::disagreements;

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
    let (row, _) = sup.campaign(campaign_id).await.map_err(|e| anyhow!("{e}"))?;
    let protected = row.protected()?;
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
    // gadfly's second measurement, not a tree the workspace presents: its
    // outcome reaches the verdict through `eval`'s own row (below).
    second.origin = crate::evaluation::Origin::Recheck;
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
