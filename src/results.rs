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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// The harness's own explanation when `correct` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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
        let result: ScenarioResult = match serde_json::from_value(value) {
            Ok(r) => r,
            Err(e) => {
                parsed.problems.push(format!("results line {n}: {e}"));
                continue;
            }
        };
        if let Some(problem) = check_numbers(&result) {
            parsed.problems.push(format!("results line {n} (scenario {}): {problem}", result.scenario));
            continue;
        }
        if !seen.insert(result.scenario.clone()) {
            parsed.problems.push(format!("results line {n}: scenario {} is reported more than once", result.scenario));
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
    None
}

fn excerpt(line: &str) -> String {
    let mut s: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        s.push('…');
    }
    format!("`{s}`")
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
}
