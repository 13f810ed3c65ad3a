//! The question bank: what gadfly asks. Entries live in question_bank/ (one
//! TOML file per group), are validated with errors that name the file,
//! line and field ([`load`]), picked for a moment by a policy that learns
//! which questions were followed by gains ([`select`], [`learn`]) from the
//! groups that fit the moment ([`groups`]), and reloaded while the daemon
//! runs ([`live`]).

pub mod evidence;
pub mod groups;
pub mod learn;
pub mod live;
pub mod load;
pub mod select;
pub mod uplift;
pub mod vocabulary;

use std::sync::LazyLock;

use include_dir::{include_dir, Dir};
use serde::{Deserialize, Serialize};

use crate::campaign::CampaignSpec;

static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/question_bank");

pub const CORE_GROUPS: [&str; 10] = [
    "measurement",
    "bound",
    "benchmark_validity",
    "gap_analysis",
    "correctness",
    "algorithm_family",
    "memory_hierarchy",
    "parallelism_launch",
    "instruction_level",
    "campaign_process",
];
pub const COMPARISON_GROUP: &str = "comparison";
pub const ARCHITECTURE_GROUP: &str = "architecture";
pub const MOMENTS: [&str; 7] =
    ["start", "plateau", "limit_claim", "completion_claim", "suspicious_gain", "correctness_dismissal", "edit_loop"];
pub const LEVELS: [&str; 11] = [
    "measurement",
    "benchmark",
    "numerics",
    "algorithm",
    "memory",
    "parallelism",
    "launch",
    "host",
    "instruction",
    "hardware",
    "process",
];
pub const ARCHITECTURES: [&str; 6] = ["hopper", "blackwell", "ampere", "amd_cdna", "x86", "arm"];

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Applies {
    #[serde(default)]
    pub comparison: bool,
    #[serde(default)]
    pub architectures: Vec<String>,
    #[serde(default)]
    pub domains: Vec<String>,
    /// `gpu` or `cpu` (crate::campaign::DEVICES): the entry makes sense on
    /// that kind of device only; empty for both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// What the question's words take for granted
    /// ([`vocabulary::ASSUMPTIONS`]): `several_scenarios` (never asked in a
    /// campaign of one scenario), `quoted_peak` (only when the agent's words
    /// quote a peak), `kernel_code` (only in a campaign that optimizes a
    /// kernel's code: not a training recipe or a configuration),
    /// `timed_figure` (the figure is a time or a speed: not a training
    /// recipe's validation loss), `wall_clock` (time spent is known),
    /// `agent_trials` (the agent's own trials between evaluations) and
    /// `branches` (separate lines of work: a campaign with a beam),
    /// `long_stall`, `dropped_failures` and `repeated_trial` (what a
    /// plateau's facts must show) and `reasoned_claim` (the claim's words
    /// quote no figure), `logged_figures` (the figures are rows of the
    /// agent's own experiment log) and `stacked_changes` (kept changes
    /// build on one another: never in a configuration search) and
    /// `standout_figure` (a jump, a gain beyond the noise or a lone best)
    /// and `claimed_optimum` (the quoted words call a setting at its best):
    /// [`vocabulary::contradicted_by_evidence`] and [`Entry::applies_to`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assumes: Vec<String>,
    /// The kinds of failure the question can find the cause of
    /// ([`crate::evaluation::FAILURE_KINDS`]); empty for any. A moment
    /// whose evidence names its failure's kind (`facts.failure_kind`) asks
    /// only entries that fit it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub id: String,
    pub group: String,
    pub text: String,
    /// The question in an AMD GPU's words (ROCm tools, LDS, wavefronts),
    /// when `text` uses NVIDIA's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_amd: Option<String>,
    /// The question in a CPU's words, when `text` uses a GPU's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_cpu: Option<String>,
    pub moments: Vec<String>,
    pub level: String,
    pub applies: Applies,
    pub provenance: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    pub source: String,
    pub rationale: String,
}

impl Entry {
    /// The question in the campaign's words: `text_amd` on an AMD GPU,
    /// `text_cpu` on a CPU, `text` otherwise or when it gives no variant.
    pub fn text_for(&self, spec: &CampaignSpec) -> &str {
        let variant = match vocabulary::target(spec) {
            vocabulary::Target::Amd => self.text_amd.as_deref(),
            vocabulary::Target::Cpu => self.text_cpu.as_deref(),
            vocabulary::Target::Nvidia => None,
        };
        variant.unwrap_or(&self.text)
    }

    /// Whether this entry may be asked in a campaign with this spec: what
    /// it requires (a comparison, an architecture, a device, a domain) is
    /// there, and nothing it assumes is contradicted (NVIDIA words on an
    /// AMD GPU or a CPU, several scenarios in a campaign of one).
    pub fn applies_to(&self, spec: &CampaignSpec) -> bool {
        if self.applies.comparison && spec.comparison.is_none() {
            return false;
        }
        // An architecture entry's words are its architecture's own (an AMD
        // entry may name warps to warn of them); the others' follow the
        // campaign's vendor.
        if self.applies.architectures.is_empty()
            && vocabulary::target(spec) != vocabulary::Target::Nvidia
            && !vocabulary::nvidia_words(self.text_for(spec)).is_empty()
        {
            return false;
        }
        if self.applies.assumes.iter().any(|a| a == "several_scenarios") && spec.harness.scenarios.len() < 2 {
            return false;
        }
        if self.applies.assumes.iter().any(|a| a == "kernel_code") && !spec.optimizes_kernel_code() {
            return false;
        }
        // Kept changes that build on one another, to take out one at a
        // time: a configuration search keeps points of a space, not edits.
        if self.applies.assumes.iter().any(|a| a == "stacked_changes") && !spec.changes_stack() {
            return false;
        }
        if self.applies.assumes.iter().any(|a| a == "timed_figure") && !spec.figure_is_timed() {
            return false;
        }
        // Separate lines of work gadfly can see are a beam's families; a
        // campaign without one is one line, every kept gain in it.
        if self.applies.assumes.iter().any(|a| a == "branches") && !spec.extra.contains_key("beam") {
            return false;
        }
        if !self.applies.architectures.is_empty() {
            let Some(arch) = &spec.architecture else { return false };
            let arch = crate::campaign::canonical_architecture(arch).unwrap_or(arch.as_str());
            if !self.applies.architectures.iter().any(|a| a.eq_ignore_ascii_case(arch)) {
                return false;
            }
        }
        if !self.applies.devices.is_empty() {
            // A campaign that does not say its device gets every entry.
            if let Some(d) = spec.device_kind() {
                if !self.applies.devices.iter().any(|x| x == d) {
                    return false;
                }
            }
        }
        if !self.applies.domains.is_empty()
            && !self.applies.domains.iter().any(|d| spec.domains.iter().any(|s| s.eq_ignore_ascii_case(d)))
        {
            return false;
        }
        true
    }

    pub fn is_core(&self) -> bool {
        CORE_GROUPS.contains(&self.group.as_str())
    }

    pub fn fits(&self, moment: &str) -> bool {
        self.moments.iter().any(|m| m == moment)
    }
}

/// A validated bank. `problems` are errors (an entry that cannot be used);
/// `warnings` break the bank's composition rules (counts, coverage).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Bank {
    pub entries: Vec<Entry>,
    pub descriptions: Vec<(String, String)>,
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
    /// Where it was read from: a folder, or "embedded".
    pub source: String,
}

impl Bank {
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.id == id)
    }
}

/// The bank compiled into this binary (question_bank/ at build time).
pub fn embedded() -> &'static Bank {
    static BANK: LazyLock<Bank> = LazyLock::new(|| {
        let mut files: Vec<(String, String)> = EMBEDDED
            .files()
            .filter(|f| f.path().extension().is_some_and(|e| e == "toml"))
            .filter_map(|f| Some((format!("question_bank/{}", f.path().to_str()?), f.contents_utf8()?.to_string())))
            .collect();
        files.sort();
        let mut bank = load::parse_files(&files);
        bank.source = "embedded".into();
        for p in &bank.problems {
            tracing::warn!(problem = %p, "embedded question bank");
        }
        bank
    });
    &BANK
}
