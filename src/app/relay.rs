//! The PostgreSQL event relay: the events other daemons record, shown to
//! this daemon's live watchers (skipping the ones it published itself).

use tokio_util::sync::CancellationToken;

use crate::store::live::Announced;

use super::Supervisor;

/// The last [`RecentIds::KEEP`] ids pushed, looked up by hash (the relay
/// asks for every event any daemon announces).
#[derive(Default)]
pub(super) struct RecentIds {
    order: std::collections::VecDeque<i64>,
    set: std::collections::HashSet<i64>,
}

impl RecentIds {
    const KEEP: usize = 8192;

    pub(super) fn push(&mut self, id: i64) {
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

/// How long an announced event id waits before the relay looks it up
/// (unless this daemon published it meanwhile).
const RELAY_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

impl Supervisor {
    /// On PostgreSQL, shows the events other daemons record to this
    /// daemon's live watchers (the console's stream), until `stop`: each
    /// daemon announces what it records (LISTEN/NOTIFY, see
    /// [`crate::store::live`]); a question another daemon queued is looked
    /// for at the next hook call here. Nothing else is done
    /// with them here: the daemon that recorded an event acts on it.
    pub fn spawn_event_relay(&self, stop: CancellationToken) {
        let sup = self.clone();
        self.spawn_task("event-relay", async move {
            while !stop.is_cancelled() {
                let listening = tokio::select! {
                    _ = stop.cancelled() => return,
                    l = sup.inner.store.listen_events() => l,
                };
                let mut listener = match listening {
                    Ok(Some(l)) => l,
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, "listening for other daemons' events; retrying");
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
                        }
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
