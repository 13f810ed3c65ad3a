//! `gadfly calibrate`: the harness measures the initial kernel against
//! itself, several times with fresh seeds, before it judges the agent
//! ([`crate::calibration`]). The tree calibrated is the one a campaign
//! calibrated first (its initial kernel), else the workspace as it stands
//! (at `campaign create`, the initial kernel). Each run is kept as gadfly's
//! own measurement (`TREE+calibrate-SEED`); the result is the event
//! `campaign.calibrated`, whose per-scenario noise every later evaluation
//! of the campaign is judged with.

use anyhow::Context;

use crate::calibration::Calibration;
use crate::events::{kind, Event};
use crate::harness;

use super::{Result, Supervisor};

pub use crate::calibration::MAX_RUNS;

impl Supervisor {
    /// Calibrates the campaign's harness with `runs` evaluations (2 to
    /// [`MAX_RUNS`]) and records the result.
    pub async fn calibrate(&self, campaign_id: &str, runs: u32) -> Result<Calibration> {
        let (_row, spec) = self.campaign_with_workspace(campaign_id).await?;
        let runs = runs.clamp(2, MAX_RUNS);
        let lock = self.eval_lock(campaign_id);
        let mut last = lock.lock().await;
        let store = crate::snapshot::store_path(&self.inner.data_dir, campaign_id);
        let tree = match self.latest_calibration(campaign_id).await? {
            Some(earlier) => earlier.tree,
            None => {
                let index = self.inner.indexes.join(format!("{campaign_id}.index"));
                let (tree, remember) = harness::snapshot_tree(&spec, &store, &index, last.clone())
                    .await
                    .context("taking a snapshot of the workspace")?;
                *last = remember;
                tree
            }
        };
        // The runs are judged with the spec's own floor, not an earlier
        // calibration's (it is what is being measured again).
        let mut plain = spec.clone();
        plain.predicate.calibrated.clear();
        let (mut measured, mut failures, mut seeds) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let seed = super::recheck::fresh_seed(&seeds);
            seeds.push(seed);
            let (e, _) = super::recheck::own_run(self, campaign_id, &plain, &tree, seed, "calibrate").await?;
            measured.push(e.verdict.scenarios.iter().filter_map(|s| s.measured.clone()).collect::<Vec<_>>());
            failures.push(
                e.verdict.failures.iter().filter(|f| !crate::predicate::is_bar_failure(f)).cloned().collect::<Vec<_>>(),
            );
        }
        let cal = crate::calibration::summarize(&spec.predicate, &spec.harness.scenarios, &tree, &measured, &failures);
        self.record_event(campaign_id, None, None, Event::Calibrated(cal.clone())).await?;
        tracing::info!(campaign = %campaign_id, runs, fair = cal.fair(), "harness calibrated");
        Ok(cal)
    }

    /// The campaign's latest calibration, if any.
    pub(super) async fn latest_calibration(&self, campaign_id: &str) -> anyhow::Result<Option<Calibration>> {
        let rows = self.inner.store.recent_events(campaign_id, kind::CAMPAIGN_CALIBRATED, 1).await?;
        Ok(rows.first().and_then(|r| serde_json::from_value(r.payload.clone()).ok()))
    }

    /// `spec` with the campaign's latest calibration in its predicate
    /// (the noise each scenario showed from run to run).
    pub(super) async fn with_calibration(
        &self,
        campaign_id: &str,
        spec: &crate::campaign::CampaignSpec,
    ) -> anyhow::Result<Option<crate::campaign::CampaignSpec>> {
        Ok(self.latest_calibration(campaign_id).await?.map(|c| {
            let mut s = spec.clone();
            s.predicate.calibrated = c.noise_by_scenario();
            s
        }))
    }
}
