//! The detectors' tests.

use super::*;
use crate::campaign::PredicateSpec;
use crate::predicate::judge;
use crate::results::ScenarioResult;

/// An evaluation from (scenario, correct, speedup, cv, err_ref, err_hi, bound).
fn ev(id: i64, rows: &[(&str, bool, f64)]) -> Evaluation {
    ev_full(id, &rows.iter().map(|r| (r.0, r.1, r.2, 0.01, 1e-15, 2e-15, None)).collect::<Vec<_>>())
}

#[allow(clippy::type_complexity)]
fn ev_full(id: i64, rows: &[(&str, bool, f64, f64, f64, f64, Option<f64>)]) -> Evaluation {
    let spec = PredicateSpec { correct: true, min_speedup: 1.0, min_geomean_speedup: None, ..Default::default() };
    let names: Vec<String> = rows.iter().map(|r| r.0.to_string()).collect();
    let measured: Vec<ScenarioResult> = rows
        .iter()
        .map(|(n, c, s, cv, er, eh, b)| ScenarioResult {
            scenario: n.to_string(),
            correct: *c,
            time_us: 100.0 / s,
            baseline_us: 100.0,
            max_abs_err_ref: Some(*er),
            max_abs_err_hi: Some(*eh),
            tolerance: Some(1e-9),
            rtol: None,
            max_tol_ratio: None,
            compare_us: None,
            bound_us: *b,
            samples: Some(10),
            cv: Some(*cv),
            reason: None,
            cannot_tell: None,
            baseline_cv: None,
        })
        .collect();
    Evaluation {
        id: Some(id),
        tree: format!("t{id}"),
        verdict: judge(&spec, &names, &measured, vec![]),
        build: None,
        run: None,
        violations: vec![],
        duration_ms: 1,
        created_at: String::new(),
        cached: false,
        origin: Default::default(),
    }
}

fn flat(id: i64, g: f64) -> Evaluation {
    ev(id, &[("a", true, g), ("b", true, g), ("c", true, g), ("d", true, g), ("e", true, g)])
}

#[test]
fn plateau_fires_after_n_flat_evaluations_and_not_on_a_near_miss() {
    let s = Settings { plateau_evaluations: 3, plateau_min_gain: 0.01, ..Default::default() };
    let mut h = vec![flat(1, 1.5), flat(2, 1.50), flat(3, 1.505), flat(4, 1.509)];
    let f = plateau(&h, &s).expect("no 1% gain over 3 evaluations");
    assert_eq!(f.evaluations, vec![2, 3, 4]);
    // a 1.1% step over the best before it is a gain
    h[3] = flat(4, 1.522);
    assert_eq!(plateau(&h, &s), None);
    // a best that creeps up by less than 1% at each step is a stall
    h[3] = flat(4, 1.518);
    let f = plateau(&h, &s).expect("1.500, 1.505, 1.518: never 1% at once");
    assert!(f.detail.contains("crept from 1.500x to 1.518x"), "{}", f.detail);
    // too short a history
    assert_eq!(plateau(&h[..3], &s), None);
    assert!(idle_plateau(60, 60).is_some());
    assert!(idle_plateau(59, 60).is_none());
}

/// A stall is spoken of at N, 2N, 4N... evaluations without a gain,
/// not at each one; a gain starts the count again.
#[test]
fn a_long_stall_is_spoken_of_on_a_doubling_schedule() {
    let s = Settings { plateau_evaluations: 3, ..Default::default() };
    let mut h = vec![flat(1, 1.0)];
    let mut fired = vec![];
    for i in 2..=27 {
        h.push(flat(i, 1.0 + 0.001 * (i % 3) as f64));
        if let Some(f) = plateau(&h, &s) {
            fired.push(f.facts["stall"].parse::<usize>().unwrap());
        }
    }
    assert_eq!(fired, vec![3, 6, 12, 24]);
    h.push(flat(28, 1.2));
    for i in 29..=31 {
        h.push(flat(i, 1.2));
    }
    assert_eq!(plateau(&h, &s).map(|f| f.facts["stall"].clone()), Some("3".into()), "the gain restarts the count");
    let every = Settings { plateau_backoff: false, ..s.clone() };
    assert!(plateau(&h[..8], &every).is_some() && plateau(&h[..9], &every).is_some());
}

/// The plateau's facts: failures in the window, a figure seen twice
/// from different trees, a best measured once; a fast wrong kernel
/// is no gain.
#[test]
fn a_plateau_says_what_kind_of_stall_it_is() {
    let s = Settings { plateau_evaluations: 4, ..Default::default() };
    let wrong = |id: i64| ev(id, &[("a", false, 3.0), ("b", true, 3.0)]);
    let mut h = vec![flat(1, 1.0), flat(2, 1.5), flat(3, 1.40), wrong(4), flat(5, 1.40), wrong(6)];
    let f = plateau(&h, &s).expect("a wrong kernel at 3x is no gain");
    assert_eq!((f.facts["invalid"].as_str(), f.facts["best_runs"].as_str()), ("2", "1"), "{:?}", f.facts);
    assert_eq!(f.facts["repeated"], "#3 and #5", "{}", f.detail);
    assert!(f.detail.contains("#3 and #5 gave the very same figure (1.400x)"), "{}", f.detail);
    assert!(f.detail.contains("2 of the last 4 gave no valid figure"), "{}", f.detail);
    // The same tree measured again is a re-measurement, not a repeat.
    h[4].tree = h[2].tree.clone();
    let f = plateau(&h, &s).unwrap();
    assert!(!f.facts.contains_key("repeated"), "{:?}", f.facts);
    assert_eq!(f.facts["best_runs"], "1");
    assert_eq!(stall(&h, 0.01), 4);
    assert_eq!(stall(&[wrong(1), wrong(2)], 0.01), 2);
}

/// Issue 35, item 1: a finding carries the numbers its detector saw
/// (`bank::evidence` tests that they reach the question).
#[test]
fn findings_carry_the_numbers_their_detector_saw_into_the_evidence() {
    let s = Settings { plateau_evaluations: 3, plateau_min_gain: 0.01, ..Default::default() };
    let h = vec![flat(1, 1.5), flat(2, 1.50), flat(3, 1.505), flat(4, 1.509)];
    let f = plateau(&h, &s).unwrap();
    let fact = |f: &Finding, k: &str| f.facts.get(k).cloned().unwrap_or_default();
    assert_eq!(
        (fact(&f, "best_before"), fact(&f, "best_window"), fact(&f, "window"), fact(&f, "min_gain_pct")),
        ("1.5".to_string(), "1.509".to_string(), "3".to_string(), "1".to_string()),
        "{:?}",
        f.facts
    );
    let j = geomean_jump(&[flat(1, 1.0), flat(2, 1.6)], &Settings::default()).unwrap();
    assert_eq!((fact(&j, "from"), fact(&j, "to"), fact(&j, "ratio")), ("1".into(), "1.6".into(), "1.6".into()));
    assert_eq!(fact(&idle_plateau(75, 60).unwrap(), "tool_calls"), "75");
}

#[test]
fn a_one_step_jump_is_suspicious_and_a_large_but_smaller_one_is_not() {
    let s = Settings::default();
    let f = geomean_jump(&[flat(1, 1.0), flat(2, 1.6)], &s).unwrap();
    assert!(f.detail.contains("went to 1.600x from a best of 1.000x"), "{}", f.detail);
    assert_eq!(geomean_jump(&[flat(1, 1.0), flat(2, 1.45)], &s), None);
}

/// Measured against the best before, not the evaluation before: a
/// discarded experiment and the return to the best version are no
/// jump (the old rule saw 2.3x here), and an evaluation that measured
/// nothing does not hide a jump past it.
#[test]
fn a_jump_is_measured_against_the_best_before() {
    let s = Settings::default();
    assert_eq!(geomean_jump(&[flat(1, 1.0), flat(2, 0.6), flat(3, 1.4)], &s), None);
    let nothing = ev(2, &[]);
    assert_eq!(nothing.verdict.geomean_speedup, None);
    let f = geomean_jump(&[flat(1, 1.0), nothing, flat(3, 1.6)], &s).expect("a jump past a failed evaluation");
    assert_eq!(f.evaluations, vec![1, 3]);
    let f = geomean_jump(&[flat(1, 1.2), flat(2, 0.5), flat(3, 1.0), flat(4, 1.9)], &s).unwrap();
    assert_eq!(f.evaluations, vec![1, 4], "from the best, evaluation 1");
    assert_eq!(f.facts["from"], "1.2");
}

/// A naive kernel fixed back up to the initial kernel's speed is no
/// jump, however large the step (0.04x to 1.01x); past the initial
/// kernel by the threshold, it is one, measured from 1.0x.
#[test]
fn a_naive_kernel_brought_back_to_the_baseline_is_no_jump() {
    let s = Settings::default();
    assert_eq!(geomean_jump(&[flat(1, 0.042), flat(2, 1.01)], &s), None);
    assert_eq!(geomean_jump(&[flat(1, 0.024), flat(2, 0.73)], &s), None);
    assert_eq!(geomean_jump(&[flat(1, 0.3), flat(2, 1.45)], &s), None);
    let f = geomean_jump(&[flat(1, 0.042), flat(2, 1.85)], &s).expect("1.85x the initial kernel in one step");
    assert_eq!(f.facts["from"], "0.042");
    assert_eq!(f.facts["ratio"], "1.85");
    assert!(f.detail.contains("above the initial kernel"), "{}", f.detail);
}

/// A naive start that catches up with the initial kernel raises a
/// `start` moment (a performance question), once: not before it
/// catches up, not again after, not from a start that was never naive.
#[test]
fn a_naive_start_that_catches_up_asks_a_performance_question_once() {
    let f = baseline_reached(&[flat(1, 0.042), flat(2, 0.3), flat(3, 1.01)]).expect("caught up");
    assert_eq!((f.moment.as_str(), f.detector.as_str()), ("start", "baseline_reached"));
    assert_eq!((f.facts["from"].as_str(), f.facts["to"].as_str()), ("0.3", "1.01"));
    assert_eq!(f.evaluations, vec![2, 3]);
    assert_eq!(baseline_reached(&[flat(1, 0.042), flat(2, 0.6)]), None, "not yet");
    assert_eq!(baseline_reached(&[flat(1, 0.042), flat(2, 1.01), flat(3, 1.2)]), None, "once");
    assert_eq!(baseline_reached(&[flat(1, 0.9), flat(2, 1.3)]), None, "never naive");
    let mut wrong = flat(2, 1.5);
    wrong.verdict.scenarios[0].correct = false;
    assert_eq!(baseline_reached(&[flat(1, 0.1), wrong]), None, "an incorrect figure catches nothing up");
    // And the jump detector stays quiet on it.
    assert_eq!(geomean_jump(&[flat(1, 0.042), flat(2, 0.3), flat(3, 1.01)], &Settings::default()), None);
}

/// The reference's own time moving is a question whatever the
/// candidate did (a global setting that speeds the reference up too);
/// its noise is not.
#[test]
fn a_reference_that_moves_is_found_and_its_noise_is_not() {
    let at = |id: i64, base: f64| {
        let mut e = ev(id, &[("a", true, 2.0), ("b", true, 2.0), ("c", true, 2.0)]);
        for s in &mut e.verdict.scenarios {
            s.measured.as_mut().unwrap().baseline_us = base;
        }
        e
    };
    let h = [at(1, 100.0), at(2, 103.0), at(3, 97.0)];
    assert_eq!(reference_shift(&h), None, "3% of noise");
    let h = [at(1, 100.0), at(2, 101.0), at(3, 70.0)];
    let f = reference_shift(&h).expect("the reference 30% faster");
    assert_eq!((f.moment.as_str(), f.scenarios.len()), ("suspicious_gain", 3));
    assert_eq!(f.facts["reference_to_us"], "70");
    assert_eq!(reference_shift(&h[..1]), None, "nothing before");
}

/// The agent plays the detector: a forged 10x that fails correctness
/// first, then a 5x that passes. Measured against the forgery, 5x
/// would be no jump; an incorrect evaluation sets no bar, so it is one.
#[test]
fn an_incorrect_evaluation_does_not_raise_the_bar() {
    let s = Settings::default();
    let wrong = ev(2, &[("a", false, 10.0), ("b", true, 10.0)]);
    assert!(wrong.incorrect() && wrong.verdict.geomean_speedup.is_some());
    let f = geomean_jump(&[flat(1, 1.0), wrong, flat(3, 5.0)], &s).expect("5x over the last correct 1x");
    assert_eq!(f.evaluations, vec![1, 3]);
}

#[test]
fn faster_than_the_bound_and_exact_zero_errors() {
    let e = ev_full(
        1,
        &[("a", true, 2.0, 0.01, 1e-15, 2e-15, Some(49.0)), ("b", true, 2.0, 0.01, 1e-15, 2e-15, Some(51.0))],
    );
    // time = 50 us: a is above its bound (49: fine), b is below (51: impossible)
    let f = faster_than_bound(&[e]).unwrap();
    assert_eq!(f.scenarios, vec!["b"]);
    let e = ev_full(1, &[("a", true, 2.0, 0.01, 0.0, 3e-16, None), ("b", true, 2.0, 0.01, 0.0, 0.0, None)]);
    let f = zero_error(&[e]).unwrap();
    assert_eq!(f.scenarios, vec!["a"], "b's reference is exact too: not suspicious");
}

/// When the reference is the initial kernel, the unchanged kernel
/// matches it exactly: no suspicious gain (there is no gain), and a
/// faster kernel that keeps its order of operations may match it
/// exactly too. A copy of the answer that is faster in a campaign
/// whose initial kernel did not match exactly still is one.
#[test]
fn an_exact_match_of_the_initial_kernel_is_no_false_alarm() {
    let unchanged = ev_full(1, &[("a", true, 1.0, 0.01, 0.0, 3e-16, None)]);
    assert_eq!(zero_error(std::slice::from_ref(&unchanged)), None, "no gain, no suspicious gain");
    let faster = ev_full(2, &[("a", true, 2.0, 0.01, 0.0, 3e-16, None)]);
    assert_eq!(zero_error(&[unchanged, faster.clone()]), None, "the reference is the initial kernel");
    let initial_differs = ev_full(1, &[("a", true, 1.0, 0.01, 1e-16, 3e-16, None)]);
    assert!(zero_error(&[initial_differs, faster]).is_some());
}

#[test]
fn a_gain_on_one_scenario_of_five_is_concentrated_and_a_broad_one_is_not() {
    let s = Settings::default();
    let before = flat(1, 1.0);
    let narrow = ev(2, &[("a", true, 4.0), ("b", true, 1.0), ("c", true, 1.0), ("d", true, 1.02), ("e", true, 1.0)]);
    let f = concentrated_gain(&[before.clone(), narrow], &s).unwrap();
    assert_eq!(f.scenarios, vec!["a"]);
    let broad = ev(2, &[("a", true, 1.5), ("b", true, 1.4), ("c", true, 1.5), ("d", true, 1.45), ("e", true, 1.5)]);
    assert_eq!(concentrated_gain(&[before, broad], &s), None);
}

#[test]
fn cv_jumps_and_correctness_regressions() {
    let s = Settings::default();
    let a = ev_full(1, &[("a", true, 2.0, 0.010, 1e-15, 2e-15, None), ("b", true, 2.0, 0.01, 1e-15, 2e-15, None)]);
    let b = ev_full(2, &[("a", true, 2.0, 0.050, 1e-15, 2e-15, None), ("b", true, 2.0, 0.025, 1e-15, 2e-15, None)]);
    let f = cv_jump(&[a.clone(), b], &s).unwrap();
    assert_eq!(f.scenarios, vec!["a"], "b went 0.01 -> 0.025: below the 3x jump");
    let c = ev(3, &[("a", false, 2.0), ("b", true, 2.0)]);
    let f = correctness_regression(&[a.clone(), c.clone()]).unwrap();
    assert_eq!((f.moment.as_str(), f.scenarios.clone()), ("correctness_dismissal", vec!["a".to_string()]));
    assert_eq!(correctness_regression(&[c.clone(), c]), None, "still wrong is not a regression");
}

/// A plateau that stands on one figure far above every other, measured
/// once, says so; a best only a little ahead, or measured again, does not.
#[test]
fn a_plateau_on_a_lone_best_names_its_lead() {
    let s = Settings { plateau_evaluations: 3, plateau_min_gain: 0.01, ..Default::default() };
    let h = vec![flat(1, 1.0), flat(2, 1.5), flat(3, 1.1), flat(4, 1.12), flat(5, 1.1)];
    let f = plateau(&h, &s).expect("no gain over the lone best");
    assert_eq!(f.facts["best_lead_pct"], "34", "{:?}", f.facts);
    assert!(f.detail.contains("stands 34% above every other figure and was measured once"), "{}", f.detail);
    let close = vec![flat(1, 1.0), flat(2, 1.5), flat(3, 1.45), flat(4, 1.44), flat(5, 1.46)];
    assert!(!plateau(&close, &s).unwrap().facts.contains_key("best_lead_pct"), "3% ahead is not alone");
    // The same tree measured again: the best was reproduced.
    let mut again = h.clone();
    again[4].tree = again[1].tree.clone();
    assert!(!plateau(&again, &s).unwrap().facts.contains_key("best_lead_pct"));
}
