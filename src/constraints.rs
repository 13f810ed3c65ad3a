//! Banned symbols, read from the built binary itself: the symbol table, the
//! dynamic symbols (imports included), the libraries it needs (DT_NEEDED)
//! and the printable strings it carries (CUDA kernel names live there, in
//! the fatbin). C++ names are demangled, so `cutlass::` matches a mangled
//! `_ZN7cutlass...`. Matching is a case-insensitive substring test.

use std::collections::BTreeSet;
use std::path::Path;

use object::{Object, ObjectSymbol};

/// One banned pattern found in the binary, with where it was found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    pub pattern: String,
    pub place: String,
    pub name: String,
}

impl std::fmt::Display for Hit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "banned `{}` found in {}: {}", self.pattern, self.place, self.name)
    }
}

/// Every name in the binary that a banned pattern could match, by place.
pub fn names_in(bytes: &[u8]) -> Vec<(&'static str, String)> {
    let mut names: Vec<(&'static str, String)> = Vec::new();
    match object::File::parse(bytes) {
        Ok(file) => {
            for sym in file.symbols() {
                if let Ok(n) = sym.name() {
                    if !n.is_empty() {
                        names.push(("symbol table", n.to_string()));
                    }
                }
            }
            for sym in file.dynamic_symbols() {
                if let Ok(n) = sym.name() {
                    if !n.is_empty() {
                        names.push(("dynamic symbols", n.to_string()));
                    }
                }
            }
            if let Ok(imports) = file.imports() {
                for imp in imports {
                    let lib = String::from_utf8_lossy(imp.library()).into_owned();
                    if !lib.is_empty() {
                        names.push(("imported libraries", lib));
                    }
                    names.push(("imports", String::from_utf8_lossy(imp.name()).into_owned()));
                }
            }
            for lib in needed_libraries(bytes) {
                names.push(("DT_NEEDED", lib));
            }
        }
        Err(_) => names.push(("file format", "not an object file gadfly can parse; only its strings were read".into())),
    }
    for s in printable_strings(bytes, 6) {
        names.push(("strings", s));
    }
    names
}

/// Checks `binary` against the banned patterns. A missing or unreadable
/// binary is itself a violation: the constraint cannot be verified.
pub fn check_binary(binary: &Path, banned: &[String]) -> Result<Vec<Hit>, String> {
    let bytes =
        std::fs::read(binary).map_err(|e| format!("constraint binary {} cannot be read: {e}", binary.display()))?;
    Ok(check_bytes(&bytes, banned))
}

pub fn check_bytes(bytes: &[u8], banned: &[String]) -> Vec<Hit> {
    let patterns: Vec<(String, String)> = banned.iter().map(|p| (p.clone(), p.to_lowercase())).collect();
    let mut hits = BTreeSet::new();
    for (place, name) in names_in(bytes) {
        let readable = demangle(&name);
        let forms = [name.to_lowercase(), readable.to_lowercase()];
        for (pattern, lower) in &patterns {
            if forms.iter().any(|f| f.contains(lower.as_str())) {
                let shown = if readable != name { format!("{name} ({})", shorten(&readable)) } else { name.clone() };
                hits.insert(Hit { pattern: pattern.clone(), place: place.to_string(), name: shorten(&shown) });
            }
        }
    }
    // One line per pattern and place is enough for a verdict.
    let mut seen = BTreeSet::new();
    hits.into_iter().filter(|h| seen.insert((h.pattern.clone(), h.place.clone()))).collect()
}

fn demangle(name: &str) -> String {
    let trimmed = name.trim_start_matches('_');
    if name.starts_with("_Z") || trimmed.starts_with('Z') {
        let candidate = if name.starts_with("_Z") { name.to_string() } else { format!("_{trimmed}") };
        if let Ok(sym) = cpp_demangle::Symbol::new(candidate.as_bytes()) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    name.to_string()
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 120 {
        let mut t: String = s.chars().take(117).collect();
        t.push_str("...");
        t
    } else {
        s.to_string()
    }
}

/// DT_NEEDED entries of an ELF file (32 or 64 bit, either endianness).
fn needed_libraries(bytes: &[u8]) -> Vec<String> {
    use object::read::elf::{Dyn, ElfFile32, ElfFile64, FileHeader};
    fn collect<Elf: FileHeader>(file: &object::read::elf::ElfFile<'_, Elf>) -> Vec<String> {
        let endian = file.endian();
        let data = file.data();
        let sections = file.elf_section_table();
        let mut out = Vec::new();
        let Ok(Some((dynamic, index))) = sections.dynamic(endian, data) else {
            return out;
        };
        let Ok(strings) = sections.strings(endian, data, index) else {
            return out;
        };
        for entry in dynamic {
            if entry.tag32(endian) == Some(object::elf::DT_NEEDED) {
                if let Ok(name) = entry.string(endian, strings) {
                    out.push(String::from_utf8_lossy(name).into_owned());
                }
            }
        }
        out
    }
    if let Ok(f) = ElfFile64::<object::Endianness>::parse(bytes) {
        return collect(&f);
    }
    if let Ok(f) = ElfFile32::<object::Endianness>::parse(bytes) {
        return collect(&f);
    }
    Vec::new()
}

/// Runs of printable ASCII at least `min` long, like `strings(1)`.
fn printable_strings(bytes: &[u8], min: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in bytes.iter().enumerate() {
        let printable = (0x20..0x7f).contains(&b);
        match (printable, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if i - s >= min {
                    out.push(String::from_utf8_lossy(&bytes[s..i]).into_owned());
                }
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        if bytes.len() - s >= min {
            out.push(String::from_utf8_lossy(&bytes[s..]).into_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn build_so(dir: &Path, name: &str, source: &str, extra: &[&str]) -> std::path::PathBuf {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, source).unwrap();
        let out = dir.join(format!("lib{name}.so"));
        let status =
            Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&out).arg(&src).args(extra).status().unwrap();
        assert!(status.success());
        out
    }

    #[test]
    fn catches_imported_symbols_needed_libraries_and_mangled_names() {
        let dir = tempfile::tempdir().unwrap();
        // an undefined function becomes a dynamic import
        let so = build_so(
            dir.path(),
            "k",
            "int cublasGemmEx(int); int run(int x) { return cublasGemmEx(x); }\n\
             const char *kernel_name = \"_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE\";\n",
            &[],
        );
        let banned = vec!["cublas".to_string(), "cutlass::".to_string()];
        let hits = check_binary(&so, &banned).unwrap();
        let text: Vec<String> = hits.iter().map(|h| h.to_string()).collect();
        assert!(hits.iter().any(|h| h.pattern == "cublas" && h.place == "dynamic symbols"), "{text:?}");
        assert!(hits.iter().any(|h| h.pattern == "cutlass::" && h.place == "strings"), "{text:?}");

        // a library dependency by name
        let lib = build_so(dir.path(), "cublasLt", "int helper(void) { return 1; }\n", &[]);
        let user = build_so(
            dir.path(),
            "user",
            "int helper(void); int f(void) { return helper(); }\n",
            &["-L", dir.path().to_str().unwrap(), "-lcublasLt"],
        );
        assert!(lib.exists());
        let hits = check_binary(&user, &["cublas".to_string()]).unwrap();
        assert!(hits.iter().any(|h| h.place == "DT_NEEDED" && h.name == "libcublasLt.so"), "{hits:?}");
    }

    #[test]
    fn clean_binary_has_no_hits_and_missing_binary_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let so = build_so(dir.path(), "clean", "int add(int a, int b) { return a + b; }\n", &[]);
        assert!(check_binary(&so, &["cublas".into(), "cudnn".into()]).unwrap().is_empty());
        let err = check_binary(&dir.path().join("nope.so"), &["x".into()]).unwrap_err();
        assert!(err.contains("cannot be read"));
    }
}
