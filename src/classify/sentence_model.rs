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
    let sents = sentences(&prose(text));
    let ev = rules.explain(text);
    let ctx = context_features(context);
    let n = sents.len();
    sents
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let mut f = sentence_features(&s, cfg);
            f.extend(ctx.iter().cloned());
            for (label, q) in &ev {
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

/// Trains the sentence model on labelled messages. Deterministic.
pub fn train(rules: &RuleClassifier, docs: &[Doc<'_>], cfg: &ModelConfig) -> LinearModel {
    let mut feats = Vec::new();
    let mut ys = Vec::new();
    for d in docs {
        let ev = rules.explain(d.text);
        for (s, f) in featurize(rules, d.text, d.context, cfg) {
            let y: [f64; 4] = std::array::from_fn(|l| {
                let label = Label::ALL[l];
                let on = d.labels.contains(&label)
                    && match d.spans.get(&label) {
                        Some(span) => super::corpus::overlaps(d.text, &s, *span),
                        None => ev.iter().any(|(x, q)| *x == label && *q == s),
                    };
                if on {
                    1.0
                } else {
                    0.0
                }
            });
            feats.push(f);
            ys.push(y);
        }
    }
    LinearModel::fit(&feats, &ys, cfg)
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
        std::array::from_fn(|l| {
            let mut best: (f64, Option<String>) = (0.0, None);
            for (s, f) in &sents {
                let p = sigmoid(self.model.logits(f.iter())[l]);
                if p > best.0 {
                    best = (p, Some(s.clone()));
                }
            }
            best
        })
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

/// The threshold per label that maximises F1 over scored messages: `probs`
/// the highest sentence probability per message, `truth` its labels. Ties
/// go to the higher threshold (fewer false alarms).
pub fn best_thresholds(probs: &[[f64; 4]], truth: &[[bool; 4]]) -> [f64; 4] {
    std::array::from_fn(|l| {
        let mut cands: Vec<f64> = probs.iter().map(|p| p[l]).filter(|p| *p > 0.05).collect();
        cands.sort_by(|a, b| a.total_cmp(b));
        cands.dedup();
        let positives = truth.iter().filter(|t| t[l]).count();
        let mut best = (0.0, 0.5);
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
            if f1 >= best.0 {
                best = (f1, t);
            }
        }
        best.1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_learns_the_span_sentence_and_quotes_it() {
        let rules = RuleClassifier::default();
        let limit = "Every variant I try lands at the same time, so this shape is pinned at the DRAM roofline for good.";
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
    fn thresholds_maximise_f1_and_prefer_fewer_false_alarms() {
        let probs = [[0.9, 0.0, 0.0, 0.0], [0.8, 0.0, 0.0, 0.0], [0.3, 0.0, 0.0, 0.0], [0.2, 0.0, 0.0, 0.0]];
        let truth = [[true, false, false, false], [true, false, false, false], [false; 4], [false; 4]];
        let t = best_thresholds(&probs, &truth);
        assert!((t[0] - 0.8).abs() < 1e-12, "{t:?}");
        // No positive at all: no threshold is learnt, the default holds.
        assert_eq!(t[1], 0.5);
    }
}
