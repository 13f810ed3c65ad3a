//! Property tests (fuzzing) of the parsers of untrusted input: hook
//! payloads, campaign specs, harness results and agent transcripts. No
//! input may make a parser panic, and every rejection must say what is
//! wrong and where (a line, a field).
//!
//! The case counts keep a debug run short; `GADFLY_FUZZ_CASES=N` sets the
//! number of cases of every property for a long run. Each property prints
//! how many inputs it tried.

use std::cell::Cell;
use std::path::Path;
use std::sync::LazyLock;

use gadfly::audit::transcript::{self as audit, Step};
use gadfly::campaign::{self, SpecErrors};
use gadfly::{agent, hook, results};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseResult, TestRunner};
use serde_json::{json, Value};

/// Runs `test` on inputs from `strategy` (`default_cases` of them, or
/// `GADFLY_FUZZ_CASES`), prints how many inputs were tried and fails with
/// the smallest failing input proptest finds.
fn fuzz<S: Strategy>(name: &str, default_cases: u32, strategy: S, test: impl Fn(S::Value) -> TestCaseResult)
where
    S::Value: std::fmt::Debug,
{
    let cases = std::env::var("GADFLY_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_cases);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let tried = Cell::new(0u64);
    let outcome = runner.run(&strategy, |input| {
        tried.set(tried.get() + 1);
        test(input)
    });
    println!("fuzz {name}: {} bad inputs tried", tried.get());
    if let Err(e) = outcome {
        panic!("fuzz {name} failed: {e}");
    }
}

// ---------------------------------------------------------------- shared

/// Strings a parser is likely to special-case, and unicode.
const WORDS: &[&str] = &[
    "",
    " ",
    "a",
    "b",
    "\u{0}",
    "\t\n",
    "ünïcödé ✓",
    "名前",
    "🦀🦀",
    "\u{202e}rtl",
    "{results}",
    "sh run.sh {results}",
    "cargo test",
    "pytest -q",
    "make test",
    "All tests pass. The implementation is complete.",
    "Done! All 18446744073709551615 tests pass.",
    "40/42 tests pass",
    "test result: ok. 18446744073709551615 passed; 18446744073709551615 failed",
    "test result: FAILED. 99999999999999999999 passed; 1 failed",
    "100% tests passed, 18446744073709551615 tests failed out of 1",
    "18446744073709551615 passed, 18446744073709551615 failed",
    "Process exited with code 99999999999999999999\nOutput:\n",
    "Exit code -9223372036854775808",
    "--- FAIL: TestX\nFAIL\tpkg",
    "ok  \tgithub.com/x/y\t0.2s",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![4 => select(WORDS).prop_map(str::to_string), 1 => any::<String>()]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        word().prop_map(Value::from),
    ]
}

fn json_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => select(&[
            "type", "uuid", "sessionId", "message", "content", "payload", "text", "role", "name", "input",
            "id", "tool_use_id", "is_error", "call_id", "arguments", "output", "timestamp", "scenario",
            "correct", "time_us", "baseline_us", "cmd", "command", "hook_event_name", "transcript_path",
        ][..])
        .prop_map(str::to_string),
        1 => word(),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((json_key(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// JSON nested far deeper than any parser should follow, closed or not.
fn deep_nesting() -> impl Strategy<Value = String> {
    (0usize..3000, 0u8..4, any::<bool>()).prop_map(|(depth, kind, closed)| {
        let (open, leaf, close) = match kind {
            0 => ("[", "1", "]"),
            1 => ("{\"a\":", "1", "}"),
            2 => ("{\"message\":{\"content\":", "[]", "}}"),
            _ => ("{\"payload\":[", "{}", "]}"),
        };
        let mut s = open.repeat(depth) + leaf;
        if closed {
            s += &close.repeat(depth);
        }
        s
    })
}

/// Cuts `s` at a character boundary near `at` (a fraction of its length).
fn truncate_at(s: &str, at: f64) -> String {
    let mut n = ((s.len() as f64) * at) as usize;
    while n > 0 && !s.is_char_boundary(n) {
        n -= 1;
    }
    s[..n].to_string()
}

// ---------------------------------------------------------- hook payloads

fn payload_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..256),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        vec((json_key(), json_value()), 0..6)
            .prop_map(|kv| Value::Object(kv.into_iter().collect()).to_string().into_bytes()),
        (json_value(), 0.0f64..1.0).prop_map(|(v, at)| truncate_at(&v.to_string(), at).into_bytes()),
        (json_value(), vec(any::<u8>(), 1..8), any::<prop::sample::Index>()).prop_map(|(v, junk, i)| {
            let mut b = v.to_string().into_bytes();
            let at = i.index(b.len() + 1);
            b.splice(at..at, junk);
            b
        }),
        deep_nesting().prop_map(String::into_bytes),
        select(&["", " \n\t ", "\u{feff}{}", "{}{}", "{} x", "null", "[]", "\"{}\"", "{\"a\":1,}"][..])
            .prop_map(|s| s.as_bytes().to_vec()),
    ]
}

#[test]
fn hook_payloads_never_panic_and_say_what_is_wrong() {
    fuzz("hook::read_payload", 2000, payload_bytes(), |input| {
        let expected_ok = std::str::from_utf8(&input)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .is_some_and(|v| v.is_object());
        match hook::read_payload(&input) {
            Ok(v) => {
                prop_assert!(expected_ok, "accepted {:?}", String::from_utf8_lossy(&input));
                prop_assert!(v.is_object());
            }
            Err(e) => {
                prop_assert!(!expected_ok, "rejected a JSON object: {e}");
                prop_assert!(e.starts_with("the hook payload on stdin "), "{e}");
                prop_assert!(!e.contains('\n'), "{e}");
                let is_utf8 = std::str::from_utf8(&input).is_ok();
                let is_json = is_utf8 && serde_json::from_str::<Value>(std::str::from_utf8(&input).unwrap()).is_ok();
                if !is_utf8 {
                    prop_assert!(e.contains("not UTF-8") && e.contains("index"), "{e}");
                } else if std::str::from_utf8(&input).unwrap().trim().is_empty() {
                    prop_assert!(e.contains("empty"), "{e}");
                } else if !is_json {
                    prop_assert!(e.contains("not valid JSON (line ") && e.contains(", column "), "{e}");
                } else {
                    prop_assert!(e.contains("must be a JSON object, got "), "{e}");
                }
            }
        }
        Ok(())
    });
}

#[test]
fn an_oversized_hook_payload_is_refused_with_its_size() {
    let big = vec![b' '; 16 * 1024 * 1024 + 1];
    let e = hook::read_payload(&big).unwrap_err();
    assert!(e.contains("16777217 bytes, over the 16777216 byte limit"), "{e}");
}

// --------------------------------------------------------- campaign specs

const GOOD_SPEC: &str = r#"name = "t"
workspace = "."
goal = "make it fast"
[harness]
build = "make"
run = "sh run.sh {results}"
timeout_s = 60
scenarios = ["a", "b"]
protected = ["harness/**"]
[constraints]
binary = "libk.so"
banned_symbols = ["cublas"]
[predicate]
correct = true
min_speedup = 1.1
min_geomean_speedup = 1.2
[questions]
mode = "audit"
[gate]
fail = "closed"
unavailable_blocks = 3
"#;

/// One git repository for every spec (the workspace `.`).
static WORKSPACE: LazyLock<tempfile::TempDir> = LazyLock::new(|| {
    let dir = tempfile::tempdir().expect("temp dir");
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .status()
        .expect("git init")
        .success();
    assert!(ok, "git init failed");
    dir
});

const SPEC_FILE: &str = "spec.toml";

/// Every error lies inside the text (line and column, counted in
/// characters), says something, and renders as `file:line:column: ...`.
fn check_located(text: &str, errs: &SpecErrors) -> TestCaseResult {
    prop_assert!(!errs.0.is_empty(), "an error without a problem");
    let lines: Vec<&str> = text.split('\n').collect();
    for e in &errs.0 {
        prop_assert_eq!(e.file.as_str(), SPEC_FILE);
        prop_assert!(e.line >= 1 && e.line <= lines.len(), "line {} of {}: {e}", e.line, lines.len());
        let width = lines[e.line - 1].chars().count();
        prop_assert!(e.column >= 1 && e.column <= width + 1, "column {} of {width}: {e}", e.column);
        prop_assert!(!e.message.trim().is_empty(), "empty message: {e:?}");
        prop_assert!(!e.to_string().contains(['\n', '\r']), "an error over several lines: {e:?}");
        let prefix = format!("{SPEC_FILE}:{}:{}: ", e.line, e.column);
        prop_assert!(e.to_string().starts_with(&prefix), "{e}");
        if let Some(rest) = e.message.strip_prefix("missing field `") {
            let name = rest.split('`').next().unwrap_or("");
            prop_assert!(e.field.ends_with(name), "field {:?} for {e}", e.field);
        }
    }
    Ok(())
}

fn check_spec(text: &str) -> TestCaseResult {
    match campaign::parse(text, SPEC_FILE, WORKSPACE.path()) {
        Ok(spec) => {
            // Whatever is accepted holds the spec's promises.
            prop_assert!(!spec.name.trim().is_empty());
            prop_assert!(spec.workspace.is_dir());
            prop_assert!(spec.harness.run.contains("{results}"), "run without results: {}", spec.harness.run);
            prop_assert!((1..=86_400).contains(&spec.harness.timeout_s));
            prop_assert!(!spec.harness.scenarios.is_empty());
            let unique: std::collections::HashSet<&String> = spec.harness.scenarios.iter().collect();
            prop_assert_eq!(unique.len(), spec.harness.scenarios.len());
            prop_assert!(spec.harness.scenarios.iter().all(|s| !s.trim().is_empty()));
            prop_assert!(spec.predicate.min_speedup.is_finite() && spec.predicate.min_speedup > 0.0);
            prop_assert!(spec.predicate.min_geomean_speedup.is_none_or(|g| g.is_finite() && g > 0.0));
            prop_assert!((1..=1000).contains(&spec.gate.unavailable_blocks));
            prop_assert!(spec.constraints.banned_symbols.is_empty() || spec.constraints.binary.is_some());
            Ok(())
        }
        Err(errs) => check_located(text, &errs),
    }
}

#[test]
fn specs_from_arbitrary_text_never_panic() {
    let text = prop_oneof![
        any::<String>(),
        "[\\[\\]=\"'a-z0-9_., {}\\n#\\\\-]{0,120}",
        deep_nesting().prop_map(|s| format!("x = {}", s.replace(':', "=").replace('"', ""))),
        (0usize..2000).prop_map(|d| format!("x = {}1{}", "[".repeat(d), "]".repeat(d))),
        (0usize..2000).prop_map(|d| format!("x = {}", "{a=".repeat(d))),
    ];
    fuzz("campaign::parse (arbitrary text)", 1000, text, |t| check_spec(&t));
}

/// A TOML value as written in a spec: right and wrong types, edge numbers.
fn toml_value() -> impl Strategy<Value = String> {
    let toml_string = |s: String| toml::Value::String(s).to_string();
    let scalar = prop_oneof![
        select(
            &[
                "\"sh run.sh {results}\"",
                "\".\"",
                "\"\"",
                "\"  \"",
                "\"nowhere\"",
                "\"../..\"",
                "\"/\"",
                "\"audit\"",
                "\"human\"",
                "\"lazy\"",
                "\"open\"",
                "\"closed\"",
                "\"harness/**\"",
                "\"[\"",
                "\"{a,b\"",
                "\"ünïcödé ✓\"",
                "'lit {results}'",
                "\"\"\"multi\nline\"\"\"",
                "0",
                "1",
                "-1",
                "3",
                "600",
                "86400",
                "86401",
                "1000",
                "1001",
                "4294967296",
                "9223372036854775807",
                "-9223372036854775808",
                "0x10",
                "1_000",
                "nan",
                "+nan",
                "-nan",
                "inf",
                "+inf",
                "-inf",
                "0.0",
                "-0.0",
                "1.1",
                "1e308",
                "5e-324",
                "1e-400",
                "true",
                "false",
                "1979-05-27T07:32:00Z",
                "07:32:00",
                "[]",
                "[\"a\"]",
                "[\"a\", \"a\"]",
                "[\"\", \" \"]",
                "{ gpu = \"h200\" }",
                "{ gpu = 1 }",
                "{ \"a b\" = \"c\" }",
                "[1, 2]",
                "[\"a\", 1]",
                "[[\"a\"]]",
                "{}",
                "{ a = 1 }",
                "{ run = \"{results}\" }",
            ][..]
        )
        .prop_map(str::to_string),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| match toml::Value::Float(f).to_string() {
            s if s.contains("NaN") => "nan".into(),
            s => s,
        }),
        word().prop_map(toml_string),
    ];
    scalar.prop_recursive(2, 12, 4, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            vec(("[a-z_]{1,8}", inner), 0..3).prop_map(|kv| {
                let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", body.join(", "))
            }),
        ]
    })
}

const TABLES: &[&str] = &[
    "",
    "harness",
    "constraints",
    "predicate",
    "questions",
    "gate",
    "moments",
    "agent",
    "beam",
    "bogus",
    "harness.tags",
];

fn spec_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => select(&[
            "name", "workspace", "goal", "architecture", "comparison", "domains", "build", "run", "timeout_s",
            "scenarios", "protected", "binary", "banned_symbols", "correct", "min_speedup",
            "min_geomean_speedup", "mode", "fail", "unavailable_blocks", "kind", "start", "tags", "harness",
        ][..])
        .prop_map(str::to_string),
        1 => select(&["nmae", "scenario", "min_sepedup", "\"quoted key\"", "\"名前\"", "a.b", "x"][..])
            .prop_map(str::to_string),
    ]
}

/// An edit of the good spec's entries (table, key, value).
#[derive(Debug, Clone)]
enum Edit {
    Drop(prop::sample::Index),
    Retype(prop::sample::Index, String),
    Add(String, String, String),
    Rename(prop::sample::Index, String),
    DropTable(String),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        2 => any::<prop::sample::Index>().prop_map(Edit::Drop),
        4 => (any::<prop::sample::Index>(), toml_value()).prop_map(|(i, v)| Edit::Retype(i, v)),
        3 => (select(TABLES), spec_key(), toml_value()).prop_map(|(t, k, v)| Edit::Add(t.to_string(), k, v)),
        1 => (any::<prop::sample::Index>(), spec_key()).prop_map(|(i, k)| Edit::Rename(i, k)),
        1 => select(TABLES).prop_map(|t| Edit::DropTable(t.to_string())),
    ]
}

/// The good spec's entries, edited, written back as TOML grouped by table.
fn spec_from_edits(edits: &[Edit]) -> String {
    let mut entries: Vec<(String, String, String)> = Vec::new();
    let mut table = String::new();
    for line in GOOD_SPEC.lines() {
        if let Some(h) = line.strip_prefix('[') {
            table = h.trim_end_matches(']').to_string();
        } else if let Some((k, v)) = line.split_once(" = ") {
            entries.push((table.clone(), k.to_string(), v.to_string()));
        }
    }
    for e in edits {
        match e {
            Edit::Drop(i) if !entries.is_empty() => {
                entries.remove(i.index(entries.len()));
            }
            Edit::Retype(i, v) if !entries.is_empty() => {
                let n = i.index(entries.len());
                entries[n].2 = v.clone();
            }
            Edit::Rename(i, k) if !entries.is_empty() => {
                let n = i.index(entries.len());
                entries[n].1 = k.clone();
            }
            Edit::Add(t, k, v) => entries.push((t.clone(), k.clone(), v.clone())),
            Edit::DropTable(t) => entries.retain(|e| &e.0 != t),
            _ => {}
        }
    }
    let mut order: Vec<&str> = Vec::new();
    for e in &entries {
        if !order.contains(&e.0.as_str()) {
            order.push(&e.0);
        }
    }
    order.sort_by_key(|t| !t.is_empty()); // the root table first
    let mut out = String::new();
    for t in order {
        if !t.is_empty() {
            out += &format!("[{t}]\n");
        }
        for (_, k, v) in entries.iter().filter(|e| e.0 == t) {
            out += &format!("{k} = {v}\n");
        }
    }
    out
}

#[test]
fn specs_from_a_grammar_never_panic_and_name_line_and_field() {
    let specs = vec(edit(), 0..6).prop_map(|edits| spec_from_edits(&edits));
    fuzz("campaign::parse (grammar)", 600, specs, |text| {
        check_spec(&text)?;
        if let Err(errs) = campaign::parse(&text, SPEC_FILE, WORKSPACE.path()) {
            let lines: Vec<&str> = text.split('\n').collect();
            for e in &errs.0 {
                // The text is valid TOML but for duplicated keys, so every
                // error names a field, and the line it points at either
                // writes that field or opens its table (an error about a
                // whole table, or a field it misses).
                prop_assert!(!e.field.is_empty(), "no field: {e}\n{text}");
                if e.message.starts_with("missing field") {
                    let fields = ["name", "workspace", "harness", "harness.run", "harness.scenarios"];
                    prop_assert!(fields.contains(&e.field.as_str()), "{e}\n{text}");
                }
                // (a value written over several lines belongs to the
                // nearest key above it)
                let line = lines[..e.line]
                    .iter()
                    .rev()
                    .map(|l| l.trim())
                    .find(|l| l.contains('=') || l.starts_with('['))
                    .unwrap_or("");
                let last = e.field.rsplit('.').next().unwrap_or("").trim_matches('"');
                let head = e.field.split('.').next().unwrap_or("");
                let key = line.split('=').next().unwrap_or("").trim().trim_matches('"');
                prop_assert!(
                    line.contains(last)
                        || (line.starts_with('[') && line.contains(head))
                        || (!key.is_empty() && e.message.contains(key))
                        || e.line == 1,
                    "error {e} points at line {:?}\n{text}",
                    line
                );
            }
        }
        Ok(())
    });
}

#[test]
fn specs_mutated_at_random_never_panic() {
    let mutated = (vec((any::<prop::sample::Index>(), 0u8..4, word()), 1..4), 0.0f64..=1.0).prop_map(|(ms, cut)| {
        let mut text = GOOD_SPEC.to_string();
        for (i, how, w) in ms {
            let mut at = i.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            match how {
                0 => text.insert_str(at, &w),
                1 => {
                    let end = (at + w.len().max(1)).min(text.len());
                    let end = (end..=text.len()).find(|&e| text.is_char_boundary(e)).unwrap_or(text.len());
                    text.replace_range(at..end, "");
                }
                2 => text.insert(at, '\n'),
                _ => text.insert_str(at, &format!("\n{w} = {w}\n")),
            }
        }
        if cut < 0.3 {
            text = truncate_at(&text, cut / 0.3);
        }
        text
    });
    fuzz("campaign::parse (mutated)", 800, mutated, |t| check_spec(&t));
}

#[test]
fn a_spec_with_several_problems_reports_each_on_its_line() {
    let text = r#"name = ""
workspace = "."
[harness]
run = "sh run.sh"
timeout_s = 0
scenarios = ["名前", "名前", ""]
protected = ["[bad"]
[constraints]
banned_symbols = ["cublas"]
[predicate]
min_speedup = -1.0
min_geomean_speedup = nan
[questions]
mode = "lazy"
[gate]
fail = "ajar"
unavailable_blocks = 0
"#;
    let errs = campaign::parse(text, SPEC_FILE, WORKSPACE.path()).unwrap_err();
    let got: Vec<(usize, &str)> = errs.0.iter().map(|e| (e.line, e.field.as_str())).collect();
    assert_eq!(
        got,
        vec![
            (1, "name"),
            (4, "harness.run"),
            (5, "harness.timeout_s"),
            (6, "harness.scenarios"),
            (6, "harness.scenarios"),
            (7, "harness.protected"),
            (9, "constraints.binary"),
            (11, "predicate.min_speedup"),
            (12, "predicate.min_geomean_speedup"),
            (14, "questions.mode"),
            (16, "gate.fail"),
            (17, "gate.unavailable_blocks"),
        ],
        "{errs}"
    );
    // Columns point at the value, counted in characters.
    let columns: Vec<usize> = errs.0[..5].iter().map(|e| e.column).collect();
    assert_eq!(columns, vec![8, 7, 13, 20, 26], "{errs}");
    let shown = errs.to_string();
    assert_eq!(shown.lines().count(), 12, "{shown}");
    assert!(shown.lines().all(|l| l.starts_with("spec.toml:")), "{shown}");
}

// -------------------------------------------------------- harness results

const RESULT_FIELDS: &[&str] = &[
    "scenario",
    "correct",
    "time_us",
    "baseline_us",
    "max_abs_err_ref",
    "max_abs_err_hi",
    "tolerance",
    "compare_us",
    "bound_us",
    "samples",
    "cv",
    "reason",
];

/// A JSON value as written by a harness, as text: right and wrong types,
/// numbers JSON does not allow.
fn result_value() -> impl Strategy<Value = String> {
    prop_oneof![
        select(
            &[
                "1",
                "10.5",
                "0",
                "-0",
                "-1",
                "-1e-9",
                "1e-300",
                "1e308",
                "1e400",
                "-1e400",
                "NaN",
                "Infinity",
                "-Infinity",
                "nan",
                "01",
                "1.",
                ".5",
                "0x10",
                "1_000",
                "true",
                "false",
                "null",
                "\"10\"",
                "\"\"",
                "\"a\"",
                "\"b\"",
                "\"名前\"",
                "[]",
                "{}",
                "[1]",
                "18446744073709551616",
                "-9223372036854775809",
            ][..]
        )
        .prop_map(str::to_string),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or("null".into(), |n| n.to_string())),
        any::<u64>().prop_map(|n| n.to_string()),
        word().prop_map(|w| Value::from(w).to_string()),
        json_value().prop_map(|v| v.to_string()),
    ]
}

fn result_line() -> impl Strategy<Value = String> {
    let good = (select(&["a", "b", "c", "名前", " "][..]), any::<bool>(), 0.001f64..1e9, 0.001f64..1e9)
        .prop_map(|(s, c, t, b)| json!({"scenario": s, "correct": c, "time_us": t, "baseline_us": b}).to_string());
    let fields =
        vec((prop_oneof![4 => select(RESULT_FIELDS).prop_map(str::to_string), 1 => json_key()], result_value()), 0..8)
            .prop_map(|kv| {
                let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{}: {v}", Value::from(k))).collect();
                format!("{{{}}}", body.join(", "))
            });
    let huge = (0usize..4, 10_000usize..100_000).prop_map(|(kind, n)| match kind {
        0 => json!({"scenario": "x".repeat(n), "correct": true, "time_us": 1, "baseline_us": 2}).to_string(),
        1 => json!({"scenario": "x", "correct": "y".repeat(n), "time_us": 1, "baseline_us": 2}).to_string(),
        2 => json!({"scenario": "x".repeat(n), "correct": true, "time_us": -1, "baseline_us": 2}).to_string(),
        _ => "z".repeat(n),
    });
    prop_oneof![
        4 => good.clone(),
        6 => fields,
        1 => (good, 0.0f64..1.0).prop_map(|(l, at)| truncate_at(&l, at)),
        1 => any::<String>(),
        1 => json_value().prop_map(|v| v.to_string()),
        1 => deep_nesting(),
        1 => select(&["", "   ", "\r", "[1,2]", "\"x\"", "{} {}", "{\"scenario\":\"a\"}trailing"][..])
            .prop_map(str::to_string),
        1 => huge,
    ]
}

#[test]
fn results_never_panic_and_every_problem_names_its_line() {
    let file = (vec((result_line(), 0u8..8), 0..12), any::<bool>()).prop_map(|(lines, crlf)| {
        let mut out: Vec<String> = Vec::new();
        for (l, dup) in lines {
            if dup == 0 && !out.is_empty() {
                out.push(out[out.len() - 1].clone()); // the same scenario twice
            }
            out.push(l);
        }
        out.join(if crlf { "\r\n" } else { "\n" })
    });
    let tried_fields = Cell::new(0usize);
    fuzz("results::parse", 1500, file, |text| {
        let parsed = results::parse(&text);
        let lines: Vec<&str> = text.lines().collect();
        let filled = lines.iter().filter(|l| !l.trim().is_empty()).count();
        prop_assert_eq!(parsed.scenarios.len() + parsed.problems.len(), filled, "every line is read or named");
        let mut last = 0;
        for p in &parsed.problems {
            prop_assert!(!p.contains('\n') && !p.contains('\r'), "{p:?}");
            prop_assert!(p.chars().count() <= 400, "a problem of {} characters", p.chars().count());
            let n: usize = p
                .strip_prefix("results line ")
                .and_then(|r| r.split([':', ' ']).next())
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| TestCaseError::fail(format!("no line number in {p:?}")))?;
            prop_assert!(n > last && n <= lines.len() && !lines[n - 1].trim().is_empty(), "line {n}: {p}");
            last = n;
            let line = lines[n - 1].trim();
            let object = serde_json::from_str::<Value>(line).ok().filter(Value::is_object);
            if object.is_some() && !p.contains("must be a positive number") && !p.contains("more than once") {
                // A line that is a JSON object but no scenario result:
                // the problem names the field.
                tried_fields.set(tried_fields.get() + 1);
                prop_assert!(
                    RESULT_FIELDS.iter().any(|f| p.contains(&format!("`{f}`"))) || p.contains("empty scenario name"),
                    "no field named in {p:?} for {line}"
                );
            }
        }
        let mut seen = std::collections::HashSet::new();
        for s in &parsed.scenarios {
            prop_assert!(!s.scenario.trim().is_empty());
            prop_assert!(seen.insert(s.scenario.clone()), "scenario {} read twice", s.scenario);
            prop_assert!(s.time_us.is_finite() && s.time_us > 0.0 && s.baseline_us.is_finite() && s.baseline_us > 0.0);
        }
        Ok(())
    });
    assert!(tried_fields.get() > 0, "no line reached the field checks");
}

// ------------------------------------------------------------ transcripts

const CALL_IDS: &[&str] = &["t1", "t2", "c1", ""];

fn command() -> impl Strategy<Value = String> {
    prop_oneof![
        select(&["cargo test", "pytest -q", "cd build && ctest", "make test", "git status", "./bench.sh", ""][..])
            .prop_map(str::to_string),
        word(),
    ]
}

fn tool_output() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => word().prop_map(Value::from),
        1 => (any::<u64>(), any::<u64>(), any::<u8>()).prop_map(|(p, f, pct)| Value::from(format!(
            "test result: ok. {p} passed; {f} failed\ntest result: FAILED. {p} passed; {f} failed\n\
             {pct}% tests passed, {f} tests failed out of {p}\n{p} passed, {f} failed\nExit code {p}"
        ))),
        1 => json_value(),
    ]
}

fn claude_block() -> impl Strategy<Value = Value> {
    prop_oneof![
        word().prop_map(|t| json!({"type": "text", "text": t})),
        (select(&["Bash", "Edit", "Write", "apply_patch", "Read", ""][..]), select(CALL_IDS), command(), word())
            .prop_map(|(name, id, cmd, path)| json!({
                "type": "tool_use", "id": id, "name": name, "input": {"command": cmd, "file_path": path}
            })),
        (select(CALL_IDS), tool_output(), any::<Option<bool>>()).prop_map(|(id, out, err)| json!({
            "type": "tool_result", "tool_use_id": id, "content": out, "is_error": err
        })),
        json_value(),
    ]
}

fn claude_row() -> impl Strategy<Value = Value> {
    let content =
        prop_oneof![word().prop_map(Value::from), vec(claude_block(), 0..4).prop_map(Value::Array), json_value(),];
    (select(&["assistant", "user", "summary", "system", ""][..]), prop::option::of(word()), content, json_value())
        .prop_map(|(role, uuid, content, extra)| {
            let mut row = json!({"type": role, "sessionId": "s", "message": {"role": role, "content": content}});
            if let Some(u) = uuid {
                row["uuid"] = Value::from(u);
            }
            if let Value::Object(m) = extra {
                for (k, v) in m {
                    row[k] = v; // wrong shapes for any field
                }
            }
            row
        })
}

fn codex_line() -> impl Strategy<Value = Value> {
    let arguments = prop_oneof![
        command().prop_map(|c| Value::from(json!({"cmd": c}).to_string())),
        command().prop_map(|c| Value::from(json!({"cmd": ["bash", "-lc", c]}).to_string())),
        word().prop_map(Value::from),
        json_value(),
    ];
    (
        select(&["response_item", "event_msg", "session_meta", "turn_context", ""][..]),
        select(
            &[
                "message",
                "function_call",
                "custom_tool_call",
                "function_call_output",
                "custom_tool_call_output",
                "task_complete",
            ][..],
        ),
        select(&["assistant", "user"][..]),
        select(&["exec_command", "shell", "apply_patch", ""][..]),
        select(CALL_IDS),
        arguments,
        tool_output(),
        json_value(),
    )
        .prop_map(|(kind, ptype, role, name, call, args, output, content)| {
            json!({"timestamp": "t", "type": kind, "payload": {
                "type": ptype, "role": role, "name": name, "call_id": call, "arguments": args,
                "output": output, "input": output, "content": content
            }})
        })
}

fn transcript() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        5 => claude_row().prop_map(|v| v.to_string()),
        5 => codex_line().prop_map(|v| v.to_string()),
        1 => (claude_row(), 0.0f64..1.0).prop_map(|(v, at)| truncate_at(&v.to_string(), at)),
        1 => any::<String>(),
        1 => json_value().prop_map(|v| v.to_string()),
        1 => deep_nesting(),
        1 => Just(String::new()),
    ];
    (vec(line, 0..16), any::<bool>(), 0.0f64..=1.0).prop_map(|(lines, newline, cut)| {
        let text = lines.join("\n") + if newline { "\n" } else { "" };
        if cut < 0.2 {
            truncate_at(&text, cut / 0.2)
        } else {
            text
        }
    })
}

fn step_line(s: &Step) -> usize {
    match s {
        Step::Text { line, .. } | Step::Call { line, .. } | Step::Output { line, .. } => *line,
    }
}

#[test]
fn audit_transcripts_never_panic_and_name_their_lines() {
    fuzz("audit::transcript::parse + audit_steps", 1500, transcript(), |text| {
        let (format, steps, problems, lines) = audit::parse(&text, "t.jsonl");
        prop_assert_eq!(lines, text.lines().count());
        prop_assert!(["unknown", "claude-code", "codex-rollout"].contains(&format.as_str()));
        for p in &problems {
            let n: usize = p
                .strip_prefix("t.jsonl:")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| TestCaseError::fail(format!("no line in {p:?}")))?;
            prop_assert!(n >= 1 && n <= lines, "{p}");
            prop_assert!(!p.contains('\n'), "{p:?}");
        }
        prop_assert!(steps.iter().all(|s| (1..=lines).contains(&step_line(s))));
        for c in audit::audit_steps(&steps) {
            prop_assert!((1..=lines).contains(&c.line));
            prop_assert!(!c.why.is_empty());
            prop_assert!(c.evidence.iter().all(|e| e.line <= lines));
        }
        Ok(())
    });
}

#[test]
fn audit_files_of_arbitrary_bytes_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let bytes = prop_oneof![
        vec(any::<u8>(), 0..512),
        (transcript(), vec(any::<u8>(), 0..4), any::<prop::sample::Index>()).prop_map(|(t, junk, i)| {
            let mut b = t.into_bytes();
            let at = i.index(b.len() + 1);
            b.splice(at..at, junk);
            b
        }),
    ];
    fuzz("audit::transcript::audit_file", 500, bytes, |b| {
        std::fs::write(&path, &b).unwrap();
        match audit::audit_file(&path) {
            Ok(r) => {
                prop_assert!(r.problems.iter().all(|p| p.starts_with(&r.file)));
                prop_assert_eq!(r.supported + r.unverified + r.contradicted, r.claims.len());
            }
            Err(e) => prop_assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}"),
        }
        Ok(())
    });
}

#[test]
fn transcript_rows_never_panic() {
    let line = prop_oneof![
        3 => claude_row().prop_map(|v| v.to_string()),
        1 => any::<String>(),
        1 => json_value().prop_map(|v| v.to_string()),
        1 => deep_nesting(),
        1 => (claude_row(), 0.0f64..1.0).prop_map(|(v, at)| truncate_at(&v.to_string(), at)),
    ];
    fuzz("agent::transcript::rows_of", 1500, line, |l| {
        let rows = agent::transcript::rows_of(&l);
        let uuid = serde_json::from_str::<Value>(&l).ok().and_then(|v| v["uuid"].as_str().map(str::to_string));
        for (i, (kind, key, payload)) in rows.iter().enumerate() {
            prop_assert!(["agent.message", "agent.tool_call", "agent.tool_result", "agent.user_message"]
                .contains(&kind.as_str()));
            let u = uuid.as_deref().unwrap_or("<none>");
            prop_assert!(key.starts_with(&format!("cc-transcript:{u}:")), "{key}");
            prop_assert!(i == 0 || rows[i - 1].1 != *key, "duplicate key {key}");
            if let Some(c) = payload["content"].as_str() {
                prop_assert!(c.chars().count() <= 2000);
            }
        }
        Ok(())
    });
}

#[test]
fn transcript_reads_of_arbitrary_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let input = (
        prop_oneof![vec(any::<u8>(), 0..512), transcript().prop_map(String::into_bytes)],
        prop_oneof![Just(0u64), 0u64..600, Just(u64::MAX)],
    );
    fuzz("agent::transcript::read_new_lines", 800, input, |(bytes, offset)| {
        std::fs::write(&path, &bytes).unwrap();
        let (lines, next) = agent::transcript::read_new_lines(Path::new(&path), offset).unwrap();
        let len = bytes.len() as u64;
        let start = if len < offset { 0 } else { offset };
        prop_assert!(next >= start && next <= len, "offset {next} outside {start}..={len}");
        prop_assert!(next == start || bytes[next as usize - 1] == b'\n', "stopped inside a line");
        prop_assert!(lines.iter().all(|l| !l.contains('\n')));
        Ok(())
    });
}
