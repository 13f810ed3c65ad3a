//! Learned value: what followed a question, by what the question is for.
//!
//! Each bank question delivered is attributed the evaluations that follow
//! it: the campaign's own (workspace) evaluations after its delivery, at
//! most `window` of them, stopping at the next question or withheld moment
//! of the same campaign. A beam family's candidates and gadfly's re-check
//! rows are never among them. Before it, two evaluations count: the
//! *baseline*, the last correct workspace evaluation with a geometric mean
//! at or before the delivery, and the *questioned* one, the last workspace
//! evaluation at or before it (what the moment was about, correct or not).
//!
//! The reward depends on the kind of the question's group
//! ([`super::groups::kind_of_group`]):
//!
//! - **performance** questions are rewarded by a verified gain: a CORRECT
//!   workspace evaluation in the window whose geometric mean beats the
//!   baseline by `threshold` (5%). An incorrect evaluation, a beam
//!   candidate or a re-check never counts, however fast.
//! - **validity** questions (benchmark validity, correctness,
//!   measurement) are rewarded when the gain they questioned disappears or
//!   a failure is caught: the questioned evaluation's gain was rejected by
//!   gadfly's re-check; or it was correct and an evaluation in the window
//!   is incorrect (a failure caught), or the best correct geometric mean in
//!   the window is below the questioned one by `threshold` (the gain did not
//!   reproduce); or it was incorrect and an evaluation in the window is
//!   correct (the failure was fixed rather than explained away).
//!
//! `gains` still counts verified gains for every kind (a validity question
//! followed by a real gain is worth knowing too); `rewards` counts the
//! reward of the question's kind, and is what selection learns from.
//!
//! A moment left without a question (`[questions] withhold`) gets the same
//! measure: the evaluations after it, cut the same way, scored both ways.
//! The reward rate after questions of a group minus the rate after
//! withheld moments of the same moments is the group's uplift
//! ([`uplift`]), with a 95% Newcombe interval: "followed by" is not
//! "caused by" without that base rate.
//!
//! Stats are kept per (bank id, moment) as well as pooled. An entry
//! followed by its reward is confirmed by trace, with the campaign and the
//! evaluations as evidence.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::groups::{self, Kind};

#[derive(Debug, Clone)]
pub struct Asked {
    pub question_id: i64,
    pub campaign_id: String,
    pub bank_id: Option<String>,
    pub delivered_at: String,
    /// The moment it was asked at, where recorded.
    pub moment: Option<String>,
    /// Asked at a claim in the agent's words: such a moment is never
    /// withheld (`moments::plan::withheld`), so it has no control and
    /// stays out of the uplift's comparison.
    pub claim: bool,
}

#[derive(Debug, Clone)]
pub struct EvalPoint {
    pub id: i64,
    pub campaign_id: String,
    pub created_at: String,
    pub geomean: Option<f64>,
}

/// An evaluation as learning reads it: its objective, whose candidate it
/// measured and whether its figures are a result.
#[derive(Debug, Clone)]
pub struct Evaluated {
    pub point: EvalPoint,
    /// The workspace's own (`Origin::Workspace`): not a beam family's
    /// candidate, not gadfly's re-check.
    pub workspace: bool,
    /// Its figures are a result (`Evaluation::incorrect` is false).
    pub correct: bool,
    /// gadfly's re-check rejected its gain (then it is incorrect too).
    pub rejected: bool,
}

impl From<EvalPoint> for Evaluated {
    /// A point known only by its objective (a replayed timeline's): the
    /// workspace's, correct, never re-checked.
    fn from(point: EvalPoint) -> Self {
        Evaluated { point, workspace: true, correct: true, rejected: false }
    }
}

/// A moment left without its question (`[questions] withhold`): the
/// control arm of [`uplift`].
#[derive(Debug, Clone, PartialEq)]
pub struct Withheld {
    /// Its `moment.withheld` event.
    pub id: i64,
    pub campaign_id: String,
    pub moment: String,
    pub at: String,
}

/// What learning reads (the store's `yield_history`).
#[derive(Debug, Clone, Default)]
pub struct History {
    pub asked: Vec<Asked>,
    pub withheld: Vec<Withheld>,
    pub evals: Vec<Evaluated>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attribution {
    pub question_id: i64,
    pub campaign_id: String,
    pub bank_id: Option<String>,
    /// The baseline: the last correct workspace evaluation before.
    pub before: Option<f64>,
    pub before_evaluation: Option<i64>,
    pub best_after: Option<f64>,
    pub best_evaluation: Option<i64>,
    /// The evaluations that counted, in order.
    pub window: Vec<i64>,
    pub gain: Option<f64>,
    /// A verified gain followed (whatever the kind).
    pub followed_by_gain: bool,
    pub moment: Option<String>,
    /// Asked at a claim (see [`Asked::claim`]).
    #[serde(default)]
    pub claim: bool,
    pub kind: Kind,
    /// The last workspace evaluation before (what a validity question is about).
    pub questioned_evaluation: Option<i64>,
    /// Its kind's reward followed (see the module doc).
    pub rewarded: bool,
    /// Why it was rewarded, in words.
    pub reward: Option<String>,
}

/// What followed a withheld moment, scored as either kind of question.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Control {
    pub withheld_id: i64,
    pub campaign_id: String,
    pub moment: String,
    pub before: Option<f64>,
    pub window: Vec<i64>,
    pub performance: bool,
    pub validity: bool,
}

impl Control {
    pub fn rewarded(&self, kind: Kind) -> bool {
        match kind {
            Kind::Performance => self.performance,
            Kind::Validity => self.validity,
        }
    }
}

/// One entry's figures at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MomentStats {
    pub asks: u32,
    pub gains: u32,
    pub rewards: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EntryStats {
    pub asks: u32,
    /// Asks followed by a verified gain.
    pub gains: u32,
    /// `confirmed` once followed by its kind's reward or a verified gain,
    /// else `unverified`.
    pub status: String,
    pub evidence: Vec<String>,
    /// Asks followed by the reward of the entry's kind (what selection learns).
    #[serde(default)]
    pub rewards: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// The same figures per moment asked at.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub moments: BTreeMap<String, MomentStats>,
}

pub const DEFAULT_WINDOW: usize = 5;
pub const DEFAULT_THRESHOLD: f64 = 0.05;

/// [`attribute_history`] for evaluations known only by their objective
/// (a replayed timeline): each taken as a correct workspace evaluation,
/// the kinds read from the embedded bank, no withheld moment.
pub fn attribute(asked: &[Asked], evals: &[EvalPoint], window: usize, threshold: f64) -> Vec<Attribution> {
    let history = History {
        asked: asked.to_vec(),
        withheld: Vec::new(),
        evals: evals.iter().cloned().map(Evaluated::from).collect(),
    };
    let bank = super::embedded();
    attribute_history(&history, &|id| groups::kind_of_entry(bank, id), window, threshold).0
}

/// The evaluations around one ask (a question delivered, a moment
/// withheld): see the module doc.
struct Around<'a> {
    baseline: Option<&'a Evaluated>,
    questioned: Option<&'a Evaluated>,
    after: Vec<&'a Evaluated>,
}

fn around<'a>(evs: &[&'a Evaluated], at: &str, next: Option<&str>, window: usize) -> Around<'a> {
    // Evaluations up to the ask come first in `evs`, then the rest.
    let split = evs.partition_point(|e| e.point.created_at.as_str() <= at);
    Around {
        baseline: evs[..split].iter().rev().find(|e| e.correct && e.point.geomean.is_some()).copied(),
        questioned: evs[..split].last().copied(),
        after: evs[split..]
            .iter()
            .take_while(|e| next.is_none_or(|n| e.point.created_at.as_str() <= n))
            .take(window)
            .copied()
            .collect(),
    }
}

impl Around<'_> {
    /// The best correct evaluation after.
    fn best(&self) -> Option<&Evaluated> {
        self.after
            .iter()
            .filter(|e| e.correct && e.point.geomean.is_some())
            .max_by(|a, b| a.point.geomean.unwrap().total_cmp(&b.point.geomean.unwrap()))
            .copied()
    }

    /// The verified gain over the baseline, if both exist.
    fn gain(&self) -> Option<f64> {
        match (self.baseline.and_then(|b| b.point.geomean), self.best().and_then(|b| b.point.geomean)) {
            (Some(b), Some(a)) if b > 0.0 => Some(a / b - 1.0),
            _ => None,
        }
    }

    /// Why a validity question would be rewarded here (None: it would not).
    fn caught(&self, threshold: f64) -> Option<String> {
        let q = self.questioned?;
        if q.rejected {
            return Some(format!("gadfly's re-check rejected the gain of evaluation {}", q.point.id));
        }
        if !q.correct {
            return self
                .after
                .iter()
                .find(|e| e.correct)
                .map(|e| format!("the failure of evaluation {} was fixed in evaluation {}", q.point.id, e.point.id));
        }
        if let Some(e) = self.after.iter().find(|e| !e.correct) {
            return Some(format!("evaluation {} after evaluation {} is incorrect", e.point.id, q.point.id));
        }
        let (Some(was), Some(best)) = (q.point.geomean, self.best()) else { return None };
        let now = best.point.geomean.unwrap_or(0.0);
        (now < was * (1.0 - threshold)).then(|| {
            format!(
                "the gain of evaluation {} ({was:.2}x) disappeared: the best after it is {now:.2}x (evaluation {})",
                q.point.id, best.point.id
            )
        })
    }
}

/// Attributes each asked question its kind's reward, and scores each
/// withheld moment both ways. `kind_of` gives a bank id's kind.
/// Timestamps are RFC 3339 UTC strings of one format, so they order as
/// strings.
///
/// Both histories are sorted once per campaign; each ask then finds the
/// next ask, the evaluations before it and those after it by binary
/// search, so a moment that reads 2,000 questions and 20,000 evaluations
/// does not compare every question with every other one and with every
/// evaluation (it did, and a question cycle cost milliseconds of CPU;
/// BENCHMARKS.md, ingestion).
pub fn attribute_history(
    h: &History,
    kind_of: &dyn Fn(&str) -> Kind,
    window: usize,
    threshold: f64,
) -> (Vec<Attribution>, Vec<Control>) {
    let mut by_campaign: HashMap<&str, Vec<&Evaluated>> = HashMap::new();
    for e in h.evals.iter().filter(|e| e.workspace) {
        by_campaign.entry(&e.point.campaign_id).or_default().push(e);
    }
    for list in by_campaign.values_mut() {
        list.sort_by(|a, b| a.point.created_at.cmp(&b.point.created_at).then(a.point.id.cmp(&b.point.id)));
    }
    // When each campaign was asked or left without a question: windows end there.
    let mut asks_by_campaign: HashMap<&str, Vec<&str>> = HashMap::new();
    for q in &h.asked {
        asks_by_campaign.entry(&q.campaign_id).or_default().push(&q.delivered_at);
    }
    for w in &h.withheld {
        asks_by_campaign.entry(&w.campaign_id).or_default().push(&w.at);
    }
    for list in asks_by_campaign.values_mut() {
        list.sort_unstable();
    }
    let empty = Vec::new();
    let next_ask = |campaign: &str, at: &str| {
        asks_by_campaign.get(campaign).and_then(|ts| ts.get(ts.partition_point(|t| *t <= at)).copied())
    };
    let mut out = Vec::with_capacity(h.asked.len());
    for q in &h.asked {
        let evs = by_campaign.get(q.campaign_id.as_str()).unwrap_or(&empty);
        let a = around(evs, &q.delivered_at, next_ask(&q.campaign_id, &q.delivered_at), window);
        let best = a.best();
        let gain = a.gain();
        let followed_by_gain = gain.is_some_and(|g| g >= threshold);
        let kind = q.bank_id.as_deref().map_or(Kind::Performance, kind_of);
        let reward = match kind {
            Kind::Performance => {
                followed_by_gain.then(|| format!("a verified gain of +{:.0}%", gain.unwrap_or(0.0) * 100.0))
            }
            Kind::Validity => a.caught(threshold),
        };
        out.push(Attribution {
            question_id: q.question_id,
            campaign_id: q.campaign_id.clone(),
            bank_id: q.bank_id.clone(),
            before: a.baseline.and_then(|b| b.point.geomean),
            before_evaluation: a.baseline.map(|b| b.point.id),
            best_after: best.and_then(|b| b.point.geomean),
            best_evaluation: best.map(|b| b.point.id),
            window: a.after.iter().map(|e| e.point.id).collect(),
            gain,
            followed_by_gain,
            moment: q.moment.clone(),
            claim: q.claim,
            kind,
            questioned_evaluation: a.questioned.map(|e| e.point.id),
            rewarded: reward.is_some(),
            reward,
        });
    }
    let controls = h
        .withheld
        .iter()
        .map(|w| {
            let evs = by_campaign.get(w.campaign_id.as_str()).unwrap_or(&empty);
            let a = around(evs, &w.at, next_ask(&w.campaign_id, &w.at), window);
            Control {
                withheld_id: w.id,
                campaign_id: w.campaign_id.clone(),
                moment: w.moment.clone(),
                before: a.baseline.and_then(|b| b.point.geomean),
                window: a.after.iter().map(|e| e.point.id).collect(),
                performance: a.gain().is_some_and(|g| g >= threshold),
                validity: a.caught(threshold).is_some(),
            }
        })
        .collect();
    (out, controls)
}

/// [`stats`] per moment and entry, keyed `moment/bank_id` (selection
/// learns what helps at each moment, not pooled over moments).
pub fn stats_by_moment(asked: &[Asked], attributions: &[Attribution]) -> BTreeMap<String, EntryStats> {
    let moment_of: HashMap<i64, &str> =
        asked.iter().filter_map(|a| Some((a.question_id, a.moment.as_deref()?))).collect();
    let keyed: Vec<Attribution> = attributions
        .iter()
        .filter_map(|a| {
            let m = a.moment.as_deref().or_else(|| moment_of.get(&a.question_id).copied())?;
            let mut a = a.clone();
            a.bank_id = Some(format!("{m}/{}", a.bank_id.as_deref()?));
            a.moment = None;
            Some(a)
        })
        .collect();
    stats(&keyed)
}

/// Per bank entry: asks, gains, rewards, status, the evidence of each
/// gain or reward, and the same figures per moment.
pub fn stats(attributions: &[Attribution]) -> BTreeMap<String, EntryStats> {
    let mut map: BTreeMap<String, EntryStats> = BTreeMap::new();
    for a in attributions {
        let Some(id) = &a.bank_id else { continue };
        let s = map.entry(id.clone()).or_default();
        s.kind = Some(a.kind);
        s.asks += 1;
        s.gains += a.followed_by_gain as u32;
        s.rewards += a.rewarded as u32;
        if let Some(m) = &a.moment {
            let ms = s.moments.entry(m.clone()).or_default();
            ms.asks += 1;
            ms.gains += a.followed_by_gain as u32;
            ms.rewards += a.rewarded as u32;
        }
        if a.followed_by_gain {
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
        if let (Kind::Validity, Some(why)) = (a.kind, &a.reward) {
            s.evidence.push(format!("campaign {}: question {} caught it: {why}", a.campaign_id, a.question_id));
        }
    }
    for s in map.values_mut() {
        s.status = if s.gains > 0 || s.rewards > 0 { "confirmed" } else { "unverified" }.to_string();
    }
    map
}

/// What selection learns from: [`stats`] pooled by bank id and per
/// `moment/bank_id`, over the store's history, each question rewarded by
/// its kind in `bank`.
pub fn selection_stats(h: &History, bank: &super::Bank) -> HashMap<String, EntryStats> {
    let (attributions, _) =
        attribute_history(h, &|id| groups::kind_of_entry(bank, id), DEFAULT_WINDOW, DEFAULT_THRESHOLD);
    let mut stats: HashMap<String, EntryStats> = stats(&attributions).into_iter().collect();
    stats.extend(stats_by_moment(&h.asked, &attributions));
    stats
}

/// What `gadfly bank stats` shows: each entry's figures (pooled, and per
/// moment inside), and the uplift rows, each question rewarded by its kind
/// in `bank`.
pub fn report(h: &History, bank: &super::Bank) -> (BTreeMap<String, EntryStats>, Vec<Uplift>) {
    let (attributions, controls) =
        attribute_history(h, &|id| groups::kind_of_entry(bank, id), DEFAULT_WINDOW, DEFAULT_THRESHOLD);
    let rows = uplift(&attributions, &controls, &|id| bank.get(id).map(|e| e.group.clone()));
    (stats(&attributions), rows)
}

/// [`report`] as one JSON object: each entry's figures under its bank id,
/// and the uplift rows under the key `uplift` (no bank id). What the
/// daemon's `GET /bank/stats` returns and `gadfly bank stats --replay`
/// prints, so both have one shape.
pub fn report_json(stats: &BTreeMap<String, EntryStats>, uplift: &[Uplift]) -> serde_json::Value {
    let mut out = serde_json::json!(stats);
    out["uplift"] = serde_json::json!(uplift);
    out
}

pub use super::uplift::{newcombe, uplift, wilson, Arm, Uplift, MIN_ARM};

#[cfg(test)]
mod tests {
    /// The first, quadratic form of [`attribute`], kept as its oracle.
    /// The fields the first form computed (the kind's reward is new).
    type Old = (i64, Option<f64>, Option<i64>, Option<f64>, Option<i64>, Vec<i64>, Option<f64>, bool);

    fn old(a: &Attribution) -> Old {
        (
            a.question_id,
            a.before,
            a.before_evaluation,
            a.best_after,
            a.best_evaluation,
            a.window.clone(),
            a.gain,
            a.followed_by_gain,
        )
    }

    fn attribute_naive(asked: &[Asked], evals: &[EvalPoint], window: usize, threshold: f64) -> Vec<Old> {
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
            out.push((
                q.question_id,
                before.and_then(|b| b.geomean),
                before.map(|b| b.id),
                best.and_then(|b| b.geomean),
                best.map(|b| b.id),
                after.iter().map(|e| e.id).collect(),
                gain,
                gain.is_some_and(|g| g >= threshold),
            ));
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
                claim: false,
            }).collect();
            let evals: Vec<EvalPoint> = e.iter().enumerate().map(|(i, (c, m, g))| EvalPoint {
                id: i as i64,
                campaign_id: campaign(*c),
                created_at: stamp(*m),
                geomean: *g,
            }).collect();
            prop_assert_eq!(
                attribute(&asked, &evals, window, DEFAULT_THRESHOLD).iter().map(old).collect::<Vec<_>>(),
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
            claim: false,
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

    fn point(id: i64, t: &str, g: Option<f64>, correct: bool) -> Evaluated {
        Evaluated { point: ev(id, "c", t, g), workspace: true, correct, rejected: false }
    }

    fn kinds(id: &str) -> Kind {
        if id.starts_with("bench") || id.starts_with("correct") || id.starts_with("measure") {
            Kind::Validity
        } else {
            Kind::Performance
        }
    }

    fn run(h: &History) -> (Vec<Attribution>, Vec<Control>) {
        attribute_history(h, &kinds, DEFAULT_WINDOW, DEFAULT_THRESHOLD)
    }

    /// #35: a validity question succeeds when the gain it questioned
    /// disappears: here the suspicious 2.0x is not reproduced (1.2x at
    /// best after the question); or when the re-check rejects it, a later
    /// evaluation turns incorrect, or the failure it was asked about is fixed.
    #[test]
    fn a_validity_question_is_rewarded_when_the_gain_it_questioned_disappears() {
        let evals = vec![
            point(1, "01", Some(1.0), true),
            point(2, "02", Some(2.0), true), // the suspicious gain; questions at 03
            point(3, "04", Some(1.2), true),
            point(4, "05", Some(1.1), true),
        ];
        let asked = vec![q(10, "c", "bench-002", "03")];
        let h = History { asked: asked.clone(), withheld: vec![], evals: evals.clone() };
        let (a, _) = run(&h);
        assert_eq!(a[0].kind, Kind::Validity);
        assert_eq!(a[0].questioned_evaluation, Some(2));
        assert!(a[0].rewarded, "{a:?}");
        assert!(a[0].reward.as_deref().unwrap().contains("disappeared"), "{:?}", a[0].reward);
        assert!(!a[0].followed_by_gain);
        // The gain that holds (2.0x again) rewards nothing.
        let mut held = evals.clone();
        held[2].point.geomean = Some(1.98);
        let (a, _) = run(&History { asked: asked.clone(), withheld: vec![], evals: held });
        assert!(!a[0].rewarded, "the gain held: {a:?}");
        // gadfly's re-check rejected the questioned gain.
        let mut rejected = evals.clone();
        rejected[1].rejected = true;
        rejected[1].correct = false;
        rejected[2].point.geomean = Some(2.1);
        let (a, _) = run(&History { asked: asked.clone(), withheld: vec![], evals: rejected });
        assert!(a[0].reward.as_deref().unwrap().contains("re-check rejected"), "{a:?}");
        // A later evaluation turns incorrect: a failure caught.
        let mut failing = evals.clone();
        failing[2].point.geomean = Some(2.1);
        failing[2].correct = false;
        let (a, _) = run(&History { asked: asked.clone(), withheld: vec![], evals: failing });
        assert!(a[0].reward.as_deref().unwrap().contains("evaluation 3 after evaluation 2 is incorrect"), "{a:?}");
        // A failure fixed rather than explained away (the questioned one was incorrect).
        let mut fixed = evals;
        fixed[1].correct = false;
        let (a, _) = run(&History { asked, withheld: vec![], evals: fixed });
        assert!(a[0].reward.as_deref().unwrap().contains("was fixed in evaluation 3"), "{a:?}");
    }

    /// A performance question is rewarded by a verified gain only: an
    /// incorrect evaluation, a beam candidate or a re-check row, however
    /// fast, never counts, and the baseline is the last correct one.
    #[test]
    fn a_performance_question_is_not_rewarded_by_an_incorrect_or_beam_evaluation() {
        let beam = |mut e: Evaluated| {
            e.workspace = false;
            e
        };
        let evals = vec![
            point(1, "01", Some(1.0), true),
            point(2, "02", Some(3.0), false), // incorrect, before: not the baseline
            point(3, "04", Some(2.0), false), // incorrect after
            beam(point(4, "05", Some(2.5), true)),
            point(5, "06", Some(1.02), true),
        ];
        let asked = vec![q(10, "c", "gap-001", "03")];
        let (a, _) = run(&History { asked: asked.clone(), withheld: vec![], evals: evals.clone() });
        assert_eq!(a[0].kind, Kind::Performance);
        assert_eq!((a[0].before_evaluation, a[0].before), (Some(1), Some(1.0)), "the last correct one");
        assert_eq!(a[0].window, vec![3, 5], "the beam candidate is not the workspace's");
        assert_eq!(a[0].best_evaluation, Some(5));
        assert!(!a[0].rewarded && !a[0].followed_by_gain, "{a:?}");
        // A correct workspace evaluation 5% above the baseline is a gain.
        let mut gained = evals;
        gained[4].point.geomean = Some(1.06);
        let (a, _) = run(&History { asked, withheld: vec![], evals: gained });
        assert!(a[0].rewarded && a[0].followed_by_gain, "{a:?}");
        assert_eq!(a[0].reward.as_deref(), Some("a verified gain of +6%"));
    }

    /// A withheld moment is scored both ways over the same window, and it
    /// ends the window of the question before it as a question would.
    #[test]
    fn a_withheld_moment_is_measured_as_a_question_is() {
        let evals = vec![
            point(1, "01", Some(1.0), true),
            point(2, "03", Some(1.2), true),
            point(3, "05", Some(1.0), true),
            point(4, "07", Some(1.1), true),
        ];
        let at = "2026-01-01T00:00:04.000Z".to_string();
        let withheld = vec![Withheld { id: 7, campaign_id: "c".into(), moment: "plateau".into(), at }];
        let asked = vec![q(10, "c", "gap-001", "02")];
        let (a, c) = run(&History { asked, withheld, evals });
        assert_eq!(a[0].window, vec![2], "the withheld moment at 04 ends the question's window");
        assert!(a[0].rewarded, "1.2x over 1.0x: {a:?}");
        assert_eq!(c[0].window, vec![3, 4]);
        assert_eq!(c[0].before, Some(1.2));
        assert!(!c[0].performance, "1.1x after 1.2x is no gain");
        assert!(c[0].validity, "the 1.2x disappeared (1.1x at best): {c:?}");
    }

    /// `/bank/stats` and `gadfly bank stats --replay` have one shape: the
    /// entries under their bank ids, the uplift rows under `uplift`.
    #[test]
    fn the_report_is_one_object_of_entries_and_uplift_rows() {
        let evals = vec![point(1, "01", Some(1.0), true), point(2, "03", Some(1.2), true)];
        let h = History { asked: vec![q(10, "c", "gap-001", "02")], withheld: vec![], evals };
        let (stats, rows) = report(&h, super::super::embedded());
        let v = report_json(&stats, &rows);
        assert_eq!(v["gap-001"]["asks"], 1, "{v}");
        assert_eq!(v["gap-001"]["rewards"], 1, "{v}");
        assert_eq!(v["uplift"][0]["asked"]["n"], 1, "{v}");
        assert_eq!(v["uplift"][0]["withheld"]["n"], 0, "{v}");
        assert_eq!(v.as_object().unwrap().len(), stats.len() + 1, "{v}");
    }
}
