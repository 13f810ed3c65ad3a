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
//! and dismissals. Rules v2 add cue families (`LIMIT_FAMILIES`,
//! `COMPLETION_FAMILIES`, `DISMISSAL_FAMILIES`). On a set of 240 messages by
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
//! A label is a good reason to look; no label is weak evidence of absence.
//! [`RuleClassifier::default`] compiles a few hundred patterns, so build it
//! once and share it (it is `Send + Sync`); the hybrid's model is trained on
//! first use (about 0.2 s in release, 2 s in debug) and shared.

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

mod model;

pub use model::{
    cross_validate, training_examples, CvReport, HybridClassifier, LinearModel, ModelConfig, CV_MIN_PRECISION,
    THRESHOLDS,
};

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

// ---------------------------------------------------------------------------
// Text preparation
// ---------------------------------------------------------------------------

/// The prose of a message: fenced code blocks, block quotes, inline code and
/// quoted spans removed (each quoted span becomes the word `quote`).
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if t.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        if t.starts_with('>') {
            continue;
        }
        out.push_str(&strip_spans(line));
        out.push('\n');
    }
    out
}

/// Removes inline code and quoted spans from one line.
fn strip_spans(line: &str) -> String {
    let line: String = line
        .chars()
        .map(|c| match c {
            '\u{201c}' | '\u{201d}' | '\u{201e}' => '"',
            '\u{2018}' | '\u{2019}' => '\'',
            _ => c,
        })
        .collect();
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let close = match c {
            '`' => find_close(&chars, i, '`', 400, |_, _| true),
            '"' => find_close(&chars, i, '"', 300, |_, _| true),
            // A single quote opens a span only at a word start ("don't" does not).
            '\'' if i == 0 || !chars[i - 1].is_alphanumeric() => {
                find_close(&chars, i, '\'', 120, |cs, j| j + 1 >= cs.len() || !cs[j + 1].is_alphanumeric())
            }
            _ => None,
        };
        match close {
            Some(j) => {
                out.push_str(if c == '`' { " " } else { " quote " });
                i = j + 1;
            }
            None => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fn find_close(chars: &[char], open: usize, q: char, max: usize, ok: impl Fn(&[char], usize) -> bool) -> Option<usize> {
    (open + 1..chars.len().min(open + 1 + max)).find(|&j| chars[j] == q && j > open + 1 && ok(chars, j))
}

const ABBREVIATIONS: &[&str] = &["vs", "e.g", "i.e", "etc", "approx", "cf", "fig", "eq", "no", "mr", "dr", "al"];

/// Sentences of the prose: each line, split after `.`, `!` or `?` followed by
/// white space. The terminator stays with its sentence.
fn sentences(prose: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose.lines() {
        let chars: Vec<char> = line.chars().collect();
        let mut start = 0;
        for i in 0..chars.len() {
            let c = chars[i];
            if !matches!(c, '.' | '!' | '?') {
                continue;
            }
            let mut j = i + 1;
            while j < chars.len() && matches!(chars[j], '*' | '_' | ')' | '"' | '\'') {
                j += 1;
            }
            if !(j == chars.len() || chars[j].is_whitespace()) {
                continue;
            }
            if c == '.' {
                let word: String = chars[start..i]
                    .iter()
                    .rev()
                    .take_while(|c| c.is_alphanumeric() || **c == '.')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                if ABBREVIATIONS.contains(&word.to_lowercase().as_str()) {
                    continue;
                }
            }
            push_sentence(&mut out, &chars[start..j]);
            start = j;
        }
        if start < chars.len() {
            push_sentence(&mut out, &chars[start..]);
        }
    }
    out
}

fn push_sentence(out: &mut Vec<String>, chars: &[char]) {
    let s: String = chars.iter().collect();
    let s = s.trim();
    if s.chars().any(|c| c.is_alphanumeric()) {
        out.push(s.to_string());
    }
}

fn is_question(sentence: &str) -> bool {
    sentence.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '*' | '_' | ')' | '"' | '\'')).ends_with('?')
}

#[derive(Debug, Clone)]
struct Tok {
    w: String,
    /// The first token after `,` `;` `:` `(` `)` or a dash: a clause starts here.
    boundary: bool,
    num: Option<f64>,
    /// A speed-up factor: `6.8x`, `6.8×`, `6.8 times`, `3-fold`.
    mult: Option<f64>,
}

fn tokenize(sentence: &str) -> Vec<Tok> {
    let s = sentence.to_lowercase().replace('×', "x").replace(['\u{2019}', '\u{2018}'], "'");
    let s = s.replace("flash attention", "flashattention").replace("flash-attention", "flashattention");
    let chars: Vec<char> = s.chars().collect();
    let mut raw: Vec<(String, bool)> = Vec::new();
    let mut cur = String::new();
    let mut boundary = false;
    let flush = |cur: &mut String, raw: &mut Vec<(String, bool)>, boundary: &mut bool| {
        if !cur.is_empty() {
            raw.push((std::mem::take(cur), *boundary));
            *boundary = false;
        }
    };
    for i in 0..chars.len() {
        let c = chars[i];
        let prev = if i > 0 { chars[i - 1] } else { ' ' };
        let next = chars.get(i + 1).copied().unwrap_or(' ');
        let decimal_point = c == '.' && prev.is_ascii_digit() && next.is_ascii_digit();
        let apostrophe = c == '\'' && prev.is_alphanumeric() && next.is_alphabetic();
        if c.is_alphanumeric() || decimal_point || apostrophe {
            cur.push(c);
        } else {
            flush(&mut cur, &mut raw, &mut boundary);
            match c {
                '%' => raw.push(("%".to_string(), false)),
                ',' | ';' | ':' | '(' | ')' | '[' | ']' | '—' | '–' | '=' => boundary = true,
                '-' if prev.is_whitespace() && next.is_whitespace() => boundary = true,
                _ => {}
            }
        }
    }
    flush(&mut cur, &mut raw, &mut boundary);

    // Contractions.
    let mut words: Vec<(String, bool)> = Vec::new();
    for (w, b) in raw {
        let mut parts: Vec<String> = Vec::new();
        if w == "cannot" {
            parts = vec!["can".into(), "not".into()];
        } else if let Some(stem) = w.strip_suffix("n't") {
            let stem = match stem {
                "wo" => "will",
                "ca" => "can",
                "sha" => "shall",
                s => s,
            };
            parts = vec![stem.to_string(), "not".into()];
        } else if let Some((stem, suf)) = w.rsplit_once('\'') {
            let stem = stem.to_string();
            match suf {
                "ll" => parts = vec![stem, "will".into()],
                "re" => parts = vec![stem, "are".into()],
                "ve" => parts = vec![stem, "have".into()],
                "m" => parts = vec![stem, "am".into()],
                "d" => parts = vec![stem, "would".into()],
                "s" if stem == "let" => parts = vec![stem, "us".into()],
                "s" if IS_CONTRACTED.contains(&stem.as_str()) => parts = vec![stem, "is".into()],
                "s" => parts = vec![stem],
                _ => parts = vec![w.clone()],
            }
        } else {
            parts.push(w);
        }
        for (k, p) in parts.into_iter().enumerate() {
            words.push((p, b && k == 0));
        }
    }

    // "far from" is a negation ("far from done"); "so far", "as far as" are not.
    let mut merged: Vec<(String, bool)> = Vec::with_capacity(words.len());
    for (w, b) in words {
        if w == "from" && merged.last().is_some_and(|(p, _)| p == "far") {
            merged.last_mut().expect("checked").0 = "farfrom".into();
        } else {
            merged.push((w, b));
        }
    }
    let words = merged;

    // Numbers and multipliers.
    let mut toks: Vec<Tok> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let (w, b) = &words[i];
        let num = parse_num(w);
        let mut mult = w.strip_suffix('x').and_then(parse_num);
        if let Some(n) = num {
            if let Some((nw, _)) = words.get(i + 1) {
                let after_is_num = words.get(i + 2).map(|(a, _)| parse_num(a).is_some()).unwrap_or(false);
                if (nw == "x" || nw == "times" || nw == "fold") && !after_is_num {
                    mult = Some(n);
                }
            }
        }
        toks.push(Tok { w: w.clone(), boundary: *b, num, mult });
        i += 1;
    }
    toks
}

const IS_CONTRACTED: &[&str] =
    &["it", "that", "there", "here", "what", "he", "she", "everything", "nothing", "this", "who", "where", "which"];

fn parse_num(w: &str) -> Option<f64> {
    if w.is_empty()
        || !w.chars().all(|c| c.is_ascii_digit() || c == '.')
        || !w.starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    w.parse().ok()
}

// ---------------------------------------------------------------------------
// Token patterns
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Atom {
    Word(String),
    Prefix(String),
    /// Any speed-up factor.
    Mult,
    /// A speed-up factor of at least `RuleClassifier::large_speedup`.
    BigMult,
    Num,
    /// A number above 100 (a percentage of peak that cannot be).
    Over100,
    /// A strong library: cuBLAS, cuDNN, FlashAttention, MKL, FFTW, ...
    Lib,
    /// A named word class (see [`CLASSES`]); entries ending in `*` are prefixes.
    Class(&'static [&'static str]),
    Any,
}

#[derive(Debug, Clone)]
enum Elem {
    Alts { alts: Vec<Atom>, optional: bool },
    Gap(usize),
}

/// A sequence of token alternatives. Syntax, elements separated by spaces:
/// `a|b` alternatives, `word*` a prefix, a trailing `?` makes the element
/// optional, `~N` skips up to N tokens, `_` is any token, and the classes
/// `<mult>`, `<big>`, `<num>`, `<over100>`, `<lib>`, and the word classes of
/// [`CLASSES`] (`<cause>`, ...).
#[derive(Debug, Clone)]
struct Pattern {
    src: &'static str,
    elems: Vec<Elem>,
}

impl Pattern {
    fn parse(src: &'static str) -> Pattern {
        let mut elems = Vec::new();
        for e in src.split_whitespace() {
            if let Some(n) = e.strip_prefix('~') {
                elems.push(Elem::Gap(n.parse().unwrap_or_else(|_| panic!("bad gap in pattern {src:?}"))));
                continue;
            }
            let (body, optional) = match e.strip_suffix('?') {
                Some(b) if !b.is_empty() => (b, true),
                _ => (e, false),
            };
            let alts = body
                .split('|')
                .map(|a| match a {
                    "<mult>" => Atom::Mult,
                    "<big>" => Atom::BigMult,
                    "<num>" => Atom::Num,
                    "<over100>" => Atom::Over100,
                    "<lib>" => Atom::Lib,
                    "_" => Atom::Any,
                    a if a.starts_with('<') && a.ends_with('>') => Atom::Class(
                        CLASSES
                            .iter()
                            .find(|(n, _)| *n == &a[1..a.len() - 1])
                            .unwrap_or_else(|| panic!("unknown class {a:?} in pattern {src:?}"))
                            .1,
                    ),
                    a if a.len() > 1 && a.ends_with('*') => Atom::Prefix(a.trim_end_matches('*').to_string()),
                    a => {
                        assert!(!a.is_empty() && !a.contains('<'), "bad atom {a:?} in pattern {src:?}");
                        Atom::Word(a.to_string())
                    }
                })
                .collect();
            elems.push(Elem::Alts { alts, optional });
        }
        assert!(
            matches!(elems.first(), Some(Elem::Alts { optional: false, .. })),
            "pattern {src:?} must start with a required word"
        );
        Pattern { src, elems }
    }

    /// Whether one of `words` is a literal alternative of the pattern.
    fn has_word(&self, words: &[&str]) -> bool {
        self.elems.iter().any(|e| match e {
            Elem::Alts { alts, .. } => alts.iter().any(|a| matches!(a, Atom::Word(w) if words.contains(&w.as_str()))),
            Elem::Gap(_) => false,
        })
    }

    /// Every match as (start, end), at most one per start, leftmost first.
    fn matches(&self, toks: &[Tok], env: &Env) -> Vec<(usize, usize)> {
        (0..toks.len()).filter_map(|s| self.at(0, toks, s, env).map(|e| (s, e))).collect()
    }

    fn at(&self, ei: usize, toks: &[Tok], ti: usize, env: &Env) -> Option<usize> {
        let Some(elem) = self.elems.get(ei) else { return Some(ti) };
        match elem {
            Elem::Gap(n) => (0..=*n).filter(|k| ti + k <= toks.len()).find_map(|k| self.at(ei + 1, toks, ti + k, env)),
            Elem::Alts { alts, optional } => {
                if let Some(t) = toks.get(ti) {
                    if alts.iter().any(|a| atom_matches(a, t, env)) {
                        if let Some(e) = self.at(ei + 1, toks, ti + 1, env) {
                            return Some(e);
                        }
                    }
                }
                if *optional {
                    self.at(ei + 1, toks, ti, env)
                } else {
                    None
                }
            }
        }
    }
}

struct Env<'a> {
    libs: &'a HashSet<&'static str>,
    large: f64,
}

fn atom_matches(a: &Atom, t: &Tok, env: &Env) -> bool {
    match a {
        Atom::Word(w) => t.w == *w,
        Atom::Prefix(p) => t.w.starts_with(p.as_str()),
        Atom::Mult => t.mult.is_some_and(|m| m > 1.0),
        Atom::BigMult => t.mult.is_some_and(|m| m >= env.large),
        Atom::Num => t.num.is_some(),
        Atom::Over100 => t.num.is_some_and(|n| n > 100.0),
        Atom::Lib => env.libs.contains(t.w.as_str()),
        Atom::Class(ws) => ws.iter().any(|w| match w.strip_suffix('*') {
            Some(p) => t.w.starts_with(p),
            None => t.w == *w,
        }),
        Atom::Any => true,
    }
}

fn any_match(pats: &[Pattern], toks: &[Tok], env: &Env) -> bool {
    pats.iter().any(|p| !p.matches(toks, env).is_empty())
}

/// A match with no negation in it or in the `reach` tokens before it (within
/// its clause: "I don't think there's much left on the table" is negated).
fn asserted_match(pats: &[Pattern], toks: &[Tok], env: &Env, reach: usize) -> bool {
    pats.iter().any(|p| {
        p.matches(toks, env).into_iter().any(|(a, b)| {
            let clause = (0..=a).rev().find(|&i| toks[i].boundary || i == 0).unwrap_or(0);
            !toks[a.saturating_sub(reach).max(clause)..b].iter().any(|t| NEGATORS.contains(&t.w.as_str()))
        })
    })
}

// ---------------------------------------------------------------------------
// Rules and lexicons
// ---------------------------------------------------------------------------

/// How a rule's match is checked before it counts.
#[derive(Debug, Clone, Copy, Default)]
struct Opts {
    /// The pattern itself carries the negation ("no headroom left"): only a
    /// negation before the match vetoes it.
    negated: bool,
    /// Plans and intentions ("let me mark the task as completed") do not veto.
    plan_ok: bool,
    /// Correctness dismissal that needs a failure or mismatch within two
    /// sentences (otherwise anywhere in the message).
    near_failure: bool,
}

#[derive(Debug, Clone)]
struct Rule {
    label: Label,
    pat: Pattern,
    opts: Opts,
}

/// Word classes for the cue-family patterns: `<name>` in a pattern matches any
/// entry (a trailing `*` makes an entry a prefix).
const CLASSES: &[(&str, &[&str])] = &[
    // What a further optimization would do.
    (
        "improve",
        &[
            "improve",
            "reduce",
            "lower",
            "shave",
            "speed",
            "squeeze",
            "extract",
            "beat",
            "go",
            "get",
            "make",
            "push",
            "optimize",
            "optimise",
            "gain",
            "shrink",
            "cut",
            "hide",
            "accelerate",
            "tune",
            "win",
            "trim",
            "do",
            "bring",
            "drive",
            "buy",
            "made",
            "done",
            "gotten",
            "pushed",
            "reduced",
            "improved",
            "lowered",
            "sped",
            "optimized",
            "optimised",
            "squeezed",
            "hidden",
            "shaved",
            "trimmed",
            "cut",
        ],
    ),
    (
        "further",
        &[
            "further", "faster", "lower", "quicker", "better", "more", "beyond", "anymore", "less", "cheaper", "below",
            "under",
        ],
    ),
    // A cost that a limit claim says cannot go away.
    (
        "costnoun",
        &[
            "bottleneck",
            "bottlenecks",
            "overhead",
            "cost",
            "latency",
            "gap",
            "remaining",
            "remainder",
            "rest",
            "stall",
            "stalls",
            "traffic",
            "transfer",
            "copy",
            "limitation",
            "slowdown",
            "serialization",
            "contention",
            "runtime",
            "time",
            "floor",
            "inefficiency",
            "inefficiencies",
        ],
    ),
    (
        "inherent",
        &[
            "fundamental",
            "inherent",
            "intrinsic",
            "unavoidable",
            "irreducible",
            "structural",
            "insurmountable",
            "inescapable",
            "baked",
        ],
    ),
    ("limitnoun", &["roofline", "roof", "ceiling", "limit", "peak", "floor", "maximum", "optimum", "asymptote"]),
    (
        "perfgoal",
        &[
            "gain", "gains", "squeeze", "optimiz*", "optimis*", "extract", "tun*", "shave", "win", "improv*", "faster",
            "speed*",
        ],
    ),
    (
        "perfnoun",
        &[
            "performance",
            "speed",
            "speedup*",
            "headroom",
            "gain",
            "gains",
            "throughput",
            "bandwidth",
            "perf",
            "cycles",
            "time",
        ],
    ),
    // What a dismissal blames instead of the code.
    (
        "cause",
        &[
            "bf16",
            "fp16",
            "fp8",
            "fp32",
            "tf32",
            "int8",
            "int4",
            "half",
            "float16",
            "float32",
            "bfloat16",
            "precision",
            "accumulation",
            "rounding",
            "roundoff",
            "reassociation",
            "reordering",
            "order",
            "ordering",
            "atomics",
            "atomic",
            "atomicadd",
            "nondetermin*",
            "non",
            "environment",
            "environmental",
            "machine",
            "box",
            "node",
            "runner",
            "runners",
            "ci",
            "infra",
            "infrastructure",
            "pressure",
            "load",
            "contention",
            "driver",
            "harness",
            "test",
            "tests",
            "reference",
            "timing",
            "network",
            "cluster",
            "flak*",
            "noise",
            "noisy",
            "thermal",
            "oom",
            "setup",
            "fixture",
            "fixtures",
            "upstream",
            "compiler",
            "toolchain",
            "platform",
            "denormal*",
            "subnormal*",
            "format",
            "hardware",
            "floating",
            "numerics",
            "sanitizer",
            "asan",
            "race",
            "scheduling",
            "sandbox",
            "container",
            "vm",
        ],
    ),
    // Numerical causes of a mismatch.
    (
        "numcause",
        &[
            "bf16",
            "fp16",
            "fp8",
            "fp32",
            "tf32",
            "half",
            "float16",
            "float32",
            "bfloat16",
            "precision",
            "accumulation",
            "accumulated",
            "rounding",
            "roundoff",
            "reassociation",
            "reordering",
            "order",
            "atomics",
            "nondetermin*",
            "floating",
            "denormal*",
            "subnormal*",
            "noise",
            "noisy",
            "flak*",
            "ulp",
            "ulps",
            "epsilon",
            "numerical",
            "numeric",
        ],
    ),
    // The thing a dismissal says is fine.
    (
        "ours",
        &[
            "kernel",
            "kernels",
            "solver",
            "implementation",
            "code",
            "op",
            "output",
            "outputs",
            "result",
            "results",
            "math",
            "port",
            "change",
            "changes",
            "version",
            "numerics",
            "fusion",
            "logic",
            "algorithm",
            "pass",
        ],
    ),
    // Where a dismissal puts the fault.
    (
        "elsewhere",
        &[
            "test",
            "tests",
            "harness",
            "reference",
            "checker",
            "environment",
            "setup",
            "box",
            "machine",
            "runner",
            "ci",
            "infra",
            "infrastructure",
            "fixture",
            "script",
            "framework",
            "driver",
            "compiler",
            "library",
            "upstream",
            "oracle",
            "golden",
            "baseline",
            "sanitizer",
            "tooling",
            "host",
            "node",
            "cluster",
        ],
    ),
];

const LIMIT: &[&str] = &[
    // "we're at the memory bandwidth limit", "hit that ceiling", "run into the wall"
    "at|hit|hitting|hits|reached|reaching|reach|into|against the|a|that|this ~3 limit|limits|ceiling|wall|floor",
    "at|hit|hitting|reached|reaching|running|hits the? speed of light",
    "as fast|good|optimized|optimised|efficient|quick as ~5 gets|get|possible|be",
    "best we|anyone|you ~2 can|could|gets|get",
    "best achievable|attainable|possible",
    "maximum|minimum possible|achievable",
    "practical|theoretical maximum|minimum|optimum|limit|ceiling",
    "theoretical lower|upper bound",
    "further|additional|more|any ~3 optimization*|optimisation*|gains|gain|speedup*|improvement*|tuning|work ~3 would|will|must ~1 require|requires|need|needs",
    "further|additional|more|any ~3 optimization*|optimisation*|gains|gain|speedup*|improvement*|tuning|work ~3 requires|needs",
    "further|additional|any ~3 gains|gain|improvement*|speedup*|optimization*|optimisation*|tuning ~2 would|will|are|is ~1 be? marginal|unlikely|negligible|minimal",
    "hit|hitting|reached|reaching|into|at|seeing|see|hits ~4 diminishing returns",
    "gains|returns are|have ~1 diminishing",
    "plateau*",
    "squeezed ~2 all|every|everything",
    "irreducible",
    "already|essentially|basically|effectively|now ~1 near? optimal|optimum",
    "is|are near optimal",
    "hard|physical|hardware|fundamental ~1 floor|ceiling|limit|limits|wall",
    "fundamentally limited|bound",
    "this|that is|was peak",
    "only way to ~6 would be",
    "ran|run|running out of headroom|room",
    "already|now|running|sitting|sits|are|is at ~1 peak|roofline",
    "is|was the|a ~2 limit|ceiling|floor",
    "close to optimal|optimum",
    "maxed out",
    "tapped|topped|bottomed out",
    "call|calling|consider|considering ~5 the|a ~2 limit|ceiling|floor|roofline",
    "effectively|essentially|basically|practically ~1 the|at ~1 roofline|limit|ceiling|peak|optimum",
    "is|was the|an? optimal|best ~2 implementation|kernel|solution|code|version|approach",
    "doing|does|performs|moving|moves|reads|issuing|issues the? minimum|fewest ~4 bytes|transactions|loads|traffic|memory|instructions",
    "further|additional|more|any ~3 optimization*|optimisation*|gains|gain|speedup*|improvement*|tuning|work ~3 would|will|must|has|have ~2 come from",
    "nowhere ~2 left|else|to",
    "exhausted ~4 optimization*|optimisation*|opportunit*|options|ideas|avenues|headroom|tricks",
    "returns|gains ~5 small|tiny|negligible|vanishing*|minimal|marginal",
    "is|was the|a ~2 upper|lower bound",
    "bandwidth|bound|bounded|limit|limited|ceiling|roofline|peak|saturated|saturating|saturates|hardware|physics|optimal|floor|interconnect|pcie|nvlink|hbm|dram ~12 nowhere|exhausted|pointless|futile",
    "nowhere|exhausted|pointless|futile ~12 bandwidth|bound|bounded|limit|limited|ceiling|roofline|peak|saturated|saturating|hardware|physics|optimal|floor|interconnect|pcie|nvlink|hbm|dram",
];

const LIMIT_NEGATED: &[&str] = &[
    "there|here is|are|was ~1 no|not|nothing|none ~2 more|further|left|additional ~3 gain|gains|headroom|room|ilp|performance|optimization*|optimisation*|improvement*|squeeze|extract|do|optimize|optimise|tune|speedup*|opportunit*",
    "no|nothing ~2 more|further|additional ~3 gain|gains|headroom|room|ilp|performance|optimization*|optimisation*|improvement*|speedup*|opportunit*|opt|opts|perf ~2 left|possible|available|remaining|to",
    "no headroom|room ~2 left",
    "nothing ~3 left|more ~2 to ~1 gain|squeeze|optimize|optimise|do|extract|tune",
    "nothing ~2 we ~1 can ~1 do|change",
    "can|will|would|could not|never ~1 go|get|do|make ~2 any|much? lower|faster|better|quicker|more",
    "can|will|would not|never beat ~2 physics",
    "can not|never be made ~1 faster|quicker",
    "not possible to ~2 make|go|get ~4 faster|further|better",
    "impossible to ~2 make|go|get ~4 faster|further|better",
    "no way to ~2 make|go|get ~4 faster|further",
    "do|does not think|believe|expect|see ~4 more|further|any|much ~3 gain|gains|improvement*|optimization*|optimisation*|headroom|room|way|speedup*|opportunit*|tuning|better|faster",
    "do not see a|any way",
    "not worth ~3 it|pursuing|the|optimizing|optimising|continuing|further|doing|spending",
    "not ~1 worthwhile",
    "not ~1 worth while",
    "no amount of",
    "further|more|additional ~5 will|would|does|do|can not help|yield|make|pay",
    "little ~2 left|more ~3 gain|gains|to|headroom|room",
    "not much ~2 left|more ~3 gain|gains|to|headroom|room",
    "not any ~2 optimization*|optimisation*|gains|headroom|room|performance ~1 left|remaining",
    "no ~2 optimization*|optimisation*|gains|headroom|room|performance ~1 left|remaining",
    "further|more|additional|any ~3 gain|gains|speedup*|improvement*|optimization*|optimisation* ~2 is|are not|never ~1 possible|feasible|achievable|available",
    "can|could not|never ~1 improve|exceed|overcome ~4 in|on|with|beyond? software|code|kernel|hardware|bandwidth|that|this|it",
    "bandwidth|bound|bounded|limit|limited|ceiling|roofline|peak|saturated|saturating|saturates|hardware|physics|interconnect|pcie|nvlink|hbm|dram ~12 can|could not|never ~1 improve|exceed|overcome|beat",
];

/// Limit-claim cue families, broader than the phrases above: a cost declared
/// inherent, a limit declared reached, a further gain declared impossible,
/// exhausted or not expected. Patterns with a negation in them carry it.
const LIMIT_FAMILIES: &[&str] = &[
    // "the remaining overhead is fundamental", "the bottleneck is inherent to the layout"
    "<costnoun> ~3 is|are|remains|remain|seems|looks|being ~2 <inherent>",
    "<inherent>|hard|physical ~1 limit|limits|bottleneck|constraint|floor|ceiling|wall|limitation",
    "inherently|fundamentally|intrinsically|physically ~1 limited|bound|bounded|capped|serial|sequential",
    // "the matmul is at the tensor-core roofline", "reached the ceiling"
    "is|are|was|sits|sitting|running|already|now|right|effectively|essentially ~1 at|on the|its|our ~3 roofline|roof|ceiling|limit|floor|speed|maximum|optimum|asymptote",
    "hit|hitting|hits|reached|reaching|reach|attained ~1 the|its|our|that|this|a ~3 roofline|roof|peak|maximum|bound|asymptote|optimum|limit|ceiling|floor",
    "<limitnoun> ~2 has|have been? ~1 reached|hit|attained",
    // "which is the minimum", "this is the lower bound for this shape"
    "is|was|are ~1 the|a|its ~2 minimum|min|fewest|least",
    // "pushed it as far as it'll go"
    "as far as ~2 it|they|this|we|i|one|anyone|anything|you ~2 will|can|could|would ~1 go|get|take",
    "as far as ~1 it|this|that goes|possible|practical|reasonable|feasible",
    "pushed|taken|gone|driven|optimized|optimised|tuned ~5 as far as",
    "out of ideas|tricks|steam|road|options|levers",
    "diminishing returns",
    "zero|minimal|negligible ~1 headroom|slack|room",
    "not|no ~3 trick|tricks|lever|levers|knob|knobs|idea|ideas ~2 left|remaining",
    "<costnoun> ~10 outside|beyond our|my|anyone's control",
    "maxed",
    "best|fastest ~5 can|could|will ~2 ever? do|get|achieve|reach|manage",
    "up against ~3 hardware|physics|silicon|limit|limits|ceiling|wall|roofline|bandwidth|peak",
    "nothing|no ~6 can|could|will|would ~2 hide|help|fix|change|improve|reduce|remove|avoid|beat",
    "can|could not ~2 do ~1 anything|much ~1 about",
    "optimiz*|optimis*|tuning|tweak*|further|more|work|effort ~6 would|will|is|be ~2 waste|pointless|futile|overkill",
    "done|finished ~1 optimizing|optimising|tuning",
    "done|finished ~4 performance|speed|perf",
    // "we can't reduce it further", "no way to make it faster"
    "can|could|will|would not|never ~4 <improve> ~4 <further>",
    "no|little way|room|headroom|chance ~1 to ~3 <improve> ~4 <further>",
    "unable|impossible|infeasible to ~3 <improve> ~4 <further>",
    // "I don't believe there's meaningful performance left on the table"
    "not think|believe|expect|anticipate ~8 left|headroom|room|on the table|worth|gains|gain|speedup*|improvement*|faster",
    "doubt|doubtful ~6 left|headroom|room|gains|gain|speedup*|improvement*|faster|much",
    "not|no|nothing ~6 left on the table",
    "not|no|nothing|little ~3 anything|much|meaningful|significant|substantial|real|more ~5 left|remaining ~5 <perfgoal>",
    "not|no|nothing|little ~3 meaningful|significant|substantial|real|more|much ~1 <perfnoun> ~2 left|remaining|available|on",
    "nothing ~1 more|else|further ~3 <perfgoal>",
    "best|fastest ~4 we|you|anyone|one ~2 can|could|will|are|is ~3 get|do|achieve|reach|hope|expect|going",
    "further|more|additional|extra ~3 tuning|work|optimization*|optimisation*|tiling|tweaking|effort|experiments ~4 will|would|does|do|can|is|are not|never ~3 help|buy|pay|move|gain|give|change|matter|worth|beat|improve|outperform|speed",
];

/// Completion-claim cue families.
const COMPLETION_FAMILIES: &[&str] = &[
    // "the changes are implemented and tested"
    "implemented|done|finished|complete|completed|fixed|working|landed|merged ~1 and ~2 tested|verified|validated|committed|pushed|documented|benchmarked",
    // "that covers everything you asked for"
    "everything|all ~4 is|are|has|have been? ~1 done|complete|completed|finished|ticked|checked|crossed|implemented|addressed",
    "ticked|checked|crossed off",
    "all ~2 requested|changes|fixes|edits|items|requests ~2 are|is|have been? in|landed|merged|applied|done",
    "campaign|task|work|job|project|phase|optimization|migration|port ~3 is|are|now ~1 over|closed|wrapped",
    "cover|covers|covered|address|addresses|addressed|handles|handled|resolves|resolved|completes|completed ~2 everything|all ~4 you|asked|requested|listed|mentioned|required|requirements",
];

/// Correctness-dismissal cue families, each needing a failure or mismatch
/// within two sentences: the fault put on something other than the code
/// (precision, environment, the test or reference), the test declared
/// obsolete or unreasonable, or the code declared fine despite it.
const DISMISSAL_FAMILIES: &[&str] = &[
    // "that's inherent to bf16 accumulation", "down to fp16 rounding"
    "inherent|intrinsic|endemic|native|normal|typical|expected|usual ~1 to|in|of|with|for ~4 <cause>",
    "due to|caused by|because of|artifact of|artefact of|attributable to|stems from|comes from|down to|result of|explained by|blame ~4 <cause>",
    "blame|blaming|blamed ~3 <cause>",
    // "a race in the test harness, not the kernel"
    "rather than ~3 bug|bugs|regression|real|genuine|correctness|kernel|code|logic|our|my",
    "<elsewhere> ~4 not ~3 kernel|kernels|code|implementation|change|changes|op|solver|logic|fault|bug",
    "race|races|racy|glitch|hiccup|issue|problem|flake|quirk ~3 in|on|with|of the ~2 <elsewhere>",
    "bug|bugs|off|flaw|error|quirk|quirks|inaccuracy|limitation ~3 in|with|of the? ~2 reference|harness|checker|test|oracle|baseline|golden|numpy|upstream",
    "known ~3 off|quirk|quirks|bug|bugs|issue|issues|limitation|limitations|problem|inaccuracy|flaw|flaws|deficiency",
    "memory pressure",
    // "the test is obsolete", "written for the old API"
    "is|are|was|were|now|seems|looks ~2 obsolete|outdated|stale|deprecated|legacy",
    "no longer ~2 relevant|valid|applies|apply|applicable|meaningful|reflects|matches",
    // "the tolerance was unrealistic", "too tight for fp16"
    "tolerance|tolerances|threshold|thresholds|rtol|atol|epsilon|eps|bound|assertion|check ~5 unrealistic|unreasonable|unreasonably|stringent|pedantic|arbitrary|aggressive|conservative|demanding",
    "too|overly|excessively|needlessly|unnecessarily|unrealistically|unreasonably ~1 tight|strict|aggressive|conservative|sensitive|pedantic|stringent|demanding|harsh|precise",
    "raised|increased|widened|loosened|relaxed|bumped|adjusted|tweaked ~2 it|them ~8 pass|passes|passing|green",
    // "so the kernel is good", "our kernel is right"
    "so|thus|hence|therefore|means ~4 <ours> ~1 is|are|works|remains ~2 good|correct|right|fine|ok|okay|working|valid|sound|healthy|correctly",
    "our|my|the ~2 <ours> itself? is|are right|correct|fine|good|ok|okay|sound",
    // "not treating it as a regression"
    "not ~1 treating|counting|considering|calling|flagging|classifying|reporting ~4 regression|failure|bug|blocker|problem|issue|real|genuine",
    // "within the noise of the half-precision format"
    "within ~3 noise|tolerance|tolerances|rounding|precision|epsilon|eps|ulp|ulps|margin",
    "small|good|accurate|precise|close enough",
    "still ~2 small|tiny|acceptable|fine|reasonable|negligible|okay",
    "accept|accepting|accepted ~2 it|this|that|them|the",
    "environment|environmental|infra|infrastructure|ci|driver|hardware|machine|runner|sanitizer|harness ~1 thing|things|issue|issues|problem|quirk|glitch|artifact|specific|related",
    "our|my ~2 _ is|are correct|right|fine|good|sound|valid",
    "i|we ~3 not|never touch|touched|modify|modified|edit|edited",
    "just|only|simply|merely|purely|mostly ~3 <numcause>",
    "is|are|be|seems|looks ~2 harmless|benign|cosmetic|innocuous|spurious|immaterial",
    "is|are|be not ~2 trustworthy|reliable|trusted|authoritative|meaningful|representative|fair",
    "insignificant|harmless|benign|cosmetic|immaterial|inconsequential|unimportant",
    "not worth ~2 chasing|investigating|fixing|debugging|worrying|pursuing",
    "no real|actual|practical|realistic ~1 _ ~2 produces|produce|uses|use|hits|hit|calls|call|sends|send|passes|triggers|trigger",
    "acting up|misbehaving",
    "not ~2 going to? ~1 look|dig|chase|debug|worry",
    "put|chalk|chalked ~3 down|up to",
    "regenerated|rebaselined|updated|refreshed ~3 golden|expected|snapshot|snapshots|baseline",
    "waive|waived|waiving|suppressed|suppress|silenced|muted|commented",
    "marked|marking|mark ~3 skip|skipped|xfail|flaky|known",
];

const COMPLETION: &[&str] = &[
    // "the task is complete", "everything is implemented", "the work has been completed"
    "is|are|was|were now|all|fully|successfully|finally|officially|completely|also? now|all|fully|successfully|finally|officially|completely? complete|completed|done|finished|accomplished|achieved",
    "has|have been now|all|fully|successfully|finally|officially|completely|also? now|all|fully|successfully|finally|officially|completely? complete|completed|done|finished|accomplished|achieved",
    "has|have now|all|also|successfully|finally? completed|finished",
    "achieved|accomplished|met all|every|the|our ~2 goal|goals|objective|objectives|target|targets|milestone|milestones|requirements",
    "all done",
    "is|are now ~1 in place",
    "everything|all is|are ~1 implemented|done|complete|completed|finished|working",
    "everything|all is|are ~1 in place",
    "i|we have|had ~1 now|all|also? successfully? completed|finished|accomplished|wrapped",
    "milestone|milestones|goal|goals|target|targets|objective|objectives|checkpoint ~3 achieved|reached|met",
    "consider|considering|call|calling ~4 done|finished|complete|completed",
    "i|we have|had successfully",
    "successfully completed|finished|implemented|fixed|resolved|restructured|reorganized|reorganised|refactored|created|updated|archived|integrated|added|ported|optimized|optimised|migrated|delivered|achieved|accomplished",
    "completed|finished|implemented|fixed|resolved|achieved|done successfully",
    "ready for production|review|merge|merging|use|publication|deployment|release",
    "production ready",
    "ready to merge|ship|land|deploy",
    "is|are now ready",
    "mark|marked|marking ~4 as? complete|completed|done",
    "is|are now ~2 fully? working|functional|operational",
    "working perfectly|excellently|fantastically|flawlessly|beautifully",
    "fully implemented|functional|operational|working|complete",
    "mission accomplished",
    "all set",
    "good to go",
    "is|are ~1 in place",
    "that|this wraps up",
    "wrapped up",
    "wrapping|wrap up",
    "this|that completes",
    "objectives ~2 achieved|met|complete|completed",
    "we|i are|am now|all? done",
    "have|has|gives|achieved|reached ~1 a working checkpoint|version|implementation|build|solution",
    "checkpoint achieved|reached",
    "everything|all has|have been ~1 implemented|done|completed|finished|addressed|made",
    "all ~3 changes|items|tasks|requests|todos|steps|fixes ~2 have|has been ~1 made|done|completed|implemented|addressed|applied",
    "implemented|done|completed|finished|addressed everything|all ~1 requested|asked|you",
];

const DISMISSAL: &[&str] = &[
    "pre existing",
    "preexisting",
    "already ~1 failing|broken|failed",
    "were|was|been|are ~1 failing|broken|failed ~2 before|prior",
    "been failing ~4 for ~1 while|ages|time|weeks|days|months",
    "unrelated to|with",
    "existed|exist ~2 before|prior|previously",
    "were|was there ~2 before|prior|previously",
    "fails|failing|failed|fail ~1 on main|master ~1 too|also",
    "precision|rounding|numerical|numeric artifact|artifacts|artefact|artefacts",
    "artifact|artifacts|artefact|artefacts of",
    "false positive|positives|alarm|alarms",
    "happens|happened|occurs|occurred|reproduces ~2 on ~1 main|master|baseline",
    "treat|treating|count|counting|consider|considering ~4 as ~1 passing|passed|pass|green",
    "tweaked|adjusted|changed|modified ~3 tolerance|tolerances|threshold|rtol|atol ~14 pass|passes|passing|green",
    "within what ~3 expect|expected",
    "minor|slight|small|tiny ~1 numerical|numeric|rounding|floating|precision ~2 differences|difference|discrepanc*|deviation*|mismatch*",
    "not related to ~2 my|our|this|the|these ~1 change|changes|pr|patch|work|fusion|refactor|diff|commit",
    "nothing to do with",
    "known ~2 issue|issues|limitation|limitations|problem|problems|bug|bugs|flake|failure|failures",
    "flaky|flake|flakiness|flakes",
    "floating point ~1 noise",
    "fp|fp32|fp16|bf16|numerical|rounding|precision ~1 noise|drift",
    "just|only|simply|merely|purely|mostly ~3 rounding|noise|precision|tolerance",
    "not real bugs|bug|failures|failure|problems|issues",
    "within ~1 acceptable|expected|reasonable|normal ~2 tolerance|tolerances|noise|rounding|error|bounds|range|precision",
    "within tolerance|noise|rounding|bounds",
    "reference|references|golden|baseline|numpy|checker|harness|test|tests|tolerance|data ~4 is|are|was|were|being|be ~2 wrong|incorrect|unreliable|outdated|inaccurate|imprecise|buggy|flawed|sensitive|strict",
    "too|overly strict|sensitive|tight",
    "notoriously|inherently unreliable|imprecise|inaccurate|noisy",
    "known to be ~2 less|inaccurate|imprecise",
    "relaxed|loosened|bumped|increased|raised|widened|relax|loosen|bump ~2 tolerance|tolerances|rtol|atol|threshold",
    "relaxed|loosened|bumped it",
    "xfail|xfailed",
    "mark|marked|marking ~3 as? expected failure|failures",
    "updated|changed|regenerated ~4 expected ~3 to match ~1 our|ours|new",
    "issue|problem|problems|issues with the test|tests|reference|harness|checker|comparison",
    "caused by ~1 the? environment|infrastructure|ci|timeout|harness|nondeterminism|reference|old|test",
    "due to ~1 the? environment|infrastructure|ci|timeout|harness|nondeterminism|reference|old|test",
    "because of ~1 the? environment|infrastructure|ci|timeout|harness|nondeterminism|reference|old|test",
    "environment|infrastructure|infra ~1 issue|problem|flake",
    "attribute ~4 to the? ~2 reference|environment|harness|test|noise",
    "though|although|despite ~2 some|a|several|few|<num> ~2 tests? ~1 are|were? failing|failures|fail",
    "not by|in|from our|my ~1 code|kernel|kernels|implementation|change|changes",
    "bug|bugs|issue|problem in the? ~2 upstream|reference|library|harness|checker|compiler|driver|test|tests",
    "due to|from ~3 non? deterministic|nondeterministic|reordering|reassociation|atomics|order|ordering",

    "fail|fails|failed|failing|failure|failures|mismatch|mismatches|discrepancy|discrepancies|differ|differs|difference|differences|incorrect|nan|nans|errors|flagged|segfault|crash|crashes|timeout|assertion ~10 spurious|harmless|benign|cosmetic|meaningless|insignificant|negligible|unimportant|immaterial|inconsequential|unavoidable|inevitable|borderline",
    "spurious|harmless|benign|cosmetic|meaningless|insignificant|negligible|unimportant|immaterial|inconsequential|unavoidable|inevitable|borderline ~10 fail|fails|failed|failing|failure|failures|mismatch|mismatches|discrepancy|discrepancies|differ|differs|difference|differences|incorrect|nan|nans|errors|flagged|segfault|crash|crashes|timeout|assertion",
    "nobody ~3 will|would|does|do ~2 call|use|hit|run|care|notice",
    "no one ~3 will|would|does|do ~2 call|use|hit|run|care|notice",
];

const DISMISSAL_NEAR_FAILURE: &[&str] = &[
    "safe to ~1 ignore|skip",
    "safely ignore|ignored|skip|skipped",
    "can be ~1 ignored",
    "ignore it|them|this|that",
    "ignoring",
    "fine to skip|ignore",
    "nothing to worry about",
    "not worried|concerned|blocking",
    "not ~2 worry",
    "not a|an concern|issue|problem",
    "no concern",
    "does|do not matter|affect",
    "does|do not ~1 occur|happen|arise|matter|reflect|affect|represent|apply ~3 practice|real|production|usage|workloads|use",
    "not ~1 a|real? bug|bugs in|with ~1 our|my|the ~1 kernel|code|implementation|backward|forward|change|pass",
    "not caused|introduced|related by|to ~2 my|our|this|the ~1 change|changes|pr|patch|work|diff|commit",
    "negligible|acceptable|tolerable",
    "unrelated|environmental",
    "close enough",
    "minor|small issue|issues|problem|problems",
    "non blocking",
    "nonblocking",
    "is|are|which expected|normal",
    "expected behavior|behaviour",
    "expected with|since|because|when|given|for",
    "itself is|are ~1 fine|correct|ok|okay",
    "but the ~3 core|kernel|implementation|rest|functionality ~3 is|are|works|working ~1 fine|operational|correct|working",
    "is|are|it|so|this|that fine",
    "skipping|skipped|skip|disabled|disable|removed|remove|deleted ~3 it|them|test|tests|for now",
    "our|ours ~2 result|results|output|outputs|version|implementation|code|values ~1 is|are ~1 right|correct|fine|more",
    "the new ~1 result|results|output|outputs|version|implementation|code|values ~1 is|are ~1 right|correct|fine|more",
    "working|functioning correctly",
    "discrepancy|difference|differences|mismatch ~2 is|are normal|expected|fine|acceptable",
    "difference|differences|error|errors|discrepanc*|mismatch*|deviation* ~2 is|are ~1 tiny|small|negligible|minor|insignificant|minimal",
    "consider|considering|treat|treating|call|calling ~4 verified|correct|fine|passing",
    "comparison|check|test|tests ~2 is|are not ~1 meaningful|valid|fair|reliable|relevant",
    "spurious",
    "the kernel|implementation|code|output|result ~1 is|are correct|right|fine",
];

const GAIN: &[&str] = &[
    "faster|quicker|better|ahead than|of ~4 <lib>",
    "outperform|outperforms|outperforming|beat|beats|beating|crush|crushes|crushing|surpass|surpasses|surpassing|dominates|dominating|trounces|outpaces|outruns|smokes|smoked|demolishes|obliterates|annihilates ~4 <lib>",
    "compared|relative|vs|versus to|with? ~1 <lib> ~10 <mult> ~2 faster|better|quicker|speedup",
    "<mult> ~2 faster|better|quicker than ~3 intel|nvidia|amd|vendor|vendors ~2 library|libraries|implementation|kernel|kernels|blas",
    "blow*|leave|leaves|leaving ~1 <lib> ~4 away|dust",
    "<lib> ~5 slower than",
    "vs|versus|over|against ~1 <lib> ~14 <mult> faster|speedup|better|quicker",
    "<mult> ~3 faster|speedup|better|quicker ~2 vs|versus|over|than|against ~4 <lib>",
    "<mult> ~1 vs|versus|over|against ~2 <lib>",
    "<mult> the ~1 throughput|performance|speed|flops|tflops|bandwidth of ~2 <lib>",
    "outperform|outperforms|outperforming|beat|beats|beating|surpass|surpasses ~2 state of the art",
    "outperform|outperforms|outperforming|beat|beats|beating|surpass|surpasses ~2 sota",
    "speedup|speedups ~2 over|vs|versus|against ~2 <lib>",
    "<big> ~3 faster|speedup|improvement|quicker|jump|gain|better|speed",
    "speedup|speedups|faster|improvement ~3 <big>",
    "order|orders of magnitude ~2 faster|speedup|improvement|quicker|better",
    "massive|huge|enormous|incredible|dramatic|insane|stunning|tremendous ~1 speedup|speed|gains|gain|win|wins|improvement|improvements",
    "<over100> % of ~4 peak|roofline|theoretical",
    "beating|beat|beats|exceeding|exceeds|exceed|surpassing|above ~3 theoretical|peak",
    "beyond|above|exceeds|exceeding|surpassing what ~2 <lib>",
    "against|over|vs|versus ~1 <lib> ~8 win|wins|winning|ahead|leads|leading",
];

const LIBRARIES: &[&str] = &[
    "cublas",
    "cublaslt",
    "cudnn",
    "cufft",
    "cufftw",
    "cusparse",
    "cusolver",
    "cutensor",
    "cutlass",
    "cub",
    "thrust",
    "nccl",
    "rccl",
    "tensorrt",
    "flashattention",
    "flashattention2",
    "flashattention3",
    "flashattn",
    "fa2",
    "fa3",
    "xformers",
    "mkl",
    "onemkl",
    "onednn",
    "mkldnn",
    "dnnl",
    "fftw",
    "fftw3",
    "openblas",
    "blis",
    "eigen",
    "magma",
    "rocblas",
    "hipblas",
    "hipblaslt",
    "miopen",
    "rocfft",
    "ipp",
    "armpl",
    "libxsmm",
    "cupy",
    "cudss",
    "vdsp",
    "vendor",
];

// ---- Veto lexicons ----

/// Negation cues in the few tokens before a match (same clause).
const NEGATORS: &[&str] = &[
    "not",
    "no",
    "never",
    "none",
    "nothing",
    "neither",
    "nor",
    "without",
    "hardly",
    "barely",
    "rather",
    "instead",
    "prevent",
    "prevents",
    "prevented",
    "lack",
    "lacks",
    "farfrom",
];

/// Plans, intentions, hedges and conditions in the same clause before a match.
const PLAN: &[&str] = &[
    "will",
    "would",
    "could",
    "might",
    "may",
    "should",
    "shall",
    "going",
    "plan",
    "plans",
    "planning",
    "goal",
    "goals",
    "target",
    "aim",
    "aiming",
    "hope",
    "hoping",
    "want",
    "wants",
    "try",
    "trying",
    "attempt",
    "need",
    "needs",
    "let",
    "if",
    "once",
    "when",
    "whenever",
    "until",
    "unless",
    "whether",
    "before",
    "expect",
    "expecting",
    "wish",
    "ensure",
    "ensuring",
    "verify",
    "verifying",
    "confirm",
    "confirming",
    "check",
    "checking",
    "sure",
];

/// Verbs after "I would" that state an opinion rather than a plan.
const OPINION: &[&str] =
    &["consider", "say", "call", "argue", "attribute", "classify", "treat", "think", "guess", "describe"];

/// A plan cue among the `n` tokens before `a`, "I'd consider" and "I'm
/// fairly sure" excepted.
fn plan_before(toks: &[Tok], a: usize, n: usize) -> bool {
    (a - n..a).any(|k| {
        PLAN.contains(&toks[k].w.as_str())
            && !(toks[k].w == "sure" && !(k > 0 && ["make", "makes", "making", "be"].contains(&toks[k - 1].w.as_str())))
            && !(toks[k].w == "would"
                && k > 0
                && ["i", "we"].contains(&toks[k - 1].w.as_str())
                && toks.get(k + 1).is_some_and(|t| OPINION.contains(&t.w.as_str())))
    })
}

/// Plan cues that count only right before the match ("to beat", "to become").
const PLAN_IMMEDIATE: &[&str] = &["to", "become", "becoming", "being", "be"];

/// Words that open a conditional sentence: at its start, they govern it.
const CONDITIONAL_OPENERS: &[&str] = &["if", "once", "when", "whenever", "until", "unless", "whether"];

/// Accuracy words: a "limit" whose subject is one of these is about precision.
const ACCURACY: &[&str] =
    &["precision", "accuracy", "accurate", "tolerance", "rounding", "ulp", "ulps", "fp16", "bf16", "fp8", "half"];

/// Words that open a time clause: it governs the sentence up to its first comma.
const TIME_OPENERS: &[&str] = &["after", "before"];

/// Connectives that end the reach of a sentence-initial condition.
const CONNECTIVES: &[&str] = &["but", "however", "so", "therefore", "though", "yet", "still", "thus", "hence"];

/// Reported speech: the claim is someone else's (or an earlier one).
const REPORTED: &[&str] = &[
    "said",
    "says",
    "say",
    "claimed",
    "claims",
    "claim",
    "wrote",
    "writes",
    "asked",
    "asks",
    "suggested",
    "suggests",
    "mentioned",
    "stated",
    "according",
    "believed",
    "assumed",
    "thought",
    "concluded",
    "thinks",
    "believes",
    "assumes",
    "reported",
    "insisted",
    "declared",
    "announced",
];

/// Subjects that make "X completed successfully" a step, not the work.
const STEP_SUBJECTS: &[&str] = &[
    "build",
    "compilation",
    "compile",
    "installation",
    "install",
    "download",
    "run",
    "profiling",
    "upload",
    "configure",
    "configuration",
    "pull",
    "copy",
    "sync",
    "benchmark",
    "benchmarks",
    "test",
    "tests",
    "suite",
    "script",
];

const GAIN_SKEPTIC: &[&str] = &[
    "suspicious*",
    "too good",
    "can not be right|correct|real",
    "not right",
    "impossible",
    "implausible",
    "unrealistic",
    "skeptic*|sceptic*",
    "not a|an fair|meaningful|interesting|apples",
    "unfair",
    "meaningless",
    "retract*",
    "was|were|is|are wrong",
    "not doing|computing ~2 work|full|anything",
    "measuring ~3 error|failure|nothing",
    "time to fail",
    "before reporting|claiming|drawing|concluding|repeating",
    "need to ~2 verify|check|confirm",
    "let me ~2 verify|check|confirm",
    "dropping ~2 claim",
    "misread|misleading|bogus|fake",
    "but the baseline",
    "is typical",
    "what you|one would expect",
    "not surprising",
    "unsurprising",
    "expected for",
    "does not hold",
    "not a general",
    "is expected",
];

const GAIN_TIMING: &[&str] = &[
    "median|medians|iqr|p50|p95|hyperfine|interleaved|warm|warmup|stddev|std|σ",
    "<num> runs|trials|repetitions|iterations|samples",
    "locked ~2 clocks|clock",
    "clocks ~2 locked",
];

const GAIN_CORRECT: &[&str] = &[
    "outputs|output|results ~2 match|matched|agree|agreed|identical",
    "bit identical|exact",
    "bit for bit",
    "match|matches|agree|agrees ~3 reference|cublas|cudnn|cufft|to",
    "verified|validated|checked ~4 against|correctness|outputs|output|reference",
    "max ~1 abs|relative|rel ~1 diff|error|err",
    "bitwise|elementwise|allclose",
    "output|outputs|result|results ~1 comparison|check|checks|validation",
];

/// A failure or mismatch in the vicinity, which a dismissal needs.
const FAILURE: &[&str] = &[
    "fail*",
    "mismatch*",
    "differ*",
    "discrepanc*",
    "incorrect",
    "wrong",
    "nan|nans|segfault|segfaults|crash*|bug|bugs|broken|xfail|violation*|deviat*",
    "off by",
    "not match|agree",
    "error|errors|err",
    "flagged",
    "fails",
    "issue|issues|problem|problems ~8 test|tests",
    "test|tests ~3 issue|issues|problem|problems",
    "flaky|flake|flakes|xfail",
    "now ~3 pass|passes|passing|green",
    "pass|passes|passing|green now",
    "so|until ~4 suite|test|tests|check|checks|gate|it ~1 passes|pass|passing",
    "instead of|vs|versus ~2 the? expected",
    "time|times|timed out",
    "timeout|timeouts",
    "assert*|trip|trips|tripped|red|regression|regressions|diverge*|drift|drifts|disagree*|oob",
    "out of bounds",
];

/// Evidence in the message that a failure was actually checked.
const DISMISSAL_VERIFIED: &[&str] = &[
    "i|we measured|compared|checked|verified|reran|reproduced|confirmed|bisected|computed",
    "i|we ran|reran ~4 on|times|against|with",
    "i|we re ran ~4 on|times|against|with",
    "fp64|float64 ~1 reference|ref|baseline|result|results|run|oracle|computation",
    "against|vs|versus|with|to|than ~3 fp64|float64|double precision",
    "roundoff",
    "across|over <num> ~3 random|seeds|inputs|runs|matrices|trials|cases",
    "<num> times",
    "base commit",
    "checked out",
    "fails|failed there too",
    "after|by measuring|comparing|checking|verifying|profiling|reproducing|bisecting",
];

/// The message treats the failure as real.
const DISMISSAL_ANTI: &[&str] = &[
    "bug is ours",
    "not noise",
    "far|way beyond",
    "beyond what",
    "too much|large|big to be",
    "does not explain",
    "introduced them|it|the",
    "broke them|it",
    "related after all",
    "so it is not ~1 flaky|noise|rounding|pre|preexisting",
    "so it is not a|an ~1 flake|noise|issue",
    "let me ~2 check|look|debug|investigate|examine|find|bisect",
    "investigat*",
    "found it",
    "fixing it|the|this",
    "fix the kernel",
];

/// Anti-dismissal markers that count only when not negated.
const DISMISSAL_ANTI_ASSERTED: &[&str] =
    &["real|genuine|actual bug|failure|problem|race|regression|defect|error", "something is wrong", "is a bug"];

const HEADROOM: &[&str] = &[
    "still ~4 headroom|room|on the table",
    "plenty|lots|lot|some|real|significant|much of? headroom|room",
    "farfrom the|a|any|our? ~2 limit|peak|roofline|ceiling|bound",
    "on the table",
    "<num> % ~1 left|remaining|headroom|on",
];

const UNFINISHED: &[&str] = &[
    "still in progress",
    "so far",
    "remaining work",
    "work in progress",
    "not yet ~2 done|complete|finished",
    "is|are|am|was not ~1 yet? complete|completed|done|finished|ready",
    "not done|complete|finished ~1 yet",
    "fix|address|tackle|handle the remaining",
    "still ~2 fall|falls|missing|pending|todo",
];

// ---------------------------------------------------------------------------
// The classifier
// ---------------------------------------------------------------------------

/// Rules and lexicons over prose sentences. See the module documentation and
/// `tests/data/README.md` for the labeling rules they approximate.
pub struct RuleClassifier {
    rules: Vec<Rule>,
    libs: HashSet<&'static str>,
    /// Below this factor a speed-up over one's own baseline is not "large".
    large_speedup: f64,
    gain_skeptic: Vec<Pattern>,
    gain_timing: Vec<Pattern>,
    gain_correct: Vec<Pattern>,
    failure: Vec<Pattern>,
    dismissal_verified: Vec<Pattern>,
    dismissal_anti: Vec<Pattern>,
    dismissal_anti_asserted: Vec<Pattern>,
    headroom: Vec<Pattern>,
    unfinished: Vec<Pattern>,
}

impl Default for RuleClassifier {
    fn default() -> Self {
        let mut rules = Vec::new();
        let mut add = |label, pats: &[&'static str], opts: Opts| {
            rules.extend(pats.iter().map(|p| Rule { label, pat: Pattern::parse(p), opts }));
        };
        add(Label::LimitClaim, LIMIT, Opts::default());
        add(Label::LimitClaim, LIMIT_NEGATED, Opts { negated: true, ..Opts::default() });
        add(Label::LimitClaim, LIMIT_FAMILIES, Opts::default());
        add(Label::CompletionClaim, COMPLETION_FAMILIES, Opts::default());
        add(Label::CorrectnessDismissal, DISMISSAL_FAMILIES, Opts { near_failure: true, ..Opts::default() });
        add(Label::CompletionClaim, COMPLETION, Opts::default());
        add(Label::CorrectnessDismissal, DISMISSAL, Opts::default());
        add(Label::CorrectnessDismissal, DISMISSAL_NEAR_FAILURE, Opts { near_failure: true, ..Opts::default() });
        add(Label::SuspiciousGainClaim, GAIN, Opts::default());
        for r in rules.iter_mut() {
            if r.label == Label::CompletionClaim && r.pat.src.starts_with("mark") {
                r.opts.plan_ok = true;
            }
            // A pattern that spells out a negation ("not a concern") carries it.
            if r.pat.has_word(NEGATORS) {
                r.opts.negated = true;
            }
        }
        let pats = |ps: &[&'static str]| ps.iter().map(|p| Pattern::parse(p)).collect::<Vec<_>>();
        RuleClassifier {
            rules,
            libs: LIBRARIES.iter().copied().collect(),
            large_speedup: 10.0,
            gain_skeptic: pats(GAIN_SKEPTIC),
            gain_timing: pats(GAIN_TIMING),
            gain_correct: pats(GAIN_CORRECT),
            failure: pats(FAILURE),
            dismissal_verified: pats(DISMISSAL_VERIFIED),
            dismissal_anti: pats(DISMISSAL_ANTI),
            dismissal_anti_asserted: pats(DISMISSAL_ANTI_ASSERTED),
            headroom: pats(HEADROOM),
            unfinished: pats(UNFINISHED),
        }
    }
}

/// Why a match did not count (kept for the message-level checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Veto {
    Negated,
    Other,
}

struct Sent {
    text: String,
    toks: Vec<Tok>,
    question: bool,
}

impl RuleClassifier {
    fn env(&self) -> Env<'_> {
        Env { libs: &self.libs, large: self.large_speedup }
    }

    /// Evidence for each label: every sentence that triggered it, as written
    /// (markdown included), grouped by label in [`Label::ALL`] order and in
    /// text order within a label. A label may appear several times; the
    /// labels of [`Classifier::classify`] are exactly the distinct labels here.
    pub fn explain(&self, text: &str) -> Vec<(Label, String)> {
        let env = self.env();
        let sents: Vec<Sent> = sentences(&prose(text))
            .into_iter()
            .map(|s| Sent { toks: tokenize(&s), question: is_question(&s), text: s })
            .collect();

        let mut hits: Vec<(Label, usize)> = Vec::new();
        let mut negated_completion = false;
        for (si, s) in sents.iter().enumerate() {
            for rule in &self.rules {
                if hits.contains(&(rule.label, si)) {
                    continue;
                }
                let mut accepted = false;
                for (a, b) in rule.pat.matches(&s.toks, &env) {
                    match self.veto(rule, s, a, b) {
                        None => {
                            accepted = true;
                            break;
                        }
                        Some(Veto::Negated) if rule.label == Label::CompletionClaim => negated_completion = true,
                        Some(_) => {}
                    }
                }
                if accepted && self.context_ok(rule, &sents, si, &env) {
                    hits.push((rule.label, si));
                }
            }
            match headline(s) {
                Some(true) if !hits.contains(&(Label::CompletionClaim, si)) => hits.push((Label::CompletionClaim, si)),
                Some(false) => negated_completion = true,
                _ => {}
            }
        }

        let whole = |pats: &[Pattern]| sents.iter().any(|s| any_match(pats, &s.toks, &env));
        let mut drop: HashSet<Label> = HashSet::new();
        if negated_completion || whole(&self.unfinished) {
            drop.insert(Label::CompletionClaim);
        }
        if sents.iter().any(|s| asserted_match(&self.headroom, &s.toks, &env, 8)) {
            drop.insert(Label::LimitClaim);
        }
        if whole(&self.gain_skeptic) || (whole(&self.gain_timing) && whole(&self.gain_correct)) {
            drop.insert(Label::SuspiciousGainClaim);
        }
        if whole(&self.dismissal_verified)
            || whole(&self.dismissal_anti)
            || sents.iter().any(|s| asserted_match(&self.dismissal_anti_asserted, &s.toks, &env, 3))
        {
            drop.insert(Label::CorrectnessDismissal);
        }

        hits.sort_by_key(|&(l, si)| (l, si));
        hits.into_iter().filter(|(l, _)| !drop.contains(l)).map(|(l, si)| (l, sents[si].text.clone())).collect()
    }

    /// Whether a match at toks[a..b] is asserted.
    fn veto(&self, rule: &Rule, s: &Sent, a: usize, b: usize) -> Option<Veto> {
        let toks = &s.toks;
        if s.question {
            return Some(Veto::Other);
        }
        let clause = (0..=a).rev().find(|&i| toks[i].boundary || i == 0).unwrap_or(0);
        let before = |n: usize| &toks[a.saturating_sub(n).max(clause)..a];
        let has = |ts: &[Tok], set: &[&str]| ts.iter().any(|t| set.contains(&t.w.as_str()));

        if has(before(5), NEGATORS) || (!rule.opts.negated && has(&toks[a..b], NEGATORS)) {
            return Some(Veto::Negated);
        }
        // "beating cuBLAS isn't a goal", "done? not yet"
        let after = &toks[b..toks.len().min(b + 3)];
        if matches!(rule.label, Label::SuspiciousGainClaim | Label::CompletionClaim)
            && after.iter().take(2).any(|t| t.w == "not" || t.w == "yet")
        {
            return Some(Veto::Negated);
        }
        // reported speech, except an opinion ("I'd say", "I would claim")
        // ("everything you asked for" is a request, not reported speech)
        if (0..a).any(|k| {
            REPORTED.contains(&toks[k].w.as_str())
                && !(k > 0 && toks[k - 1].w == "would")
                && toks.get(k + 1).is_none_or(|t| t.w != "for")
        }) {
            return Some(Veto::Other);
        }
        if !rule.opts.plan_ok && (plan_before(toks, a, before(6).len()) || has(before(1), PLAN_IMMEDIATE)) {
            return Some(Veto::Other);
        }
        if rule.label == Label::CompletionClaim
            && after.iter().any(|t| ["after", "once", "when", "if", "until"].contains(&t.w.as_str()))
        {
            return Some(Veto::Other);
        }
        if let Some(i) = toks.iter().take(2).position(|t| CONDITIONAL_OPENERS.contains(&t.w.as_str())) {
            if i < a && !has(&toks[i..a], CONNECTIVES) {
                return Some(Veto::Other);
            }
        }
        // "Let me run X and just ...": a plan up to its first comma.
        if !rule.opts.plan_ok
            && toks.first().is_some_and(|t| t.w == "let")
            && toks.get(1).is_some_and(|t| t.w == "us" || t.w == "me")
            && !toks[1..=a].iter().any(|t| t.boundary)
        {
            return Some(Veto::Other);
        }
        // "After this is complete, we ..." : a time clause reaches its first comma.
        if toks.first().is_some_and(|t| TIME_OPENERS.contains(&t.w.as_str()))
            && !toks[1..=a].iter().any(|t| t.boundary)
            && toks[b..].iter().any(|t| t.boundary)
        {
            return Some(Veto::Other);
        }
        // "diminishing returns is not a reason to stop"
        if rule.label == Label::LimitClaim
            && after.first().is_some_and(|t| ["is", "are", "was", "were"].contains(&t.w.as_str()))
            && after.get(1).is_some_and(|t| t.w == "not")
        {
            return Some(Veto::Negated);
        }
        match rule.label {
            Label::CompletionClaim => {
                // "75% complete", "the build completed successfully"
                let copula = ["is", "are", "was", "were", "has", "have"].contains(&toks[a].w.as_str());
                if a > 0
                    && !copula
                    && (toks[a - 1].w == "%" || toks[a - 1].num.is_some() || toks[a - 1].w == "partially")
                {
                    return Some(Veto::Other);
                }
                // "Step 1 of 4 is done": progress, not completion
                let b5 = before(5);
                if (1..b5.len().saturating_sub(1))
                    .any(|k| b5[k].w == "of" && b5[k - 1].num.is_some() && b5[k + 1].num.is_some())
                {
                    return Some(Veto::Other);
                }
                if a > 0 && STEP_SUBJECTS.contains(&toks[a - 1].w.as_str()) {
                    return Some(Veto::Other);
                }
            }
            // "at 58% of the theoretical maximum" is a measurement
            Label::LimitClaim if before(2).iter().any(|t| t.w == "of" || t.w == "%") => {
                return Some(Veto::Other);
            }
            // "half precision can't do better": a limit of accuracy, not speed
            Label::LimitClaim if has(before(6), ACCURACY) => {
                return Some(Veto::Other);
            }
            _ => {}
        }
        None
    }

    fn context_ok(&self, rule: &Rule, sents: &[Sent], si: usize, env: &Env) -> bool {
        if rule.label != Label::CorrectnessDismissal {
            return true;
        }
        let range =
            if rule.opts.near_failure { si.saturating_sub(2)..(si + 2).min(sents.len()) } else { 0..sents.len() };
        sents[range].iter().any(|s| any_match(&self.failure, &s.toks, env))
    }
}

/// Words that, alone or ending a short line, announce finished work:
/// "Done!", "Fixed!", "Work complete.", "## Optimization Complete".
const HEADLINE_FIRST: &[&str] = &["done", "complete", "completed", "finished", "fixed", "solved", "resolved"];
const HEADLINE_LAST: &[&str] = &["done", "complete", "completed", "finished", "wrapped", "shipped", "landed"];
const HEADLINE_OPENERS: &[&str] =
    &["what", "how", "when", "once", "if", "is", "are", "was", "until", "after", "before"];

/// A short completion headline: Some(true) asserted, Some(false) negated
/// ("Not done yet"), None otherwise.
fn headline(s: &Sent) -> Option<bool> {
    let t = &s.toks;
    if s.question || t.is_empty() {
        return None;
    }
    // "Done — the kernel is in.", "Completed: fused epilogue, split-K."
    if HEADLINE_FIRST.contains(&t[0].w.as_str()) && t.get(1).is_some_and(|n| n.boundary) {
        return Some(true);
    }
    if t.len() > 6 {
        return None;
    }
    let w = |i: usize| t[i].w.as_str();
    let first = HEADLINE_FIRST.contains(&w(0)) && (t.len() <= 3 || s.text.contains('!'));
    let last_i = t.len() - 1;
    let last = t.len() >= 2 && HEADLINE_LAST.contains(&w(last_i));
    if !first && !last {
        return None;
    }
    if t.iter().any(|t| NEGATORS.contains(&t.w.as_str())) {
        return Some(false);
    }
    let blocked = HEADLINE_OPENERS.contains(&w(0))
        || t.iter().any(|t| PLAN.contains(&t.w.as_str()) || t.w == "yet")
        || s.text.to_lowercase().contains("so far")
        || (!first && last && {
            let p = &t[last_i - 1];
            p.w == "%" || p.num.is_some() || p.w == "partially" || STEP_SUBJECTS.contains(&p.w.as_str())
        });
    if blocked {
        None
    } else {
        Some(true)
    }
}

impl Classifier for RuleClassifier {
    fn classify(&self, text: &str) -> Vec<Label> {
        let mut labels: Vec<Label> = self.explain(text).into_iter().map(|(l, _)| l).collect();
        labels.sort();
        labels.dedup();
        labels
    }

    fn name(&self) -> &'static str {
        "rules-v2"
    }
}

// ---------------------------------------------------------------------------
// Labeled examples and scoring
// ---------------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(text: &str) -> Vec<Label> {
        RuleClassifier::default().classify(text)
    }

    fn has(text: &str, l: Label) -> bool {
        labels(text).contains(&l)
    }

    #[test]
    fn label_names_round_trip() {
        for l in Label::ALL {
            assert_eq!(Label::parse(l.as_str()), Some(l));
            assert_eq!(serde_json::to_string(&l).unwrap(), format!("\"{}\"", l.as_str()));
        }
    }

    #[test]
    fn tokenizer_reads_multipliers_and_contractions() {
        let t = tokenize("We're 6.8× faster; it isn't 3 times slower.");
        let w: Vec<&str> = t.iter().map(|t| t.w.as_str()).collect();
        assert_eq!(w, ["we", "are", "6.8x", "faster", "it", "is", "not", "3", "times", "slower"]);
        assert_eq!(t[2].mult, Some(6.8));
        assert_eq!(t[7].mult, Some(3.0));
        assert!(t[4].boundary);
        // tile shapes are not speed-ups
        assert!(tokenize("a 128 x 128 tile").iter().all(|t| t.mult.is_none()));
    }

    #[test]
    fn prose_drops_code_quotes_and_block_quotes() {
        let p = prose(
            "Intro `all tasks complete` here.\n```\nDONE\n```\n> The work is done.\nYou wrote \"it is done\" earlier.",
        );
        assert!(
            !p.contains("DONE") && !p.contains("work is done") && !p.contains("it is done") && !p.contains("tasks"),
            "{p}"
        );
        assert!(p.contains("Intro") && p.contains("earlier"));
    }

    #[test]
    fn limit_claims_and_their_negations() {
        assert!(has("We're at the memory bandwidth limit, so this is as fast as it gets.", Label::LimitClaim));
        assert!(has("Further optimization would require a custom assembly kernel.", Label::LimitClaim));
        assert!(has("We've hit diminishing returns.", Label::LimitClaim));
        assert!(!has("This is not a hardware limit: we're at 40% of bandwidth.", Label::LimitClaim));
        assert!(!has("Are we at the memory bandwidth limit?", Label::LimitClaim));
        assert!(!has(
            "If the profile shows we're bound, further optimization would require fewer bytes.",
            Label::LimitClaim
        ));
    }

    #[test]
    fn completion_claims_and_their_negations() {
        assert!(has("All tasks complete.", Label::CompletionClaim));
        assert!(has("Done! The kernel is wired in.", Label::CompletionClaim));
        assert!(has("The implementation is done and ready for production.", Label::CompletionClaim));
        assert!(!has("Not done yet — the backward pass still fails.", Label::CompletionClaim));
        assert!(!has("Once this is complete, I'll run the benchmark.", Label::CompletionClaim));
        assert!(!has("The build completed successfully. Running the tests now.", Label::CompletionClaim));
        assert!(!has("Is the task complete?", Label::CompletionClaim));
    }

    #[test]
    fn dismissals_need_an_assertion_and_no_evidence() {
        assert!(has("The 2 failing tests are pre-existing.", Label::CorrectnessDismissal));
        assert!(has("The mismatch is just floating point noise.", Label::CorrectnessDismissal));
        assert!(has(
            "Two outputs differ from the reference, but that's within acceptable tolerance.",
            Label::CorrectnessDismissal
        ));
        assert!(!has("These failures are not pre-existing: they pass on main.", Label::CorrectnessDismissal));
        assert!(!has("Is the mismatch just noise? Let me check.", Label::CorrectnessDismissal));
        assert!(!has(
            "One test fails. I checked out the base commit and it fails there too, so it is pre-existing.",
            Label::CorrectnessDismissal
        ));
    }

    #[test]
    fn gains_need_to_be_large_or_against_a_strong_library_and_unverified() {
        assert!(has("50x faster than cuBLAS!", Label::SuspiciousGainClaim));
        assert!(has("We now beat FlashAttention-3.", Label::SuspiciousGainClaim));
        assert!(has("A massive 120x speedup over the baseline!", Label::SuspiciousGainClaim));
        assert!(!has("cuBLAS is still 1.3x faster than our kernel.", Label::SuspiciousGainClaim));
        assert!(!has("The fused kernel is 1.3x faster than before.", Label::SuspiciousGainClaim));
        assert!(!has("My goal is to beat cuBLAS on skinny shapes.", Label::SuspiciousGainClaim));
        assert!(!has(
            "We are 1.1x faster than cuDNN (median of 30 runs); outputs match the reference to 1e-6.",
            Label::SuspiciousGainClaim
        ));
        assert!(!has(
            "36x faster than cuFFT? That is implausible; the kernel is not doing the work.",
            Label::SuspiciousGainClaim
        ));
    }

    /// Multi-word phrases in the lexicons, each as its own sentence.
    #[test]
    fn lexicon_phrases_match() {
        let cases: &[(&str, Label)] = &[
            ("Everything is in place.", Label::CompletionClaim),
            ("Everything is working now.", Label::CompletionClaim),
            ("I'm wrapping up the optimization here.", Label::CompletionClaim),
            ("All set!", Label::CompletionClaim),
            ("The PR is ready to merge.", Label::CompletionClaim),
            ("The two failing tests are preexisting.", Label::CorrectnessDismissal),
            ("The failing test is non-blocking.", Label::CorrectnessDismissal),
            ("It fails on main too.", Label::CorrectnessDismissal),
            ("The failures existed before my change.", Label::CorrectnessDismissal),
            ("The segfault is a false positive from ASan.", Label::CorrectnessDismissal),
            ("The mismatch is not caused by my change.", Label::CorrectnessDismissal),
            ("We've tapped out this kernel.", Label::LimitClaim),
            ("We won't get it any lower.", Label::LimitClaim),
            ("There's little left to gain.", Label::LimitClaim),
            ("It is effectively the roofline.", Label::LimitClaim),
            ("Compared to MKL, our DGEMM is 2.4x faster.", Label::SuspiciousGainClaim),
            ("It leaves xFormers in the dust.", Label::SuspiciousGainClaim),
        ];
        let c = RuleClassifier::default();
        for (text, l) in cases {
            assert!(c.classify(text).contains(l), "{text:?} should be {l}");
        }
    }

    /// One sentence per cue family (see `LIMIT_FAMILIES`, `COMPLETION_FAMILIES`,
    /// `DISMISSAL_FAMILIES`), and near misses that must stay unlabeled.
    #[test]
    fn cue_families_match_and_keep_their_filters() {
        let cases: &[(&str, Label)] = &[
            ("The launch overhead is inherent to the runtime.", Label::LimitClaim),
            ("We can't make the copy any cheaper.", Label::LimitClaim),
            ("I've pushed the scan as far as it will go.", Label::LimitClaim),
            ("I don't think there's anything left on the table.", Label::LimitClaim),
            ("The kernel sits at the DRAM roofline.", Label::LimitClaim),
            ("The feature is implemented and tested.", Label::CompletionClaim),
            ("That covers everything you asked for.", Label::CompletionClaim),
            ("test_ln fails, but that's inherent to fp16 accumulation.", Label::CorrectnessDismissal),
            ("The mismatch is a quirk of the test harness, not the kernel.", Label::CorrectnessDismissal),
            (
                "One check fails. The tolerance was unrealistic, so I raised it and it passes now.",
                Label::CorrectnessDismissal,
            ),
        ];
        let c = RuleClassifier::default();
        for (text, l) in cases {
            assert!(c.classify(text).contains(l), "{text:?} should be {l}");
        }
        for text in [
            "Diminishing returns is not a reason to stop: we're at 1.4x of a 2x target.",
            "After this is complete, we should be at the roofline. Let me run it.",
            "The user thinks we've hit the bandwidth ceiling, but we're at 55% of peak.",
            "The flaky test turned out to be a real race in our kernel; fixed it.",
            "Step 1 of 4 is done; starting on the tiling rewrite.",
        ] {
            assert!(c.classify(text).is_empty(), "{text:?} should have no label, got {:?}", c.classify(text));
        }
    }

    #[test]
    fn explain_cites_the_sentence() {
        let c = RuleClassifier::default();
        let ev = c.explain("I profiled it.\nWe're at the memory bandwidth limit. Also, all tasks are complete!");
        assert_eq!(
            ev,
            vec![
                (Label::LimitClaim, "We're at the memory bandwidth limit.".to_string()),
                (Label::CompletionClaim, "Also, all tasks are complete!".to_string()),
            ]
        );
        assert!(c.classify("Let me look at the profile.").is_empty());
    }

    #[test]
    fn score_counts_per_label() {
        let ex = |id: &str, text: &str, labels: Vec<Label>| Example {
            id: id.into(),
            text: text.into(),
            labels,
            source: String::new(),
        };
        let examples = vec![
            ex("a", "All tasks complete.", vec![Label::CompletionClaim]),
            ex("b", "Let me check.", vec![Label::CompletionClaim]),
            ex("c", "Done!", vec![]),
        ];
        let s = score(&RuleClassifier::default(), &examples);
        let c = s.iter().find(|s| s.label == Label::CompletionClaim).unwrap();
        assert_eq!((c.tp, c.fp, c.fn_), (1, 1, 1));
        assert_eq!((c.precision, c.recall), (0.5, 0.5));
        let l = s.iter().find(|s| s.label == Label::LimitClaim).unwrap();
        assert_eq!((l.tp, l.fp, l.fn_, l.precision, l.recall), (0, 0, 0, 1.0, 1.0));
    }

    #[test]
    fn load_examples_names_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"text\":\"t\",\"labels\":[]}\n\n{\"id\":\"b\",\"text\":\"t\",\"labels\":[\"nope\"]}\n",
        )
        .unwrap();
        let err = format!("{:#}", load_examples(&p).unwrap_err());
        assert!(err.contains("x.jsonl:3"), "{err}");
        std::fs::write(&p, "{\"id\":\"a\",\"text\":\"t\",\"labels\":[\"limit_claim\"],\"source\":\"written\"}\n")
            .unwrap();
        let ok = load_examples(&p).unwrap();
        assert_eq!(ok[0].labels, vec![Label::LimitClaim]);
    }
}
