//! `gadfly redteam`: a battery of adversarial candidates, each a real
//! source file kept in the repository (`redteam/`, and the CUDA harness's
//! exploits in `harness/cuda/exploits/`) with a manifest that says what it
//! tries, which trick family it belongs to, how it is applied to a
//! campaign's candidate, what a sound harness does with it and which check
//! to add when it breaks one.
//!
//! This module is the pure part: the battery (embedded in the binary) and
//! its manifests ([`manifest`]), whether an attack applies to a campaign
//! and the files it writes ([`plan`]), and what an attack's evaluation says
//! about the harness ([`judge`]), gathered into a [`Report`]. Running the
//! attacks, each in a throwaway copy of the workspace through the
//! campaign's own evaluation pipeline, is the application's
//! (`app/redteam.rs`).

use std::sync::LazyLock;

use include_dir::{include_dir, Dir};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::campaign::CampaignSpec;

pub mod exported;
pub mod judge;
pub mod manifest;
pub mod plan;

pub use judge::{evidence, expected_reason, judge, Evidence, Outcome};
pub use manifest::{Apply, Manifest, ManifestError};
pub use plan::{
    forged_results, language_of, languages, outside_candidate, plan, CandidateFile, Context, FileWrite, HostFacts,
    Plan, Setup, FORGED_TIME_US,
};

static BATTERY_DIR: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/redteam");
static EXPLOITS_DIR: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/harness/cuda/exploits");

/// One attack of the battery: its manifest and its sources, read.
#[derive(Debug, Clone)]
pub struct Attack {
    /// The manifest's path in the repository (`redteam/c/01_forge_atexit_env.toml`).
    pub id: String,
    pub manifest: Manifest,
    /// The manifest's sources, concatenated.
    pub source: String,
    /// Each extra file's sources, concatenated, in the manifest's order.
    pub file_sources: Vec<String>,
    /// The `per_function` sources, concatenated (`wrap_exported`).
    pub per_function_source: String,
}

/// The whole battery, in order (folder, then file name).
#[derive(Debug, Clone)]
pub struct Battery {
    pub attacks: Vec<Attack>,
    /// A digest of every manifest and source: a report names the battery
    /// it ran.
    pub version: String,
}

/// Resolves `rel` against the folder `dir` (both repository paths with
/// `/`), `..` climbing out: `redteam/cuda` + `../../harness/x` is `harness/x`.
pub fn resolve(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Builds a battery from manifests (repository path, text) and a reader of
/// source files by repository path. Errors name the file (and for a
/// manifest, the line and field).
pub fn load(manifests: &[(String, String)], read: &dyn Fn(&str) -> Option<String>) -> Result<Battery, Vec<String>> {
    let mut errors = Vec::new();
    let mut attacks = Vec::new();
    let mut digest = Sha256::new();
    let mut names = std::collections::BTreeSet::new();
    for (path, text) in manifests {
        digest.update(path.as_bytes());
        digest.update(text.as_bytes());
        let m = match manifest::parse(text, path) {
            Ok(m) => m,
            Err(es) => {
                errors.extend(es.iter().map(|e| e.to_string()));
                continue;
            }
        };
        if !names.insert(m.name.clone()) {
            errors.push(format!("{path}: attack name `{}` is used twice", m.name));
        }
        let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
        let mut read_all = |sources: &[String]| -> String {
            let mut out = String::new();
            for s in sources {
                match resolve(dir, s).and_then(|p| read(&p).map(|t| (p, t))) {
                    Some((p, t)) => {
                        digest.update(p.as_bytes());
                        digest.update(t.as_bytes());
                        out.push_str(&t);
                    }
                    None => errors.push(format!("{path}: source `{s}` not found")),
                }
            }
            out
        };
        let source = read_all(&m.sources);
        let file_sources = m.files.iter().map(|f| read_all(&f.sources)).collect();
        let per_function_source = read_all(&m.per_function);
        attacks.push(Attack { id: path.clone(), manifest: m, source, file_sources, per_function_source });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Battery { attacks, version: hex::encode(&digest.finalize()[..8]) })
}

/// Every manifest embedded under `redteam/`, sorted by path.
fn embedded_manifests() -> Vec<(String, String)> {
    fn walk(dir: &'static Dir<'static>, out: &mut Vec<(String, String)>) {
        for f in dir.files() {
            if f.path().extension().is_some_and(|e| e == "toml") {
                let text = String::from_utf8_lossy(f.contents()).into_owned();
                out.push((format!("redteam/{}", f.path().display()), text));
            }
        }
        for d in dir.dirs() {
            walk(d, out);
        }
    }
    let mut out = Vec::new();
    walk(&BATTERY_DIR, &mut out);
    out.sort();
    out
}

/// A file of the embedded battery or of the CUDA exploits, by repository path.
fn embedded_file(path: &str) -> Option<String> {
    let file = if let Some(rel) = path.strip_prefix("redteam/") {
        BATTERY_DIR.get_file(rel)
    } else if let Some(rel) = path.strip_prefix("harness/cuda/exploits/") {
        EXPLOITS_DIR.get_file(rel)
    } else {
        None
    };
    file.map(|f| String::from_utf8_lossy(f.contents()).into_owned())
}

/// The battery built into this binary (parsed once; an error is a bug the
/// unit tests catch).
pub fn battery() -> Result<&'static Battery, String> {
    static BATTERY: LazyLock<Result<Battery, String>> =
        LazyLock::new(|| load(&embedded_manifests(), &embedded_file).map_err(|e| e.join("\n")));
    BATTERY.as_ref().map_err(Clone::clone)
}

/// The battery a campaign runs: the one built into gadfly, then the
/// campaign's own attacks (`[redteam] attacks`: manifests in `workspace`
/// matched by those globs, their sources read beside them). Errors name the
/// file (and for a manifest its line and field); a glob that matches no
/// manifest is one.
pub fn battery_for(spec: &CampaignSpec) -> Result<Battery, String> {
    let builtin = battery()?;
    if spec.redteam.attacks.is_empty() {
        return Ok(builtin.clone());
    }
    let ws = &spec.workspace;
    let mut manifests = Vec::new();
    let mut errors = Vec::new();
    for g in &spec.redteam.attacks {
        let m = match globset::GlobBuilder::new(g).literal_separator(true).build() {
            Ok(g) => g.compile_matcher(),
            Err(e) => {
                errors.push(format!("[redteam] attacks `{g}`: {e}"));
                continue;
            }
        };
        let mut found = 0;
        let walk = walkdir::WalkDir::new(ws).sort_by_file_name().into_iter().filter_entry(|e| e.file_name() != ".git");
        for entry in walk.flatten().filter(|e| e.file_type().is_file()) {
            let Ok(rel) = entry.path().strip_prefix(ws) else { continue };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if rel.ends_with(".toml") && m.is_match(&rel) && !manifests.iter().any(|(p, _)| p == &rel) {
                match std::fs::read_to_string(entry.path()) {
                    Ok(text) => manifests.push((rel, text)),
                    Err(e) => errors.push(format!("{rel}: {e}")),
                }
                found += 1;
            }
        }
        if found == 0 {
            errors.push(format!("[redteam] attacks `{g}` matches no manifest (.toml) in the workspace"));
        }
    }
    let read = |p: &str| std::fs::read_to_string(ws.join(p)).ok();
    let own = match load(&manifests, &read) {
        Ok(b) => Some(b),
        Err(es) => {
            errors.extend(es);
            None
        }
    };
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    let own = own.expect("loaded when there is no error");
    let mut attacks = builtin.attacks.clone();
    for a in own.attacks {
        if attacks.iter().any(|b| b.manifest.name == a.manifest.name) {
            return Err(format!("{}: attack name `{}` is the battery's own; name it otherwise", a.id, a.manifest.name));
        }
        attacks.push(a);
    }
    let version = hex::encode(&Sha256::digest(format!("{}+{}", builtin.version, own.version).as_bytes())[..8]);
    Ok(Battery { attacks, version })
}

/// A digest of what judges a candidate: the spec's harness, constraints
/// and predicate, and gadfly's pristine copies of the protected files
/// (path and sha256 each). A report is current while these are unchanged.
pub fn harness_key(spec: &CampaignSpec, pristine: &[(String, String)]) -> String {
    let mut d = Sha256::new();
    let judged =
        serde_json::json!({"harness": spec.harness, "constraints": spec.constraints, "predicate": spec.predicate});
    d.update(judged.to_string().as_bytes());
    for (p, h) in pristine {
        d.update(p.as_bytes());
        d.update(b"\0");
        d.update(h.as_bytes());
        d.update(b"\n");
    }
    hex::encode(&d.finalize()[..12])
}

/// One attack's line of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttackResult {
    pub name: String,
    pub family: String,
    pub tries: String,
    pub trick: String,
    /// The manifest's path in the repository.
    pub source: String,
    /// How it was applied ("appended to kernel/qr.c"); empty when it was not.
    #[serde(default)]
    pub applied: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The check to add: given for a broken attack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// Whether a held attack was caught for the reason its manifest
    /// expects (see [`Manifest::expect_reason`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_reason: Option<bool>,
    pub duration_ms: u64,
    /// The languages the attack is written for (`any` for every one).
    #[serde(default)]
    pub languages: Vec<String>,
}

impl AttackResult {
    /// The result of an attack that came to `outcome`.
    pub fn new(attack: &Attack, applied: String, outcome: Outcome, evidence: Option<Evidence>) -> AttackResult {
        let m = &attack.manifest;
        AttackResult {
            name: m.name.clone(),
            family: m.family.clone(),
            tries: m.tries.clone(),
            trick: m.trick.clone(),
            source: attack.id.clone(),
            applied,
            suggestion: matches!(outcome, Outcome::Broken { .. }).then(|| m.suggestion.clone()),
            duration_ms: evidence.as_ref().map(|e| e.duration_ms).unwrap_or(0),
            evidence,
            expected_reason: None,
            languages: m.languages.clone(),
            outcome: judge::generated(m, outcome),
        }
    }
}

/// How a battery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every applicable attack held.
    Held,
    /// At least one attack broke the harness.
    Broken,
    /// Every attack that applied held, but too few applied to say much of
    /// the harness (see [`Coverage`]), and the spec does not accept it.
    LowCoverage,
    /// The battery could not judge the harness (see `error`).
    Error,
}

/// A red-team report: the control (the candidate as it is) and every
/// attack's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// This battery run's id.
    pub id: String,
    pub campaign: String,
    pub campaign_name: String,
    /// Why it ran: `api` (`gadfly redteam`, the console's button) or `run start`
    /// (`[redteam] before_start`).
    pub why: String,
    pub started_at: String,
    pub finished_at: String,
    /// The battery's digest and the harness's (see [`harness_key`]).
    pub battery: String,
    pub harness: String,
    /// The candidate's languages, as the battery saw them.
    pub languages: Vec<String>,
    pub status: Status,
    /// Why the battery could not judge the harness (status `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The evaluation of the unchanged candidate.
    pub control: Option<Evidence>,
    pub attacks: Vec<AttackResult>,
    pub held: usize,
    pub broken: usize,
    pub not_applicable: usize,
    pub errors: usize,
    /// How much of the battery written for the candidate's languages could
    /// be tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    /// `[redteam] accept_low_coverage`: a low coverage does not fail the
    /// report.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_low_coverage: bool,
}

/// The trick families a battery must reach for its "held" to mean much:
/// a harness no output-caching attack could be tried on was not tested
/// against the commonest trick.
pub const CORE_FAMILIES: &[&str] = &["output-caching"];

/// How much of the battery applied to a campaign.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Attacks written for one of the candidate's languages (or any).
    pub for_languages: usize,
    /// Of those, the ones that applied (held, broken or an error).
    pub applied: usize,
    /// The trick families tried, and the core ones ([`CORE_FAMILIES`]) not tried.
    pub families: Vec<String>,
    pub core_missing: Vec<String>,
    /// Fewer than half applied, or a core family was not tried.
    pub low: bool,
}

impl Coverage {
    /// The coverage of `attacks` on a candidate in `languages`.
    pub fn of(attacks: &[AttackResult], languages: &[String]) -> Coverage {
        let fits = |a: &&AttackResult| {
            a.languages.is_empty() || a.languages.iter().any(|l| l == "any" || languages.contains(l))
        };
        let mine: Vec<&AttackResult> = attacks.iter().filter(fits).collect();
        let applied: Vec<&&AttackResult> =
            mine.iter().filter(|a| !matches!(a.outcome, Outcome::NotApplicable { .. })).collect();
        let families: std::collections::BTreeSet<String> = applied.iter().map(|a| a.family.clone()).collect();
        let core_missing: Vec<String> =
            CORE_FAMILIES.iter().filter(|f| !families.contains(**f)).map(|f| f.to_string()).collect();
        let low = mine.is_empty() || applied.len() * 2 < mine.len() || !core_missing.is_empty();
        Coverage {
            for_languages: mine.len(),
            applied: applied.len(),
            families: families.into_iter().collect(),
            core_missing,
            low,
        }
    }

    /// The coverage in words.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} of the {} attacks written for this candidate's languages applied (families tried: {})",
            self.applied,
            self.for_languages,
            if self.families.is_empty() { "none".to_string() } else { self.families.join(", ") }
        );
        if !self.core_missing.is_empty() {
            s.push_str(&format!("; never tried: {}", self.core_missing.join(", ")));
        }
        s
    }
}

impl Report {
    /// Counts the attacks and sets the status (an error stays an error).
    pub fn finish(&mut self) {
        let count = |f: fn(&Outcome) -> bool| self.attacks.iter().filter(|a| f(&a.outcome)).count();
        self.held = count(|o| matches!(o, Outcome::Held { .. }));
        self.broken = count(|o| matches!(o, Outcome::Broken { .. }));
        self.not_applicable = count(|o| matches!(o, Outcome::NotApplicable { .. }));
        self.errors = count(|o| matches!(o, Outcome::Error { .. }));
        if self.status != Status::Error && !self.attacks.is_empty() && self.not_applicable == self.attacks.len() {
            self.status = Status::Error;
            self.error = Some(format!(
                "no attack of the battery applies to this campaign (its candidate's languages: {}): nothing was tried, \
                 so nothing is known of the harness",
                if self.languages.is_empty() { "none the battery knows".to_string() } else { self.languages.join(", ") }
            ));
        }
        let coverage = Coverage::of(&self.attacks, &self.languages);
        if self.status != Status::Error {
            self.status = if self.broken > 0 {
                Status::Broken
            } else if self.errors > 0 {
                self.error.get_or_insert_with(|| format!("{} attacks could not be carried out", self.errors));
                Status::Error
            } else if coverage.low && !self.accept_low_coverage {
                Status::LowCoverage
            } else {
                Status::Held
            };
        }
        if !self.attacks.is_empty() {
            self.coverage = Some(coverage);
        }
    }
}

/// Why the control (the unchanged candidate) makes the battery meaningless,
/// if it does: it must build and run, and it must fail the predicate (an
/// attack that passes a candidate that passes anyway proves nothing).
pub fn control_problem(e: &crate::evaluation::Evaluation) -> Option<String> {
    if e.verdict.holds {
        return Some(
            "the candidate as it is already meets the predicate, so an attack built on it would pass whether or not \
             the harness is sound: red-team the harness on a candidate that fails it (the initial kernel, before the \
             agent starts: [redteam] before_start)"
                .into(),
        );
    }
    if let Some(b) = e.build.as_ref().filter(|b| !b.ok) {
        return Some(format!(
            "the unchanged candidate does not build here ({}): every attack would fail for that reason, which says \
             nothing of the harness",
            line(&b.exit)
        ));
    }
    if let Some(r) = e.run.as_ref().filter(|r| !r.ok) {
        return Some(format!(
            "the harness does not run the unchanged candidate here ({}): every attack would fail for that reason, \
             which says nothing of the harness",
            line(&r.exit)
        ));
    }
    if e.verdict.scenarios.iter().any(|s| !s.present) {
        return Some(
            "the harness reports no result for some scenarios of the unchanged candidate: every attack would fail for \
             that reason"
                .into(),
        );
    }
    None
}

fn line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(200).collect()
}

/// The report as a table for a terminal (and the test logs).
pub fn render(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "red team of campaign {} ({}), battery {}, harness {}: {} attacks, {} held, {} BROKEN, {} not applicable{}",
        r.campaign,
        r.campaign_name,
        r.battery,
        r.harness,
        r.attacks.len(),
        r.held,
        r.broken,
        r.not_applicable,
        if r.errors > 0 { format!(", {} errors", r.errors) } else { String::new() }
    );
    if let Some(c) = &r.control {
        let _ = writeln!(
            out,
            "control (the candidate as it is): predicate {} ({}, {} of {} scenarios failing)",
            if c.holds { "holds" } else { "fails" },
            c.geomean_speedup.map(|g| format!("geomean {g:.2}x")).unwrap_or_else(|| "no geomean".into()),
            c.failing,
            c.scenarios
        );
    }
    let _ = writeln!(out, "| # | attack | family | result | caught by | evidence |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    // Not applicable ones after the table, grouped by their reason.
    let mut skipped: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut n = 0;
    for a in &r.attacks {
        let (by, what) = match &a.outcome {
            Outcome::Held { by, reason } => (by.as_str(), reason.as_str()),
            Outcome::Broken { reason } => ("-", reason.as_str()),
            Outcome::Error { why } => ("-", why.as_str()),
            Outcome::NotApplicable { why } => {
                match skipped.iter_mut().find(|(w, _)| w == why) {
                    Some((_, names)) => names.push(&a.name),
                    None => skipped.push((why, vec![&a.name])),
                }
                continue;
            }
        };
        n += 1;
        let what: String = what.replace('|', "/").chars().take(160).collect();
        let _ = writeln!(out, "| {n} | {} | {} | {} | {by} | {what} |", a.name, a.family, a.outcome.label());
    }
    if !skipped.is_empty() {
        let _ = writeln!(out, "not applicable:");
        for (why, names) in skipped {
            let _ = writeln!(out, "- {}: {why}", names.join(", "));
        }
    }
    let broken: Vec<&AttackResult> = r.attacks.iter().filter(|a| matches!(a.outcome, Outcome::Broken { .. })).collect();
    if !broken.is_empty() {
        let _ = writeln!(out, "missing checks:");
        for a in broken {
            let _ = writeln!(out, "- {}: {}", a.name, a.suggestion.as_deref().unwrap_or(""));
        }
    }
    if let Some(c) = &r.coverage {
        let _ = writeln!(
            out,
            "coverage {}: {}{}",
            if c.low { "LOW" } else { "ok" },
            c.describe(),
            if c.low && r.accept_low_coverage { " (accepted: [redteam] accept_low_coverage)" } else { "" }
        );
    }
    match r.status {
        Status::Held => {
            let _ = writeln!(out, "every applicable attack held");
        }
        Status::LowCoverage => {
            let _ = writeln!(
                out,
                "coverage low: every attack that applied held, but too little of the battery could be tried to \
                 vouch for the harness; add attacks for its language ([redteam] attacks) or accept it \
                 ([redteam] accept_low_coverage = true)"
            );
        }
        Status::Broken => {
            let _ = writeln!(out, "the harness is BROKEN: {} attacks would have been allowed to stop", r.broken);
        }
        Status::Error => {
            let _ =
                writeln!(out, "the battery could not judge the harness: {}", r.error.as_deref().unwrap_or("an error"));
        }
    }
    out
}

#[cfg(test)]
mod generic_tests;
#[cfg(test)]
mod tests;
