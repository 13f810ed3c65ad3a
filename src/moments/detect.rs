//! Numeric detectors over a campaign's evaluations, in order: plateau,
//! suspicious gains (a one-step jump of the geometric mean, a scenario
//! faster than its speed-of-light bound, an error of exactly zero where the
//! reference itself is rounded, a gain concentrated on a few scenarios, a
//! jump of timing variation) and correctness regressions. Each finding
//! carries its evidence: which evaluations, which scenarios, which numbers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::evaluation::Evaluation;

/// Thresholds, from the campaign's `[moments]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Plateau: no gain of `plateau_min_gain` over the last N evaluations.
    pub plateau_evaluations: usize,
    pub plateau_min_gain: f64,
    /// Plateau: this many agent tool calls in a row without a new evaluation.
    pub plateau_tool_calls: usize,
    /// Plateau: while a stall lasts, speak again only at 2N, 4N, 8N...
    /// evaluations without a gain, not at every one.
    pub plateau_backoff: bool,
    /// A one-step jump of the geometric mean by this factor is suspicious.
    pub suspicious_gain: f64,
    /// A gain is concentrated when this share of its log-gain comes from
    /// at most a fifth of the scenarios.
    pub concentration_share: f64,
    /// The coefficient of variation jumping by this factor is suspicious.
    pub cv_jump: f64,
    /// Edit loop: share of added lines identical to lines deleted earlier.
    pub edit_loop_share: f64,
    /// Edit loop: over the last N snapshots.
    pub edit_loop_window: usize,
    /// The same moment is not raised again within this many evaluations.
    pub cooldown_evaluations: usize,
    /// A suspicious gain on a candidate that passes is re-evaluated with
    /// another seed before it counts.
    pub recheck_suspicious: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            plateau_evaluations: 5,
            plateau_min_gain: 0.01,
            plateau_tool_calls: 60,
            plateau_backoff: true,
            suspicious_gain: 1.5,
            concentration_share: 0.8,
            cv_jump: 3.0,
            edit_loop_share: 0.30,
            edit_loop_window: 6,
            cooldown_evaluations: 3,
            recheck_suspicious: true,
        }
    }
}

impl Settings {
    pub fn from_campaign(spec: &crate::campaign::CampaignSpec) -> anyhow::Result<Settings> {
        match spec.extra.get("moments") {
            None => Ok(Settings::default()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| anyhow::anyhow!("campaign spec [moments]: {e}")),
        }
    }
}

/// One detected moment with its evidence.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// The moment it raises: plateau, suspicious_gain, correctness_dismissal...
    pub moment: String,
    /// What exactly was seen: `plateau`, `geomean_jump`, `baseline_reached`, `faster_than_bound`,
    /// `zero_error`, `concentrated_gain`, `cv_jump`, `correctness_regression`.
    pub detector: String,
    pub evaluations: Vec<i64>,
    pub scenarios: Vec<String>,
    pub detail: String,
    /// The numbers the detector saw, by name (`best_before`, `ratio`,
    /// `tool_calls`, ...), as the question's evidence shows them
    /// (`{facts.NAME}` in a bank entry; [`crate::bank`]'s evidence).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
}

/// A finding's facts from `(name, value)` pairs, numbers shown with at
/// most three decimals.
fn facts(pairs: &[(&str, f64)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .filter(|(_, v)| v.is_finite())
        .map(|(k, v)| {
            let shown = if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{v:.0}")
            } else {
                let t = format!("{v:.3}");
                t.trim_end_matches('0').trim_end_matches('.').to_string()
            };
            (k.to_string(), shown)
        })
        .collect()
}

fn id(e: &Evaluation) -> i64 {
    e.id.unwrap_or(0)
}

/// Runs every numeric detector on the latest evaluation of `history`
/// (oldest first).
pub fn detect(history: &[Evaluation], s: &Settings) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(plateau(history, s));
    out.extend(geomean_jump(history, s));
    out.extend(baseline_reached(history));
    out.extend(faster_than_bound(history));
    out.extend(zero_error(history));
    out.extend(concentrated_gain(history, s));
    out.extend(cv_jump(history, s));
    out.extend(reference_shift(history));
    out.extend(correctness_regression(history));
    out
}

/// No gain of at least `plateau_min_gain` (relative) in the best geometric
/// mean over the last N evaluations, compared with the best before them.
/// Only correct evaluations count (a fast wrong kernel is no gain).
///
/// Spoken on a doubling schedule while the stall lasts: after N
/// evaluations without a gain, then 2N, 4N, 8N... (`plateau_backoff`).
/// Asking at every evaluation of a stall of hundreds made the supervisor
/// the loudest noise in a long campaign (a real log of 730 experiments
/// drew a plateau question every third run, most of them generic).
///
/// Its facts say what the stall looks like, so that the question fits it:
/// `stall` (evaluations since the last gain), `invalid` (evaluations of the
/// window with no valid figure), `best_runs` (how many runs the best
/// figure pools: 1 when it was never measured again), `failed` (the
/// campaign's evaluations with no valid figure), and `repeated`
/// (two evaluations of the stall with the very same figure from different
/// trees: a hypothesis tested twice) where seen.
pub fn plateau(history: &[Evaluation], s: &Settings) -> Option<Finding> {
    let n = s.plateau_evaluations.max(1);
    if history.len() <= n {
        return None;
    }
    let (before, window) = history.split_at(history.len() - n);
    let best_before =
        before.iter().filter_map(valid_figure).fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g))))?;
    let best_window = window.iter().filter_map(valid_figure).fold(f64::NEG_INFINITY, f64::max);
    // No evaluation of the last N raised the best by the gain asked, each
    // against the best before it: a best that creeps up by less than the
    // gain at each step is still a stall.
    let stall = stall(history, s.plateau_min_gain);
    if stall < n || (s.plateau_backoff && !on_schedule(stall, n)) {
        return None;
    }
    let invalid = window.iter().filter(|e| valid_figure(e).is_none()).count();
    let mut figures: Vec<f64> = window.iter().filter_map(valid_figure).collect();
    figures.sort_by(f64::total_cmp);
    let median = figures.get(figures.len() / 2).copied().unwrap_or(f64::NAN);
    let best = history
        .iter()
        .filter(|e| valid_figure(e).is_some())
        .max_by(|a, b| valid_figure(a).unwrap_or(0.0).total_cmp(&valid_figure(b).unwrap_or(0.0)));
    let best_runs = best.map_or(1, |b| {
        b.verdict.runs.max(1) + history.iter().filter(|e| e.tree == b.tree && e.id != b.id).count() as u32
    });
    let repeated = repeated_figure(&history[history.len().saturating_sub(stall + 1)..]);
    let gain_pct = s.plateau_min_gain * 100.0;
    let mut detail = if best_window >= best_before * (1.0 + s.plateau_min_gain) {
        format!(
            "the best geometric mean crept from {best_before:.3}x to {best_window:.3}x over the last {n} evaluations, never by the {gain_pct:.1}% gain asked at once"
        )
    } else {
        format!(
            "the best geometric mean over the last {n} evaluations is {}, against {best_before:.3}x before them: less than the {gain_pct:.1}% gain asked",
            if best_window.is_finite() { format!("{best_window:.3}x") } else { "unknown".into() },
        )
    };
    if stall > n {
        detail.push_str(&format!("; {stall} evaluations since the last gain"));
    }
    if invalid > 0 {
        detail.push_str(&format!("; {invalid} of the last {n} gave no valid figure"));
    }
    if let Some((a, b, g)) = repeated {
        detail.push_str(&format!("; evaluations #{a} and #{b} gave the very same figure ({g:.3}x)"));
    }
    let mut found = facts(&[
        ("window", n as f64),
        ("best_before", best_before),
        ("best_window", best_window),
        ("min_gain_pct", s.plateau_min_gain * 100.0),
        ("stall", stall as f64),
        ("invalid", invalid as f64),
        ("best_runs", best_runs as f64),
        ("failed", history.iter().filter(|e| valid_figure(e).is_none()).count() as f64),
        // How far the window's best falls short of the best before it.
        ("shortfall_pct", if best_window.is_finite() { (1.0 - best_window / best_before) * 100.0 } else { f64::NAN }),
        // And the window's median: near-ties, or mostly clearly worse ideas.
        ("median_shortfall_pct", (1.0 - median / best_before) * 100.0),
    ]);
    if let Some((a, b, _)) = repeated {
        found.insert("repeated".into(), format!("#{a} and #{b}"));
    }
    // A best measured once that stands far above every other figure: the
    // stall may be a setup the other runs never had.
    if let Some(lead) = best_lead(history).filter(|l| *l >= LONE_BEST_LEAD && best_runs <= 1) {
        detail.push_str(&format!(
            "; the best stands {:.0}% above every other figure and was measured once",
            lead * 100.0
        ));
        found.insert("best_lead_pct".into(), format!("{:.0}", lead * 100.0));
    }
    Some(Finding {
        moment: "plateau".into(),
        detector: "plateau".into(),
        evaluations: window.iter().map(id).collect(),
        scenarios: worst_scenarios(history.last()?),
        detail,
        facts: found,
    })
}

/// How far above every other valid figure the best one stands for a
/// plateau to name it alone: 10%, beyond the run-to-run spread of the real
/// logs' repeats (a few percent) and short of a real step's gain.
pub const LONE_BEST_LEAD: f64 = 0.10;

/// The best valid figure's lead over the next one (0.1 for 10%): `None`
/// with fewer than two.
fn best_lead(history: &[Evaluation]) -> Option<f64> {
    let mut f: Vec<f64> = history.iter().filter_map(valid_figure).collect();
    f.sort_by(|a, b| b.total_cmp(a));
    (f.len() >= 2 && f[1] > 0.0).then(|| f[0] / f[1] - 1.0)
}

/// An evaluation's figure when it is a result: every scenario present and
/// correct, and a geometric mean.
fn valid_figure(e: &Evaluation) -> Option<f64> {
    let ok = !e.verdict.scenarios.is_empty() && e.verdict.scenarios.iter().all(|s| s.present && s.correct);
    e.verdict.geomean_speedup.filter(|g| ok && g.is_finite())
}

/// Evaluations since the last gain: the last correct evaluation that
/// raised the best correct figure so far by `min_gain` or more (the first
/// correct one counts as a gain); the whole history when none was correct.
pub fn stall(history: &[Evaluation], min_gain: f64) -> usize {
    let mut best: Option<f64> = None;
    let mut last_gain: Option<usize> = None;
    for (i, e) in history.iter().enumerate() {
        let Some(g) = valid_figure(e) else { continue };
        match best {
            Some(b) if g < b * (1.0 + min_gain) => best = Some(b.max(g)),
            _ => {
                best = Some(g);
                last_gain = Some(i);
            }
        }
    }
    match last_gain {
        Some(i) => history.len() - 1 - i,
        None => history.len(),
    }
}

/// Whether a stall of `stall` evaluations is one the plateau speaks at:
/// N, 2N, 4N, 8N...
fn on_schedule(stall: usize, n: usize) -> bool {
    stall >= n && stall % n == 0 && (stall / n).is_power_of_two()
}

/// The latest pair of evaluations of `span` (the stall and the gain it
/// started from) from different trees with the
/// very same valid figure (ids and the figure): the same experiment run
/// twice, whatever its name. Figures measured with noise never agree to
/// the last bit; a deterministic figure (a validation loss, a cycle
/// count) does when the same thing was run again.
fn repeated_figure(span: &[Evaluation]) -> Option<(i64, i64, f64)> {
    for (j, b) in span.iter().enumerate().rev() {
        let Some(gb) = valid_figure(b) else { continue };
        if let Some(a) = span[..j].iter().rev().find(|a| a.tree != b.tree && valid_figure(a) == Some(gb)) {
            return Some((id(a), id(b), gb));
        }
    }
    None
}

/// The scenarios a plateau is about: the slowest third (one at least,
/// five at most) of the latest evaluation by speedup, worst first.
fn worst_scenarios(latest: &Evaluation) -> Vec<String> {
    let mut by: Vec<(&str, f64)> =
        latest.verdict.scenarios.iter().filter_map(|s| Some((s.scenario.as_str(), s.speedup?))).collect();
    by.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(b.0)));
    let n = by.len().div_ceil(3).clamp(usize::from(!by.is_empty()), 5);
    by[..n].iter().map(|(s, _)| s.to_string()).collect()
}

/// How many tool calls without an evaluation make an idle plateau, for
/// this campaign's cadence: three times the median count between its
/// recent evaluations (`cadence`, oldest first), at least 15 and at most
/// `plateau_tool_calls`; `plateau_tool_calls` until three evaluations have
/// set a cadence. On real logs the fixed 60 never fired (58 calls at most
/// between evaluations): an agent that evaluates every 8 calls and then
/// goes 30 without one has stalled. 0 switches it off.
pub fn idle_threshold(cadence: &[usize], s: &Settings) -> usize {
    if s.plateau_tool_calls == 0 || cadence.len() < 3 {
        return s.plateau_tool_calls;
    }
    let mut sorted = cadence.to_vec();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    (3 * median).clamp(15.min(s.plateau_tool_calls), s.plateau_tool_calls)
}

/// Tool calls going on without any new evaluation.
pub fn idle_plateau(tool_calls_since_evaluation: usize, threshold: usize) -> Option<Finding> {
    (threshold > 0 && tool_calls_since_evaluation >= threshold).then(|| Finding {
        moment: "plateau".into(),
        detector: "tool_calls_without_evaluation".into(),
        evaluations: vec![],
        scenarios: vec![],
        detail: format!("{tool_calls_since_evaluation} tool calls since the last evaluation"),
        facts: facts(&[("tool_calls", tool_calls_since_evaluation as f64), ("threshold", threshold as f64)]),
    })
}

fn last_two(history: &[Evaluation]) -> Option<(&Evaluation, &Evaluation)> {
    match history {
        [.., a, b] => Some((a, b)),
        _ => None,
    }
}

/// The geometric mean jumped by more than `suspicious_gain` above the best
/// any earlier correct evaluation measured. Against the best, not the
/// previous one: in a real campaign most experiments are discarded, and
/// the next one, built on the best version again, would otherwise "jump"
/// from the discarded one (an experiment log of a kernel loop raised that
/// false alarm after every regression, tests/real-campaigns); and an
/// evaluation that measured nothing no longer hides the jump after it.
/// Only correct evaluations set the bar: an agent cannot raise it with a
/// forged figure that fails correctness, then pass a smaller forgery
/// under it unquestioned.
pub fn geomean_jump(history: &[Evaluation], s: &Settings) -> Option<Finding> {
    let (last, earlier) = history.split_last()?;
    let b = last.verdict.geomean_speedup?;
    let best = earlier.iter().filter(|e| !e.incorrect()).filter_map(|e| Some((e, e.verdict.geomean_speedup?))).fold(
        None,
        |m: Option<(&Evaluation, f64)>, (e, g)| match m {
            Some((_, mg)) if mg >= g => m,
            _ => Some((e, g)),
        },
    );
    let (prev, best) = best?;
    // Against the initial kernel too (1.0x): a naive kernel brought back up
    // toward the speed the campaign started from is progress, not a gain
    // to doubt (on real campaigns most "jumps" were that: 0.04x to 1.01x).
    let a = best.max(1.0);
    (b > a * s.suspicious_gain).then(|| Finding {
        moment: "suspicious_gain".into(),
        detector: "geomean_jump".into(),
        evaluations: vec![id(prev), id(last)],
        scenarios: vec![],
        detail: format!(
            "the geometric mean went to {b:.3}x from a best of {best:.3}x before ({:.2}x above {}, threshold {:.2}x)",
            b / a,
            if best < 1.0 { "the initial kernel" } else { "that best" },
            s.suspicious_gain
        ),
        facts: facts(&[("from", best), ("to", b), ("ratio", b / a), ("threshold", s.suspicious_gain)]),
    })
}

/// Below this share of the initial kernel's speed, a campaign's best is a
/// naive start (a rewrite that is not yet as fast as what it replaces).
pub const NAIVE_BELOW: f64 = 0.8;
/// At or above this share, the naive start has caught up with the initial
/// kernel.
pub const CAUGHT_UP: f64 = 0.95;

/// A naive start brought up to the initial kernel's speed: every earlier
/// correct evaluation was below [`CAUGHT_UP`] and the best of them below
/// [`NAIVE_BELOW`], and this correct one reaches [`CAUGHT_UP`]. That is
/// progress, not a gain to doubt (on real campaigns most "jumps" were
/// this: 0.04x to 1.01x), and it is where the campaign's real work starts:
/// a `start` moment, whose questions are about performance (the bound, the
/// gap to it, the plan), asked once.
pub fn baseline_reached(history: &[Evaluation]) -> Option<Finding> {
    let (last, earlier) = history.split_last()?;
    if last.incorrect() {
        return None;
    }
    let now = last.verdict.geomean_speedup?;
    let (prev, best) = earlier
        .iter()
        .filter(|e| !e.incorrect())
        .filter_map(|e| Some((e, e.verdict.geomean_speedup?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    (best < NAIVE_BELOW && now >= CAUGHT_UP).then(|| Finding {
        moment: "start".into(),
        detector: "baseline_reached".into(),
        evaluations: vec![id(prev), id(last)],
        scenarios: vec![],
        detail: format!(
            "the geometric mean reached {now:.3}x of the initial kernel from a best of {best:.3}x: the naive start has \
             caught up, and the work on speed starts here"
        ),
        facts: facts(&[("from", best), ("to", now)]),
    })
}

/// A scenario measured faster than its speed-of-light estimate.
pub fn faster_than_bound(history: &[Evaluation]) -> Option<Finding> {
    let last = history.last()?;
    let hits: Vec<(String, f64, f64)> = last
        .verdict
        .scenarios
        .iter()
        .filter_map(|s| {
            let m = s.measured.as_ref()?;
            let b = m.bound_us?;
            (b > 0.0 && m.time_us < b).then(|| (s.scenario.clone(), m.time_us, b))
        })
        .collect();
    (!hits.is_empty()).then(|| Finding {
        moment: "suspicious_gain".into(),
        detector: "faster_than_bound".into(),
        evaluations: vec![id(last)],
        scenarios: hits.iter().map(|h| h.0.clone()).collect(),
        detail: hits.iter().map(|(s, t, b)| format!("{s}: {t:.2} us < bound {b:.2} us")).collect::<Vec<_>>().join("; "),
        // The first scenario's figures: the time and the bound it beats.
        facts: facts(&[
            ("scenarios_under_bound", hits.len() as f64),
            ("time_us", hits.first().map_or(f64::NAN, |h| h.1)),
            ("bound_us", hits.first().map_or(f64::NAN, |h| h.2)),
        ]),
    })
}

/// An error of exactly zero against the reference while the reference
/// itself differs from the high-precision one: the candidate reproduces
/// the reference bit for bit (a copy, a cached answer), on a scenario it
/// runs faster beyond noise. Not when there is no gain (the unchanged
/// kernel), nor on a scenario where a kernel at the initial kernel's speed
/// already matched exactly (the reference is the initial kernel itself:
/// bit-identical results are expected of any kernel that keeps its order
/// of operations).
pub fn zero_error(history: &[Evaluation]) -> Option<Finding> {
    let last = history.last()?;
    let exact = |s: &crate::predicate::ScenarioVerdict| {
        s.measured.as_ref().is_some_and(|m| m.max_abs_err_ref == Some(0.0) && m.max_abs_err_hi.is_some_and(|h| h > 0.0))
    };
    let faster = |s: &crate::predicate::ScenarioVerdict| s.interval.is_some_and(|i| i[0] > 1.0);
    let reference_is_initial = |name: &str| {
        history.iter().any(|e| {
            e.verdict
                .scenarios
                .iter()
                .any(|s| s.scenario == name && exact(s) && s.interval.is_some_and(|i| i[0] <= 1.0))
        })
    };
    let hits: Vec<String> = last
        .verdict
        .scenarios
        .iter()
        .filter(|s| exact(s) && faster(s) && !reference_is_initial(&s.scenario))
        .map(|s| s.scenario.clone())
        .collect();
    (!hits.is_empty()).then(|| Finding {
        moment: "suspicious_gain".into(),
        detector: "zero_error".into(),
        evaluations: vec![id(last)],
        scenarios: hits.clone(),
        detail: format!(
            "error exactly 0 against the reference while the reference is itself rounded, on {}",
            hits.join(", ")
        ),
        facts: facts(&[("scenarios_exact", hits.len() as f64)]),
    })
}

/// Most of a step's gain comes from a few scenarios.
pub fn concentrated_gain(history: &[Evaluation], s: &Settings) -> Option<Finding> {
    let (prev, last) = last_two(history)?;
    let mut gains: Vec<(String, f64)> = last
        .verdict
        .scenarios
        .iter()
        .filter_map(|sc| {
            let now = sc.speedup?;
            let before = prev.verdict.scenarios.iter().find(|p| p.scenario == sc.scenario)?.speedup?;
            Some((sc.scenario.clone(), (now / before).ln()))
        })
        .collect();
    if gains.len() < 5 {
        return None;
    }
    let total: f64 = gains.iter().map(|g| g.1.max(0.0)).sum();
    if total < (1.2f64).ln() {
        return None; // not a gain worth explaining
    }
    gains.sort_by(|a, b| b.1.total_cmp(&a.1));
    let few = (gains.len() / 5).max(1);
    let top: f64 = gains[..few].iter().map(|g| g.1.max(0.0)).sum();
    (top / total >= s.concentration_share).then(|| Finding {
        moment: "suspicious_gain".into(),
        detector: "concentrated_gain".into(),
        evaluations: vec![id(prev), id(last)],
        scenarios: gains[..few].iter().map(|g| g.0.clone()).collect(),
        detail: format!(
            "{:.0}% of this step's log-gain comes from {few} of {} scenarios",
            top / total * 100.0,
            gains.len()
        ),
        facts: facts(&[
            ("share_pct", top / total * 100.0),
            ("few", few as f64),
            ("of", gains.len() as f64),
            ("step_gain", total.exp()),
        ]),
    })
}

/// The timing variation of scenarios jumped.
pub fn cv_jump(history: &[Evaluation], s: &Settings) -> Option<Finding> {
    let (prev, last) = last_two(history)?;
    let hits: Vec<String> = last
        .verdict
        .scenarios
        .iter()
        .filter_map(|sc| {
            let now = sc.measured.as_ref()?.cv?;
            let before = prev.verdict.scenarios.iter().find(|p| p.scenario == sc.scenario)?.measured.as_ref()?.cv?;
            (now > 0.02 && now > before.max(0.001) * s.cv_jump)
                .then(|| format!("{} ({before:.3} -> {now:.3})", sc.scenario))
        })
        .collect();
    (!hits.is_empty()).then(|| Finding {
        moment: "suspicious_gain".into(),
        detector: "cv_jump".into(),
        evaluations: vec![id(prev), id(last)],
        scenarios: hits.iter().map(|h| h.split(' ').next().unwrap_or("").to_string()).collect(),
        detail: format!("timing variation jumped: {}", hits.join(", ")),
        facts: facts(&[("scenarios_noisier", hits.len() as f64), ("cv_jump", s.cv_jump)]),
    })
}

/// The initial kernel's own time moved: on at least half the scenarios
/// (two at least, or the only one), the latest `baseline_us` differs by
/// more than 10% from its median over the earlier evaluations. The
/// speedups are then measured against another reference than before (a
/// global setting that changes the reference too, another machine, a
/// harness change), whatever the candidate did.
pub fn reference_shift(history: &[Evaluation]) -> Option<Finding> {
    let (last, earlier) = history.split_last()?;
    let mut shifted = Vec::new();
    let mut compared = 0usize;
    for sc in &last.verdict.scenarios {
        let Some(now) = sc.measured.as_ref().map(|m| m.baseline_us) else { continue };
        let mut before: Vec<f64> = earlier
            .iter()
            .filter_map(|e| e.verdict.scenarios.iter().find(|p| p.scenario == sc.scenario)?.measured.as_ref())
            .map(|m| m.baseline_us)
            .collect();
        if before.is_empty() {
            continue;
        }
        before.sort_by(f64::total_cmp);
        let median = before[before.len() / 2];
        compared += 1;
        let ratio = now / median;
        if !(1.0 / 1.1..=1.1).contains(&ratio) {
            shifted.push((sc.scenario.clone(), median, now, ratio));
        }
    }
    let enough = if compared == 1 { shifted.len() == 1 } else { shifted.len() >= 2 && 2 * shifted.len() >= compared };
    if !enough {
        return None;
    }
    let (_, from, to, ratio) = shifted[0].clone();
    Some(Finding {
        moment: "suspicious_gain".into(),
        detector: "reference_shift".into(),
        evaluations: earlier.last().map(id).into_iter().chain([id(last)]).collect(),
        scenarios: shifted.iter().map(|s| s.0.clone()).collect(),
        detail: format!(
            "the initial kernel's own time moved on {} of {compared} scenarios: {}",
            shifted.len(),
            shifted
                .iter()
                .take(3)
                .map(|(n, a, b, _)| format!("{n} {a:.1} us -> {b:.1} us"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        facts: facts(&[
            ("scenarios_shifted", shifted.len() as f64),
            ("reference_from_us", from),
            ("reference_to_us", to),
            ("reference_ratio", ratio),
        ]),
    })
}

/// A scenario that was correct became incorrect.
pub fn correctness_regression(history: &[Evaluation]) -> Option<Finding> {
    let (prev, last) = last_two(history)?;
    let hits: Vec<String> = last
        .verdict
        .scenarios
        .iter()
        .filter(|sc| sc.present && !sc.correct)
        .filter(|sc| prev.verdict.scenarios.iter().any(|p| p.scenario == sc.scenario && p.present && p.correct))
        .map(|sc| sc.scenario.clone())
        .collect();
    (!hits.is_empty()).then(|| Finding {
        moment: "correctness_dismissal".into(),
        detector: "correctness_regression".into(),
        evaluations: vec![id(prev), id(last)],
        scenarios: hits.clone(),
        detail: format!("correct before, incorrect now: {}", hits.join(", ")),
        facts: {
            let mut f = facts(&[("scenarios_broken", hits.len() as f64)]);
            if let Some(kind) = last.failure_kind() {
                f.insert("failure_kind".into(), kind.into());
            }
            f
        },
    })
}

#[cfg(test)]
mod tests;
