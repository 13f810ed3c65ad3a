//! Learned yield: was a question followed by a gain? For each question
//! asked, the objective (geometric-mean speedup) before it is the last
//! evaluation before its delivery; after it, the best evaluation among the
//! next `window` evaluations of the same campaign, stopping at the next
//! question. An entry followed by a gain above the threshold is confirmed
//! by trace, with the campaign and the evaluations as evidence.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone)]
pub struct Asked {
    pub question_id: i64,
    pub campaign_id: String,
    pub bank_id: Option<String>,
    pub delivered_at: String,
    /// The moment it was asked at, where recorded.
    pub moment: Option<String>,
}

#[derive(Debug, Clone)]
pub struct EvalPoint {
    pub id: i64,
    pub campaign_id: String,
    pub created_at: String,
    pub geomean: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attribution {
    pub question_id: i64,
    pub campaign_id: String,
    pub bank_id: Option<String>,
    pub before: Option<f64>,
    pub before_evaluation: Option<i64>,
    pub best_after: Option<f64>,
    pub best_evaluation: Option<i64>,
    /// The evaluations that counted, in order.
    pub window: Vec<i64>,
    pub gain: Option<f64>,
    pub followed_by_gain: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EntryStats {
    pub asks: u32,
    pub gains: u32,
    /// `confirmed` once followed by a gain, else `unverified`.
    pub status: String,
    pub evidence: Vec<String>,
}

pub const DEFAULT_WINDOW: usize = 5;
pub const DEFAULT_THRESHOLD: f64 = 0.05;

/// Attributes each asked question. Timestamps are RFC 3339 UTC strings of
/// one format, so they order as strings.
///
/// Both histories are sorted once per campaign; each question then finds
/// the next question, the evaluation before it and those after it by
/// binary search, so a moment that reads 2,000 questions and 20,000
/// evaluations does not compare every question with every other one and
/// with every evaluation (it did, and a question cycle cost milliseconds
/// of CPU; BENCHMARKS.md, ingestion).
pub fn attribute(asked: &[Asked], evals: &[EvalPoint], window: usize, threshold: f64) -> Vec<Attribution> {
    let mut by_campaign: HashMap<&str, Vec<&EvalPoint>> = HashMap::new();
    for e in evals {
        by_campaign.entry(&e.campaign_id).or_default().push(e);
    }
    for list in by_campaign.values_mut() {
        list.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    }
    let mut questions_by_campaign: HashMap<&str, Vec<&Asked>> = HashMap::new();
    for q in asked {
        questions_by_campaign.entry(&q.campaign_id).or_default().push(q);
    }
    for list in questions_by_campaign.values_mut() {
        list.sort_by(|a, b| a.delivered_at.cmp(&b.delivered_at).then(a.question_id.cmp(&b.question_id)));
    }
    let empty = Vec::new();
    let mut out = Vec::with_capacity(asked.len());
    for q in asked {
        let evs = by_campaign.get(q.campaign_id.as_str()).unwrap_or(&empty);
        let next_question = questions_by_campaign.get(q.campaign_id.as_str()).and_then(|qs| {
            qs.get(qs.partition_point(|o| o.delivered_at <= q.delivered_at)).map(|o| o.delivered_at.as_str())
        });
        // Evaluations up to the delivery come first in `evs`, then the rest.
        let split = evs.partition_point(|e| e.created_at <= q.delivered_at);
        let before = evs[..split].iter().rev().find(|e| e.geomean.is_some());
        let after: Vec<&&EvalPoint> = evs[split..]
            .iter()
            .take_while(|e| next_question.is_none_or(|n| e.created_at.as_str() <= n))
            .take(window)
            .collect();
        let best = after
            .iter()
            .filter(|e| e.geomean.is_some())
            .max_by(|a, b| a.geomean.unwrap().total_cmp(&b.geomean.unwrap()));
        let gain = match (before.and_then(|b| b.geomean), best.and_then(|b| b.geomean)) {
            (Some(b), Some(a)) if b > 0.0 => Some(a / b - 1.0),
            _ => None,
        };
        out.push(Attribution {
            question_id: q.question_id,
            campaign_id: q.campaign_id.clone(),
            bank_id: q.bank_id.clone(),
            before: before.and_then(|b| b.geomean),
            before_evaluation: before.map(|b| b.id),
            best_after: best.and_then(|b| b.geomean),
            best_evaluation: best.map(|b| b.id),
            window: after.iter().map(|e| e.id).collect(),
            gain,
            followed_by_gain: gain.is_some_and(|g| g >= threshold),
        });
    }
    out
}

/// [`stats`] per moment and entry, keyed `moment/bank_id` (selection
/// learns what helps at each moment, not pooled over moments).
pub fn stats_by_moment(asked: &[Asked], attributions: &[Attribution]) -> BTreeMap<String, EntryStats> {
    let moment_of: HashMap<i64, &str> =
        asked.iter().filter_map(|a| Some((a.question_id, a.moment.as_deref()?))).collect();
    let keyed: Vec<Attribution> = attributions
        .iter()
        .filter_map(|a| {
            let m = moment_of.get(&a.question_id)?;
            let mut a = a.clone();
            a.bank_id = Some(format!("{m}/{}", a.bank_id.as_deref()?));
            Some(a)
        })
        .collect();
    stats(&keyed)
}

/// Per bank entry: asks, gains, status and the evidence of each gain.
pub fn stats(attributions: &[Attribution]) -> BTreeMap<String, EntryStats> {
    let mut map: BTreeMap<String, EntryStats> = BTreeMap::new();
    for a in attributions {
        let Some(id) = &a.bank_id else { continue };
        let s = map.entry(id.clone()).or_default();
        s.asks += 1;
        if a.followed_by_gain {
            s.gains += 1;
            s.evidence.push(format!(
                "campaign {}: question {} followed by {:.2}x -> {:.2}x (+{:.0}%), evaluations {} -> {}",
                a.campaign_id,
                a.question_id,
                a.before.unwrap_or(0.0),
                a.best_after.unwrap_or(0.0),
                a.gain.unwrap_or(0.0) * 100.0,
                a.before_evaluation.unwrap_or(0),
                a.best_evaluation.unwrap_or(0)
            ));
        }
    }
    for s in map.values_mut() {
        s.status = if s.gains > 0 { "confirmed" } else { "unverified" }.to_string();
    }
    map
}

#[cfg(test)]
mod tests {
    /// The first, quadratic form of [`attribute`], kept as its oracle.
    fn attribute_naive(asked: &[Asked], evals: &[EvalPoint], window: usize, threshold: f64) -> Vec<Attribution> {
        let mut by_campaign: HashMap<&str, Vec<&EvalPoint>> = HashMap::new();
        for e in evals {
            by_campaign.entry(&e.campaign_id).or_default().push(e);
        }
        for list in by_campaign.values_mut() {
            list.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        }
        let mut questions_by_campaign: HashMap<&str, Vec<&Asked>> = HashMap::new();
        for q in asked {
            questions_by_campaign.entry(&q.campaign_id).or_default().push(q);
        }
        for list in questions_by_campaign.values_mut() {
            list.sort_by(|a, b| a.delivered_at.cmp(&b.delivered_at).then(a.question_id.cmp(&b.question_id)));
        }
        let empty = Vec::new();
        let mut out = Vec::new();
        for q in asked {
            let evs = by_campaign.get(q.campaign_id.as_str()).unwrap_or(&empty);
            let next_question = questions_by_campaign
                .get(q.campaign_id.as_str())
                .and_then(|qs| qs.iter().find(|o| o.delivered_at > q.delivered_at).map(|o| o.delivered_at.clone()));
            let before = evs.iter().filter(|e| e.created_at <= q.delivered_at && e.geomean.is_some()).last();
            let after: Vec<&&EvalPoint> = evs
                .iter()
                .filter(|e| e.created_at > q.delivered_at)
                .filter(|e| next_question.as_ref().is_none_or(|n| &e.created_at <= n))
                .take(window)
                .collect();
            let best = after
                .iter()
                .filter(|e| e.geomean.is_some())
                .max_by(|a, b| a.geomean.unwrap().total_cmp(&b.geomean.unwrap()));
            let gain = match (before.and_then(|b| b.geomean), best.and_then(|b| b.geomean)) {
                (Some(b), Some(a)) if b > 0.0 => Some(a / b - 1.0),
                _ => None,
            };
            out.push(Attribution {
                question_id: q.question_id,
                campaign_id: q.campaign_id.clone(),
                bank_id: q.bank_id.clone(),
                before: before.and_then(|b| b.geomean),
                before_evaluation: before.map(|b| b.id),
                best_after: best.and_then(|b| b.geomean),
                best_evaluation: best.map(|b| b.id),
                window: after.iter().map(|e| e.id).collect(),
                gain,
                followed_by_gain: gain.is_some_and(|g| g >= threshold),
            });
        }
        out
    }

    /// The binary searches answer exactly what the quadratic scans did, on
    /// random histories of two campaigns with ties in time, evaluations
    /// without a geometric mean and questions without a bank id.
    #[test]
    fn attribution_by_binary_search_matches_the_scans() {
        use proptest::prelude::*;
        let stamp = |m: u8| format!("2026-12-03T10:{:02}:00.000Z", m % 60);
        let campaign = |c: bool| if c { "a".to_string() } else { "b".to_string() };
        let asked_s = prop::collection::vec((any::<bool>(), 0u8..40, any::<bool>()), 0..30);
        let evals_s = prop::collection::vec((any::<bool>(), 0u8..40, prop::option::of(0.5f64..3.0)), 0..60);
        proptest!(ProptestConfig::with_cases(400), |(a in asked_s, e in evals_s, window in 1usize..6)| {
            let asked: Vec<Asked> = a.iter().enumerate().map(|(i, (c, m, b))| Asked {
                question_id: i as i64,
                campaign_id: campaign(*c),
                bank_id: b.then(|| format!("q-{}", i % 4)),
                delivered_at: stamp(*m),
                moment: None,
            }).collect();
            let evals: Vec<EvalPoint> = e.iter().enumerate().map(|(i, (c, m, g))| EvalPoint {
                id: i as i64,
                campaign_id: campaign(*c),
                created_at: stamp(*m),
                geomean: *g,
            }).collect();
            prop_assert_eq!(
                attribute(&asked, &evals, window, DEFAULT_THRESHOLD),
                attribute_naive(&asked, &evals, window, DEFAULT_THRESHOLD)
            );
        });
    }

    use super::*;

    fn ev(id: i64, c: &str, t: &str, g: Option<f64>) -> EvalPoint {
        EvalPoint { id, campaign_id: c.into(), created_at: format!("2026-01-01T00:00:{t}.000Z"), geomean: g }
    }
    fn q(id: i64, c: &str, bank: &str, t: &str) -> Asked {
        Asked {
            question_id: id,
            campaign_id: c.into(),
            bank_id: Some(bank.into()),
            delivered_at: format!("2026-01-01T00:00:{t}.000Z"),
            moment: Some("plateau".into()),
        }
    }

    #[test]
    fn stats_by_moment_keep_moments_apart() {
        let asked = vec![
            q(1, "a", "gap-001", "01"),
            Asked { moment: Some("limit_claim".into()), ..q(2, "a", "gap-001", "03") },
        ];
        let evals = vec![ev(1, "a", "00", Some(1.0)), ev(2, "a", "02", Some(1.5)), ev(3, "a", "04", Some(1.5))];
        let att = attribute(&asked, &evals, DEFAULT_WINDOW, DEFAULT_THRESHOLD);
        let by = stats_by_moment(&asked, &att);
        assert_eq!((by["plateau/gap-001"].asks, by["plateau/gap-001"].gains), (1, 1));
        assert_eq!((by["limit_claim/gap-001"].asks, by["limit_claim/gap-001"].gains), (1, 0));
    }

    #[test]
    fn attribution_over_a_fixed_history() {
        let evals = vec![
            ev(1, "c", "01", Some(1.00)),
            ev(2, "c", "03", Some(1.10)),
            // question A at 04
            ev(3, "c", "05", Some(1.05)),
            ev(4, "c", "06", None), // a failed evaluation: no objective
            ev(5, "c", "07", Some(1.40)),
            // question B at 08
            ev(6, "c", "09", Some(1.41)),
            ev(7, "c", "10", Some(1.42)),
            // question C at 11: nothing after it
            ev(8, "other", "05", Some(9.0)),
        ];
        let asked = vec![q(10, "c", "bound-001", "04"), q(11, "c", "gap-002", "08"), q(12, "c", "bound-001", "11")];
        let a = attribute(&asked, &evals, 5, 0.05);
        assert_eq!(a[0].before_evaluation, Some(2));
        assert_eq!(a[0].window, vec![3, 4, 5], "stops at the next question");
        assert_eq!(a[0].best_evaluation, Some(5));
        assert!((a[0].gain.unwrap() - (1.40 / 1.10 - 1.0)).abs() < 1e-12);
        assert!(a[0].followed_by_gain);
        assert_eq!(a[1].before_evaluation, Some(5));
        assert!(!a[1].followed_by_gain, "1.42 / 1.40 is below the 5% threshold");
        assert_eq!(a[2].window, Vec::<i64>::new());
        assert_eq!(a[2].gain, None);

        let s = stats(&a);
        assert_eq!((s["bound-001"].asks, s["bound-001"].gains), (2, 1));
        assert_eq!(s["bound-001"].status, "confirmed");
        assert!(
            s["bound-001"].evidence[0].contains("campaign c: question 10 followed by 1.10x -> 1.40x"),
            "{:?}",
            s["bound-001"].evidence
        );
        assert_eq!(s["gap-002"].status, "unverified");
    }

    #[test]
    fn the_window_is_bounded() {
        let evals: Vec<EvalPoint> =
            (0..9).map(|i| ev(i, "c", &format!("{:02}", 10 + i), Some(1.0 + i as f64))).collect();
        let a = attribute(&[q(1, "c", "x-001", "10")], &evals, 2, 0.05);
        assert_eq!(a[0].window, vec![1, 2]);
        assert_eq!(a[0].best_after, Some(3.0));
    }
}
