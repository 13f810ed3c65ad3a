//! Parsing a campaign spec's TOML into the resolved form, with errors
//! that name the file, line and field.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{
    is_git_work_tree, valid_tag, CampaignSpec, ConstraintsSpec, GateSpec, HarnessSpec, HooksSpec, Mode, PredicateSpec,
    SandboxMode, ScenarioThresholds, SpecError, SpecErrors,
};

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
    device: Option<Spanned<String>>,
    #[serde(default)]
    optimizes: Option<Spanned<String>>,
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
    #[serde(default)]
    notify: RawNotify,
    #[serde(default)]
    replay: RawReplay,
    #[serde(default)]
    redteam: super::sections::RawRedteam,
    #[serde(default)]
    calibration: super::sections::RawCalibration,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReplay {
    #[serde(default)]
    evaluation: Option<Spanned<String>>,
}

/// `[notify]` as written (see `super::notify`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotify {
    #[serde(default)]
    webhooks: Vec<Spanned<RawWebhook>>,
    #[serde(default)]
    block_streak: Option<Spanned<i64>>,
    #[serde(default)]
    console_url: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhook {
    url: Spanned<String>,
    events: Spanned<Vec<String>>,
    secret_env: Spanned<String>,
    #[serde(default)]
    max_attempts: Option<Spanned<i64>>,
    #[serde(default)]
    timeout_s: Option<Spanned<i64>>,
}

/// The `[agent]` budgets read a second time, with their places in the
/// text (the section itself is kept as written, for `agent::AgentSpec`).
#[derive(Debug, Default, Deserialize)]
struct RawAgentBudgets {
    #[serde(default)]
    agent: Option<RawBudgets>,
}

#[derive(Debug, Default, Deserialize)]
struct RawBudgets {
    #[serde(default)]
    max_tokens: Option<Spanned<toml::Value>>,
    #[serde(default)]
    max_cost_usd: Option<Spanned<toml::Value>>,
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
    #[serde(default)]
    remind_after_blocks: Option<Spanned<i64>>,
    #[serde(default)]
    against_best: Option<bool>,
    #[serde(default)]
    hold_gain: Option<Spanned<f64>>,
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
    /// Folders a sandboxed build and harness may read besides the system's.
    #[serde(default)]
    readable: Vec<Spanned<String>>,
    /// The harness draws fresh inputs on every run from a secret seed of
    /// its own, so `run` needs no `{seed}` (no warning).
    #[serde(default)]
    fresh_inputs: bool,
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
    #[serde(default)]
    noise: Option<Spanned<f64>>,
    #[serde(default)]
    noise_unknown: Option<Spanned<f64>>,
    #[serde(default)]
    remeasure: Option<Spanned<i64>>,
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
            noise: None,
            noise_unknown: None,
            remeasure: None,
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
    #[serde(default)]
    withhold: Option<Spanned<toml::Value>>,
    #[serde(default)]
    answer_within_turns: Option<Spanned<i64>>,
}

/// `[questions] withhold` when the spec does not say: off. Withholding is
/// a choice a campaign makes (0.1, one moment in ten, gives a base rate
/// over a long campaign at a small cost in questions): by default every
/// moment gets its question, so that what gadfly asks stays predictable
/// from the record (`gadfly replay` under seed 0 draws the same moments a
/// campaign withheld, so it agrees with the live campaign either way).
pub const DEFAULT_WITHHOLD: f64 = 0.0;

pub(super) struct Locator<'a> {
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

    pub(super) fn push(&mut self, span: std::ops::Range<usize>, field: &str, message: impl Into<String>) {
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

/// Parses and validates spec text. `file` names the source in errors;
/// `base` is the folder the workspace is relative to.
pub fn parse(text: &str, file: &str, base: &Path) -> Result<CampaignSpec, SpecErrors> {
    parse_checked(text, file, base, true)
}

/// [`parse`], except that the workspace need not exist: the spec as
/// `gadfly replay` reads it, judging a recorded session with no workspace
/// to evaluate.
pub fn parse_detached(text: &str, file: &str, base: &Path) -> Result<CampaignSpec, SpecErrors> {
    parse_checked(text, file, base, false)
}

fn parse_checked(text: &str, file: &str, base: &Path, check_workspace: bool) -> Result<CampaignSpec, SpecErrors> {
    let mut loc = Locator { file, text, errors: Vec::new() };
    let raw: RawSpec = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            let message = toml_message(e.message(), span.start >= text.len());
            let (field, message) = match field_from_message(&message) {
                Some(name) if message.starts_with("missing field") => {
                    (missing_field(text, span.clone(), name), message)
                }
                named => match super::suggest::unknown_name(text, &span, &message) {
                    Some(told) => told,
                    None => (field_at(text, span.start, named), message),
                },
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
    if !check_workspace {
        // Read for the record only.
    } else if !workspace.is_dir() {
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
        if check_workspace && workspace.is_dir() {
            super::sections::check_candidate_matches(&mut loc, &workspace, c.get_ref());
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
    for (field, v) in
        [("predicate.noise", &raw.predicate.noise), ("predicate.noise_unknown", &raw.predicate.noise_unknown)]
    {
        if let Some(g) = v {
            if !(g.get_ref().is_finite() && (0.0..0.5).contains(g.get_ref())) {
                loc.push(g.span(), field, "must be a relative uncertainty at least 0 and below 0.5 (0.01 is 1%)");
            }
        }
    }
    if let Some(r) = &raw.predicate.remeasure {
        if !(0..=10).contains(r.get_ref()) {
            loc.push(r.span(), "predicate.remeasure", "must be a whole number from 0 to 10");
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
        None => SandboxMode::Bwrap,
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
    let mut readable = Vec::new();
    for r in &raw.harness.readable {
        let path = r.get_ref();
        if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
            loc.push(r.span(), "harness.readable", format!("`{path}` must be an absolute path without `..`"));
        } else {
            readable.push(path.clone());
        }
    }
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
    let mut questions = super::QuestionsSpec::default();
    if let Some(n) = &raw.questions.answer_within_turns {
        match u32::try_from(*n.get_ref()) {
            Ok(v) if v <= 1000 => questions.answer_within_turns = v,
            _ => loc.push(
                n.span(),
                "questions.answer_within_turns",
                "must be between 0 (never ask again) and 1000 turns",
            ),
        }
    }
    let withhold = match &raw.questions.withhold {
        None => DEFAULT_WITHHOLD,
        Some(v) => {
            let share = match v.get_ref() {
                toml::Value::Integer(n) => Some(*n as f64),
                toml::Value::Float(x) => Some(*x),
                _ => None,
            };
            match share {
                Some(x) if x.is_finite() && (0.0..=1.0).contains(&x) => x,
                _ => {
                    loc.push(
                        v.span(),
                        "questions.withhold",
                        "must be a share of moments between 0 and 1 (0.1 leaves one moment in ten without a question; 0 turns it off)",
                    );
                    DEFAULT_WITHHOLD
                }
            }
        }
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
    if let Some(n) = &raw.gate.remind_after_blocks {
        match u32::try_from(*n.get_ref()) {
            Ok(v) if (1..=1000).contains(&v) => gate.remind_after_blocks = v,
            _ => loc.push(n.span(), "gate.remind_after_blocks", "must be between 1 and 1000"),
        }
    }
    if let Some(b) = raw.gate.against_best {
        gate.against_best = b;
    }
    if let Some(h) = &raw.gate.hold_gain {
        let v = *h.get_ref();
        if v.is_finite() && (v == 0.0 || v > 1.0) {
            gate.hold_gain = v;
        } else {
            loc.push(h.span(), "gate.hold_gain", "must be 0 (off) or a factor above 1, such as 30");
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
        } else if super::canonical_architecture(a.get_ref()).is_none() {
            loc.push(
                a.span(),
                "architecture",
                format!("unknown architecture `{}`; expected one of {}", a.get_ref(), super::architecture_names()),
            );
        }
    }
    if let Some(d) = &raw.device {
        if !super::DEVICES.contains(&d.get_ref().as_str()) {
            loc.push(
                d.span(),
                "device",
                format!("unknown device `{}`; expected one of {}", d.get_ref(), super::DEVICES.join(", ")),
            );
        } else if let Some(implied) = raw.architecture.as_ref().and_then(|a| super::device_of(a.get_ref())) {
            if implied != d.get_ref() {
                loc.push(d.span(), "device", format!("`{}` contradicts the architecture, a {implied}", d.get_ref()));
            }
        }
    }
    if let Some(o) = &raw.optimizes {
        if !super::OPTIMIZES.contains(&o.get_ref().as_str()) {
            loc.push(
                o.span(),
                "optimizes",
                format!("unknown target `{}`; expected one of {}", o.get_ref(), super::OPTIMIZES.join(", ")),
            );
        }
    }
    if let Some(p) = &raw.replay.evaluation {
        if let Err(why) = super::check_replay_pattern(p.get_ref()) {
            loc.push(p.span(), "replay.evaluation", why);
        }
    }
    check_budgets(&mut loc, text);
    let notify = notify_section(&mut loc, raw.notify);
    let calibration = super::sections::calibration(&mut loc, &raw.calibration);
    let redteam = super::sections::redteam(&mut loc, raw.redteam);
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
        architecture: raw
            .architecture
            .map(|a| super::canonical_architecture(a.get_ref()).map_or_else(|| a.into_inner(), str::to_string)),
        device: raw.device.map(Spanned::into_inner),
        optimizes: raw.optimizes.map(Spanned::into_inner),
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
            readable,
            fresh_inputs: raw.harness.fresh_inputs,
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
            noise: raw.predicate.noise.map_or_else(super::default_noise, Spanned::into_inner),
            noise_unknown: raw.predicate.noise_unknown.map_or_else(super::default_noise_unknown, Spanned::into_inner),
            remeasure: raw
                .predicate
                .remeasure
                .map_or_else(super::default_remeasure, |r| r.into_inner().clamp(0, 10) as u32),
            calibrated: BTreeMap::new(),
        },
        mode,
        withhold,
        gate,
        hooks,
        extra,
        notify,
        replay: super::ReplaySpec { evaluation: raw.replay.evaluation.map(Spanned::into_inner) },
        redteam,
        calibration,
        questions,
    })
}

/// `[agent] max_tokens` and `max_cost_usd`: a whole number of tokens, a
/// positive amount of US dollars.
fn check_budgets(loc: &mut Locator, text: &str) {
    let Ok(raw) = toml::from_str::<RawAgentBudgets>(text) else { return };
    let Some(b) = raw.agent else { return };
    if let Some(v) = &b.max_tokens {
        if !matches!(v.get_ref(), toml::Value::Integer(n) if *n >= 1) {
            loc.push(v.span(), "agent.max_tokens", "must be a whole number of tokens, at least 1");
        }
    }
    if let Some(v) = &b.max_cost_usd {
        let ok = match v.get_ref() {
            toml::Value::Integer(n) => *n > 0,
            toml::Value::Float(x) => x.is_finite() && *x > 0.0,
            _ => false,
        };
        if !ok {
            loc.push(v.span(), "agent.max_cost_usd", "must be a positive amount of US dollars (e.g. 25 or 2.5)");
        }
    }
}

/// `[notify]`, checked field by field where it is written.
fn notify_section(loc: &mut Locator, raw: RawNotify) -> super::NotifySpec {
    use super::notify::{check_env_name, check_events, check_url, default_attempts, default_timeout};
    let mut out = super::NotifySpec::default();
    if let Some(n) = &raw.block_streak {
        match u32::try_from(*n.get_ref()) {
            Ok(v) if (1..=1000).contains(&v) => out.block_streak = v,
            _ => loc.push(n.span(), "notify.block_streak", "must be between 1 and 1000"),
        }
    }
    if let Some(u) = &raw.console_url {
        if let Err(e) = check_url(u.get_ref()) {
            loc.push(u.span(), "notify.console_url", e);
        }
        out.console_url = Some(u.get_ref().clone());
    }
    if raw.webhooks.len() > super::MAX_WEBHOOKS {
        let span = raw.webhooks[super::MAX_WEBHOOKS].span();
        loc.push(span, "notify.webhooks", format!("at most {} webhooks", super::MAX_WEBHOOKS));
    }
    for (i, w) in raw.webhooks.into_iter().enumerate() {
        let w = w.into_inner();
        let f = |k: &str| format!("notify.webhooks[{i}].{k}");
        if let Err(e) = check_url(w.url.get_ref()) {
            loc.push(w.url.span(), &f("url"), e);
        }
        if let Err(e) = check_events(w.events.get_ref()) {
            loc.push(w.events.span(), &f("events"), e);
        }
        if let Err(e) = check_env_name(w.secret_env.get_ref()) {
            loc.push(w.secret_env.span(), &f("secret_env"), e);
        }
        let mut number = |v: &Option<Spanned<i64>>, key: &str, max: u32, default: u32, unit: &str| match v {
            None => default,
            Some(n) => match u32::try_from(*n.get_ref()) {
                Ok(x) if (1..=max).contains(&x) => x,
                _ => {
                    loc.push(n.span(), &f(key), format!("must be between 1 and {max}{unit}"));
                    default
                }
            },
        };
        let max_attempts = number(&w.max_attempts, "max_attempts", 20, default_attempts(), "");
        let timeout_s = number(&w.timeout_s, "timeout_s", 300, default_timeout(), " seconds");
        out.webhooks.push(super::WebhookSpec {
            url: w.url.into_inner(),
            events: w.events.into_inner(),
            secret_env: w.secret_env.into_inner(),
            max_attempts,
            timeout_s,
        });
    }
    out
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
