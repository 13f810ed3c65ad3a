//! `gadfly worker`: evaluates queued jobs on this host. It connects to the
//! daemon's database (the same URL), claims the oldest job whose tags it
//! has, unpacks the tree into a fresh folder under its scratch folder,
//! runs the harness exactly as the daemon would (gadfly's pristine
//! protected files restored, the same checks), through a launch template
//! when given (Slurm's srun, a Kubernetes Job), and writes the evaluation
//! back. While the harness runs it renews the job's lease; a worker killed
//! outright lets the lease run out and the job goes to another worker.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tokio_util::sync::CancellationToken;

use crate::evaluation::Evaluation;
use crate::harness::{self, Inputs};
use crate::snapshot::{self, Sandbox};
use crate::store::{ClaimedJob, Store};

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub database_url: String,
    pub tags: BTreeMap<String, String>,
    /// A template each harness command runs through (`{command}`, `{workdir}`).
    pub launch: Option<String>,
    /// Evaluate one job, then exit.
    pub once: bool,
    /// Exit after this long with no job (none: wait for ever).
    pub idle_exit: Option<Duration>,
    pub scratch: PathBuf,
    pub name: String,
    pub lease: Duration,
    pub poll: Duration,
}

/// A name for this worker that no other process shares: host, pid, random.
pub fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".into());
    format!("{host}-{}-{:04x}", std::process::id(), rand::random::<u16>())
}

/// Runs the worker until `shutdown` (SIGTERM, SIGINT), `--once` after its
/// job, or `--idle-exit-s` with nothing to do. A job in progress at
/// shutdown is handed back to the queue.
pub async fn run(config: WorkerConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    if let Some(t) = &config.launch {
        if !t.contains("{command}") {
            bail!("the launch template must contain {{command}} (the harness command, one shell word for `sh -c`)");
        }
    }
    if config.lease < Duration::from_secs(1) {
        bail!("the lease must be at least 1 s");
    }
    std::fs::create_dir_all(&config.scratch)
        .with_context(|| format!("creating the scratch folder {}", config.scratch.display()))?;
    let store = Store::connect(&config.database_url).await?;
    tracing::info!(worker = %config.name, tags = ?config.tags, launch = ?config.launch, "worker started");
    let mut idle_since = Instant::now();
    while !shutdown.is_cancelled() {
        if let Err(e) = store.requeue_expired_jobs().await {
            tracing::warn!(error = %format!("{e:#}"), "sweeping expired job leases");
        }
        let job = match store.claim_job(&config.name, &config.tags, config.lease).await {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "claiming a job");
                None
            }
        };
        match job {
            Some(job) => {
                run_job(&store, &config, job, &shutdown).await;
                if config.once {
                    break;
                }
                idle_since = Instant::now();
            }
            None => {
                if config.idle_exit.is_some_and(|d| idle_since.elapsed() >= d) {
                    tracing::info!("no job for a while: exiting");
                    break;
                }
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tokio::time::sleep(config.poll) => {}
                }
            }
        }
    }
    store.close().await;
    Ok(())
}

/// Evaluates one claimed job and records how it ended.
async fn run_job(store: &Store, config: &WorkerConfig, job: ClaimedJob, shutdown: &CancellationToken) {
    let name = config.name.as_str();
    tracing::info!(job = job.id, campaign = %job.campaign_id, tree = %job.tree, attempt = job.attempts + 1, "job claimed");
    let lost = CancellationToken::new();
    let heartbeat = tokio::spawn(keep_lease(store.clone(), job.clone(), name.to_string(), config.lease, lost.clone()));
    let outcome = tokio::select! {
        r = evaluate(store, config, &job) => Some(r),
        _ = lost.cancelled() => None,
        _ = shutdown.cancelled() => {
            heartbeat.abort();
            match store.release_job(&job, name).await {
                Ok(true) => tracing::info!(job = job.id, "stopping: the job went back to the queue"),
                Ok(false) => {}
                Err(e) => tracing::warn!(job = job.id, error = %format!("{e:#}"), "handing the job back"),
            }
            return;
        }
    };
    heartbeat.abort();
    let recorded = match outcome {
        None => {
            tracing::warn!(
                job = job.id,
                "the job's lease was lost (it went to another worker): its harness was stopped"
            );
            return;
        }
        Some(Ok(eval)) => match serde_json::to_string(&eval) {
            Ok(body) => store.finish_job(&job, name, &body).await.map(|held| {
                tracing::info!(job = job.id, holds = eval.verdict.holds, ms = eval.duration_ms, held, "job evaluated");
            }),
            Err(e) => store.fail_job_attempt(&job, name, &format!("encoding the evaluation: {e}")).await.map(|_| ()),
        },
        Some(Err(e)) => {
            let reason = format!("{e:#}");
            tracing::warn!(job = job.id, %reason, "the worker could not evaluate the job");
            store.fail_job_attempt(&job, name, &format!("worker {name}: {reason}")).await.map(|_| ())
        }
    };
    if let Err(e) = recorded {
        // The lease runs out and the job goes to another worker.
        tracing::warn!(job = job.id, error = %format!("{e:#}"), "recording the job's outcome");
    }
}

/// Renews the lease every third of its length; cancels `lost` when the job
/// is no longer this worker's, or when no renewal succeeded for a whole lease.
async fn keep_lease(store: Store, job: ClaimedJob, name: String, lease: Duration, lost: CancellationToken) {
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(lease / 3).await;
        match store.renew_job_lease(&job, &name, lease).await {
            Ok(true) => renewed = Instant::now(),
            Ok(false) => break,
            Err(e) => {
                tracing::warn!(job = job.id, error = %format!("{e:#}"), "renewing the job's lease");
                if renewed.elapsed() >= lease {
                    break;
                }
            }
        }
    }
    lost.cancel();
}

/// The harness on the job's tree. An error is the worker's (the job is
/// retried); a failing candidate is an evaluation that fails. Runs in an
/// `evaluation` span, as the daemon's own evaluations do.
#[tracing::instrument(name = "evaluation", skip_all, fields(
    campaign = %job.campaign_id,
    tree = %job.tree,
    seed = job.seed,
    r#where = %"worker",
    job = job.id,
))]
async fn evaluate(store: &Store, config: &WorkerConfig, job: &ClaimedJob) -> anyhow::Result<Evaluation> {
    let started = Instant::now();
    let (_, spec, protected) = store
        .get_campaign_spec(&job.campaign_id)
        .await?
        .with_context(|| format!("campaign {} is not in the store", job.campaign_id))?;
    let pristine = store.list_pristine(&job.campaign_id).await?;
    let sandbox = Sandbox::new(&config.scratch)?;
    {
        let (archive, dest) = (job.archive.clone(), sandbox.tree());
        tokio::task::spawn_blocking(move || snapshot::unpack(&archive, &dest)).await??;
    }
    let inputs = Inputs {
        spec: &spec,
        campaign_id: &job.campaign_id,
        tree: &job.tree,
        protected: &protected,
        pristine: &pristine,
        seed: job.seed,
        // The files are unpacked from the job's archive; no store is read.
        store: std::path::Path::new(""),
    };
    harness::evaluate_unpacked(&inputs, &sandbox, config.launch.as_deref(), started).await
}
