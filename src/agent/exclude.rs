//! The lines `gadfly attach` adds to the workspace repository's
//! `info/exclude`, so that the files it writes into the workspace
//! ([`super::attach::written_files`]) do not show in `git status`, and
//! `gadfly detach` takes out again: exactly those lines, each under a
//! comment line of gadfly's, so the user's own lines (the same pattern
//! included) are never touched, and a file attach and detach went through
//! is as it was, byte for byte.
//!
//! The repository is found without running git in it
//! ([`crate::git::find_repo`]: the agent's `.git` is the agent's): a
//! worktree's or a submodule's `.git` file leads to the common dir, whose
//! `info/exclude` is the one git reads (`git rev-parse --git-path
//! info/exclude`). Snapshots do not read `info/exclude`
//! (`crate::snapshot`): what is evaluated does not change.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The comment line above each line attach adds.
pub const MARK: &str = "# added by gadfly attach";
/// [`MARK`] when attach also added the line break that ended the user's
/// last line.
const MARK_BREAK: &str = "# added by gadfly attach, with the line break above";
/// [`MARK`] when attach created the file.
const MARK_FILE: &str = "# added by gadfly attach, with this file";

/// The exclude file of the repository `dir` is in, and the patterns for
/// `files` (paths inside `dir`); None when `dir` is in no git repository.
fn target(dir: &Path, files: &[PathBuf]) -> anyhow::Result<Option<(PathBuf, Vec<String>)>> {
    let abs = std::path::absolute(dir).with_context(|| format!("making {} absolute", dir.display()))?;
    if !abs.ancestors().any(|a| a.join(".git").symlink_metadata().is_ok()) {
        return Ok(None);
    }
    let repo = crate::git::find_repo(&abs)?;
    let mut patterns = Vec::new();
    for f in files {
        let f = std::path::absolute(f).with_context(|| format!("making {} absolute", f.display()))?;
        let rel = f.strip_prefix(&repo.work_tree).with_context(|| {
            format!("{} is outside the repository's work tree {}", f.display(), repo.work_tree.display())
        })?;
        patterns.push(pattern(&rel.to_string_lossy()));
    }
    // A worktree's `commondir` is relative (`../..`): the path as git prints it.
    let common = std::fs::canonicalize(&repo.common_dir).unwrap_or(repo.common_dir);
    Ok(Some((common.join("info").join("exclude"), patterns)))
}

/// A pattern that matches exactly the file at `rel` from the top of the
/// work tree: anchored with `/`, git's wildcards and a trailing space escaped.
fn pattern(rel: &str) -> String {
    let mut p = String::from("/");
    for c in rel.chars() {
        if matches!(c, '*' | '?' | '[' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    if p.ends_with(' ') {
        p.insert(p.len() - 1, '\\');
    }
    p
}

/// Adds a line for each of `files` that the exclude file does not hold
/// yet (attaching again adds nothing); returns the exclude file, None when
/// `dir` is in no git repository.
pub fn add(dir: &Path, files: &[PathBuf]) -> anyhow::Result<Option<PathBuf>> {
    let Some((path, patterns)) = target(dir, files)? else { return Ok(None) };
    let (mut text, existed) = match std::fs::read_to_string(&path) {
        Ok(t) => (t, true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), false),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let before = text.clone();
    for p in patterns {
        if text.lines().any(|l| l == p) {
            continue;
        }
        let mark = if !existed && text.is_empty() {
            MARK_FILE
        } else if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
            MARK_BREAK
        } else {
            MARK
        };
        text.push_str(&format!("{mark}\n{p}\n"));
    }
    if text != before {
        write(&path, &text)?;
    }
    Ok(Some(path))
}

/// Removes the lines [`add`] added for `files` (a line of the user's,
/// without gadfly's comment above it, stays); returns the exclude file,
/// None when `dir` is in no git repository. A file attach created, and
/// left empty now, is removed.
pub fn remove(dir: &Path, files: &[PathBuf]) -> anyhow::Result<Option<PathBuf>> {
    let Some((path, patterns)) = target(dir, files)? else { return Ok(None) };
    let mut text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(path)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let before = text.clone();
    let mut created = false;
    for p in &patterns {
        for (mark, cut) in [(MARK_FILE, ""), (MARK_BREAK, "\n"), (MARK, "")] {
            let block = format!("{cut}{mark}\n{p}\n");
            if let Some(at) = find_at_line_start(&text, &block) {
                text.replace_range(at..at + block.len(), "");
                created |= mark == MARK_FILE;
                break;
            }
        }
    }
    if created && text.is_empty() {
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    } else if text != before {
        write(&path, &text)?;
    }
    Ok(Some(path))
}

/// Where `block` starts a line of `text` (or starts with its line break).
fn find_at_line_start(text: &str, block: &str) -> Option<usize> {
    text.match_indices(block).map(|(i, _)| i).find(|&i| block.starts_with('\n') || i == 0 || text[..i].ends_with('\n'))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    let tmp = path.with_extension("gadfly-tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/objects")).unwrap();
        dir
    }

    fn settings(dir: &Path) -> Vec<PathBuf> {
        vec![dir.join(".claude/settings.local.json")]
    }

    #[test]
    fn attach_adds_its_line_once_and_detach_restores_the_file_byte_for_byte() {
        for original in ["", "# mine\n*.o\n", "# mine\n*.o", "/.claude/settings.local.json\n"] {
            let dir = repo();
            let exclude = dir.path().join(".git/info/exclude");
            std::fs::create_dir_all(exclude.parent().unwrap()).unwrap();
            std::fs::write(&exclude, original).unwrap();
            assert_eq!(add(dir.path(), &settings(dir.path())).unwrap(), Some(exclude.clone()));
            let once = std::fs::read_to_string(&exclude).unwrap();
            let lines = once.lines().filter(|l| *l == "/.claude/settings.local.json").count();
            assert_eq!(lines, 1, "{original:?} became {once:?}");
            assert!(once.starts_with(original), "the user's lines stay first: {once:?}");
            add(dir.path(), &settings(dir.path())).unwrap();
            assert_eq!(std::fs::read_to_string(&exclude).unwrap(), once, "attaching twice");
            remove(dir.path(), &settings(dir.path())).unwrap();
            assert_eq!(std::fs::read_to_string(&exclude).unwrap(), original);
        }
    }

    #[test]
    fn a_file_attach_created_goes_at_detach() {
        let dir = repo();
        let exclude = dir.path().join(".git/info/exclude");
        add(dir.path(), &settings(dir.path())).unwrap();
        assert_eq!(std::fs::read_to_string(&exclude).unwrap(), format!("{MARK_FILE}\n/.claude/settings.local.json\n"));
        remove(dir.path(), &settings(dir.path())).unwrap();
        assert!(!exclude.exists());
    }

    #[test]
    fn a_subfolder_of_the_repository_is_anchored_at_the_top_and_no_repository_is_no_file() {
        let dir = repo();
        let ws = dir.path().join("sub dir");
        std::fs::create_dir_all(&ws).unwrap();
        add(&ws, &settings(&ws)).unwrap();
        let text = std::fs::read_to_string(dir.path().join(".git/info/exclude")).unwrap();
        assert!(text.ends_with("\n/sub dir/.claude/settings.local.json\n"), "{text:?}");
        let bare = tempfile::tempdir().unwrap();
        assert_eq!(add(bare.path(), &settings(bare.path())).unwrap(), None);
        assert_eq!(pattern("a*b/[x]?\\ "), "/a\\*b/\\[x]\\?\\\\\\ ");
    }
}
