//! The application layer (issue #33): the use cases, the only layer that
//! holds the store and the live bank together. This file holds the handle,
//! [`Supervisor`] (to be renamed [`App`]), its state, the event record and
//! publish, and the campaign cache; the use cases are in the files beside
//! it, each an `impl Supervisor` block:
//!
//! - `hooks`: hook calls, context delivery, ungated ends, spooled replays
//!   and the spool import;
//! - `stop`: the Stop use case (`judge_stop`, `deliver_at_stop`);
//! - `installs`: hook-install records and tamper checks;
//! - `evaluate`: eval locks, the snapshot and pristine caches, local or
//!   worker dispatch;
//! - `questions`: ask, pick, suggest, bank stats, and `record_delivered`
//!   (the one writer of `question.delivered`);
//! - `answers`: whether a delivered question was answered (fresh evidence
//!   only), its re-ask and escalation, the open questions;
//! - `runs`: the run registry, leases, the lease keeper, transcript
//!   followers, `stop_everything`;
//! - `moments` and `recheck`: acting on the findings the domain's
//!   detectors return (queue, suggest or record, by mode; cooldowns), and
//!   the suspicious gain's re-check;
//! - `beam`: the beam's families, their questions and records;
//! - `run_loop`, `transcript`, `escapes`: spawned agents' loops, the
//!   transcript followers and the watch for turns that end ungated;
//! - `relay`: the PostgreSQL event relay;
//! - `tasks`: the background tasks, each named and tracked
//!   (`spawn_task`), stopped by the daemon's token and waited for at
//!   shutdown (`wait_for_tasks`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::anyhow;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::bank::live::LiveBank;
use crate::campaign::{self, CampaignSpec};
use crate::events::{kind, Event};
use crate::harness;
use crate::store::{CampaignRow, EventRow, Store};

mod answers;
mod calibrate;
pub use calibrate::MAX_RUNS as CALIBRATION_MAX_RUNS;
pub mod beam;
pub mod claims;
mod escapes;
mod evaluate;
mod hooks;
mod installs;
mod moments;
mod notify;
mod questions;
mod recheck;
mod redteam;
mod relay;
mod run_loop;
mod runs;
mod stop;
mod tasks;
mod transcript;

pub use answers::{OpenQuestion, OpenReask};
pub use hooks::{idempotency_key, import_spool, HookReply, SpooledMeta};
pub use questions::question_message;
pub use redteam::{Progress as RedteamProgress, RedteamState};
pub use run_loop::{run_dir, Outcome};
pub use tasks::SHUTDOWN_WAIT;

use relay::RecentIds;
use runs::lease_ttl_from_env;

/// Errors a client can act on, kept apart from internal failures.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("campaign {0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// The request is sound but the campaign's state on disk forbids it
    /// (its workspace folder is gone): the user's to fix, not gadfly's.
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type Result<T> = std::result::Result<T, SupervisorError>;

#[derive(Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

/// The application handle: [`Supervisor`] under the name it is getting
/// (the rename is pending, issue #33).
pub type App = Supervisor;

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
    seen_claims: moments::SeenClaims,
    /// Tool calls since each campaign's last evaluation (idle plateau).
    tool_calls: Mutex<HashMap<String, ToolCalls>>,
    /// The step of each evaluation running now, by campaign.
    evaluating: Mutex<HashMap<String, crate::progress::Step>>,
    /// Campaigns' pristine protected files, read once.
    pristine: Mutex<HashMap<String, Arc<Vec<crate::snapshot::PristineFile>>>>,
    /// This daemon's identity as a lease owner, and how long a lease lasts.
    owner: String,
    lease_ttl: std::time::Duration,
    shutting_down: std::sync::atomic::AtomicBool,
    /// Ids of the events this daemon published lately (the relay of other
    /// daemons' events skips them).
    published: Mutex<RecentIds>,
    /// The background tasks, tracked, and the daemon's shutdown token.
    tasks: tasks::Tasks,
    /// Events that may make a notification, for the notifier (`notify.rs`).
    notify_work: tokio::sync::mpsc::UnboundedSender<EventRow>,
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
    /// The counts between the campaign's recent evaluations, oldest first
    /// (its cadence, [`crate::moments::detect::idle_threshold`]).
    cadence: std::collections::VecDeque<usize>,
    recent_ids: std::collections::VecDeque<String>,
    /// The count the moment detector last saw.
    reported: usize,
    /// Whether a message for this campaign waits in the moment queue.
    queued: bool,
}

impl Supervisor {
    /// `shutdown` is the daemon's token: the background tasks stop when it
    /// is cancelled (see [`Self::spawn_task`]).
    pub fn new(
        store: Store,
        data_dir: &Path,
        bank: Arc<LiveBank>,
        endpoint: (String, String),
        shutdown: CancellationToken,
    ) -> Supervisor {
        let (bus, _) = broadcast::channel(4096);
        let (moment_work, mut inbox) = tokio::sync::mpsc::unbounded_channel::<MomentWork>();
        let (notify_work, notify_inbox) = tokio::sync::mpsc::unbounded_channel::<EventRow>();
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
                evaluating: Mutex::new(HashMap::new()),
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
                tasks: tasks::Tasks::new(shutdown),
                notify_work,
            }),
        };
        // Notifications go out from a task of their own: recording an event
        // (a hook call's) never waits on a webhook.
        sup.spawn_notifier(notify_inbox);
        // Messages are classified off the recording path, in order.
        // Work already queued is done first; once the daemon shuts down and
        // the queue is empty, the worker stops.
        let weak = Arc::downgrade(&sup.inner);
        let stop = sup.shutdown_token().clone();
        sup.spawn_task("moment-worker", async move {
            while let Some(work) = next_moment_work(&mut inbox, &stop).await {
                let Some(inner) = weak.upgrade() else { break };
                let sup = Supervisor { inner };
                let done = match work {
                    MomentWork::Message(campaign, session, text, at) => {
                        moments::after_message(&sup, &campaign, session.as_deref(), &text, at).await
                    }
                    MomentWork::IdleToolCalls(campaign) => {
                        let seen = {
                            let mut all = sup.inner.tool_calls.lock().expect("tool call counts poisoned");
                            all.get_mut(&campaign).map(|c| {
                                c.queued = false;
                                let from = std::mem::replace(&mut c.reported, c.count);
                                (from, c.count, c.cadence.iter().copied().collect::<Vec<usize>>())
                            })
                        };
                        match seen {
                            Some((from, to, cadence)) => {
                                moments::after_tool_calls(&sup, &campaign, from, to, &cadence).await
                            }
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

    pub(crate) fn seen_claims(&self) -> &moments::SeenClaims {
        &self.inner.seen_claims
    }

    /// Counts tool calls between evaluations; hands a long enough run of
    /// them to the idle-plateau detector.
    fn count_tool_calls(&self, campaign_id: &str, kind: &str, payload: &Value) {
        let id = match kind {
            kind::EVALUATION => {
                let mut all = self.inner.tool_calls.lock().expect("tool call counts poisoned");
                let calls = all.entry(campaign_id.to_string()).or_default();
                if calls.cadence.len() >= 8 {
                    calls.cadence.pop_front();
                }
                calls.cadence.push_back(calls.count);
                let cadence = std::mem::take(&mut calls.cadence);
                *calls = ToolCalls { cadence, ..Default::default() };
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

    pub fn bank(&self) -> &LiveBank {
        &self.inner.bank
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
        let row = EventRow {
            id,
            campaign_id: campaign_id.to_string(),
            session_id: session_id.map(str::to_string),
            kind: kind.to_string(),
            payload,
            created_at,
        };
        if crate::notify::may_notify(kind) {
            // A channel send: the notifier delivers in the background.
            let _ = self.inner.notify_work.send(row.clone());
        }
        let _ = self.inner.bus.send(row);
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
            archived_at: None,
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
        if let Err(e) = moments::at_start(self, &row.id, &spec).await {
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
        let spec = row.spec()?;
        self.inner
            .campaigns
            .lock()
            .expect("campaign cache poisoned")
            .insert(id.to_string(), (row.clone(), spec.clone()));
        Ok((row, spec))
    }

    /// [`Self::campaign`], refused with [`SupervisorError::Conflict`] when
    /// the campaign's workspace folder no longer exists (moved or deleted
    /// after `campaign create`): evaluating, calibrating or running an
    /// agent there cannot work, and it is not gadfly's fault.
    pub async fn campaign_with_workspace(&self, id: &str) -> Result<(CampaignRow, CampaignSpec)> {
        let (row, spec) = self.campaign(id).await?;
        if !spec.workspace.is_dir() {
            return Err(SupervisorError::Conflict(format!(
                "the workspace folder {} of campaign {id} no longer exists: restore it there (move it back or \
                 clone it again), or create a campaign on the folder where it is now \
                 (`gadfly campaign create SPEC` with `workspace` naming it)",
                spec.workspace.display()
            )));
        }
        Ok((row, spec))
    }

    /// Archives a campaign (`archived`) or unarchives it: only its mark
    /// changes, and a `campaign.archived` event records the change.
    /// Nothing it recorded is removed, and its hooks, evaluations and
    /// questions work as before: archiving hides a finished campaign from
    /// the lists, it does not stop an agent still attached to it. The
    /// campaign's row as it is now; doing it twice records nothing more.
    pub async fn archive_campaign(&self, id: &str, archived: bool) -> Result<CampaignRow> {
        self.campaign(id).await?;
        let now = crate::time::now();
        let at = archived.then_some(now.as_str());
        if self.inner.store.set_campaign_archived(id, at).await? {
            self.record_event(id, None, None, Event::CampaignArchived { archived }).await?;
            tracing::info!(campaign = %id, archived, "campaign archive mark changed");
        }
        self.inner.campaigns.lock().expect("campaign cache poisoned").remove(id);
        let row = self.inner.store.get_campaign(id).await?.ok_or_else(|| SupervisorError::NotFound(id.to_string()))?;
        Ok(row)
    }
}

/// The next piece of moment work: none once `stop` is cancelled and
/// nothing is queued.
async fn next_moment_work(
    inbox: &mut tokio::sync::mpsc::UnboundedReceiver<MomentWork>,
    stop: &CancellationToken,
) -> Option<MomentWork> {
    tokio::select! {
        biased;
        work = inbox.recv() => work,
        _ = stop.cancelled() => None,
    }
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
