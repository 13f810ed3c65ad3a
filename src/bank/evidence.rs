//! What a moment is about, as selection and the question text use it: the
//! detector that fired, the scenarios it named, the agent's own words and
//! a few numbers (`facts`). Read from a finding (the daemon, the replay)
//! or from a JSON file (`gadfly bank pick --evidence`).
//!
//! Placeholders: an entry's text may carry `{scenarios}`, `{quote}`,
//! `{detail}` and `{facts.NAME}`. An entry whose placeholder has no value
//! in the evidence is not picked ([`render`] answers `None`), so a
//! delivered question never shows a hole. Every delivered question names
//! what it is about: when the text does not already carry the scenarios
//! or the quote, a first line does ([`deliver`]).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::Entry;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Evidence {
    /// The detector that fired (`plateau`, `faster_than_bound`, `text:limit`...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detector: Option<String>,
    /// The scenarios the moment is about, worst first where known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<String>,
    /// The agent's words that raised the moment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
    /// Numbers and short strings (`evaluations`, `worst_speedup`...), as shown.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
    /// The detector's own one-line account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The fields an evidence file may have.
pub const FIELDS: [&str; 5] = ["quote", "scenarios", "facts", "detector", "detail"];

impl Evidence {
    /// Reads an evidence object; an error names the field at fault.
    pub fn from_json(v: &Value) -> Result<Evidence, String> {
        let Some(obj) = v.as_object() else {
            return Err("evidence must be a JSON object with the fields quote, scenarios, facts, detector".into());
        };
        let mut ev = Evidence::default();
        for (k, val) in obj {
            match k.as_str() {
                "quote" | "detector" | "detail" => {
                    let s = match val {
                        Value::Null => continue,
                        Value::String(s) => s.trim().to_string(),
                        _ => return Err(format!("field `{k}`: expected a string")),
                    };
                    let s = (!s.is_empty()).then_some(s);
                    match k.as_str() {
                        "quote" => ev.quote = s,
                        "detector" => ev.detector = s,
                        _ => ev.detail = s,
                    }
                }
                "scenarios" => match val {
                    Value::Null => {}
                    Value::Array(items) => {
                        for (i, it) in items.iter().enumerate() {
                            match it.as_str() {
                                Some(s) if !s.trim().is_empty() => ev.scenarios.push(s.trim().to_string()),
                                _ => return Err(format!("field `scenarios[{i}]`: expected a non-empty string")),
                            }
                        }
                    }
                    _ => return Err("field `scenarios`: expected an array of scenario names".into()),
                },
                "facts" => match val {
                    Value::Null => {}
                    Value::Object(m) => {
                        for (name, f) in m {
                            let shown = match f {
                                Value::Number(n) => show_number(n),
                                Value::String(s) => s.clone(),
                                _ => return Err(format!("field `facts.{name}`: expected a number or a string")),
                            };
                            ev.facts.insert(name.clone(), shown);
                        }
                    }
                    _ => return Err("field `facts`: expected an object of numbers and strings".into()),
                },
                other => {
                    return Err(format!("unknown field `{other}`; expected one of {}", FIELDS.join(", ")));
                }
            }
        }
        Ok(ev)
    }

    /// The evidence of a detector's finding (its parts, so that the bank
    /// needs no detector types): the moment, the detector, its scenarios,
    /// its one-line account, the evaluations it read, a claim's quote and
    /// the numbers it saw (`found`: `{facts.NAME}`). The campaign's start
    /// has nothing to name.
    pub fn of_finding(
        moment: &str,
        detector: &str,
        scenarios: &[String],
        detail: &str,
        evaluations: usize,
        quote: Option<&str>,
        found: &BTreeMap<String, String>,
    ) -> Evidence {
        if moment == "start" {
            return Evidence { detector: Some(detector.to_string()), ..Default::default() };
        }
        // The detector's own numbers, then how many evaluations it read.
        let mut facts = found.clone();
        if evaluations > 0 {
            facts.insert("evaluations".to_string(), evaluations.to_string());
        }
        Evidence {
            detector: Some(detector.to_string()),
            scenarios: scenarios.to_vec(),
            quote: quote.map(str::to_string).filter(|q| !q.trim().is_empty()),
            facts,
            // A claim's detail only repeats its quote.
            detail: (quote.is_none() && !detail.trim().is_empty()).then(|| detail.to_string()),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Evidence::default()
    }

    fn value(&self, name: &str) -> Option<String> {
        match name {
            "scenarios" => (!self.scenarios.is_empty()).then(|| list(&self.scenarios)),
            "quote" => self.quote.clone(),
            "detail" => self.detail.clone(),
            n => self.facts.get(n.strip_prefix("facts.")?).cloned(),
        }
    }

    /// Whether the moment's scenarios are the smallest of the campaign's:
    /// the evidence says so (`facts.smallest = "yes"`), or every scenario
    /// it names is among the first third of `all` (scenario lists are
    /// written smallest first by convention).
    pub fn on_small_scenarios(&self, all: &[String]) -> bool {
        if let Some(v) = self.facts.get("smallest") {
            return matches!(v.as_str(), "yes" | "true" | "1");
        }
        if self.scenarios.is_empty() || all.len() < 3 {
            return false;
        }
        let cut = all.len().div_ceil(3);
        self.scenarios.iter().all(|s| all.iter().position(|a| a == s).is_some_and(|i| i < cut))
    }
}

fn show_number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if f.fract() != 0.0 => {
            let s = format!("{f:.3}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        _ => n.to_string(),
    }
}

/// `a`, `a and b`, `a, b and c`; more than six names as the first five
/// and how many more.
fn list(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(if names.len() > 6 { 5 } else { 6 }).map(String::as_str).collect();
    let rest = names.len() - shown.len();
    match (shown.as_slice(), rest) {
        ([one], 0) => one.to_string(),
        (_, 0) => format!("{} and {}", shown[..shown.len() - 1].join(", "), shown[shown.len() - 1]),
        _ => format!("{} and {rest} more", shown.join(", ")),
    }
}

/// The placeholders of `text`, in order (`scenarios`, `facts.worst`...).
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        out.push(&after[..close]);
        rest = &after[close + 1..];
    }
    out
}

/// Whether `name` is a placeholder the bank may use.
pub fn known_placeholder(name: &str) -> bool {
    matches!(name, "scenarios" | "quote" | "detail")
        || name
            .strip_prefix("facts.")
            .is_some_and(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// The entry's text with its placeholders filled from `ev`, or `None`
/// when one of them has no value (the entry is then not picked).
pub fn render(entry: &Entry, ev: Option<&Evidence>) -> Option<String> {
    render_text(&entry.text, ev)
}

/// [`render`] of one of an entry's texts (its vendor variant...).
pub fn render_text(template: &str, ev: Option<&Evidence>) -> Option<String> {
    let mut text = template.to_string();
    for name in placeholders(template) {
        let v = ev.and_then(|e| e.value(name))?;
        text = text.replace(&format!("{{{name}}}"), &v);
    }
    Some(text)
}

/// Whether `text` names `word` as a word of its own (scenario `c` is not
/// named by "cache").
fn names(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(part) && !text[i + word.len()..].chars().next().is_some_and(part)
    })
}

/// What is delivered: the rendered text, with a first line naming the
/// scenarios or quoting the claim when the text does not already.
pub fn deliver(text: &str, moment: &str, ev: Option<&Evidence>) -> String {
    let Some(ev) = ev else { return text.to_string() };
    let names_scenarios = !ev.scenarios.is_empty() && ev.scenarios.iter().all(|s| names(text, s));
    let quotes = ev.quote.as_deref().is_some_and(|q| text.contains(q));
    // A text that carries the detector's own account names it already.
    let tells = ev.scenarios.is_empty() && ev.quote.is_none() && ev.detail.as_deref().is_some_and(|d| text.contains(d));
    if names_scenarios || quotes || tells {
        return text.to_string();
    }
    let what = moment.replace('_', " ");
    let why = match (&ev.detail, &ev.detector) {
        (Some(d), _) => format!("{what}: {d}"),
        (None, Some(d)) if d != moment => format!("{what}, seen by {d}"),
        _ => what,
    };
    let head = if !ev.scenarios.is_empty() {
        let s = if ev.scenarios.len() == 1 { "scenario" } else { "scenarios" };
        format!("About {s} {} ({why}):", list(&ev.scenarios))
    } else if let Some(q) = &ev.quote {
        let q: String =
            if q.chars().count() > 200 { format!("{}...", q.chars().take(200).collect::<String>()) } else { q.clone() };
        format!("You wrote: \"{q}\" ({why}).")
    } else if ev.detail.is_some() || ev.detector.is_some() {
        format!("About this {why}:")
    } else {
        return text.to_string();
    };
    format!("{head}\n{text}")
}

/// Evidence of `detector` with `facts`, for tests.
#[cfg(test)]
pub(crate) fn with_facts(detector: &str, facts: &[(&str, &str)]) -> Evidence {
    Evidence {
        detector: Some(detector.into()),
        facts: facts.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(text: &str) -> Entry {
        Entry {
            id: "gap-001".into(),
            group: "gap_analysis".into(),
            text: text.into(),
            text_amd: None,
            text_cpu: None,
            moments: vec!["plateau".into()],
            level: "measurement".into(),
            applies: Default::default(),
            provenance: "unverified".into(),
            evidence: None,
            source: "s".into(),
            rationale: "r".into(),
        }
    }

    #[test]
    fn reads_evidence_and_names_the_bad_field() {
        let ev = Evidence::from_json(&json!({"quote": "memory-bound", "scenarios": ["b", "c"], "facts": {"worst": 0.81234, "n": 3}, "detector": "plateau"})).unwrap();
        assert_eq!(ev.scenarios, ["b", "c"]);
        assert_eq!(ev.facts["worst"], "0.812");
        assert_eq!(ev.facts["n"], "3");
        let bad = |v: Value| Evidence::from_json(&v).unwrap_err();
        assert!(bad(json!({"scenarios": "b"})).contains("`scenarios`"));
        assert!(bad(json!({"scenarios": [1]})).contains("`scenarios[0]`"));
        assert!(bad(json!({"facts": {"x": [1]}})).contains("`facts.x`"));
        assert!(bad(json!({"quote": 3})).contains("`quote`"));
        assert!(bad(json!({"qoute": "x"})).contains("`qoute`"));
        assert!(bad(json!([1])).contains("JSON object"));
    }

    #[test]
    fn renders_placeholders_or_refuses() {
        let e = entry("Why is {scenarios} at {facts.worst}x of its bound when you wrote {quote}?");
        assert_eq!(render(&e, None), None);
        let ev = Evidence {
            scenarios: vec!["a".into(), "b".into(), "c".into()],
            quote: Some("\"done\"".into()),
            facts: [("worst".to_string(), "0.4".to_string())].into(),
            ..Default::default()
        };
        assert_eq!(render(&e, Some(&ev)).unwrap(), "Why is a, b and c at 0.4x of its bound when you wrote \"done\"?");
        let partial = Evidence { scenarios: vec!["a".into()], ..Default::default() };
        assert_eq!(render(&e, Some(&partial)), None, "no quote, no worst: not picked");
        assert_eq!(placeholders("{a} x {facts.b}"), ["a", "facts.b"]);
        assert!(
            known_placeholder("facts.worst_speedup") && !known_placeholder("scenario") && !known_placeholder("facts.")
        );
    }

    #[test]
    fn every_delivered_question_names_its_evidence() {
        let ev = Evidence {
            scenarios: vec!["b".into(), "c".into()],
            detail: Some("geomean within 1% over 3 evaluations".into()),
            ..Default::default()
        };
        assert_eq!(
            deliver("Q?", "plateau", Some(&ev)),
            "About scenarios b and c (plateau: geomean within 1% over 3 evaluations):\nQ?"
        );
        assert_eq!(deliver("Is b or c slow?", "plateau", Some(&ev)), "Is b or c slow?", "already named");
        assert!(
            deliver("Which cache bank?", "plateau", Some(&ev)).starts_with("About scenarios b and c"),
            "not a word"
        );
        let claim = Evidence { quote: Some("this is memory-bound".into()), ..Default::default() };
        assert_eq!(
            deliver("Q?", "limit_claim", Some(&claim)),
            "You wrote: \"this is memory-bound\" (limit claim).\nQ?"
        );
        assert_eq!(deliver("Q?", "start", None), "Q?");
        let looped = Evidence { detail: Some("9 of 20 lines re-added".into()), ..Default::default() };
        assert_eq!(deliver("9 of 20 lines re-added: why?", "edit_loop", Some(&looped)), "9 of 20 lines re-added: why?");
        assert_eq!(deliver("Why?", "edit_loop", Some(&looped)), "About this edit loop: 9 of 20 lines re-added:\nWhy?");
        assert_eq!(deliver("Q?", "start", Some(&Evidence::default())), "Q?");
        let many: Vec<String> = (0..9).map(|i| format!("s{i}")).collect();
        assert_eq!(list(&many), "s0, s1, s2, s3, s4 and 4 more");
    }

    #[test]
    fn smallest_scenarios() {
        let all: Vec<String> = ["s1", "s2", "s3", "m1", "m2", "l1"].iter().map(|s| s.to_string()).collect();
        let ev = |s: &[&str]| Evidence { scenarios: s.iter().map(|s| s.to_string()).collect(), ..Default::default() };
        assert!(ev(&["s1", "s2"]).on_small_scenarios(&all));
        assert!(!ev(&["s1", "l1"]).on_small_scenarios(&all));
        assert!(!ev(&[]).on_small_scenarios(&all));
    }

    /// Issue 35, item 1: a detector's numbers reach the delivered text
    /// (`moments::detect` tests that the detectors fill them).
    #[test]
    fn a_findings_facts_fill_the_entrys_placeholders() {
        let found: BTreeMap<String, String> =
            [("best_before".to_string(), "1.5".to_string()), ("best_window".to_string(), "1.509".to_string())].into();
        let ev = Evidence::of_finding("plateau", "plateau", &["b".into()], "flat", 3, None, &found);
        assert_eq!(ev.facts.get("best_before").map(String::as_str), Some("1.5"));
        assert_eq!(ev.facts.get("evaluations").map(String::as_str), Some("3"));
        let mut entry = entry("Your best is {facts.best_window}x against {facts.best_before}x: which level is left?");
        assert_eq!(
            render(&entry, Some(&ev)).as_deref(),
            Some("Your best is 1.509x against 1.5x: which level is left?")
        );
        // A fact the detector did not give leaves the entry unpicked.
        entry.text = "What does {facts.bandwidth_pct} mean?".into();
        assert_eq!(render(&entry, Some(&ev)), None);
    }
}
