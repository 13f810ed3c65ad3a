//! Reading and validating bank files. Every problem names its file, line
//! and field; composition rules (counts per group, moment coverage, the
//! share of kernel-specific entries) are checked over the whole bank.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{Applies, Bank, Entry, ARCHITECTURES, ARCHITECTURE_GROUP, COMPARISON_GROUP, CORE_GROUPS, LEVELS, MOMENTS};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    group: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    question: Vec<Spanned<RawEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    id: Spanned<String>,
    text: Spanned<String>,
    #[serde(default)]
    text_amd: Option<Spanned<String>>,
    #[serde(default)]
    text_cpu: Option<Spanned<String>>,
    moments: Spanned<Vec<Spanned<String>>>,
    level: Spanned<String>,
    #[serde(default)]
    applies: Option<Spanned<RawApplies>>,
    provenance: Spanned<String>,
    #[serde(default)]
    evidence: Option<Spanned<String>>,
    source: Spanned<String>,
    rationale: Spanned<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawApplies {
    #[serde(default)]
    comparison: bool,
    #[serde(default)]
    architectures: Vec<String>,
    #[serde(default)]
    domains: Vec<String>,
    #[serde(default)]
    devices: Vec<String>,
    #[serde(default)]
    assumes: Vec<String>,
    #[serde(default)]
    failures: Vec<String>,
}

pub const MAX_TEXT: usize = 240;
pub const MAX_RATIONALE: usize = 200;
/// Core entries in the reference bank, and the other two files.
pub const CORE_COUNT: usize = 124;
pub const COMPARISON_COUNT: usize = 5;
pub const ARCHITECTURE_COUNT: usize = 18;
pub const MIN_PER_MOMENT: usize = 8;
/// At most this share of entries may name a specific kind of kernel.
pub const MAX_DOMAIN_SHARE: f64 = 0.10;

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    problems: Vec<String>,
}

impl Ctx<'_> {
    fn at(&mut self, offset: usize, field: &str, msg: impl AsRef<str>) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        self.problems.push(format!("{}:{line}: field `{field}`: {}", self.file, msg.as_ref()));
    }
}

/// Reads every `*.toml` in `dir`.
pub fn load_dir(dir: &Path) -> anyhow::Result<Bank> {
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(|e| anyhow::anyhow!("cannot read bank folder {}: {e}", dir.display()))?
    {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| anyhow::anyhow!("cannot read bank file {}: {e}", path.display()))?;
            files.push((path.display().to_string(), text));
        }
    }
    files.sort();
    let mut bank = parse_files(&files);
    bank.source = dir.display().to_string();
    Ok(bank)
}

/// Parses and validates bank files given as (name, text).
pub fn parse_files(files: &[(String, String)]) -> Bank {
    let mut bank = Bank::default();
    let mut seen: HashMap<String, String> = HashMap::new();
    for (name, text) in files {
        let mut ctx = Ctx { file: name, text, problems: Vec::new() };
        parse_file(&mut ctx, &mut bank, &mut seen);
        bank.problems.extend(ctx.problems);
    }
    bank.warnings = composition(&bank.entries);
    bank.warnings.extend(bank.entries.iter().flat_map(super::vocabulary::undeclared));
    bank
}

fn parse_file(ctx: &mut Ctx<'_>, bank: &mut Bank, seen: &mut HashMap<String, String>) {
    let raw: RawFile = match toml::from_str(ctx.text) {
        Ok(r) => r,
        Err(e) => {
            let offset = e.span().map_or(0, |s| s.start);
            let field = crate::campaign::field_at(ctx.text, offset, backticked(e.message()));
            ctx.at(offset, &field, e.message().trim());
            return;
        }
    };
    let group = raw.group.get_ref().clone();
    let known_group = CORE_GROUPS.contains(&group.as_str()) || group == COMPARISON_GROUP || group == ARCHITECTURE_GROUP;
    if !known_group {
        ctx.at(
            raw.group.span().start,
            "group",
            format!(
                "unknown group `{group}`; expected one of {}, {COMPARISON_GROUP}, {ARCHITECTURE_GROUP}",
                CORE_GROUPS.join(", ")
            ),
        );
    }
    let stem = Path::new(ctx.file).file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if known_group && stem != group {
        ctx.at(
            raw.group.span().start,
            "group",
            format!("group `{group}` is in {stem}.toml; the file must be {group}.toml"),
        );
    }
    bank.descriptions.push((group.clone(), raw.description.clone()));
    for (i, q) in raw.question.iter().enumerate() {
        let q = q.get_ref();
        let f = |name: &str| format!("question[{i}].{name}");
        let before = ctx.problems.len();
        let id = q.id.get_ref().trim().to_string();
        if id.is_empty() {
            ctx.at(q.id.span().start, &f("id"), "must not be empty");
        } else if !valid_id(&id) {
            ctx.at(q.id.span().start, &f("id"), format!("`{id}` is not of the form prefix-NNN (e.g. measure-007)"));
        } else if let Some(prev) = seen.get(&id) {
            ctx.at(q.id.span().start, &f("id"), format!("duplicate id `{id}` (first defined in {prev})"));
        }
        let text = q.text.get_ref().trim();
        let chars = text.chars().count();
        if text.is_empty() {
            ctx.at(q.text.span().start, &f("text"), "must not be empty");
        } else if chars > MAX_TEXT {
            ctx.at(q.text.span().start, &f("text"), format!("{chars} characters, over the {MAX_TEXT} allowed"));
        } else if !text.ends_with('?') || text.matches('?').count() != 1 {
            ctx.at(q.text.span().start, &f("text"), "must be exactly one question, ending with its only `?`");
        }
        if q.moments.get_ref().is_empty() {
            ctx.at(q.moments.span().start, &f("moments"), "must name at least one moment");
        }
        for m in q.moments.get_ref() {
            if !MOMENTS.contains(&m.get_ref().as_str()) {
                ctx.at(
                    m.span().start,
                    &f("moments"),
                    format!("unknown moment `{}`; expected one of {}", m.get_ref(), MOMENTS.join(", ")),
                );
            }
        }
        if !LEVELS.contains(&q.level.get_ref().as_str()) {
            ctx.at(
                q.level.span().start,
                &f("level"),
                format!("unknown level `{}`; expected one of {}", q.level.get_ref(), LEVELS.join(", ")),
            );
        }
        let (applies, applies_at) = match &q.applies {
            Some(a) => (a.get_ref(), a.span().start),
            None => (&RawApplies::default(), q.id.span().start),
        };
        if applies.comparison != (group == COMPARISON_GROUP) && known_group {
            ctx.at(
                applies_at,
                &f("applies.comparison"),
                if group == COMPARISON_GROUP {
                    "must be true in comparison.toml"
                } else {
                    "may be true only in comparison.toml"
                },
            );
        }
        if known_group && applies.architectures.is_empty() == (group == ARCHITECTURE_GROUP) {
            ctx.at(
                applies_at,
                &f("applies.architectures"),
                if group == ARCHITECTURE_GROUP {
                    "must name at least one architecture in architecture.toml"
                } else {
                    "may be set only in architecture.toml"
                },
            );
        }
        for a in &applies.architectures {
            if !ARCHITECTURES.contains(&a.as_str()) {
                ctx.at(
                    applies_at,
                    &f("applies.architectures"),
                    format!("unknown architecture `{a}`; expected one of {}", ARCHITECTURES.join(", ")),
                );
            }
        }
        for d in &applies.devices {
            if !crate::campaign::DEVICES.contains(&d.as_str()) {
                ctx.at(
                    applies_at,
                    &f("applies.devices"),
                    format!("unknown device `{d}`; expected one of {}", crate::campaign::DEVICES.join(", ")),
                );
            }
        }
        for a in &applies.assumes {
            if !super::vocabulary::ASSUMPTIONS.contains(&a.as_str()) {
                ctx.at(
                    applies_at,
                    &f("applies.assumes"),
                    format!("unknown assumption `{a}`; expected one of {}", super::vocabulary::ASSUMPTIONS.join(", ")),
                );
            }
        }
        for k in &applies.failures {
            if !crate::evaluation::FAILURE_KINDS.contains(&k.as_str()) {
                ctx.at(
                    applies_at,
                    &f("applies.failures"),
                    format!(
                        "unknown failure kind `{k}`; expected one of {}",
                        crate::evaluation::FAILURE_KINDS.join(", ")
                    ),
                );
            }
        }
        let mut own_placeholders: Vec<&str> = super::evidence::placeholders(text);
        own_placeholders.sort_unstable();
        for (name, variant) in [("text_amd", &q.text_amd), ("text_cpu", &q.text_cpu)] {
            let Some(v) = variant else { continue };
            let t = v.get_ref().trim();
            if t.is_empty() || t.chars().count() > MAX_TEXT || t.contains('\n') {
                ctx.at(v.span().start, &f(name), format!("must be one line of 1 to {MAX_TEXT} characters"));
            }
            let mut theirs = super::evidence::placeholders(t);
            theirs.sort_unstable();
            if theirs != own_placeholders {
                ctx.at(v.span().start, &f(name), "must use the same placeholders as `text`");
            }
        }
        for p in super::evidence::placeholders(text) {
            if !super::evidence::known_placeholder(p) {
                ctx.at(
                    q.text.span().start,
                    &f("text"),
                    format!("unknown placeholder `{{{p}}}`; expected {{scenarios}}, {{quote}}, {{detail}} or {{facts.NAME}}"),
                );
            }
        }
        match q.provenance.get_ref().as_str() {
            "unverified" => {}
            "confirmed" => {
                if q.evidence.as_ref().is_none_or(|e| e.get_ref().trim().is_empty()) {
                    ctx.at(q.provenance.span().start, &f("evidence"), "a confirmed entry must give its evidence");
                }
            }
            other => ctx.at(
                q.provenance.span().start,
                &f("provenance"),
                format!("`{other}`; expected unverified or confirmed"),
            ),
        }
        if q.source.get_ref().trim().is_empty() {
            ctx.at(q.source.span().start, &f("source"), "must name where the idea comes from");
        }
        let rationale = q.rationale.get_ref().trim();
        if rationale.is_empty() {
            ctx.at(q.rationale.span().start, &f("rationale"), "must not be empty");
        } else if rationale.chars().count() > MAX_RATIONALE || rationale.contains('\n') {
            ctx.at(
                q.rationale.span().start,
                &f("rationale"),
                format!("must be one line of at most {MAX_RATIONALE} characters"),
            );
        }
        if ctx.problems.len() == before {
            seen.insert(id.clone(), ctx.file.to_string());
            bank.entries.push(Entry {
                id,
                group: group.clone(),
                text: text.to_string(),
                text_amd: q.text_amd.as_ref().map(|t| t.get_ref().trim().to_string()),
                text_cpu: q.text_cpu.as_ref().map(|t| t.get_ref().trim().to_string()),
                moments: q.moments.get_ref().iter().map(|m| m.get_ref().clone()).collect(),
                level: q.level.get_ref().clone(),
                applies: Applies {
                    comparison: applies.comparison,
                    architectures: applies.architectures.clone(),
                    domains: applies.domains.clone(),
                    devices: applies.devices.clone(),
                    assumes: applies.assumes.clone(),
                    failures: applies.failures.clone(),
                },
                provenance: q.provenance.get_ref().clone(),
                evidence: q.evidence.as_ref().map(|e| e.get_ref().clone()),
                source: q.source.get_ref().clone(),
                rationale: rationale.to_string(),
            });
        }
    }
}

fn backticked(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(message[start..end].to_string())
}

fn valid_id(id: &str) -> bool {
    match id.rsplit_once('-') {
        Some((prefix, num)) => {
            !prefix.is_empty()
                && prefix.chars().all(|c| c.is_ascii_lowercase() || c == '-' || c == '_')
                && num.len() >= 3
                && num.chars().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Counts that lint prints.
#[derive(Debug, Default, serde::Serialize)]
pub struct Counts {
    pub total: usize,
    pub by_group: BTreeMap<String, usize>,
    pub by_kind: BTreeMap<String, usize>,
    pub core_by_moment: BTreeMap<String, usize>,
    pub all_by_moment: BTreeMap<String, usize>,
    pub domain_specific: usize,
}

pub fn counts(entries: &[Entry]) -> Counts {
    let mut c = Counts { total: entries.len(), ..Default::default() };
    for m in MOMENTS {
        c.core_by_moment.insert(m.to_string(), 0);
        c.all_by_moment.insert(m.to_string(), 0);
    }
    for e in entries {
        *c.by_group.entry(e.group.clone()).or_default() += 1;
        let kind = if e.is_core() { "core" } else { e.group.as_str() };
        *c.by_kind.entry(kind.to_string()).or_default() += 1;
        for m in &e.moments {
            *c.all_by_moment.entry(m.clone()).or_default() += 1;
            if e.is_core() {
                *c.core_by_moment.entry(m.clone()).or_default() += 1;
            }
        }
        if !e.applies.domains.is_empty() {
            c.domain_specific += 1;
        }
    }
    c
}

/// The bank's composition rules: 124 core entries in the ten groups, 5
/// comparison, 18 architecture entries; every moment served by at least 8
/// core entries; at most about 10% of entries tied to one kind of kernel.
pub fn composition(entries: &[Entry]) -> Vec<String> {
    let c = counts(entries);
    let mut w = Vec::new();
    let kind = |k: &str| c.by_kind.get(k).copied().unwrap_or(0);
    for (k, want) in
        [("core", CORE_COUNT), (COMPARISON_GROUP, COMPARISON_COUNT), (ARCHITECTURE_GROUP, ARCHITECTURE_COUNT)]
    {
        if kind(k) != want {
            w.push(format!("{k} entries: {} (the bank holds {want})", kind(k)));
        }
    }
    for g in CORE_GROUPS {
        if c.by_group.get(g).copied().unwrap_or(0) == 0 {
            w.push(format!("core group {g} has no entries"));
        }
    }
    for (m, n) in &c.core_by_moment {
        if *n < MIN_PER_MOMENT {
            w.push(format!("moment {m} has {n} core entries, fewer than {MIN_PER_MOMENT}"));
        }
    }
    let limit = (entries.len() as f64 * MAX_DOMAIN_SHARE).ceil() as usize;
    if c.domain_specific > limit {
        w.push(format!("{} entries name a specific kind of kernel, over about 10% ({limit})", c.domain_specific));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, extra: &str) -> String {
        format!(
            "[[question]]\nid = \"{id}\"\ntext = \"Is it?\"\nmoments = [\"plateau\"]\nlevel = \"memory\"\nprovenance = \"unverified\"\nsource = \"s\"\nrationale = \"r\"\n{extra}\n"
        )
    }

    fn one(file: &str, text: String) -> Bank {
        parse_files(&[(file.to_string(), text)])
    }

    #[test]
    fn a_good_file_loads() {
        let b = one("q/bound.toml", format!("group = \"bound\"\n{}{}", entry("bound-001", ""), entry("bound-002", "")));
        assert!(b.problems.is_empty(), "{:?}", b.problems);
        assert_eq!(b.entries.len(), 2);
        assert_eq!(b.entries[1].group, "bound");
    }

    #[test]
    fn each_kind_of_bad_entry_is_named_with_file_line_and_field() {
        let cases: Vec<(String, &str, &str)> = vec![
            (entry("bound-001", "").replace("plateau", "plateu"), "question[0].moments", "unknown moment `plateu`"),
            (entry("bound-001", "").replace("memory", "cache"), "question[0].level", "unknown level `cache`"),
            (entry("bound-1", ""), "question[0].id", "not of the form"),
            (entry("bound-001", "").replace("Is it?", "Is it? Or not?"), "question[0].text", "exactly one question"),
            (
                entry("bound-001", "").replace("Is it?", &format!("{}?", "x".repeat(240))),
                "question[0].text",
                "over the 240",
            ),
            (entry("bound-001", "").replace("[\"plateau\"]", "[]"), "question[0].moments", "at least one moment"),
            (
                entry("bound-001", "").replace("\"unverified\"", "\"confirmed\""),
                "question[0].evidence",
                "must give its evidence",
            ),
            (
                entry("bound-001", "").replace("\"unverified\"", "\"likely\""),
                "question[0].provenance",
                "expected unverified or confirmed",
            ),
            (
                entry("bound-001", "applies = { comparison = true }"),
                "question[0].applies.comparison",
                "only in comparison.toml",
            ),
            (
                entry("bound-001", "applies = { architectures = [\"hopper\"] }"),
                "question[0].applies.architectures",
                "only in architecture.toml",
            ),
            (entry("bound-001", "").replace("source = \"s\"", "source = \"\""), "question[0].source", "must name"),
            (entry("bound-001", "colour = \"red\""), "colour", "unknown field `colour`"),
            (
                format!("{}{}", entry("bound-001", ""), entry("bound-001", "")),
                "question[1].id",
                "duplicate id `bound-001`",
            ),
        ];
        for (body, field, message) in cases {
            let b = one("q/bound.toml", format!("group = \"bound\"\n{body}"));
            assert_eq!(b.problems.len(), 1, "{field}: {:?}", b.problems);
            let p = &b.problems[0];
            assert!(p.starts_with("q/bound.toml:"), "{p}");
            assert!(p.contains(&format!("field `{field}`")), "expected field {field}: {p}");
            assert!(p.contains(message), "expected {message:?}: {p}");
        }
        // the line points at the offending key
        let b =
            one("q/bound.toml", format!("group = \"bound\"\n{}", entry("bound-001", "").replace("memory", "cache")));
        assert!(b.problems[0].starts_with("q/bound.toml:6:"), "{:?}", b.problems);
    }

    #[test]
    fn groups_must_be_known_and_match_the_file() {
        let b = one("q/bound.toml", format!("group = \"bounds\"\n{}", entry("bound-001", "")));
        assert!(b.problems[0].contains("unknown group `bounds`"), "{:?}", b.problems);
        let b = one("q/misc.toml", format!("group = \"bound\"\n{}", entry("bound-001", "")));
        assert!(b.problems[0].contains("must be bound.toml"), "{:?}", b.problems);
        let b = one("q/architecture.toml", format!("group = \"architecture\"\n{}", entry("arch-001", "")));
        assert!(b.problems[0].contains("must name at least one architecture"), "{:?}", b.problems);
    }

    #[test]
    fn the_shipped_bank_is_clean_and_complete() {
        let b = load_dir(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/question_bank"))).unwrap();
        assert!(b.problems.is_empty(), "{:#?}", b.problems);
        assert!(b.warnings.is_empty(), "{:#?}", b.warnings);
        let c = counts(&b.entries);
        assert_eq!(c.total, 147);
        assert_eq!(c.by_kind["core"], 124);
        assert_eq!(c.by_group.len(), 12);
        assert!(c.core_by_moment.values().all(|n| *n >= 8), "{:?}", c.core_by_moment);
    }

    #[test]
    fn composition_rules_warn() {
        let b = one("q/bound.toml", format!("group = \"bound\"\n{}", entry("bound-001", "")));
        assert!(b.warnings.iter().any(|w| w.starts_with("core entries: 1")), "{:?}", b.warnings);
        assert!(b.warnings.iter().any(|w| w.contains("moment edit_loop has 0 core entries")), "{:?}", b.warnings);
    }
}
