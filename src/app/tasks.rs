//! The application's background tasks (issue #33): each one is spawned
//! through [`Supervisor::spawn_task`], which names it (a `task` span with
//! the name, so its log lines say which task wrote them) and tracks it on
//! one [`TaskTracker`]. Each stops when the daemon's shutdown token is
//! cancelled, or, for agent runs and transcript followers, when
//! [`Supervisor::stop_everything`] cancels them once the HTTP server has
//! drained. At shutdown the daemon waits for all of them, for a bounded
//! time, with [`Supervisor::wait_for_tasks`], and names those still running
//! if that time runs out.
//!
//! Short per-request work (`spawn_blocking` for git or hashing, the
//! harness's output readers) is not a background task and is not tracked.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::Supervisor;

/// How long the daemon waits at shutdown for its background tasks.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

/// The log line written when [`SHUTDOWN_WAIT`] runs out with tasks running.
pub const STILL_RUNNING: &str = "background tasks still running at shutdown";

/// The log line written when every background task stopped in time.
pub const ALL_STOPPED: &str = "every background task stopped";

/// The tracker, the shutdown token, and the names of the tasks running.
pub(super) struct Tasks {
    tracker: TaskTracker,
    shutdown: CancellationToken,
    running: Arc<Mutex<BTreeMap<u64, String>>>,
    next: AtomicU64,
}

/// Takes a task off the running list when it ends (or panics, or is dropped).
struct Unlist {
    running: Arc<Mutex<BTreeMap<u64, String>>>,
    id: u64,
}

impl Drop for Unlist {
    fn drop(&mut self) {
        if let Ok(mut r) = self.running.lock() {
            r.remove(&self.id);
        }
    }
}

impl Tasks {
    pub(super) fn new(shutdown: CancellationToken) -> Tasks {
        Tasks { tracker: TaskTracker::new(), shutdown, running: Default::default(), next: AtomicU64::new(0) }
    }

    /// Spawns `task` on the tracker, in a span `task{name=…}` of its own
    /// (not the caller's: a run started by a request outlives it).
    pub(super) fn spawn<F>(&self, name: String, task: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.running.lock().expect("task list poisoned").insert(id, name.clone());
        let unlist = Unlist { running: self.running.clone(), id };
        let span = tracing::info_span!(parent: None, "task", name = %name);
        span.follows_from(tracing::Span::current());
        self.tracker.spawn(
            async move {
                let _unlist = unlist;
                tracing::debug!("task started");
                task.await;
                tracing::debug!("task ended");
            }
            .instrument(span),
        )
    }

    /// The names of the tasks running now, oldest first.
    pub(super) fn running(&self) -> Vec<String> {
        self.running.lock().expect("task list poisoned").values().cloned().collect()
    }

    /// Closes the tracker and waits up to `limit` for every task to end;
    /// the names of the tasks still running when it runs out.
    pub(super) async fn wait(&self, limit: Duration) -> Result<(), Vec<String>> {
        self.tracker.close();
        match tokio::time::timeout(limit, self.tracker.wait()).await {
            Ok(()) => {
                tracing::info!("{ALL_STOPPED}");
                Ok(())
            }
            Err(_) => {
                let names = self.running();
                tracing::warn!(tasks = ?names, waited_s = limit.as_secs_f64(), "{STILL_RUNNING}");
                Err(names)
            }
        }
    }
}

impl Supervisor {
    /// Runs `task` in the background, named `name` (its log lines carry a
    /// `task{name=…}` span) and tracked, so that the daemon waits for it at
    /// shutdown. A long-lived task must end once [`Self::shutdown_token`]
    /// is cancelled (runs and transcript followers: once
    /// [`Self::stop_everything`] has cancelled theirs).
    pub fn spawn_task<F>(&self, name: impl Into<String>, task: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.inner.tasks.spawn(name.into(), task)
    }

    /// The daemon's shutdown token.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.tasks.shutdown
    }

    /// The names of the background tasks running now.
    pub fn running_tasks(&self) -> Vec<String> {
        self.inner.tasks.running()
    }

    /// At shutdown, after the token is cancelled and
    /// [`Self::stop_everything`]: waits up to `limit` for every background
    /// task to end; logs (and returns) the names of those still running if
    /// it runs out.
    pub async fn wait_for_tasks(&self, limit: Duration) -> Result<(), Vec<String>> {
        self.inner.tasks.wait(limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tasks_that_honour_the_token_are_waited_for_and_a_stuck_one_is_named() {
        let token = CancellationToken::new();
        let tasks = Tasks::new(token.clone());
        for name in ["watch-a", "watch-b"] {
            let t = token.clone();
            tasks.spawn(name.to_string(), async move { t.cancelled().await });
        }
        tasks.spawn("short".to_string(), async {});
        tokio::task::yield_now().await;
        assert_eq!(tasks.running(), ["watch-a", "watch-b"], "a task that ended is off the list");
        token.cancel();
        assert_eq!(tasks.wait(Duration::from_secs(10)).await, Ok(()));
        assert!(tasks.running().is_empty());

        let token = CancellationToken::new();
        let tasks = Tasks::new(token.clone());
        let t = token.clone();
        tasks.spawn("polite".to_string(), async move { t.cancelled().await });
        tasks.spawn("stuck".to_string(), std::future::pending());
        token.cancel();
        assert_eq!(tasks.wait(Duration::from_secs(10)).await, Err(vec!["stuck".to_string()]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_that_panics_is_taken_off_the_list() {
        let tasks = Tasks::new(CancellationToken::new());
        tasks.spawn("boom".to_string(), async { panic!("on purpose") });
        assert_eq!(tasks.wait(Duration::from_secs(1)).await, Ok(()));
        assert!(tasks.running().is_empty());
    }
}
