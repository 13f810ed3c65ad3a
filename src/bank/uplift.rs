//! The uplift of a group of questions: the reward rate after its questions
//! against the rate after moments left without a question (withheld) of
//! the same moments, with a 95% Newcombe interval (see [`super::learn`] for
//! how each ask and each withheld moment is scored).

use std::collections::BTreeMap;

use serde::Serialize;

use super::groups::Kind;
use super::learn::{Attribution, Control};

/// At least this many on each side before a rate is compared.
pub const MIN_ARM: u32 = 5;

/// One side of a comparison: how many, how many rewarded.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Arm {
    pub n: u32,
    pub rewarded: u32,
    pub rate: Option<f64>,
}

impl Arm {
    fn of(n: u32, rewarded: u32) -> Arm {
        Arm { n, rewarded, rate: (n > 0).then(|| rewarded as f64 / n as f64) }
    }
}

/// The reward rate after questions against the rate after withheld moments
/// of the same moments: for every group of a kind (`group` none), one
/// group over the moments it was asked at (`moment` none), or one group
/// at one moment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Uplift {
    pub kind: Kind,
    pub group: Option<String>,
    pub moment: Option<String>,
    pub asked: Arm,
    /// The withheld moments of the row's moments; its `rate` is
    /// standardized to the asked arm's moments (see [`uplift`]), so for a
    /// row over several moments it is not `rewarded / n`.
    pub withheld: Arm,
    /// Questions asked at moments withheld fewer than [`MIN_ARM`] times,
    /// left out of the comparison (none when nothing could be compared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmatched: Option<u32>,
    /// The difference of the rates (asked minus withheld), with at least
    /// [`MIN_ARM`] on each side.
    pub uplift: Option<f64>,
    /// Its 95% interval (Newcombe's hybrid score method).
    pub interval: Option<[f64; 2]>,
    /// Why there is no uplift, when there is none.
    pub note: Option<String>,
}

/// The uplift rows: per kind, per group, and per group and moment where
/// the group was asked at least [`MIN_ARM`] times there. `group_of` gives a
/// bank id's group (an id it does not know is left out).
///
/// A row over several moments compares moment by moment: its withheld rate
/// is each moment's withheld rate weighted by how many of the row's
/// questions were asked at that moment (standardized to the asked arm), and
/// questions asked at a claim in the agent's words (never withheld) or at a
/// moment withheld fewer than [`MIN_ARM`] times (never, for the start) are
/// left out of the comparison (`unmatched`), as a row for that moment
/// alone would say "not enough". Pooling the two
/// arms unweighted finds an uplift where there is none as soon as a group
/// is asked at its moments in other proportions than moments are withheld
/// (on replayed campaigns, where questions can have no effect, it did: see
/// docs/REPLAY.md). The interval is Newcombe's, extended to the weighted
/// rate by the same method (MOVER): for one moment, exactly Newcombe's.
pub fn uplift(
    attributions: &[Attribution],
    controls: &[Control],
    group_of: &dyn Fn(&str) -> Option<String>,
) -> Vec<Uplift> {
    let row = |kind: Kind, group: Option<&str>, moment: Option<&str>| -> Option<Uplift> {
        let asked: Vec<&Attribution> = attributions
            .iter()
            .filter(|a| a.kind == kind)
            .filter(|a| {
                let g = a.bank_id.as_deref().and_then(group_of);
                g.is_some() && group.is_none_or(|want| g.as_deref() == Some(want))
            })
            .filter(|a| moment.is_none_or(|m| a.moment.as_deref() == Some(m)))
            .collect();
        if asked.is_empty() {
            return None;
        }
        // moment -> (asked, rewarded, withheld, rewarded)
        let mut strata: BTreeMap<&str, Stratum> = BTreeMap::new();
        let mut at_claims = 0u32;
        for a in &asked {
            if a.claim {
                at_claims += 1;
                continue;
            }
            let s = strata.entry(a.moment.as_deref().unwrap_or("")).or_default();
            s.asked += 1;
            s.asked_rewarded += u32::from(a.rewarded);
        }
        for c in controls {
            if let Some(s) = strata.get_mut(c.moment.as_str()) {
                s.withheld += 1;
                s.withheld_rewarded += u32::from(c.rewarded(kind));
            }
        }
        let matched: Vec<&Stratum> = strata.values().filter(|s| s.withheld >= MIN_ARM).collect();
        let unmatched: u32 = at_claims + strata.values().filter(|s| s.withheld < MIN_ARM).map(|s| s.asked).sum::<u32>();
        let (a, w, interval) = if matched.is_empty() {
            // Nothing to compare: both arms as they are, for the record.
            let a = Arm::of(asked.len() as u32, asked.iter().filter(|a| a.rewarded).count() as u32);
            let w =
                Arm::of(strata.values().map(|s| s.withheld).sum(), strata.values().map(|s| s.withheld_rewarded).sum());
            (a, w, None)
        } else {
            let a = Arm::of(matched.iter().map(|s| s.asked).sum(), matched.iter().map(|s| s.asked_rewarded).sum());
            let (rate, interval) = standardized(&matched);
            let w = Arm {
                n: matched.iter().map(|s| s.withheld).sum(),
                rewarded: matched.iter().map(|s| s.withheld_rewarded).sum(),
                rate: Some(rate),
            };
            (a, w, Some(interval))
        };
        let note = if matched.is_empty() || w.n < MIN_ARM {
            Some("not enough withheld moments".to_string())
        } else if a.n < MIN_ARM {
            Some("not enough questions".to_string())
        } else {
            None
        };
        let (uplift, interval) = match (&note, interval) {
            (None, Some(i)) => (Some(a.rate.unwrap_or(0.0) - w.rate.unwrap_or(0.0)), Some(i)),
            _ => (None, None),
        };
        Some(Uplift {
            kind,
            group: group.map(str::to_string),
            moment: moment.map(str::to_string),
            asked: a,
            withheld: w,
            unmatched: (!matched.is_empty()).then_some(unmatched),
            uplift,
            interval,
            note,
        })
    };
    let mut out = Vec::new();
    for kind in [Kind::Performance, Kind::Validity] {
        out.extend(row(kind, None, None));
    }
    let mut by_group: BTreeMap<String, (Kind, BTreeMap<String, u32>)> = BTreeMap::new();
    for a in attributions {
        let Some(g) = a.bank_id.as_deref().and_then(group_of) else { continue };
        let entry = by_group.entry(g).or_insert((a.kind, BTreeMap::new()));
        if let Some(m) = &a.moment {
            *entry.1.entry(m.clone()).or_default() += 1;
        }
    }
    for (g, (kind, moments)) in &by_group {
        out.extend(row(*kind, Some(g), None));
        for (m, n) in moments {
            if *n >= MIN_ARM {
                out.extend(row(*kind, Some(g), Some(m)));
            }
        }
    }
    out
}

/// One moment of a row: its questions and its withheld moments, with how
/// many of each were rewarded.
#[derive(Debug, Clone, Copy, Default)]
struct Stratum {
    asked: u32,
    asked_rewarded: u32,
    withheld: u32,
    withheld_rewarded: u32,
}

/// The withheld rate standardized to the asked arm (each moment's rate
/// weighted by its share of the questions), and the 95% interval of the
/// asked rate minus it: the asked rate's Wilson interval, and the weighted
/// rate's from each moment's Wilson interval (Zou and Donner's MOVER for a
/// weighted sum), combined as Newcombe combines two. With one moment it is
/// [`newcombe`].
fn standardized(strata: &[&Stratum]) -> (f64, [f64; 2]) {
    if let [s] = strata {
        let (lo, hi) = newcombe(s.asked_rewarded, s.asked, s.withheld_rewarded, s.withheld);
        return (s.withheld_rewarded as f64 / s.withheld as f64, [lo, hi]);
    }
    let n1: u32 = strata.iter().map(|s| s.asked).sum();
    let k1: u32 = strata.iter().map(|s| s.asked_rewarded).sum();
    let p1 = if n1 == 0 { 0.0 } else { k1 as f64 / n1 as f64 };
    let (l1, u1) = wilson(k1, n1);
    let (mut p2, mut below, mut above) = (0.0, 0.0, 0.0);
    for s in strata {
        let weight = if n1 == 0 { 1.0 / strata.len() as f64 } else { s.asked as f64 / n1 as f64 };
        let p = s.withheld_rewarded as f64 / s.withheld as f64;
        let (l, u) = wilson(s.withheld_rewarded, s.withheld);
        p2 += weight * p;
        below += (weight * (p - l)).powi(2);
        above += (weight * (u - p)).powi(2);
    }
    let (l2, u2) = (p2 - below.sqrt(), p2 + above.sqrt());
    let d = p1 - p2;
    (p2, [d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(), d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt()])
}

/// The 95% Wilson score interval of `k` successes in `n`.
pub fn wilson(k: u32, n: u32) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (z, n, p) = (Z95, n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The 95% interval of p1 − p2 (k1 of n1 against k2 of n2) by Newcombe's
/// hybrid score method (his method 10): each rate's Wilson interval,
/// combined. Unlike the Wald interval it stays inside [−1, 1] and is not
/// degenerate when a rate is 0 or 1.
pub fn newcombe(k1: u32, n1: u32, k2: u32, n2: u32) -> (f64, f64) {
    let p1 = if n1 == 0 { 0.0 } else { k1 as f64 / n1 as f64 };
    let p2 = if n2 == 0 { 0.0 } else { k2 as f64 / n2 as f64 };
    let (l1, u1) = wilson(k1, n1);
    let (l2, u2) = wilson(k2, n2);
    let d = p1 - p2;
    (d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(), d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt())
}

/// The two-sided 95% normal quantile.
const Z95: f64 = 1.959_963_984_540_054;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::learn::{Attribution, Control};

    fn kinds(id: &str) -> Kind {
        if id.starts_with("bench") || id.starts_with("correct") || id.starts_with("measure") {
            Kind::Validity
        } else {
            Kind::Performance
        }
    }

    /// Newcombe's own example (Statistics in Medicine 1998, method 10):
    /// 56/70 against 48/80, difference 0.2, 95% interval 0.0524 to 0.3339.
    #[test]
    fn the_interval_is_newcombes() {
        let (lo, hi) = newcombe(56, 70, 48, 80);
        assert!((lo - 0.0524).abs() < 1e-4 && (hi - 0.3339).abs() < 1e-4, "{lo} {hi}");
        let (lo, hi) = wilson(0, 10);
        assert!(lo == 0.0 && (hi - 0.2775).abs() < 1e-4, "{lo} {hi}");
        let (lo, hi) = newcombe(0, 5, 5, 5);
        assert!(lo >= -1.0 && hi <= 0.0 && lo < -0.4, "{lo} {hi}");
    }

    /// The uplift needs enough on each side; the rows are per kind, per
    /// group and per group and moment, the control arm matched by moment.
    #[test]
    fn uplift_rows_compare_rates_with_enough_on_each_side() {
        let att = |id: i64, bank: &str, moment: &str, rewarded: bool| Attribution {
            question_id: id,
            campaign_id: "c".into(),
            bank_id: Some(bank.into()),
            before: None,
            before_evaluation: None,
            best_after: None,
            best_evaluation: None,
            window: vec![],
            gain: None,
            followed_by_gain: false,
            moment: Some(moment.into()),
            claim: false,
            kind: kinds(bank),
            questioned_evaluation: None,
            rewarded,
            reward: None,
        };
        let ctl = |id: i64, moment: &str, performance: bool| Control {
            withheld_id: id,
            campaign_id: "c".into(),
            moment: moment.into(),
            before: None,
            window: vec![],
            performance,
            validity: !performance,
        };
        let mut atts: Vec<Attribution> = (0..6).map(|i| att(i, "gap-001", "plateau", i < 4)).collect();
        atts.push(att(9, "bench-001", "suspicious_gain", true));
        let mut controls: Vec<Control> = (0..5).map(|i| ctl(i, "plateau", i < 1)).collect();
        controls.push(ctl(8, "suspicious_gain", false));
        let group = |id: &str| Some(if id.starts_with("gap") { "gap_analysis" } else { "benchmark_validity" }.into());
        let rows = uplift(&atts, &controls, &group);
        let perf = &rows[0];
        assert_eq!((perf.kind, perf.group.as_deref(), perf.moment.as_deref()), (Kind::Performance, None, None));
        assert_eq!((perf.asked.n, perf.asked.rewarded, perf.withheld.n, perf.withheld.rewarded), (6, 4, 5, 1));
        assert!((perf.uplift.unwrap() - (4.0 / 6.0 - 1.0 / 5.0)).abs() < 1e-12);
        assert_eq!(perf.interval.map(|[l, h]| (l, h)), Some(newcombe(4, 6, 1, 5)));
        let validity = &rows[1];
        assert_eq!((validity.withheld.n, validity.withheld.rewarded), (1, 1), "matched by moment");
        assert_eq!(validity.note.as_deref(), Some("not enough withheld moments"));
        assert_eq!(validity.uplift, None);
        let at_plateau =
            rows.iter().find(|r| r.group.as_deref() == Some("gap_analysis") && r.moment.is_some()).unwrap();
        assert_eq!((at_plateau.asked.n, at_plateau.withheld.n), (6, 5));
        assert!(!rows.iter().any(|r| r.group.as_deref() == Some("benchmark_validity") && r.moment.is_some()));
    }

    /// Questions that change nothing, asked mostly at plateaus (rewarded
    /// half the time whether asked or not) and rarely at suspicious gains
    /// (a tenth of the time), while moments were withheld the other way
    /// round. Pooled unweighted, the arms differ by 32 points (Simpson's
    /// paradox); moment by moment they do not differ at all. A claim's
    /// questions, never withheld, are left out of the comparison.
    #[test]
    fn a_row_over_several_moments_compares_moment_by_moment() {
        let att = |id: i64, moment: &str, rewarded: bool| Attribution {
            question_id: id,
            campaign_id: "c".into(),
            bank_id: Some("gap-001".into()),
            before: None,
            before_evaluation: None,
            best_after: None,
            best_evaluation: None,
            window: vec![],
            gain: None,
            followed_by_gain: rewarded,
            moment: Some(moment.into()),
            claim: moment.ends_with("_claim"),
            kind: Kind::Performance,
            questioned_evaluation: None,
            rewarded,
            reward: None,
        };
        let ctl = |id: i64, moment: &str, rewarded: bool| Control {
            withheld_id: id,
            campaign_id: "c".into(),
            moment: moment.into(),
            before: None,
            window: vec![],
            performance: rewarded,
            validity: false,
        };
        let mut atts: Vec<Attribution> = (0..90).map(|i| att(i, "plateau", i % 2 == 0)).collect();
        atts.extend((90..100).map(|i| att(i, "suspicious_gain", i == 90)));
        atts.extend((100..107).map(|i| att(i, "limit_claim", true)));
        let mut controls: Vec<Control> = (0..10).map(|i| ctl(i, "plateau", i % 2 == 0)).collect();
        controls.extend((10..100).map(|i| ctl(i, "suspicious_gain", i % 10 == 0)));
        let rows = uplift(&atts, &controls, &|_| Some("gap_analysis".into()));
        let all = &rows[0];
        assert_eq!((all.kind, all.group.as_deref(), all.moment.as_deref()), (Kind::Performance, None, None));
        assert_eq!((all.asked.n, all.asked.rewarded), (100, 46), "the claim's 7 questions are left out");
        assert_eq!(all.unmatched, Some(7));
        assert_eq!((all.withheld.n, all.withheld.rewarded), (100, 14));
        // Unweighted it would read 46% against 14%; standardized, 46% against 46%.
        assert!((all.withheld.rate.unwrap() - 0.46).abs() < 1e-12, "{:?}", all.withheld);
        assert!(all.uplift.unwrap().abs() < 1e-12, "{all:?}");
        // The interval by MOVER, written out: the asked rate's Wilson
        // interval; the weighted rate's from each moment's, weighted 0.9
        // (plateau, 5 of 10) and 0.1 (suspicious gain, 9 of 90).
        let (l1, u1) = wilson(46, 100);
        let ((lp, up), (ls, us)) = (wilson(5, 10), wilson(9, 90));
        let below = ((0.9 * (0.5 - lp)).powi(2) + (0.1 * (0.1 - ls)).powi(2)).sqrt();
        let above = ((0.9 * (up - 0.5)).powi(2) + (0.1 * (us - 0.1)).powi(2)).sqrt();
        let expected = [-((0.46 - l1).powi(2) + above.powi(2)).sqrt(), ((u1 - 0.46).powi(2) + below.powi(2)).sqrt()];
        let [lo, hi] = all.interval.unwrap();
        assert!((lo - expected[0]).abs() < 1e-9 && (hi - expected[1]).abs() < 1e-9, "{lo} {hi} {expected:?}");
        assert!(lo < 0.0 && hi > 0.0);
        // Moment by moment, the rows are the plain comparison.
        let at_plateau = rows.iter().find(|r| r.moment.as_deref() == Some("plateau")).unwrap();
        assert_eq!(at_plateau.interval.map(|[l, h]| (l, h)), Some(newcombe(45, 90, 5, 10)));
        assert_eq!(at_plateau.unmatched, Some(0));
        let at_claim = rows.iter().find(|r| r.moment.as_deref() == Some("limit_claim")).unwrap();
        assert_eq!((at_claim.asked.n, at_claim.withheld.n, at_claim.unmatched), (7, 0, None));
        assert_eq!(at_claim.note.as_deref(), Some("not enough withheld moments"));
        // At one moment, questions asked at the agent's claims (never
        // withheld: no control) are left out, the others compared.
        let mut atts: Vec<Attribution> = (0..10).map(|i| att(i, "suspicious_gain", i < 5)).collect();
        atts.extend((10..30).map(|i| Attribution { claim: true, ..att(i, "suspicious_gain", true) }));
        let controls: Vec<Control> = (0..10).map(|i| ctl(i, "suspicious_gain", i < 5)).collect();
        let all = &uplift(&atts, &controls, &|_| Some("gap_analysis".into()))[0];
        assert_eq!((all.asked.n, all.asked.rewarded, all.unmatched), (10, 5, Some(20)));
        assert_eq!(all.interval.map(|[l, h]| (l, h)), Some(newcombe(5, 10, 5, 10)));
        // Six withheld moments, but three at each of two moments: too few
        // at either to compare, so no uplift (both arms shown whole).
        let atts: Vec<Attribution> =
            (0..10).map(|i| att(i, if i < 5 { "plateau" } else { "suspicious_gain" }, true)).collect();
        let controls: Vec<Control> =
            (0..6).map(|i| ctl(i, if i < 3 { "plateau" } else { "suspicious_gain" }, false)).collect();
        let all = &uplift(&atts, &controls, &|_| Some("gap_analysis".into()))[0];
        assert_eq!((all.asked.n, all.withheld.n, all.unmatched, all.uplift), (10, 6, None, None));
        assert_eq!(all.note.as_deref(), Some("not enough withheld moments"));
    }
}
