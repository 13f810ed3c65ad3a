//! The token pattern language of the rules (syntax in `data/README.md`) and
//! its matcher.

use std::collections::HashSet;

use super::lexicon::{CLASSES, NEGATORS};
use super::text::Tok;

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
    /// A named word class (see `word_classes.txt`); entries ending in `*` are prefixes.
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
/// `word_classes.txt` (`<cause>`, ...).
#[derive(Debug, Clone)]
pub(super) struct Pattern {
    /// The pattern as written.
    pub(super) src: &'static str,
    elems: Vec<Elem>,
}

impl Pattern {
    /// Parses one pattern; the error says what is wrong with it.
    pub(super) fn parse(src: &'static str) -> Result<Pattern, String> {
        let mut elems = Vec::new();
        for e in src.split_whitespace() {
            if let Some(n) = e.strip_prefix('~') {
                let n = n.parse().map_err(|_| format!("bad gap {e:?}: `~N` skips up to N tokens"))?;
                elems.push(Elem::Gap(n));
                continue;
            }
            let (body, optional) = match e.strip_suffix('?') {
                Some(b) if !b.is_empty() => (b, true),
                _ => (e, false),
            };
            let alts = body
                .split('|')
                .map(|a| {
                    Ok(match a {
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
                                .ok_or_else(|| format!("unknown class {a:?} (classes are in word_classes.txt)"))?
                                .1
                                .as_slice(),
                        ),
                        a if a.chars().any(char::is_uppercase) => {
                            return Err(format!("{a:?}: words are lower case"));
                        }
                        a if a.len() > 1 && a.ends_with('*') => Atom::Prefix(a.trim_end_matches('*').to_string()),
                        a => {
                            if a.is_empty() || a.contains('<') {
                                return Err(format!("bad atom {a:?}"));
                            }
                            Atom::Word(a.to_string())
                        }
                    })
                })
                .collect::<Result<_, String>>()?;
            elems.push(Elem::Alts { alts, optional });
        }
        if !matches!(elems.first(), Some(Elem::Alts { optional: false, .. })) {
            return Err("a pattern must start with a required word".into());
        }
        Ok(Pattern { src, elems })
    }

    /// Whether one of `words` is a literal alternative of the pattern.
    pub(super) fn has_word(&self, words: &[&str]) -> bool {
        self.elems.iter().any(|e| match e {
            Elem::Alts { alts, .. } => alts.iter().any(|a| matches!(a, Atom::Word(w) if words.contains(&w.as_str()))),
            Elem::Gap(_) => false,
        })
    }

    /// Every match as (start, end), at most one per start, leftmost first.
    pub(super) fn matches(&self, toks: &[Tok], env: &Env) -> Vec<(usize, usize)> {
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

pub(super) struct Env<'a> {
    pub(super) libs: &'a HashSet<&'static str>,
    pub(super) large: f64,
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

pub(super) fn any_match(pats: &[Pattern], toks: &[Tok], env: &Env) -> bool {
    pats.iter().any(|p| !p.matches(toks, env).is_empty())
}

/// A match with no negation in it or in the `reach` tokens before it (within
/// its clause: "I don't think there's much left on the table" is negated).
pub(super) fn asserted_match(pats: &[Pattern], toks: &[Tok], env: &Env, reach: usize) -> bool {
    pats.iter().any(|p| {
        p.matches(toks, env).into_iter().any(|(a, b)| {
            let clause = (0..=a).rev().find(|&i| toks[i].boundary || i == 0).unwrap_or(0);
            !toks[a.saturating_sub(reach).max(clause)..b].iter().any(|t| NEGATORS.contains(&t.w.as_str()))
        })
    })
}
