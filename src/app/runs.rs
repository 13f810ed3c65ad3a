//! Agent runs this daemon supervises: the run registry, campaign leases and
//! the lease keeper (which takes over the runs of a daemon that stopped),
//! transcript followers, and `stop_everything` at shutdown; a spawned
//! agent's run started, taken over and ended, each owned by one task (its
//! loops are `run_loop.rs`).

use std::path::PathBuf;

use anyhow::{anyhow, bail};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::run_loop::{claude_loop, turn_loop, Outcome, RunCtx};
use super::Supervisor;
use crate::agent::{AgentKind, AgentSpec};
use crate::campaign::CampaignSpec;
use crate::events::Event;

/// How long a campaign's lease lasts unless renewed: `$GADFLY_LEASE_SECONDS`,
/// else 15 s. A daemon renews its leases every third of it; another takes a
/// campaign over once its lease has expired.
pub(super) fn lease_ttl_from_env() -> std::time::Duration {
    let s = std::env::var("GADFLY_LEASE_SECONDS").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(15.0);
    std::time::Duration::from_secs_f64(s.clamp(0.5, 3600.0))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl Supervisor {
    /// True once the daemon is shutting down: a run stopped now is
    /// suspended (left to the next daemon to resume), not ended.
    pub fn shutting_down(&self) -> bool {
        self.inner.shutting_down.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many runs this daemon supervises now.
    pub fn local_runs(&self) -> usize {
        self.inner.runs.lock().expect("runs lock poisoned").len()
    }

    /// This daemon's lease owner id.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Takes the campaign's lease for this daemon (or renews it); false
    /// while another live daemon holds it.
    pub async fn acquire_lease(&self, campaign_id: &str) -> anyhow::Result<bool> {
        let now = now_ms();
        let take_any = self.inner.store.backend == crate::store::Backend::Sqlite;
        self.inner
            .store
            .acquire_lease(campaign_id, &self.inner.owner, now, now + self.inner.lease_ttl.as_millis() as i64, take_any)
            .await
    }

    pub async fn release_lease(&self, campaign_id: &str) {
        if let Err(e) = self.inner.store.release_lease(campaign_id, &self.inner.owner).await {
            tracing::warn!(error = %e, campaign = %campaign_id, "releasing a lease");
        }
    }

    /// Renews the leases of the runs this daemon runs and takes over the
    /// runs whose daemon stopped renewing (or, on SQLite, any left by the
    /// daemon before this one), every third of the lease time, until
    /// `stop`.
    pub fn spawn_lease_keeper(&self, stop: CancellationToken) {
        let sup = self.clone();
        self.spawn_task("lease-keeper", async move {
            let period = sup.inner.lease_ttl / 3;
            loop {
                if let Err(e) = sup.keep_leases().await {
                    tracing::warn!(error = %e, "keeping leases");
                }
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(period) => {}
                }
            }
        });
    }

    async fn keep_leases(&self) -> anyhow::Result<()> {
        let mine: Vec<String> = self.inner.runs.lock().expect("runs lock poisoned").keys().cloned().collect();
        for campaign in &mine {
            if !self.acquire_lease(campaign).await? {
                // Another daemon took it: this one's lease had expired (a
                // long pause); its run goes on there, so stop ours.
                tracing::warn!(campaign = %campaign, "lost the campaign's lease to another daemon; stopping the local run");
                self.stop_run(campaign);
            }
        }
        for run in self.inner.store.running_runs().await? {
            if mine.contains(&run.campaign_id)
                || self.inner.runs.lock().expect("runs lock poisoned").contains_key(&run.campaign_id)
            {
                continue;
            }
            if !self.acquire_lease(&run.campaign_id).await? {
                continue;
            }
            let from = run.owner.clone().unwrap_or_default();
            tracing::warn!(campaign = %run.campaign_id, run = run.id, from = %from, "taking over a run whose daemon stopped");
            if let Err(e) = self.resume_run(&run).await {
                tracing::warn!(error = %e, campaign = %run.campaign_id, run = run.id, "resuming a run");
                self.release_lease(&run.campaign_id).await;
            }
        }
        Ok(())
    }

    /// Marks a run as going for the campaign; false when one already is.
    /// A run registered once the daemon is shutting down (after
    /// [`Self::stop_everything`]) has its token cancelled at once: it is
    /// suspended, for the next daemon to resume.
    pub fn register_run(&self, campaign_id: &str, token: CancellationToken) -> bool {
        let mut runs = self.inner.runs.lock().expect("runs lock poisoned");
        if runs.contains_key(campaign_id) {
            return false;
        }
        if self.shutting_down() {
            token.cancel();
        }
        runs.insert(campaign_id.to_string(), token);
        true
    }

    pub fn unregister_run(&self, campaign_id: &str) {
        self.inner.runs.lock().expect("runs lock poisoned").remove(campaign_id);
    }

    /// Stops the campaign's running agent (its whole process group); false when none runs.
    pub fn stop_run(&self, campaign_id: &str) -> bool {
        match self.inner.runs.lock().expect("runs lock poisoned").get(campaign_id) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Stops every run and transcript follower (daemon shutdown).
    pub fn stop_everything(&self) {
        self.inner.shutting_down.store(true, std::sync::atomic::Ordering::SeqCst);
        for t in self.inner.runs.lock().expect("runs lock poisoned").values() {
            t.cancel();
        }
        for t in self.inner.followers.lock().expect("followers lock poisoned").values() {
            t.cancel();
        }
    }

    /// Starts following an attached session's transcript once.
    pub(super) fn follow_transcript(&self, campaign_id: &str, session: &str, payload: &Value) {
        let Some(path) = payload.get("transcript_path").and_then(Value::as_str).filter(|p| !p.is_empty()) else {
            return;
        };
        let path = PathBuf::from(path);
        if !path.is_absolute() || self.is_daemons_own(&path) {
            return;
        }
        let key = (campaign_id.to_string(), session.to_string());
        let mut followers = self.inner.followers.lock().expect("followers lock poisoned");
        if followers.contains_key(&key) {
            return;
        }
        let token = CancellationToken::new();
        if self.shutting_down() {
            // After stop_everything: one read, then the follower stops.
            token.cancel();
        }
        followers.insert(key, token.clone());
        super::transcript::spawn_follower(self.clone(), campaign_id.to_string(), session.to_string(), path, token);
    }

    /// Whether `path`, named by a hook payload (the agent's word), lies in
    /// the daemon's data dir (its token, key, database, snapshot stores):
    /// the daemon never reads such a file on the agent's behalf.
    pub(super) fn is_daemons_own(&self, path: &std::path::Path) -> bool {
        let data = std::fs::canonicalize(&self.inner.data_dir).unwrap_or_else(|_| self.inner.data_dir.clone());
        let seen = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let own = seen.starts_with(&data) || path.starts_with(&self.inner.data_dir);
        if own {
            tracing::warn!(path = %path.display(), "a hook named a file of the daemon's data dir as a transcript: not read");
        }
        own
    }

    pub(super) fn unfollow_transcript(&self, campaign_id: &str, session: &str) {
        let key = (campaign_id.to_string(), session.to_string());
        if let Some(t) = self.inner.followers.lock().expect("followers lock poisoned").remove(&key) {
            t.cancel();
        }
    }
}

impl Supervisor {
    /// Starts a run of `kind` for the campaign; returns the run's id. The
    /// daemon takes the campaign's lease first: with several daemons on one
    /// database, one runs a campaign's agent at a time.
    pub async fn start_run(&self, campaign_id: &str, kind: AgentKind) -> anyhow::Result<i64> {
        self.start_run_with(campaign_id, kind, false).await
    }

    /// [`Self::start_run`]; with `[redteam] before_start` the agent starts
    /// only once the red-team battery held (see `redteam.rs`), unless
    /// `force`; a campaign whose latest calibration is not fair does not
    /// start, unless `force` or `[calibration] accept_bias`.
    pub async fn start_run_with(&self, campaign_id: &str, kind: AgentKind, force: bool) -> anyhow::Result<i64> {
        let sup = self;
        let (_row, spec) = sup.campaign(campaign_id).await.map_err(|e| anyhow!("{e}"))?;
        if !force && !spec.calibration.accept_bias {
            if let Some(cal) = sup.latest_calibration(campaign_id).await?.filter(|c| !c.fair()) {
                let what: Vec<String> = cal
                    .biased()
                    .iter()
                    .map(|s| format!("{} at {:.3}x", s.scenario, s.bias))
                    .chain(cal.problems.iter().take(2).cloned())
                    .collect();
                bail!(
                    "the harness is not fair: its latest calibration measured the initial kernel against itself \
                     beyond noise ({}); fix the harness and run `gadfly calibrate {campaign_id}` again, accept it in \
                     the spec ([calibration] accept_bias = true), or start anyway with `gadfly run --force`",
                    what.join("; ")
                );
            }
        }
        let mut agent = AgentSpec::from_campaign(&spec)?;
        let sandbox = agent.resolve_sandbox(&spec.workspace, sup.data_dir(), crate::harness::bwrap_works())?;
        let token = CancellationToken::new();
        if !sup.register_run(campaign_id, token.clone()) {
            bail!("campaign {campaign_id} already has an agent running; stop it first");
        }
        match sup.acquire_lease(campaign_id).await {
            Ok(true) => {}
            Ok(false) => {
                sup.unregister_run(campaign_id);
                let owner = sup.store().lease(campaign_id).await.ok().flatten().map(|l| l.0).unwrap_or_default();
                bail!("campaign {campaign_id} is run by another gadfly daemon ({owner}); start or stop its run there");
            }
            Err(e) => {
                sup.unregister_run(campaign_id);
                return Err(e);
            }
        }
        let run_id = match sup.store().insert_run(campaign_id, kind.as_str()).await {
            Ok(id) => id,
            Err(e) => {
                sup.unregister_run(campaign_id);
                sup.release_lease(campaign_id).await;
                return Err(e);
            }
        };
        sup.store().set_run_owner(run_id, sup.owner()).await?;
        if !agent.sandboxed() {
            tracing::warn!(campaign = %campaign_id, run_id, "the agent runs unsandboxed: {sandbox}");
        }
        let started =
            Event::RunStarted { run_id, agent: kind.as_str().to_string(), daemon: sup.owner().to_string(), sandbox };
        sup.record_event(campaign_id, None, None, started).await?;
        if spec.redteam.before_start && !force {
            super::redteam::launch_after_battery(sup, campaign_id, spec, agent, kind, run_id, token);
        } else {
            launch(sup, campaign_id, spec, agent, kind, run_id, None, token);
        }
        Ok(run_id)
    }

    /// Takes over a run whose daemon stopped (its lease expired; this daemon
    /// holds the lease now): the agent is started again in the same session
    /// (`--resume`), told that its previous process stopped, and supervised
    /// to the end here.
    pub async fn resume_run(&self, run: &crate::store::RunRow) -> anyhow::Result<()> {
        let sup = self;
        let kind = AgentKind::parse(&run.agent)
            .ok_or_else(|| anyhow!("run {} has an unknown agent `{}`", run.id, run.agent))?;
        let (_row, spec) = sup.campaign(&run.campaign_id).await.map_err(|e| anyhow!("{e}"))?;
        let mut agent = AgentSpec::from_campaign(&spec)?;
        // The same rule as at the start (the run's start recorded which).
        agent.resolve_sandbox(&spec.workspace, sup.data_dir(), crate::harness::bwrap_works())?;
        let token = CancellationToken::new();
        if !sup.register_run(&run.campaign_id, token.clone()) {
            return Ok(());
        }
        sup.store().set_run_owner(run.id, sup.owner()).await?;
        let resumed = Event::RunResumed {
            run_id: run.id,
            agent: run.agent.clone(),
            session_id: run.session_id.clone(),
            from_daemon: run.owner.clone(),
            daemon: sup.owner().to_string(),
        };
        sup.record_event(&run.campaign_id, run.session_id.as_deref(), None, resumed).await?;
        launch(sup, &run.campaign_id, spec, agent, kind, run.id, run.session_id.clone(), token);
        Ok(())
    }
}

/// Supervises run `run_id` in the background until it ends, then records
/// its outcome and gives the campaign's lease back.
#[allow(clippy::too_many_arguments)]
pub(super) fn launch(
    sup: &Supervisor,
    campaign_id: &str,
    spec: CampaignSpec,
    agent: AgentSpec,
    kind: AgentKind,
    run_id: i64,
    resume_session: Option<String>,
    token: CancellationToken,
) {
    let sup2 = sup.clone();
    let campaign = campaign_id.to_string();
    let task = async move {
        let ctx = RunCtx { sup: sup2.clone(), campaign: campaign.clone(), spec, agent, run_id, token, resume_session };
        let outcome = match kind {
            AgentKind::ClaudeCode => claude_loop(&ctx).await,
            AgentKind::Codex | AgentKind::Command => turn_loop(&ctx, kind).await,
        }
        .unwrap_or_else(|e| Outcome::Failed(format!("{e:#}")));
        if outcome == Outcome::Stopped && sup2.shutting_down() {
            // The daemon is stopping, not the campaign: the run stays
            // `running` and the next daemon (this one restarted, or another
            // on the same database) resumes it.
            tracing::info!(campaign = %campaign, run = run_id, "agent run suspended for the daemon's shutdown");
            let why = "the daemon shut down; the next one resumes the run".to_string();
            let _ = sup2.record_event(&campaign, None, None, Event::RunSuspended { run_id, why }).await;
            sup2.unregister_run(&campaign);
            sup2.release_lease(&campaign).await;
            return;
        }
        let (status, text) = outcome.describe();
        tracing::info!(campaign = %campaign, run = run_id, outcome = status, "agent run ended");
        let _ = sup2.store().end_run(run_id, "ended", status).await;
        let ended = Event::RunEnded { run_id, outcome: status.to_string(), detail: text };
        let _ = sup2.record_event(&campaign, None, None, ended).await;
        sup2.unregister_run(&campaign);
        sup2.release_lease(&campaign).await;
    };
    // Every log line of the run (its turn ends' hook calls included)
    // carries the campaign, the run and the agent kind, under the task's span.
    let campaign = campaign_id.to_string();
    sup.spawn_task(format!("run {campaign_id}"), async move {
        let span = tracing::info_span!("run", campaign = %campaign, run_id, agent = %kind.as_str());
        tracing::Instrument::instrument(task, span).await
    });
}
