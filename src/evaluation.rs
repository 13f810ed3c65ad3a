//! What one evaluation of a candidate found: the tree evaluated, the
//! predicate's verdict, the build and run steps and the violations. The
//! harness produces it; the store keeps it, the gate, the moment detectors
//! and the event vocabulary read it. A plain data type, so those readers do
//! not depend on the machine that runs evaluations.

use serde::{Deserialize, Serialize};

use crate::predicate::Verdict;

/// One command of an evaluation and how it ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Step {
    pub command: String,
    pub ok: bool,
    pub exit: String,
    pub seconds: f64,
    /// The last lines the command printed.
    pub output_tail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evaluation {
    /// The database id once stored.
    #[serde(default)]
    pub id: Option<i64>,
    /// The git tree id of the snapshot that was evaluated.
    pub tree: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    pub build: Option<Step>,
    pub run: Option<Step>,
    pub violations: Vec<String>,
    pub duration_ms: u64,
    pub created_at: String,
    /// True when this answer came from the cache, not a new run.
    #[serde(default)]
    pub cached: bool,
}
