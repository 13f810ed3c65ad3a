//! Whether an attack applies to a campaign, and if it does, the files it
//! writes into a throwaway copy of the workspace: pure, from the spec, the
//! candidate's files and what the host offers.

use std::collections::BTreeSet;

use crate::campaign::CampaignSpec;

use super::manifest::Apply;
use super::Attack;

/// The time every forged result line claims, in microseconds: an odd value,
/// so the report can tell forged numbers that reached gadfly.
pub const FORGED_TIME_US: f64 = 123.25;

/// One file of the candidate, as the attack may edit it.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateFile {
    /// Relative to the workspace, with `/`.
    pub path: String,
    pub text: String,
}

/// What the host that runs the battery offers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFacts {
    /// Shared library names (`liblapack.so.3`) the dynamic loader finds.
    pub libraries: BTreeSet<String>,
    /// Programs on the PATH (`cc`).
    pub programs: BTreeSet<String>,
}

/// What an attack is planned against.
pub struct Context<'a> {
    pub spec: &'a CampaignSpec,
    /// The candidate's source files (see [`language_of`]), sorted by path.
    pub files: &'a [CandidateFile],
    pub host: &'a HostFacts,
}

/// A file the attack writes into its copy of the workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct FileWrite {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: Option<u32>,
}

/// A setup command the attack runs in its copy before the snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    pub command: String,
    /// `RT_SOURCE`'s content (the attack's sources, filled in).
    pub source: Vec<u8>,
    /// `RT_TARGET` and `RT_BINARY` (relative to the copy).
    pub target: String,
    pub binary: String,
}

/// How one attack is applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub writes: Vec<FileWrite>,
    pub setup: Option<Setup>,
    /// Every path the attack writes (its files and what its setup writes).
    pub touched: Vec<String>,
    /// How it was applied, in words ("appended to kernel/qr.c").
    pub applied: String,
}

/// The language of a candidate file, from its extension.
pub fn language_of(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.').map(|(_, e)| e)?;
    Some(match ext {
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "cu" | "cuh" => "cuda",
        "py" => "python",
        "rs" => "rust",
        _ => return None,
    })
}

fn is_header(path: &str) -> bool {
    matches!(path.rsplit_once('.').map(|(_, e)| e), Some("h" | "hpp" | "hh" | "hxx" | "cuh"))
}

/// The languages of a candidate's files, sorted.
pub fn languages(files: &[CandidateFile]) -> Vec<String> {
    let set: BTreeSet<&str> = files.iter().filter_map(|f| language_of(&f.path)).collect();
    set.into_iter().map(String::from).collect()
}

/// Whether `text` defines or calls a function named `name` (the name as a
/// whole word, followed by `(`).
pub fn mentions_function(text: &str, name: &str) -> bool {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut from = 0;
    while let Some(i) = text[from..].find(name) {
        let at = from + i;
        let end = at + name.len();
        let before_ok = at == 0 || !word(bytes[at - 1]);
        let after = text[end..].trim_start();
        if before_ok && after.starts_with('(') && !(end < bytes.len() && word(bytes[end])) {
            return true;
        }
        from = end;
    }
    false
}

/// The results lines every forgery writes: each scenario of the spec
/// correct and faster than every bar of the predicate (at least 3x the
/// initial kernel and the comparison), with errors of zero.
pub fn forged_results(spec: &CampaignSpec) -> String {
    let p = &spec.predicate;
    let mut bar = p.min_speedup.max(p.min_geomean_speedup.unwrap_or(0.0));
    bar = bar.max(p.min_compare_speedup.unwrap_or(0.0)).max(p.min_compare_geomean.unwrap_or(0.0));
    for t in p.scenarios.values() {
        bar = bar.max(t.min_speedup.unwrap_or(0.0)).max(t.min_compare_speedup.unwrap_or(0.0));
    }
    let factor = (2.0 * bar).max(3.0);
    let base = FORGED_TIME_US * factor;
    let mut out = String::new();
    for s in &spec.harness.scenarios {
        let line = serde_json::json!({
            "scenario": s,
            "correct": true,
            "max_abs_err_ref": 0.0,
            "max_abs_err_hi": 0.0,
            "tolerance": 1e-12,
            "time_us": FORGED_TIME_US,
            "baseline_us": base,
            "compare_us": base,
            "samples": 9,
            "cv": 0.01,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

/// The words of a shell command (split on blanks and shell punctuation).
fn words(command: &str) -> Vec<&str> {
    command.split(|c: char| c.is_whitespace() || ";&|()`$<>".contains(c)).filter(|w| !w.is_empty()).collect()
}

/// The program the run command starts (its first word).
pub fn run_program(spec: &CampaignSpec) -> Option<String> {
    spec.harness.run.split_whitespace().next().map(String::from)
}

/// Whether `attack` applies to the campaign, and how: the files it writes,
/// or why it does not apply (a sentence).
pub fn plan(attack: &Attack, ctx: &Context<'_>) -> Result<Plan, String> {
    let m = &attack.manifest;
    let spec = ctx.spec;
    let found = languages(ctx.files);
    let any = m.languages.iter().any(|l| l == "any");
    let fits = |f: &&CandidateFile| any || language_of(&f.path).is_some_and(|l| m.languages.iter().any(|x| x == l));
    let mut candidates: Vec<&CandidateFile> = ctx.files.iter().filter(fits).collect();
    if candidates.is_empty() {
        let have = if found.is_empty() {
            "no source file gadfly recognises (C, C++, CUDA, Python, Rust)".to_string()
        } else {
            format!("{} only", found.join(", "))
        };
        return Err(format!(
            "the attack is written for {} candidates; this candidate has {have}",
            m.languages.join(" or ")
        ));
    }
    // Sources before headers, then by path.
    candidates.sort_by_key(|f| (is_header(&f.path), f.path.clone()));
    let req = &m.requires;
    if let Some(entry) = &req.entry {
        candidates.retain(|f| mentions_function(&f.text, entry));
        if candidates.is_empty() {
            return Err(format!("the attack stands in for `{entry}`, and no candidate file defines it"));
        }
    }
    // A wrapper per exported function: the first file that exports one.
    let mut exported = Vec::new();
    if m.apply == Apply::WrapExported {
        let found = candidates.iter().find_map(|f| {
            let fs = exported_functions(f, req.entry.as_deref());
            (!fs.is_empty()).then_some((*f, fs))
        });
        match found {
            Some((f, fs)) => {
                candidates.retain(|c| c.path == f.path);
                exported = fs;
            }
            None => {
                let files: Vec<&str> = candidates.iter().map(|f| f.path.as_str()).collect();
                return Err(format!(
                    "no function of {} is one the attack can stand in for (a top-level function gadfly reads: not \
                     static, inline, generic or a GPU kernel)",
                    files.join(", ")
                ));
            }
        }
    }
    let target = candidates[0];
    let build = spec.harness.build.clone().unwrap_or_default();
    if !req.build_runs.is_empty() {
        let w = words(&build);
        let runs = w.iter().any(|w| req.build_runs.iter().any(|p| w.rsplit('/').next() == Some(p.as_str())));
        if !runs {
            let tools = req.build_runs.join(" or ");
            return Err(if build.is_empty() {
                format!("the attack works through {tools}, and this campaign has no build command")
            } else {
                format!("the attack works through {tools}; the build `{build}` does not run it")
            });
        }
    }
    let program = run_program(spec).unwrap_or_default();
    if req.run_program_built && (program.starts_with('/') || !program.contains('/')) {
        return Err(format!(
            "the attack replaces the program the run command starts, and `{program}` is not one the build makes (a path inside the tree)"
        ));
    }
    if req.binary && spec.constraints.binary.is_none() {
        return Err(
            "the attack leaves a prebuilt library at [constraints] binary, which this campaign does not set".into()
        );
    }
    if !req.host_library_any.is_empty() && !req.host_library_any.iter().any(|l| ctx.host.libraries.contains(l)) {
        return Err(format!(
            "the attack needs one of {} on the host that runs the harness, and none is there",
            req.host_library_any.join(", ")
        ));
    }
    if let Some(p) = &req.host_program {
        if !ctx.host.programs.contains(p) {
            return Err(format!("the attack's setup needs `{p}` on this host's PATH, and it is not there"));
        }
    }
    if !req.commands_mention.is_empty() {
        let both = format!("{build} {}", spec.harness.run);
        let w = words(&both);
        let hit = w.iter().any(|w| {
            req.commands_mention.iter().any(|x| w.rsplit('/').next().is_some_and(|b| b.starts_with(x.as_str())))
        });
        if !hit {
            return Err(format!("neither the build nor the run command runs {}", req.commands_mention.join(" or ")));
        }
    }

    let dir = match target.path.rsplit_once('/') {
        Some((d, _)) => d.to_string(),
        None => ".".to_string(),
    };
    let ext = target.path.rsplit_once('.').map(|(_, e)| e.to_string()).unwrap_or_default();
    let binary = spec.constraints.binary.clone().unwrap_or_default();
    let forged = forged_results(spec);
    let forged_literal = serde_json::to_string(&forged).expect("a string serialises");
    let fill = |text: &str| -> Result<String, String> {
        let out = text
            .replace("@@FORGED_LITERAL@@", &forged_literal)
            .replace("@@FORGED_JSONL@@", forged.trim_end())
            .replace("@@RUN_PROGRAM@@", &program)
            .replace("@@TARGET_DIR@@", &dir)
            .replace("@@TARGET_EXT@@", &ext)
            .replace("@@TARGET@@", &target.path)
            .replace("@@BINARY@@", &binary);
        match leftover_placeholder(&out) {
            Some(p) => Err(format!("attack {}: unknown placeholder {p}", m.name)),
            None => Ok(out),
        }
    };
    let path_of = |p: &str| -> Result<String, String> {
        let p = fill(p)?;
        let p = p.strip_prefix("./").unwrap_or(&p).to_string();
        if p.is_empty() || p.starts_with('/') || p.split('/').any(|c| c.is_empty() || c == ".." || c == ".git") {
            return Err(format!("attack {}: path `{p}` is not inside the workspace", m.name));
        }
        Ok(p)
    };
    let source = fill(&attack.source)?;
    let mut writes = Vec::new();
    let applied = match m.apply {
        Apply::Append => {
            writes.push(FileWrite {
                path: target.path.clone(),
                content: format!("{}\n{source}", target.text).into_bytes(),
                mode: None,
            });
            format!("appended to {}", target.path)
        }
        Apply::Wrap => {
            let entry = req.entry.as_deref().unwrap_or_default();
            let text = format!("#define {entry} rt_real_{entry}\n{}\n#undef {entry}\n{source}", target.text);
            writes.push(FileWrite { path: target.path.clone(), content: text.into_bytes(), mode: None });
            format!("wraps {entry} in {}", target.path)
        }
        Apply::Replace => {
            writes.push(FileWrite { path: target.path.clone(), content: source.clone().into_bytes(), mode: None });
            format!("replaces {}", target.path)
        }
        Apply::Add => {
            let p = path_of(m.path.as_deref().unwrap_or_default())?;
            writes.push(FileWrite { path: p.clone(), content: source.clone().into_bytes(), mode: None });
            format!("adds {p}")
        }
        Apply::None => String::new(),
        Apply::WrapExported => {
            let text =
                wrap_exported(&target.path, &target.text, &exported, &source, &attack.per_function_source, &m.arg_key)
                    .map_err(|e| format!("attack {}: {e}", m.name))?;
            let text = fill(&text)?;
            writes.push(FileWrite { path: target.path.clone(), content: text.into_bytes(), mode: None });
            let names: Vec<&str> = exported.iter().map(|f| f.name.as_str()).collect();
            format!("wraps {} in {}", names.join(", "), target.path)
        }
    };
    let mut added = Vec::new();
    for (f, text) in m.files.iter().zip(&attack.file_sources) {
        let p = path_of(&f.path)?;
        added.push(p.clone());
        writes.push(FileWrite { path: p, content: fill(text)?.into_bytes(), mode: f.mode });
    }
    let mut touched: Vec<String> = writes.iter().map(|w| w.path.clone()).collect();
    let setup = match &m.setup {
        Some(command) => {
            for w in &m.setup_writes {
                touched.push(path_of(w)?);
            }
            Some(Setup { command: command.clone(), source: source.into_bytes(), target: target.path.clone(), binary })
        }
        None => None,
    };
    let mut applied_parts: Vec<String> = [applied].into_iter().filter(|a| !a.is_empty()).collect();
    if !added.is_empty() {
        applied_parts.push(format!("adds {}", added.join(", ")));
    }
    if setup.is_some() {
        let wrote = &touched[writes.len()..];
        applied_parts.push(if wrote.is_empty() {
            "runs its setup".to_string()
        } else {
            format!("its setup writes {}", wrote.join(", "))
        });
    }
    Ok(Plan { writes, setup, touched, applied: applied_parts.join("; ") })
}

/// The functions of `file` a `wrap_exported` attack stands in for (only
/// `entry` when the manifest names one).
fn exported_functions(file: &CandidateFile, entry: Option<&str>) -> Vec<super::exported::Function> {
    let mut fs = match language_of(&file.path) {
        Some("rust") => super::exported::rust_functions(&file.text),
        Some("c" | "cpp" | "cuda") if !is_header(&file.path) => super::exported::c_functions(&file.text),
        _ => Vec::new(),
    };
    if let Some(e) = entry {
        fs.retain(|f| f.name == e);
    }
    fs
}

/// The candidate file with each of `functions` renamed `rt_real_<name>`
/// and a wrapper of the same signature after it: `prelude` once, then
/// `per_function` filled in for each (see [`super::Manifest::per_function`]).
pub fn wrap_exported(
    path: &str,
    text: &str,
    functions: &[super::exported::Function],
    prelude: &str,
    per_function: &str,
    arg_key: &str,
) -> Result<String, String> {
    let rust = language_of(path) == Some("rust");
    let mut out = String::new();
    if rust {
        // Rename each definition in place (callers inside the file call the wrapper).
        let mut at = 0;
        let mut sorted: Vec<&super::exported::Function> = functions.iter().collect();
        sorted.sort_by_key(|f| f.name_at);
        for f in sorted {
            if !text[f.name_at..].starts_with(&f.name) {
                return Err(format!("`{}` is not where it was read in {path}", f.name));
            }
            out.push_str(&text[at..f.name_at]);
            out.push_str("rt_real_");
            at = f.name_at;
        }
        out.push_str(&text[at..]);
    } else {
        for f in functions {
            out.push_str(&format!("#define {0} rt_real_{0}\n", f.name));
        }
        out.push_str(text);
        out.push('\n');
        for f in functions {
            out.push_str(&format!("#undef {}\n", f.name));
        }
    }
    out.push('\n');
    out.push_str(prelude);
    for f in functions {
        let key = |only_values: bool| -> String {
            f.params
                .iter()
                .filter(|p| !(only_values && p.by_address))
                .map(|p| arg_key.replace("@@ARG@@", &p.name))
                .collect::<Vec<_>>()
                .join("\n    ")
        };
        let args: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
        out.push('\n');
        out.push_str(
            &per_function
                .replace("@@FN@@", &f.name)
                .replace("@@DECL@@", &f.decl)
                .replace("@@RET@@", &f.ret)
                .replace("@@PARAMS@@", &f.params_text)
                .replace("@@ARGS@@", &args.join(", "))
                .replace("@@VOID@@", if f.returns_nothing() { "1" } else { "0" })
                .replace("@@ATTRS@@", &f.attributes)
                .replace("@@KEY_ALL_ARGS@@", &key(false))
                .replace("@@KEY_VALUE_ARGS@@", &key(true)),
        );
    }
    Ok(out)
}

/// The paths of `touched` that the campaign's candidate allow-list keeps
/// out of the evaluation (none without `[harness] candidate`).
pub fn outside_candidate(spec: &CampaignSpec, touched: &[String]) -> Vec<String> {
    let globs = &spec.harness.candidate;
    if globs.is_empty() {
        return vec![];
    }
    let mut b = globset::GlobSetBuilder::new();
    for g in globs {
        if let Ok(g) = globset::GlobBuilder::new(g).literal_separator(false).build() {
            b.add(g);
        }
    }
    let Ok(set) = b.build() else { return vec![] };
    touched.iter().filter(|p| !set.is_match(p.as_str())).cloned().collect()
}

/// A `@@NAME@@` left in a filled-in text (a placeholder gadfly does not know).
fn leftover_placeholder(text: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(i) = text[from..].find("@@") {
        let start = from + i;
        let rest = &text[start + 2..];
        let len = rest.bytes().take_while(|b| b.is_ascii_uppercase() || *b == b'_').count();
        if len > 0 && rest[len..].starts_with("@@") {
            return Some(&text[start..start + len + 4]);
        }
        from = start + 2;
    }
    None
}
