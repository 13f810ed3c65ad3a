//! The sentence classifier (issue 48): a logistic regression that scores
//! each sentence of a message, trained on the spans of labelled real agent
//! text, with the rules' verdicts and the message's context as features.
//!
//! A message carries a label when one of its sentences scores at or above
//! the label's threshold, and that sentence is the claim it quotes. Trained
//! on sentences rather than whole messages, a claim in a long report is
//! not diluted by the report's other sentences, and the model learns where
//! the rules are wrong on real text (a rule verdict is a feature, not the
//! decision).
//!
//! Features of a sentence: those of the message model
//! ([`super::model`]: words, classes, stems, bigrams, cues), the cues of
//! the context before the message (`<cx_*>`), `<rule_L>` when the rules
//! cite this sentence for label L and `<rulemsg_L>` when they give L to the
//! message, and `<first>` / `<last>` for its place in the message.
//!
//! A sentence is a positive of label L when the message carries L and the
//! labelled span of L overlaps it; a message labelled L whose span was not
//! found gives its rule-cited sentences as the positives.

use std::collections::BTreeMap;

use super::model::{context_features, sentence_features, sigmoid, LinearModel, ModelConfig};
use super::text::{prose, sentences};
use super::{Label, RuleClassifier};

/// One message to train on.
pub struct Doc<'a> {
    pub text: &'a str,
    pub context: &'a str,
    pub labels: &'a [Label],
    pub spans: &'a BTreeMap<Label, [usize; 2]>,
}

/// The training configuration of the sentence model: positives are rarer
/// among sentences than among messages, so they weigh more.
pub fn config() -> ModelConfig {
    ModelConfig { pos_weight: 4.0, epochs: 12, ..ModelConfig::default() }
}

/// The sentences of a message with their features.
pub fn featurize(rules: &RuleClassifier, text: &str, context: &str, cfg: &ModelConfig) -> Vec<(String, Vec<String>)> {
    featurize_with(&rules.explain(text), text, context, cfg)
}

/// [`featurize`] with the rules' evidence for the message already at hand.
fn featurize_with(ev: &[(Label, String)], text: &str, context: &str, cfg: &ModelConfig) -> Vec<(String, Vec<String>)> {
    let sents = sentences(&prose(text));
    let ctx = context_features(context);
    let n = sents.len();
    sents
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let mut f = sentence_features(&s, cfg);
            f.extend(ctx.iter().cloned());
            for (label, q) in ev {
                if *q == s {
                    f.push(format!("<rule_{label}>"));
                }
                f.push(format!("<rulemsg_{label}>"));
            }
            if i == 0 {
                f.push("<first>".into());
            }
            if i + 1 == n {
                f.push("<last>".into());
            }
            (s, f)
        })
        .collect()
}

/// A message made ready for training and scoring: its sentences, their
/// features and, per sentence, the targets (1.0 where the label's span
/// lies). Preparing once lets cross-validation train many models cheaply.
pub struct Prepared {
    pub sents: Vec<(String, Vec<String>)>,
    pub ys: Vec<[f64; 4]>,
}

/// Prepares one labelled message.
pub fn prepare(rules: &RuleClassifier, d: &Doc<'_>, cfg: &ModelConfig) -> Prepared {
    let ev = rules.explain(d.text);
    let sents = featurize_with(&ev, d.text, d.context, cfg);
    let sents_len = sents.len();
    let ys = sents
        .iter()
        .map(|(s, _)| {
            std::array::from_fn(|l| {
                let label = Label::ALL[l];
                let on = d.labels.contains(&label)
                    && match d.spans.get(&label) {
                        Some(span) => super::corpus::overlaps(d.text, s, *span),
                        // No span: the rules' sentence, or a message of one sentence.
                        None => ev.iter().any(|(x, q)| *x == label && q == s) || sents_len == 1,
                    };
                if on {
                    1.0
                } else {
                    0.0
                }
            })
        })
        .collect();
    Prepared { sents, ys }
}

/// Trains the sentence model on prepared messages. Deterministic.
pub fn fit(docs: &[&Prepared], cfg: &ModelConfig) -> LinearModel {
    let feats: Vec<&[String]> = docs.iter().flat_map(|d| d.sents.iter().map(|(_, f)| f.as_slice())).collect();
    let ys: Vec<[f64; 4]> = docs.iter().flat_map(|d| d.ys.iter().copied()).collect();
    LinearModel::fit(&feats, &ys, cfg)
}

/// Trains the sentence model on labelled messages. Deterministic.
pub fn train(rules: &RuleClassifier, docs: &[Doc<'_>], cfg: &ModelConfig) -> LinearModel {
    let prepared: Vec<Prepared> = docs.iter().map(|d| prepare(rules, d, cfg)).collect();
    fit(&prepared.iter().collect::<Vec<_>>(), cfg)
}

/// Per label, the highest sentence probability of a prepared message and
/// that sentence's index.
pub fn best_sentences(model: &LinearModel, sents: &[(String, Vec<String>)]) -> [(f64, Option<usize>); 4] {
    let logits: Vec<[f64; 4]> = sents.iter().map(|(_, f)| model.logits(f.iter())).collect();
    std::array::from_fn(|l| {
        let mut best: (f64, Option<usize>) = (0.0, None);
        for (i, z) in logits.iter().enumerate() {
            let p = sigmoid(z[l]);
            if p > best.0 {
                best = (p, Some(i));
            }
        }
        best
    })
}

/// The sentence classifier: a trained model and its thresholds.
pub struct SentenceClassifier {
    rules: RuleClassifier,
    model: LinearModel,
    thresholds: [f64; 4],
}

impl SentenceClassifier {
    pub fn new(model: LinearModel, thresholds: [f64; 4]) -> Self {
        SentenceClassifier { rules: RuleClassifier::default(), model, thresholds }
    }

    pub fn thresholds(&self) -> [f64; 4] {
        self.thresholds
    }

    /// Per label, the highest sentence probability and that sentence.
    pub fn scores(&self, text: &str, context: &str) -> [(f64, Option<String>); 4] {
        let sents = featurize(&self.rules, text, context, self.model.config());
        best_sentences(&self.model, &sents).map(|(p, i)| (p, i.map(|i| sents[i].0.clone())))
    }

    /// Each label the message carries, with the sentence that carries it.
    pub fn explain_in(&self, text: &str, context: &str) -> Vec<(Label, String)> {
        let scores = self.scores(text, context);
        Label::ALL
            .into_iter()
            .zip(scores)
            .enumerate()
            .filter_map(|(l, (label, (p, s)))| (p >= self.thresholds[l]).then_some((label, s?)))
            .collect()
    }
}

/// The threshold per label: the lowest whose precision over the scored
/// messages reaches `min_precision` (the most recall at that precision),
/// or, where none does, the one that maximises F1. `probs` holds the
/// highest sentence probability per message, `truth` its labels. Ties go to
/// the higher threshold (fewer false alarms); with no positive at all, 0.5.
pub fn best_thresholds(probs: &[[f64; 4]], truth: &[[bool; 4]], min_precision: f64) -> [f64; 4] {
    std::array::from_fn(|l| {
        let mut cands: Vec<f64> = probs.iter().map(|p| p[l]).filter(|p| *p > 0.05).collect();
        cands.sort_by(|a, b| a.total_cmp(b));
        cands.dedup();
        let positives = truth.iter().filter(|t| t[l]).count();
        let mut best_f1 = (0.0, 0.5);
        let mut precise: Option<f64> = None;
        for &t in &cands {
            let (mut tp, mut fp) = (0usize, 0usize);
            for (p, y) in probs.iter().zip(truth) {
                if p[l] >= t {
                    if y[l] {
                        tp += 1
                    } else {
                        fp += 1
                    }
                }
            }
            let f1 = if tp == 0 { 0.0 } else { 2.0 * tp as f64 / (2 * tp + fp + (positives - tp)) as f64 };
            if f1 >= best_f1.0 {
                best_f1 = (f1, t);
            }
            if precise.is_none() && tp > 0 && tp as f64 / (tp + fp) as f64 >= min_precision {
                precise = Some(t);
            }
        }
        if positives == 0 {
            return 0.5;
        }
        precise.unwrap_or(best_f1.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_learns_the_span_sentence_and_quotes_it() {
        let rules = RuleClassifier::default();
        let limit =
            "Every variant I try lands at the same time, so this shape is pinned at the DRAM roofline for good.";
        let filler = ["I read the benchmark script.", "Then I ran the tests again.", "The build took a minute."];
        let mut texts = Vec::new();
        for i in 0..40 {
            let f = filler[i % 3];
            texts.push((format!("{f} {limit}"), true));
            texts.push((format!("{f} Next I will tile the loads differently, attempt {i}."), false));
        }
        let spans: Vec<BTreeMap<Label, [usize; 2]>> = texts
            .iter()
            .map(|(t, pos)| {
                let mut m = BTreeMap::new();
                if *pos {
                    let at = t.find(limit).unwrap();
                    m.insert(Label::LimitClaim, [at, at + limit.len()]);
                }
                m
            })
            .collect();
        let labels: Vec<Vec<Label>> =
            texts.iter().map(|(_, pos)| if *pos { vec![Label::LimitClaim] } else { vec![] }).collect();
        let docs: Vec<Doc<'_>> = texts
            .iter()
            .zip(&spans)
            .zip(&labels)
            .map(|(((t, _), s), l)| Doc { text: t, context: "", labels: l, spans: s })
            .collect();
        let model = train(&rules, &docs, &config());
        let c = SentenceClassifier::new(model, [0.5; 4]);
        let ev = c.explain_in(&format!("I looked at the profile. {limit}"), "");
        assert_eq!(ev, vec![(Label::LimitClaim, limit.to_string())], "the claim's own sentence is quoted");
        assert!(c.explain_in("I looked at the profile. Next I will tile the loads differently.", "").is_empty());
    }

    #[test]
    fn thresholds_reach_the_precision_asked_or_else_the_best_f1() {
        let p = |x: f64| [x, 0.0, 0.0, 0.0];
        let probs = [p(0.9), p(0.8), p(0.3), p(0.2), p(0.25)];
        let y = |b: bool| [b, false, false, false];
        let truth = [y(true), y(true), y(false), y(false), y(true)];
        // Precision 1.0 first holds at 0.8; 0.75 at 0.25 (3 of 4).
        assert_eq!(best_thresholds(&probs, &truth, 1.0)[0], 0.8);
        assert_eq!(best_thresholds(&probs, &truth, 0.7)[0], 0.25);
        // A precision no threshold reaches: the best F1 (6/7 at 0.25).
        assert_eq!(best_thresholds(&probs, &truth, 1.1)[0], 0.25);
        // No positive at all: the default holds.
        assert_eq!(best_thresholds(&probs, &truth, 0.8)[1], 0.5);
    }
}
