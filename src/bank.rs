//! The question bank as embedded in the binary (question_bank/), and the
//! first selection policy: an applicable entry for the moment that this
//! campaign has not been asked yet, spreading over groups. Falls back to a
//! small built-in set when no entry applies.

use std::sync::LazyLock;

use include_dir::{include_dir, Dir};
use serde::{Deserialize, Serialize};

use crate::campaign::CampaignSpec;

static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/question_bank");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BankFile {
    group: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    question: Vec<Entry>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Applies {
    #[serde(default)]
    pub comparison: bool,
    #[serde(default)]
    pub architectures: Vec<String>,
    #[serde(default)]
    pub domains: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub id: String,
    #[serde(default)]
    pub group: String,
    pub text: String,
    pub moments: Vec<String>,
    pub level: String,
    #[serde(default)]
    pub applies: Applies,
    pub provenance: String,
    #[serde(default)]
    pub evidence: Option<String>,
    pub source: String,
    pub rationale: String,
}

impl Entry {
    /// Whether this entry may be asked in a campaign with this spec.
    pub fn applies_to(&self, spec: &CampaignSpec) -> bool {
        if self.applies.comparison && spec.comparison.is_none() {
            return false;
        }
        if !self.applies.architectures.is_empty() {
            let Some(arch) = &spec.architecture else {
                return false;
            };
            if !self.applies.architectures.iter().any(|a| a.eq_ignore_ascii_case(arch)) {
                return false;
            }
        }
        if !self.applies.domains.is_empty() && !self.applies.domains.iter().any(|d| spec.domains.contains(d)) {
            return false;
        }
        true
    }
}

#[derive(Debug, Default)]
pub struct Bank {
    pub entries: Vec<Entry>,
    pub descriptions: Vec<(String, String)>,
    pub problems: Vec<String>,
}

/// Parses every `*.toml` of a bank folder's files, given as (name, text).
pub fn parse_files<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Bank {
    let mut bank = Bank::default();
    for (name, text) in files {
        match toml::from_str::<BankFile>(text) {
            Ok(file) => {
                bank.descriptions.push((file.group.clone(), file.description));
                for mut e in file.question {
                    e.group = file.group.clone();
                    bank.entries.push(e);
                }
            }
            Err(e) => bank.problems.push(format!("{name}: {}", e.message())),
        }
    }
    bank
}

/// The bank compiled into this binary.
pub fn embedded() -> &'static Bank {
    static BANK: LazyLock<Bank> = LazyLock::new(|| {
        let mut files: Vec<(&str, &str)> = EMBEDDED
            .files()
            .filter(|f| f.path().extension().is_some_and(|e| e == "toml"))
            .filter_map(|f| Some((f.path().to_str()?, f.contents_utf8()?)))
            .collect();
        files.sort();
        let bank = parse_files(files);
        for p in &bank.problems {
            tracing::warn!(problem = %p, "embedded question bank");
        }
        bank
    });
    &BANK
}

/// Picks a question for `moment`: applicable entries the campaign has not
/// been asked, from the `prefer`red groups first (in their order), then
/// the group used least, in bank order. `asked` lists the bank ids already
/// asked in the campaign, oldest first.
pub fn pick(moment: &str, spec: &CampaignSpec, asked: &[String], prefer: &[&str]) -> (String, String) {
    pick_from(&embedded().entries, moment, spec, asked, prefer)
}

pub fn pick_from(
    entries: &[Entry],
    moment: &str,
    spec: &CampaignSpec,
    asked: &[String],
    prefer: &[&str],
) -> (String, String) {
    let candidates: Vec<&Entry> =
        entries.iter().filter(|e| e.moments.iter().any(|m| m == moment) && e.applies_to(spec)).collect();
    let group_uses = |g: &str| asked.iter().filter(|id| entries.iter().any(|e| &e.id == *id && e.group == g)).count();
    let rank = |g: &str| prefer.iter().position(|p| *p == g).unwrap_or(prefer.len());
    let fresh =
        candidates.iter().filter(|e| !asked.contains(&e.id)).min_by_key(|e| (rank(&e.group), group_uses(&e.group)));
    if let Some(e) = fresh {
        return (e.id.clone(), e.text.clone());
    }
    // Every applicable entry was asked: ask again the one asked longest ago.
    if let Some(e) = candidates.iter().min_by_key(|e| asked.iter().rposition(|id| id == &e.id).unwrap_or(0)) {
        return (e.id.clone(), e.text.clone());
    }
    let builtin = crate::gate::BUILTIN_COMPLETION_QUESTIONS;
    let n = asked.iter().filter(|id| id.starts_with("builtin-")).count();
    let (id, text) = builtin[n % builtin.len()];
    (id.to_string(), text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CampaignSpec {
        let dir = tempfile::tempdir().unwrap();
        std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap();
        crate::campaign::parse(
            "name='t'\nworkspace='.'\n[harness]\nrun='x {results}'\nscenarios=['a']\n",
            "t.toml",
            dir.path(),
        )
        .unwrap()
    }

    const FILES: &[(&str, &str)] = &[
        (
            "a.toml",
            r#"group = "a"
[[question]]
id = "a-001"
text = "One?"
moments = ["completion_claim"]
level = "measurement"
provenance = "unverified"
source = "s"
rationale = "r"
[[question]]
id = "a-002"
text = "Two?"
moments = ["completion_claim"]
level = "measurement"
provenance = "unverified"
source = "s"
rationale = "r"
"#,
        ),
        (
            "b.toml",
            r#"group = "b"
[[question]]
id = "b-001"
text = "Three?"
moments = ["completion_claim"]
level = "memory"
provenance = "unverified"
source = "s"
rationale = "r"
[[question]]
id = "b-002"
text = "Hopper only?"
moments = ["completion_claim"]
level = "hardware"
applies = { architectures = ["hopper"] }
provenance = "unverified"
source = "s"
rationale = "r"
"#,
        ),
    ];

    #[test]
    fn picks_unasked_applicable_entries_spreading_groups() {
        let bank = parse_files(FILES.iter().copied());
        assert!(bank.problems.is_empty(), "{:?}", bank.problems);
        let s = spec();
        let mut asked = Vec::new();
        let mut order = Vec::new();
        for _ in 0..4 {
            let (id, _) = pick_from(&bank.entries, "completion_claim", &s, &asked, &[]);
            order.push(id.clone());
            asked.push(id);
        }
        assert_eq!(order, vec!["a-001", "b-001", "a-002", "a-001"]);
        let (id, _) = pick_from(&bank.entries, "plateau", &s, &[], &[]);
        assert!(id.starts_with("builtin-"), "no entry fits: built-in fallback");
        let (id, _) = pick_from(&bank.entries, "completion_claim", &s, &[], &["b"]);
        assert_eq!(id, "b-001", "a preferred group comes first");
    }

    #[test]
    fn the_embedded_bank_parses() {
        let bank = embedded();
        assert!(bank.problems.is_empty(), "{:?}", bank.problems);
    }
}
