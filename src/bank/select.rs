//! Picking questions for a moment: only entries that apply to the campaign
//! and fit the moment; never one asked in this campaign while a fresh one
//! remains (else the one asked longest ago); groups that fit what failed
//! first, then groups used least; among those, the entry with the best
//! learned yield, by Thompson sampling over "followed by a gain" so that
//! rarely asked entries still get explored. Deterministic for a seed.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_distr::{Beta, Distribution};
use serde::Serialize;

use super::learn::EntryStats;
use super::Entry;
use crate::campaign::CampaignSpec;

pub struct Request<'a> {
    pub moment: &'a str,
    pub spec: &'a CampaignSpec,
    /// The bank ids asked in this campaign, each once with how often,
    /// ordered by their latest ask, oldest first.
    pub asked: &'a [AskedHere],
    /// Groups that fit what is happening, best first.
    pub prefer: &'a [&'a str],
    pub stats: &'a HashMap<String, EntryStats>,
    pub seed: u64,
}

/// A bank id asked in a campaign, and how many times. A campaign asked
/// thousands of questions has a few dozen of these: selection reads and
/// keeps one per id, not one string per question asked (it did, and a pick
/// cost more the longer a campaign ran; BENCHMARKS.md, memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskedHere {
    pub bank_id: String,
    pub times: usize,
}

impl AskedHere {
    /// The asks of `ids` (oldest first), one per id, by latest ask.
    pub fn from_sequence<S: AsRef<str>>(ids: &[S]) -> Vec<AskedHere> {
        let mut out: Vec<AskedHere> = Vec::new();
        for id in ids {
            let times = match out.iter().position(|a| a.bank_id == id.as_ref()) {
                Some(i) => out.remove(i).times + 1,
                None => 1,
            };
            out.push(AskedHere { bank_id: id.as_ref().to_string(), times });
        }
        out
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    pub entry: Entry,
    /// The Thompson sample that ranked it (higher is better).
    pub sample: f64,
    pub asks: u32,
    pub gains: u32,
    pub asked_here: bool,
}

/// Every applicable entry for the moment, best first.
pub fn rank(entries: &[Entry], req: &Request<'_>) -> Vec<Choice> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(req.seed);
    let group_of: HashMap<&str, &str> = entries.iter().map(|e| (e.id.as_str(), e.group.as_str())).collect();
    let mut group_uses: HashMap<&str, usize> = HashMap::new();
    for a in req.asked {
        if let Some(g) = group_of.get(a.bank_id.as_str()) {
            *group_uses.entry(g).or_default() += a.times;
        }
    }
    let mut ranked: Vec<(Choice, (bool, usize, usize, usize))> = entries
        .iter()
        .filter(|e| e.fits(req.moment) && e.applies_to(req.spec))
        .map(|e| {
            let s = req.stats.get(&e.id).cloned().unwrap_or_default();
            let beta = Beta::new(1.0 + s.gains as f64, 1.0 + (s.asks.saturating_sub(s.gains)) as f64);
            let sample = beta.map(|b| b.sample(&mut rng)).unwrap_or_else(|_| rng.gen());
            let last_ask = req.asked.iter().position(|a| a.bank_id == e.id);
            let preferred = req.prefer.iter().position(|p| *p == e.group).unwrap_or(req.prefer.len());
            let uses = group_uses.get(e.group.as_str()).copied().unwrap_or(0);
            let key = (last_ask.is_some(), last_ask.unwrap_or(0), preferred, uses);
            (Choice { entry: e.clone(), sample, asks: s.asks, gains: s.gains, asked_here: last_ask.is_some() }, key)
        })
        .collect();
    ranked.sort_by(|a, b| a.1.cmp(&b.1).then(b.0.sample.total_cmp(&a.0.sample)));
    ranked.into_iter().map(|(c, _)| c).collect()
}

/// The best entry for the moment, if any applies.
pub fn pick(entries: &[Entry], req: &Request<'_>) -> Option<Choice> {
    rank(entries, req).into_iter().next()
}

/// Up to `n` suggestions for a person, from different groups where possible.
pub fn suggest(entries: &[Entry], req: &Request<'_>, n: usize) -> Vec<Choice> {
    let ranked = rank(entries, req);
    let mut out: Vec<Choice> = Vec::new();
    for c in &ranked {
        if out.len() < n && !out.iter().any(|o| o.entry.group == c.entry.group) {
            out.push(c.clone());
        }
    }
    for c in ranked {
        if out.len() >= n {
            break;
        }
        if !out.iter().any(|o| o.entry.id == c.entry.id) {
            out.push(c);
        }
    }
    out
}

/// A seed that is stable for a campaign and changes with each question.
pub fn seed_for(campaign_id: &str, asked: usize) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (campaign_id, asked).hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::Applies;

    fn e(id: &str, group: &str, moments: &[&str], applies: Applies) -> Entry {
        Entry {
            id: id.into(),
            group: group.into(),
            text: format!("{id}?"),
            moments: moments.iter().map(|m| m.to_string()).collect(),
            level: "measurement".into(),
            applies,
            provenance: "unverified".into(),
            evidence: None,
            source: "s".into(),
            rationale: "r".into(),
        }
    }

    fn spec(arch: Option<&str>, comparison: bool) -> CampaignSpec {
        let dir = tempfile::tempdir().unwrap();
        std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap();
        let mut text = String::new();
        if let Some(a) = arch {
            text.push_str(&format!("architecture = '{a}'\n"));
        }
        if comparison {
            text.push_str("comparison = 'vendor library'\n");
        }
        text.push_str("name='t'\nworkspace='.'\n[harness]\nrun='x {results}'\nscenarios=['a']\n");
        crate::campaign::parse(&text, "t.toml", dir.path()).unwrap()
    }

    fn bank() -> Vec<Entry> {
        let none = Applies::default();
        vec![
            e("measure-001", "measurement", &["plateau"], none.clone()),
            e("measure-002", "measurement", &["plateau"], none.clone()),
            e("bound-001", "bound", &["plateau"], none.clone()),
            e("gap-001", "gap_analysis", &["plateau", "limit_claim"], none.clone()),
            e("compare-001", "comparison", &["plateau"], Applies { comparison: true, ..none.clone() }),
            e(
                "arch-001",
                "architecture",
                &["plateau"],
                Applies { architectures: vec!["hopper".into()], ..none.clone() },
            ),
            e("algo-009", "algorithm_family", &["plateau"], Applies { domains: vec!["qr".into()], ..none.clone() }),
            e("correct-001", "correctness", &["correctness_dismissal"], none),
        ]
    }

    fn ids(c: &[Choice]) -> Vec<&str> {
        c.iter().map(|c| c.entry.id.as_str()).collect()
    }

    #[test]
    fn honours_applicability() {
        let stats = HashMap::new();
        let plain = spec(None, false);
        let req = Request { moment: "plateau", spec: &plain, asked: &[], prefer: &[], stats: &stats, seed: 1 };
        let got = ids(&rank(&bank(), &req)).into_iter().map(String::from).collect::<Vec<_>>();
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(!got.iter().any(|i| i.starts_with("compare") || i.starts_with("arch") || i == "algo-009"));
        let hopper = spec(Some("hopper"), true);
        let req = Request { moment: "plateau", spec: &hopper, asked: &[], prefer: &[], stats: &stats, seed: 1 };
        let got = rank(&bank(), &req);
        assert!(ids(&got).contains(&"compare-001") && ids(&got).contains(&"arch-001"));
    }

    #[test]
    fn honours_recency_and_group_spread() {
        let stats = HashMap::new();
        let s = spec(None, false);
        let mut asked: Vec<String> = Vec::new();
        let mut order = Vec::new();
        for round in 0..6 {
            let history = AskedHere::from_sequence(&asked);
            let req = Request { moment: "plateau", spec: &s, asked: &history, prefer: &[], stats: &stats, seed: round };
            let c = pick(&bank(), &req).unwrap();
            order.push(c.entry.id.clone());
            asked.push(c.entry.id);
        }
        // The first three come from three different groups; nothing repeats
        // before all four applicable entries were asked; then the oldest.
        let groups: std::collections::HashSet<&str> = order[..3].iter().map(|i| i.split('-').next().unwrap()).collect();
        assert_eq!(groups.len(), 3, "{order:?}");
        let first_four: std::collections::HashSet<&String> = order[..4].iter().collect();
        assert_eq!(first_four.len(), 4, "{order:?}");
        assert_eq!(order[4], order[0], "{order:?}");
        assert_eq!(order[5], order[1], "{order:?}");
    }

    /// Among entries not yet asked, the group asked least goes first, each
    /// ask counted (an id asked three times is three uses of its group).
    #[test]
    fn every_ask_of_an_id_counts_for_its_group() {
        let stats = HashMap::new();
        let s = spec(None, false);
        let mut entries = bank();
        entries.push(e("bound-002", "bound", &["plateau"], Applies::default()));
        let order = |asks: &[&str]| {
            let history = AskedHere::from_sequence(asks);
            let req = Request { moment: "plateau", spec: &s, asked: &history, prefer: &[], stats: &stats, seed: 5 };
            ids(&rank(&entries, &req))[..3].iter().map(|i| i.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(
            order(&["measure-001", "bound-001", "measure-001", "measure-001"]),
            ["gap-001", "bound-002", "measure-002"]
        );
        assert_eq!(
            order(&["bound-001", "measure-001", "bound-001", "bound-001"]),
            ["gap-001", "measure-002", "bound-002"]
        );
        assert_eq!(
            AskedHere::from_sequence(&["a", "b", "a", "c", "b"]),
            [("a", 2), ("c", 1), ("b", 2)].map(|(id, times)| AskedHere { bank_id: id.into(), times }),
            "one per id, by latest ask"
        );
    }

    #[test]
    fn prefers_groups_that_fit_then_learned_yield_deterministically() {
        let s = spec(None, false);
        let mut stats = HashMap::new();
        stats.insert("measure-002".to_string(), EntryStats { asks: 40, gains: 30, ..Default::default() });
        stats.insert("measure-001".to_string(), EntryStats { asks: 40, gains: 1, ..Default::default() });
        let req = Request { moment: "plateau", spec: &s, asked: &[], prefer: &["measurement"], stats: &stats, seed: 7 };
        let first = pick(&bank(), &req).unwrap();
        assert_eq!(first.entry.id, "measure-002", "the high-yield entry of the preferred group wins");
        let again = pick(&bank(), &req).unwrap();
        assert_eq!(again.entry.id, first.entry.id, "same seed, same choice");
        // Exploration: an entry never asked still wins sometimes over a proven poor one.
        let mut wins = 0;
        let mut stats2 = HashMap::new();
        stats2.insert("measure-001".to_string(), EntryStats { asks: 20, gains: 2, ..Default::default() });
        for seed in 0..200 {
            let req =
                Request { moment: "plateau", spec: &s, asked: &[], prefer: &["measurement"], stats: &stats2, seed };
            if pick(&bank(), &req).unwrap().entry.id == "measure-002" {
                wins += 1;
            }
        }
        assert!(wins > 120 && wins < 200, "unasked entry explored {wins}/200 times");
    }

    #[test]
    fn suggestions_spread_over_groups() {
        let stats = HashMap::new();
        let s = spec(None, false);
        let req = Request { moment: "plateau", spec: &s, asked: &[], prefer: &[], stats: &stats, seed: 3 };
        let sug = suggest(&bank(), &req, 3);
        let groups: std::collections::HashSet<&str> = sug.iter().map(|c| c.entry.group.as_str()).collect();
        assert_eq!((sug.len(), groups.len()), (3, 3));
    }
}
