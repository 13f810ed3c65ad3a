//! The functions a candidate file exports, read from its text, so that an
//! attack written once per language (`apply = "wrap_exported"`) can stand
//! in for each of them whatever the campaign's entry point is called: the
//! red team treats the harness as a black box that calls some functions of
//! the candidate, and the wrappers it generates memoize, replay or skip
//! those calls.
//!
//! This is a reader of declarations, not a compiler: it finds top-level
//! function definitions in C, C++ and CUDA (outside `static`, `inline`,
//! templates, namespaces, `__global__` and `__device__`) and public
//! top-level functions in Rust (not generic, no `where`). A function it
//! cannot read is left alone, and the attack says so when none is left.

/// One parameter: its name and whether it is passed by address (a
/// pointer, an array, a reference or a slice), which the templates' key
/// treats as identity, against a value (a size, a scalar).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub by_address: bool,
}

/// One exported function of a candidate file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    /// What comes before the name (`extern "C" void`, `pub extern "C" fn`).
    pub decl: String,
    /// The return type (`void`, `double`; in Rust `()` when none is written).
    pub ret: String,
    /// The parameter list as written.
    pub params_text: String,
    pub params: Vec<Param>,
    /// Attribute lines written just before a Rust function (`#[no_mangle]`).
    pub attributes: String,
    /// Byte offset of the name in the file (where a Rust rename goes).
    pub name_at: usize,
}

impl Function {
    /// Whether the function returns nothing.
    pub fn returns_nothing(&self) -> bool {
        matches!(self.ret.trim(), "void" | "()" | "")
    }
}

/// The text with comments and the contents of string and character
/// literals blanked (same length, newlines kept), so that the scanners
/// below never read code inside them. The quotes stay, so `extern "C"`
/// still reads as such (its contents are read from the original text).
fn blank(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start = i;
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                let end = (i + 2).min(b.len());
                for c in &mut out[start..end] {
                    if *c != b'\n' {
                        *c = b' ';
                    }
                }
                i = end;
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        out[i] = b' ';
                        i += 1;
                    }
                    out[i] = b' ';
                    i += 1;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The parameter list split on its top-level commas.
fn split_params(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' | '[' | '<' | '{' => depth += 1,
            ')' | ']' | '>' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out.into_iter().map(|p| p.trim().to_string()).collect()
}

/// A C-family parameter (`const double *A`, `int n`, `float x[]`,
/// `const std::vector<float>& v`): its name, or None for one this reader
/// does not take (a function pointer, `...`, a missing name).
fn c_param(p: &str) -> Option<Param> {
    if p.contains('(') || p.contains("...") {
        return None;
    }
    let head = p.split('=').next()?.trim(); // a C++ default argument
    let (head, array) = match head.find('[') {
        Some(i) => (head[..i].trim_end(), true),
        None => (head, false),
    };
    let b = head.as_bytes();
    let end = b.len();
    let mut start = end;
    while start > 0 && ident_byte(b[start - 1]) {
        start -= 1;
    }
    let name = &head[start..end];
    let before = head[..start].trim();
    if name.is_empty() || before.is_empty() || name.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if matches!(name, "const" | "volatile" | "int" | "float" | "double" | "char" | "long" | "short" | "unsigned") {
        return None;
    }
    let by_address = array || before.contains('*') || before.contains('&');
    Some(Param { name: name.to_string(), by_address })
}

/// The C, C++ and CUDA functions of `text` that a wrapper can stand in for.
pub fn c_functions(text: &str) -> Vec<Function> {
    let clean = blank(text);
    let s = String::from_utf8_lossy(&clean).into_owned();
    let b = s.as_bytes();
    let mut out = Vec::new();
    // Brace stack: true for a block whose inside is still the top level
    // (`extern "C" { ... }`).
    let mut stack: Vec<bool> = Vec::new();
    let top = |stack: &Vec<bool>| stack.iter().all(|t| *t);
    let mut c_linkage_depth: Option<usize> = None;
    let mut stmt = 0usize;
    let mut i = 0usize;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if line_start && c == b'#' {
            // A preprocessor line (and its continuations).
            while i < b.len() && !(b[i] == b'\n' && (i == 0 || b[i - 1] != b'\\')) {
                i += 1;
            }
            if top(&stack) {
                stmt = i;
            }
            continue;
        }
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if !c.is_ascii_whitespace() {
            line_start = false;
        }
        match c {
            b'{' => {
                let at_top = top(&stack);
                let header = s[stmt..i].trim();
                let mut transparent = false;
                if at_top {
                    if header.starts_with("extern") && text[stmt..i].trim() == "extern \"C\"" {
                        transparent = true;
                        c_linkage_depth = Some(stack.len());
                    } else if let Some(f) = c_definition(text, &s, stmt, i, c_linkage_depth.is_some()) {
                        out.push(f);
                    }
                }
                stack.push(transparent);
                i += 1;
                stmt = i;
            }
            b'}' => {
                stack.pop();
                if c_linkage_depth == Some(stack.len()) {
                    c_linkage_depth = None;
                }
                i += 1;
                stmt = i;
            }
            b';' => {
                i += 1;
                if top(&stack) {
                    stmt = i;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// A function definition whose header is `clean[from..to]`, if the
/// header is one this reader takes.
fn c_definition(text: &str, clean: &str, from: usize, to: usize, in_extern_c: bool) -> Option<Function> {
    let header = &clean[from..to];
    let mut h = header.trim_end();
    for q in ["const", "noexcept", "override"] {
        if let Some(x) = h.strip_suffix(q) {
            h = x.trim_end();
        }
    }
    if !h.ends_with(')') {
        return None;
    }
    // The parameter list's opening parenthesis.
    let hb = h.as_bytes();
    let mut depth = 0i32;
    let mut open = None;
    for k in (0..hb.len()).rev() {
        match hb[k] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    open = Some(k);
                    break;
                }
            }
            _ => {}
        }
    }
    let open = open?;
    let before = h[..open].trim_end();
    let bb = before.as_bytes();
    let mut ns = bb.len();
    while ns > 0 && ident_byte(bb[ns - 1]) {
        ns -= 1;
    }
    let name = &before[ns..];
    let decl_clean = before[..ns].trim();
    if name.is_empty() || name == "main" || decl_clean.is_empty() || decl_clean.ends_with("::") {
        return None;
    }
    let words: Vec<&str> = decl_clean.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
    const SKIP: &[&str] = &[
        "static",
        "inline",
        "__global__",
        "__device__",
        "template",
        "operator",
        "__forceinline__",
        "constexpr",
        "if",
        "for",
        "while",
        "switch",
        "return",
        "else",
        "do",
        "sizeof",
        "struct",
        "class",
        "union",
        "enum",
        "namespace",
        "typedef",
        "__inline__",
    ];
    if words.iter().any(|w| SKIP.contains(w)) || decl_clean.contains('=') || decl_clean.contains('<') {
        return None;
    }
    let params_text = h[open + 1..h.len() - 1].trim().to_string();
    let params = if params_text.is_empty() || params_text == "void" {
        Vec::new()
    } else {
        split_params(&params_text).iter().map(|p| c_param(p)).collect::<Option<Vec<_>>>()?
    };
    // The declaration from the original text (string literals restored).
    let mut decl = clean[from..from + ns].trim().replace("extern \" \"", "extern \"C\"");
    let mut ret = decl_clean.to_string();
    for strip in ["extern \" \"", "extern \"\"", "extern", "__host__", "__declspec", "EXPORT", "__attribute__"] {
        ret = ret.replace(strip, " ");
    }
    ret = ret.split_whitespace().filter(|w| !w.starts_with("((") && !w.starts_with('(')).collect::<Vec<_>>().join(" ");
    if ret.is_empty() || ret.contains('(') {
        return None;
    }
    if in_extern_c && !decl.contains("extern \"C\"") {
        decl = format!("extern \"C\" {decl}");
    }
    let params_orig = text[from + open + 1..from + h.len() - 1].trim().to_string();
    Some(Function {
        name: name.to_string(),
        decl,
        ret,
        params_text: params_orig,
        params,
        attributes: String::new(),
        name_at: from + ns,
    })
}

/// The public top-level Rust functions of `text` a wrapper can stand in
/// for (not generic, no `where`, no `self`).
pub fn rust_functions(text: &str) -> Vec<Function> {
    let clean = blank(text);
    let s = String::from_utf8_lossy(&clean).into_owned();
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b'f' if depth == 0 && s[i..].starts_with("fn ") && (i == 0 || !ident_byte(b[i - 1])) => {
                if let Some(f) = rust_definition(text, &s, i) {
                    out.push(f);
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn rust_definition(text: &str, clean: &str, fn_at: usize) -> Option<Function> {
    // The item's start: back to the end of the previous item or attribute.
    let line_start = clean[..fn_at].rfind('\n').map_or(0, |n| n + 1);
    let decl_clean = &clean[line_start..fn_at];
    let decl_words: Vec<&str> = decl_clean.split_whitespace().collect();
    if decl_words.first() != Some(&"pub") || decl_clean.contains("pub(") || decl_words.contains(&"const") {
        return None;
    }
    let rest = &clean[fn_at + 3..];
    let name_len = rest.bytes().take_while(|c| ident_byte(*c)).count();
    let name = &rest[..name_len];
    if name.is_empty() || name == "main" {
        return None;
    }
    let after = rest[name_len..].trim_start();
    if !after.starts_with('(') {
        return None; // generic
    }
    let open = fn_at + 3 + name_len + (rest[name_len..].len() - after.len());
    let cb = clean.as_bytes();
    let mut depth = 0i32;
    let mut close = None;
    for (k, c) in cb.iter().enumerate().skip(open) {
        match c {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(k);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let body = clean[close + 1..].find('{')? + close + 1;
    let tail = clean[close + 1..body].trim();
    if tail.contains("where") || clean[close + 1..body].contains(';') {
        return None;
    }
    let ret = match tail.strip_prefix("->") {
        Some(r) => r.trim().to_string(),
        None if tail.is_empty() => "()".to_string(),
        None => return None,
    };
    if ret.contains('&') || ret.contains("impl ") || ret.contains('\'') {
        return None;
    }
    let params_text = text[open + 1..close].trim().to_string();
    let mut params = Vec::new();
    for p in split_params(&clean[open + 1..close]) {
        let (pat, ty) = p.split_once(':')?;
        let pat = pat.trim().strip_prefix("mut ").unwrap_or(pat.trim()).trim();
        if pat.contains("self") || !pat.bytes().all(ident_byte) || pat.is_empty() {
            return None;
        }
        let ty = ty.trim();
        params.push(Param { name: pat.to_string(), by_address: ty.starts_with('&') || ty.starts_with('*') });
    }
    // Attribute lines just before the item.
    let mut attrs = Vec::new();
    let mut at = line_start;
    while at > 0 {
        let prev_start = clean[..at - 1].rfind('\n').map_or(0, |n| n + 1);
        let line = text[prev_start..at - 1].trim();
        if line.starts_with("#[") {
            attrs.push(line.to_string());
            at = prev_start;
        } else {
            break;
        }
    }
    attrs.reverse();
    Some(Function {
        name: name.to_string(),
        decl: format!("{}fn", text[line_start..fn_at].trim_start()),
        ret,
        params_text,
        params,
        attributes: attrs.join("\n"),
        name_at: fn_at + 3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_definitions_are_read_and_the_rest_left_alone() {
        let text = r#"#include "harness.h"
/* void fake(int x) { } */
static double helper(const double *a, int n) { return a[0] * n; }
// void commented(int n) {}
void qr_batched(int batch, int m, int n, const double *A, double *Q, double *R)
{
    if (batch) { helper(A, n); }
}
double dot(const float x[], const float *y,
           size_t n) { return 0; }
struct s { int a; };
int main(void) { return 0; }
const char *name(void) { return "x{"; }
"#;
        let fs = c_functions(text);
        let names: Vec<&str> = fs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["qr_batched", "dot", "name"], "{fs:#?}");
        let qr = &fs[0];
        assert_eq!(qr.decl, "void");
        assert!(qr.returns_nothing());
        let p: Vec<(&str, bool)> = qr.params.iter().map(|p| (p.name.as_str(), p.by_address)).collect();
        assert_eq!(p, [("batch", false), ("m", false), ("n", false), ("A", true), ("Q", true), ("R", true)]);
        assert_eq!(fs[1].ret, "double");
        assert_eq!(fs[1].params.iter().filter(|p| p.by_address).count(), 2);
        assert!(fs[1].params_text.contains("size_t n"));
        assert_eq!(fs[2].ret, "const char *");
        assert!(fs[2].params.is_empty());
    }

    #[test]
    fn cpp_and_cuda_linkage_is_kept_and_kernels_are_not_wrapped() {
        let text = r#"
__global__ void k(float *x) { x[0] = 1; }
__device__ float d(float x) { return x; }
namespace inner { void hidden(int n) { } }
template <typename T> void t(T *x) { }
extern "C" {
void launch(const float *x, float *y, int n) { k<<<1, 1>>>(y); }
}
extern "C" __host__ void other(float *y, int n) { }
class C { public: void m(int x) { } };
void C::m2(int x) { }
"#;
        let fs = c_functions(text);
        let names: Vec<&str> = fs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["launch", "other"], "{fs:#?}");
        assert_eq!(fs[0].decl, "extern \"C\" void");
        assert_eq!(fs[1].decl, "extern \"C\" __host__ void");
        assert_eq!(fs[1].ret, "void");
    }

    #[test]
    fn rust_public_functions_are_read_with_their_attributes() {
        let text = r#"
use std::f64;
fn private(x: f64) -> f64 { x }
/// Doc.
#[no_mangle]
pub extern "C" fn scale(x: *const f64, y: *mut f64, n: usize) { }
pub fn sum(xs: &[f64], mut acc: f64) -> f64 { xs.iter().fold(acc, |a, b| a + b) }
pub fn generic<T: Copy>(x: T) -> T { x }
pub fn with_where(x: u8) -> u8 where u8: Copy { x }
pub fn borrowed(x: &[f64]) -> &f64 { &x[0] }
mod inner { pub fn nested(x: u8) {} }
pub(crate) fn crate_only(x: u8) {}
"#;
        let fs = rust_functions(text);
        let names: Vec<&str> = fs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["scale", "sum"], "{fs:#?}");
        assert_eq!(fs[0].attributes, "#[no_mangle]");
        assert_eq!(fs[0].decl, "pub extern \"C\" fn");
        assert_eq!(fs[0].ret, "()");
        assert_eq!(fs[1].ret, "f64");
        let p: Vec<(&str, bool)> = fs[1].params.iter().map(|p| (p.name.as_str(), p.by_address)).collect();
        assert_eq!(p, [("xs", true), ("acc", false)]);
        assert_eq!(&text[fs[1].name_at..fs[1].name_at + 3], "sum");
    }
}
