//! Text classifiers for an agent's messages: the moments at which gadfly
//! asks a pointed question.
//!
//! Four labels, any subset per message:
//! - `limit_claim`: further gains declared impossible or not worth it, a
//!   hardware or theoretical limit claimed.
//! - `completion_claim`: the work (a task, a phase, the whole job) declared
//!   finished.
//! - `correctness_dismissal`: a failing check or numerical mismatch explained
//!   away (tolerance, noise, flakiness, a wrong reference, "pre-existing").
//! - `suspicious_gain_claim`: a large speed-up, or a win over a strong
//!   library, reported without verification.
//!
//! The [`RuleClassifier`] works on prose only: fenced code, block quotes,
//! inline code and quoted spans are dropped first. Each remaining sentence is
//! tokenized (lower case, contractions expanded, `6.8×` read as a multiplier)
//! and matched against small token patterns per label. A match counts only if
//! it is asserted: not negated, not a question, not a plan or a condition, not
//! reported speech. Message-level checks then drop claims the message itself
//! undercuts (skepticism about a speed-up, evidence that a failure was
//! verified, an explicit "not done yet").
//!
//! Everything sits behind [`Classifier`]; [`score`] and [`load_examples`]
//! evaluate any classifier on a labeled set (see `tests/data/README.md`).
//! [`HybridClassifier`], the one gadfly uses, gives a label when the rules
//! do or when a logistic regression over word features (see `model.rs`) is
//! confident of it ([`THRESHOLDS`]); for a label only the model gives,
//! `explain` cites the sentence the model scores highest.
//!
//! How far to trust it: the figures on messages the rules had not seen are
//! the only honest ones, and every round was then tuned on, so each is an
//! upper bound for the next. Rules v1 (phrase lists) on rounds written after
//! freezing: precision 0.75-1.0 per label, recall about 1.0 for suspicious
//! gains, 0.5-0.9 for completion claims and only 0.1-0.55 for limit claims
//! and dismissals. Rules v2 add cue families (`data/rules/*_families.txt`).
//! On a set of 240 messages by
//! another author (`blind1`), never seen by the rules' author, rules v2
//! scored precision 0.96-1.0 but recall only 0.52 (limit), 0.69
//! (completion), 0.54 (dismissal) and 0.32 (gain): wording escapes the rules.
//! The hybrid's model is trained on every labeled set, blind1 included, so
//! its table figures (about 1.0) are a fit. Cross-validated (5 folds, the
//! model trained on the other four), rules OR model scores precision
//! 0.94-0.96 and recall 0.94-0.96 over all sets, but the rules fit most of
//! them; on the blind1 examples alone, where the rules are blind too:
//! precision 0.93-0.98, recall 0.88 (limit), 0.82 (completion), 0.79
//! (dismissal), 0.81 (gain). With the model trained without blind1 at all,
//! blind1 recall is 0.79, 0.82, 0.75 and 0.64: a new author's wording, gain
//! claims above all, is still partly missed. On real transcripts the model's
//! own completion claims are the weak spot (precision 0.84 alone).
//! On real text from other authors the figures are far lower. Scored on
//! 4,298 labelled messages of 14 public sources (`tests/data/moments/`,
//! `gadfly moments eval`, `corpus.rs`), the shipped hybrid reaches, pooled:
//! limit claims P 0.68 / R 0.28, completion claims 0.60 / 0.54, dismissals
//! 0.11 / 0.26, gain claims 0.22 / 0.53 (the rules were tuned on one of
//! the sources, so these are upper bounds there). A sentence model trained
//! on the claims' spans (`sentence_model.rs`) finds limit claims at 0.58 /
//! 0.60 leave-one-source-out, but only 0.29 precise on the GPU-kernel
//! sessions; it is measured, not shipped.
//! A label is a good reason to look; no label is weak evidence of absence.
//! [`RuleClassifier::default`] copies a few hundred patterns (read from the
//! data files once per process), so build it once and share it (it is
//! `Send + Sync`); the hybrid's model is not trained by the process: it
//! is read at first use from `trained/model.txt`, which `gadfly moments
//! train` writes from the embedded sets (see `stored.rs`), and shared.
//!
//! Layout: the word lists and token patterns are data, one file per lexicon
//! under `src/classify/data/` (formats in its `README.md`), embedded with
//! `include_str!` and parsed at first use by `lexicon.rs`. The code:
//! `text.rs` (prose, sentences, tokens), `pattern.rs` (the pattern language
//! and its matcher), `rules.rs` ([`RuleClassifier`]: the rules and their
//! vetoes), `model.rs` ([`HybridClassifier`] and its logistic regression),
//! `score.rs` (labeled examples and precision/recall).

use serde::{Deserialize, Serialize};

pub mod corpus;
mod lexicon;
mod model;
mod pattern;
mod rules;
mod score;
pub mod sentence_model;
pub mod stored;
mod text;

#[cfg(test)]
mod tests;

pub use model::{
    cross_validate, training_examples, CvReport, HybridClassifier, LinearModel, ModelConfig, CV_MIN_PRECISION,
    THRESHOLDS,
};
pub use rules::RuleClassifier;
pub use score::{load_examples, parse_examples, score, Example, LabelScore};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    LimitClaim,
    CompletionClaim,
    CorrectnessDismissal,
    SuspiciousGainClaim,
}

impl Label {
    pub const ALL: [Label; 4] =
        [Label::LimitClaim, Label::CompletionClaim, Label::CorrectnessDismissal, Label::SuspiciousGainClaim];

    pub fn as_str(self) -> &'static str {
        match self {
            Label::LimitClaim => "limit_claim",
            Label::CompletionClaim => "completion_claim",
            Label::CorrectnessDismissal => "correctness_dismissal",
            Label::SuspiciousGainClaim => "suspicious_gain_claim",
        }
    }

    pub fn parse(s: &str) -> Option<Label> {
        Label::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One interface so a stronger classifier can replace the rules.
pub trait Classifier: Send + Sync {
    /// The labels of one message, each at most once, in [`Label::ALL`] order.
    fn classify(&self, text: &str) -> Vec<Label>;
    fn name(&self) -> &'static str;
}
