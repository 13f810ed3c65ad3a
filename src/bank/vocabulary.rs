//! What a question's words assume of the campaign, so that selection never
//! asks one the campaign contradicts: a vendor's tools and hardware words
//! (NVIDIA's Nsight, warps, shared memory... on an AMD GPU or a CPU), several
//! scenarios (in a campaign of one), a peak the agent quoted (when none
//! was). An entry says what it assumes (`applies.assumes`) and gives its
//! text in the other vendors' words (`text_amd`, `text_cpu`); the bank's
//! loader warns of an entry whose words assume what it does not declare
//! ([`undeclared`]), and selection reads both ([`super::Entry::text_for`],
//! [`super::Entry::applies_to`], [`contradicted_by_evidence`]).

use std::sync::LazyLock;

use regex::Regex;

use super::evidence::Evidence;
use super::Entry;
use crate::campaign::CampaignSpec;

/// What an entry may declare it assumes (`applies.assumes`).
pub const ASSUMPTIONS: [&str; 15] = [
    "several_scenarios",
    "quoted_peak",
    "kernel_code",
    "timed_figure",
    "wall_clock",
    "agent_trials",
    "branches",
    "long_stall",
    "dropped_failures",
    "repeated_trial",
    "reasoned_claim",
    "logged_figures",
    "stacked_changes",
    "standout_figure",
    "claimed_optimum",
];

/// The detectors whose evidence shows the agent working between its
/// evaluations (where quick trials of its own can be), for `agent_trials`.
const TRIALS_SEEN_BY: [&str; 2] = ["tool_calls_without_evaluation", "edit_loop"];

/// Whose words a campaign's questions are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An NVIDIA GPU, or a campaign that does not say (the default texts).
    Nvidia,
    /// An AMD GPU (`architecture` of the `amd_cdna` family: MI300X, gfx950...).
    Amd,
    /// A CPU (`device = "cpu"`, or an x86 or Arm architecture).
    Cpu,
}

pub fn target(spec: &CampaignSpec) -> Target {
    let family = spec.architecture.as_deref().and_then(crate::campaign::canonical_architecture);
    if family == Some("amd_cdna") {
        Target::Amd
    } else if spec.device_kind() == Some("cpu") {
        Target::Cpu
    } else {
        Target::Nvidia
    }
}

static NVIDIA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(nsight|ncu|nsys|cuobjdump|nvdisasm|ptx|sass|cuda|cublas(lt)?|cutlass|cudnn|nvcc|tensor[- ]cores?|warps?|sectors?|sm_\d+a?|sms?|ctas?|cta_group|wgmma|ldmatrix|shared[- ]memory|nvlink|nvml|nvidia)\b",
    )
    .expect("a valid pattern")
});

static SEVERAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(^|[^{])\bscenarios\b|\bother scenario|\bsmall(est)? scenarios|\bworst-performing|\b(worst|slowest|fastest|best|largest|smallest) scenario\b",
    )
    .expect("valid")
});

static QUOTED_PEAK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bpeak you (quote|compare|cite|use)\b").expect("a valid pattern"));

static PEAK_IN_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(peak|theoretical|roofline|speed[- ]of[- ]light|datasheet|spec sheet|[0-9.]+\s*(tb/s|gb/s|tflop|gflop|pflop)|% of (the )?(peak|bandwidth|roofline))")
        .expect("a valid pattern")
});

/// Words that say a setting is at its best: no further gain from moving
/// it, an optimum, diminishing returns.
static NO_FURTHER_GAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(no (further |more )?(gain|improvement|benefit)|(do not|don't|does not|doesn't|did not|didn't|won't|will not) help|not better|no better|optim(al|um)|diminishing returns|sweet spot)\b",
    )
    .expect("a valid pattern")
});

/// Whether the agent's quoted words claim a setting is at its best
/// (`claimed_optimum`): "LR already optimal", "more perts don't help".
pub fn claims_an_optimum(ev: Option<&Evidence>) -> bool {
    ev.and_then(|ev| ev.quote.as_deref()).is_some_and(|q| NO_FURTHER_GAIN.is_match(q))
}

/// Whether a figure stands out from the others (`standout_figure`): a jump
/// of the figure, a gain claimed beyond the noise, or a plateau's best
/// measured once far above every other figure (`best_lead_pct`).
pub fn a_figure_stands_out(ev: &Evidence) -> bool {
    ev.detector.as_deref() == Some("geomean_jump")
        || ev.facts.contains_key("best_lead_pct")
        || ev.facts.get("measured_gain").is_some_and(|m| m == "beyond_noise")
}

/// Whether the agent's words quoted by the evidence hold a figure (any
/// digit): a claim that quotes one rests on a measurement, and is
/// challenged on that measurement, not on reasoning it did not use.
pub fn quotes_a_figure(ev: Option<&Evidence>) -> bool {
    ev.and_then(|ev| ev.quote.as_deref()).is_some_and(|q| q.chars().any(|c| c.is_ascii_digit()))
}

/// The NVIDIA-only words of `text`, lower case, each once.
pub fn nvidia_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = NVIDIA.find_iter(text).map(|m| m.as_str().to_ascii_lowercase()).collect();
    out.sort();
    out.dedup();
    out
}

/// Whether `text` speaks of several scenarios (not the `{scenarios}`
/// placeholder, which names the evidence's own).
pub fn assumes_several_scenarios(text: &str) -> bool {
    SEVERAL.is_match(text)
}

/// Whether `text` speaks of a peak the agent quoted.
pub fn assumes_quoted_peak(text: &str) -> bool {
    QUOTED_PEAK.is_match(text)
}

/// What an entry's words assume that it does not declare, one line each
/// (the loader's warnings).
pub fn undeclared(e: &Entry) -> Vec<String> {
    let mut w = Vec::new();
    let gpu_only = e.applies.devices.iter().all(|d| d == "gpu") && !e.applies.devices.is_empty();
    // An architecture entry speaks its architecture's words (selection
    // asks it only there).
    let words = nvidia_words(&e.text);
    if !words.is_empty() && e.applies.architectures.is_empty() {
        if e.text_amd.is_none() {
            w.push(format!("{}: its text uses NVIDIA words ({}) and gives no text_amd", e.id, words.join(", ")));
        }
        if e.text_cpu.is_none() && !gpu_only {
            w.push(format!(
                "{}: its text uses NVIDIA words ({}) and gives no text_cpu (or applies.devices = [\"gpu\"])",
                e.id,
                words.join(", ")
            ));
        }
    }
    for (name, t) in [("text_amd", &e.text_amd), ("text_cpu", &e.text_cpu)] {
        if let Some(t) = t {
            let words = nvidia_words(t);
            if !words.is_empty() {
                w.push(format!("{}: {name} uses NVIDIA words ({})", e.id, words.join(", ")));
            }
        }
    }
    let assumes = |a: &str| e.applies.assumes.iter().any(|x| x == a);
    let texts = [Some(&e.text), e.text_amd.as_ref(), e.text_cpu.as_ref()];
    if texts.iter().flatten().any(|t| assumes_several_scenarios(t)) && !assumes("several_scenarios") {
        w.push(format!(
            "{}: its text speaks of several scenarios; declare applies.assumes = [\"several_scenarios\"]",
            e.id
        ));
    }
    if texts.iter().flatten().any(|t| assumes_quoted_peak(t)) && !assumes("quoted_peak") {
        w.push(format!(
            "{}: its text speaks of a peak the agent quoted; declare applies.assumes = [\"quoted_peak\"]",
            e.id
        ));
    }
    w
}

/// Whether the moment's evidence contradicts what the entry assumes: a
/// quoted peak with no quote that names one; a failure of another kind
/// than those the entry can find (`facts.failure_kind`); time spent, in a
/// campaign whose log has no clock (`facts.clock = "none"`: a replayed
/// experiment log); the agent's own quick trials, where nothing shows it
/// working between evaluations (only an idle plateau or an edit loop
/// does: an experiment log's rows are all full evaluations); a stop rule
/// for a direction at a stall shorter than four windows (`long_stall`); a
/// branch dropped for a bug where no evaluation has failed
/// (`dropped_failures`); a hypothesis tested twice, at a plateau whose
/// figures show no repeat (`repeated_trial`: the plateau names one in its
/// `repeated` fact when two evaluations measured the very same figure); a
/// claim made by reasoning alone, where the words quote a figure
/// (`reasoned_claim`, [`quotes_a_figure`]: over the blind readings of the
/// real logs the two questions that assume it were judged useful at 5 of
/// 34 such claims, at 3 of 8 claims in words alone); the agent's own
/// setup behind each figure, where gadfly's harness measured it
/// (`logged_figures`: only the figures of an experiment log the agent
/// kept, the evidence's `figures = agent_log`, were taken each under a
/// setup of the agent's choosing); a figure that stands out from the
/// others (`standout_figure`: a jump, a claimed gain beyond the noise, or a
/// plateau's lone best, `best_lead_pct`); a setting claimed at its best
/// (`claimed_optimum`, [`claims_an_optimum`]); kept changes that stack,
/// in an experiment log whose rows mostly share their commit (`stacked_changes`:
/// the evidence's `changes = settings`, settings of one code tried in turn).
pub fn contradicted_by_evidence(e: &Entry, ev: Option<&Evidence>) -> bool {
    let assumes = |a: &str| e.applies.assumes.iter().any(|x| x == a);
    let peak =
        assumes("quoted_peak") && !ev.and_then(|ev| ev.quote.as_deref()).is_some_and(|q| PEAK_IN_WORDS.is_match(q));
    let no_clock = assumes("wall_clock") && ev.and_then(|ev| ev.facts.get("clock")).is_some_and(|c| c == "none");
    let no_trials = assumes("agent_trials")
        && !ev.and_then(|ev| ev.detector.as_deref()).is_some_and(|d| TRIALS_SEEN_BY.contains(&d));
    let fact = |k: &str| ev.and_then(|ev| ev.facts.get(k)).and_then(|v| v.parse::<f64>().ok());
    // A stop rule for a direction fits a stall several windows long, not
    // the first signal of one.
    let short_stall =
        assumes("long_stall") && matches!((fact("stall"), fact("window")), (Some(s), Some(w)) if s < 4.0 * w);
    // A branch dropped for a bug needs a failed evaluation somewhere.
    let nothing_failed = assumes("dropped_failures") && fact("failed") == Some(0.0);
    // A repeated hypothesis, at a plateau, needs a repeat in its figures.
    let no_repeat = assumes("repeated_trial")
        && ev.is_some_and(|ev| ev.detector.as_deref() == Some("plateau") && !ev.facts.contains_key("repeated"));
    let measured_claim = assumes("reasoned_claim") && quotes_a_figure(ev);
    // The agent's own log rows, each run set up by the agent; gadfly's
    // harness runs every evaluation of a live campaign the same way.
    let harness_figures =
        assumes("logged_figures") && ev.and_then(|ev| ev.facts.get("figures")).is_none_or(|f| f != "agent_log");
    let no_optimum = assumes("claimed_optimum") && !claims_an_optimum(ev);
    // Settings of one code tried in turn: nothing kept builds on another.
    let settings_only =
        assumes("stacked_changes") && ev.and_then(|ev| ev.facts.get("changes")).is_some_and(|c| c == "settings");
    // A figure that stands out: a jump, a gain beyond the noise, a lone best.
    let nothing_stands_out = assumes("standout_figure") && !ev.is_some_and(a_figure_stands_out);
    let kind = ev.and_then(|ev| ev.facts.get("failure_kind"));
    let other_failure = matches!(kind, Some(k) if !e.applies.failures.is_empty() && !e.applies.failures.contains(k));
    peak || other_failure
        || no_clock
        || no_trials
        || short_stall
        || nothing_failed
        || no_repeat
        || measured_claim
        || harness_figures
        || nothing_stands_out
        || no_optimum
        || settings_only
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_words_are_found_as_words() {
        assert_eq!(nvidia_words("How many SMs idle, and the warp count in Nsight?"), ["nsight", "sms", "warp"]);
        assert!(nvidia_words("the smallest scenarios, smem-free, a swarm of warplets").is_empty());
        assert_eq!(nvidia_words("cuobjdump -sass output"), ["cuobjdump", "sass"]);
    }

    #[test]
    fn several_scenarios_and_quoted_peaks_are_read_from_the_words() {
        assert!(assumes_several_scenarios("Which scenarios got slower with this change?"));
        assert!(assumes_several_scenarios("What does a prototype measure on the slowest scenario?"));
        assert!(assumes_several_scenarios("On your worst scenario, what fraction of the bound?"));
        assert!(assumes_several_scenarios("On the smallest scenarios, what does the time do?"));
        assert!(!assumes_several_scenarios("If {scenarios} run after the others, do they change?"));
        assert!(!assumes_several_scenarios("How many blocks does each scenario launch?"));
        assert!(assumes_quoted_peak("Does the peak you quote match what the kernel executes?"));
        let quote = |q: &str| Evidence { quote: Some(q.into()), ..Default::default() };
        let mut e = crate::bank::embedded().get("bound-007").expect("bound-007").clone();
        e.applies.assumes = vec!["quoted_peak".into()];
        assert!(contradicted_by_evidence(&e, None));
        assert!(contradicted_by_evidence(&e, Some(&quote("It is as fast as it gets."))));
        assert!(!contradicted_by_evidence(&e, Some(&quote("We reach 92% of the peak HBM bandwidth."))));
        assert!(!contradicted_by_evidence(&e, Some(&quote("That is 3.1 TB/s, the limit."))));
    }

    /// A question about reasoning alone is not asked of a claim that quotes
    /// its figures; one in words alone is.
    #[test]
    fn a_claim_that_quotes_its_figures_is_not_asked_about_reasoning_alone() {
        let quote = |q: &str| Evidence { quote: Some(q.into()), ..Default::default() };
        let bank = crate::bank::embedded();
        for id in ["process-003", "process-011"] {
            let e = bank.get(id).expect(id);
            assert!(e.applies.assumes.iter().any(|a| a == "reasoned_claim"), "{id}");
            assert!(contradicted_by_evidence(
                e,
                Some(&quote("0.6 overshoots: 0.4 is near-optimal for the embedding LR."))
            ));
            assert!(!contradicted_by_evidence(e, Some(&quote("No kernel change can beat the memory wall here."))));
            assert!(!contradicted_by_evidence(e, None), "no words quoted: nothing contradicts it");
        }
        assert!(quotes_a_figure(Some(&quote("batch=8 gave 1.135"))));
        assert!(!quotes_a_figure(Some(&quote("It plateaus."))));
        assert!(!quotes_a_figure(None));
    }

    /// Both sides of a setting are asked about only where the words call
    /// it at its best; whether a figure measured the same thing as the
    /// others, only of the agent's own log and where a figure stands out.
    #[test]
    fn an_optimum_and_a_standout_figure_are_asked_about_only_where_the_evidence_shows_them() {
        let quote = |q: &str| Evidence { quote: Some(q.into()), ..Default::default() };
        let bank = crate::bank::embedded();
        let both_sides = bank.get("process-015").expect("process-015");
        for q in ["LR already optimal", "More images doesn't help.", "no further gain at 2^15", "diminishing returns"] {
            assert!(!contradicted_by_evidence(both_sides, Some(&quote(q))), "{q}");
        }
        for q in ["We are memory-bound.", "The optimizer step is slow."] {
            assert!(contradicted_by_evidence(both_sides, Some(&quote(q))), "{q}");
        }
        assert!(contradicted_by_evidence(both_sides, None));
        let same_setup = bank.get("measure-014").expect("measure-014");
        let ev = |facts: &[(&str, &str)], detector: &str| crate::bank::evidence::with_facts(detector, facts);
        let log = ("figures", "agent_log");
        assert!(!contradicted_by_evidence(same_setup, Some(&ev(&[log], "geomean_jump"))));
        assert!(!contradicted_by_evidence(same_setup, Some(&ev(&[log, ("best_lead_pct", "21")], "plateau"))));
        assert!(!contradicted_by_evidence(same_setup, Some(&ev(&[log, ("measured_gain", "beyond_noise")], "text"))));
        assert!(contradicted_by_evidence(same_setup, Some(&ev(&[log, ("measured_gain", "inside_noise")], "text"))));
        assert!(contradicted_by_evidence(same_setup, Some(&ev(&[log], "plateau"))), "nothing stands out");
        assert!(contradicted_by_evidence(same_setup, Some(&ev(&[], "geomean_jump"))), "gadfly's harness measured it");
        // Rows that share their commits are settings tried in turn, not stacked changes.
        let ablation = bank.get("process-009").expect("process-009");
        assert!(contradicted_by_evidence(ablation, Some(&ev(&[("changes", "settings")], "plateau"))));
        assert!(!contradicted_by_evidence(ablation, Some(&ev(&[log], "plateau"))));
    }

    #[test]
    fn time_spent_and_quick_trials_are_not_asked_of_a_log_that_shows_neither() {
        let bank = crate::bank::embedded();
        let per_hour = bank.get("process-008").expect("process-008");
        let quick = bank.get("measure-006").expect("measure-006");
        assert!(per_hour.applies.assumes.iter().any(|a| a == "wall_clock"));
        assert!(quick.applies.assumes.iter().any(|a| a == "agent_trials"));
        let ev = |detector: &str, clock: Option<&str>| Evidence {
            detector: Some(detector.into()),
            facts: clock.map(|c| ("clock".to_string(), c.to_string())).into_iter().collect(),
            ..Default::default()
        };
        assert!(contradicted_by_evidence(per_hour, Some(&ev("plateau", Some("none")))));
        assert!(!contradicted_by_evidence(per_hour, Some(&ev("plateau", None))), "a live campaign has its clock");
        assert!(
            contradicted_by_evidence(quick, Some(&ev("plateau", None))),
            "a plateau of evaluations shows no trials"
        );
        assert!(contradicted_by_evidence(quick, Some(&ev("geomean_jump", None))));
        assert!(!contradicted_by_evidence(quick, Some(&ev("tool_calls_without_evaluation", None))));
        assert!(!contradicted_by_evidence(quick, Some(&ev("edit_loop", None))));
    }

    #[test]
    fn a_stop_rule_waits_for_a_long_stall_and_a_dropped_branch_for_a_failure() {
        let bank = crate::bank::embedded();
        let stop_rule = bank.get("process-012").expect("process-012");
        let dropped = bank.get("process-002").expect("process-002");
        let ev = |pairs: &[(&str, &str)]| crate::bank::evidence::with_facts("plateau", pairs);
        assert!(contradicted_by_evidence(stop_rule, Some(&ev(&[("stall", "5"), ("window", "5")]))));
        assert!(!contradicted_by_evidence(stop_rule, Some(&ev(&[("stall", "20"), ("window", "5")]))));
        assert!(!contradicted_by_evidence(stop_rule, None), "an edit loop says nothing of a stall");
        assert!(contradicted_by_evidence(dropped, Some(&ev(&[("failed", "0")]))));
        assert!(!contradicted_by_evidence(dropped, Some(&ev(&[("failed", "2")]))));
        assert!(!contradicted_by_evidence(dropped, Some(&Evidence::default())), "a claim's evidence has no count");
    }

    /// "Which hypothesis has been tested more than once" at a plateau is
    /// asked only when two of its evaluations measured the very same
    /// figure; an edit loop (the same file edited again and again) or the
    /// agent's idle trials need no such fact.
    #[test]
    fn a_repeated_hypothesis_needs_a_repeat_in_a_plateau_s_figures() {
        let repeated = crate::bank::embedded().get("process-006").expect("process-006");
        let ev = crate::bank::evidence::with_facts;
        assert!(contradicted_by_evidence(repeated, Some(&ev("plateau", &[("stall", "5")]))));
        assert!(!contradicted_by_evidence(repeated, Some(&ev("plateau", &[("repeated", "#3 and #7")]))));
        assert!(!contradicted_by_evidence(repeated, Some(&ev("edit_loop", &[]))));
        assert!(!contradicted_by_evidence(repeated, Some(&ev("tool_calls_without_evaluation", &[]))));
    }
}
