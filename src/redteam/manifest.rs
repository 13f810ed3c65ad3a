//! One attack's manifest (`redteam/<folder>/NN_name.toml`): what it tries,
//! how it is applied to a campaign's candidate, what a sound harness does
//! with it, and the check to add when it breaks one. Parsed with errors that
//! name the file, line, column and field, like a campaign spec's.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// The languages an attack can be written for: a candidate file's
/// language comes from its extension (see [`super::language_of`]); `any`
/// applies to every candidate.
pub const LANGUAGES: &[&str] = &["c", "cpp", "cuda", "python", "rust", "any"];

/// The trick families (HARNESS.md section B, grouped).
pub const FAMILIES: &[&str] = &[
    "results-forgery",
    "output-caching",
    "wrong-output",
    "inputs",
    "timing",
    "precision",
    "shapes",
    "library",
    "build",
    "import-hooks",
];

/// How an attack's sources meet the campaign's candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Apply {
    /// Appended to the candidate file (code that runs at load or exit).
    Append,
    /// The candidate file's entry point renamed `rt_real_<entry>` (a
    /// `#define` before it), and the sources, which define the entry and
    /// may call the real one, appended after an `#undef`.
    Wrap,
    /// The candidate file's content replaced by the sources.
    Replace,
    /// The sources written as a new file at `path`.
    Add,
    /// The candidate left as it is (the attack works through its extra
    /// files or its setup).
    None,
    /// Every function the candidate file exports (see
    /// [`super::exported`]) renamed `rt_real_<name>`, and a wrapper of the
    /// same signature generated for each from `per_function`: an attack
    /// written once per language, whatever the entry point is called.
    WrapExported,
}

impl Apply {
    pub fn as_str(self) -> &'static str {
        match self {
            Apply::Append => "append",
            Apply::Wrap => "wrap",
            Apply::Replace => "replace",
            Apply::Add => "add",
            Apply::None => "none",
            Apply::WrapExported => "wrap_exported",
        }
    }
}

/// One more file an attack writes (its path may use `@@TARGET_DIR@@` and
/// `@@TARGET_EXT@@`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtraFile {
    pub path: String,
    /// Concatenated, in order (may be empty: an empty file).
    pub sources: Vec<String>,
    /// Unix permissions, e.g. 0o755.
    pub mode: Option<u32>,
}

/// What a campaign must offer for the attack to apply; each unmet one is a
/// "not applicable" with its reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Requires {
    /// A candidate file defines this function (the attack wraps it).
    pub entry: Option<String>,
    /// The build command runs one of these programs.
    pub build_runs: Vec<String>,
    /// The run command starts a program the build makes (a relative path).
    pub run_program_built: bool,
    /// `[constraints] binary` is set (the attack writes it).
    pub binary: bool,
    /// One of these libraries is on the host (ldconfig's cache).
    pub host_library_any: Vec<String>,
    /// This program is on the host's PATH.
    pub host_program: Option<String>,
    /// The build or run command mentions one of these words.
    pub commands_mention: Vec<String>,
}

/// An attack's manifest, validated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    pub name: String,
    pub languages: Vec<String>,
    pub family: String,
    /// What the attack tries, in a sentence or two.
    pub tries: String,
    /// The trick it stands for, with its source (HARNESS.md, THREATS.md).
    pub trick: String,
    /// Source files, relative to the manifest's folder, concatenated.
    pub sources: Vec<String>,
    pub apply: Apply,
    /// Where `add` writes its sources.
    pub path: Option<String>,
    pub files: Vec<ExtraFile>,
    /// What a sound harness does with it: always `held`.
    pub expect: String,
    /// Words one of which the reason of a sound harness's failure holds
    /// (the check expected to catch it); empty: any check will do.
    pub expect_reason: Vec<String>,
    /// The check to add when the attack breaks the harness.
    pub suggestion: String,
    /// A shell command gadfly runs in the attack's copy of the workspace
    /// before the snapshot (with `RT_TARGET`, `RT_SOURCE`, `RT_BINARY` and
    /// `RT_TMP` set), e.g. to build a stale library.
    pub setup: Option<String>,
    /// Paths the setup writes (placeholders allowed): what the candidate
    /// allow-list may keep out.
    pub setup_writes: Vec<String>,
    pub requires: Requires,
    /// For `wrap_exported`: sources written once per exported function,
    /// with `@@FN@@`, `@@DECL@@`, `@@RET@@`, `@@PARAMS@@`, `@@ARGS@@`,
    /// `@@VOID@@` (1 or 0), `@@ATTRS@@`, `@@KEY_ALL_ARGS@@` and
    /// `@@KEY_VALUE_ARGS@@` filled in.
    pub per_function: Vec<String>,
    /// For `wrap_exported`: the statement that adds one argument
    /// (`@@ARG@@`) to a call's key; `@@KEY_ALL_ARGS@@` is it for every
    /// argument, `@@KEY_VALUE_ARGS@@` for those passed by value (sizes,
    /// scalars: the call's shape).
    pub arg_key: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: Spanned<String>,
    languages: Spanned<Vec<Spanned<String>>>,
    family: Spanned<String>,
    tries: Spanned<String>,
    trick: Spanned<String>,
    #[serde(default)]
    sources: Vec<Spanned<String>>,
    apply: Spanned<String>,
    #[serde(default)]
    path: Option<Spanned<String>>,
    #[serde(default)]
    files: Vec<RawFile>,
    expect: Spanned<String>,
    #[serde(default)]
    expect_reason: Vec<String>,
    suggestion: Spanned<String>,
    #[serde(default)]
    setup: Option<Spanned<String>>,
    #[serde(default)]
    setup_writes: Vec<Spanned<String>>,
    #[serde(default)]
    requires: RawRequires,
    #[serde(default)]
    per_function: Vec<Spanned<String>>,
    #[serde(default)]
    arg_key: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    path: Spanned<String>,
    #[serde(default)]
    sources: Vec<Spanned<String>>,
    #[serde(default)]
    mode: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequires {
    #[serde(default)]
    entry: Option<Spanned<String>>,
    #[serde(default)]
    build_runs: Vec<String>,
    #[serde(default)]
    run_program_built: bool,
    #[serde(default)]
    binary: bool,
    #[serde(default)]
    host_library_any: Vec<String>,
    #[serde(default)]
    host_program: Option<String>,
    #[serde(default)]
    commands_mention: Vec<String>,
}

/// A manifest error located in its file: `file:line:column: field: message`.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
        } else {
            write!(f, "{}:{}:{}: field `{}`: {}", self.file, self.line, self.column, self.field, self.message)
        }
    }
}

struct Errors<'a> {
    file: &'a str,
    text: &'a str,
    list: Vec<ManifestError>,
}

impl Errors<'_> {
    fn push(&mut self, span: std::ops::Range<usize>, field: &str, message: impl Into<String>) {
        let offset = span.start.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before[before.rfind('\n').map_or(0, |nl| nl + 1)..].chars().count() + 1;
        self.list.push(ManifestError {
            file: self.file.to_string(),
            line,
            column,
            field: field.to_string(),
            message: message.into(),
        });
    }
}

/// A name: lowercase letters, digits and `-`.
fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A C or Python identifier.
fn valid_ident(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A relative path with no `..`, no empty part and nothing under `.git`
/// (placeholders allowed).
fn valid_rel_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|c| !c.is_empty() && c != ".." && c != ".git")
        && !p.contains('\0')
}

/// Parses and validates one manifest's text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Manifest, Vec<ManifestError>> {
    let mut errors = Errors { file, text, list: Vec::new() };
    let raw: RawManifest = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            let message = e.message().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
            let field = crate::campaign::field_at(text, span.start, None);
            errors.push(span, &field, if message.is_empty() { "invalid TOML here".to_string() } else { message });
            return Err(errors.list);
        }
    };
    if !valid_name(raw.name.get_ref()) {
        errors.push(raw.name.span(), "name", "must be lowercase letters, digits and `-` (at most 64)");
    }
    if raw.languages.get_ref().is_empty() {
        errors.push(raw.languages.span(), "languages", format!("must name at least one of {}", LANGUAGES.join(", ")));
    }
    for l in raw.languages.get_ref() {
        if !LANGUAGES.contains(&l.get_ref().as_str()) {
            errors.push(
                l.span(),
                "languages",
                format!("unknown language `{}`; expected one of {}", l.get_ref(), LANGUAGES.join(", ")),
            );
        }
    }
    if !FAMILIES.contains(&raw.family.get_ref().as_str()) {
        errors.push(
            raw.family.span(),
            "family",
            format!("unknown family `{}`; expected one of {}", raw.family.get_ref(), FAMILIES.join(", ")),
        );
    }
    for (field, v) in [("tries", &raw.tries), ("trick", &raw.trick), ("suggestion", &raw.suggestion)] {
        if v.get_ref().trim().is_empty() {
            errors.push(v.span(), field, "must not be empty");
        }
    }
    let apply = match raw.apply.get_ref().as_str() {
        "append" => Apply::Append,
        "wrap" => Apply::Wrap,
        "replace" => Apply::Replace,
        "add" => Apply::Add,
        "none" => Apply::None,
        "wrap_exported" => Apply::WrapExported,
        other => {
            errors.push(
                raw.apply.span(),
                "apply",
                format!("unknown way `{other}`; expected append, wrap, replace, add, none or wrap_exported"),
            );
            Apply::None
        }
    };
    if apply != Apply::None && raw.sources.is_empty() {
        errors.push(raw.apply.span(), "sources", format!("`apply = \"{}\"` needs at least one source", apply.as_str()));
    }
    if apply == Apply::WrapExported {
        if raw.per_function.is_empty() {
            errors.push(
                raw.apply.span(),
                "per_function",
                "`apply = \"wrap_exported\"` needs the wrapper written for each function",
            );
        }
        match &raw.arg_key {
            None => errors.push(
                raw.apply.span(),
                "arg_key",
                "`apply = \"wrap_exported\"` needs the statement that adds `@@ARG@@` to a call's key",
            ),
            Some(k) if !k.get_ref().contains("@@ARG@@") => {
                errors.push(k.span(), "arg_key", "must use `@@ARG@@`, the argument it adds")
            }
            _ => {}
        }
        let langs: Vec<&str> = raw.languages.get_ref().iter().map(|l| l.get_ref().as_str()).collect();
        let c_family = langs.iter().all(|l| matches!(*l, "c" | "cpp" | "cuda"));
        if !(c_family || langs == ["rust"]) {
            errors.push(raw.languages.span(), "languages", "`apply = \"wrap_exported\"` reads C, C++ and CUDA functions, or Rust ones: not both, and no other language");
        }
    } else if let Some(p) = raw.per_function.first() {
        errors.push(p.span(), "per_function", "only `apply = \"wrap_exported\"` writes a wrapper per function");
    }
    for s in raw.sources.iter().chain(raw.files.iter().flat_map(|f| f.sources.iter())).chain(raw.per_function.iter()) {
        if !valid_source(s.get_ref()) {
            errors.push(s.span(), "sources", format!("`{}` is not a relative path to a source file", s.get_ref()));
        }
    }
    match (&raw.path, apply) {
        (None, Apply::Add) => {
            errors.push(raw.apply.span(), "path", "`apply = \"add\"` needs `path`, where the file goes")
        }
        (Some(p), Apply::Add) if !valid_rel_path(p.get_ref()) => {
            errors.push(p.span(), "path", "must be a relative path inside the workspace (no `..`, not under .git)")
        }
        (Some(p), a) if a != Apply::Add => {
            errors.push(p.span(), "path", "only `apply = \"add\"` takes a path (the others edit the candidate file)")
        }
        _ => {}
    }
    let entry = raw.requires.entry.as_ref().map(|e| e.get_ref().clone());
    if let Some(e) = &raw.requires.entry {
        if !valid_ident(e.get_ref()) {
            errors.push(e.span(), "requires.entry", "must be a function name (an identifier)");
        }
    }
    if apply == Apply::Wrap && entry.is_none() {
        errors.push(raw.apply.span(), "requires.entry", "`apply = \"wrap\"` needs the entry point it wraps");
    }
    if raw.expect.get_ref() != "held" {
        errors.push(raw.expect.span(), "expect", "a sound harness holds every attack: must be \"held\"");
    }
    let mut files = Vec::new();
    for f in &raw.files {
        if !valid_rel_path(f.path.get_ref()) {
            errors.push(
                f.path.span(),
                "files.path",
                "must be a relative path inside the workspace (no `..`, not under .git)",
            );
        }
        let mode = match &f.mode {
            Some(m) if !(0..=0o777).contains(m.get_ref()) => {
                errors.push(m.span(), "files.mode", "must be Unix permissions between 0o000 and 0o777");
                None
            }
            Some(m) => Some(*m.get_ref() as u32),
            None => None,
        };
        files.push(ExtraFile {
            path: f.path.get_ref().clone(),
            sources: f.sources.iter().map(|s| s.get_ref().clone()).collect(),
            mode,
        });
    }
    if let Some(s) = &raw.setup {
        if s.get_ref().trim().is_empty() {
            errors.push(s.span(), "setup", "must not be empty when given");
        }
    }
    for w in &raw.setup_writes {
        if !valid_rel_path(w.get_ref()) {
            errors.push(w.span(), "setup_writes", "must be a relative path inside the workspace");
        }
    }
    if !raw.setup_writes.is_empty() && raw.setup.is_none() {
        errors.push(raw.setup_writes[0].span(), "setup_writes", "names what `setup` writes, and there is no setup");
    }
    if !errors.list.is_empty() {
        return Err(errors.list);
    }
    let languages: BTreeSet<String> = raw.languages.into_inner().into_iter().map(Spanned::into_inner).collect();
    Ok(Manifest {
        name: raw.name.into_inner(),
        languages: languages.into_iter().collect(),
        family: raw.family.into_inner(),
        tries: raw.tries.into_inner(),
        trick: raw.trick.into_inner(),
        sources: raw.sources.into_iter().map(Spanned::into_inner).collect(),
        apply,
        path: raw.path.map(Spanned::into_inner),
        files,
        expect: raw.expect.into_inner(),
        expect_reason: raw.expect_reason,
        suggestion: raw.suggestion.into_inner(),
        setup: raw.setup.map(Spanned::into_inner),
        setup_writes: raw.setup_writes.into_iter().map(Spanned::into_inner).collect(),
        requires: Requires {
            entry,
            build_runs: raw.requires.build_runs,
            run_program_built: raw.requires.run_program_built,
            binary: raw.requires.binary,
            host_library_any: raw.requires.host_library_any,
            host_program: raw.requires.host_program,
            commands_mention: raw.requires.commands_mention,
        },
        per_function: raw.per_function.into_iter().map(Spanned::into_inner).collect(),
        arg_key: raw.arg_key.map(Spanned::into_inner).unwrap_or_default(),
    })
}

/// A source path: relative (it may climb out of the manifest's folder, to
/// the CUDA harness's exploits), no empty part.
fn valid_source(p: &str) -> bool {
    !p.is_empty() && !p.starts_with('/') && p.split('/').all(|c| !c.is_empty() && c != ".git")
}
