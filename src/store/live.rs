//! What the store tells, and remembers, beyond its tables, so that the hot
//! path of a hook call costs one insert:
//!
//! - [`Announcer`]: on PostgreSQL, the ids of the events this daemon
//!   records are announced to the other daemons (NOTIFY on
//!   [`EVENTS_CHANNEL`]) in batches, from a connection of their own and
//!   after the insert committed. A trigger announcing each row inside the
//!   inserting transaction serialized every commit behind PostgreSQL's
//!   notification lock and halved the insert rate with ten writers.
//! - [`QueuedHint`]: whether a campaign is known to have no queued question,
//!   so that a hook call does not look for one to deliver on every event.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;

/// The channel every daemon listens on.
pub const EVENTS_CHANNEL: &str = "gadfly_events";

/// One line of an announcement: an event recorded, or a question queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Announced {
    /// `campaign id`
    Event { campaign_id: String, id: i64 },
    /// `q campaign origin`: a question queued, by the store instance named
    /// `origin` (its [`crate::store::Store::instance`]), so that a daemon
    /// can tell its own questions from another's. Older daemons wrote
    /// `q campaign`: no origin, read as another daemon's.
    Question { campaign_id: String, origin: Option<String> },
}

impl Announced {
    fn line(&self) -> String {
        match self {
            Announced::Event { campaign_id, id } => format!("{campaign_id} {id}"),
            Announced::Question { campaign_id, origin: Some(o) } => format!("q {campaign_id} {o}"),
            Announced::Question { campaign_id, origin: None } => format!("q {campaign_id}"),
        }
    }

    /// Reads the lines of a notification's payload; what it cannot read is
    /// skipped (another version of gadfly, say).
    pub fn parse(payload: &str) -> Vec<Announced> {
        payload
            .lines()
            .filter_map(|l| {
                let (a, b) = l.trim().split_once(' ')?;
                if a == "q" {
                    let (campaign_id, origin) = match b.split_once(' ') {
                        Some((c, o)) => (c, Some(o.trim().to_string())),
                        None => (b, None),
                    };
                    return Some(Announced::Question { campaign_id: campaign_id.to_string(), origin });
                }
                Some(Announced::Event { campaign_id: a.to_string(), id: b.parse().ok()? })
            })
            .collect()
    }
}

/// PostgreSQL caps a notification's payload below 8,000 bytes.
const MAX_PAYLOAD: usize = 7000;
/// Announcements waiting beyond this are dropped (the database is down):
/// the relay is a live view, the events themselves are in the table.
const BACKLOG: usize = 16_384;

/// How long the first announcement of a batch waits for company. The
/// other daemons' live views lag by this much at most.
const LINGER: Duration = Duration::from_millis(5);

/// Sends announcements from a task of its own; cloning shares it. The
/// task is the store's: [`Announcer::close`] (from `Store::close`) ends it.
#[derive(Clone)]
pub struct Announcer {
    tx: mpsc::Sender<Announced>,
    stop: tokio_util::sync::CancellationToken,
    task: std::sync::Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

/// How long [`Announcer::close`] waits for the last announcements.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

impl Announcer {
    /// Starts the task that announces on `url`'s database.
    pub fn start(url: String) -> Announcer {
        let (tx, rx) = mpsc::channel(BACKLOG);
        let stop = tokio_util::sync::CancellationToken::new();
        let span = tracing::info_span!(parent: None, "task", name = "event-announcer");
        let task = tokio::spawn(tracing::Instrument::instrument(announce(url, rx, stop.clone()), span));
        Announcer { tx, stop, task: std::sync::Arc::new(Mutex::new(Some(task))) }
    }

    /// Announces what is already handed over, then ends the task (waiting
    /// for it at most [`CLOSE_WAIT`]; a task still connecting is aborted).
    pub async fn close(&self) {
        self.stop.cancel();
        let task = self.task.lock().expect("announcer task poisoned").take();
        if let Some(mut task) = task {
            if tokio::time::timeout(CLOSE_WAIT, &mut task).await.is_err() {
                task.abort();
            }
        }
    }

    pub fn send(&self, a: Announced) {
        // Full (the database is unreachable) or closed: drop, see BACKLOG.
        let _ = self.tx.try_send(a);
    }
}

async fn announce(url: String, mut rx: mpsc::Receiver<Announced>, stop: tokio_util::sync::CancellationToken) {
    use sqlx::Connection;
    let mut conn: Option<sqlx::PgConnection> = None;
    let mut batch: Vec<Announced> = Vec::new();
    loop {
        if batch.is_empty() {
            // Once stopped, what is already waiting is still announced.
            let next = tokio::select! {
                a = rx.recv() => a,
                _ = stop.cancelled() => rx.try_recv().ok(),
            };
            match next {
                Some(a) => batch.push(a),
                None => return,
            }
            // A moment more gathers what a busy session records next into
            // the same notification: each one costs a statement here and a
            // wake-up in every listening daemon.
            if !stop.is_cancelled() {
                tokio::time::sleep(LINGER).await;
            }
        }
        // Whatever else is already waiting goes in the same notification.
        while batch.len() < 512 {
            match rx.try_recv() {
                Ok(a) => batch.push(a),
                Err(_) => break,
            }
        }
        if conn.is_none() {
            match sqlx::PgConnection::connect(&url).await {
                Ok(mut c) => {
                    // Announcements are not durable anyway: never wait for
                    // their commit to reach the disk.
                    if sqlx::query("set synchronous_commit = off").execute(&mut c).await.is_ok() {
                        conn = Some(c);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "connecting to announce events to other daemons; retrying");
                }
            }
            if conn.is_none() {
                batch.clear();
                if stop.is_cancelled() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        }
        let c = conn.as_mut().expect("connected above");
        for payload in payloads(&batch) {
            if let Err(e) =
                sqlx::query("select pg_notify($1, $2)").bind(EVENTS_CHANNEL).bind(&payload).execute(&mut *c).await
            {
                tracing::warn!(error = %e, "announcing events to other daemons");
                conn = None;
                break;
            }
        }
        batch.clear();
    }
}

/// The batch as notification payloads, each under [`MAX_PAYLOAD`] bytes.
fn payloads(batch: &[Announced]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for a in batch {
        let line = a.line();
        if !cur.is_empty() && cur.len() + 1 + line.len() > MAX_PAYLOAD {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(&line);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Which campaigns are known to have no queued question. Every question
/// queued (here, or announced by another daemon) moves a generation on; a
/// lookup that found none records the generation it started at, so a
/// question queued while it ran is never hidden.
#[derive(Default)]
pub struct QueuedHint {
    generation: AtomicU64,
    none_since: Mutex<HashMap<String, u64>>,
}

impl QueuedHint {
    /// The generation to pass to [`QueuedHint::found_none`] after a lookup.
    pub fn before_lookup(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// A lookup begun at `generation` found no queued question.
    pub fn found_none(&self, campaign_id: &str, generation: u64) {
        let mut m = self.none_since.lock().expect("queued hint poisoned");
        if m.len() > 10_000 {
            m.clear();
        }
        m.insert(campaign_id.to_string(), generation);
    }

    /// A question was queued for the campaign (or may have been).
    pub fn queued(&self, campaign_id: &str) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.none_since.lock().expect("queued hint poisoned").remove(campaign_id);
    }

    /// True when the campaign certainly has no queued question.
    pub fn surely_none(&self, campaign_id: &str) -> bool {
        let now = self.generation.load(Ordering::SeqCst);
        self.none_since.lock().expect("queued hint poisoned").get(campaign_id) == Some(&now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_round_trip_and_split_under_the_payload_cap() {
        let batch: Vec<Announced> = (0..2000)
            .map(|i| Announced::Event { campaign_id: format!("campaign-{}", i % 7), id: i })
            .chain([
                Announced::Question { campaign_id: "campaign-3".into(), origin: Some("0a1b2c3d4e5f6071".into()) },
                Announced::Question { campaign_id: "campaign-4".into(), origin: None },
            ])
            .collect();
        let parts = payloads(&batch);
        assert!(parts.len() > 1, "2000 lines do not fit one notification");
        assert!(parts.iter().all(|p| p.len() <= MAX_PAYLOAD));
        let back: Vec<Announced> = parts.iter().flat_map(|p| Announced::parse(p)).collect();
        assert_eq!(back, batch);
        assert_eq!(Announced::parse("junk\nc 12x\n\nc 5"), vec![Announced::Event { campaign_id: "c".into(), id: 5 }]);
    }

    #[test]
    fn a_question_queued_during_a_lookup_is_not_hidden() {
        let h = QueuedHint::default();
        assert!(!h.surely_none("c"), "nothing known yet");
        let g = h.before_lookup();
        h.found_none("c", g);
        assert!(h.surely_none("c"));
        // A lookup starts, a question is queued meanwhile, the lookup ends empty.
        let g = h.before_lookup();
        h.queued("c");
        h.found_none("c", g);
        assert!(!h.surely_none("c"), "the question queued meanwhile must be looked for");
        // A question for another campaign also moves the generation on.
        let g = h.before_lookup();
        h.found_none("c", g);
        h.queued("d");
        assert!(!h.surely_none("c"));
    }
}
