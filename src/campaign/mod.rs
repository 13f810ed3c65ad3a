//! The campaign spec (TOML): parsing, validation with errors that name the
//! file, line and field, and the resolved form the daemon stores.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod notify;
mod parse;
mod sections;
mod suggest;

pub use notify::{check as check_notify, NotifySpec, WebhookSpec, MAX_WEBHOOKS, NOTIFY_KINDS};
pub(crate) use parse::field_at;
pub use parse::{parse, parse_detached, DEFAULT_WITHHOLD};

/// How gadfly behaves at a stop attempt and when it picks questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// gadfly detects moments and delivers bank questions itself.
    Autonomous,
    /// a person picks questions; gadfly offers suggestions.
    Human,
    /// observe and record every stop attempt; never block.
    Audit,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Autonomous => "autonomous",
            Mode::Human => "human",
            Mode::Audit => "audit",
        }
    }
}

/// The validated, resolved campaign spec. `workspace` is absolute.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CampaignSpec {
    pub name: String,
    pub workspace: PathBuf,
    pub goal: String,
    /// One of [`ARCHITECTURES`] (an alias such as `H100` or `sm_90a` is
    /// stored as its family, `hopper`).
    pub architecture: Option<String>,
    /// `gpu` or `cpu` ([`DEVICES`]): as written, else implied by the
    /// architecture; bank entries for one kind of device reach only it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// What the campaign optimizes ([`OPTIMIZES`]): the code of a kernel
    /// (the default), a model's training recipe, or a system's
    /// configuration. Bank entries whose words assume kernel code
    /// (`applies.assumes = ["kernel_code"]`) reach only the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizes: Option<String>,
    pub comparison: Option<String>,
    /// Kinds of kernel this campaign is about (e.g. `qr`, `attention`):
    /// bank entries tied to a domain apply only when it is listed here.
    #[serde(default)]
    pub domains: Vec<String>,
    pub harness: HarnessSpec,
    pub constraints: ConstraintsSpec,
    pub predicate: PredicateSpec,
    pub mode: Mode,
    /// `[questions] withhold`: the share of moments in autonomous mode
    /// left without their bank question, drawn at random, so that `gadfly
    /// bank stats` can compare what follows a question with what follows
    /// none ([`crate::bank::learn`]). 0 turns it off. A spec stored before
    /// the option asks at every moment, as it did.
    #[serde(default)]
    pub withhold: f64,
    /// What the Stop hook does when it cannot reach the daemon.
    #[serde(default)]
    pub gate: GateSpec,
    /// How the agent's hooks reach the daemon.
    #[serde(default)]
    pub hooks: HooksSpec,
    /// Sections later issues own (moments, agent, beam), kept as written.
    #[serde(default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// `[notify]`: the webhooks told of what a person should know (see
    /// [`NotifySpec`]).
    #[serde(default, skip_serializing_if = "NotifySpec::is_empty")]
    pub notify: NotifySpec,
    /// `[replay]`: how `gadfly replay` reads a recorded session.
    #[serde(default, skip_serializing_if = "ReplaySpec::is_empty")]
    pub replay: ReplaySpec,
    /// `[redteam]`: whether gadfly red-teams the harness by itself.
    #[serde(default, skip_serializing_if = "RedteamSpec::is_default")]
    pub redteam: RedteamSpec,
    /// `[questions]` besides `mode`: how long a delivered question may stay
    /// unanswered (see [`QuestionsSpec`]).
    #[serde(default, skip_serializing_if = "QuestionsSpec::is_default")]
    pub questions: QuestionsSpec,
    /// `[calibration]`: the harness calibrated at `campaign create`, and
    /// whether a bias it finds refuses the campaign's runs.
    #[serde(default, skip_serializing_if = "CalibrationSpec::is_default")]
    pub calibration: CalibrationSpec,
}

/// `[calibration]`: `gadfly campaign create` calibrates the harness
/// (`gadfly calibrate`: the initial kernel against itself, `runs` times)
/// unless `at_create = false`; while the campaign's latest calibration
/// finds a bias beyond noise, `gadfly run` refuses to start an agent
/// (`--force` starts it anyway) unless `accept_bias = true`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct CalibrationSpec {
    #[serde(default = "yes")]
    pub at_create: bool,
    #[serde(default = "default_calibration_runs")]
    pub runs: u32,
    #[serde(default)]
    pub accept_bias: bool,
}

fn yes() -> bool {
    true
}

fn default_calibration_runs() -> u32 {
    CALIBRATION_DEFAULT_RUNS
}

/// Runs of a calibration (`gadfly calibrate`, `[calibration] runs`): by
/// default, and at most.
pub const CALIBRATION_DEFAULT_RUNS: u32 = 5;
pub const CALIBRATION_MAX_RUNS: u32 = 20;

impl Default for CalibrationSpec {
    fn default() -> Self {
        CalibrationSpec { at_create: true, runs: default_calibration_runs(), accept_bias: false }
    }
}

impl CalibrationSpec {
    pub fn is_default(&self) -> bool {
        *self == CalibrationSpec::default()
    }
}

/// `[questions] answer_within_turns = N` (default
/// [`DEFAULT_ANSWER_WITHIN_TURNS`], 0 turns it off): a delivered question
/// counts as answered only when fresh evidence follows it (a changed tree
/// evaluated, or files filed with `gadfly answer`). One left unanswered for
/// N turns (judged stop attempts) is asked again in another form; when the
/// re-ask is left unanswered for N more, it is escalated to a person.
/// Three turns: one for the agent to read the question and one or two to
/// measure; a question still unanswered after that is being ignored, and
/// six turns in all is where a person watching would step in.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct QuestionsSpec {
    #[serde(default = "default_answer_within_turns")]
    pub answer_within_turns: u32,
}

/// See [`QuestionsSpec`].
pub const DEFAULT_ANSWER_WITHIN_TURNS: u32 = 3;

fn default_answer_within_turns() -> u32 {
    DEFAULT_ANSWER_WITHIN_TURNS
}

impl Default for QuestionsSpec {
    fn default() -> Self {
        QuestionsSpec { answer_within_turns: DEFAULT_ANSWER_WITHIN_TURNS }
    }
}

impl QuestionsSpec {
    pub fn is_default(&self) -> bool {
        *self == QuestionsSpec::default()
    }
}

/// `[redteam]`: with `before_start = true`, starting an agent's run first
/// runs the red-team battery against the campaign's harness (`gadfly
/// redteam`), unless a report of the same battery on the same harness
/// already says every attack held; on a broken harness the run ends at
/// once, refused, and the agent never starts (`gadfly run --force` starts
/// it without the battery).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RedteamSpec {
    #[serde(default)]
    pub before_start: bool,
    /// The campaign's own attacks: globs of manifests in the workspace
    /// (`redteam/README.md`'s format, sources beside them), run with the
    /// battery built into gadfly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attacks: Vec<String>,
    /// A report whose coverage is low (see `redteam::Coverage`) is
    /// `held`, not `low_coverage`: the campaign knows its harness is
    /// little tested by the battery and accepts it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_low_coverage: bool,
}

impl RedteamSpec {
    pub fn is_default(&self) -> bool {
        *self == RedteamSpec::default()
    }
}

/// `[replay]`: what `gadfly replay` needs to read a recorded session that
/// gadfly did not supervise. `evaluation` is a regular expression over the
/// agent's tool results, with named groups: `scenario` always; `correct`,
/// or `time_us` and `baseline_us`, or all three (and optionally
/// `compare_us`, `bound_us`). Each match is one scenario of the results
/// contract, and a tool result with matches is an evaluation. Output that
/// shows no times counts each scenario at 1 us against a 1 us baseline
/// (a correctness-only replay: set `min_speedup` to 1); output that says
/// nothing of correctness counts each scenario correct (docs/REPLAY.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReplaySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<String>,
}

impl ReplaySpec {
    pub fn is_empty(&self) -> bool {
        self.evaluation.is_none()
    }
}

/// The named groups `[replay] evaluation` may have.
pub const REPLAY_GROUPS: [&str; 6] = ["scenario", "time_us", "baseline_us", "correct", "compare_us", "bound_us"];

/// Checks a `[replay] evaluation` pattern: it compiles, names only the
/// groups of [`REPLAY_GROUPS`], has `scenario`, and `correct` or the
/// times (`time_us` with `baseline_us`). The message says what is wrong.
/// The kinds of device a campaign runs on.
pub const DEVICES: [&str; 2] = ["gpu", "cpu"];
/// What a campaign may optimize (`optimizes`): a kernel's code, a
/// training recipe (the figure a validation loss, say), a system's
/// configuration (a server's or a runtime's settings).
pub const OPTIMIZES: [&str; 3] = ["kernel", "training", "configuration"];
/// The architecture families a campaign may name, with their device.
pub const ARCHITECTURES: [(&str, &str); 6] =
    [("hopper", "gpu"), ("blackwell", "gpu"), ("ampere", "gpu"), ("amd_cdna", "gpu"), ("x86", "cpu"), ("arm", "cpu")];
/// Other names for the families, lower case: products and compute targets.
#[rustfmt::skip]
const ARCHITECTURE_ALIASES: [(&str, &str); 52] = [
    ("h100", "hopper"), ("h200", "hopper"), ("h800", "hopper"), ("h20", "hopper"), ("gh200", "hopper"),
    ("sm_90", "hopper"), ("sm_90a", "hopper"), ("sm90", "hopper"), ("sm90a", "hopper"),
    ("b100", "blackwell"), ("b200", "blackwell"), ("b300", "blackwell"), ("gb200", "blackwell"),
    ("sm_100", "blackwell"), ("sm_100a", "blackwell"), ("sm100", "blackwell"), ("sm100a", "blackwell"),
    ("a100", "ampere"), ("a800", "ampere"), ("a30", "ampere"), ("a10", "ampere"), ("a40", "ampere"),
    ("sm_80", "ampere"), ("sm_86", "ampere"), ("sm80", "ampere"), ("sm86", "ampere"),
    ("mi200", "amd_cdna"), ("mi250", "amd_cdna"), ("mi250x", "amd_cdna"), ("mi300x", "amd_cdna"),
    ("gfx90a", "amd_cdna"), ("gfx942", "amd_cdna"), ("cdna", "amd_cdna"),
    ("mi300", "amd_cdna"), ("mi300a", "amd_cdna"), ("mi325x", "amd_cdna"), ("mi350x", "amd_cdna"),
    ("mi355x", "amd_cdna"), ("gfx940", "amd_cdna"), ("gfx941", "amd_cdna"), ("gfx950", "amd_cdna"),
    ("cdna2", "amd_cdna"), ("cdna3", "amd_cdna"), ("cdna4", "amd_cdna"), ("gb300", "blackwell"),
    ("x86_64", "x86"), ("x86-64", "x86"), ("amd64", "x86"),
    ("aarch64", "arm"), ("arm64", "arm"), ("neoverse", "arm"), ("grace", "arm"),
];

/// The family an architecture name stands for (`H100`, `sm_90a` and
/// `hopper` are all `hopper`), case-insensitive; `None` when unknown.
pub fn canonical_architecture(name: &str) -> Option<&'static str> {
    let n = name.trim().to_ascii_lowercase();
    ARCHITECTURES
        .iter()
        .map(|(a, _)| *a)
        .find(|a| *a == n)
        .or_else(|| ARCHITECTURE_ALIASES.iter().find(|(alias, _)| *alias == n).map(|(_, a)| *a))
}

/// The device an architecture family runs on.
pub fn device_of(architecture: &str) -> Option<&'static str> {
    let a = canonical_architecture(architecture)?;
    ARCHITECTURES.iter().find(|(n, _)| *n == a).map(|(_, d)| *d)
}

/// Every accepted architecture name, families first, for error messages.
pub fn architecture_names() -> String {
    let families: Vec<&str> = ARCHITECTURES.iter().map(|(a, _)| *a).collect();
    let aliases: Vec<&str> = ARCHITECTURE_ALIASES.iter().map(|(a, _)| *a).collect();
    format!("{} (or an alias: {})", families.join(", "), aliases.join(", "))
}

impl CampaignSpec {
    /// `gpu`, `cpu`, or `None` when neither the spec nor its architecture says.
    pub fn device_kind(&self) -> Option<&str> {
        self.device.as_deref().or_else(|| self.architecture.as_deref().and_then(device_of))
    }

    /// Whether the agent writes kernel code (`optimizes`, `kernel` unless
    /// the spec says otherwise).
    pub fn optimizes_kernel_code(&self) -> bool {
        self.optimizes.as_deref().is_none_or(|o| o == "kernel")
    }

    /// Whether kept changes build on one another: not in a configuration
    /// search, which keeps points of a space.
    pub fn changes_stack(&self) -> bool {
        self.optimizes.as_deref() != Some("configuration")
    }

    /// Whether the campaign's figure is a time or a speed: not for a
    /// training recipe, whose figure is a quality (a validation loss).
    pub fn figure_is_timed(&self) -> bool {
        self.optimizes.as_deref() != Some("training")
    }
}

pub fn check_replay_pattern(pattern: &str) -> Result<regex::Regex, String> {
    let re = regex::Regex::new(pattern).map_err(|e| format!("not a valid regular expression: {}", one_line_err(&e)))?;
    let names: Vec<&str> = re.capture_names().flatten().collect();
    if let Some(unknown) = names.iter().find(|n| !REPLAY_GROUPS.contains(n)) {
        return Err(format!("unknown named group `{unknown}`; the groups are {}", REPLAY_GROUPS.join(", ")));
    }
    let has = |g: &str| names.contains(&g);
    if !has("scenario") {
        return Err("missing the named group `scenario`: write it as (?P<scenario>...)".into());
    }
    match (has("time_us"), has("baseline_us")) {
        (true, false) => return Err("`time_us` without `baseline_us`: a time is judged against its baseline".into()),
        (false, true) => return Err("`baseline_us` without `time_us`: name both, or neither".into()),
        (false, false) if !has("correct") => return Err(
            "missing the named groups `correct` or `time_us` and `baseline_us`: a match must say something to judge"
                .into(),
        ),
        _ => {}
    }
    Ok(re)
}

fn one_line_err(e: &regex::Error) -> String {
    e.to_string().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HarnessSpec {
    pub build: Option<String>,
    pub run: String,
    pub timeout_s: u64,
    pub scenarios: Vec<String>,
    pub protected: Vec<String>,
    /// `[harness] candidate`: globs naming the workspace files that make up
    /// the candidate. When not empty, an evaluation folder holds gadfly's
    /// pristine protected files plus only the snapshot's files matching
    /// these (regular files with safe names); nothing else of the
    /// workspace reaches the build or the run. Empty (a spec without it):
    /// the whole workspace tree is evaluated, and [`warnings`] says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate: Vec<String>,
    /// Tags a worker must have to evaluate this campaign (`gpu = "h200"`);
    /// empty: the daemon runs the harness itself.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Where the build and the harness run (see [`SandboxMode`]).
    #[serde(default)]
    pub sandbox: SandboxMode,
    /// Folders of the host a sandboxed build and harness may read besides
    /// the system's (`harness::SYSTEM_FOLDERS`): a toolchain installed
    /// elsewhere (`/root/.pyenv`, `/usr/local/cuda-12.4` lies under `/usr`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readable: Vec<String>,
    /// `[harness] fresh_inputs = true`: the harness draws fresh inputs on
    /// every run by itself (a secret seed of its own, as the CUDA grader
    /// does), so a run without `{seed}` still gives the suspicious-gain
    /// re-check new inputs; [`warnings`] says nothing about the seed then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh_inputs: bool,
}

/// `[harness] sandbox`: `bwrap` (the default) runs the build and the
/// harness in a bubblewrap sandbox (`harness::bwrap_command`: their own
/// PID and user namespaces, the system's folders read-only and nothing else
/// of the host, the tree read-only while the harness runs, no network), and
/// refuses to judge where bubblewrap does not work; `none` is the opt-out:
/// the candidate runs as the daemon's user with nothing hidden; `auto` uses
/// bubblewrap where it works and runs unsandboxed, with a warning, where it
/// does not.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    None,
    #[default]
    Bwrap,
    Auto,
}

/// `[gate]`: the Stop hook when the daemon is down or unreachable. With
/// `fail = "closed"` (the default) a stop is blocked with "supervisor
/// unavailable" at most `unavailable_blocks` times in a row, then let
/// through; with `fail = "open"` it is let through at once. Either way the
/// call is spooled and recorded as an ungated stop at the next contact.
///
/// `stop_timeout_s` (default 600) is the timeout gadfly writes for the Stop
/// hook in the agent's settings, and the hook is told to answer within 90%
/// of it (`--deadline`), so it always answers, blocked or spooled, before
/// the agent kills it: a killed hook lets the stop through unrecorded.
/// Change it here, not in the settings file (an edited hook entry is a
/// tamper).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct GateSpec {
    pub fail_closed: bool,
    pub unavailable_blocks: u32,
    #[serde(default = "default_stop_timeout_s")]
    pub stop_timeout_s: u32,
    /// After this many blocked stops in a row without a gain, the block
    /// reason reminds the agent of `gadfly claim limit` (and that editing
    /// what judges it is recorded), and the integrity checks escalate.
    #[serde(default = "default_remind_after_blocks")]
    pub remind_after_blocks: u32,
    /// A stop on a tree measurably slower (beyond noise) than the
    /// campaign's best correct evaluation is blocked once, naming the
    /// better tree ([`crate::gate::slower_than_best`]).
    #[serde(default = "default_against_best")]
    pub against_best: bool,
    /// A stop on a gain this many times the best correct figure before it
    /// (or faster than a stated bound) is held until evidence filed for
    /// its question rules out a cache or a skipped computation
    /// ([`crate::gate::gain_to_hold`]); 0 switches it off.
    #[serde(default = "default_hold_gain")]
    pub hold_gain: f64,
}

fn default_hold_gain() -> f64 {
    30.0
}

fn default_against_best() -> bool {
    true
}

fn default_stop_timeout_s() -> u32 {
    600
}

fn default_remind_after_blocks() -> u32 {
    3
}

impl Default for GateSpec {
    fn default() -> Self {
        GateSpec {
            fail_closed: true,
            unavailable_blocks: 3,
            stop_timeout_s: default_stop_timeout_s(),
            remind_after_blocks: default_remind_after_blocks(),
            against_best: default_against_best(),
            hold_gain: default_hold_gain(),
        }
    }
}

impl GateSpec {
    /// The Stop hook's own deadline: 90% of the agent's timeout for it, so
    /// the hook answers (and spools) before it is killed.
    pub fn stop_deadline_s(&self) -> f64 {
        f64::from(self.stop_timeout_s) * 0.9
    }
}

/// `[hooks] transport`: how Claude Code's frequent hooks (PostToolUse,
/// UserPromptSubmit), which record and may carry a queued
/// question, reach the daemon. `"command"` (the default): a `gadfly hook`
/// process each, which spools what it cannot deliver. `"http"`: Claude Code
/// posts them to the daemon itself, with no process to start (about ten
/// times cheaper per hook, see BENCHMARKS.md); while the daemon is down
/// they are lost, and the transcript the daemon follows still has the tool
/// calls. The stop gate (Stop, SubagentStop), SessionStart and SessionEnd
/// are always `gadfly hook` commands: the gate must fail closed and spool.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct HooksSpec {
    #[serde(default)]
    pub http: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConstraintsSpec {
    pub binary: Option<String>,
    pub banned_symbols: Vec<String>,
}

/// `[predicate]`: what must hold on every scenario before a stop is
/// allowed. Speed is judged against the initial kernel (`baseline_us`)
/// and, when asked for, against the comparison implementation the harness
/// times (`compare_us`, e.g. the vendor library or FlashAttention).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PredicateSpec {
    pub correct: bool,
    /// Each scenario: `baseline_us / time_us >= min_speedup`.
    pub min_speedup: f64,
    /// The geometric mean of those, in addition (never instead).
    pub min_geomean_speedup: Option<f64>,
    /// Each scenario: `compare_us / time_us >= min_compare_speedup`; a
    /// scenario the harness reports no `compare_us` for fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_compare_speedup: Option<f64>,
    /// The geometric mean of the comparison ratios, in addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_compare_geomean: Option<f64>,
    /// Per-scenario thresholds that replace the campaign-wide ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scenarios: BTreeMap<String, ScenarioThresholds>,
    /// The smallest relative uncertainty one evaluation's figure is given,
    /// whatever the harness's samples say (run-to-run drift that the
    /// spread within one run does not show). A bar is met only when the
    /// figure clears it by its uncertainty ([`crate::predicate::noise`]).
    #[serde(default = "default_noise")]
    pub noise: f64,
    /// The relative uncertainty of a figure whose harness reports no
    /// samples or spread (`samples`, `cv`).
    #[serde(default = "default_noise_unknown")]
    pub noise_unknown: f64,
    /// How many more evaluations gadfly runs itself, with fresh seeds, when
    /// a figure is within noise of its bar and nothing else fails; their
    /// figures are pooled with the first.
    #[serde(default = "default_remeasure")]
    pub remeasure: u32,
    /// Per scenario, the half-width one evaluation's figure gets at least,
    /// from the harness's calibration (`gadfly calibrate`: the initial
    /// kernel against itself, [`crate::calibration`]). Never written in a
    /// spec file: the daemon adds the campaign's latest calibration.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calibrated: BTreeMap<String, f64>,
}

pub fn default_noise() -> f64 {
    0.01
}

pub fn default_noise_unknown() -> f64 {
    0.03
}

pub fn default_remeasure() -> u32 {
    2
}

/// `[predicate.scenarios.NAME]`: one scenario's own thresholds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ScenarioThresholds {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_speedup: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_compare_speedup: Option<f64>,
}

impl Default for PredicateSpec {
    fn default() -> Self {
        PredicateSpec {
            correct: true,
            min_speedup: 1.0,
            min_geomean_speedup: None,
            min_compare_speedup: None,
            min_compare_geomean: None,
            scenarios: BTreeMap::new(),
            noise: default_noise(),
            noise_unknown: default_noise_unknown(),
            remeasure: default_remeasure(),
            calibrated: BTreeMap::new(),
        }
    }
}

impl PredicateSpec {
    /// The speedup over the initial kernel `scenario` must reach.
    pub fn min_speedup_for(&self, scenario: &str) -> f64 {
        self.scenarios.get(scenario).and_then(|t| t.min_speedup).unwrap_or(self.min_speedup)
    }

    /// The speedup over the comparison `scenario` must reach, if any.
    pub fn min_compare_speedup_for(&self, scenario: &str) -> Option<f64> {
        self.scenarios.get(scenario).and_then(|t| t.min_compare_speedup).or(self.min_compare_speedup)
    }

    /// True when any scenario is held to the comparison.
    pub fn uses_comparison(&self) -> bool {
        self.min_compare_speedup.is_some()
            || self.min_compare_geomean.is_some()
            || self.scenarios.values().any(|t| t.min_compare_speedup.is_some())
    }
}

/// A spec error located in its file: `file:line:column: field: message`.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
        } else {
            write!(f, "{}:{}:{}: field `{}`: {}", self.file, self.line, self.column, self.field, self.message)
        }
    }
}

impl std::error::Error for SpecError {}

/// Every problem found in one spec, so the user fixes them in one pass.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(|e| e.to_string()).collect();
        write!(f, "{}", lines.join("\n"))
    }
}

impl std::error::Error for SpecErrors {}

/// A tag name or value: letters, digits, `.`, `_` and `-`.
pub fn valid_tag(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Reads and validates a spec file; the workspace is resolved against the
/// file's folder.
pub fn load(path: &Path) -> anyhow::Result<CampaignSpec> {
    let (text, folder) = read_spec(path)?;
    Ok(parse(&text, &path.display().to_string(), &folder)?)
}

/// [`load`] for `gadfly replay`: the workspace need not exist
/// ([`parse_detached`]).
pub fn load_detached(path: &Path) -> anyhow::Result<CampaignSpec> {
    let (text, folder) = read_spec(path)?;
    Ok(parse_detached(&text, &path.display().to_string(), &folder)?)
}

fn read_spec(path: &Path) -> anyhow::Result<(String, PathBuf)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read campaign spec {}: {e}", path.display()))?;
    let folder = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let folder = if folder.as_os_str().is_empty() { PathBuf::from(".") } else { folder };
    let folder = std::fs::canonicalize(&folder)
        .map_err(|e| anyhow::anyhow!("cannot resolve folder of {}: {e}", path.display()))?;
    Ok((text, folder))
}

fn is_git_work_tree(dir: &Path) -> bool {
    // Found by reading the folders, never by running git in the agent's
    // repository (its config could name programs git would run).
    crate::git::find_repo(dir).is_ok()
}

/// What is weak in a valid spec, one sentence each: printed at `gadfly
/// campaign create` (on stderr) and meant for `gadfly doctor`.
pub fn warnings(spec: &CampaignSpec) -> Vec<String> {
    let mut out = Vec::new();
    if spec.harness.candidate.is_empty() {
        out.push(
            "[harness] declares no `candidate`: the whole workspace tree is evaluated, so any file the agent adds \
             (a GNUmakefile, a conftest.py, a wrapper script) reaches the build and the run; declare the candidate's \
             files, e.g. `candidate = [\"kernel/**\"]`"
                .to_string(),
        );
    }
    match spec.harness.sandbox {
        SandboxMode::None => out.push(
            "[harness] sandbox = \"none\": the candidate's code runs as the daemon's user with the host in reach (its \
             data dir, the workspace, other campaigns); remove the line to run it sandboxed"
                .to_string(),
        ),
        SandboxMode::Auto => out.push(
            "[harness] sandbox = \"auto\": where bubblewrap does not work the candidate runs unsandboxed instead of \
             the evaluation refusing to judge; remove the line to require the sandbox"
                .to_string(),
        ),
        SandboxMode::Bwrap => {}
    }
    if !spec.harness.fresh_inputs && !spec.harness.run.contains("{seed}") && !spec.harness.run.contains("GADFLY_SEED") {
        out.push(format!(
            "[harness] run `{}` has no `{{seed}}`: the re-check of a suspicious gain runs the same tree with another \
             seed (fresh inputs), and a harness that ignores it measures the same inputs again, so the re-check \
             proves nothing; pass `{{seed}}` (or read $GADFLY_SEED) and draw the inputs from it, or, if the \
             harness draws fresh inputs on every run by itself, say so with `fresh_inputs = true`",
            spec.harness.run
        ));
    }
    for glob in unmatched_protected(&spec.workspace, &spec.harness.protected) {
        out.push(format!(
            "[harness] protected glob `{glob}` matches no file in the workspace {}: nothing is protected by it \
             (is the harness missing from the workspace? copy it in, commit it, then create the campaign)",
            spec.workspace.display()
        ));
    }
    out
}

/// The protected globs that match no file under `workspace` (its `.git`
/// aside), matched as the snapshot matches them (`*` crosses `/`). Empty
/// when the workspace cannot be read (the spec's errors say why).
pub fn unmatched_protected(workspace: &Path, globs: &[String]) -> Vec<String> {
    if !workspace.is_dir() {
        return Vec::new();
    }
    let mut files = Vec::new();
    let walk = walkdir::WalkDir::new(workspace)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || e.file_name() != ".git");
    for entry in walk.flatten().take(200_000) {
        if entry.depth() == 0 {
            continue;
        }
        if let Ok(rel) = entry.path().strip_prefix(workspace) {
            files.push(rel.to_string_lossy().into_owned());
        }
    }
    globs
        .iter()
        .filter(|g| {
            let Ok(glob) = globset::GlobBuilder::new(g).literal_separator(false).build() else {
                return false;
            };
            let m = glob.compile_matcher();
            !files.iter().any(|f| m.is_match(f))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
