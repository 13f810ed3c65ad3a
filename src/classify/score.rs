//! Labeled examples and precision/recall per label.

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{Classifier, Label};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    pub id: String,
    pub text: String,
    pub labels: Vec<Label>,
    #[serde(default)]
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelScore {
    pub label: Label,
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
    /// tp / (tp + fp); 1.0 when nothing was predicted.
    pub precision: f64,
    /// tp / (tp + fn); 1.0 when there was nothing to find.
    pub recall: f64,
}

/// Precision and recall per label, in [`Label::ALL`] order.
pub fn score(c: &dyn Classifier, examples: &[Example]) -> Vec<LabelScore> {
    let predicted: Vec<Vec<Label>> = examples.iter().map(|e| c.classify(&e.text)).collect();
    Label::ALL
        .into_iter()
        .map(|label| {
            let (mut tp, mut fp, mut fn_) = (0, 0, 0);
            for (e, p) in examples.iter().zip(&predicted) {
                match (e.labels.contains(&label), p.contains(&label)) {
                    (true, true) => tp += 1,
                    (false, true) => fp += 1,
                    (true, false) => fn_ += 1,
                    (false, false) => {}
                }
            }
            LabelScore::new(label, tp, fp, fn_)
        })
        .collect()
}

impl LabelScore {
    /// The score of these counts.
    pub fn new(label: Label, tp: usize, fp: usize, fn_: usize) -> LabelScore {
        let ratio = |n: usize, d: usize| if d == 0 { 1.0 } else { n as f64 / d as f64 };
        LabelScore { label, tp, fp, fn_, precision: ratio(tp, tp + fp), recall: ratio(tp, tp + fn_) }
    }
}

/// Reads a JSON-lines file of [`Example`]s; blank lines are skipped. Errors
/// name the file and the line.
pub fn load_examples(path: &Path) -> anyhow::Result<Vec<Example>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_examples(&text, &path.display().to_string())
}

/// Parses JSON-lines [`Example`]s; `name` names the source in errors.
pub fn parse_examples(text: &str, name: &str) -> anyhow::Result<Vec<Example>> {
    let mut out = Vec::new();
    let mut ids = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: Example =
            serde_json::from_str(line).with_context(|| format!("{name}:{}: not a labeled example", i + 1))?;
        if !ids.insert(e.id.clone()) {
            anyhow::bail!("{name}:{}: duplicate id {:?}", i + 1, e.id);
        }
        out.push(e);
    }
    Ok(out)
}
