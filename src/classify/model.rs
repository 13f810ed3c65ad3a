//! The learned half of [`HybridClassifier`]: one logistic regression per
//! label over word features of the prose, trained from the labeled sets
//! embedded in the binary by `gadfly moments train`, and shipped as
//! `trained/model.txt` (read at first use; see `stored.rs`).
//!
//! Features of a sentence (the same prose and sentences as the rules, so
//! code, quotes and block quotes are gone): the rules' tokens (lower case,
//! contractions expanded), with every number read as `<num>`, a speed-up
//! factor as `<mult>` (`<bigmult>` from 3x up) and a strong library as
//! `<lib>`; unigrams, marked `NOT_` after not/no/never until the next
//! punctuation and `Q_` in a question; crude stems of longer words; bigrams
//! (with `<s>` and `</s>`); the rules' word classes as `C_<class>`; the
//! rules' context cues as `<ctx_*>` (a failure mentioned, a check reported,
//! skepticism, headroom, unfinished work); a ratio implied by two joined
//! measurements ("from 180 ns to 19 ns") as `<ratio>` or `<bigratio>`; and
//! `<question>`, `<excl>`, `<short>`. A message is the set of its sentences'
//! features (seen in at least two training messages), scaled to unit length.
//! The same linear model scores one sentence, which is how
//! [`HybridClassifier::explain`] cites the sentence behind a label that only
//! the model found.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use super::lexicon::{CLASSES, LIBRARIES, NEG_OPENERS, RATIO_JOINERS};
use super::pattern::{any_match, Pattern};
use super::text::{is_question, parse_num, prose, sentences, tokenize, Tok};
use super::{parse_examples, Classifier, Example, Label, LabelScore, RuleClassifier};

/// The labeled sets the model is trained on: all the development data.
const TRAINING_SETS: [(&str, &str); 4] = [
    ("moments_dev.jsonl", include_str!("../../tests/data/moments_dev.jsonl")),
    ("moments_holdout.jsonl", include_str!("../../tests/data/moments_holdout.jsonl")),
    ("moments_fresh.jsonl", include_str!("../../tests/data/moments_fresh.jsonl")),
    ("moments_blind1.jsonl", include_str!("../../tests/data/moments_blind1.jsonl")),
];

/// The embedded training examples, in file order.
pub fn training_examples() -> Vec<Example> {
    TRAINING_SETS
        .iter()
        .flat_map(|(name, text)| parse_examples(text, name).unwrap_or_else(|e| panic!("embedded {name}: {e:#}")))
        .collect()
}

/// Per-label probability thresholds of the shipped model, in [`Label::ALL`]
/// order: a label the rules miss is given when the model's probability
/// reaches it. Chosen by 5-fold cross-validation on the training data
/// ([`cross_validate`], printed by `tests/classifier.rs`): the lowest
/// threshold that keeps the cross-validated precision of rules OR model at
/// [`CV_MIN_PRECISION`] or above, rounded up.
pub const THRESHOLDS: [f64; 4] = [0.53, 0.51, 0.65, 0.36];

/// The precision the thresholds are chosen to keep in cross-validation:
/// above the 0.9 required, as unseen text scores lower.
pub const CV_MIN_PRECISION: f64 = 0.93;

/// How the model is built and trained. [`Default`] is the shipped model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// L2 penalty per example.
    pub lambda: f64,
    pub epochs: usize,
    /// Initial SGD step; the step decays as `eta0 / (1 + lambda * eta0 * t)`.
    pub eta0: f64,
    /// Weight of a positive example in the loss (positives are rare).
    pub pos_weight: f64,
    /// Seed of the example order.
    pub seed: u64,
    /// Features seen in fewer training messages are dropped.
    pub min_df: usize,
    pub bigrams: bool,
    /// The rules' word classes as features.
    pub classes: bool,
    /// Unigrams in a question get their own `Q_` features.
    pub question_scope: bool,
    /// Crude stems of longer words (`S_finish` for "finished") as features.
    pub stems: bool,
    /// The rules' context cues (a failure mentioned, a check reported,
    /// skepticism, headroom, unfinished work) as `<ctx_*>` features.
    pub context: bool,
    /// A ratio implied by two joined measurements ("from 180 ns to 19 ns")
    /// as `<ratio>`, or `<bigratio>` from 3 up.
    pub ratios: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            lambda: 3e-5,
            epochs: 20,
            eta0: 0.5,
            pos_weight: 1.0,
            seed: 0x9e37_79b9_7f4a_7c15,
            min_df: 2,
            bigrams: true,
            classes: true,
            question_scope: true,
            stems: true,
            context: true,
            ratios: true,
        }
    }
}

// ---------------------------------------------------------------------------
// Features
// ---------------------------------------------------------------------------

/// Speed-up factors from this one on read as `<bigmult>`.
const BIG_MULT: f64 = 3.0;

fn norm_word(t: &Tok) -> String {
    if let Some(m) = t.mult {
        return if m >= BIG_MULT { "<bigmult>" } else { "<mult>" }.to_string();
    }
    if t.num.is_some() {
        return "<num>".to_string();
    }
    if LIBRARIES.contains(&t.w.as_str()) {
        return "<lib>".to_string();
    }
    t.w.clone()
}

fn in_class(words: &[&str], w: &str) -> bool {
    words.iter().any(|c| match c.strip_suffix('*') {
        Some(p) => w.starts_with(p),
        None => w == *c,
    })
}

/// The features of one sentence, possibly repeated.
pub(super) fn sentence_features(sentence: &str, cfg: &ModelConfig) -> Vec<String> {
    let toks = tokenize(&sentence.replace('→', " to ").replace("->", " to "));
    let question = is_question(sentence);
    let qp = if question && cfg.question_scope { "Q_" } else { "" };
    let words: Vec<String> = toks.iter().map(norm_word).collect();
    let mut f = Vec::with_capacity(words.len() * 3 + 4);
    if question {
        f.push("<question>".to_string());
    }
    if sentence.contains('!') {
        f.push("<excl>".to_string());
    }
    if toks.len() <= 3 {
        f.push("<short>".to_string());
    }
    let mut neg = false;
    for (t, w) in toks.iter().zip(&words) {
        if t.boundary {
            neg = false;
        }
        let pre = if neg { "NOT_" } else { "" };
        f.push(format!("{qp}{pre}{w}"));
        if cfg.classes {
            for (name, ws) in CLASSES.iter() {
                if in_class(ws, &t.w) {
                    f.push(format!("{qp}{pre}C_{name}"));
                }
            }
        }
        if NEG_OPENERS.contains(&t.w.as_str()) {
            neg = true;
        }
    }
    if cfg.ratios {
        if let Some(r) = implied_ratio(&toks) {
            f.push(if r >= BIG_MULT { "<bigratio>" } else { "<ratio>" }.to_string());
        }
    }
    if cfg.stems {
        for w in &words {
            if let Some(st) = stem(w) {
                f.push(format!("S_{st}"));
            }
        }
    }
    if cfg.context {
        let r = &*CONTEXT_RULES;
        let env = r.env();
        let cues: [(&str, &[Pattern]); 8] = [
            ("failure", &r.failure),
            ("verified", &r.dismissal_verified),
            ("anti", &r.dismissal_anti),
            ("skeptic", &r.gain_skeptic),
            ("timing", &r.gain_timing),
            ("correct", &r.gain_correct),
            ("headroom", &r.headroom),
            ("unfinished", &r.unfinished),
        ];
        for (name, pats) in cues {
            if any_match(pats, &toks, &env) {
                f.push(format!("<ctx_{name}>"));
            }
        }
    }
    if cfg.bigrams {
        let mut prev = "<s>";
        for w in &words {
            f.push(format!("{prev} {w}"));
            prev = w;
        }
        f.push(format!("{prev} </s>"));
    }
    f
}

/// A number's value, `k` and `m` suffixes read ("6.9k").
fn leading_number(w: &str) -> Option<f64> {
    let (n, scale) = match w.strip_suffix('k') {
        Some(n) => (n, 1e3),
        None => match w.strip_suffix('m') {
            Some(n) => (n, 1e6),
            None => (w, 1.0),
        },
    };
    parse_num(n).map(|v| v * scale)
}

/// The largest ratio between two numbers joined by a word of
/// `data/words/ratio_joiners.txt` within four tokens.
fn implied_ratio(toks: &[Tok]) -> Option<f64> {
    let mut best: Option<f64> = None;
    for i in 0..toks.len() {
        let Some(a) = leading_number(&toks[i].w) else { continue };
        for j in i + 2..toks.len().min(i + 6) {
            let Some(b) = leading_number(&toks[j].w) else { continue };
            if a > 0.0 && b > 0.0 && toks[i + 1..j].iter().any(|t| RATIO_JOINERS.contains(&t.w.as_str())) {
                let r = a.max(b) / a.min(b);
                best = Some(best.map_or(r, |x: f64| x.max(r)));
            }
            break;
        }
    }
    best
}

/// The rules whose context cues are features.
static CONTEXT_RULES: LazyLock<RuleClassifier> = LazyLock::new(RuleClassifier::default);

/// A crude stem: a common inflection cut from a word of five letters or more.
fn stem(w: &str) -> Option<&str> {
    if w.len() < 5 || !w.chars().all(|c| c.is_ascii_lowercase()) {
        return None;
    }
    ["ing", "ed", "es", "s", "ly"].iter().find_map(|suf| w.strip_suffix(suf).filter(|s| s.len() >= 3))
}

/// The prose sentences of a message with their features.
fn message_sentences(text: &str, cfg: &ModelConfig) -> Vec<(String, Vec<String>)> {
    sentences(&prose(text)).into_iter().map(|s| (sentence_features(&s, cfg), s)).map(|(f, s)| (s, f)).collect()
}

/// Cues of the context a message was written in (the tool output before
/// it), as features: a failure shown (`<cx_failure>`), a check that passed
/// (`<cx_pass>`), timings (`<cx_timing>`); none for a message whose
/// context is empty or unknown.
pub(super) fn context_features(context: &str) -> Vec<String> {
    let c = context.trim();
    if c.is_empty() {
        return Vec::new();
    }
    let low = c.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| low.contains(w));
    let mut f = Vec::new();
    if has(&[
        "error",
        "failed",
        "failure",
        "traceback",
        "exception",
        "mismatch",
        "assert",
        " fail",
        " nan ",
        "not close",
    ]) {
        f.push("<cx_failure>".to_string());
    }
    if has(&["pass", " ok", "success", "all tests", "0 failed", "correct"]) {
        f.push("<cx_pass>".to_string());
    }
    if has(&[" ms", "µs", " us ", "tflops", "gb/s", "speedup", "cycles", "latency", "throughput"]) {
        f.push("<cx_timing>".to_string());
    }
    f
}

/// The distinct features of a message, in order of first appearance.
fn message_features(sents: &[(String, Vec<String>)]) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for f in sents.iter().flat_map(|(_, f)| f) {
        if seen.insert(f.as_str()) {
            out.push(f.clone());
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

/// A deterministic generator for the example order (SplitMix64).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

pub(super) fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// One logistic regression per label (L2, plain SGD) over a shared
/// vocabulary of binary features; a feature vector has unit length.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearModel {
    cfg: ModelConfig,
    vocab: HashMap<String, u32>,
    /// Per feature, one weight per label in [`Label::ALL`] order.
    weights: Vec<[f64; 4]>,
    bias: [f64; 4],
}

impl LinearModel {
    /// Trains on `examples`. Deterministic: the same examples and
    /// configuration give the same weights, bit for bit.
    pub fn train(examples: &[Example], cfg: &ModelConfig) -> LinearModel {
        let with: Vec<(Example, String)> = examples.iter().map(|e| (e.clone(), String::new())).collect();
        LinearModel::train_in(&with, cfg)
    }

    /// Trains on examples with the context each message was written in
    /// (the tool output before it; empty when unknown): the context's
    /// cues are features too ([`context_features`]).
    pub fn train_in(examples: &[(Example, String)], cfg: &ModelConfig) -> LinearModel {
        let feats: Vec<Vec<String>> = examples
            .iter()
            .map(|(e, ctx)| {
                let mut f = message_features(&message_sentences(&e.text, cfg));
                f.extend(context_features(ctx));
                f
            })
            .collect();
        let ys: Vec<[f64; 4]> = examples
            .iter()
            .map(|(e, _)| std::array::from_fn(|l| if e.labels.contains(&Label::ALL[l]) { 1.0 } else { 0.0 }))
            .collect();
        let refs: Vec<&[String]> = feats.iter().map(Vec::as_slice).collect();
        LinearModel::fit(&refs, &ys, cfg)
    }

    /// Trains on feature sets and their targets (1.0 or 0.0 per label, in
    /// [`Label::ALL`] order). Deterministic.
    pub(super) fn fit(feats: &[&[String]], ys: &[[f64; 4]], cfg: &ModelConfig) -> LinearModel {
        let mut df: HashMap<&str, usize> = HashMap::new();
        for f in feats.iter().copied().flatten() {
            *df.entry(f.as_str()).or_default() += 1;
        }
        let mut vocab: HashMap<String, u32> = HashMap::new();
        for f in feats.iter().copied().flatten() {
            if df[f.as_str()] >= cfg.min_df && !vocab.contains_key(f) {
                let id = vocab.len() as u32;
                vocab.insert(f.clone(), id);
            }
        }
        let mut model = LinearModel { cfg: cfg.clone(), vocab, weights: Vec::new(), bias: [0.0; 4] };
        let xs: Vec<Vec<u32>> = feats.iter().map(|f| model.ids(f.iter())).collect();

        // SGD with the L2 decay kept as a common scale: w = s * v.
        let mut v = vec![[0.0f64; 4]; model.vocab.len()];
        let mut s = 1.0f64;
        let mut b = [0.0f64; 4];
        let mut rng = SplitMix(cfg.seed);
        let mut order: Vec<usize> = (0..feats.len()).collect();
        let mut t = 0usize;
        for _ in 0..cfg.epochs {
            rng.shuffle(&mut order);
            for &i in &order {
                let x = &xs[i];
                let val = unit(x.len());
                let eta = cfg.eta0 / (1.0 + cfg.lambda * cfg.eta0 * t as f64);
                t += 1;
                let mut z = b;
                for &j in x {
                    for l in 0..4 {
                        z[l] += s * v[j as usize][l] * val;
                    }
                }
                let g: [f64; 4] = std::array::from_fn(|l| {
                    let y = ys[i][l];
                    (sigmoid(z[l]) - y) * if y > 0.5 { cfg.pos_weight } else { 1.0 }
                });
                s *= 1.0 - eta * cfg.lambda;
                for &j in x {
                    for l in 0..4 {
                        v[j as usize][l] -= eta * g[l] * val / s;
                    }
                }
                for l in 0..4 {
                    b[l] -= eta * g[l];
                }
                if s < 1e-6 {
                    for w in v.iter_mut().flatten() {
                        *w *= s;
                    }
                    s = 1.0;
                }
            }
        }
        model.weights = v.into_iter().map(|w| w.map(|w| w * s)).collect();
        model.bias = b;
        model
    }

    /// The known features' ids, sorted and distinct.
    fn ids<'a>(&self, feats: impl Iterator<Item = &'a String>) -> Vec<u32> {
        let mut ids: Vec<u32> = feats.filter_map(|f| self.vocab.get(f).copied()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Per label, the log-odds of a feature set.
    pub(super) fn logits<'a>(&self, feats: impl Iterator<Item = &'a String>) -> [f64; 4] {
        let ids = self.ids(feats);
        let val = unit(ids.len());
        let mut z = self.bias;
        for j in ids {
            for (l, z) in z.iter_mut().enumerate() {
                *z += self.weights[j as usize][l] * val;
            }
        }
        z
    }

    /// Per label in [`Label::ALL`] order, the probability that the message
    /// carries it.
    pub fn probabilities(&self, text: &str) -> [f64; 4] {
        self.probabilities_in(text, "")
    }

    /// The same, for a message written after `context` (the tool output
    /// before it).
    pub fn probabilities_in(&self, text: &str, context: &str) -> [f64; 4] {
        let sents = message_sentences(text, &self.cfg);
        let ctx = context_features(context);
        self.logits(sents.iter().flat_map(|(_, f)| f).chain(ctx.iter())).map(sigmoid)
    }

    /// A model from its parts (see [`super::stored`]).
    pub(super) fn from_parts(
        cfg: ModelConfig,
        vocab: HashMap<String, u32>,
        weights: Vec<[f64; 4]>,
        bias: [f64; 4],
    ) -> LinearModel {
        LinearModel { cfg, vocab, weights, bias }
    }

    /// The features and their ids.
    pub(super) fn vocabulary(&self) -> &HashMap<String, u32> {
        &self.vocab
    }

    /// The configuration it was trained with (its features follow it).
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// How many features the model knows.
    pub fn vocabulary_size(&self) -> usize {
        self.vocab.len()
    }

    /// The weights and biases, for comparing two trainings.
    pub fn parameters(&self) -> (&[[f64; 4]], [f64; 4]) {
        (&self.weights, self.bias)
    }
}

fn unit(n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        1.0 / (n as f64).sqrt()
    }
}

/// The shipped model, trained from [`training_examples`] with the default
/// configuration by `gadfly moments train` and embedded: read at first use,
/// never trained at process start (a test checks it is what its data
/// trains).
pub(super) const SHIPPED_MODEL: &str = include_str!("trained/model.txt");

static MODEL: LazyLock<LinearModel> = LazyLock::new(|| {
    super::stored::read(SHIPPED_MODEL, "src/classify/trained/model.txt").expect("the embedded classifier model reads")
});

// ---------------------------------------------------------------------------
// The hybrid
// ---------------------------------------------------------------------------

/// The rules, plus the labels they miss that the learned model is confident
/// of: a label is given when the rules give it or the model's probability
/// reaches the label's threshold ([`THRESHOLDS`]). The model is the shipped
/// one ([`SHIPPED_MODEL`]), read at first use and shared.
pub struct HybridClassifier {
    rules: RuleClassifier,
    /// None: the shared model trained on [`training_examples`].
    model: Option<LinearModel>,
    thresholds: [f64; 4],
}

impl Default for HybridClassifier {
    fn default() -> Self {
        HybridClassifier { rules: RuleClassifier::default(), model: None, thresholds: THRESHOLDS }
    }
}

impl HybridClassifier {
    /// The rules with a given model and thresholds (for evaluation).
    pub fn with_model(model: LinearModel, thresholds: [f64; 4]) -> Self {
        HybridClassifier { rules: RuleClassifier::default(), model: Some(model), thresholds }
    }

    pub fn model(&self) -> &LinearModel {
        self.model.as_ref().unwrap_or(&MODEL)
    }

    pub fn thresholds(&self) -> [f64; 4] {
        self.thresholds
    }

    /// Evidence for each label, as [`RuleClassifier::explain`]: every sentence
    /// that triggered a rule; for a label only the model gives, the sentence
    /// the model scores highest for it. Grouped by label in [`Label::ALL`]
    /// order.
    pub fn explain(&self, text: &str) -> Vec<(Label, String)> {
        self.explain_in(text, None)
    }

    /// [`Self::explain`] for a message written after `context` (the tool
    /// output before it), whose cues the model weighs too.
    pub fn explain_in(&self, text: &str, context: Option<&str>) -> Vec<(Label, String)> {
        let mut ev = self.rules.explain(text);
        let model = self.model();
        let sents = message_sentences(text, &model.cfg);
        if sents.is_empty() {
            return ev;
        }
        let ctx = context_features(context.unwrap_or(""));
        let p = model.logits(sents.iter().flat_map(|(_, f)| f).chain(ctx.iter())).map(sigmoid);
        let sentence_logits: Vec<[f64; 4]> = sents.iter().map(|(_, f)| model.logits(f.iter())).collect();
        let gain_doubted = self.rules.gain_doubted_in(text);
        for (l, label) in Label::ALL.into_iter().enumerate() {
            if p[l] < self.thresholds[l] || ev.iter().any(|(x, _)| *x == label) {
                continue;
            }
            if label == Label::SuspiciousGainClaim && gain_doubted {
                continue;
            }
            let best = (0..sents.len())
                .max_by(|&a, &b| sentence_logits[a][l].total_cmp(&sentence_logits[b][l]).then(b.cmp(&a)))
                .expect("not empty");
            ev.push((label, sents[best].0.clone()));
        }
        ev.sort_by_key(|(l, _)| *l);
        ev
    }
}

impl Classifier for HybridClassifier {
    fn classify(&self, text: &str) -> Vec<Label> {
        let mut labels: Vec<Label> = self.explain(text).into_iter().map(|(l, _)| l).collect();
        labels.dedup();
        labels
    }

    fn name(&self) -> &'static str {
        "hybrid-v1 (rules-v2 OR logistic regression)"
    }
}

// ---------------------------------------------------------------------------
// Cross-validation
// ---------------------------------------------------------------------------

/// Out-of-fold figures: each example scored by a model trained on the other
/// folds. The rules are fixed, so only the model is cross-validated; the
/// rules were tuned on most of these examples, so their figures here are a
/// fit.
#[derive(Debug, Clone)]
pub struct CvReport {
    pub folds: usize,
    pub min_precision: f64,
    /// Per example, the out-of-fold probabilities.
    pub probabilities: Vec<[f64; 4]>,
    /// Per example, the rules' labels.
    pub rules_fired: Vec<[bool; 4]>,
    /// Per label, the threshold that maximizes the recall of rules OR model
    /// with precision at least `min_precision`.
    pub hybrid_thresholds: [f64; 4],
    /// The same for the model alone.
    pub model_thresholds: [f64; 4],
    pub rules: Vec<LabelScore>,
    pub model: Vec<LabelScore>,
    pub hybrid: Vec<LabelScore>,
    /// Rules OR model at the shipped [`THRESHOLDS`].
    pub shipped: Vec<LabelScore>,
}

impl CvReport {
    /// Scores of rules OR (probability >= threshold) over the examples for
    /// which `keep` holds (the rules dropped when `with_rules` is false).
    pub fn score_subset(
        &self,
        examples: &[Example],
        thresholds: [f64; 4],
        with_rules: bool,
        keep: impl Fn(&Example) -> bool,
    ) -> Vec<LabelScore> {
        Label::ALL
            .into_iter()
            .enumerate()
            .map(|(l, label)| {
                let (mut tp, mut fp, mut fn_) = (0, 0, 0);
                for (i, e) in examples.iter().enumerate().filter(|(_, e)| keep(e)) {
                    let pred = (with_rules && self.rules_fired[i][l]) || self.probabilities[i][l] >= thresholds[l];
                    match (e.labels.contains(&label), pred) {
                        (true, true) => tp += 1,
                        (false, true) => fp += 1,
                        (true, false) => fn_ += 1,
                        _ => {}
                    }
                }
                LabelScore::new(label, tp, fp, fn_)
            })
            .collect()
    }
}

/// `folds`-fold cross-validation of the model (folds stratified by label
/// set, deterministic), with thresholds chosen to keep precision at
/// `min_precision`.
pub fn cross_validate(examples: &[Example], cfg: &ModelConfig, folds: usize, min_precision: f64) -> CvReport {
    let rules = RuleClassifier::default();
    let rules_fired: Vec<[bool; 4]> = examples
        .iter()
        .map(|e| {
            let got = rules.classify(&e.text);
            Label::ALL.map(|l| got.contains(&l))
        })
        .collect();
    let key = |e: &Example| Label::ALL.iter().enumerate().map(|(i, l)| (e.labels.contains(l) as u8) << i).sum::<u8>();
    let mut rng = SplitMix(cfg.seed ^ 0x5eed);
    let mut order: Vec<(u8, u64, usize)> = examples.iter().enumerate().map(|(i, e)| (key(e), rng.next(), i)).collect();
    order.sort_unstable();
    let mut fold_of = vec![0; examples.len()];
    for (rank, &(_, _, i)) in order.iter().enumerate() {
        fold_of[i] = rank % folds;
    }
    let mut probabilities = vec![[0.0; 4]; examples.len()];
    for k in 0..folds {
        let train: Vec<Example> =
            examples.iter().zip(&fold_of).filter(|(_, &f)| f != k).map(|(e, _)| e.clone()).collect();
        let model = LinearModel::train(&train, cfg);
        for (i, e) in examples.iter().enumerate().filter(|(i, _)| fold_of[*i] == k) {
            probabilities[i] = model.probabilities(&e.text);
        }
    }
    let mut report = CvReport {
        folds,
        min_precision,
        probabilities,
        rules_fired,
        hybrid_thresholds: [f64::INFINITY; 4],
        model_thresholds: [f64::INFINITY; 4],
        rules: Vec::new(),
        model: Vec::new(),
        hybrid: Vec::new(),
        shipped: Vec::new(),
    };
    for l in 0..4 {
        let y: Vec<bool> = examples.iter().map(|e| e.labels.contains(&Label::ALL[l])).collect();
        let p: Vec<f64> = report.probabilities.iter().map(|p| p[l]).collect();
        let r: Vec<bool> = report.rules_fired.iter().map(|r| r[l]).collect();
        report.hybrid_thresholds[l] = pick_threshold(&p, &r, &y, min_precision);
        report.model_thresholds[l] = pick_threshold(&p, &vec![false; y.len()], &y, min_precision);
    }
    let all = |_: &Example| true;
    report.rules = report.score_subset(examples, [f64::INFINITY; 4], true, all);
    report.model = report.score_subset(examples, report.model_thresholds, false, all);
    report.hybrid = report.score_subset(examples, report.hybrid_thresholds, true, all);
    report.shipped = report.score_subset(examples, THRESHOLDS, true, all);
    report
}

/// The threshold on `p` that maximizes the recall of `base OR p >= t` while
/// its precision stays at `min_precision` or above: halfway between the
/// lowest probability it admits and the next one down.
fn pick_threshold(p: &[f64], base: &[bool], y: &[bool], min_precision: f64) -> f64 {
    let mut tp = (0..y.len()).filter(|&i| base[i] && y[i]).count();
    let mut fp = (0..y.len()).filter(|&i| base[i] && !y[i]).count();
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| !base[i]).collect();
    order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    let mut best = (tp, f64::INFINITY);
    let mut k = 0;
    while k < order.len() {
        // Admit every example with this probability at once.
        let t = p[order[k]];
        while k < order.len() && p[order[k]] == t {
            if y[order[k]] {
                tp += 1;
            } else {
                fp += 1;
            }
            k += 1;
        }
        if tp > best.0 && tp as f64 >= min_precision * (tp + fp) as f64 {
            let next = order.get(k).map_or(0.0, |&i| p[i]);
            best = (tp, (t + next) / 2.0);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_is_deterministic() {
        let examples: Vec<Example> = training_examples().into_iter().step_by(3).collect();
        let cfg = ModelConfig { epochs: 3, ..ModelConfig::default() };
        let a = LinearModel::train(&examples, &cfg);
        let b = LinearModel::train(&examples, &cfg);
        assert_eq!(a, b);
        assert!(a.parameters().0.iter().flatten().any(|w| *w != 0.0));
        for e in examples.iter().take(50) {
            assert_eq!(a.probabilities(&e.text), b.probabilities(&e.text));
        }
    }

    #[test]
    fn features_normalize_numbers_and_mark_negation() {
        let f = sentence_features("It isn't 6.8x faster than cuBLAS, but 2x.", &ModelConfig::default());
        for want in [
            "it",
            "is",
            "not",
            "NOT_<bigmult>",
            "NOT_faster",
            "NOT_<lib>",
            "but",
            "<mult>",
            "<s> it",
            "<bigmult> faster",
        ] {
            assert!(f.iter().any(|x| x == want), "{want:?} missing from {f:?}");
        }
        assert!(!f.iter().any(|x| x == "NOT_but" || x.contains("6.8")), "{f:?}");
        let f = sentence_features("Lookups went from 180 ns to 19 ns.", &ModelConfig::default());
        assert!(f.iter().any(|x| x == "<bigratio>"), "{f:?}");
        let f = sentence_features("Is it done?", &ModelConfig::default());
        assert!(f.iter().any(|x| x == "Q_done") && f.iter().any(|x| x == "<question>"), "{f:?}");
    }

    #[test]
    fn explain_cites_the_model_sentence() {
        let text = "I profiled it again this morning.\nThe cost/benefit curve has flattened out: the last three \
                    experiments each bought under 1%, so I am calling it here.";
        assert!(RuleClassifier::default().explain(text).is_empty(), "a label the rules miss");
        let c = HybridClassifier::default();
        let ev = c.explain(text);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0].0, Label::LimitClaim);
        assert!(ev[0].1.starts_with("The cost/benefit curve"), "{ev:?}");
        assert_eq!(c.classify(text), vec![Label::LimitClaim]);
        assert!(c.classify("Let me check the profile.").is_empty());
    }
}
