//! The classifiers measured on real agent text from many sources (issue
//! 48): the messages of `../shared/corpus/` as `tests/moments/corpus.py
//! extract` gives them, the labels of `tests/data/moments/labels.jsonl`
//! (the majority of three independent annotations, references into the
//! corpus, no text), and a leave-one-source-out evaluation: for each
//! source, a model trained on every other source (and on the written sets
//! embedded in the binary, which never count in a figure) is scored on it.
//!
//! A source's own messages never train the model that is scored on them;
//! the rules are fixed, and were tuned on the written sets and on
//! `claude-code-vsla` (the `corpus-*` examples of the dev set), so that
//! source's rule figures are a fit.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::model::{training_examples, HybridClassifier, LinearModel, ModelConfig};
use super::sentence_model::{self, Doc, Prepared, SentenceClassifier};
use super::{Example, Label, LabelScore, RuleClassifier};

/// The corpus source the dev set's `corpus-*` examples come from.
pub const DEV_CORPUS_SOURCE: &str = "claude-code-vsla";

/// One assistant message of the corpus (a line of `corpus.py extract`).
#[derive(Debug, Clone, Deserialize)]
pub struct CorpusMessage {
    pub id: String,
    pub source: String,
    pub text: String,
    #[serde(default)]
    pub context: String,
}

/// One labelled message (a line of `labels.jsonl`): its labels and, per
/// label, the span of the claim as offsets in Unicode code points.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CorpusLabel {
    pub id: String,
    pub source: String,
    pub labels: Vec<Label>,
    #[serde(default)]
    pub spans: BTreeMap<Label, [usize; 2]>,
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> anyhow::Result<Vec<T>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(line).with_context(|| format!("{}:{}", path.display(), i + 1))?);
    }
    Ok(out)
}

pub fn load_messages(path: &Path) -> anyhow::Result<Vec<CorpusMessage>> {
    read_jsonl(path)
}

pub fn load_labels(path: &Path) -> anyhow::Result<Vec<CorpusLabel>> {
    read_jsonl(path)
}

/// A labelled corpus message, ready to score.
#[derive(Debug, Clone)]
pub struct Labelled {
    pub example: Example,
    pub context: String,
    pub spans: BTreeMap<Label, [usize; 2]>,
}

/// The labelled messages, text from `messages`. A label whose message is
/// not in `messages` (the corpus changed, or another extraction) is an
/// error naming it: figures on a partial join would mislead.
pub fn join(messages: &[CorpusMessage], labels: &[CorpusLabel]) -> anyhow::Result<Vec<Labelled>> {
    let by_id: HashMap<&str, &CorpusMessage> = messages.iter().map(|m| (m.id.as_str(), m)).collect();
    let mut missing = Vec::new();
    let mut out = Vec::new();
    for l in labels {
        match by_id.get(l.id.as_str()) {
            Some(m) => out.push(Labelled {
                example: Example {
                    id: l.id.clone(),
                    text: m.text.clone(),
                    labels: l.labels.clone(),
                    source: m.source.clone(),
                },
                context: m.context.clone(),
                spans: l.spans.clone(),
            }),
            None => missing.push(l.id.clone()),
        }
    }
    if !missing.is_empty() {
        bail!(
            "{} labelled messages are not in the extracted corpus (first: {}): extract it again with \
             `python3 tests/moments/corpus.py extract`",
            missing.len(),
            missing[0]
        );
    }
    Ok(out)
}

/// Counts for one label.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
    /// True positives whose cited sentence overlaps the labelled span.
    pub span_hits: usize,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
        self.span_hits += o.span_hits;
    }

    pub fn score(&self, label: Label) -> LabelScore {
        LabelScore::new(label, self.tp, self.fp, self.fn_)
    }
}

/// One classifier's counts on one set of messages, per label.
pub type Table = [Counts; 4];

/// The leave-one-source-out figures.
#[derive(Debug, Clone, Serialize)]
pub struct LosoReport {
    /// Per held-out source: messages, positives per label, and the counts
    /// of each classifier.
    pub sources: Vec<SourceRow>,
    pub pooled: SourceRow,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceRow {
    pub source: String,
    pub messages: usize,
    /// The rules alone.
    pub rules: Table,
    /// The shipped hybrid (trained on the written sets only, and on
    /// `claude-code-vsla` through the dev set).
    pub shipped: Table,
    /// The hybrid retrained without this source.
    pub held_out: Table,
    /// The sentence classifier trained without this source, its
    /// thresholds chosen by cross-validation over the other sources.
    pub sentence: Table,
    /// Those thresholds.
    pub sentence_thresholds: [f64; 4],
    /// What gadfly ships, retrained without this source: the hybrid, with
    /// limit claims from the hybrid OR the sentence classifier.
    pub combined: Table,
}

/// Scores `c` on `set` (context given to classifiers that read it).
pub fn tally(c: &dyn Explain, set: &[&Labelled]) -> Table {
    let mut t = Table::default();
    for m in set {
        let ev = c.evidence(&m.example.text, &m.context);
        for (l, label) in Label::ALL.into_iter().enumerate() {
            let said = ev.iter().filter(|(x, _)| *x == label).map(|(_, q)| q.as_str()).collect::<Vec<_>>();
            match (m.example.labels.contains(&label), !said.is_empty()) {
                (true, true) => {
                    t[l].tp += 1;
                    if let Some(span) = m.spans.get(&label) {
                        if said.iter().any(|q| overlaps(&m.example.text, q, *span)) {
                            t[l].span_hits += 1;
                        }
                    }
                }
                (false, true) => t[l].fp += 1,
                (true, false) => t[l].fn_ += 1,
                _ => {}
            }
        }
    }
    t
}

/// Whether the cited sentence `quote` lies over the span (code points) of
/// `text`. The citation is a sentence of the prose, so it is looked up in
/// the text; one not found verbatim is matched by its first words.
pub(super) fn overlaps(text: &str, quote: &str, span: [usize; 2]) -> bool {
    let probe: String = quote.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(at) = text.find(quote).or_else(|| text.find(&probe)) else {
        // Compare in the white-space-flattened text, span mapped roughly.
        return flat.contains(&probe) && {
            let start = text.chars().take(span[0]).collect::<String>().split_whitespace().count();
            let end = text.chars().take(span[1]).collect::<String>().split_whitespace().count();
            let q_at = flat.find(&probe).map(|b| flat[..b].split_whitespace().count()).unwrap_or(0);
            let q_len = quote.split_whitespace().count();
            q_at < end && q_at + q_len > start
        };
    };
    let start = text[..at].chars().count();
    let end = start + quote.chars().count();
    start < span[1] && end > span[0]
}

/// A classifier that cites the sentence behind each label, given the
/// message's context.
pub trait Explain {
    fn evidence(&self, text: &str, context: &str) -> Vec<(Label, String)>;
}

impl Explain for RuleClassifier {
    fn evidence(&self, text: &str, _context: &str) -> Vec<(Label, String)> {
        self.explain(text)
    }
}

impl Explain for SentenceClassifier {
    fn evidence(&self, text: &str, context: &str) -> Vec<(Label, String)> {
        self.explain_in(text, context)
    }
}

/// The hybrid, with limit claims from the hybrid OR the sentence
/// classifier (the sentence's quote where both give one).
pub struct Combined<'a> {
    pub hybrid: &'a HybridClassifier,
    pub sentence: &'a SentenceClassifier,
}

impl Explain for Combined<'_> {
    fn evidence(&self, text: &str, context: &str) -> Vec<(Label, String)> {
        let mut ev = self.hybrid.explain_in(text, Some(context));
        if let Some(q) = self.sentence.explain_in(text, context).into_iter().find(|(l, _)| *l == Label::LimitClaim) {
            ev.retain(|(l, _)| *l != Label::LimitClaim);
            ev.push(q);
            ev.sort_by_key(|(l, _)| *l);
        }
        ev
    }
}

impl Explain for HybridClassifier {
    fn evidence(&self, text: &str, context: &str) -> Vec<(Label, String)> {
        self.explain_in(text, Some(context))
    }
}

/// The training set for a model scored on `held_out`: the embedded written
/// sets (without the dev set's corpus examples when `held_out` is their
/// source) and every labelled corpus message of the other sources.
pub fn training_for(held_out: &str, corpus: &[Labelled]) -> Vec<(Example, String)> {
    let mut out: Vec<(Example, String)> = training_examples()
        .into_iter()
        .filter(|e| !(held_out == DEV_CORPUS_SOURCE && e.source.starts_with("corpus:")))
        .map(|e| (e, String::new()))
        .collect();
    out.extend(corpus.iter().filter(|m| m.example.source != held_out).map(|m| (m.example.clone(), m.context.clone())));
    out
}

/// Leave-one-source-out: each source scored by the hybrid retrained
/// without it, beside the rules and the shipped hybrid.
pub fn leave_one_source_out(corpus: &[Labelled], cfg: &ModelConfig, thresholds: [f64; 4]) -> LosoReport {
    let mut by_source: BTreeMap<&str, Vec<&Labelled>> = BTreeMap::new();
    for m in corpus {
        by_source.entry(m.example.source.as_str()).or_default().push(m);
    }
    let rules = RuleClassifier::default();
    let shipped = HybridClassifier::default();
    let mut pooled = SourceRow {
        source: "pooled".into(),
        messages: 0,
        rules: Table::default(),
        shipped: Table::default(),
        held_out: Table::default(),
        sentence: Table::default(),
        sentence_thresholds: [f64::NAN; 4],
        combined: Table::default(),
    };
    let mut sources = Vec::new();
    let names: Vec<&str> = by_source.keys().copied().collect();
    let prepared = PreparedCorpus::new(&rules, corpus);
    for (source, set) in &by_source {
        let train = training_for(source, corpus);
        let model = LinearModel::train_in(&train, cfg);
        let held = HybridClassifier::with_model(model, thresholds);
        let others: Vec<&str> = names.iter().copied().filter(|s| s != source).collect();
        let sentence = train_sentence(&prepared, &others);
        let row = SourceRow {
            source: source.to_string(),
            messages: set.len(),
            rules: tally(&rules, set),
            shipped: tally(&shipped, set),
            held_out: tally(&held, set),
            sentence: tally(&sentence, set),
            sentence_thresholds: sentence.thresholds(),
            combined: tally(&Combined { hybrid: &held, sentence: &sentence }, set),
        };
        pooled.messages += row.messages;
        for l in 0..4 {
            pooled.rules[l].add(&row.rules[l]);
            pooled.shipped[l].add(&row.shipped[l]);
            pooled.held_out[l].add(&row.held_out[l]);
            pooled.sentence[l].add(&row.sentence[l]);
            pooled.combined[l].add(&row.combined[l]);
        }
        sources.push(row);
    }
    LosoReport { sources, pooled }
}

impl LosoReport {
    /// The report as text: per label, one line per source and the pooled
    /// line, each classifier's precision and recall (P/R, tp fp fn).
    pub fn text(&self) -> String {
        let mut out = String::new();
        let cell = |c: &Counts, label: Label| {
            let s = c.score(label);
            format!("{:.2}/{:.2} ({},{},{})", s.precision, s.recall, c.tp, c.fp, c.fn_)
        };
        for (l, label) in Label::ALL.into_iter().enumerate() {
            out +=
                &format!("\n{label}: precision/recall (tp,fp,fn); held out = the hybrid trained without the source\n");
            out += &format!(
                "{:<58} {:>5} {:>4} {:>20} {:>20} {:>20} {:>6} {:>20} {:>6} {:>5} {:>20}\n",
                "source", "msgs", "pos", "rules", "shipped", "held out", "span", "sentence", "span", "thr", "combined"
            );
            for row in self.sources.iter().chain(std::iter::once(&self.pooled)) {
                let h = &row.held_out[l];
                let pos = h.tp + h.fn_;
                let span = |h: &Counts| if h.tp == 0 { "-".to_string() } else { format!("{}/{}", h.span_hits, h.tp) };
                let st = &row.sentence[l];
                out += &format!(
                    "{:<58} {:>5} {:>4} {:>20} {:>20} {:>20} {:>6} {:>20} {:>6} {:>5.2} {:>20}\n",
                    row.source,
                    row.messages,
                    pos,
                    cell(&row.rules[l], label),
                    cell(&row.shipped[l], label),
                    cell(h, label),
                    span(h),
                    cell(st, label),
                    span(st),
                    row.sentence_thresholds[l],
                    cell(&row.combined[l], label)
                );
            }
        }
        out
    }
}

/// Folds of the sources for choosing thresholds: every third source.
const THRESHOLD_FOLDS: usize = 3;

/// The precision the sentence model's thresholds are chosen to reach in
/// cross-validation over the training sources.
pub const SENTENCE_MIN_PRECISION: f64 = 0.8;

/// The corpus prepared once for the sentence model (features and targets
/// per message), with each message's source.
///
/// The written sets are not in it: trained with them too, the sentence
/// model's limit claims fell from P 0.58 / R 0.60 to 0.11 / 0.07
/// leave-one-source-out (their wording is not real agents').
pub struct PreparedCorpus<'a> {
    pub items: Vec<(&'a Labelled, Prepared)>,
}

impl<'a> PreparedCorpus<'a> {
    pub fn new(rules: &RuleClassifier, corpus: &'a [Labelled]) -> Self {
        let cfg = sentence_model::config();
        let items = corpus
            .iter()
            .map(|m| {
                let d = Doc { text: &m.example.text, context: &m.context, labels: &m.example.labels, spans: &m.spans };
                (m, sentence_model::prepare(rules, &d, &cfg))
            })
            .collect();
        PreparedCorpus { items }
    }

    /// The prepared messages of `sources`.
    fn of(&self, sources: &[&str]) -> Vec<&Prepared> {
        self.items.iter().filter(|(m, _)| sources.contains(&m.example.source.as_str())).map(|(_, p)| p).collect()
    }
}

/// The sentence classifier trained on the messages of `sources`, its
/// thresholds chosen on them by cross-validation over sources (each fold
/// a third of the sources, scored by a model trained on the rest).
pub fn train_sentence(prepared: &PreparedCorpus<'_>, sources: &[&str]) -> SentenceClassifier {
    let cfg = sentence_model::config();
    let mut probs = Vec::new();
    let mut truth = Vec::new();
    for k in 0..THRESHOLD_FOLDS.min(sources.len()) {
        let fold: Vec<&str> = sources.iter().copied().skip(k).step_by(THRESHOLD_FOLDS).collect();
        let rest: Vec<&str> = sources.iter().copied().filter(|s| !fold.contains(s)).collect();
        if rest.is_empty() {
            continue;
        }
        let model = sentence_model::fit(&prepared.of(&rest), &cfg);
        for (m, p) in prepared.items.iter().filter(|(m, _)| fold.contains(&m.example.source.as_str())) {
            probs.push(sentence_model::best_sentences(&model, &p.sents).map(|(p, _)| p));
            truth.push(Label::ALL.map(|l| m.example.labels.contains(&l)));
        }
    }
    let thresholds = sentence_model::best_thresholds(&probs, &truth, SENTENCE_MIN_PRECISION);
    SentenceClassifier::new(sentence_model::fit(&prepared.of(sources), &cfg), thresholds)
}

/// Scores one classifier on labelled messages, as the plain table of
/// `moments score` does.
pub fn score_labelled(c: &dyn Explain, corpus: &[Labelled]) -> Vec<LabelScore> {
    let set: Vec<&Labelled> = corpus.iter().collect();
    let t = tally(c, &set);
    Label::ALL.into_iter().enumerate().map(|(l, label)| t[l].score(label)).collect()
}

/// The hybrid at the shipped thresholds, retrained on every labelled
/// message: what `moments train` stores.
pub fn train_all(corpus: &[Labelled], cfg: &ModelConfig) -> LinearModel {
    LinearModel::train_in(&training_for("", corpus), cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cited_sentence_overlaps_its_span_or_not() {
        let text = "I profiled it.\nWe are at the memory bandwidth limit. All done.";
        let start = text.find("We are").unwrap();
        let span = [start, start + "We are at the memory bandwidth limit.".len()];
        assert!(overlaps(text, "We are at the memory bandwidth limit.", span));
        assert!(!overlaps(text, "I profiled it.", span));
        // A quote whose white space differs is found by its first words.
        assert!(overlaps(text, "We are  at the memory\nbandwidth limit.", span));
    }

    #[test]
    fn a_label_of_a_message_not_extracted_is_an_error() {
        let m =
            vec![CorpusMessage { id: "s/f#L1".into(), source: "s".into(), text: "Done.".into(), context: "".into() }];
        let ok = vec![CorpusLabel {
            id: "s/f#L1".into(),
            source: "s".into(),
            labels: vec![Label::CompletionClaim],
            spans: BTreeMap::new(),
        }];
        assert_eq!(join(&m, &ok).unwrap().len(), 1);
        let bad = vec![CorpusLabel { id: "s/f#L9".into(), ..ok[0].clone() }];
        let e = join(&m, &bad).unwrap_err().to_string();
        assert!(e.contains("s/f#L9") && e.contains("corpus.py extract"), "{e}");
    }
}

#[cfg(test)]
mod loso_tests {
    use super::*;

    fn msg(source: &str, i: usize, text: &str, labels: Vec<Label>) -> Labelled {
        let mut spans = BTreeMap::new();
        for l in &labels {
            spans.insert(*l, [0, text.chars().count()]);
        }
        Labelled {
            example: Example { id: format!("{source}/f#L{i}"), text: text.into(), labels, source: source.into() },
            context: String::new(),
            spans,
        }
    }

    /// Each source is scored once, by models that never saw it, and the
    /// pooled row is the sum of the sources' rows.
    #[test]
    fn every_source_is_held_out_once_and_the_pool_adds_up() {
        let mut corpus = Vec::new();
        for (s, src) in ["a", "b", "c"].into_iter().enumerate() {
            for i in 0..12 {
                corpus.push(msg(src, i, "All tests pass and the task is complete.", vec![Label::CompletionClaim]));
                corpus.push(msg(src, 100 + i, &format!("Let me read file {s}{i} next."), vec![]));
            }
        }
        let r = leave_one_source_out(&corpus, &ModelConfig { epochs: 2, ..ModelConfig::default() }, [0.5; 4]);
        assert_eq!(r.sources.iter().map(|s| s.source.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(r.pooled.messages, corpus.len());
        for l in 0..4 {
            let sum: usize = r.sources.iter().map(|s| s.sentence[l].tp + s.sentence[l].fn_).sum();
            assert_eq!(r.pooled.sentence[l].tp + r.pooled.sentence[l].fn_, sum);
        }
        // The positives are found: the rules know this claim.
        assert_eq!(r.pooled.rules[1].tp, 36, "{}", r.text());
        assert!(r.text().contains("pooled"));
    }
}
