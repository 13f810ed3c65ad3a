//! Calibrating a harness before it judges anyone: the initial kernel
//! against itself, several evaluations with fresh seeds. A fair harness
//! measures it at 1.00x within its noise on every scenario; a bias beyond
//! that noise (one scenario always 0.91x, say) is a harness bug that would
//! read a real gain as a loss, or a loss as a gain. The run-to-run spread
//! found here is the scenario's noise: it widens the predicate's intervals
//! for that scenario ([`crate::campaign::PredicateSpec::calibrated`]), so a
//! bar is met only beyond the noise the harness showed, not only beyond the
//! spread inside one run. Pure: measurements in, figures out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::campaign::PredicateSpec;
use crate::results::ScenarioResult;

/// The evaluations a calibration runs unless asked otherwise.
pub const DEFAULT_RUNS: u32 = crate::campaign::CALIBRATION_DEFAULT_RUNS;

/// The most runs a calibration may ask for.
pub const MAX_RUNS: u32 = crate::campaign::CALIBRATION_MAX_RUNS;

/// One scenario's calibration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioCalibration {
    pub scenario: String,
    /// How many runs measured it correct.
    pub runs: u32,
    /// The initial kernel's speedup against itself, geometric mean over
    /// the runs: 1.0 for a fair harness.
    pub bias: f64,
    /// The run-to-run spread: the standard deviation of the log speedups
    /// (about a relative spread; 0 with one run).
    pub spread: f64,
    /// The half-width one evaluation's figure should get on this scenario
    /// (twice the spread, never below the within-run estimate): what the
    /// predicate uses from now on.
    pub noise: f64,
    /// The bias is beyond what its runs can tell from noise (and beyond
    /// `[predicate] noise`).
    pub biased: bool,
}

/// A whole calibration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    /// The tree calibrated (the initial kernel) and how many runs.
    pub tree: String,
    pub runs: u32,
    pub scenarios: Vec<ScenarioCalibration>,
    /// What makes the figures no calibration: a run that failed, a
    /// scenario incorrect or missing (the initial kernel must be correct
    /// against itself), each naming its run.
    pub problems: Vec<String>,
}

impl Calibration {
    /// The scenarios whose bias is beyond noise.
    pub fn biased(&self) -> Vec<&ScenarioCalibration> {
        self.scenarios.iter().filter(|s| s.biased).collect()
    }

    /// The harness may judge the campaign: no problem and no bias.
    pub fn fair(&self) -> bool {
        self.problems.is_empty() && self.biased().is_empty()
    }

    /// The per-scenario noise the predicate takes from this calibration.
    pub fn noise_by_scenario(&self) -> BTreeMap<String, f64> {
        self.scenarios.iter().map(|s| (s.scenario.clone(), s.noise)).collect()
    }

    /// One line per finding, for a person.
    pub fn summary(&self) -> String {
        let mut out = Vec::new();
        for p in &self.problems {
            out.push(format!("problem: {p}"));
        }
        for s in &self.scenarios {
            out.push(format!(
                "{:<28} bias {:.3}x  spread {:.2}%  noise {:.2}%  over {} runs{}",
                s.scenario,
                s.bias,
                s.spread * 100.0,
                s.noise * 100.0,
                s.runs,
                if s.biased { "  BIASED: the initial kernel is not 1.00x against itself beyond noise" } else { "" }
            ));
        }
        out.join("\n")
    }
}

/// The calibration of `tree` from its runs (each the scenarios one
/// evaluation measured; `failures[i]` the evaluation-level failures of run
/// i, bar failures left out by the caller).
pub fn summarize(
    spec: &PredicateSpec,
    required: &[String],
    tree: &str,
    runs: &[Vec<ScenarioResult>],
    failures: &[Vec<String>],
) -> Calibration {
    let mut problems = Vec::new();
    for (i, f) in failures.iter().enumerate() {
        for line in f {
            problems.push(format!("run {}: {}", i + 1, line.lines().next().unwrap_or("")));
        }
    }
    let mut scenarios = Vec::new();
    for name in required {
        let mut logs = Vec::new();
        let mut within = Vec::new();
        for (i, run) in runs.iter().enumerate() {
            match run.iter().find(|r| &r.scenario == name) {
                None => problems.push(format!("run {}: scenario {name} missing from the results", i + 1)),
                Some(r) if !r.correct => problems.push(format!(
                    "run {}: scenario {name} incorrect against itself{}",
                    i + 1,
                    r.reason.as_deref().map(|w| format!(" ({w})")).unwrap_or_default()
                )),
                Some(r) => {
                    logs.push((r.baseline_us / r.time_us).ln());
                    let own = PredicateSpec { noise: 0.0, calibrated: BTreeMap::new(), ..spec.clone() };
                    within.push(crate::predicate::noise(&own, r, 1));
                }
            }
        }
        if logs.is_empty() {
            continue;
        }
        let n = logs.len() as f64;
        let mean = logs.iter().sum::<f64>() / n;
        let spread = if logs.len() > 1 {
            (logs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        within.sort_by(f64::total_cmp);
        let within_median = within[within.len() / 2];
        let noise = (2.0 * spread).max(within_median);
        // The bias is told from noise by its standard error over the runs,
        // times Student's t for that many runs (a 95% two-sided interval:
        // twice the standard error holds only 82% of a fair harness's
        // means over 3 runs, so one calibration in five would call a fair
        // harness biased), and never for less than the predicate's floor.
        let biased = mean.abs() > (student_t95(logs.len() - 1) * spread / n.sqrt()).max(spec.noise);
        scenarios.push(ScenarioCalibration {
            scenario: name.clone(),
            runs: logs.len() as u32,
            bias: mean.exp(),
            spread,
            noise,
            biased,
        });
    }
    Calibration { tree: tree.to_string(), runs: runs.len() as u32, scenarios, problems }
}

/// Student's t quantile at 97.5% for `df` degrees of freedom (a two-sided
/// 95% interval), 1.96 beyond the table.
pub fn student_t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        d if d <= T.len() => T[d - 1],
        _ => 1.96,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fair harness is called biased at most one calibration in twenty
    /// (the interval's 95%), whatever the number of runs: drawn here with
    /// a fixed seed over 4,000 calibrations of 3 and of 5 runs, a spread
    /// of 5% from run to run and no bias.
    #[test]
    fn a_fair_harness_is_rarely_called_biased_whatever_the_runs() {
        use rand::{Rng, SeedableRng};
        use rand_distr::{Distribution, Normal};
        let mut rng = rand::rngs::StdRng::seed_from_u64(47);
        let noise = Normal::new(0.0, 0.05).unwrap();
        let spec = PredicateSpec { noise: 0.0, ..PredicateSpec::default() };
        for runs in [3usize, 5] {
            let mut biased = 0;
            for _ in 0..4000 {
                let measured: Vec<Vec<ScenarioResult>> = (0..runs)
                    .map(|_| vec![r("a", 100.0 * f64::exp(noise.sample(&mut rng)), 100.0, 0.0)])
                    .collect();
                let cal = summarize(&spec, &names(&["a"]), "t", &measured, &vec![vec![]; runs]);
                biased += cal.scenarios[0].biased as usize;
            }
            let _ = rng.gen::<u8>();
            assert!(biased < 4000 * 7 / 100, "{runs} runs: a fair harness called biased {biased} times in 4000");
            assert!(biased > 4000 * 3 / 100, "{runs} runs: the test must not be vacuous ({biased})");
        }
        assert_eq!(student_t95(2), 4.303);
        assert_eq!(student_t95(100), 1.96);
    }

    fn r(name: &str, time: f64, base: f64, cv: f64) -> ScenarioResult {
        ScenarioResult {
            scenario: name.into(),
            correct: true,
            time_us: time,
            baseline_us: base,
            max_abs_err_ref: None,
            max_abs_err_hi: None,
            tolerance: None,
            rtol: None,
            max_tol_ratio: None,
            compare_us: None,
            bound_us: None,
            samples: Some(20),
            cv: Some(cv),
            baseline_cv: None,
            reason: None,
            cannot_tell: None,
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A fair harness: 1.00x within noise everywhere, its spread kept as
    /// the scenario's noise. A biased scenario (0.91x in every run, as the
    /// qr-cpu harness measured) is named, whatever the others do.
    #[test]
    fn a_bias_beyond_noise_is_named_and_noise_within_it_is_not() {
        let spec = PredicateSpec::default();
        let runs: Vec<Vec<ScenarioResult>> = [(100.0, 100.5, 110.0), (100.8, 99.6, 109.5), (99.4, 100.2, 110.3)]
            .iter()
            .map(|(a, b, c)| vec![r("a", *a, 100.0, 0.01), r("b", *b, 100.0, 0.01), r("c", *c, 100.0, 0.01)])
            .collect();
        let cal = summarize(&spec, &names(&["a", "b", "c"]), "t", &runs, &[vec![], vec![], vec![]]);
        assert!(cal.problems.is_empty(), "{:?}", cal.problems);
        let by = |n: &str| cal.scenarios.iter().find(|s| s.scenario == n).unwrap();
        assert!(!by("a").biased && !by("b").biased, "{}", cal.summary());
        assert!(by("c").biased && (by("c").bias - 0.91).abs() < 0.01, "{}", cal.summary());
        assert!(!cal.fair());
        assert!(cal.summary().contains("BIASED"), "{}", cal.summary());
        assert!(by("a").spread > 0.005 && by("a").noise >= 2.0 * by("a").spread, "{:?}", by("a"));
        assert_eq!(cal.noise_by_scenario().len(), 3);
    }

    /// A noisy scenario whose mean is off by as much as its runs scatter is
    /// not called biased on three runs; the same offset with tight runs is.
    #[test]
    fn the_bias_is_judged_against_its_own_runs() {
        let spec = PredicateSpec::default();
        let noisy: Vec<Vec<ScenarioResult>> =
            [100.0, 112.0, 96.0].iter().map(|t| vec![r("a", *t, 100.0, 0.05)]).collect();
        let cal = summarize(&spec, &names(&["a"]), "t", &noisy, &[vec![], vec![], vec![]]);
        assert!(!cal.scenarios[0].biased, "{}", cal.summary());
        assert!(cal.scenarios[0].noise > 0.1, "the spread widens the scenario's intervals: {}", cal.summary());
        let tight: Vec<Vec<ScenarioResult>> =
            [102.5, 102.6, 102.4].iter().map(|t| vec![r("a", *t, 100.0, 0.002)]).collect();
        let cal = summarize(&spec, &names(&["a"]), "t", &tight, &[vec![], vec![], vec![]]);
        assert!(cal.scenarios[0].biased, "{}", cal.summary());
    }

    /// The initial kernel must be correct against itself in every run; a
    /// failed run or a missing scenario is a problem, named with its run.
    #[test]
    fn an_incorrect_or_missing_scenario_or_a_failed_run_is_a_problem() {
        let spec = PredicateSpec::default();
        let mut wrong = r("a", 100.0, 100.0, 0.01);
        wrong.correct = false;
        wrong.reason = Some("max error 3e-2".into());
        let runs = vec![vec![wrong], vec![], vec![r("a", 100.0, 100.0, 0.01)]];
        let fails = vec![vec![], vec!["harness run exited with status 3".to_string()], vec![]];
        let cal = summarize(&spec, &names(&["a"]), "t", &runs, &fails);
        assert!(!cal.fair());
        let all = cal.problems.join("\n");
        assert!(all.contains("run 1: scenario a incorrect against itself (max error 3e-2)"), "{all}");
        assert!(all.contains("run 2: harness run exited with status 3"), "{all}");
        assert!(all.contains("run 2: scenario a missing"), "{all}");
        assert_eq!(cal.scenarios[0].runs, 1);
    }
}
