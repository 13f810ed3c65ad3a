//! Evaluations that run on other hosts. A campaign whose `[harness]` names
//! tags (`tags = { gpu = "h200" }`) is never evaluated in the daemon: the
//! tree is archived (a tar, at most 64 MiB), queued in the store, and a
//! `gadfly worker` whose tags include the campaign's claims it, runs the
//! same harness code there and writes the evaluation back. The daemon
//! waits for it; a done job's evaluation is used exactly like a local one;
//! a failed job (its workers kept dying or failing to start it) becomes a
//! failing evaluation with the reason, so the gate fails closed.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::campaign::valid_tag;
use crate::evaluation::Evaluation;
use crate::harness::{self, Inputs};
use crate::store::Store;

/// Attempts a job gets before it fails (`GADFLY_JOB_MAX_ATTEMPTS`).
pub const DEFAULT_MAX_ATTEMPTS: i64 = 3;

/// How often a waiting daemon looks at its job.
const POLL: Duration = Duration::from_millis(200);

/// Parses `gpu=h200` (or several, comma-separated: `gpu=h200,zone=a`).
pub fn parse_tags(items: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut tags = BTreeMap::new();
    for item in items.iter().flat_map(|i| i.split(',')).map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item.split_once('=').with_context(|| format!("tag `{item}` is not NAME=VALUE"))?;
        let (k, v) = (k.trim(), v.trim());
        if !valid_tag(k) || !valid_tag(v) {
            anyhow::bail!("tag `{item}`: names and values are letters, digits, `.`, `_` and `-`");
        }
        tags.insert(k.to_string(), v.to_string());
    }
    Ok(tags)
}

/// Evaluates a tree: in the daemon (exported under `scratch`) when the
/// campaign names no tags, else through a worker.
pub async fn evaluate(store: &Store, inputs: &Inputs<'_>, scratch: &Path) -> anyhow::Result<Evaluation> {
    if inputs.spec.harness.tags.is_empty() {
        return harness::evaluate_inputs(inputs, scratch).await;
    }
    evaluate_on_worker(store, inputs).await
}

/// Queues the tree for a worker (or joins a job already queued for it) and
/// waits until a worker has evaluated it or the job failed.
pub async fn evaluate_on_worker(store: &Store, inputs: &Inputs<'_>) -> anyhow::Result<Evaluation> {
    let started = Instant::now();
    if let Some(refused) = harness::refused_candidate(inputs, started).await? {
        return Ok(refused);
    }
    let (campaign_id, tree, seed) = (inputs.campaign_id, inputs.tree, inputs.seed);
    let id = match store.find_open_job(campaign_id, tree, seed).await? {
        Some(id) => id,
        None => {
            // From gadfly's private store, never the workspace's repository.
            let (repo, t) = (inputs.store.to_path_buf(), tree.to_string());
            let archive = tokio::task::spawn_blocking(move || crate::snapshot::archive(&repo, &t))
                .await?
                .context("archiving the tree for an evaluation worker")?;
            let max = std::env::var("GADFLY_JOB_MAX_ATTEMPTS")
                .ok()
                .and_then(|v| v.parse::<i64>().ok())
                .filter(|n| (1..=100).contains(n))
                .unwrap_or(DEFAULT_MAX_ATTEMPTS);
            store.enqueue_job(campaign_id, tree, seed, &inputs.spec.harness.tags, &archive, max).await?
        }
    };
    tracing::info!(campaign = %campaign_id, %tree, job = id, tags = ?inputs.spec.harness.tags, "evaluation queued for a worker");
    crate::progress::set("waiting for a worker");
    let mut last_sweep = Instant::now();
    loop {
        let state = store.job_state(id).await?.with_context(|| format!("evaluation job {id} disappeared"))?;
        match state.status.as_str() {
            "done" => {
                let mut e =
                    state.evaluation.with_context(|| format!("evaluation job {id} is done with no evaluation"))?;
                e.id = None;
                e.cached = false;
                e.tree = tree.to_string();
                tracing::info!(job = id, ms = started.elapsed().as_millis() as u64, "evaluation job done");
                return Ok(e);
            }
            "failed" => {
                let reason = state.error.unwrap_or_else(|| "no reason recorded".into());
                return Ok(failed_job(inputs, id, &reason, started));
            }
            "running" => crate::progress::set("on a worker"),
            _ => {}
        }
        // Workers sweep expired leases too; the daemon does it while it
        // waits, so a job whose only worker died is not left running.
        if last_sweep.elapsed() >= Duration::from_secs(1) {
            store.requeue_expired_jobs().await?;
            last_sweep = Instant::now();
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The evaluation of a job that failed: nothing measured, the reason as a
/// failure. It is stored under its own key (`TREE+job-N`), not the tree,
/// so the next stop on the same tree queues a new job instead of reading
/// this answer from the cache.
fn failed_job(inputs: &Inputs<'_>, id: i64, reason: &str, started: Instant) -> Evaluation {
    let spec = inputs.spec;
    let failure = format!("the evaluation could not be carried out on a worker (job {id}): {reason}");
    let verdict = crate::predicate::judge(&spec.predicate, &spec.harness.scenarios, &[], vec![failure]);
    Evaluation {
        id: None,
        tree: format!("{}+job-{id}", inputs.tree),
        verdict,
        build: None,
        run: None,
        violations: vec![],
        duration_ms: started.elapsed().as_millis() as u64,
        created_at: crate::time::now(),
        cached: false,
        origin: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_worker_tags() {
        let t = parse_tags(&["gpu=h200,zone=eu-1".into(), "arch = sm_90".into()]).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t["arch"], "sm_90");
        assert!(parse_tags(&["gpu".into()]).is_err());
        assert!(parse_tags(&["gpu=h 200".into()]).is_err());
        assert!(parse_tags(&[]).unwrap().is_empty());
    }
}
