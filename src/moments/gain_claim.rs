//! A gain the agent claims in words, read against what gadfly measured.
//!
//! The text classifier sees "NEW BEST!", "huge win", "+22%" in a message;
//! only the measurements say whether there is a gain to check. On the real
//! experiment logs of `tests/real-campaigns/`, read blind at their point,
//! the gain questions were useless where the words went with no measured
//! gain (a failed or skipped run, a figure below the best, a first reading
//! with nothing before it) and useful where a new best sat inside the
//! noise of the figures (a best by 0.03% in a campaign whose repeats swing
//! by 5%). So:
//! - the latest workspace evaluation correct and not below the best
//!   correct one of the [`RECENT`] before it beyond noise (of all before it
//!   when none of those is correct; the baseline, 1.0x, when none is): a
//!   gain to check, beyond the noise of both figures or inside it (the
//!   predicate's own intervals, [`crate::predicate::beyond_noise_above`]):
//!   a tie claimed as "a new best" is a question of noise too.
//!   The recent ones, not the campaign's best: a campaign runs tracks (a
//!   second method started from scratch, a new workload), and "a new best"
//!   in words is the track's, whose noise is the question;
//! - otherwise no measured gain: the moment is recorded, no question asked
//!   ([`GAIN_UNMEASURED`]); a gain gadfly measures later is its own moment
//!   (the numeric jump detector) and the gate's hold on large gains stands
//!   whatever the words said;
//! - no workspace evaluation at all: the words are all there is, and the
//!   claim is asked about as before.
//!
//! The facts go in the claim's finding (`measured_gain`: `none`,
//! `inside_noise` or `beyond_noise`; `figure`, `best_before`, `change_pct`,
//! `evaluation`), where selection reads them
//! ([`crate::bank::groups::pointed`]).

use crate::campaign::PredicateSpec;
use crate::evaluation::{Evaluation, Origin};
use crate::predicate::{beyond_noise_above, interval};

use super::ClaimMoment;

/// How many evaluations before the latest one a claimed gain is read
/// against.
pub const RECENT: usize = 5;

/// The fact that says what the measurements show of a claimed gain.
pub const MEASURED_GAIN: &str = "measured_gain";

/// Why a gain claimed in words asks nothing when gadfly's own latest
/// evaluation shows no gain over the ones before it.
pub const GAIN_UNMEASURED: &str = "the latest evaluation measured no gain over the ones before it: none for these \
     words to claim (a gain is asked about when gadfly measures one)";

/// An evaluation's figure when every scenario is present and correct.
fn figure(e: &Evaluation) -> Option<f64> {
    let ok = !e.verdict.scenarios.is_empty() && e.verdict.scenarios.iter().all(|s| s.present && s.correct);
    e.verdict.geomean_speedup.filter(|g| ok && g.is_finite() && *g > 0.0)
}

/// The facts of a claimed gain against `history` (the campaign's
/// evaluations, oldest first; gadfly's re-checks and beam-only candidates
/// are left out here): none when the campaign has no workspace evaluation.
pub fn read(history: &[Evaluation], predicate: &PredicateSpec) -> Option<Vec<(&'static str, String)>> {
    let workspace: Vec<&Evaluation> = history.iter().filter(|e| e.origin == Origin::Workspace).collect();
    let (latest, before) = workspace.split_last()?;
    let number = crate::evaluation::number_in(workspace.iter().filter_map(|e| e.id), latest.id.unwrap_or(0));
    let mut facts = vec![("evaluation", number.to_string())];
    let Some(g) = figure(latest) else {
        facts.push((MEASURED_GAIN, "none".into()));
        return Some(facts);
    };
    let band =
        |e: &Evaluation, g: f64| e.verdict.geomean_interval.unwrap_or_else(|| interval(g, predicate.noise_unknown));
    // The best of the few before it (a campaign runs several tracks, and
    // "a new best" in words is the track's), else of all before it, else
    // the baseline (1.0x, measured by itself).
    let best_of = |es: &[&Evaluation]| {
        es.iter().filter_map(|e| figure(e).map(|b| (b, band(e, b)))).max_by(|a, b| a.0.total_cmp(&b.0))
    };
    let best = best_of(&before[before.len().saturating_sub(RECENT)..]).or_else(|| best_of(before));
    let (b, b_band) = best.unwrap_or((1.0, interval(1.0, predicate.noise_unknown)));
    facts.push(("figure", format!("{g:.3}x")));
    facts.push(("best_before", format!("{b:.3}x")));
    let g_band = band(latest, g);
    let measured = if beyond_noise_above(g, g_band, b, b_band) {
        "beyond_noise"
    } else if beyond_noise_above(b, b_band, g, g_band) {
        "none"
    } else {
        // A tie, a hair above or below: "a new best" that only the noise
        // can tell from the figures before it.
        "inside_noise"
    };
    facts.push(("change_pct", format!("{:+.2}", (g / b - 1.0) * 100.0)));
    facts.push((MEASURED_GAIN, measured.into()));
    Some(facts)
}

/// Reads each gain claim of `claims` against `history` ([`read`]): its
/// finding gets the facts, and its detail what was measured.
pub fn read_claims(claims: &mut [ClaimMoment], history: &[Evaluation], predicate: &PredicateSpec) {
    for c in claims.iter_mut().filter(|c| c.finding.moment == "suspicious_gain") {
        let Some(facts) = read(history, predicate) else { continue };
        for (k, v) in facts {
            c.finding.facts.insert(k.to_string(), v);
        }
        let f = &c.finding.facts;
        let said = match f.get(MEASURED_GAIN).map(String::as_str) {
            Some(kind) => match (f.get("figure"), f.get("best_before"), f.get("change_pct")) {
                (Some(g), Some(b), Some(pct)) => format!(
                    "evaluation {} measured {g} against {b} (the best of the {RECENT} before it), {pct}%, {}",
                    f["evaluation"],
                    match kind {
                        "none" => "below it beyond noise: no gain",
                        "inside_noise" => "inside the noise of the two figures",
                        _ => "beyond their noise",
                    }
                ),
                _ => format!("evaluation {} gave no correct figure", f["evaluation"]),
            },
            None => continue,
        };
        c.finding.detail.push_str(&format!("; {said}"));
    }
}

/// Whether a claim's finding is a gain claim with no measured gain.
pub fn unmeasured(f: &super::Finding) -> bool {
    f.moment == "suspicious_gain" && f.facts.get(MEASURED_GAIN).is_some_and(|m| m == "none")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::ScenarioResult;

    /// Evaluation `id` of one scenario at speed-up `g` (None: the run
    /// failed and measured nothing), with no spread reported.
    fn eval(id: i64, g: Option<f64>, correct: bool) -> Evaluation {
        let spec = PredicateSpec::default();
        let measured: Vec<ScenarioResult> = g
            .map(|g| ScenarioResult {
                scenario: "s".into(),
                correct,
                time_us: 100.0 / g,
                baseline_us: 100.0,
                max_abs_err_ref: None,
                max_abs_err_hi: None,
                tolerance: None,
                rtol: None,
                max_tol_ratio: None,
                compare_us: None,
                bound_us: None,
                samples: None,
                cv: None,
                reason: None,
                cannot_tell: None,
                baseline_cv: None,
            })
            .into_iter()
            .collect();
        let failures = if g.is_none() { vec!["the run failed".to_string()] } else { vec![] };
        Evaluation {
            id: Some(id),
            tree: format!("t{id}"),
            verdict: crate::predicate::judge(&spec, &["s".to_string()], &measured, failures),
            build: None,
            run: None,
            violations: vec![],
            duration_ms: 1,
            created_at: String::new(),
            cached: false,
            origin: Default::default(),
        }
    }

    fn claim() -> ClaimMoment {
        ClaimMoment {
            finding: super::super::Finding { moment: "suspicious_gain".into(), ..Default::default() },
            quote: "NEW BEST!".into(),
            waiting: false,
        }
    }

    fn measured(history: &[Evaluation]) -> String {
        let mut c = vec![claim()];
        read_claims(&mut c, history, &PredicateSpec::default());
        c[0].finding.facts.get(MEASURED_GAIN).cloned().unwrap_or_default()
    }

    #[test]
    fn a_gain_in_words_is_read_against_the_latest_measurement() {
        let h = [eval(1, Some(1.20), true), eval(2, Some(1.25), true)];
        assert_eq!(measured(&h), "inside_noise", "+4% with 3% noise on each figure");
        let h = [eval(1, Some(1.20), true), eval(2, Some(1.60), true)];
        assert_eq!(measured(&h), "beyond_noise");
        let h = [eval(1, Some(1.20), true), eval(2, Some(1.10), true)];
        assert_eq!(measured(&h), "none", "below the best before it beyond noise");
        let h = [eval(1, Some(1.20), true), eval(2, Some(1.20), true)];
        assert_eq!(measured(&h), "inside_noise", "a tie claimed as a new best");
        let h = [eval(1, Some(1.20), true), eval(2, Some(1.18), true)];
        assert_eq!(measured(&h), "inside_noise", "a hair below");
        let h = [eval(1, Some(1.20), true), eval(2, Some(3.0), false)];
        assert_eq!(measured(&h), "none", "a fast wrong result is no gain");
        let h = [eval(1, Some(1.20), true), eval(2, None, false)];
        assert_eq!(measured(&h), "none", "a failed run measured nothing");
        assert_eq!(measured(&[eval(1, Some(0.5), true)]), "none", "a first figure below the baseline");
        assert_eq!(measured(&[eval(1, Some(2.0), true)]), "beyond_noise", "a first figure against the baseline");
        assert_eq!(measured(&[]), "", "no evaluation: the words are all there is");
        // A second track: far below the campaign's best of long ago, and a
        // new best of its own inside the noise.
        let mut h: Vec<Evaluation> = vec![eval(1, Some(3.0), true)];
        h.extend((2..=7).map(|i| eval(i, Some(1.0 + i as f64 / 1000.0), true)));
        h.push(eval(8, Some(1.02), true));
        assert_eq!(measured(&h), "inside_noise", "against the 5 before it, not evaluation 1");
        h.push(eval(9, Some(0.7), true));
        assert_eq!(measured(&h), "none", "a clear loss against the track");
    }

    /// Only the agent's own trees count: gadfly's re-check of a gain with
    /// another seed is no new best of the workspace, nor the latest one.
    #[test]
    fn rechecks_are_not_the_workspace() {
        let mut recheck = eval(3, Some(1.1), true);
        recheck.origin = Origin::Recheck;
        let h = [eval(1, Some(1.0), true), eval(2, Some(1.5), true), recheck];
        assert_eq!(measured(&h), "beyond_noise", "the latest workspace evaluation is 2");
        let mut c = vec![claim()];
        read_claims(&mut c, &h, &PredicateSpec::default());
        let said = &c[0].finding.detail;
        assert!(
            said.contains("evaluation 2 measured 1.500x against 1.000x (the best of the 5 before it), +50.00%"),
            "{said}"
        );
        assert!(!unmeasured(&c[0].finding));
    }

    #[test]
    fn other_claims_are_left_alone() {
        let mut c = vec![claim()];
        c[0].finding.moment = "limit_claim".into();
        read_claims(&mut c, &[eval(1, Some(0.5), true)], &PredicateSpec::default());
        assert!(c[0].finding.facts.is_empty());
        assert!(!unmeasured(&c[0].finding));
    }
}
