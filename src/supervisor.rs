//! The orchestration: creates campaigns, records every event before it is
//! answered, evaluates candidates (once per tree), decides at stop
//! attempts and carries questions to the agent.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::bank::learn::{self, EntryStats};
use crate::bank::live::LiveBank;
use crate::bank::select;
use crate::campaign::{self, CampaignSpec, Mode};
use crate::evaluation::Evaluation;
use crate::events::{self, kind, DeliveredQuestion, Event, Via};
use crate::gate::{self, Decision, Question};
use crate::harness;
use crate::store::live::Announced;
use crate::store::{CampaignRow, EventRow, NewStopAttempt, Store};

/// Errors a client can act on, kept apart from internal failures.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("campaign {0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type Result<T> = std::result::Result<T, SupervisorError>;

#[derive(Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    scratch: PathBuf,
    /// One evaluation at a time per campaign, so a tree is never evaluated
    /// twice; the lock guards the campaign's last snapshot.
    eval_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<harness::LastSnapshot>>>>>,
    indexes: PathBuf,
    bank: Arc<LiveBank>,
    bus: broadcast::Sender<EventRow>,
    data_dir: PathBuf,
    /// The daemon's own URL and token, handed to the agents it spawns.
    endpoint: (String, String),
    /// Agent runs in progress, by campaign.
    runs: Mutex<HashMap<String, CancellationToken>>,
    /// Transcripts being followed, by (campaign, session).
    followers: Mutex<HashMap<(String, String), CancellationToken>>,
    /// Campaign rows and specs read so far (they do not change).
    campaigns: Mutex<HashMap<String, (CampaignRow, CampaignSpec)>>,
    /// Work for the moment detectors, off the recording path, in order.
    moment_work: tokio::sync::mpsc::UnboundedSender<MomentWork>,
    /// Agent messages classified recently (the stream and the Stop hook
    /// carry the same last words).
    seen_claims: crate::moments::SeenClaims,
    /// Tool calls since each campaign's last evaluation (idle plateau).
    tool_calls: Mutex<HashMap<String, ToolCalls>>,
    /// Campaigns' pristine protected files, read once.
    pristine: Mutex<HashMap<String, Arc<Vec<crate::snapshot::PristineFile>>>>,
    /// This daemon's identity as a lease owner, and how long a lease lasts.
    owner: String,
    lease_ttl: std::time::Duration,
    shutting_down: std::sync::atomic::AtomicBool,
    /// Ids of the events this daemon published lately (the relay of other
    /// daemons' events skips them).
    published: Mutex<RecentIds>,
}

/// The last [`RecentIds::KEEP`] ids pushed, looked up by hash (the relay
/// asks for every event any daemon announces).
#[derive(Default)]
struct RecentIds {
    order: std::collections::VecDeque<i64>,
    set: std::collections::HashSet<i64>,
}

impl RecentIds {
    const KEEP: usize = 8192;

    fn push(&mut self, id: i64) {
        if !self.set.insert(id) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > Self::KEEP {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    fn contains(&self, id: i64) -> bool {
        self.set.contains(&id)
    }
}

/// How long a campaign's lease lasts unless renewed: `$GADFLY_LEASE_SECONDS`,
/// else 15 s. A daemon renews its leases every third of it; another takes a
/// campaign over once its lease has expired.
/// How long an announced event id waits before the relay looks it up
/// (unless this daemon published it meanwhile).
const RELAY_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

fn lease_ttl_from_env() -> std::time::Duration {
    let s = std::env::var("GADFLY_LEASE_SECONDS").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(15.0);
    std::time::Duration::from_secs_f64(s.clamp(0.5, 3600.0))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// What the moment detectors are handed as events are recorded.
enum MomentWork {
    /// An agent message to classify (campaign, session, text, when read).
    Message(String, Option<String>, String, tokio::time::Instant),
    /// A campaign's agent made more tool calls with no new evaluation (how
    /// many is read from its count when this is handled).
    IdleToolCalls(String),
}

/// A campaign's tool calls since its last evaluation, counted once each
/// (a Claude Code tool call arrives both from its stream and its hook).
/// At most one [`MomentWork::IdleToolCalls`] per campaign waits at a time:
/// one per tool call piled up, unbounded, behind each question picked.
#[derive(Default)]
struct ToolCalls {
    count: usize,
    recent_ids: std::collections::VecDeque<String>,
    /// The count the moment detector last saw.
    reported: usize,
    /// Whether a message for this campaign waits in the moment queue.
    queued: bool,
}

/// What the hook client answered on its own for a call it spooled.
#[derive(Debug, Clone)]
pub struct SpooledMeta {
    /// When the hook ran (RFC 3339).
    pub at: String,
    pub outcome: String,
    pub why: String,
}

/// What the hook client prints for the agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HookReply {
    /// The JSON to print on stdout, or none (print nothing).
    pub output: Option<Value>,
    pub decision: Option<String>,
    pub event_id: i64,
}

impl Supervisor {
    pub fn new(store: Store, data_dir: &Path, bank: Arc<LiveBank>, endpoint: (String, String)) -> Supervisor {
        let (bus, _) = broadcast::channel(4096);
        let (moment_work, mut inbox) = tokio::sync::mpsc::unbounded_channel::<MomentWork>();
        let sup = Supervisor {
            inner: Arc::new(Inner {
                store,
                scratch: data_dir.join("evaluations"),
                indexes: data_dir.join("indexes"),
                bank,
                eval_locks: Mutex::new(HashMap::new()),
                bus,
                data_dir: data_dir.to_path_buf(),
                endpoint,
                runs: Mutex::new(HashMap::new()),
                followers: Mutex::new(HashMap::new()),
                campaigns: Mutex::new(HashMap::new()),
                moment_work,
                seen_claims: Default::default(),
                tool_calls: Mutex::new(HashMap::new()),
                pristine: Mutex::new(HashMap::new()),
                owner: format!(
                    "{}:{}:{:08x}",
                    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim(),
                    std::process::id(),
                    rand::random::<u32>()
                ),
                lease_ttl: lease_ttl_from_env(),
                shutting_down: Default::default(),
                published: Mutex::new(RecentIds::default()),
            }),
        };
        // Messages are classified off the recording path, in order.
        let weak = Arc::downgrade(&sup.inner);
        tokio::spawn(async move {
            while let Some(work) = inbox.recv().await {
                let Some(inner) = weak.upgrade() else { break };
                let sup = Supervisor { inner };
                let done = match work {
                    MomentWork::Message(campaign, session, text, at) => {
                        crate::moments::after_message(&sup, &campaign, session.as_deref(), &text, at).await
                    }
                    MomentWork::IdleToolCalls(campaign) => {
                        let seen = {
                            let mut all = sup.inner.tool_calls.lock().expect("tool call counts poisoned");
                            all.get_mut(&campaign).map(|c| {
                                c.queued = false;
                                let from = std::mem::replace(&mut c.reported, c.count);
                                (from, c.count)
                            })
                        };
                        match seen {
                            Some((from, to)) => crate::moments::after_tool_calls(&sup, &campaign, from, to).await,
                            None => Ok(()),
                        }
                    }
                };
                if let Err(e) = done {
                    tracing::warn!(error = %e, "moment detection");
                }
            }
        });
        sup
    }

    pub(crate) fn seen_claims(&self) -> &crate::moments::SeenClaims {
        &self.inner.seen_claims
    }

    /// Counts tool calls between evaluations; hands a long enough run of
    /// them to the idle-plateau detector.
    fn count_tool_calls(&self, campaign_id: &str, kind: &str, payload: &Value) {
        let id = match kind {
            kind::EVALUATION => {
                self.inner.tool_calls.lock().expect("tool call counts poisoned").remove(campaign_id);
                return;
            }
            kind::HOOK_POST_TOOL_USE => payload["payload"]["tool_use_id"].as_str(),
            kind::AGENT_TOOL_CALL => payload["id"].as_str(),
            _ => return,
        };
        let send = {
            let mut all = self.inner.tool_calls.lock().expect("tool call counts poisoned");
            let calls = all.entry(campaign_id.to_string()).or_default();
            if let Some(id) = id.filter(|i| !i.is_empty()) {
                if calls.recent_ids.iter().any(|r| r == id) {
                    return;
                }
                if calls.recent_ids.len() >= 64 {
                    calls.recent_ids.pop_front();
                }
                calls.recent_ids.push_back(id.to_string());
            }
            calls.count += 1;
            !std::mem::replace(&mut calls.queued, true)
        };
        if send {
            let _ = self.inner.moment_work.send(MomentWork::IdleToolCalls(campaign_id.to_string()));
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    /// The daemon's URL and token.
    pub fn endpoint(&self) -> (String, String) {
        self.inner.endpoint.clone()
    }

    /// True once the daemon is shutting down: a run stopped now is
    /// suspended (left to the next daemon to resume), not ended.
    pub fn shutting_down(&self) -> bool {
        self.inner.shutting_down.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many runs this daemon supervises now.
    pub fn local_runs(&self) -> usize {
        self.inner.runs.lock().expect("runs lock poisoned").len()
    }

    /// On PostgreSQL, shows the events other daemons record to this
    /// daemon's live watchers (the console's stream), until `stop`: each
    /// daemon announces what it records (LISTEN/NOTIFY, see
    /// [`crate::store::live`]); a question another daemon queued is looked
    /// for at the next hook call here. Nothing else is done
    /// with them here: the daemon that recorded an event acts on it.
    pub fn spawn_event_relay(&self, stop: CancellationToken) {
        let sup = self.clone();
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let mut listener = match sup.inner.store.listen_events().await {
                    Ok(Some(l)) => l,
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, "listening for other daemons' events; retrying");
                        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                        continue;
                    }
                };
                // Ids announced but not yet known here, with when they came:
                // this daemon's own events reach its watchers directly, and
                // its publish may note the id a moment after the commit's
                // announcement, so an id is looked up only after RELAY_WAIT.
                let mut waiting: std::collections::VecDeque<(i64, tokio::time::Instant)> = Default::default();
                loop {
                    let due = waiting.front().map(|(_, at)| *at + RELAY_WAIT);
                    let n = tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = async { tokio::time::sleep_until(due.unwrap()).await }, if due.is_some() => None,
                        n = listener.recv() => Some(n),
                    };
                    match n {
                        Some(Err(_)) => break,
                        Some(Ok(n)) => {
                            for a in Announced::parse(n.payload()) {
                                match a {
                                    Announced::Event { id, .. } => {
                                        if !sup.was_published(id) {
                                            waiting.push_back((id, tokio::time::Instant::now()));
                                        }
                                    }
                                    Announced::Question { campaign_id, origin } => {
                                        sup.inner.store.question_announced(&campaign_id, origin.as_deref())
                                    }
                                }
                            }
                        }
                        None => {
                            let now = tokio::time::Instant::now();
                            while let Some((id, at)) = waiting.front().copied() {
                                if at + RELAY_WAIT > now {
                                    break;
                                }
                                waiting.pop_front();
                                if sup.was_published(id) {
                                    continue;
                                }
                                if let Ok(Some(ev)) = sup.inner.store.event_by_id(id).await {
                                    let _ = sup.inner.bus.send(ev);
                                }
                            }
                        }
                    }
                }
            }
        });
    }

    fn was_published(&self, id: i64) -> bool {
        self.inner.published.lock().expect("published ids poisoned").contains(id)
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
        tokio::spawn(async move {
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
            if let Err(e) = crate::agent::run::resume(self, &run).await {
                tracing::warn!(error = %e, campaign = %run.campaign_id, run = run.id, "resuming a run");
                self.release_lease(&run.campaign_id).await;
            }
        }
        Ok(())
    }

    /// Marks a run as going for the campaign; false when one already is.
    pub fn register_run(&self, campaign_id: &str, token: CancellationToken) -> bool {
        let mut runs = self.inner.runs.lock().expect("runs lock poisoned");
        if runs.contains_key(campaign_id) {
            return false;
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
    fn follow_transcript(&self, campaign_id: &str, session: &str, payload: &Value) {
        let Some(path) = payload.get("transcript_path").and_then(Value::as_str).filter(|p| !p.is_empty()) else {
            return;
        };
        let path = PathBuf::from(path);
        if !path.is_absolute() {
            return;
        }
        let key = (campaign_id.to_string(), session.to_string());
        let mut followers = self.inner.followers.lock().expect("followers lock poisoned");
        if followers.contains_key(&key) {
            return;
        }
        let token = CancellationToken::new();
        followers.insert(key, token.clone());
        crate::agent::transcript::spawn_follower(
            self.clone(),
            campaign_id.to_string(),
            session.to_string(),
            path,
            token,
        );
    }

    fn unfollow_transcript(&self, campaign_id: &str, session: &str) {
        let key = (campaign_id.to_string(), session.to_string());
        if let Some(t) = self.inner.followers.lock().expect("followers lock poisoned").remove(&key) {
            t.cancel();
        }
    }

    /// A person's queued question, delivered as context added to a hook's
    /// answer (PostToolUse, UserPromptSubmit), marked delivered once.
    async fn context_delivery(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        event: &str,
    ) -> anyhow::Result<Option<Value>> {
        let hook_event = match event {
            "post-tool-use" => "PostToolUse",
            "user-prompt-submit" => "UserPromptSubmit",
            _ => return Ok(None),
        };
        let via = Via::HookAdditionalContext;
        let Some(q) = self.inner.store.claim_next_question(campaign_id, via.as_str(), None).await? else {
            return Ok(None);
        };
        self.record_delivered(campaign_id, session, &q, via).await?;
        let text = question_message(&q);
        Ok(Some(json!({"hookSpecificOutput": {"hookEventName": hook_event, "additionalContext": text}})))
    }

    pub fn subscribe(&self) -> broadcast::Receiver<EventRow> {
        self.inner.bus.subscribe()
    }

    /// Records an event and publishes it to live watchers.
    pub async fn record_event(
        &self,
        campaign_id: &str,
        session_id: Option<&str>,
        key: Option<&str>,
        event: Event,
    ) -> anyhow::Result<(i64, bool)> {
        self.record(campaign_id, session_id, &event.kind(), key, event.body()).await
    }

    /// Records that a question reached the agent (the one writer of
    /// `question.delivered`); its row is marked delivered by the caller.
    pub async fn record_delivered(
        &self,
        campaign_id: &str,
        session_id: Option<&str>,
        question: impl Into<DeliveredQuestion>,
        via: Via,
    ) -> anyhow::Result<()> {
        let event = Event::QuestionDelivered { question: question.into(), via };
        self.record_event(campaign_id, session_id, None, event).await?;
        Ok(())
    }

    /// [`Self::record_event`], given the kind and the body.
    async fn record(
        &self,
        campaign_id: &str,
        session_id: Option<&str>,
        kind: &str,
        key: Option<&str>,
        payload: Value,
    ) -> anyhow::Result<(i64, bool)> {
        let created_at = crate::time::now();
        let (id, fresh) =
            self.inner.store.append_event(campaign_id, session_id, kind, key, &payload, &created_at).await?;
        if fresh {
            self.publish(id, campaign_id, session_id, kind, payload, created_at);
        }
        Ok((id, fresh))
    }

    /// Records many events of one session in one transaction (a batch of
    /// transcript rows): one commit instead of one per row.
    pub async fn record_batch(
        &self,
        campaign_id: &str,
        session_id: Option<&str>,
        rows: Vec<(String, String, Value)>,
    ) -> anyhow::Result<usize> {
        if rows.is_empty() {
            return Ok(0);
        }
        let created_at = crate::time::now();
        let ids = self.inner.store.append_events(campaign_id, session_id, &rows, &created_at).await?;
        let mut fresh = 0;
        for ((kind, _, payload), id) in rows.into_iter().zip(ids) {
            if let Some(id) = id {
                fresh += 1;
                self.publish(id, campaign_id, session_id, &kind, payload, created_at.clone());
            }
        }
        Ok(fresh)
    }

    /// Tells live watchers, and hands agent messages to the classifier.
    fn publish(
        &self,
        id: i64,
        campaign_id: &str,
        session_id: Option<&str>,
        kind: &str,
        payload: Value,
        created_at: String,
    ) {
        if kind == kind::AGENT_MESSAGE {
            if let Some(text) = payload.get("text").and_then(Value::as_str).filter(|t| !t.trim().is_empty()) {
                let _ = self.inner.moment_work.send(MomentWork::Message(
                    campaign_id.to_string(),
                    session_id.map(str::to_string),
                    text.to_string(),
                    tokio::time::Instant::now(),
                ));
            }
        }
        self.count_tool_calls(campaign_id, kind, &payload);
        crate::metrics::METRICS.event(kind, &payload);
        {
            self.inner.published.lock().expect("published ids poisoned").push(id);
        }
        let _ = self.inner.bus.send(EventRow {
            id,
            campaign_id: campaign_id.to_string(),
            session_id: session_id.map(str::to_string),
            kind: kind.to_string(),
            payload,
            created_at,
        });
    }

    /// Creates a campaign from spec text. `spec_path` is absolute; the
    /// workspace is resolved against its folder.
    pub async fn create_campaign(&self, spec_toml: &str, spec_path: &str) -> Result<CampaignRow> {
        let path = Path::new(spec_path);
        if !path.is_absolute() {
            return Err(SupervisorError::Invalid(format!("spec_path must be absolute, got {spec_path}")));
        }
        let base = path.parent().unwrap_or(Path::new("/"));
        let spec = campaign::parse(spec_toml, spec_path, base).map_err(|e| SupervisorError::Invalid(e.to_string()))?;
        let ws = spec.workspace.clone();
        let globs = spec.harness.protected.clone();
        let pristine = tokio::task::spawn_blocking(move || crate::snapshot::read_pristine(&ws, &globs))
            .await
            .map_err(|e| anyhow!(e))?
            .map_err(|e| SupervisorError::Invalid(format!("keeping a pristine copy of the protected files: {e:#}")))?;
        let protected: BTreeMap<String, String> = pristine.iter().map(|f| (f.path.clone(), f.sha256.clone())).collect();
        let row = CampaignRow {
            id: new_campaign_id(&spec.name),
            name: spec.name.clone(),
            mode: spec.mode.as_str().to_string(),
            status: "active".into(),
            spec_path: spec_path.to_string(),
            spec_toml: spec_toml.to_string(),
            spec_json: serde_json::to_string(&spec).map_err(|e| anyhow!(e))?,
            protected_json: serde_json::to_string(&protected).map_err(|e| anyhow!(e))?,
            created_at: crate::time::now(),
        };
        self.inner.store.insert_campaign_with_pristine(&row, &pristine).await?;
        let created = Event::CampaignCreated {
            name: spec.name.clone(),
            workspace: spec.workspace.clone(),
            mode: row.mode.clone(),
            scenarios: spec.harness.scenarios.clone(),
            protected_files: protected.len(),
        };
        self.record_event(&row.id, None, None, created).await?;
        tracing::info!(campaign = %row.id, "campaign created");
        if let Err(e) = crate::moments::at_start(self, &row.id, &spec).await {
            tracing::warn!(error = %e, "raising the start moment");
        }
        Ok(row)
    }

    /// A campaign's row and spec. A campaign's spec never changes once
    /// created, so it is read from the store once and kept in memory.
    pub async fn campaign(&self, id: &str) -> Result<(CampaignRow, CampaignSpec)> {
        if let Some(hit) = self.inner.campaigns.lock().expect("campaign cache poisoned").get(id) {
            return Ok(hit.clone());
        }
        let row = self.inner.store.get_campaign(id).await?.ok_or_else(|| SupervisorError::NotFound(id.to_string()))?;
        let spec: CampaignSpec =
            serde_json::from_str(&row.spec_json).map_err(|e| anyhow!("stored spec of {id}: {e}"))?;
        self.inner
            .campaigns
            .lock()
            .expect("campaign cache poisoned")
            .insert(id.to_string(), (row.clone(), spec.clone()));
        Ok((row, spec))
    }

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
    async fn evaluate_holding(&self, campaign_id: &str, force: bool, held: &[String]) -> Result<Evaluation> {
        let (row, spec) = self.campaign(campaign_id).await?;
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
        let (row, spec) = self.campaign(campaign_id).await?;
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

    fn eval_lock(&self, campaign_id: &str) -> Arc<tokio::sync::Mutex<Option<harness::LastSnapshot>>> {
        let mut locks = self.inner.eval_locks.lock().expect("evaluation lock table poisoned");
        locks.entry(campaign_id.to_string()).or_default().clone()
    }

    async fn evaluate_tree_locked(
        &self,
        row: &CampaignRow,
        spec: &CampaignSpec,
        tree: &str,
        force: bool,
        moments: Option<&[String]>,
    ) -> Result<Evaluation> {
        let campaign_id = row.id.as_str();
        if !force {
            if let Some((id, body)) = self.inner.store.find_evaluation(campaign_id, tree).await? {
                let mut e: Evaluation = serde_json::from_str(&body).map_err(|e| anyhow!(e))?;
                e.id = Some(id);
                e.cached = true;
                return Ok(e);
            }
        }
        let protected: BTreeMap<String, String> = serde_json::from_str(&row.protected_json).map_err(|e| anyhow!(e))?;
        let pristine = self.pristine(campaign_id).await?;
        self.record_event(campaign_id, None, None, Event::EvaluationStarted { tree: tree.to_string() }).await?;
        // A campaign with [harness] tags is evaluated by a worker (src/jobs.rs).
        let store = crate::snapshot::store_path(&self.inner.data_dir, campaign_id);
        let inputs = harness::Inputs {
            spec,
            campaign_id,
            tree,
            protected: &protected,
            pristine: &pristine,
            seed: harness::DEFAULT_SEED,
            store: &store,
        };
        let mut eval = crate::jobs::evaluate(&self.inner.store, &inputs, &self.inner.scratch).await?;
        if force {
            // A forced re-run replaces nothing: it is stored under its own tree key suffix.
            eval.tree = format!("{tree}+{}", self.inner.store.count_evaluations(campaign_id).await?);
        }
        let id = self.inner.store.insert_evaluation(campaign_id, &eval).await?;
        eval.id = Some(id);
        self.record_event(campaign_id, None, None, Event::evaluated(id, &eval)).await?;
        tracing::info!(campaign = %campaign_id, tree = %eval.tree, holds = eval.verdict.holds, ms = eval.duration_ms, "evaluated");
        if let Some(held) = moments {
            match crate::moments::after_evaluation(self, campaign_id, spec, &eval, held).await {
                Ok(now) => eval = now,
                Err(e) => tracing::warn!(error = %e, "moment detection after an evaluation"),
            }
        }
        Ok(eval)
    }

    /// Queues a person's question; it reaches the agent at its next stop.
    pub async fn ask(&self, campaign_id: &str, text: &str) -> Result<crate::store::QuestionRow> {
        self.ask_with(campaign_id, text, None, None).await
    }

    /// Like [`Self::ask`], naming the bank entry and moment it started from.
    pub async fn ask_with(
        &self,
        campaign_id: &str,
        text: &str,
        bank_id: Option<&str>,
        moment: Option<&str>,
    ) -> Result<crate::store::QuestionRow> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SupervisorError::Invalid("the question text is empty".into()));
        }
        if text.chars().count() > 4000 {
            return Err(SupervisorError::Invalid("the question is longer than 4000 characters".into()));
        }
        self.campaign(campaign_id).await?;
        if let Some(m) = moment {
            if !crate::bank::MOMENTS.contains(&m) {
                return Err(SupervisorError::Invalid(format!("unknown moment `{m}`")));
            }
        }
        let id = self.inner.store.queue_question(campaign_id, "human", bank_id, moment, text).await?;
        let queued = Event::QuestionQueued { question_id: id, text: text.to_string(), by: events::QueuedBy::Human };
        self.record_event(campaign_id, None, None, queued).await?;
        let q = self
            .inner
            .store
            .list_questions(campaign_id, false)
            .await?
            .into_iter()
            .find(|q| q.id == id)
            .ok_or_else(|| anyhow!("question {id} vanished"))?;
        Ok(q)
    }

    /// Handles one hook call of an agent. The call is recorded before any
    /// answer; a stop attempt is judged on a fresh (or cached) evaluation.
    /// `call_id` identifies one invocation of the hook command (its retries
    /// share it).
    pub async fn handle_hook(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        call_id: Option<&str>,
        payload: Value,
    ) -> Result<HookReply> {
        let started = std::time::Instant::now();
        let reply = self.handle_hook_timed(campaign_id, agent, event, call_id, payload).await;
        crate::metrics::METRICS.hook_call(event, reply.is_ok(), started.elapsed().as_secs_f64());
        reply
    }

    async fn handle_hook_timed(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        call_id: Option<&str>,
        payload: Value,
    ) -> Result<HookReply> {
        let (_row, spec) = self.campaign(campaign_id).await?;
        let (event_id, fresh, session) =
            self.record_hook_call(campaign_id, agent, event, call_id, &payload, None).await?;
        if agent == "claude-code" {
            if let Some(s) = session.as_deref() {
                if event == "session-end" {
                    self.unfollow_transcript(campaign_id, s);
                } else {
                    self.follow_transcript(campaign_id, s, &payload);
                }
            }
        }
        if fresh && event == "session-start" {
            // Hashing the hook binary takes a moment: not on the hook's clock.
            let (sup, campaign, session) = (self.clone(), campaign_id.to_string(), session.clone());
            tokio::spawn(async move {
                if let Err(e) = sup.check_hook_install(&campaign, session.as_deref(), true).await {
                    tracing::warn!(error = %e, "checking gadfly's installed hooks");
                }
            });
        }
        if fresh && (event == "session-end" || event == "stop-failure") && spec.mode != Mode::Audit {
            self.check_ungated_end(campaign_id, agent, event, event_id, session.as_deref()).await?;
        }
        if event != "stop" {
            let output = if fresh && spec.mode != Mode::Audit {
                self.context_delivery(campaign_id, session.as_deref(), event).await?
            } else {
                None
            };
            return Ok(HookReply { output, decision: None, event_id });
        }
        if !fresh {
            // A retried call: answer exactly as the first time.
            if let Some(prev) = self.inner.store.stop_attempt_for_event(event_id).await? {
                return Ok(HookReply {
                    output: prev.reason.as_ref().filter(|_| prev.decision == "block").map(|r| block_json(r)),
                    decision: Some(prev.decision),
                    event_id,
                });
            }
        }
        self.judge_stop(campaign_id, &spec, agent, event_id, session.as_deref(), &payload).await
    }

    /// Records the hooks gadfly wrote (or removed) for a campaign.
    pub async fn record_hook_install(
        &self,
        campaign_id: &str,
        installed: Option<&crate::agent::attach::Installed>,
        removed: Option<&Path>,
    ) -> Result<()> {
        self.campaign(campaign_id).await?;
        let install = match (installed, removed) {
            (Some(i), _) => events::HooksInstall::Installed(i.clone()),
            (None, Some(p)) => events::HooksInstall::Removed { settings_path: p.to_path_buf() },
            (None, None) => return Err(SupervisorError::Invalid("give `installed` or `removed`".into())),
        };
        self.record_event(campaign_id, None, None, Event::HooksInstall(install)).await?;
        Ok(())
    }

    /// What changed in the hooks gadfly installed for the campaign (none
    /// when nothing did, or none were recorded). `check_exe` also hashes
    /// the hook binary (done at SessionStart, not at every stop).
    pub async fn hook_install_changes(&self, campaign_id: &str, check_exe: bool) -> anyhow::Result<Vec<String>> {
        let events = self.inner.store.recent_events(campaign_id, kind::HOOKS_INSTALL, 100).await?;
        let mut active: BTreeMap<String, crate::agent::attach::Installed> = BTreeMap::new();
        for e in events.iter().rev() {
            match e.payload["action"].as_str() {
                Some("installed") => {
                    if let Ok(i) =
                        serde_json::from_value::<crate::agent::attach::Installed>(e.payload["install"].clone())
                    {
                        active.insert(i.settings_path.display().to_string(), i);
                    }
                }
                Some("removed") => {
                    if let Some(p) = e.payload["settings_path"].as_str() {
                        active.remove(p);
                    }
                }
                _ => {}
            }
        }
        let campaign = campaign_id.to_string();
        tokio::task::spawn_blocking(move || {
            active.values().flat_map(|i| i.changes(&campaign, check_exe)).collect::<Vec<String>>()
        })
        .await
        .map_err(|e| anyhow!(e))
    }

    /// Checks gadfly's installed hooks and records a violation when they
    /// changed (once per distinct change).
    async fn check_hook_install(
        &self,
        campaign_id: &str,
        session: Option<&str>,
        check_exe: bool,
    ) -> anyhow::Result<Vec<String>> {
        let changes = self.hook_install_changes(campaign_id, check_exe).await?;
        if !changes.is_empty() {
            let last = self.inner.store.recent_events(campaign_id, kind::VIOLATION, 1).await?;
            let same = last.first().is_some_and(|e| e.payload["changes"] == json!(changes));
            if !same {
                let violation = events::Violation::HooksChanged { changes: changes.clone() };
                self.record_event(campaign_id, session, None, Event::Violation(violation)).await?;
                tracing::warn!(campaign = %campaign_id, ?changes, "gadfly's hooks were tampered with");
            }
        }
        Ok(changes)
    }

    /// A session that ends, or a turn that ends on a failure, with no
    /// allowed stop since its last block (or none at all): the agent got
    /// away from the gate. Recorded as an ungated stop attempt.
    async fn check_ungated_end(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        event_id: i64,
        session: Option<&str>,
    ) -> anyhow::Result<()> {
        let attempts = self.inner.store.list_stop_attempts(campaign_id).await?;
        let last = attempts.iter().rev().find(|a| a.session_id.as_deref() == session);
        let why = match (event, last.map(|a| a.decision.as_str())) {
            (_, Some("allow" | "record" | "ungated")) if event == "session-end" => return Ok(()),
            ("stop-failure", _) => "the turn ended on a failure (StopFailure), with no Stop hook decision",
            (_, Some("block" | "unavailable_block")) => "the session ended while its last stop was blocked",
            _ => "the session ended without any stop judged by the gate",
        };
        self.record_ungated(campaign_id, agent, event_id, session, None, why).await
    }

    /// Records an ungated stop: a stop attempt with decision `ungated` and
    /// its reason (with the latest evaluation's verdict, for the audit), and
    /// a `stop.ungated` event for the console and the log.
    pub async fn record_ungated(
        &self,
        campaign_id: &str,
        agent: &str,
        event_id: i64,
        session: Option<&str>,
        claim: Option<&str>,
        why: &str,
    ) -> anyhow::Result<()> {
        let latest = self.inner.store.latest_evaluation(campaign_id).await?;
        let (eval_id, holds) = match &latest {
            Some((id, body)) => {
                (Some(*id), serde_json::from_str::<Evaluation>(body).map(|e| e.verdict.holds).unwrap_or(false))
            }
            None => (None, false),
        };
        self.inner
            .store
            .insert_stop_attempt(&NewStopAttempt {
                campaign_id,
                event_id,
                session_id: session,
                agent,
                claim,
                stop_hook_active: false,
                evaluation_id: eval_id,
                holds,
                decision: "ungated",
                reason: Some(why),
                question_id: None,
            })
            .await?;
        let ungated = Event::StopUngated {
            why: why.to_string(),
            claim: claim.map(str::to_string),
            by: events::UngatedBy::Gate { event_id, latest_evaluation_id: eval_id, holds },
        };
        self.record_event(campaign_id, session, None, ungated).await?;
        tracing::warn!(campaign = %campaign_id, why, "ungated stop");
        Ok(())
    }

    /// Records one hook call (once per call id, see [`idempotency_key`]):
    /// its event id, whether it is new, and its session. `spooled` marks a
    /// call replayed from the hook client's spool.
    async fn record_hook_call(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        call_id: Option<&str>,
        payload: &Value,
        spooled: Option<Value>,
    ) -> Result<(i64, bool, Option<String>)> {
        if !payload.is_object() {
            return Err(SupervisorError::Invalid("the hook payload must be a JSON object".into()));
        }
        let session = payload.get("session_id").and_then(Value::as_str).map(str::to_string);
        let key = idempotency_key(campaign_id, agent, event, call_id, payload);
        let call =
            Event::HookCall { agent: agent.to_string(), event: event.to_string(), payload: payload.clone(), spooled };
        let (event_id, fresh) = self.record_event(campaign_id, session.as_deref(), key.as_deref(), call).await?;
        Ok((event_id, fresh, session))
    }

    /// Whether the transcript watch recorded a turn of `session` that ended
    /// ungated shortly before `spooled_at` (the hook spools a stop at most
    /// its deadline after the turn ends): the same stop, seen twice.
    async fn seen_in_transcript(&self, campaign_id: &str, session: Option<&str>, spooled_at: &str) -> Result<bool> {
        let (Some(session), Ok(at)) = (session, chrono::DateTime::parse_from_rfc3339(spooled_at)) else {
            return Ok(false);
        };
        let (_, spec) = self.campaign(campaign_id).await?;
        let window = chrono::TimeDelta::seconds(i64::from(spec.gate.stop_timeout_s) + 5);
        let seen = self.inner.store.recent_events(campaign_id, crate::events::kind::VIOLATION, 200).await?;
        Ok(seen.iter().any(|e| {
            e.session_id.as_deref() == Some(session)
                && e.payload["kind"] == "turn_ended_ungated"
                && e.payload["timestamp"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .is_some_and(|ended| ended <= at + chrono::TimeDelta::seconds(5) && ended >= at - window)
        }))
    }

    /// A hook call the hook client could not deliver when it was made and
    /// spooled, replayed now. It is recorded once (same call id); a stop is
    /// not judged now (the tree has moved on): it is recorded as the hook
    /// answered it then, blocked by the hook itself or let through ungated.
    pub async fn handle_spooled_hook(
        &self,
        campaign_id: &str,
        agent: &str,
        event: &str,
        call_id: Option<&str>,
        payload: Value,
        spooled: &SpooledMeta,
    ) -> Result<HookReply> {
        let (row, _) = self.campaign(campaign_id).await?;
        // The hook token that replays is the agent's too: take the call
        // only in the shape the hook's spool gives it (issue 31).
        crate::spool::check_replay(event, &spooled.outcome, &spooled.at, &spooled.why, &row.created_at, chrono::Utc::now())
            .map_err(|e| SupervisorError::Invalid(format!("this is not a call the hook spooled: {e}")))?;
        let meta = json!({"at": spooled.at, "outcome": spooled.outcome, "why": spooled.why});
        let (event_id, fresh, session) =
            self.record_hook_call(campaign_id, agent, event, call_id, &payload, Some(meta)).await?;
        let claim = payload.get("last_assistant_message").and_then(Value::as_str);
        let decision = match (event, spooled.outcome.as_str()) {
            ("stop", "blocked") => Some("unavailable_block"),
            ("stop", _) => Some("ungated"),
            _ => None,
        };
        if fresh {
            match decision {
                Some("ungated") => {
                    let why = format!(
                        "the supervisor was unavailable at {} ({}); the hook let this stop through ungated",
                        spooled.at, spooled.why
                    );
                    // The transcript watch may have recorded this very stop
                    // already (the daemon came back and read the turn's end
                    // before the hook replayed its spool): once is enough.
                    if !self.seen_in_transcript(campaign_id, session.as_deref(), &spooled.at).await? {
                        self.record_ungated(campaign_id, agent, event_id, session.as_deref(), claim, &why).await?;
                    }
                }
                Some(d) => {
                    let why = format!(
                        "the supervisor was unavailable at {} ({}); the hook blocked this stop on its own",
                        spooled.at, spooled.why
                    );
                    self.inner
                        .store
                        .insert_stop_attempt(&NewStopAttempt {
                            campaign_id,
                            event_id,
                            session_id: session.as_deref(),
                            agent,
                            claim,
                            stop_hook_active: payload.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false),
                            evaluation_id: None,
                            holds: false,
                            decision: d,
                            reason: Some(&why),
                            question_id: None,
                        })
                        .await?;
                }
                None => {}
            }
        }
        Ok(HookReply { output: None, decision: decision.map(str::to_string), event_id })
    }

    async fn judge_stop(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        agent: &str,
        event_id: i64,
        session: Option<&str>,
        payload: &Value,
    ) -> Result<HookReply> {
        let claim = payload.get("last_assistant_message").and_then(Value::as_str);
        let stop_hook_active = payload.get("stop_hook_active").and_then(Value::as_bool).unwrap_or(false);
        // The moments the agent's last words show (a claimed limit, a
        // dismissed failure...): in autonomous mode a blocked stop asks
        // their question, and the evaluation below does not ask its own
        // question for the same moment.
        let claims = match claim {
            Some(text) => crate::moments::at_stop(self, campaign_id, session, text).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "classifying the stop's claim");
                vec![]
            }),
            None => vec![],
        };
        let claim_moments: Vec<&str> = claims.iter().map(|c| c.finding.moment.as_str()).collect();
        let held = gate::held_moments(spec.mode, &claim_moments);
        let tampered = self.check_hook_install(campaign_id, session, false).await?;
        let evaluation = match self.evaluate_holding(campaign_id, false, &held).await {
            Ok(eval) => Ok(eval),
            // The gate fails closed: no verdict, no stop (except in audit mode).
            Err(SupervisorError::Internal(e)) => Err(format!("{e:#}")),
            Err(other) => return Err(other),
        };
        let waiting = match &evaluation {
            Ok(_) => self.inner.store.list_questions(campaign_id, true).await?,
            Err(_) => vec![],
        };
        let mut input = gate::StopInput {
            campaign_id,
            mode: spec.mode,
            predicate: &spec.predicate,
            judged: match &evaluation {
                Ok(eval) => gate::Judged::Evaluated(eval),
                Err(why) => gate::Judged::Unevaluated(why),
            },
            tampered: &tampered,
            waiting: waiting
                .iter()
                .map(|q| gate::Waiting { id: q.id, human: q.source == "human", moment: q.moment.clone() })
                .collect(),
            claims: claim_moments,
        };
        let objective = evaluation.as_ref().ok().and_then(|e| e.verdict.geomean_speedup);
        let (plan, asked) = self.deliver_at_stop(campaign_id, spec, &mut input, &waiting, objective).await?;
        let reason = plan.reason_text(&input, asked.as_ref().map(|(_, q)| q));
        let question_id = asked.as_ref().map(|(id, _)| *id);
        if let Some((id, q)) = &asked {
            if let Some(i) = plan.claims.iter().position(|c| *c == gate::ClaimPlan::AskedAtStop) {
                let action = crate::moments::ClaimAction::AskedAtStop(*id, &q.source, &q.text);
                crate::moments::raise_claim(self, campaign_id, session, spec, &claims[i], action).await?;
            }
            let via = Via::StopHookReason;
            self.record_delivered(campaign_id, session, DeliveredQuestion::asked_at_stop(*id, q), via).await?;
        }
        // The other claim moments, as planned (by mode, or recorded only).
        for (c, planned) in claims.iter().zip(&plan.claims) {
            let action = match *planned {
                gate::ClaimPlan::AskedAtStop => continue,
                gate::ClaimPlan::Ask => crate::moments::ClaimAction::Ask,
                gate::ClaimPlan::RecordOnly(why) => crate::moments::ClaimAction::RecordOnly(why),
            };
            crate::moments::raise_claim(self, campaign_id, session, spec, c, action).await?;
        }
        let decision = plan.decision;
        let (eval_id, holds) = match &evaluation {
            Ok(eval) => (eval.id, eval.verdict.holds),
            Err(_) => (None, false),
        };
        let told = Event::Decision {
            decision,
            holds,
            evaluation_id: eval_id,
            stop_event_id: event_id,
            question_id,
            reason: reason.clone(),
        };
        let (told_kind, told) = (told.kind(), told.body());
        let created_at = crate::time::now();
        let (_, decision_event) = self
            .inner
            .store
            .insert_stop_attempt_with_event(
                &NewStopAttempt {
                    campaign_id,
                    event_id,
                    session_id: session,
                    agent,
                    claim,
                    stop_hook_active,
                    evaluation_id: eval_id,
                    holds,
                    decision: decision.as_str(),
                    reason: reason.as_deref(),
                    question_id,
                },
                &told_kind,
                &told,
                &created_at,
            )
            .await?;
        self.publish(decision_event, campaign_id, session, &told_kind, told, created_at);
        tracing::info!(campaign = %campaign_id, decision = decision.as_str(), holds, "stop attempt judged");
        Ok(HookReply {
            output: match decision {
                Decision::Block => reason.as_deref().map(block_json),
                _ => None,
            },
            decision: Some(decision.as_str().to_string()),
            event_id,
        })
    }

    /// Plans the stop ([`gate::plan_stop`]) and delivers the question the
    /// plan carries: a waiting one, or a fresh pick queued first. A waiting
    /// question that another hook delivered since the queue was read (a
    /// PostToolUse hook claimed it: its row is no longer queued) is not
    /// carried, nor recorded as delivered again: the stop is planned again
    /// without it. The plan, and the question delivered (its row id).
    async fn deliver_at_stop(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        input: &mut gate::StopInput<'_>,
        waiting: &[crate::store::QuestionRow],
        objective: Option<f64>,
    ) -> anyhow::Result<(gate::StopPlan, Option<(i64, Question)>)> {
        // Each waiting question is lost at most once; a fresh pick lost to
        // a hook that claimed it within moments is picked again, a few times.
        for _ in 0..input.waiting.len() + 3 {
            let plan = gate::plan_stop(input);
            let question = match &plan.ask {
                None => return Ok((plan, None)),
                Some(gate::Ask::Queued(id)) => queued_question(
                    waiting.iter().find(|q| q.id == *id).context("a planned question not in the queue")?,
                ),
                Some(gate::Ask::Pick { moment, groups }) => {
                    self.pick_question(campaign_id, spec, moment, groups).await?
                }
            };
            let id = match question.queued_id {
                Some(id) => id,
                None => {
                    let q = &question;
                    self.inner
                        .store
                        .queue_question(campaign_id, "bank", Some(&q.source), Some(&q.moment), &q.text)
                        .await?
                }
            };
            if self.inner.store.mark_delivered(id, Via::StopHookReason.as_str(), objective).await? {
                return Ok((plan, Some((id, question))));
            }
            tracing::info!(campaign = %campaign_id, question = id, "the stop's question was delivered elsewhere meanwhile");
            input.delivered_elsewhere(id);
        }
        Ok((gate::plan_stop(input).without_question(), None))
    }

    /// What selection needs of a campaign: the bank ids asked there (oldest
    /// first), how many questions it was asked, and the learned yield.
    async fn selection_inputs(
        &self,
        campaign_id: &str,
    ) -> anyhow::Result<(Vec<select::AskedHere>, usize, HashMap<String, EntryStats>)> {
        let (asked_ids, asked) = self.inner.store.asked_bank_ids(campaign_id).await?;
        let stats: HashMap<String, EntryStats> = self.bank_stats().await?.into_iter().collect();
        Ok((asked_ids, asked, stats))
    }

    /// A bank question for `moment` (see [`crate::bank::select`]), or a
    /// built-in one when no entry applies.
    pub async fn pick_question(
        &self,
        campaign_id: &str,
        spec: &CampaignSpec,
        moment: &str,
        prefer: &[&str],
    ) -> anyhow::Result<Question> {
        let (asked_ids, asked, stats) = self.selection_inputs(campaign_id).await?;
        let bank = self.inner.bank.get();
        let req = select::Request {
            moment,
            spec,
            asked: &asked_ids,
            prefer,
            stats: &stats,
            seed: select::seed_for(campaign_id, asked),
        };
        if let Some(choice) = select::pick(&bank.entries, &req) {
            return Ok(Question {
                queued_id: None,
                source: choice.entry.id,
                moment: moment.to_string(),
                text: choice.entry.text,
            });
        }
        let builtin = gate::BUILTIN_COMPLETION_QUESTIONS;
        let n: usize = asked_ids.iter().filter(|a| a.bank_id.starts_with("builtin-")).map(|a| a.times).sum();
        let (id, text) = builtin[n % builtin.len()];
        Ok(Question { queued_id: None, source: id.to_string(), moment: moment.to_string(), text: text.to_string() })
    }

    /// Bank suggestions for a person choosing a question for `moment`.
    pub async fn suggestions(&self, campaign_id: &str, moment: &str, n: usize) -> Result<Vec<select::Choice>> {
        if !crate::bank::MOMENTS.contains(&moment) {
            return Err(SupervisorError::Invalid(format!(
                "unknown moment `{moment}`; expected one of {}",
                crate::bank::MOMENTS.join(", ")
            )));
        }
        let (_row, spec) = self.campaign(campaign_id).await?;
        let (asked_ids, asked, stats) = self.selection_inputs(campaign_id).await?;
        let bank = self.inner.bank.get();
        let req = select::Request {
            moment,
            spec: &spec,
            asked: &asked_ids,
            prefer: &[],
            stats: &stats,
            seed: select::seed_for(campaign_id, asked),
        };
        Ok(select::suggest(&bank.entries, &req, n))
    }

    /// Learned yield of every bank entry asked so far, over all campaigns.
    pub async fn bank_stats(&self) -> anyhow::Result<std::collections::BTreeMap<String, EntryStats>> {
        let (asked, evals) = self.inner.store.yield_history().await?;
        let attributions = learn::attribute(&asked, &evals, learn::DEFAULT_WINDOW, learn::DEFAULT_THRESHOLD);
        Ok(learn::stats(&attributions))
    }

    pub fn bank(&self) -> &LiveBank {
        &self.inner.bank
    }
}

/// How a queued question is put to the agent outside a block reason.
pub fn question_message(q: &crate::store::QuestionRow) -> String {
    match q.source.as_str() {
        "human" => format!("A question from the person supervising this campaign: {}\nAnswer it with a measurement or an experiment.", q.text),
        _ => format!(
            "gadfly noticed a {} moment. Question ({}): {}\nAnswer it with a measurement or an experiment, not an argument.",
            q.moment.as_deref().unwrap_or("campaign").replace('_', " "),
            q.bank_id.as_deref().unwrap_or("bank"),
            q.text
        ),
    }
}

/// A queued question, as the gate carries it.
fn queued_question(q: &crate::store::QuestionRow) -> Question {
    Question {
        queued_id: Some(q.id),
        source: if q.source == "human" { "human".into() } else { q.bank_id.clone().unwrap_or_else(|| "bank".into()) },
        moment: q.moment.clone().unwrap_or_else(|| "completion_claim".into()),
        text: q.text.clone(),
    }
}

fn block_json(reason: &str) -> Value {
    json!({"decision": "block", "reason": reason})
}

/// The key that makes a retried hook call land once: built from the
/// session, the event and the tool call's id when the payload has one (the
/// agent may fire the same tool call's hook twice), else from the hook
/// invocation's own call id (its retries share it). Without either, every
/// call is recorded.
pub fn idempotency_key(
    campaign_id: &str,
    agent: &str,
    event: &str,
    call_id: Option<&str>,
    payload: &Value,
) -> Option<String> {
    let session = payload.get("session_id").and_then(Value::as_str).unwrap_or("");
    let tool_use = payload.get("tool_use_id").and_then(Value::as_str).filter(|t| !t.is_empty());
    let identity = match (tool_use, call_id.filter(|c| !c.is_empty())) {
        (Some(t), _) => format!("tool:{t}"),
        (None, Some(c)) => format!("call:{c}"),
        (None, None) => return None,
    };
    let mut h = Sha256::new();
    for part in [campaign_id, agent, event, session, &identity] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    Some(hex::encode(h.finalize()))
}

/// Replays the spooled calls in `dir` straight into the store (the daemon
/// does this at start for its own data dir's spool). Returns how many were
/// recorded and how many were left (unreadable, or refused: kept aside).
pub async fn import_spool(sup: &Supervisor, dir: &Path) -> (usize, usize) {
    let (pending, damaged) = crate::spool::pending(dir);
    for d in &damaged {
        tracing::warn!(file = %d, "a spooled hook call cannot be read; left in place");
    }
    let mut done_count = 0;
    let mut left = damaged.len();
    for (path, call) in pending {
        let Some(claimed) = crate::spool::claim(&path) else { continue };
        let meta = SpooledMeta { at: call.spooled_at, outcome: call.outcome, why: call.why };
        match sup
            .handle_spooled_hook(&call.campaign, &call.agent, &call.event, Some(&call.call_id), call.payload, &meta)
            .await
        {
            Ok(_) => {
                crate::spool::done(&claimed);
                done_count += 1;
            }
            Err(SupervisorError::Internal(e)) => {
                tracing::warn!(error = %e, file = %path.display(), "replaying a spooled hook call; kept for later");
                crate::spool::release(&claimed, &path);
                left += 1;
            }
            Err(e) => {
                let kept = path.with_extension("rejected");
                tracing::warn!(error = %e, file = %kept.display(), "a spooled hook call was refused; kept aside");
                let _ = std::fs::rename(&claimed, &kept);
                left += 1;
            }
        }
    }
    (done_count, left)
}

fn new_campaign_id(name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let slug: String = slug.chars().take(32).collect();
    let suffix: u32 = rand::random::<u32>() & 0xff_ffff;
    if slug.is_empty() {
        format!("c-{suffix:06x}")
    } else {
        format!("{slug}-{suffix:06x}")
    }
}

#[cfg(test)]
mod tests {
    use super::RecentIds;

    #[test]
    fn recent_ids_keep_the_latest_and_forget_the_oldest() {
        let mut r = RecentIds::default();
        for id in 0..RecentIds::KEEP as i64 {
            r.push(id);
        }
        r.push(5); // already there: nothing moves
        assert!(r.contains(0) && r.contains(5));
        r.push(RecentIds::KEEP as i64);
        assert!(!r.contains(0), "the oldest id is forgotten once KEEP are newer");
        assert!(r.contains(1) && r.contains(RecentIds::KEEP as i64));
        assert_eq!(r.order.len(), RecentIds::KEEP);
        assert_eq!(r.set.len(), RecentIds::KEEP);
    }
}
