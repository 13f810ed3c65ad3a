//! Snapshots of a workspace: the current tree, uncommitted and untracked
//! (but not ignored) files included, written as a git tree through a
//! temporary index, then exported to a fresh directory. The agent can go on
//! editing its workspace; the evaluation sees exactly the snapshot.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

/// The git tree id of the workspace as it is now (HEAD plus every change
/// that is not ignored). Does not touch the workspace's own index.
pub fn tree_hash(workspace: &Path) -> anyhow::Result<String> {
    let scratch =
        tempfile::tempdir().context("creating a scratch folder for the snapshot index")?;
    let index = scratch.path().join("index");
    let has_head = git(workspace, &index, &["rev-parse", "--verify", "-q", "HEAD"]).is_ok();
    if has_head {
        git(workspace, &index, &["read-tree", "HEAD"])?;
    }
    git(workspace, &index, &["add", "-A", "--", "."])?;
    let tree = git(workspace, &index, &["write-tree"])?;
    Ok(tree.trim().to_string())
}

/// Writes the files of `tree` into `dest` (which must exist).
pub fn export(workspace: &Path, tree: &str, dest: &Path) -> anyhow::Result<()> {
    let mut archive = Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["archive", "--format=tar", tree])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running git archive")?;
    let stdout = archive.stdout.take().context("git archive has no stdout")?;
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(dest)
        .stdin(stdout)
        .stderr(Stdio::piped())
        .output()
        .context("running tar to unpack the snapshot")?;
    let archived = archive
        .wait_with_output()
        .context("waiting for git archive")?;
    if !archived.status.success() {
        bail!(
            "git archive {tree} failed: {}",
            String::from_utf8_lossy(&archived.stderr).trim()
        );
    }
    if !tar.status.success() {
        bail!(
            "unpacking the snapshot failed: {}",
            String::from_utf8_lossy(&tar.stderr).trim()
        );
    }
    Ok(())
}

fn git(workspace: &Path, index: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(args)
        .env("GIT_INDEX_FILE", index)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} in {} failed: {}",
            args.join(" "),
            workspace.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// sha256 of every file under `root` whose path (relative, with `/`)
/// matches one of `globs`. Used for protected paths.
pub fn hash_matching(root: &Path, globs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    if globs.is_empty() {
        return Ok(map);
    }
    let set = glob_set(globs)?;
    for entry in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
    {
        let entry = entry.with_context(|| format!("walking {}", root.display()))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = relative(root, entry.path());
        if set.is_match(&rel) {
            let bytes = std::fs::read(entry.path())
                .with_context(|| format!("reading {}", entry.path().display()))?;
            map.insert(rel, hex::encode(Sha256::digest(&bytes)));
        }
    }
    Ok(map)
}

/// Hashes protected files as the workspace's tree would export them, so
/// that ignored build outputs never count.
pub fn hash_protected_in_tree(
    workspace: &Path,
    globs: &[String],
) -> anyhow::Result<BTreeMap<String, String>> {
    if globs.is_empty() {
        return Ok(BTreeMap::new());
    }
    let tree = tree_hash(workspace)?;
    let dir = tempfile::tempdir()?;
    export(workspace, &tree, dir.path())?;
    hash_matching(dir.path(), globs)
}

/// The differences between the protected files recorded at creation and
/// those in a snapshot: each a sentence naming the file.
pub fn protected_violations(
    expected: &BTreeMap<String, String>,
    actual: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (path, hash) in expected {
        match actual.get(path) {
            None => out.push(format!("protected file {path} was removed")),
            Some(h) if h != hash => out.push(format!("protected file {path} was modified")),
            _ => {}
        }
    }
    for path in actual.keys() {
        if !expected.contains_key(path) {
            out.push(format!("protected path {path} was added"));
        }
    }
    out
}

fn glob_set(globs: &[String]) -> anyhow::Result<globset::GlobSet> {
    let mut b = globset::GlobSetBuilder::new();
    for g in globs {
        b.add(
            globset::GlobBuilder::new(g)
                .literal_separator(false)
                .build()?,
        );
        // `dir/**` should also protect the directory itself when given as `dir`.
    }
    Ok(b.build()?)
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// A fresh directory for one evaluation, removed when dropped.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new(parent: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        let dir = tempfile::Builder::new()
            .prefix("eval-")
            .tempdir_in(parent)
            .with_context(|| format!("creating an evaluation folder in {}", parent.display()))?;
        std::fs::create_dir(dir.path().join("tree"))?;
        Ok(Sandbox { dir })
    }
    pub fn tree(&self) -> PathBuf {
        self.dir.path().join("tree")
    }
    pub fn results(&self) -> PathBuf {
        self.dir.path().join("results.jsonl")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            assert!(Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .status()
                .unwrap()
                .success());
        };
        run(&["init", "-q"]);
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "build/\n").unwrap();
        run(&["add", "."]);
        run(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ]);
        dir
    }

    #[test]
    fn tree_changes_with_uncommitted_and_untracked_files_only() {
        let ws = repo();
        let t0 = tree_hash(ws.path()).unwrap();
        assert_eq!(t0, tree_hash(ws.path()).unwrap(), "same tree, same hash");
        std::fs::create_dir(ws.path().join("build")).unwrap();
        std::fs::write(ws.path().join("build/out.o"), "x").unwrap();
        assert_eq!(
            t0,
            tree_hash(ws.path()).unwrap(),
            "ignored files do not count"
        );
        std::fs::write(ws.path().join("a.txt"), "two\n").unwrap();
        let t1 = tree_hash(ws.path()).unwrap();
        assert_ne!(t0, t1);
        std::fs::write(ws.path().join("new.c"), "int x;\n").unwrap();
        let t2 = tree_hash(ws.path()).unwrap();
        assert_ne!(t1, t2);
        // the workspace's own index is untouched
        let status = Command::new("git")
            .args(["diff", "--cached", "--name-only"])
            .current_dir(ws.path())
            .output()
            .unwrap();
        assert!(status.stdout.is_empty());
        let dest = tempfile::tempdir().unwrap();
        export(ws.path(), &t2, dest.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.path().join("a.txt")).unwrap(),
            "two\n"
        );
        assert!(dest.path().join("new.c").exists());
        assert!(!dest.path().join("build").exists());
    }

    #[test]
    fn protected_changes_are_named() {
        let ws = repo();
        std::fs::create_dir(ws.path().join("harness")).unwrap();
        std::fs::write(ws.path().join("harness/h.sh"), "echo\n").unwrap();
        let globs = vec!["harness/**".to_string()];
        let before = hash_protected_in_tree(ws.path(), &globs).unwrap();
        assert_eq!(before.len(), 1);
        std::fs::write(ws.path().join("harness/h.sh"), "echo cheat\n").unwrap();
        std::fs::write(ws.path().join("harness/extra.sh"), "x\n").unwrap();
        let after = hash_protected_in_tree(ws.path(), &globs).unwrap();
        let v = protected_violations(&before, &after);
        assert_eq!(
            v,
            vec![
                "protected file harness/h.sh was modified",
                "protected path harness/extra.sh was added"
            ]
        );
    }
}
