//! The campaign spec (TOML): parsing, validation with errors that name the
//! file, line and field, and the resolved form the daemon stores.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// What a campaign is asked to achieve and how it is measured, as written
/// by the user. Unknown keys are rejected so that a typo is an error, not a
/// silently ignored setting.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Spanned<String>,
    workspace: Spanned<String>,
    #[serde(default)]
    goal: String,
    #[serde(default)]
    architecture: Option<Spanned<String>>,
    #[serde(default)]
    comparison: Option<String>,
    #[serde(default)]
    domains: Vec<String>,
    harness: RawHarness,
    #[serde(default)]
    constraints: RawConstraints,
    #[serde(default)]
    predicate: RawPredicate,
    #[serde(default)]
    moments: Option<toml::Table>,
    #[serde(default)]
    agent: Option<toml::Table>,
    #[serde(default)]
    beam: Option<toml::Table>,
    #[serde(default)]
    questions: RawQuestions,
    #[serde(default)]
    gate: RawGate,
    #[serde(default)]
    hooks: RawHooks,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHooks {
    #[serde(default)]
    transport: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    #[serde(default)]
    fail: Option<Spanned<String>>,
    #[serde(default)]
    unavailable_blocks: Option<Spanned<i64>>,
    #[serde(default)]
    stop_timeout_s: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHarness {
    #[serde(default)]
    build: Option<String>,
    run: Spanned<String>,
    #[serde(default = "default_timeout")]
    timeout_s: Spanned<i64>,
    scenarios: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    protected: Vec<Spanned<String>>,
    /// The files of the workspace that make up the candidate (globs like
    /// `protected`): when given, nothing else of the workspace reaches the
    /// evaluation.
    #[serde(default)]
    candidate: Option<Spanned<Vec<Spanned<String>>>>,
    /// What the evaluation hosts must offer (`{ gpu = "h200" }`): with any
    /// tag, the daemon never runs the harness; `gadfly worker`s do.
    #[serde(default)]
    tags: Option<Spanned<toml::Table>>,
    #[serde(default)]
    sandbox: Option<Spanned<String>>,
}

fn default_timeout() -> Spanned<i64> {
    Spanned::new(0..0, 600)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstraints {
    #[serde(default)]
    binary: Option<Spanned<String>>,
    #[serde(default)]
    banned_symbols: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPredicate {
    #[serde(default = "yes")]
    correct: bool,
    #[serde(default = "one")]
    min_speedup: Spanned<f64>,
    #[serde(default)]
    min_geomean_speedup: Option<Spanned<f64>>,
    #[serde(default)]
    min_compare_speedup: Option<Spanned<f64>>,
    #[serde(default)]
    min_compare_geomean: Option<Spanned<f64>>,
    /// `[predicate.scenarios.NAME]`: thresholds for one scenario.
    #[serde(default)]
    scenarios: BTreeMap<String, Spanned<RawScenarioPredicate>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenarioPredicate {
    #[serde(default)]
    min_speedup: Option<Spanned<f64>>,
    #[serde(default)]
    min_compare_speedup: Option<Spanned<f64>>,
}

impl Default for RawPredicate {
    fn default() -> Self {
        RawPredicate {
            correct: true,
            min_speedup: one(),
            min_geomean_speedup: None,
            min_compare_speedup: None,
            min_compare_geomean: None,
            scenarios: BTreeMap::new(),
        }
    }
}

fn yes() -> bool {
    true
}
fn one() -> Spanned<f64> {
    Spanned::new(0..0, 1.0)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuestions {
    #[serde(default)]
    mode: Option<Spanned<String>>,
}

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
    pub architecture: Option<String>,
    pub comparison: Option<String>,
    /// Kinds of kernel this campaign is about (e.g. `qr`, `attention`):
    /// bank entries tied to a domain apply only when it is listed here.
    #[serde(default)]
    pub domains: Vec<String>,
    pub harness: HarnessSpec,
    pub constraints: ConstraintsSpec,
    pub predicate: PredicateSpec,
    pub mode: Mode,
    /// What the Stop hook does when it cannot reach the daemon.
    #[serde(default)]
    pub gate: GateSpec,
    /// How the agent's hooks reach the daemon.
    #[serde(default)]
    pub hooks: HooksSpec,
    /// Sections later issues own (moments, agent, beam), kept as written.
    #[serde(default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
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
}

/// `[harness] sandbox`: `none` (the default) runs the build and the harness
/// as the daemon's user with nothing hidden; `bwrap` runs them in a
/// bubblewrap sandbox (the file system read-only but for the evaluation's
/// own folder, `/tmp` and the daemon's data dir replaced by empty ones, no
/// network), and fails the evaluation when bubblewrap is missing; `auto`
/// uses bubblewrap when it works on the host and says so when it does not.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    #[default]
    None,
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
}

fn default_stop_timeout_s() -> u32 {
    600
}

impl Default for GateSpec {
    fn default() -> Self {
        GateSpec { fail_closed: true, unavailable_blocks: 3, stop_timeout_s: default_stop_timeout_s() }
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

struct Locator<'a> {
    file: &'a str,
    text: &'a str,
    errors: Vec<SpecError>,
}

impl<'a> Locator<'a> {
    fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        // Columns count characters, as an editor shows them.
        let column = before[before.rfind('\n').map_or(0, |nl| nl + 1)..].chars().count() + 1;
        (line, column)
    }

    fn push(&mut self, span: std::ops::Range<usize>, field: &str, message: impl Into<String>) {
        let (line, column) = if span == (0..0) { (1, 1) } else { self.position(span.start) };
        self.errors.push(SpecError {
            file: self.file.to_string(),
            line,
            column,
            field: one_line(field),
            message: one_line(&message.into()),
        });
    }
}

/// One error, one line: control characters in quoted values (a scenario
/// named "a\nb") are escaped.
fn one_line(s: &str) -> String {
    s.chars().fold(String::new(), |mut m, c| {
        if c.is_control() {
            m.extend(c.escape_default());
        } else {
            m.push(c);
        }
        m
    })
}

/// A tag name or value: letters, digits, `.`, `_` and `-`.
pub fn valid_tag(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Reads and validates a spec file; the workspace is resolved against the
/// file's folder.
pub fn load(path: &Path) -> anyhow::Result<CampaignSpec> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read campaign spec {}: {e}", path.display()))?;
    let folder = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let folder = if folder.as_os_str().is_empty() { PathBuf::from(".") } else { folder };
    let folder = std::fs::canonicalize(&folder)
        .map_err(|e| anyhow::anyhow!("cannot resolve folder of {}: {e}", path.display()))?;
    Ok(parse(&text, &path.display().to_string(), &folder)?)
}

/// Parses and validates spec text. `file` names the source in errors;
/// `base` is the folder the workspace is relative to.
pub fn parse(text: &str, file: &str, base: &Path) -> Result<CampaignSpec, SpecErrors> {
    let mut loc = Locator { file, text, errors: Vec::new() };
    let raw: RawSpec = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            let message = toml_message(e.message(), span.start >= text.len());
            let field = match field_from_message(&message) {
                Some(name) if message.starts_with("missing field") => missing_field(text, span.clone(), name),
                named => field_at(text, span.start, named),
            };
            loc.push(span, &field, message);
            return Err(SpecErrors(loc.errors));
        }
    };

    if raw.name.get_ref().trim().is_empty() {
        loc.push(raw.name.span(), "name", "must not be empty");
    }
    if raw.workspace.get_ref().trim().is_empty() {
        loc.push(raw.workspace.span(), "workspace", "must not be empty");
    }
    let workspace = base.join(raw.workspace.get_ref());
    let workspace = std::fs::canonicalize(&workspace).unwrap_or(workspace);
    if !workspace.is_dir() {
        loc.push(raw.workspace.span(), "workspace", format!("{} is not a directory", workspace.display()));
    } else if !is_git_work_tree(&workspace) {
        loc.push(
            raw.workspace.span(),
            "workspace",
            format!(
                "{} is not a git repository (run `git init` there first: gadfly evaluates snapshots of its tree)",
                workspace.display()
            ),
        );
    }

    let run = raw.harness.run.get_ref();
    if run.trim().is_empty() {
        loc.push(raw.harness.run.span(), "harness.run", "must not be empty");
    } else if !run.contains("{results}") {
        loc.push(
            raw.harness.run.span(),
            "harness.run",
            "must contain `{results}`, the path where the harness writes its JSON lines",
        );
    }
    let timeout = *raw.harness.timeout_s.get_ref();
    if !(1..=86_400).contains(&timeout) {
        loc.push(raw.harness.timeout_s.span(), "harness.timeout_s", "must be between 1 and 86400 seconds");
    }
    let scenarios: Vec<String> = raw.harness.scenarios.get_ref().iter().map(|s| s.get_ref().clone()).collect();
    if scenarios.is_empty() {
        loc.push(
            raw.harness.scenarios.span(),
            "harness.scenarios",
            "must list at least one scenario: the predicate must hold on every one",
        );
    }
    let mut seen = std::collections::HashSet::new();
    for s in raw.harness.scenarios.get_ref() {
        if s.get_ref().trim().is_empty() {
            loc.push(s.span(), "harness.scenarios", "scenario names must not be empty");
        } else if !seen.insert(s.get_ref().clone()) {
            loc.push(s.span(), "harness.scenarios", format!("scenario `{}` is listed twice", s.get_ref()));
        }
    }
    for g in &raw.harness.protected {
        if let Err(e) = globset::Glob::new(g.get_ref()) {
            loc.push(g.span(), "harness.protected", format!("invalid glob `{}`: {e}", g.get_ref()));
        }
    }
    if let Some(c) = &raw.harness.candidate {
        if c.get_ref().is_empty() {
            loc.push(
                c.span(),
                "harness.candidate",
                "must list at least one glob (the candidate's files, e.g. `[\"kernel/**\"]`); leave it out to evaluate the whole workspace",
            );
        }
        for g in c.get_ref() {
            if g.get_ref().trim().is_empty() {
                loc.push(g.span(), "harness.candidate", "globs must not be empty");
            } else if let Err(e) = globset::Glob::new(g.get_ref()) {
                loc.push(g.span(), "harness.candidate", format!("invalid glob `{}`: {e}", g.get_ref()));
            }
        }
    }
    let mut tags = BTreeMap::new();
    if let Some(t) = &raw.harness.tags {
        for (key, value) in t.get_ref() {
            match value.as_str() {
                // toml reads a date-time into a table as one private key.
                _ if key.starts_with("$__toml_private") => loc.push(
                    t.span(),
                    "harness.tags",
                    "must be a table of tags (`tags = { gpu = \"h200\" }`), not a date-time",
                ),
                Some(v) if valid_tag(key) && valid_tag(v) => {
                    tags.insert(key.clone(), v.to_string());
                }
                Some(v) => loc.push(
                    t.span(),
                    &format!("harness.tags.{key}"),
                    format!("`{key} = \"{v}\"`: tag names and values are letters, digits, `.`, `_` and `-`"),
                ),
                None => loc.push(
                    t.span(),
                    &format!("harness.tags.{key}"),
                    format!("must be a string (a worker started with `--tags {key}=VALUE` matches it)"),
                ),
            }
        }
    }
    for b in &raw.constraints.banned_symbols {
        if b.get_ref().trim().is_empty() {
            loc.push(b.span(), "constraints.banned_symbols", "patterns must not be empty");
        }
    }
    if !raw.constraints.banned_symbols.is_empty() && raw.constraints.binary.is_none() {
        loc.push(
            raw.constraints.banned_symbols[0].span(),
            "constraints.binary",
            "banned_symbols needs `binary`, the built file whose symbols are checked",
        );
    }
    let min_speedup = *raw.predicate.min_speedup.get_ref();
    if !(min_speedup.is_finite() && min_speedup > 0.0) {
        loc.push(raw.predicate.min_speedup.span(), "predicate.min_speedup", "must be a positive number");
    }
    for (field, v) in [
        ("predicate.min_geomean_speedup", &raw.predicate.min_geomean_speedup),
        ("predicate.min_compare_speedup", &raw.predicate.min_compare_speedup),
        ("predicate.min_compare_geomean", &raw.predicate.min_compare_geomean),
    ] {
        if let Some(g) = v {
            if !(g.get_ref().is_finite() && *g.get_ref() > 0.0) {
                loc.push(g.span(), field, "must be a positive number");
            }
        }
    }
    let mut scenario_thresholds = BTreeMap::new();
    for (name, t) in &raw.predicate.scenarios {
        if !raw.harness.scenarios.get_ref().iter().any(|s| s.get_ref() == name) {
            loc.push(
                t.span(),
                &format!("predicate.scenarios.{name}"),
                format!("`{name}` is not one of the scenarios listed in [harness] scenarios"),
            );
        }
        let inner = t.get_ref();
        for (key, v) in [("min_speedup", &inner.min_speedup), ("min_compare_speedup", &inner.min_compare_speedup)] {
            if let Some(v) = v {
                if !(v.get_ref().is_finite() && *v.get_ref() > 0.0) {
                    loc.push(v.span(), &format!("predicate.scenarios.{name}.{key}"), "must be a positive number");
                }
            }
        }
        scenario_thresholds.insert(
            name.clone(),
            ScenarioThresholds {
                min_speedup: inner.min_speedup.as_ref().map(|v| *v.get_ref()),
                min_compare_speedup: inner.min_compare_speedup.as_ref().map(|v| *v.get_ref()),
            },
        );
    }
    let sandbox = match &raw.harness.sandbox {
        None => SandboxMode::None,
        Some(m) => match m.get_ref().as_str() {
            "none" => SandboxMode::None,
            "bwrap" => SandboxMode::Bwrap,
            "auto" => SandboxMode::Auto,
            other => {
                loc.push(
                    m.span(),
                    "harness.sandbox",
                    format!("unknown sandbox `{other}`; expected none, bwrap or auto"),
                );
                SandboxMode::None
            }
        },
    };
    let mode = match &raw.questions.mode {
        None => Mode::Autonomous,
        Some(m) => match m.get_ref().as_str() {
            "autonomous" => Mode::Autonomous,
            "human" => Mode::Human,
            "audit" => Mode::Audit,
            other => {
                loc.push(
                    m.span(),
                    "questions.mode",
                    format!("unknown mode `{other}`; expected autonomous, human or audit"),
                );
                Mode::Autonomous
            }
        },
    };
    let mut gate = GateSpec::default();
    if let Some(f) = &raw.gate.fail {
        match f.get_ref().as_str() {
            "closed" => gate.fail_closed = true,
            "open" => gate.fail_closed = false,
            other => loc.push(f.span(), "gate.fail", format!("unknown value `{other}`; expected closed or open")),
        }
    }
    if let Some(n) = &raw.gate.unavailable_blocks {
        match u32::try_from(*n.get_ref()) {
            Ok(v) if (1..=1000).contains(&v) => gate.unavailable_blocks = v,
            _ => loc.push(n.span(), "gate.unavailable_blocks", "must be between 1 and 1000"),
        }
    }
    if let Some(n) = &raw.gate.stop_timeout_s {
        match u32::try_from(*n.get_ref()) {
            Ok(v) if (5..=86_400).contains(&v) => gate.stop_timeout_s = v,
            _ => loc.push(
                n.span(),
                "gate.stop_timeout_s",
                "must be between 5 and 86400 seconds (the Stop hook's timeout in the agent's settings)",
            ),
        }
    }
    let mut hooks = HooksSpec::default();
    if let Some(t) = &raw.hooks.transport {
        match t.get_ref().as_str() {
            "command" => hooks.http = false,
            "http" => hooks.http = true,
            other => {
                loc.push(t.span(), "hooks.transport", format!("unknown value `{other}`; expected command or http"))
            }
        }
    }
    if let Some(a) = &raw.architecture {
        if a.get_ref().trim().is_empty() {
            loc.push(a.span(), "architecture", "must not be empty when given");
        }
    }
    if !loc.errors.is_empty() {
        return Err(SpecErrors(loc.errors));
    }

    let mut extra = serde_json::Map::new();
    for (key, table) in [("moments", raw.moments), ("agent", raw.agent), ("beam", raw.beam)] {
        if let Some(t) = table {
            if let Ok(v) = serde_json::to_value(t) {
                extra.insert(key.to_string(), v);
            }
        }
    }
    Ok(CampaignSpec {
        name: raw.name.into_inner(),
        workspace,
        goal: raw.goal,
        architecture: raw.architecture.map(|a| a.into_inner()),
        comparison: raw.comparison,
        domains: raw.domains,
        harness: HarnessSpec {
            build: raw.harness.build.filter(|b| !b.trim().is_empty()),
            run: raw.harness.run.into_inner(),
            timeout_s: timeout as u64,
            scenarios,
            protected: raw.harness.protected.into_iter().map(Spanned::into_inner).collect(),
            candidate: raw
                .harness
                .candidate
                .map(|c| c.into_inner().into_iter().map(Spanned::into_inner).collect())
                .unwrap_or_default(),
            tags,
            sandbox,
        },
        constraints: ConstraintsSpec {
            binary: raw.constraints.binary.map(Spanned::into_inner),
            banned_symbols: raw.constraints.banned_symbols.into_iter().map(Spanned::into_inner).collect(),
        },
        predicate: PredicateSpec {
            correct: raw.predicate.correct,
            min_speedup,
            min_geomean_speedup: raw.predicate.min_geomean_speedup.map(Spanned::into_inner),
            min_compare_speedup: raw.predicate.min_compare_speedup.map(Spanned::into_inner),
            min_compare_geomean: raw.predicate.min_compare_geomean.map(Spanned::into_inner),
            scenarios: scenario_thresholds,
        },
        mode,
        gate,
        hooks,
        extra,
    })
}

/// The dotted name of the key at `offset` (`predicate.min_speedup`): the
/// key written on that line under the nearest table header above it, or the
/// header itself joined with `named` (the key serde's message names).
pub(crate) fn field_at(text: &str, offset: usize, named: Option<String>) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = text[line_start..line_end].trim();
    let header_of = |l: &str| {
        let l = l.trim();
        (l.starts_with('[') && !l.starts_with("[["))
            .then(|| l.trim_matches(|c| c == '[' || c == ']').trim().to_string())
    };
    if let Some(h) = header_of(line) {
        return match named {
            Some(n) => format!("{h}.{n}"),
            None => h,
        };
    }
    let key = match line.split_once('=') {
        Some((k, _)) => k.trim().trim_matches('"').to_string(),
        None if named.is_some() => return named.unwrap_or_default(),
        // A line inside a value written over several lines (an array, a
        // multi-line string): the entry is the nearest key above it.
        None => match text[..line_start].lines().rev().find(|l| l.contains('=') || header_of(l).is_some()) {
            Some(l) if header_of(l).is_none() => l.split('=').next().unwrap_or("").trim().trim_matches('"').to_string(),
            _ => return String::new(),
        },
    };
    let table = text[..line_start].lines().rev().find_map(header_of);
    match table {
        Some(t) => format!("{t}.{key}"),
        None => key,
    }
}

/// The TOML parser's message on one line ("invalid string\nexpected ..."
/// becomes "invalid string; expected ..."); it gives none for a value cut
/// off by the end of the text.
fn toml_message(message: &str, at_end: bool) -> String {
    let parts: Vec<&str> = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    match (parts.is_empty(), at_end) {
        (false, _) => parts.join("; "),
        (true, true) => "the text ends in the middle of an entry: a value is missing".to_string(),
        (true, false) => "invalid TOML here".to_string(),
    }
}

/// The dotted name of a field a table misses: serde names the field and
/// points at the table (`[harness]`, `harness = { ... }`, the `harness` of
/// `harness.build = ...`), or for the root table at its keys from the start
/// of the text (or nowhere).
fn missing_field(text: &str, span: std::ops::Range<usize>, name: String) -> String {
    let written = text.get(span.clone()).unwrap_or("");
    if span == (0..0) || (span.start == 0 && written.contains('=') && !written.starts_with('[')) {
        return name;
    }
    let mut table = field_at(text, span.start, None);
    if !written.is_empty() {
        if let Some(i) = table.find(&format!("{written}.")) {
            table.truncate(i + written.len());
        }
    }
    if table.is_empty() {
        name
    } else {
        format!("{table}.{name}")
    }
}

/// Pulls a field name out of serde's messages ("missing field `run`",
/// "unknown field `foo`, expected ..."); other messages quote values
/// ("invalid type: integer `16`"), not fields.
fn field_from_message(message: &str) -> Option<String> {
    if !["missing field `", "unknown field `", "duplicate field `"].iter().any(|p| message.starts_with(p)) {
        return None;
    }
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(message[start..end].to_string())
}

fn is_git_work_tree(dir: &Path) -> bool {
    // The workspace's repository is the agent's: hardened like every git
    // call of the daemon on it (no hooks, fsmonitor or global config).
    crate::snapshot::hardened_git(&std::env::temp_dir().join("gadfly-no-home"))
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--is-inside-work-tree"])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "true")
        .unwrap_or(false)
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_globs_are_checked_and_a_missing_candidate_warns() {
        let dir = git_dir();
        let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
        assert!(spec.harness.candidate.is_empty());
        assert!(warnings(&spec).iter().any(|w| w.contains("candidate")), "{:?}", warnings(&spec));
        let with = GOOD.replace("protected = [", "candidate = [\"kernel/**\", \"*.cu\"]\nprotected = [");
        let spec = parse(&with, "c.toml", dir.path()).unwrap();
        assert_eq!(spec.harness.candidate, vec!["kernel/**", "*.cu"]);
        assert!(warnings(&spec).is_empty());
        // A spec stored before `candidate` existed still loads.
        let mut v = serde_json::to_value(&spec).unwrap();
        v["harness"].as_object_mut().unwrap().remove("candidate");
        let old: CampaignSpec = serde_json::from_value(v).unwrap();
        assert!(old.harness.candidate.is_empty());
        let bad = GOOD.replace("protected = [", "candidate = [\"a/[\"]\nprotected = [");
        let e = parse(&bad, "c.toml", dir.path()).unwrap_err().to_string();
        assert!(e.contains("c.toml:") && e.contains("harness.candidate") && e.contains("invalid glob"), "{e}");
        let empty = GOOD.replace("protected = [", "candidate = []\nprotected = [");
        let e = parse(&empty, "c.toml", dir.path()).unwrap_err().to_string();
        assert!(e.contains("harness.candidate"), "{e}");
    }

    fn git_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let ok =
            std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap().success();
        assert!(ok);
        dir
    }

    const GOOD: &str = r#"
name = "t"
workspace = "."
[harness]
run = "sh run.sh {results}"
scenarios = ["a", "b"]
protected = ["harness/**"]
[constraints]
binary = "libk.so"
banned_symbols = ["cublas"]
[predicate]
min_speedup = 1.1
min_geomean_speedup = 1.2
[questions]
mode = "audit"
"#;

    #[test]
    fn the_stop_timeout_is_read_checked_and_defaulted_for_stored_specs() {
        let dir = git_dir();
        let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
        assert_eq!(spec.gate.stop_timeout_s, 600);
        let with = format!("{GOOD}[gate]\nstop_timeout_s = 25\n");
        let spec = parse(&with, "c.toml", dir.path()).unwrap();
        assert_eq!(spec.gate.stop_timeout_s, 25);
        assert_eq!(spec.gate.stop_deadline_s(), 22.5);
        let bad = format!("{GOOD}[gate]\nstop_timeout_s = 2\n");
        let e = parse(&bad, "c.toml", dir.path()).unwrap_err().to_string();
        assert!(e.contains("c.toml:") && e.contains("gate.stop_timeout_s"), "{e}");
        // A spec stored before the key existed still loads, with the default.
        let mut v = serde_json::to_value(&spec).unwrap();
        v["gate"].as_object_mut().unwrap().remove("stop_timeout_s");
        let old: CampaignSpec = serde_json::from_value(v).unwrap();
        assert_eq!(old.gate.stop_timeout_s, 600);
    }

    #[test]
    fn parses_a_good_spec() {
        let dir = git_dir();
        let spec = parse(GOOD, "c.toml", dir.path()).unwrap();
        assert_eq!(spec.harness.scenarios, vec!["a", "b"]);
        assert_eq!(spec.mode, Mode::Audit);
        assert_eq!(spec.predicate.min_geomean_speedup, Some(1.2));
        assert_eq!(spec.harness.timeout_s, 600);
        assert!(spec.workspace.is_absolute());
    }

    #[test]
    fn the_comparison_goal_and_per_scenario_thresholds_are_parsed_and_located() {
        let dir = git_dir();
        let with = GOOD.replace(
            "[questions]",
            "min_compare_speedup = 1.0\nmin_compare_geomean = 1.13\n[predicate.scenarios.b]\nmin_speedup = 0.9\n\
             min_compare_speedup = 0.8\n[questions]",
        );
        let spec = parse(&with, "c.toml", dir.path()).unwrap();
        let p = &spec.predicate;
        assert_eq!((p.min_compare_speedup, p.min_compare_geomean), (Some(1.0), Some(1.13)));
        assert_eq!((p.min_speedup_for("a"), p.min_speedup_for("b")), (1.1, 0.9));
        assert_eq!((p.min_compare_speedup_for("a"), p.min_compare_speedup_for("b")), (Some(1.0), Some(0.8)));
        assert!(p.uses_comparison());
        // A stored spec from before these keys still loads, without them.
        let old = serde_json::json!({"correct": true, "min_speedup": 1.0, "min_geomean_speedup": null});
        let old: PredicateSpec = serde_json::from_value(old).unwrap();
        assert!(!old.uses_comparison() && old.scenarios.is_empty());
        // An unknown scenario, a bad number and an unknown key are located.
        let bad = GOOD.replace(
            "[questions]",
            "min_compare_speedup = 0\n[predicate.scenarios.zz]\nmin_speedup = 2.0\n[predicate.scenarios.a]\n\
             min_compare = 1.0\n[questions]",
        );
        let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
        let fields: Vec<(usize, &str)> = err.0.iter().map(|e| (e.line, e.field.as_str())).collect();
        assert!(fields.contains(&(18, "predicate.scenarios.a.min_compare")), "{err}");
        let bad = GOOD.replace(
            "[questions]",
            "min_compare_speedup = 0\n[predicate.scenarios.zz]\nmin_speedup = 2.0\n[questions]",
        );
        let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
        let fields: Vec<(usize, &str)> = err.0.iter().map(|e| (e.line, e.field.as_str())).collect();
        assert!(fields.contains(&(14, "predicate.min_compare_speedup")), "{err}");
        assert!(fields.iter().any(|f| f.1 == "predicate.scenarios.zz"), "{err}");
        assert!(err.to_string().contains("`zz` is not one of the scenarios"), "{err}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let dir = git_dir();
        let bad = GOOD.replace("min_speedup = 1.1", "min_speedup = -2.0");
        let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
        assert_eq!(err.0.len(), 1, "{err}");
        let e = &err.0[0];
        assert_eq!((e.file.as_str(), e.line, e.field.as_str()), ("c.toml", 12, "predicate.min_speedup"));
        assert!(err.to_string().starts_with("c.toml:12:"), "{err}");
    }

    #[test]
    fn unknown_and_missing_keys_are_located() {
        let dir = git_dir();
        let typo = GOOD.replace("min_speedup = 1.1", "min_sepedup = 1.1");
        let err = parse(&typo, "c.toml", dir.path()).unwrap_err();
        assert_eq!(err.0[0].line, 12, "{err}");
        assert_eq!(err.0[0].field, "predicate.min_sepedup");
        let missing = GOOD.replace("run = \"sh run.sh {results}\"\n", "");
        let err = parse(&missing, "c.toml", dir.path()).unwrap_err();
        assert_eq!(err.0[0].field, "harness.run", "{err}");
        let wrong_type = GOOD.replace("min_speedup = 1.1", "min_speedup = \"fast\"");
        let err = parse(&wrong_type, "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (12, "predicate.min_speedup"), "{err}");
    }

    #[test]
    fn reports_every_problem_at_once() {
        let dir = git_dir();
        let bad = GOOD
            .replace("{results}", "out.json")
            .replace("\"audit\"", "\"lazy\"")
            .replace("[\"a\", \"b\"]", "[\"a\", \"a\"]");
        let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
        let fields: Vec<&str> = err.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["harness.run", "harness.scenarios", "questions.mode"], "{err}");
    }

    #[test]
    fn harness_tags_are_strings_with_located_errors() {
        let dir = git_dir();
        let spec = parse(&GOOD.replace("protected =", "tags = { gpu = \"h200\" }\nprotected ="), "c.toml", dir.path())
            .unwrap();
        assert_eq!(spec.harness.tags.get("gpu").map(String::as_str), Some("h200"));
        assert!(parse(GOOD, "c.toml", dir.path()).unwrap().harness.tags.is_empty());
        let bad = GOOD.replace("protected =", "tags = { gpu = 200 }\nprotected =");
        let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (7, "harness.tags.gpu"), "{err}");
        assert!(err.0[0].message.contains("must be a string"), "{err}");
        // A spec stored before tags existed still loads.
        let mut old = serde_json::to_value(&spec).unwrap();
        old["harness"].as_object_mut().unwrap().remove("tags");
        let back: CampaignSpec = serde_json::from_value(old).unwrap();
        assert!(back.harness.tags.is_empty());
    }

    #[test]
    fn toml_errors_are_one_line_in_character_columns() {
        // Found by tests/fuzz_parsers.rs: a value cut off by the end of the
        // text had an empty message; columns counted bytes, past the end
        // of a line with non-ASCII text; messages spanned two lines; a
        // missing field was named after the key on the line it points at;
        // a date-time given as `tags` was reported as a private toml key;
        // a wrong value on a line of its own was named after the value.
        let dir = git_dir();
        let err = parse("a = \"Σ", "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].column), (1, 7), "{err}");
        let cut = GOOD.trim_end().trim_end_matches("\"audit\"");
        let err = parse(cut, "c.toml", dir.path()).unwrap_err();
        assert_eq!(err.0[0].message, "the text ends in the middle of an entry: a value is missing", "{err}");
        assert_eq!(err.0[0].field, "questions.mode", "{err}");
        let err = parse("a = tru\n", "c.toml", dir.path()).unwrap_err();
        assert!(!err.0[0].message.contains('\n') && !err.0[0].message.is_empty(), "{err}");
        let err =
            parse("workspace = \".\"\n[harness]\nrun = \"{results}\"\nscenarios = [\"a\"]\n", "c.toml", dir.path())
                .unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (1, "name"), "{err}");
        let err = parse("[harness]\nrun = \"{results}\"\n", "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (1, "harness.scenarios"), "{err}");
        let err = parse("name = \"t\"\nworkspace = \".\"\nharness = { run = \"{results}\" }\n", "c.toml", dir.path())
            .unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (3, "harness.scenarios"), "{err}");
        let err =
            parse("name = \"t\"\nworkspace = \".\"\nharness.run = \"{results}\"\n", "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (3, "harness.scenarios"), "{err}");
        let spread = GOOD.replace("[\"a\", \"b\"]", "[\n  \"a\",\n  0x10,\n]");
        let err = parse(&spread, "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (8, "harness.scenarios"), "{err}");
        let dated = GOOD.replace("protected =", "tags = 1979-05-27T07:32:00Z\nprotected =");
        let err = parse(&dated, "c.toml", dir.path()).unwrap_err();
        assert_eq!((err.0[0].line, err.0[0].field.as_str()), (7, "harness.tags"), "{err}");
        assert!(err.0[0].message.ends_with("not a date-time"), "{err}");
        let bad = GOOD.replace("[\"a\", \"b\"]", "[\"a\\nb\", \"a\\nb\"]");
        let err = parse(&bad, "c.toml", dir.path()).unwrap_err();
        assert_eq!(err.0[0].message, "scenario `a\\nb` is listed twice", "{err}");
    }

    #[test]
    fn workspace_must_be_a_git_repository() {
        let dir = tempfile::tempdir().unwrap();
        let err = parse(GOOD, "c.toml", dir.path()).unwrap_err();
        assert_eq!(err.0[0].field, "workspace");
        assert!(err.0[0].message.contains("not a git repository"));
        assert_eq!(err.0[0].line, 3);
    }
}
