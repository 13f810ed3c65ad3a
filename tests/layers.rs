//! The house rules that a grep can check (issue #33): the hook client does
//! not reach into the daemon, the adapters (`src/agent/`) name neither the
//! application, the store nor the API, the domain modules are pure (they name
//! neither the application nor the store, only one another and the
//! leaves), and the module table in ARCHITECTURE.md names every module there
//! is, so it cannot silently go stale.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The client layer: what `gadfly hook` runs, on every agent event.
const CLIENT: &[&str] = &["hook", "spool", "client", "config", "time"];

/// What the client layer never names: the persistence, the HTTP server and
/// the application (and the homes the redesign gives the last two).
const FORBIDDEN: &[&str] = &["store", "server", "supervisor", "api", "app"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The `.rs` files of module `name`: `src/NAME.rs` and everything under
/// `src/NAME/`.
fn files_of(name: &str) -> Vec<PathBuf> {
    let mut out = vec![];
    let file = src().join(format!("{name}.rs"));
    if file.is_file() {
        out.push(file);
    }
    out.extend(rust_files_under(&src().join(name)));
    out.sort();
    out
}

/// The source without its comments (line comments, doc comments included),
/// so a doc that mentions a module is not an import of it.
fn code_of(text: &str) -> String {
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// Every top-level module a piece of code names through `crate::`:
/// `crate::store::now`, `use crate::store;` and `use crate::{config, store::X}`.
fn crate_modules(code: &str) -> BTreeSet<String> {
    modules_named(code, "crate")
}

/// Every top-level module a piece of code names through `ROOT::` (`crate`
/// in the library, `gadfly` in the tests and benches), in the same forms.
fn modules_named(code: &str, root: &str) -> BTreeSet<String> {
    let prefix = format!("{root}::");
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(&prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `mycrate::`, not `crate::`
        }
        let s = rest.trim_start();
        if let Some(group) = s.strip_prefix('{') {
            // The first segment of each item of the group, at depth 0.
            let (mut depth, mut start) = (0usize, true);
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        found.insert(ident_at(&group[j..]).to_string());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            found.insert(ident_at(s).to_string());
        }
    }
    found.retain(|m| !m.is_empty());
    found
}

#[test]
fn the_scanner_sees_every_way_of_naming_a_module() {
    let code = "use crate::store::now;\nuse crate::{config, server::X};\nlet _ = crate::supervisor::f();\nuse crate::{\n    a::{b, c},\n    d,\n};\nmycrate::nope();";
    let found: Vec<_> = crate_modules(code).into_iter().collect();
    assert_eq!(found, ["a", "config", "d", "server", "store", "supervisor"]);
    assert!(crate_modules(&code_of("//! see crate::store\nfn f() {}")).is_empty());
    let found: Vec<_> = modules_named("use gadfly::{app::X, beam};\nnotgadfly::x();", "gadfly").into_iter().collect();
    assert_eq!(found, ["app", "beam"]);
}

#[test]
fn the_hook_client_does_not_reach_into_the_daemon() {
    let mut breaks = vec![];
    for module in CLIENT {
        let files = files_of(module);
        assert!(!files.is_empty(), "client module `{module}` has no file under src/");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for m in crate_modules(&code_of(&text)) {
                if FORBIDDEN.contains(&m.as_str()) {
                    breaks.push(format!("{} names crate::{m}", file.display()));
                }
            }
        }
    }
    assert!(
        breaks.is_empty(),
        "the client layer ({}) must not import {}; move the item down (see ARCHITECTURE.md):\n{}",
        CLIENT.join(", "),
        FORBIDDEN.join(", "),
        breaks.join("\n")
    );
}

/// What the adapters (`src/agent/`) never name: the application (and its
/// old shim), the store and the HTTP layer. They read what agents write and
/// return events; `src/app/` records and judges them.
const ADAPTERS_FORBIDDEN: &[&str] = &["app", "supervisor", "store", "api"];

#[test]
fn the_adapters_name_neither_the_application_nor_the_store_nor_the_api() {
    let files = files_of("agent");
    assert!(files.len() > 3, "the adapters have no files under src/agent/: {files:?}");
    let mut breaks = vec![];
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for m in crate_modules(&code_of(&text)) {
            if ADAPTERS_FORBIDDEN.contains(&m.as_str()) {
                breaks.push(format!("{} names crate::{m}", file.display()));
            }
        }
    }
    assert!(
        breaks.is_empty(),
        "the adapters (src/agent/) must not name {}: return events and let src/app/ record and judge them (see ARCHITECTURE.md):\n{}",
        ADAPTERS_FORBIDDEN.join(", "),
        breaks.join("\n")
    );
}

/// The domain: pure rules and types, findings in and findings out.
const DOMAIN: &[&str] = &[
    "moments",
    // The beam's git parts and types; its use cases are src/app/beam.rs.
    "beam",
    "bank",
    "classify",
    "gate",
    "predicate",
    // Issue #47: a harness's calibration, from its measurements.
    "calibration",
    "results",
    "campaign",
    "events",
    "evaluation",
    "html",
    // Issue #36: the red-team battery, its manifests, plans and judge (the
    // running is src/app/redteam.rs).
    "redteam",
    "pristine",
    // `gadfly replay`'s core: the daemon's decision code over a timeline.
    "replay",
    // Issue #38: spend summed, and notifications built and signed (their
    // delivery is src/app/notify.rs).
    "spend",
    "notify",
];

/// What the domain never names: the application (and its old shim) and the
/// store. The application gathers for the domain and acts on what it
/// returns; the domain does not call back up.
const DOMAIN_FORBIDDEN: &[&str] = &["app", "supervisor", "store"];

/// The leaves every layer may import.
const LEAVES: &[&str] = &["time", "config"];

/// Where a domain file names a module outside the domain and the leaves,
/// and why that is allowed: (a file under src/, or the start of its path,
/// and the module it names).
const DOMAIN_EXCEPTIONS: &[(&str, &str)] = &[
    // The edit-loop detector diffs two evaluated trees in gadfly's private
    // snapshot store with its hardened git (REDESIGN.md §7: the domain does
    // no I/O "except edit_loop's git diff").
    ("moments/edit_loop.rs", "snapshot"),
    // A spec's workspace must be a git work tree: `campaign::parse` asks
    // git, through the hardened command (the leaf `git`, not `snapshot`).
    ("campaign", "git"),
    // The beam's candidates are refs in the agent's workspace: `beam`
    // lists, resolves and tags them with the hardened git (the leaf `git`).
    ("beam", "git"),
];

/// The crate modules each domain file names: (file relative to src/, module).
fn domain_imports() -> Vec<(String, String)> {
    let mut out = vec![];
    for module in DOMAIN {
        let files = files_of(module);
        assert!(!files.is_empty(), "domain module `{module}` has no file under src/");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let rel = file.strip_prefix(src()).unwrap().to_string_lossy().replace('\\', "/");
            for m in crate_modules(&code_of(&text)) {
                out.push((rel.clone(), m));
            }
        }
    }
    out
}

#[test]
fn domain_modules_name_neither_the_application_nor_the_store() {
    let breaks: Vec<String> = domain_imports()
        .into_iter()
        .filter(|(_, m)| DOMAIN_FORBIDDEN.contains(&m.as_str()))
        .map(|(file, m)| format!("src/{file} names crate::{m}"))
        .collect();
    assert!(
        breaks.is_empty(),
        "the domain ({}) must not name {}: return data and let src/app/ act on it (see ARCHITECTURE.md):\n{}",
        DOMAIN.join(", "),
        DOMAIN_FORBIDDEN.join(", "),
        breaks.join("\n")
    );
}

#[test]
fn domain_modules_name_only_the_domain_and_the_leaves() {
    let breaks: Vec<String> = domain_imports()
        .into_iter()
        .filter(|(file, m)| {
            !DOMAIN.contains(&m.as_str())
                && !LEAVES.contains(&m.as_str())
                && !DOMAIN_EXCEPTIONS.iter().any(|(f, x)| file.starts_with(f) && x == m)
        })
        .map(|(file, m)| format!("src/{file} names crate::{m}"))
        .collect();
    assert!(
        breaks.is_empty(),
        "a domain module names a module above the domain; move the item down, or the call up (see ARCHITECTURE.md):\n{}",
        breaks.join("\n")
    );
    // An exception that no longer applies goes, so the list stays honest.
    let imports = domain_imports();
    for (file, m) in DOMAIN_EXCEPTIONS {
        assert!(
            imports.iter().any(|(f, x)| f.starts_with(file) && x == m),
            "src/{file} no longer names crate::{m}: remove the exception"
        );
    }
}

/// Every module under src/: `NAME.rs` and folders holding Rust files
/// (`lib.rs` only includes ARCHITECTURE.md).
fn modules_on_disk() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for e in std::fs::read_dir(src()).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            if !files_of(&name).is_empty() {
                names.insert(name);
            }
        } else if p.extension().is_some_and(|x| x == "rs") && name != "lib" {
            names.insert(name);
        }
    }
    names
}

/// The modules the table in ARCHITECTURE.md (the crate's doc, included by
/// `src/lib.rs`) has a row for: the first `name` in backticks of each
/// row's first cell.
fn modules_in_table() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    assert!(lib.contains("include_str!(\"../ARCHITECTURE.md\")"), "src/lib.rs no longer includes ARCHITECTURE.md");
    let table = std::fs::read_to_string(src().join("../ARCHITECTURE.md")).unwrap();
    let mut names = BTreeSet::new();
    for line in table.lines() {
        let Some(row) = line.trim().strip_prefix('|') else { continue };
        let first = row.split('|').next().unwrap_or("");
        if let Some(name) = first.split('`').nth(1) {
            names.insert(name.trim_end_matches('/').to_string());
        }
    }
    names
}

#[test]
fn the_module_table_names_every_module() {
    let (disk, table) = (modules_on_disk(), modules_in_table());
    assert!(disk.len() > 10 && table.len() > 10, "found {disk:?} on disk and {table:?} in the table");
    let missing: Vec<_> = disk.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's module table has no row for {missing:?}: add one (owns, layer, imports)"
    );
    let gone: Vec<_> = table.difference(&disk).collect();
    assert!(gone.is_empty(), "ARCHITECTURE.md's module table has rows for {gone:?}, which are not under src/ any more");
}

/// The `.rs` files under `dir`, recursively.
fn rust_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `supervisor` was a shim re-exporting `app` while callers moved (issue
/// #33); it is gone, and nothing names it again: no `crate::supervisor`
/// under src/, no `gadfly::supervisor` in the tests or the benches.
#[test]
fn no_file_names_the_supervisor_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(!src().join("supervisor.rs").exists() && !src().join("supervisor").exists());
    let mut breaks = vec![];
    for (dir, name_root) in [("src", "crate"), ("tests", "gadfly"), ("benches", "gadfly")] {
        for file in rust_files_under(&root.join(dir)) {
            let code = code_of(&std::fs::read_to_string(&file).unwrap());
            if modules_named(&code, name_root).contains("supervisor") {
                breaks.push(format!("{} names {name_root}::supervisor", file.display()));
            }
        }
    }
    assert!(breaks.is_empty(), "name `app` (the application layer), not `supervisor`:\n{}", breaks.join("\n"));
}

/// The import map between the top-level modules, outside test code: for
/// each module, the other modules its files name through `crate::`.
fn import_map() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules_on_disk();
    let mut map = BTreeMap::new();
    for m in &mods {
        let mut to = BTreeSet::new();
        for f in files_of(m) {
            if f.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            let code = code_of(text.split("#[cfg(test)]").next().unwrap_or(""));
            to.extend(crate_modules(&code).into_iter().filter(|n| n != m && mods.contains(n)));
        }
        map.insert(m.clone(), to);
    }
    map
}

/// The circles of a map: each set of two or more modules that all reach
/// one another.
fn circles(map: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for n in map.get(&m).into_iter().flatten() {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = map.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<BTreeSet<String>> = vec![];
    for m in map.keys() {
        let circle: BTreeSet<String> =
            reaches[m].iter().filter(|n| *n != m && reaches[n].contains(m)).cloned().chain([m.clone()]).collect();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

/// Issue #33: the import map has at most one circle, `cli` ⇄ `demo` (the
/// demo is a CLI command that drives the CLI). REDESIGN counted three,
/// one of them fifteen files around the old supervisor.
#[test]
fn the_import_map_has_one_circle_at_most_cli_and_demo() {
    let map = import_map();
    assert!(map.len() > 20 && map.values().map(BTreeSet::len).sum::<usize>() > 50, "{map:?}");
    // The finder finds a planted circle.
    let mut planted = map.clone();
    planted.get_mut("time").unwrap().insert("store".into());
    assert!(circles(&planted).iter().any(|c| c.contains("time") && c.contains("store")), "{:?}", circles(&planted));
    let found = circles(&map);
    let allowed: BTreeSet<String> = ["cli", "demo"].map(String::from).into();
    assert!(
        found.iter().all(|c| *c == allowed),
        "the modules import one another in a circle: {found:?}; make one of the arrows point down (ARCHITECTURE.md)"
    );
}

/// The longest a source file may grow before it is split (issue #33: a file
/// over this holds several things).
const MAX_LINES: usize = 900;

#[test]
fn no_source_file_is_over_900_lines() {
    let mut over: Vec<String> = rust_files_under(&src())
        .into_iter()
        .filter_map(|p| {
            let n = std::fs::read_to_string(&p).map(|t| t.lines().count()).unwrap_or(0);
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", p.strip_prefix(src()).unwrap_or(&p).display()))
        })
        .collect();
    over.sort();
    assert!(over.is_empty(), "split these source files (at most {MAX_LINES} lines each): {over:?}");
    // The scan reads the tree: it saw the largest modules.
    assert!(rust_files_under(&src()).iter().any(|p| p.ends_with("gate/mod.rs")));
}
