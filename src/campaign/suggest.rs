//! A misspelt section or key in a spec (`[harnes]`, `scenarioz = ...`):
//! serde's "unknown field" message, told as what it is (a section or a key
//! of a section) with the nearest valid name (`strsim`) when one is close.

/// serde's "unknown field `X`, expected ..." at `span` of `text`, rewritten:
/// the field to name (empty for a section, whose header says it all) and
/// the message. None for any other message.
pub(super) fn unknown_name(text: &str, span: &std::ops::Range<usize>, message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix("unknown field `")?;
    let name = &rest[..rest.find('`')?];
    let valid = expected_names(rest);
    let start = span.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("").trim();
    if let Some(header) = header(line) {
        let parent = header.rsplit_once('.').map(|(p, _)| p);
        let what = match parent {
            Some(p) => format!("unknown section `{header}` (`{name}` is not a section of [{p}])"),
            None => format!("unknown section `{header}`"),
        };
        // The field is the section itself: every spec error names one.
        return Some((header.to_string(), format!("{what}; {}", hint(name, &valid, "sections and keys"))));
    }
    let section = text[..line_start].lines().rev().find_map(header);
    let (field, what) = match &section {
        Some(s) => (format!("{s}.{name}"), format!("unknown key `{name}` in [{s}]")),
        None => (name.to_string(), format!("unknown key `{name}` at the top of the spec")),
    };
    Some((field, format!("{what}; {}", hint(name, &valid, "keys"))))
}

/// The name in a header line (`[harness]`, `[[notify.webhooks]]`).
fn header(line: &str) -> Option<String> {
    let line = line.split('#').next().unwrap_or("").trim();
    (line.starts_with('[') && line.ends_with(']'))
        .then(|| line.trim_matches(|c| c == '[' || c == ']').trim().to_string())
}

/// The names serde lists after "expected" (`one of `a`, `b``, `` `a` or `b` ``).
fn expected_names(rest: &str) -> Vec<String> {
    let Some(i) = rest.find("expected") else { return vec![] };
    rest[i..].split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// "did you mean `x`?" for the nearest valid name, else the valid ones.
fn hint(name: &str, valid: &[String], kind: &str) -> String {
    match nearest(name, valid) {
        Some(n) => format!("did you mean `{n}`?"),
        None if valid.is_empty() => "this table takes none".to_string(),
        None => format!("the valid {kind} here: {}", valid.join(", ")),
    }
}

/// The valid name closest to `name`, when it is close enough to be a
/// misspelling (a few edits, or the same word in another case).
pub(super) fn nearest<'a>(name: &str, valid: &'a [String]) -> Option<&'a str> {
    let lower = name.to_lowercase();
    valid
        .iter()
        .map(|v| (strsim::damerau_levenshtein(&lower, &v.to_lowercase()), v))
        .filter(|(d, v)| *d <= (v.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_section_or_key_gets_the_nearest_name() {
        let msg = "unknown field `harnes`, expected one of `name`, `harness`, `predicate`";
        let text = "name = \"x\"\n[harnes]\nrun = 1\n";
        let (field, m) = unknown_name(text, &(12..18), msg).unwrap();
        assert_eq!(field, "harnes");
        assert_eq!(m, "unknown section `harnes`; did you mean `harness`?");
        let msg = "unknown field `scenarioz`, expected `run` or `scenarios`";
        let text = "[harness]\nscenarioz = []\n";
        let (field, m) = unknown_name(text, &(10..19), msg).unwrap();
        assert_eq!(field, "harness.scenarioz");
        assert_eq!(m, "unknown key `scenarioz` in [harness]; did you mean `scenarios`?");
        let msg = "unknown field `zzz`, expected `run` or `scenarios`";
        let text = "[harness]\nzzz = 1\n";
        let (_, m) = unknown_name(text, &(10..13), msg).unwrap();
        assert!(m.ends_with("the valid keys here: run, scenarios"), "{m}");
        assert_eq!(nearest("Predicate", &["predicate".to_string()]), Some("predicate"));
        assert_eq!(unknown_name("", &(0..0), "missing field `run`"), None);
    }
}
