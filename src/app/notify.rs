//! Notifications delivered (issue #38): the events this daemon records are
//! handed to one background task, the notifier (`notifier`), by a channel
//! send in [`Supervisor::publish`]'s path, so that recording an event, and
//! the hook call that records it, never waits on a webhook. The notifier
//! picks the events that make a notification (`crate::notify`) for the
//! campaign's `[notify]` webhooks (the spec's, or those set since from the
//! API), and each delivery runs as a task of its own (`notify CAMPAIGN
//! #EVENT → WEBHOOK`): signed, retried with backoff up to the webhook's
//! `max_attempts`, every attempt recorded as a `notify.delivery` event,
//! stopped at shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::{Result, Supervisor, SupervisorError};
use crate::campaign::{check_notify, NotifySpec, WebhookSpec};
use crate::events::{kind, DeliveryStatus, Event, NotifyDelivery};
use crate::notify::{self as n, About, Notification};
use crate::store::EventRow;

/// How long the notifier trusts the `[notify]` it read for a campaign (a
/// change from another daemon's API shows within this).
const CONFIG_TTL: Duration = Duration::from_secs(30);

/// At most this many deliveries in flight at once; more wait their turn.
const IN_FLIGHT: usize = 32;

/// A campaign's notification settings as the notifier keeps them.
struct Settings {
    name: String,
    notify: NotifySpec,
    console_url: String,
    read: Instant,
}

impl Supervisor {
    /// The campaign's `[notify]` now: the one last set from the API, else
    /// the spec's; and which (`api` or `spec`).
    pub async fn notify_config(&self, campaign_id: &str) -> Result<(NotifySpec, &'static str)> {
        let (_, spec) = self.campaign(campaign_id).await?;
        let set = self.store().recent_events(campaign_id, kind::NOTIFY_CONFIGURED, 1).await?;
        if let Some(e) = set.first() {
            match serde_json::from_value::<NotifySpec>(e.payload["notify"].clone()) {
                Ok(n) => return Ok((n, "api")),
                Err(err) => {
                    tracing::warn!(campaign = %campaign_id, error = %err, "a notify.configured event does not decode; using the spec's [notify]")
                }
            }
        }
        Ok((spec.notify, "spec"))
    }

    /// Replaces the campaign's `[notify]` (from the API, the console): the
    /// same checks as the spec's; recorded as `notify.configured`. A new
    /// webhook (after the first `kept`, the current ones kept as they are)
    /// whose secret the daemon's environment lacks is refused: it would
    /// never be sent (never unsigned), and the daemon reads its environment
    /// once, when it starts.
    pub async fn set_notify(&self, campaign_id: &str, notify: NotifySpec, kept: usize) -> Result<()> {
        self.campaign(campaign_id).await?;
        let problems = check_notify(&notify);
        if !problems.is_empty() {
            let text: Vec<String> = problems.into_iter().map(|(f, m)| format!("field `{f}`: {m}")).collect();
            return Err(SupervisorError::Invalid(text.join("; ")));
        }
        let lacking = |name: &str| std::env::var_os(name).is_none_or(|v| v.is_empty());
        if let Some(w) = notify.webhooks.iter().skip(kept).find(|w| lacking(&w.secret_env)) {
            return Err(SupervisorError::Conflict(format!(
                "the daemon's environment has no `{var}`, the secret of the webhook to {url}: set `{var}` in the \
                 environment of `gadfly serve` before it starts (`{var}=... gadfly serve`, or `Environment={var}=...` \
                 in its service unit), restart the daemon, then send this again; gadfly never sends a webhook unsigned",
                var = w.secret_env,
                url = n::redact_url(&w.url),
            )));
        }
        let body = serde_json::to_value(&notify).map_err(|e| anyhow::anyhow!(e))?;
        self.record_event(campaign_id, None, None, Event::NotifyConfigured { notify: body }).await?;
        Ok(())
    }

    /// What the console shows: the webhooks (URLs with their paths hidden,
    /// whether the daemon holds each secret) and each one's latest
    /// delivery attempts, newest first.
    pub async fn notify_view(&self, campaign_id: &str) -> Result<Value> {
        let (notify, source) = self.notify_config(campaign_id).await?;
        let attempts = self.store().recent_events(campaign_id, kind::NOTIFY_DELIVERY, 500).await?;
        let webhooks: Vec<Value> = notify
            .webhooks
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let last: Vec<Value> = attempts
                    .iter()
                    .filter(|e| e.payload["webhook"].as_u64() == Some(i as u64))
                    .take(5)
                    .map(|e| {
                        let mut p = e.payload.clone();
                        p["at"] = json!(e.created_at);
                        p
                    })
                    .collect();
                json!({
                    "webhook": i,
                    "url": n::redact_url(&w.url),
                    "events": w.events,
                    "secret_env": w.secret_env,
                    "secret_set": std::env::var_os(&w.secret_env).is_some_and(|v| !v.is_empty()),
                    "max_attempts": w.max_attempts,
                    "timeout_s": w.timeout_s,
                    "last_deliveries": last,
                })
            })
            .collect();
        Ok(json!({
            "source": source,
            "block_streak": notify.block_streak,
            "console_url": notify.console_url,
            "webhooks": webhooks,
            "kinds": crate::campaign::NOTIFY_KINDS.iter().map(|(k, what)| json!({"kind": k, "what": what})).collect::<Vec<_>>(),
        }))
    }

    /// The notifier: a background task (`notifier`) that reads the events
    /// handed to it until the daemon's token is cancelled.
    pub(super) fn spawn_notifier(&self, mut inbox: UnboundedReceiver<EventRow>) {
        let weak = Arc::downgrade(&self.inner);
        let stop = self.shutdown_token().clone();
        self.spawn_task("notifier", async move {
            let client = match reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build() {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, "no HTTP client for notifications; none will be sent");
                    return;
                }
            };
            let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
            let mut settings: HashMap<String, Settings> = HashMap::new();
            let mut streaks: HashMap<String, u32> = HashMap::new();
            loop {
                let ev = tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    ev = inbox.recv() => match ev { Some(ev) => ev, None => break },
                };
                let Some(inner) = weak.upgrade() else { break };
                let sup = Supervisor { inner };
                if ev.kind == kind::NOTIFY_CONFIGURED {
                    settings.remove(&ev.campaign_id);
                    continue;
                }
                let fresh = settings.get(&ev.campaign_id).is_some_and(|s| s.read.elapsed() < CONFIG_TTL);
                if !fresh {
                    match sup.notify_settings(&ev.campaign_id).await {
                        Ok(s) => {
                            settings.insert(ev.campaign_id.clone(), s);
                        }
                        Err(e) => {
                            tracing::warn!(campaign = %ev.campaign_id, error = %e, "reading the campaign's [notify]");
                            continue;
                        }
                    }
                }
                let s = &settings[&ev.campaign_id];
                if s.notify.webhooks.is_empty() {
                    continue;
                }
                let streak = streaks.entry(ev.campaign_id.clone()).or_default();
                let Some(note) = n::notification_of(&ev.kind, &ev.payload, s.notify.block_streak, streak) else {
                    continue;
                };
                for (i, w) in s.notify.webhooks.iter().enumerate() {
                    if w.events.iter().any(|k| k == note.kind) {
                        let d = Delivery {
                            sup: sup.clone(),
                            client: client.clone(),
                            slots: slots.clone(),
                            stop: stop.clone(),
                            webhook: i,
                            spec: w.clone(),
                            note: note.clone(),
                            event: ev.clone(),
                            name: s.name.clone(),
                            console_url: s.console_url.clone(),
                        };
                        let task = format!("notify {} #{} → webhook {i}", ev.campaign_id, ev.id);
                        sup.spawn_task(task, d.run());
                    }
                }
            }
        });
    }

    async fn notify_settings(&self, campaign_id: &str) -> Result<Settings> {
        let (row, _) = self.campaign(campaign_id).await?;
        let (notify, _) = self.notify_config(campaign_id).await?;
        let console_url = notify.console_url.clone().unwrap_or_else(|| self.endpoint().0);
        Ok(Settings { name: row.name, notify, console_url, read: Instant::now() })
    }
}

/// One notification to one webhook, attempted until it is delivered, fails
/// for good, or the daemon stops.
struct Delivery {
    sup: Supervisor,
    client: reqwest::Client,
    slots: Arc<tokio::sync::Semaphore>,
    stop: CancellationToken,
    webhook: usize,
    spec: WebhookSpec,
    note: Notification,
    event: EventRow,
    name: String,
    console_url: String,
}

/// How one attempt went.
enum Attempt {
    Delivered(u16),
    Failed { status: Option<u16>, error: String, again: bool },
}

impl Delivery {
    async fn run(self) {
        let ev = &self.event;
        let id = n::delivery_id(&ev.campaign_id, ev.id, self.webhook);
        let about = About {
            campaign_id: &ev.campaign_id,
            campaign_name: &self.name,
            event_id: ev.id,
            event_kind: &ev.kind,
            session_id: ev.session_id.as_deref(),
            created_at: &ev.created_at,
            payload: &ev.payload,
            console_url: &self.console_url,
        };
        let body = match serde_json::to_vec(&n::body(&self.note, &about, &id)) {
            Ok(b) => b,
            Err(e) => return tracing::warn!(error = %e, "a notification's body"),
        };
        let secret = std::env::var(&self.spec.secret_env).ok().filter(|s| !s.is_empty());
        let max = self.spec.max_attempts.max(1);
        for attempt in 1..=max {
            let outcome = match &secret {
                None => Attempt::Failed {
                    status: None,
                    error: format!(
                        "the daemon's environment has no `{}`, the webhook's secret: nothing was sent",
                        self.spec.secret_env
                    ),
                    again: false,
                },
                Some(secret) => {
                    let slot = tokio::select! {
                        s = self.slots.acquire() => s,
                        _ = self.stop.cancelled() => return,
                    };
                    let Ok(_slot) = slot else { return };
                    tokio::select! {
                        a = self.attempt(secret.as_bytes(), &id, &body) => a,
                        _ = self.stop.cancelled() => {
                            tracing::info!(delivery = %id, attempt, "a notification abandoned at shutdown");
                            return;
                        }
                    }
                }
            };
            let (status, http_status, error, again) = match outcome {
                Attempt::Delivered(code) => (DeliveryStatus::Delivered, Some(code), None, false),
                Attempt::Failed { status, error, again } => {
                    let again = again && attempt < max;
                    (if again { DeliveryStatus::Retrying } else { DeliveryStatus::Failed }, status, Some(error), again)
                }
            };
            let record = NotifyDelivery {
                delivery: id.clone(),
                webhook: self.webhook,
                url: n::redact_url(&self.spec.url),
                notify: self.note.kind.to_string(),
                event_id: ev.id,
                attempt,
                status,
                http_status,
                error,
            };
            if let Err(e) = self.sup.record_event(&ev.campaign_id, None, None, Event::NotifyDelivery(record)).await {
                tracing::warn!(error = %e, "recording a notification's delivery");
            }
            if !again {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(n::backoff(attempt)) => {}
                _ = self.stop.cancelled() => return,
            }
        }
    }

    async fn attempt(&self, secret: &[u8], id: &str, body: &[u8]) -> Attempt {
        let ts =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        let req = self
            .client
            .post(&self.spec.url)
            .timeout(Duration::from_secs(u64::from(self.spec.timeout_s)))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::USER_AGENT, concat!("gadfly/", env!("CARGO_PKG_VERSION")))
            .header(n::TIMESTAMP_HEADER, ts.to_string())
            .header(n::SIGNATURE_HEADER, n::sign(secret, ts, body))
            .header(n::DELIVERY_HEADER, id)
            .header(n::KIND_HEADER, self.note.kind)
            .body(body.to_vec());
        match req.send().await {
            Ok(res) if res.status().is_success() => Attempt::Delivered(res.status().as_u16()),
            Ok(res) => {
                let code = res.status().as_u16();
                Attempt::Failed {
                    status: Some(code),
                    error: format!("HTTP {}", res.status()),
                    again: n::retryable(code),
                }
            }
            Err(e) => {
                let what = if e.is_timeout() {
                    format!("no answer within {} s", self.spec.timeout_s)
                } else {
                    format!("{:#}", anyhow::Error::new(e))
                };
                Attempt::Failed { status: None, error: what, again: true }
            }
        }
    }
}
