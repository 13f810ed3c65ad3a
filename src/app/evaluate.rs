//! Evaluations: one at a time per campaign (the eval locks), the last
//! snapshot and the pristine files cached, an unchanged tree answered from
//! the store, the rest run here or by a worker.

use std::sync::Arc;

use anyhow::{anyhow, Context};

use crate::campaign::CampaignSpec;
use crate::evaluation::Evaluation;
use crate::events::Event;
use crate::harness;
use crate::store::CampaignRow;

use super::{Result, Supervisor};

impl Supervisor {
    /// The campaign's pristine protected files (they never change).
    pub async fn pristine(&self, campaign_id: &str) -> anyhow::Result<Arc<Vec<crate::snapshot::PristineFile>>> {
        if let Some(hit) = self.inner.pristine.lock().expect("pristine cache poisoned").get(campaign_id) {
            return Ok(hit.clone());
        }
        let files = Arc::new(self.inner.store.list_pristine(campaign_id).await?);
        self.inner.pristine.lock().expect("pristine cache poisoned").insert(campaign_id.to_string(), files.clone());
        Ok(files)
    }

    /// Evaluates the campaign's workspace as it is now. An unchanged tree
    /// is answered from the store unless `force` is set.
    pub async fn evaluate(&self, campaign_id: &str, force: bool) -> Result<Evaluation> {
        self.evaluate_holding(campaign_id, force, &[]).await
    }

    /// [`Self::evaluate`], where the moments named in `held` ask no
    /// question of their own (a stop attempt asks it).
    pub(super) async fn evaluate_holding(&self, campaign_id: &str, force: bool, held: &[String]) -> Result<Evaluation> {
        let (row, spec) = self.campaign_with_workspace(campaign_id).await?;
        let lock = self.eval_lock(campaign_id);
        let mut last = lock.lock().await;
        let index = self.inner.indexes.join(format!("{campaign_id}.index"));
        let store = crate::snapshot::store_path(&self.inner.data_dir, campaign_id);
        let (tree, remember) = harness::snapshot_tree(&spec, &store, &index, last.clone())
            .await
            .context("taking a snapshot of the workspace")?;
        *last = remember;
        self.evaluate_tree_locked(&row, &spec, &tree, force, Some(held)).await
    }

    /// Evaluates a given tree of the workspace's repository (a beam
    /// candidate's commit), through the same cache and records. Moments
    /// are not raised for it: it is not the candidate the agent presents.
    pub async fn evaluate_tree(&self, campaign_id: &str, tree: &str) -> Result<Evaluation> {
        let (row, spec) = self.campaign_with_workspace(campaign_id).await?;
        let lock = self.eval_lock(campaign_id);
        let _guard = lock.lock().await;
        // The tree is re-made in gadfly's private store from its content
        // (and cut to the candidate), so its id names what is evaluated.
        let store = crate::snapshot::store_path(&self.inner.data_dir, campaign_id);
        let (ws, t, candidate) = (spec.workspace.clone(), tree.to_string(), spec.harness.candidate.clone());
        let tree = tokio::task::spawn_blocking(move || -> anyhow::Result<String> {
            let imported = crate::snapshot::import_tree(&store, &ws, &t)?;
            if candidate.is_empty() {
                Ok(imported)
            } else {
                crate::snapshot::candidate_tree(&store, &imported, &candidate)
            }
        })
        .await
        .map_err(|e| anyhow!(e))?
        .with_context(|| format!("bringing tree {tree} into gadfly's snapshot store"))?;
        self.evaluate_tree_locked(&row, &spec, &tree, false, None).await
    }

    /// What the campaign's running evaluation is doing: its step and the
    /// seconds spent in it; none when no evaluation runs.
    pub fn evaluation_step(&self, campaign_id: &str) -> Option<(String, f64)> {
        let all = self.inner.evaluating.lock().unwrap_or_else(|e| e.into_inner());
        all.get(campaign_id).map(|s| s.now().unwrap_or_else(|| ("starting".to_string(), 0.0)))
    }

    pub(super) fn eval_lock(&self, campaign_id: &str) -> Arc<tokio::sync::Mutex<Option<harness::LastSnapshot>>> {
        let mut locks = self.inner.eval_locks.lock().expect("evaluation lock table poisoned");
        locks.entry(campaign_id.to_string()).or_default().clone()
    }

    /// Runs in an `evaluation` span (campaign, tree, seed, and where: here
    /// or on a worker), inside the hook call's span when a stop asked for it.
    #[tracing::instrument(name = "evaluation", skip_all, fields(
        campaign = %row.id,
        tree = %tree,
        seed = tracing::field::Empty,
        r#where = %(if spec.harness.tags.is_empty() { "local" } else { "worker" }),
    ))]
    async fn evaluate_tree_locked(
        &self,
        row: &CampaignRow,
        spec: &CampaignSpec,
        tree: &str,
        force: bool,
        moments: Option<&[String]>,
    ) -> Result<Evaluation> {
        let campaign_id = row.id.as_str();
        // Judged with the noise the harness's calibration showed, if any.
        let calibrated = self.with_calibration(campaign_id, spec).await?;
        let spec = calibrated.as_ref().unwrap_or(spec);
        // The workspace's own evaluations raise moments; a beam candidate's do not.
        let workspace = moments.is_some();
        if !force {
            if let Some(mut e) = self.inner.store.find_evaluation(campaign_id, tree).await? {
                e.cached = true;
                if let (true, Some(id)) = (workspace, e.id) {
                    // The workspace presents this tree again: its verdict is the campaign's latest.
                    self.inner.store.present_evaluation(campaign_id, id).await?;
                    e.origin = crate::evaluation::Origin::Workspace;
                }
                return Ok(e);
            }
        }
        let protected = row.protected()?;
        let pristine = self.pristine(campaign_id).await?;
        self.record_event(campaign_id, None, None, Event::EvaluationStarted { tree: tree.to_string() }).await?;
        // A campaign with [harness] tags is evaluated by a worker (src/jobs.rs).
        let store = crate::snapshot::store_path(&self.inner.data_dir, campaign_id);
        // A forced re-run replaces nothing: it is stored under its own tree key suffix.
        let key = if force {
            format!("{tree}+{}", self.inner.store.count_evaluations(campaign_id).await?)
        } else {
            tree.to_string()
        };
        // Every evaluation's inputs come from a seed the agent cannot know.
        let seed = harness::secret_seed(&self.inner.endpoint.1, campaign_id, &key);
        tracing::Span::current().record("seed", seed);
        let inputs = harness::Inputs {
            spec,
            campaign_id,
            tree,
            protected: &protected,
            pristine: &pristine,
            seed,
            store: &store,
        };
        let board = Evaluating::new(self, campaign_id);
        let work = async {
            crate::progress::set("preparing the candidate");
            crate::jobs::evaluate(&self.inner.store, &inputs, &self.inner.scratch).await
        };
        let mut eval = crate::progress::scoped(board.step.clone(), work).await?;
        eval.origin = if workspace { crate::evaluation::Origin::Workspace } else { crate::evaluation::Origin::Beam };
        if force {
            // A forced re-run replaces nothing: it is stored under its own key.
            // (Other keys stand: a failed worker job keeps `TREE+job-N`, so
            // the next stop on the tree queues a new job.)
            eval.tree = key;
        }
        let id = self.inner.store.insert_evaluation(campaign_id, &eval).await?;
        eval.id = Some(id);
        self.record_event(campaign_id, None, None, Event::evaluated(id, &eval)).await?;
        // A figure within noise of its bar: measured again before anything
        // reads the verdict (a beam candidate's too).
        let again = async {
            crate::progress::set("measuring again (a figure within noise of its bar)");
            super::recheck::remeasure_within_noise(self, campaign_id, spec, eval).await
        };
        eval = crate::progress::scoped(board.step.clone(), again).await?;
        drop(board);
        // A new tree of the workspace is fresh evidence: the questions it answers.
        if workspace {
            if let Err(e) = self.answers_after_evaluation(campaign_id, &eval).await {
                tracing::warn!(campaign = %campaign_id, error = %e, "the questions an evaluation answers");
            }
        }
        tracing::info!(campaign = %campaign_id, tree = %eval.tree, holds = eval.verdict.holds, ms = eval.duration_ms, "evaluated");
        if let Some(held) = moments {
            match super::moments::after_evaluation(self, campaign_id, spec, &eval, held).await {
                Ok(now) => eval = now,
                Err(e) => tracing::warn!(error = %e, "moment detection after an evaluation"),
            }
        }
        Ok(eval)
    }
}

/// The step board of a campaign's evaluation, shown by
/// `GET /campaigns/{id}/evaluation-progress` from its start until it is
/// dropped: when the evaluation ends, fails, or its task is cancelled.
struct Evaluating {
    inner: Arc<super::Inner>,
    campaign: String,
    step: crate::progress::Step,
}

impl Evaluating {
    fn new(sup: &Supervisor, campaign_id: &str) -> Evaluating {
        let step = crate::progress::Step::default();
        let mut all = sup.inner.evaluating.lock().unwrap_or_else(|e| e.into_inner());
        all.insert(campaign_id.to_string(), step.clone());
        Evaluating { inner: sup.inner.clone(), campaign: campaign_id.to_string(), step }
    }
}

impl Drop for Evaluating {
    fn drop(&mut self) {
        let mut all = self.inner.evaluating.lock().unwrap_or_else(|e| e.into_inner());
        if all.get(&self.campaign).is_some_and(|s| s.same(&self.step)) {
            all.remove(&self.campaign);
        }
    }
}
