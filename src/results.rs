//! The harness results contract: JSON lines, one object per scenario.
//! Every line is checked; a malformed one is reported with its line number
//! and never read as a pass.

use serde::{Deserialize, Serialize};

/// One scenario as the harness measured it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioResult {
    pub scenario: String,
    pub correct: bool,
    pub time_us: f64,
    pub baseline_us: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_err_ref: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_err_hi: Option<f64>,
    /// The absolute tolerance `atol`. Alone (no `rtol`), a bound on the
    /// largest absolute error; with `rtol`, the absolute part of the
    /// elementwise test `|out - ref| <= atol + rtol * |ref|`.
    #[serde(default, alias = "atol", skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    /// The relative part of an elementwise tolerance, when the harness
    /// judges `|out - ref| <= atol + rtol * |ref|`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// The largest `|out - ref| / (atol + rtol * |ref|)` the harness saw
    /// over every element it compared: at most 1 when every element is
    /// within tolerance. The cross-check of an elementwise harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tol_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// The initial kernel's spread (coefficient of variation of its
    /// samples), when the harness reports it apart from the candidate's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_cv: Option<f64>,
    /// The harness's own explanation when `correct` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set by the harness when its timing of this scenario cannot be
    /// trusted, with why (an outside stall of a timed call, another
    /// process's work on the device): the scenario does not pass, and it
    /// is not the candidate's fault. Never a verdict on correctness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cannot_tell: Option<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
pub struct Parsed {
    pub scenarios: Vec<ScenarioResult>,
    /// Problems with the file itself, each naming its line.
    pub problems: Vec<String>,
}

/// Parses the results file's text. Blank lines are skipped; anything else
/// that is not a valid scenario object is a problem.
pub fn parse(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                parsed.problems.push(format!("results line {n}: not valid JSON ({e}): {}", excerpt(line)));
                continue;
            }
        };
        if !value.is_object() {
            parsed.problems.push(format!("results line {n}: expected a JSON object, got {}", excerpt(line)));
            continue;
        }
        let result = match ScenarioResult::deserialize(&value) {
            Ok(r) => r,
            Err(e) => {
                let why = wrong_field(&value).unwrap_or_else(|| clip(&e.to_string(), 200));
                parsed.problems.push(format!("results line {n}: {why}"));
                continue;
            }
        };
        if let Some(problem) = check_numbers(&result) {
            parsed.problems.push(format!("results line {n} (scenario {}): {problem}", excerpt(&result.scenario)));
            continue;
        }
        if !seen.insert(result.scenario.clone()) {
            parsed
                .problems
                .push(format!("results line {n}: scenario {} is reported more than once", excerpt(&result.scenario)));
            continue;
        }
        parsed.scenarios.push(result);
    }
    parsed
}

fn check_numbers(r: &ScenarioResult) -> Option<String> {
    if r.scenario.trim().is_empty() {
        return Some("empty scenario name".into());
    }
    for (name, v) in [("time_us", r.time_us), ("baseline_us", r.baseline_us)] {
        if !v.is_finite() || v <= 0.0 {
            return Some(format!("{name} must be a positive number, got {v}"));
        }
    }
    if let Some(v) = r.compare_us {
        if !v.is_finite() || v <= 0.0 {
            return Some(format!("compare_us must be a positive number when given, got {v}"));
        }
    }
    for (name, v) in [
        ("tolerance", r.tolerance),
        ("rtol", r.rtol),
        ("max_tol_ratio", r.max_tol_ratio),
        ("cv", r.cv),
        ("baseline_cv", r.baseline_cv),
    ] {
        if let Some(v) = v {
            if !v.is_finite() || v < 0.0 {
                return Some(format!("{name} must be a number >= 0 when given, got {v}"));
            }
        }
    }
    None
}

/// The field of a result object whose value has the wrong type, named:
/// serde's own message ("invalid type: null, expected a string") does not
/// say which field it is about.
fn wrong_field(object: &serde_json::Value) -> Option<String> {
    fn check<'a, T: Deserialize<'a>>(object: &'a serde_json::Value, name: &str) -> Option<String> {
        let value = object.get(name)?;
        T::deserialize(value).err().map(|e| format!("field `{name}`: {}", clip(&e.to_string(), 200)))
    }
    check::<String>(object, "scenario")
        .or_else(|| check::<bool>(object, "correct"))
        .or_else(|| check::<f64>(object, "time_us"))
        .or_else(|| check::<f64>(object, "baseline_us"))
        .or_else(|| check::<Option<f64>>(object, "max_abs_err_ref"))
        .or_else(|| check::<Option<f64>>(object, "max_abs_err_hi"))
        .or_else(|| check::<Option<f64>>(object, "tolerance"))
        .or_else(|| check::<Option<f64>>(object, "atol"))
        .or_else(|| check::<Option<f64>>(object, "rtol"))
        .or_else(|| check::<Option<f64>>(object, "max_tol_ratio"))
        .or_else(|| check::<Option<f64>>(object, "compare_us"))
        .or_else(|| check::<Option<f64>>(object, "bound_us"))
        .or_else(|| check::<Option<u64>>(object, "samples"))
        .or_else(|| check::<Option<f64>>(object, "cv"))
        .or_else(|| check::<Option<f64>>(object, "baseline_cv"))
        .or_else(|| check::<Option<String>>(object, "reason"))
}

/// At most `n` characters of `s` on one line (control characters escaped).
fn clip(s: &str, n: usize) -> String {
    let mut out = String::new();
    for c in s.chars().take(n) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if s.chars().count() > n {
        out.push('…');
    }
    out
}

fn excerpt(line: &str) -> String {
    format!("`{}`", clip(line, 80))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_good_lines_and_names_bad_ones() {
        let text = r#"{"scenario":"a","correct":true,"time_us":10,"baseline_us":20,"cv":0.01}

not json
{"scenario":"b","correct":true,"time_us":0,"baseline_us":20}
{"scenario":"c","time_us":1,"baseline_us":2}
[1,2]
{"scenario":"a","correct":true,"time_us":10,"baseline_us":20}
"#;
        let p = parse(text);
        assert_eq!(p.scenarios.len(), 1);
        assert_eq!(p.scenarios[0].cv, Some(0.01));
        assert_eq!(p.problems.len(), 5, "{:?}", p.problems);
        assert!(p.problems[0].starts_with("results line 3: not valid JSON"));
        assert!(p.problems[1].contains("time_us must be a positive number"));
        assert!(p.problems[2].contains("missing field `correct`"));
        assert!(p.problems[3].starts_with("results line 6: expected a JSON object"));
        assert!(p.problems[4].contains("more than once"));
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named() {
        // Found by tests/fuzz_parsers.rs: serde's message alone ("invalid
        // type: null, expected a string") did not say which field.
        let p = parse("{\"scenario\": null}\n{\"scenario\":\"a\",\"correct\":\"yes\",\"time_us\":1,\"baseline_us\":2}");
        assert_eq!(p.problems[0], "results line 1: field `scenario`: invalid type: null, expected a string");
        assert_eq!(p.problems[1], "results line 2: field `correct`: invalid type: string \"yes\", expected a boolean");
        let long =
            format!("{{\"scenario\":\"{}\n\",\"correct\":true,\"time_us\":-1,\"baseline_us\":2}}", "x".repeat(5000));
        let p = parse(&long);
        assert!(p.problems[0].chars().count() < 200 && !p.problems[0].contains('\n'), "{}", p.problems[0]);
    }

    #[test]
    fn the_tolerance_model_is_read_and_checked() {
        let p = parse(
            "{\"scenario\":\"a\",\"correct\":true,\"time_us\":1,\"baseline_us\":2,\"atol\":0.01,\"rtol\":0.01,\"max_tol_ratio\":0.7}\n\
             {\"scenario\":\"b\",\"correct\":true,\"time_us\":1,\"baseline_us\":2,\"tolerance\":0.01,\"rtol\":-1}\n\
             {\"scenario\":\"c\",\"correct\":true,\"time_us\":1,\"baseline_us\":2,\"compare_us\":0}",
        );
        assert_eq!(p.scenarios.len(), 1, "{:?}", p.problems);
        let a = &p.scenarios[0];
        assert_eq!((a.tolerance, a.rtol, a.max_tol_ratio), (Some(0.01), Some(0.01), Some(0.7)));
        assert_eq!(p.problems[0], "results line 2 (scenario `b`): rtol must be a number >= 0 when given, got -1");
        assert!(p.problems[1].contains("compare_us must be a positive number"), "{:?}", p.problems);
    }
}
