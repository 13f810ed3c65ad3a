//! The lexicons of the rules and the model: word lists, word classes and
//! token patterns, one data file each under `src/classify/data/` (formats in
//! its `README.md`). Each file is embedded with `include_str!` and parsed
//! once, at first use; an embedded file that does not parse is a bug, so
//! first use panics with the file and line (the tests parse every file).

use std::sync::LazyLock;

use super::pattern::Pattern;

/// A line of a data file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DataError {
    /// The file, relative to `src/classify/data/`.
    pub path: String,
    /// 1-based.
    pub line: usize,
    pub msg: String,
}

impl std::fmt::Display for DataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "src/classify/data/{}:{}: {}", self.path, self.line, self.msg)
    }
}

impl std::error::Error for DataError {}

/// The entries of a data file: (line number, text) of each line that is not
/// blank or a `#` comment, trimmed.
fn entries(text: &'static str) -> impl Iterator<Item = (usize, &'static str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// Checks one word of a word list or class: a single lower-case token (the
/// tokenizer lower-cases everything, so an upper-case entry never matches).
fn check_word(w: &str, prefix_ok: bool) -> Result<(), String> {
    if w.contains(char::is_whitespace) {
        return Err(format!("{w:?}: one word per line"));
    }
    if w.contains('#') {
        return Err(format!("{w:?}: a comment goes on its own line, starting with `#`"));
    }
    if w.chars().any(char::is_uppercase) {
        return Err(format!("{w:?}: words are lower case"));
    }
    let stem = if prefix_ok { w.strip_suffix('*').unwrap_or(w) } else { w };
    if stem.is_empty() || stem.contains(['*', '<', '>', '|', '~']) {
        return Err(format!("{w:?}: not a word{}", if prefix_ok { " or a prefix (`word*`)" } else { "" }));
    }
    Ok(())
}

/// A word list: one lower-case word per line.
pub(super) fn parse_words(path: &str, text: &'static str) -> Result<Vec<&'static str>, DataError> {
    entries(text)
        .map(|(line, w)| check_word(w, false).map(|()| w).map_err(|msg| DataError { path: path.into(), line, msg }))
        .collect()
}

/// Token patterns: one per line.
pub(super) fn parse_patterns(path: &str, text: &'static str) -> Result<Vec<Pattern>, DataError> {
    entries(text)
        .map(|(line, p)| {
            if p.contains('#') {
                return Err(DataError {
                    path: path.into(),
                    line,
                    msg: "a comment goes on its own line, starting with `#`".into(),
                });
            }
            Pattern::parse(p).map_err(|msg| DataError { path: path.into(), line, msg })
        })
        .collect()
}

/// Word classes: `[name]` starts a class, then one word or prefix
/// (`word*`) per line. The classes keep their order.
pub(super) fn parse_classes(path: &str, text: &'static str) -> Result<Vec<WordClass>, DataError> {
    let err = |line: usize, msg: String| DataError { path: path.into(), line, msg };
    let mut out: Vec<WordClass> = Vec::new();
    let mut header_line = 0;
    for (line, e) in entries(text) {
        if let Some(name) = e.strip_prefix('[') {
            let name = name
                .strip_suffix(']')
                .filter(|n| {
                    !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                })
                .ok_or_else(|| err(line, format!("{e:?}: a class header is `[name]`, the name in lower case")))?;
            if out.iter().any(|(n, _)| *n == name) {
                return Err(err(line, format!("class [{name}] defined twice")));
            }
            if let Some((prev, words)) = out.last() {
                if words.is_empty() {
                    return Err(err(header_line, format!("class [{prev}] is empty")));
                }
            }
            out.push((name, Vec::new()));
            header_line = line;
            continue;
        }
        let Some((_, words)) = out.last_mut() else {
            return Err(err(line, format!("{e:?} before the first `[class]` header")));
        };
        check_word(e, true).map_err(|msg| err(line, msg))?;
        words.push(e);
    }
    if let Some((prev, words)) = out.last() {
        if words.is_empty() {
            return Err(err(header_line, format!("class [{prev}] is empty")));
        }
    }
    Ok(out)
}

/// A named word class: `<name>` in a pattern.
pub(super) type WordClass = (&'static str, Vec<&'static str>);

/// Declares each lexicon as a static parsed at first use from its embedded
/// data file, and `all_files`, every file with its parse, for the tests.
macro_rules! lexicons {
    ($($(#[$doc:meta])* $name:ident: $ty:ty = $parse:ident($path:literal);)*) => {
        $(
            $(#[$doc])*
            pub(super) static $name: LazyLock<$ty> = LazyLock::new(|| {
                $parse($path, include_str!(concat!("data/", $path))).unwrap_or_else(|e| panic!("{e}"))
            });
        )*

        /// Every data file: its path under `data/` and its number of
        /// entries, or the error.
        #[cfg(test)]
        pub(super) fn all_files() -> Vec<(&'static str, Result<usize, DataError>)> {
            vec![$(($path, $parse($path, include_str!(concat!("data/", $path))).map(|v| v.len()))),*]
        }
    };
}

lexicons! {
    /// Word classes for the cue-family patterns (`<name>`).
    CLASSES: Vec<WordClass> = parse_classes("word_classes.txt");

    // The rules, per label (see `RuleClassifier::default` for how each
    // file's matches are checked).
    LIMIT: Vec<Pattern> = parse_patterns("rules/limit.txt");
    LIMIT_NEGATED: Vec<Pattern> = parse_patterns("rules/limit_negated.txt");
    LIMIT_FAMILIES: Vec<Pattern> = parse_patterns("rules/limit_families.txt");
    COMPLETION: Vec<Pattern> = parse_patterns("rules/completion.txt");
    COMPLETION_FAMILIES: Vec<Pattern> = parse_patterns("rules/completion_families.txt");
    DISMISSAL: Vec<Pattern> = parse_patterns("rules/dismissal.txt");
    DISMISSAL_NEAR_FAILURE: Vec<Pattern> = parse_patterns("rules/dismissal_near_failure.txt");
    DISMISSAL_FAMILIES: Vec<Pattern> = parse_patterns("rules/dismissal_families.txt");
    GAIN: Vec<Pattern> = parse_patterns("rules/gain.txt");

    // Message-level checks (and the model's `<ctx_*>` features).
    GAIN_SKEPTIC: Vec<Pattern> = parse_patterns("context/gain_skeptic.txt");
    GAIN_NEGATIVE: Vec<Pattern> = parse_patterns("context/gain_negative.txt");
    GAIN_TIMING: Vec<Pattern> = parse_patterns("context/gain_timing.txt");
    GAIN_CORRECT: Vec<Pattern> = parse_patterns("context/gain_correct.txt");
    FAILURE: Vec<Pattern> = parse_patterns("context/failure.txt");
    DISMISSAL_VERIFIED: Vec<Pattern> = parse_patterns("context/dismissal_verified.txt");
    DISMISSAL_ANTI: Vec<Pattern> = parse_patterns("context/dismissal_anti.txt");
    DISMISSAL_ANTI_ASSERTED: Vec<Pattern> = parse_patterns("context/dismissal_anti_asserted.txt");
    HEADROOM: Vec<Pattern> = parse_patterns("context/headroom.txt");
    UNFINISHED: Vec<Pattern> = parse_patterns("context/unfinished.txt");

    // Word lists.
    /// Strong libraries (`<lib>`).
    LIBRARIES: Vec<&'static str> = parse_words("words/libraries.txt");
    /// Negation cues in the few tokens before a match (same clause).
    NEGATORS: Vec<&'static str> = parse_words("words/negators.txt");
    /// Plans, intentions, hedges and conditions in the same clause before a match.
    PLAN: Vec<&'static str> = parse_words("words/plan.txt");
    /// Verbs after "I would" that state an opinion rather than a plan.
    OPINION: Vec<&'static str> = parse_words("words/opinion.txt");
    /// Plan cues that count only right before the match ("to beat", "to become").
    PLAN_IMMEDIATE: Vec<&'static str> = parse_words("words/plan_immediate.txt");
    /// Words that open a conditional sentence: at its start, they govern it.
    CONDITIONAL_OPENERS: Vec<&'static str> = parse_words("words/conditional_openers.txt");
    /// Accuracy words: a "limit" whose subject is one of these is about precision.
    ACCURACY: Vec<&'static str> = parse_words("words/accuracy.txt");
    /// Words that open a time clause: it governs the sentence up to its first comma.
    TIME_OPENERS: Vec<&'static str> = parse_words("words/time_openers.txt");
    /// Connectives that end the reach of a sentence-initial condition.
    CONNECTIVES: Vec<&'static str> = parse_words("words/connectives.txt");
    /// Reported speech: the claim is someone else's (or an earlier one).
    REPORTED: Vec<&'static str> = parse_words("words/reported.txt");
    /// Subjects that make "X completed successfully" a step, not the work.
    STEP_SUBJECTS: Vec<&'static str> = parse_words("words/step_subjects.txt");
    /// Words that, alone or opening a short line, announce finished work.
    HEADLINE_FIRST: Vec<&'static str> = parse_words("words/headline_first.txt");
    /// Words that, ending a short line, announce finished work.
    HEADLINE_LAST: Vec<&'static str> = parse_words("words/headline_last.txt");
    /// Words that, opening a short line, make it no headline.
    HEADLINE_OPENERS: Vec<&'static str> = parse_words("words/headline_openers.txt");
    /// Abbreviations whose `.` does not end a sentence.
    ABBREVIATIONS: Vec<&'static str> = parse_words("words/abbreviations.txt");
    /// Words whose `'s` is read as "is".
    IS_CONTRACTED: Vec<&'static str> = parse_words("words/is_contracted.txt");
    /// Words that open a negation scope (the model's `NOT_` features).
    NEG_OPENERS: Vec<&'static str> = parse_words("words/neg_openers.txt");
    /// Words that join two measurements (the model's `<ratio>`).
    RATIO_JOINERS: Vec<&'static str> = parse_words("words/ratio_joiners.txt");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_data_file_parses_and_is_not_empty() {
        let files = all_files();
        assert_eq!(files.len(), 38);
        for (path, parsed) in files {
            match parsed {
                Ok(n) => assert!(n > 0, "src/classify/data/{path} has no entries"),
                Err(e) => panic!("{e}"),
            }
        }
        // The statics themselves (each forces its parse).
        assert_eq!(CLASSES.len(), 11);
        assert!(LIMIT.len() > 10 && NEGATORS.contains(&"not") && LIBRARIES.contains(&"cublas"));
    }

    /// Every file under `data/` is declared above, so none is silently unused.
    #[test]
    fn every_file_in_the_data_directory_is_declared() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/classify/data");
        let declared: Vec<&str> = all_files().into_iter().map(|(p, _)| p).collect();
        let mut found = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "txt") {
                    found.push(p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/"));
                }
            }
        }
        found.sort();
        let mut want: Vec<String> = declared.iter().map(|p| p.to_string()).collect();
        want.sort();
        assert_eq!(found, want);
    }

    #[test]
    fn a_malformed_line_is_reported_with_its_file_and_line() {
        let e = parse_words("words/x.txt", "# a comment\n\nnot\nnot this\n").unwrap_err();
        assert_eq!((e.path.as_str(), e.line), ("words/x.txt", 4));
        assert!(e.to_string().starts_with("src/classify/data/words/x.txt:4: "), "{e}");
        let e = parse_words("words/x.txt", "not\ncuBLAS\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = parse_words("words/x.txt", "not # a trailing comment\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");

        let e = parse_patterns("rules/x.txt", "# c\nall done\nat the ~x limit\n").unwrap_err();
        assert_eq!((e.path.as_str(), e.line), ("rules/x.txt", 3));
        assert!(e.to_string().starts_with("src/classify/data/rules/x.txt:3: "), "{e}");
        for bad in ["at the <nosuchclass>", "maybe? done", "all done # trailing", "beat cuBLAS"] {
            let e =
                parse_patterns("rules/x.txt", Box::leak(format!("all done\n{bad}\n").into_boxed_str())).unwrap_err();
            assert_eq!(e.line, 2, "{bad:?}: {e}");
        }
        assert_eq!(parse_patterns("rules/x.txt", "all done\n\n# c\nat the <limitnoun>\n").unwrap().len(), 2);

        let e = parse_classes("word_classes.txt", "[a]\nx\n[b]\n\n[c]\ny\n").unwrap_err();
        assert_eq!(e.line, 3, "an empty class, at its header: {e}");
        let e = parse_classes("word_classes.txt", "x\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        let e = parse_classes("word_classes.txt", "[a]\nx\n[a]\ny\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = parse_classes("word_classes.txt", "[a]\nx\ny z\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let ok = parse_classes("word_classes.txt", "# c\n[a]\nx\nflak*\n[b]\ny\n").unwrap();
        assert_eq!(ok, vec![("a", vec!["x", "flak*"]), ("b", vec!["y"])]);
    }
}
