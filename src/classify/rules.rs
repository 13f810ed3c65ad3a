//! [`RuleClassifier`]: the token patterns of `data/rules/` per label, the
//! checks that a match is asserted (not negated, not a question, a plan, a
//! condition or reported speech), and the message-level checks of
//! `data/context/` that drop a label the message itself undercuts.

use std::collections::HashSet;

use super::lexicon::{
    ACCURACY, COMPLETION, COMPLETION_FAMILIES, CONDITIONAL_OPENERS, CONNECTIVES, DISMISSAL, DISMISSAL_ANTI,
    DISMISSAL_ANTI_ASSERTED, DISMISSAL_FAMILIES, DISMISSAL_NEAR_FAILURE, DISMISSAL_VERIFIED, FAILURE, GAIN,
    GAIN_CORRECT, GAIN_NEGATIVE, GAIN_SKEPTIC, GAIN_TIMING, HEADLINE_FIRST, HEADLINE_LAST, HEADLINE_OPENERS, HEADROOM,
    LIBRARIES, LIMIT, LIMIT_FAMILIES, LIMIT_NEGATED, NEGATORS, OPINION, PLAN, PLAN_IMMEDIATE, REPORTED, STEP_SUBJECTS,
    TIME_OPENERS, UNFINISHED,
};
use super::pattern::{any_match, asserted_match, Env, Pattern};
use super::text::{is_question, prose, sentences, tokenize, Tok};
use super::{Classifier, Label};

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

/// Rules and lexicons over prose sentences. See the module documentation and
/// `tests/data/README.md` for the labeling rules they approximate.
pub struct RuleClassifier {
    rules: Vec<Rule>,
    libs: HashSet<&'static str>,
    /// Below this factor a speed-up over one's own baseline is not "large".
    large_speedup: f64,
    pub(super) gain_skeptic: Vec<Pattern>,
    pub(super) gain_negative: Vec<Pattern>,
    pub(super) gain_timing: Vec<Pattern>,
    pub(super) gain_correct: Vec<Pattern>,
    pub(super) failure: Vec<Pattern>,
    pub(super) dismissal_verified: Vec<Pattern>,
    pub(super) dismissal_anti: Vec<Pattern>,
    pub(super) dismissal_anti_asserted: Vec<Pattern>,
    pub(super) headroom: Vec<Pattern>,
    pub(super) unfinished: Vec<Pattern>,
}

impl Default for RuleClassifier {
    /// The rules of `data/rules/`, each file with its label and how its
    /// matches are checked, and the message-level checks of `data/context/`.
    fn default() -> Self {
        let mut rules = Vec::new();
        let mut add = |label, pats: &[Pattern], opts: Opts| {
            rules.extend(pats.iter().map(|p| Rule { label, pat: p.clone(), opts }));
        };
        add(Label::LimitClaim, &LIMIT, Opts::default());
        add(Label::LimitClaim, &LIMIT_NEGATED, Opts { negated: true, ..Opts::default() });
        add(Label::LimitClaim, &LIMIT_FAMILIES, Opts::default());
        add(Label::CompletionClaim, &COMPLETION_FAMILIES, Opts::default());
        add(Label::CorrectnessDismissal, &DISMISSAL_FAMILIES, Opts { near_failure: true, ..Opts::default() });
        add(Label::CompletionClaim, &COMPLETION, Opts::default());
        add(Label::CorrectnessDismissal, &DISMISSAL, Opts::default());
        add(Label::CorrectnessDismissal, &DISMISSAL_NEAR_FAILURE, Opts { near_failure: true, ..Opts::default() });
        add(Label::SuspiciousGainClaim, &GAIN, Opts::default());
        for r in rules.iter_mut() {
            if r.label == Label::CompletionClaim && r.pat.src.starts_with("mark") {
                r.opts.plan_ok = true;
            }
            // A pattern that spells out a negation ("not a concern") carries it.
            if r.pat.has_word(&NEGATORS) {
                r.opts.negated = true;
            }
        }
        RuleClassifier {
            rules,
            libs: LIBRARIES.iter().copied().collect(),
            large_speedup: 10.0,
            gain_skeptic: GAIN_SKEPTIC.to_vec(),
            gain_negative: GAIN_NEGATIVE.to_vec(),
            gain_timing: GAIN_TIMING.to_vec(),
            gain_correct: GAIN_CORRECT.to_vec(),
            failure: FAILURE.to_vec(),
            dismissal_verified: DISMISSAL_VERIFIED.to_vec(),
            dismissal_anti: DISMISSAL_ANTI.to_vec(),
            dismissal_anti_asserted: DISMISSAL_ANTI_ASSERTED.to_vec(),
            headroom: HEADROOM.to_vec(),
            unfinished: UNFINISHED.to_vec(),
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
    pub(super) fn env(&self) -> Env<'_> {
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
        if self.gain_doubted(&sents.iter().map(|s| s.toks.as_slice()).collect::<Vec<_>>()) {
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

    /// Whether the message, as tokenized sentences, takes back any gain it
    /// reports: skepticism about it, its timing and correctness checked,
    /// or a change that did not pay ([`GAIN_NEGATIVE`]).
    fn gain_doubted(&self, sents: &[&[Tok]]) -> bool {
        let env = self.env();
        let whole = |pats: &[Pattern]| sents.iter().any(|t| any_match(pats, t, &env));
        whole(&self.gain_skeptic)
            || whole(&self.gain_negative)
            || (whole(&self.gain_timing) && whole(&self.gain_correct))
    }

    /// [`Self::gain_doubted`] of a message's text: a gain the model reads
    /// in it is dropped as the rules' is.
    pub(super) fn gain_doubted_in(&self, text: &str) -> bool {
        let toks: Vec<Vec<Tok>> = sentences(&prose(text)).iter().map(|s| tokenize(s)).collect();
        self.gain_doubted(&toks.iter().map(Vec::as_slice).collect::<Vec<_>>())
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

        if has(before(5), &NEGATORS) || (!rule.opts.negated && has(&toks[a..b], &NEGATORS)) {
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
        if !rule.opts.plan_ok && (plan_before(toks, a, before(6).len()) || has(before(1), &PLAN_IMMEDIATE)) {
            return Some(Veto::Other);
        }
        if rule.label == Label::CompletionClaim
            && after.iter().any(|t| ["after", "once", "when", "if", "until"].contains(&t.w.as_str()))
        {
            return Some(Veto::Other);
        }
        if let Some(i) = toks.iter().take(2).position(|t| CONDITIONAL_OPENERS.contains(&t.w.as_str())) {
            if i < a && !has(&toks[i..a], &CONNECTIVES) {
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
            Label::LimitClaim if has(before(6), &ACCURACY) => {
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
