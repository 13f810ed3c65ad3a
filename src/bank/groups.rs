//! Which bank groups fit each moment: the pure mapping the gate and the
//! application use to pick a question for a moment.

/// Bank groups that fit each moment, best first.
pub fn groups_for(moment: &str) -> &'static [&'static str] {
    match moment {
        "start" => &["bound", "measurement", "algorithm_family"],
        "plateau" => &["gap_analysis", "algorithm_family", "campaign_process", "memory_hierarchy"],
        "limit_claim" => &["bound", "gap_analysis", "campaign_process"],
        "suspicious_gain" => &["benchmark_validity", "measurement", "correctness"],
        "correctness_dismissal" => &["correctness", "measurement"],
        "edit_loop" => &["campaign_process", "algorithm_family"],
        _ => &[],
    }
}

/// What a question is for, and so what rewards it (see [`super::learn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// It aims at a faster kernel: rewarded by a verified gain.
    Performance,
    /// It checks that a gain or a result is real: rewarded when the gain
    /// it questioned disappears or a failure is caught. Scored like a
    /// performance question, a validity question that exposes a fake gain
    /// counted as a failure (BANK-REVIEW.md 5.3.4).
    Validity,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Performance => "performance",
            Kind::Validity => "validity",
        }
    }
}

/// The groups whose questions check that a gain or a result is real: the
/// benchmark measures the workload (benchmark_validity), the output is
/// right (correctness), the timing is sound (measurement). Every other
/// group (bound, gap analysis, algorithm, memory, launch, instruction,
/// process, comparison, architecture) aims at speed. The one place the
/// split is decided.
pub const VALIDITY_GROUPS: &[&str] = &["benchmark_validity", "correctness", "measurement"];

/// The kind of a bank group (an unknown group aims at speed).
pub fn kind_of_group(group: &str) -> Kind {
    if VALIDITY_GROUPS.contains(&group) {
        Kind::Validity
    } else {
        Kind::Performance
    }
}

/// The kind of a bank entry by id, through its group in `bank` (an id the
/// bank does not hold, such as a built-in completion question, aims at speed).
pub fn kind_of_entry(bank: &super::Bank, id: &str) -> Kind {
    bank.get(id).map_or(Kind::Performance, |e| kind_of_group(&e.group))
}

/// Entries that challenge a claimed limit with an experiment (a
/// falsifying test, a measured ceiling, a stripped-down skeleton, another
/// level): what a limit claim prefers.
pub const CHALLENGE_LIMIT: &[&str] = &[
    "process-003",
    "process-010",
    "measure-011",
    "bound-002",
    "bound-007",
    "bound-010",
    "parallel-002",
    "parallel-009",
    "instr-010",
    "compare-001",
    "compare-004",
    "process-005",
];
/// Entries about fixed per-call cost: launches, latency, the zero-size
/// intercept. What a plateau on the smallest scenarios prefers.
pub const LAUNCH_BOUND: &[&str] =
    &["bound-006", "bound-011", "gap-005", "gap-009", "parallel-003", "parallel-004", "parallel-007", "measure-003"];

/// Bank ids and groups the evidence points to (selection weighs them up;
/// it never limits the choice to them): by detector, by the claim's words,
/// and a plateau on the campaign's smallest scenarios (`all`, smallest
/// first) to launch and latency questions.
pub fn routed(moment: &str, ev: Option<&super::evidence::Evidence>, all: &[String]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    if moment == "limit_claim" {
        out.extend(CHALLENGE_LIMIT);
    }
    let Some(ev) = ev else { return out };
    if moment == "plateau" && ev.on_small_scenarios(all) {
        out.extend(LAUNCH_BOUND);
        out.push("parallelism_launch");
    }
    // A claimed gain measured beyond the noise of the figures: the timing
    // stands, what is left to ask is whether the benchmark still measures
    // the same work.
    if moment == "suspicious_gain" && ev.facts.get("measured_gain").is_some_and(|m| m == "beyond_noise") {
        out.push("benchmark_validity");
    }
    match ev.detector.as_deref().unwrap_or("") {
        "faster_than_bound" => out.extend(["bound-003", "bench-001", "bench-007"]),
        "zero_error" => out.extend(["correct-009", "bench-003", "bench-009"]),
        "cv_jump" => out.extend(["measure-004", "measure-005", "measure-001"]),
        "concentrated_gain" => out.extend(["bench-004", "gap-003"]),
        "correctness_regression" => out.extend(["correct-007", "correct-005"]),
        "tool_calls_without_evaluation" => out.extend(["measure-006", "process-006"]),
        _ => {}
    }
    let quote = ev.quote.as_deref().unwrap_or("").to_ascii_lowercase();
    let words: [(&[&str], &[&'static str]); 4] = [
        (&["memory-bound", "memory bound", "bandwidth"], &["bound-002", "memory-003", "bound-005", "bound-009"]),
        (&["launch", "overhead", "latency"], &["parallel-003", "bound-006", "gap-005", "parallel-004"]),
        (&["rounding", "precision", "tf32", "floating"], &["correct-010", "instr-009", "correct-001"]),
        (&["compute-bound", "compute bound", "peak flops", "tensor core"], &["bound-007", "instr-010", "bound-001"]),
    ];
    for (keys, ids) in words {
        if keys.iter().any(|k| quote.contains(k)) {
            out.extend(ids);
        }
    }
    out
}

/// Bank ids the evidence's own numbers point to, a stronger pull than
/// [`routed`]'s (selection still never limits the choice to them; one
/// asked here already competes again while the evidence still points to
/// it, and the spread over groups does not hold it back: [`super::select`]). A plateau's facts
/// ([`crate::moments::detect::plateau`]) say what kind of stall it is:
/// - the best figure never measured again and the window's best and median
///   within 2% of it: whether the plateau, and the small gains kept before it, sit
///   inside the noise (`measure-013`, then the A-versus-A spread,
///   `measure-005`), at any signal of the stall: a campaign that runs each
///   version once and keeps differences of a fraction of a percent has no
///   idea of its noise, whatever the stall's length (in the blind readings
///   of the real logs these two were judged useful at 30 of 39 points,
///   the process questions at 17 of 76);
/// - half the window or more without a valid figure: the failures, not
///   the ideas (`process-002`);
/// - a stall four windows long or more, its figures not within 2% of the
///   best: a stop rule and a budget for the direction (`process-012`);
/// - a best measured once that stands 10% or more above every other
///   figure (`best_lead_pct`): whether it was measured under the same
///   setup as the rest, and comes back (`measure-014`, in an experiment
///   log the agent kept; in the blind readings a serving log's plateau
///   stood on a one-request run and a batch throughput logged in a
///   single-stream column, and the questions asked there missed it).
///
/// A setting claimed at its best ("no further gain", "already optimal"):
/// which values on both sides of it were measured (`process-015`; in the
/// blind readings "LR already optimal" after one larger value was judged
/// to need exactly that, five times over).
///
/// A jump of the figure, or a gain claimed in words beyond the noise, in
/// the agent's own log: the same comparability question first.
///
/// A limit claimed in words that quote a figure: the measurement behind it
/// (`measure-011`). Over the blind readings it was judged useful at 9 of
/// 15 such claims, the falsifying experiment (`process-003`) at 5 of 20;
/// the branches dropped on a failure (`process-002`), pointed here once,
/// at 4 of 15 (an OOM or a measured loss is no bug to repair).
///
/// A gain claimed in words whose new best sits inside the noise of the
/// two figures ([`crate::moments::gain_claim`]): the A-versus-A spread
/// (`measure-005`), then the figure reproduced (`measure-010`). Over the
/// twelve blind readings of the real logs these two were judged useful at
/// 19 of 19 "NEW BEST" claims (bests by a fraction of a percent in a
/// campaign whose repeats swing by several), at 12 of 43 other gain claims.
pub fn pointed(moment: &str, ev: Option<&super::evidence::Evidence>) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    let Some(ev) = ev else { return out };
    // The fact `moments::gain_claim` writes (a name, as the plateau's are).
    let measured = ev.facts.get("measured_gain").map(String::as_str);
    if moment == "suspicious_gain" && measured == Some("inside_noise") {
        return vec!["measure-005", "measure-010"];
    }
    // A figure well beyond the others, in the agent's own log (where each
    // run's setup is the agent's): first whether it measured the same
    // thing the others did (`measure-014` assumes `logged_figures`).
    if moment == "suspicious_gain" && super::vocabulary::a_figure_stands_out(ev) {
        return vec!["measure-014"];
    }
    // A limit claimed with figures: the measurement behind it, and the
    // branches dropped on a failure rather than a measured loss.
    // A setting claimed at its best: whether both sides of it were measured
    // (`process-015`), not a repeat of the one side that was.
    if moment == "limit_claim" && super::vocabulary::claims_an_optimum(Some(ev)) {
        return vec!["process-015"];
    }
    // A limit that quotes its figures rests on a measurement: that
    // measurement (the branches dropped on a failure fit a plateau's
    // failures, not a measured claim: judged useful at 4 of 15 such claims).
    if moment == "limit_claim" && super::vocabulary::quotes_a_figure(Some(ev)) {
        return vec!["measure-011"];
    }
    if moment != "plateau" || ev.detector.as_deref() != Some("plateau") {
        return out;
    }
    let num = |k: &str| ev.facts.get(k).and_then(|v| v.parse::<f64>().ok());
    let window = num("window").unwrap_or(5.0).max(1.0);
    let stall = num("stall").unwrap_or(window);
    // A best measured once, far above every other figure: the stall may be
    // measured against a setup the other runs never had.
    if super::vocabulary::a_figure_stands_out(ev) {
        out.push("measure-014");
    }
    if num("invalid").is_some_and(|i| i >= (window / 2.0).ceil()) {
        out.push("process-002");
    }
    // Near the best (within 2%): the differences may be noise; far below
    // it, the ideas were worse and noise is not the question.
    // The window's median too: one near-tie among clearly worse ideas is
    // not a plateau inside the noise.
    let near_best = num("shortfall_pct").is_some_and(|s| s <= 2.0)
        && num("median_shortfall_pct").is_none_or(|s| s.is_nan() || s <= 2.0);
    if near_best && num("best_runs").is_some_and(|r| r <= 1.0) {
        out.extend(["measure-013", "measure-005"]);
    }
    // Not inside the noise: there a stop rule is no answer (over the blind
    // readings, process-012 was judged useful at 1 of 18 plateaus within 2%
    // of the best, at 15 of 30 further below it).
    if stall >= 4.0 * window && !near_best {
        out.push("process-012");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_routes_the_choice() {
        use crate::bank::evidence::Evidence;
        let all: Vec<String> = ["s1", "s2", "s3", "m", "l", "xl"].iter().map(|s| s.to_string()).collect();
        let small = Evidence { scenarios: vec!["s1".into()], ..Default::default() };
        assert!(routed("plateau", Some(&small), &all).contains(&"parallel-003"));
        let large = Evidence { scenarios: vec!["xl".into()], ..Default::default() };
        assert!(!routed("plateau", Some(&large), &all).contains(&"parallel-003"));
        assert!(routed("limit_claim", None, &all).contains(&"process-003"));
        let q = Evidence { quote: Some("We are memory-bound now".into()), ..Default::default() };
        assert!(routed("limit_claim", Some(&q), &all).contains(&"memory-003"));
        let gain =
            |m: &str| Evidence { facts: [("measured_gain".to_string(), m.to_string())].into(), ..Default::default() };
        assert!(routed("suspicious_gain", Some(&gain("beyond_noise")), &all).contains(&"benchmark_validity"));
        assert!(!routed("suspicious_gain", Some(&gain("inside_noise")), &all).contains(&"benchmark_validity"));
    }

    #[test]
    fn a_lone_best_and_a_jump_point_to_whether_the_figure_measured_the_same_thing() {
        use crate::bank::evidence::Evidence;
        let plateau = |facts: &[(&str, &str)]| crate::bank::evidence::with_facts("plateau", facts);
        let lone = plateau(&[("window", "5"), ("stall", "5"), ("best_lead_pct", "31")]);
        assert_eq!(pointed("plateau", Some(&lone)).first(), Some(&"measure-014"));
        let plain = plateau(&[("window", "5"), ("stall", "5")]);
        assert!(!pointed("plateau", Some(&plain)).contains(&"measure-014"));
        let jump = Evidence { detector: Some("geomean_jump".into()), ..Default::default() };
        assert_eq!(pointed("suspicious_gain", Some(&jump)), ["measure-014"]);
        let beyond = Evidence {
            facts: [("measured_gain".to_string(), "beyond_noise".to_string())].into(),
            ..Default::default()
        };
        assert_eq!(pointed("suspicious_gain", Some(&beyond)), ["measure-014"]);
        let claim = |q: &str| Evidence { quote: Some(q.into()), ..Default::default() };
        assert_eq!(
            pointed("limit_claim", Some(&claim("2x LR at D_MODEL=256 no improvement (LR already optimal)"))),
            ["process-015"]
        );
        assert_eq!(pointed("limit_claim", Some(&claim("More perturbations do not help."))), ["process-015"]);
        assert_eq!(pointed("limit_claim", Some(&claim("Load floor of 2048 cycles"))), ["measure-011"]);
        assert!(pointed("limit_claim", Some(&claim("We are memory-bound."))).is_empty());
        let other = Evidence { detector: Some("concentrated_gain".into()), ..Default::default() };
        assert!(pointed("suspicious_gain", Some(&other)).is_empty());
    }

    #[test]
    fn a_plateau_s_numbers_point_to_the_question_that_fits_its_stall() {
        use crate::bank::evidence::Evidence;
        let ev = |pairs: &[(&str, &str)]| crate::bank::evidence::with_facts("plateau", pairs);
        let first =
            ev(&[("window", "5"), ("stall", "5"), ("invalid", "0"), ("best_runs", "1"), ("shortfall_pct", "0.4")]);
        assert_eq!(pointed("plateau", Some(&first)), vec!["measure-013", "measure-005"]);
        let later =
            ev(&[("window", "5"), ("stall", "10"), ("invalid", "0"), ("best_runs", "1"), ("shortfall_pct", "1.5")]);
        assert_eq!(pointed("plateau", Some(&later)), vec!["measure-013", "measure-005"], "at any signal");
        let long_near =
            ev(&[("window", "5"), ("stall", "20"), ("invalid", "0"), ("best_runs", "1"), ("shortfall_pct", "0.3")]);
        assert_eq!(
            pointed("plateau", Some(&long_near)),
            vec!["measure-013", "measure-005"],
            "no stop rule in the noise"
        );
        let long_far =
            ev(&[("window", "5"), ("stall", "20"), ("invalid", "0"), ("best_runs", "1"), ("shortfall_pct", "40")]);
        assert_eq!(pointed("plateau", Some(&long_far)), vec!["process-012"], "a dead direction far below the best");
        let remeasured =
            ev(&[("window", "5"), ("stall", "5"), ("invalid", "0"), ("best_runs", "3"), ("shortfall_pct", "0.4")]);
        assert!(pointed("plateau", Some(&remeasured)).is_empty(), "the noise of the best is known");
        let worse =
            ev(&[("window", "5"), ("stall", "5"), ("invalid", "0"), ("best_runs", "1"), ("shortfall_pct", "8")]);
        assert!(pointed("plateau", Some(&worse)).is_empty(), "far below the best: the ideas were worse, not noisy");
        let one_tie = ev(&[
            ("window", "5"),
            ("stall", "5"),
            ("best_runs", "1"),
            ("shortfall_pct", "0.5"),
            ("median_shortfall_pct", "6"),
        ]);
        assert!(pointed("plateau", Some(&one_tie)).is_empty(), "one near-tie among clearly worse ideas");
        let broken = ev(&[("window", "5"), ("stall", "10"), ("invalid", "3"), ("best_runs", "1")]);
        assert_eq!(pointed("plateau", Some(&broken)), vec!["process-002"]);
        let twice = ev(&[("window", "5"), ("stall", "20"), ("invalid", "0"), ("repeated", "#3 and #9")]);
        // Two evaluations with the very same figure make "which hypothesis
        // did you test twice" possible (`repeated_trial`), no more: in the
        // blind reading of seed 51 it was useful at 1 of 4 such points.
        assert_eq!(pointed("plateau", Some(&twice)), vec!["process-012"]);
        assert!(pointed("suspicious_gain", Some(&first)).is_empty());
        let gain = |m: &str| Evidence {
            detector: Some("text:suspicious_gain_claim".into()),
            facts: [("measured_gain".to_string(), m.to_string())].into(),
            ..Default::default()
        };
        assert_eq!(pointed("suspicious_gain", Some(&gain("inside_noise"))), vec!["measure-005", "measure-010"]);
        // Beyond the noise: whether it measured the same thing (asked of
        // the agent's own log only: `measure-014` assumes `logged_figures`).
        assert_eq!(pointed("suspicious_gain", Some(&gain("beyond_noise"))), vec!["measure-014"]);
        assert!(pointed("plateau", Some(&gain("inside_noise"))).is_empty(), "only at a gain");
        assert_eq!(crate::moments::gain_claim::MEASURED_GAIN, "measured_gain", "the fact's name, read here");
        let said = |q: &str| Evidence { quote: Some(q.into()), ..Default::default() };
        let figures = said("The load floor is 2048 cycles at 2 loads a cycle.");
        assert_eq!(pointed("limit_claim", Some(&figures)), vec!["measure-011"]);
        let optimum = said("0.04 is near-optimal for this model scale.");
        assert_eq!(pointed("limit_claim", Some(&optimum)), vec!["process-015"]);
        assert!(pointed("limit_claim", Some(&said("We are at the bandwidth limit now."))).is_empty());
        let idle = Evidence { detector: Some("tool_calls_without_evaluation".into()), ..first.clone() };
        assert!(pointed("plateau", Some(&idle)).is_empty());
        let bank = crate::bank::embedded();
        for id in ["process-002", "process-006", "process-012", "measure-013", "measure-005"] {
            assert!(bank.get(id).is_some_and(|e| e.fits("plateau")), "{id} is a plateau question of the bank");
        }
    }

    #[test]
    fn validity_groups_are_core_groups_and_the_rest_aim_at_speed() {
        for g in VALIDITY_GROUPS {
            assert!(crate::bank::CORE_GROUPS.contains(g), "{g}");
            assert_eq!(kind_of_group(g), Kind::Validity);
        }
        assert_eq!(kind_of_group("gap_analysis"), Kind::Performance);
        assert_eq!(kind_of_group("comparison"), Kind::Performance);
        let bank = crate::bank::embedded();
        let kinds: std::collections::BTreeSet<Kind> = bank.entries.iter().map(|e| kind_of_entry(bank, &e.id)).collect();
        assert_eq!(kinds.len(), 2, "the shipped bank has questions of both kinds");
    }

    #[test]
    fn each_moment_maps_to_core_groups() {
        assert!(groups_for("start").contains(&"bound"));
        assert!(groups_for("unknown").is_empty());
        for m in crate::bank::MOMENTS {
            for g in groups_for(m) {
                assert!(crate::bank::CORE_GROUPS.contains(g), "{m}: {g}");
            }
        }
    }
}
