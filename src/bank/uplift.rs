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
