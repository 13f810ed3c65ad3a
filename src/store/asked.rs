//! How often each bank id was asked in a campaign, kept in memory between
//! question picks. Selection needs it at every pick; counting it from the
//! questions table costs more the longer a campaign runs (every question of
//! the campaign is read), so it is read once and then kept up to date by
//! this daemon's own queueing. A question another daemon queues (announced
//! on PostgreSQL, with the announcing store's name, so that a daemon skips
//! its own) drops the campaign's entry, and the next pick reads it again,
//! on the index that covers the read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::bank::select::AskedHere;

/// A campaign's asks: one entry per bank id, by latest ask, with the id
/// of that latest question; and how many questions it was asked in all
/// (a person's own, without a bank id, included).
#[derive(Debug, Clone, Default)]
struct Asks {
    by_id: Vec<(AskedHere, i64)>,
    total: usize,
}

#[derive(Default)]
pub struct AskedCache {
    campaigns: Mutex<HashMap<String, Asks>>,
    /// Bumped by every question queued or announced: a read that began
    /// before one may have missed it, and is not kept.
    generation: AtomicU64,
}

/// Campaigns remembered at most; past it the cache starts again empty.
const MAX_CAMPAIGNS: usize = 10_000;

impl AskedCache {
    /// The asks of a campaign, if known.
    pub fn get(&self, campaign_id: &str) -> Option<(Vec<AskedHere>, usize)> {
        let m = self.campaigns.lock().expect("asked cache poisoned");
        m.get(campaign_id).map(|a| (a.by_id.iter().map(|(h, _)| h.clone()).collect(), a.total))
    }

    /// The generation to pass to [`AskedCache::store`], taken before a read.
    pub fn before_read(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The asks read from the database: `rows` is (bank id, times, latest
    /// question id) for the ids asked, by latest ask; `total` counts all.
    /// Kept only when no question was queued since the read began.
    pub fn store(&self, campaign_id: &str, rows: Vec<(AskedHere, i64)>, total: usize, generation: u64) {
        let mut m = self.campaigns.lock().expect("asked cache poisoned");
        if self.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        if m.len() >= MAX_CAMPAIGNS {
            m.clear();
        }
        m.insert(campaign_id.to_string(), Asks { by_id: rows, total });
    }

    /// This daemon queued question `question_id`; a campaign not read yet
    /// stays unknown (its first pick reads it whole).
    pub fn queued(&self, campaign_id: &str, bank_id: Option<&str>, question_id: i64) {
        let mut m = self.campaigns.lock().expect("asked cache poisoned");
        self.generation.fetch_add(1, Ordering::SeqCst);
        let Some(asks) = m.get_mut(campaign_id) else { return };
        asks.total += 1;
        let Some(bank_id) = bank_id else { return };
        let times = match asks.by_id.iter().position(|(h, _)| h.bank_id == bank_id) {
            Some(i) => asks.by_id.remove(i).0.times + 1,
            None => 1,
        };
        asks.by_id.push((AskedHere { bank_id: bank_id.to_string(), times }, question_id));
        // Two questions queued at once may arrive here out of id order.
        asks.by_id.sort_by_key(|(_, latest)| *latest);
    }

    /// Someone else may have queued a question: read the campaign again.
    pub fn forget(&self, campaign_id: &str) {
        let mut m = self.campaigns.lock().expect("asked cache poisoned");
        self.generation.fetch_add(1, Ordering::SeqCst);
        m.remove(campaign_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asks(ids: &[(&str, usize, i64)]) -> Vec<(AskedHere, i64)> {
        ids.iter().map(|(id, times, latest)| (AskedHere { bank_id: id.to_string(), times: *times }, *latest)).collect()
    }

    #[test]
    fn asks_are_kept_up_to_date_in_id_order_and_a_stale_read_is_not_kept() {
        let c = AskedCache::default();
        c.queued("c", Some("a"), 1);
        assert!(c.get("c").is_none(), "a campaign not read stays unknown");
        let g = c.before_read();
        c.store("c", asks(&[("a", 2, 3), ("b", 1, 5)]), 4, g);
        c.queued("c", Some("a"), 9);
        c.queued("c", None, 10);
        // Queued at once, arriving out of order: b's ask (7) is older than a's (9).
        c.queued("c", Some("b"), 7);
        let (ids, total) = c.get("c").unwrap();
        assert_eq!(ids, AskedHere::from_sequence(&["b", "a", "a", "b", "a"]));
        assert_eq!(total, 7);
        // A read that a queued question overtook is dropped, not kept.
        c.forget("c");
        let g = c.before_read();
        c.queued("c", Some("z"), 11);
        c.store("c", asks(&[("a", 3, 9)]), 6, g);
        assert!(c.get("c").is_none());
    }
}
