//! Text preparation: the prose of a message (code and quotes dropped), its
//! sentences, and their tokens (lower case, contractions expanded, numbers
//! and speed-up factors read).

use super::lexicon::{ABBREVIATIONS, IS_CONTRACTED};

/// The prose of a message: fenced code blocks, block quotes, inline code and
/// quoted spans removed (each quoted span becomes the word `quote`).
pub(super) fn prose(text: &str) -> String {
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

/// Sentences of the prose: each line, split after `.`, `!` or `?` followed by
/// white space. The terminator stays with its sentence.
pub(super) fn sentences(prose: &str) -> Vec<String> {
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

pub(super) fn is_question(sentence: &str) -> bool {
    sentence.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '*' | '_' | ')' | '"' | '\'')).ends_with('?')
}

#[derive(Debug, Clone)]
pub(super) struct Tok {
    pub(super) w: String,
    /// The first token after `,` `;` `:` `(` `)` or a dash: a clause starts here.
    pub(super) boundary: bool,
    pub(super) num: Option<f64>,
    /// A speed-up factor: `6.8x`, `6.8×`, `6.8 times`, `3-fold`.
    pub(super) mult: Option<f64>,
}

pub(super) fn tokenize(sentence: &str) -> Vec<Tok> {
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

pub(super) fn parse_num(w: &str) -> Option<f64> {
    if w.is_empty()
        || !w.chars().all(|c| c.is_ascii_digit() || c == '.')
        || !w.starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    w.parse().ok()
}
