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
    let scratch = tempfile::tempdir().context("creating a scratch folder for the snapshot index")?;
    tree_hash_with_index(workspace, &scratch.path().join("index"))
}

/// Like [`tree_hash`], with an index file of gadfly's own that persists
/// between snapshots, so git re-hashes only the files whose stat changed.
pub fn tree_hash_with_index(workspace: &Path, index: &Path) -> anyhow::Result<String> {
    let attempt = || -> anyhow::Result<String> {
        if !index.exists() {
            let has_head = git(workspace, index, &["rev-parse", "--verify", "-q", "HEAD"]).is_ok();
            if has_head {
                git(workspace, index, &["read-tree", "HEAD"])?;
            }
        }
        git(workspace, index, &["add", "-A", "--", "."])?;
        Ok(git(workspace, index, &["write-tree"])?.trim().to_string())
    };
    attempt().or_else(|first| {
        // A damaged or stale index of ours is rebuilt once from HEAD.
        tracing::warn!(error = %first, "snapshot index rebuilt");
        let _ = std::fs::remove_file(index);
        attempt()
    })
}

/// A cheap stat fingerprint of the workspace: every file git would see
/// (ignore rules honoured, `.git` skipped) with its size, mtime, inode and
/// mode, plus git's HEAD, index and refs. Equal fingerprints mean an
/// unchanged tree, provided no mtime is recent enough to be racy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    pub hash: u64,
    /// True when every mtime is old enough that a same-size edit within
    /// the filesystem's timestamp granularity cannot hide.
    pub settled: bool,
}

pub fn fingerprint(workspace: &Path) -> anyhow::Result<Fingerprint> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let now = std::time::SystemTime::now();
    let mut newest = std::time::UNIX_EPOCH;
    let mut add = |rel: &Path, md: &std::fs::Metadata, h: &mut std::collections::hash_map::DefaultHasher| {
        rel.hash(h);
        (md.len(), md.mtime(), md.mtime_nsec(), md.ino(), md.mode()).hash(h);
        if let Ok(m) = md.modified() {
            newest = newest.max(m);
        }
    };
    let walker = ignore::WalkBuilder::new(workspace)
        .hidden(false)
        .parents(false)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walker {
        let entry = entry.with_context(|| format!("walking {}", workspace.display()))?;
        if entry.depth() == 0 {
            continue;
        }
        let md = entry.path().symlink_metadata()?;
        add(entry.path().strip_prefix(workspace).unwrap_or(entry.path()), &md, &mut h);
    }
    let git_dir = workspace.join(".git");
    for name in ["HEAD", "index", "refs/heads", "packed-refs"] {
        if let Ok(md) = git_dir.join(name).symlink_metadata() {
            add(Path::new(name), &md, &mut h);
        }
    }
    let settled = now.duration_since(newest).map(|d| d > std::time::Duration::from_secs(2)).unwrap_or(false);
    Ok(Fingerprint { hash: h.finish(), settled })
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
    let archived = archive.wait_with_output().context("waiting for git archive")?;
    if !archived.status.success() {
        bail!("git archive {tree} failed: {}", String::from_utf8_lossy(&archived.stderr).trim());
    }
    if !tar.status.success() {
        bail!("unpacking the snapshot failed: {}", String::from_utf8_lossy(&tar.stderr).trim());
    }
    Ok(())
}

/// At most this much of a tree is sent to an evaluation worker.
pub const ARCHIVE_LIMIT: usize = 64 * 1024 * 1024;

/// The files of `tree` as a tar archive (what [`export`] unpacks), for an
/// evaluation that runs on another host. Fails past [`ARCHIVE_LIMIT`].
pub fn archive(workspace: &Path, tree: &str) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["archive", "--format=tar", tree])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running git archive")?;
    let mut stdout = child.stdout.take().context("git archive has no stdout")?;
    let mut bytes = Vec::new();
    let read = (&mut stdout).take(ARCHIVE_LIMIT as u64 + 1).read_to_end(&mut bytes);
    if bytes.len() > ARCHIVE_LIMIT {
        let _ = child.kill();
        let _ = child.wait();
        bail!(
            "the snapshot of tree {tree} is larger than {} MiB as a tar, too large to send to an evaluation worker: \
             keep data sets and build outputs out of the tree (ignore them in .gitignore)",
            ARCHIVE_LIMIT >> 20
        );
    }
    read.context("reading git archive's output")?;
    drop(stdout);
    let out = child.wait_with_output().context("waiting for git archive")?;
    if !out.status.success() {
        bail!("git archive {tree} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(bytes)
}

/// Unpacks a tar archive made by [`archive`] into `dest` (which must exist).
pub fn unpack(tar: &[u8], dest: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let mut child = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(dest)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running tar to unpack the snapshot")?;
    let mut stdin = child.stdin.take().context("tar has no stdin")?;
    let written = stdin.write_all(tar);
    drop(stdin);
    let out = child.wait_with_output().context("waiting for tar")?;
    if !out.status.success() {
        bail!("unpacking the snapshot failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    written.context("writing the snapshot to tar")?;
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
    for entry in walkdir::WalkDir::new(root).into_iter().filter_entry(|e| e.file_name() != ".git") {
        let entry = entry.with_context(|| format!("walking {}", root.display()))?;
        let rel = relative(root, entry.path());
        if entry.file_type().is_symlink() && set.is_match(&rel) {
            // A protected file replaced by a link (to a file the agent controls).
            let target = std::fs::read_link(entry.path()).unwrap_or_default();
            map.insert(rel, format!("{SYMLINK}{}", target.display()));
            continue;
        }
        if !entry.file_type().is_file() {
            continue;
        }
        if set.is_match(&rel) {
            let bytes = std::fs::read(entry.path()).with_context(|| format!("reading {}", entry.path().display()))?;
            map.insert(rel, hex::encode(Sha256::digest(&bytes)));
        }
    }
    Ok(map)
}

/// How a protected path that became a symbolic link is hashed.
const SYMLINK: &str = "symlink -> ";

/// A protected file as gadfly keeps it, from the tree of the workspace at
/// campaign creation: every evaluation runs with this copy.
#[derive(Debug, Clone, PartialEq)]
pub struct PristineFile {
    pub path: String,
    pub sha256: String,
    pub mode: u32,
    pub content: Vec<u8>,
}

/// At most this much is kept of a campaign's protected files.
pub const PRISTINE_LIMIT: usize = 64 * 1024 * 1024;

/// The protected files of the workspace's current tree (regular files
/// matching `globs`), with their contents and modes.
pub fn read_pristine(workspace: &Path, globs: &[String]) -> anyhow::Result<Vec<PristineFile>> {
    if globs.is_empty() {
        return Ok(vec![]);
    }
    let tree = tree_hash(workspace)?;
    let dir = tempfile::tempdir()?;
    export(workspace, &tree, dir.path())?;
    let set = glob_set(globs)?;
    let mut out = Vec::new();
    let mut total = 0usize;
    for entry in walkdir::WalkDir::new(dir.path()).sort_by_file_name() {
        let entry = entry?;
        let rel = relative(dir.path(), entry.path());
        if !entry.file_type().is_file() || !set.is_match(&rel) {
            continue;
        }
        let content = std::fs::read(entry.path())?;
        total += content.len();
        if total > PRISTINE_LIMIT {
            bail!(
                "the protected files ({}) add up to more than {} MiB: protect the harness and reference, not data",
                globs.join(", "),
                PRISTINE_LIMIT >> 20
            );
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = entry.metadata()?.permissions().mode() & 0o777;
        out.push(PristineFile { path: rel, sha256: hex::encode(Sha256::digest(&content)), mode, content });
    }
    Ok(out)
}

/// Puts gadfly's pristine protected files into an exported tree at
/// `root`, whatever the agent made of them: each is rewritten (a link or
/// folder in its place removed first), and any other path matching the
/// protected globs (one the agent added) is removed.
pub fn restore_pristine(root: &Path, globs: &[String], files: &[PristineFile]) -> anyhow::Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let set = glob_set(globs)?;
    let keep: std::collections::HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let mut extra = Vec::new();
    for entry in walkdir::WalkDir::new(root).into_iter().filter_entry(|e| e.file_name() != ".git") {
        let entry = entry?;
        let rel = relative(root, entry.path());
        if !entry.file_type().is_dir() && set.is_match(&rel) && !keep.contains(rel.as_str()) {
            extra.push(entry.path().to_path_buf());
        }
    }
    for p in extra {
        std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
    }
    for f in files {
        let path = root.join(&f.path);
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if meta.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &f.content).with_context(|| format!("restoring {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(f.mode))?;
    }
    Ok(())
}

/// Hashes protected files as the workspace's tree would export them, so
/// that ignored build outputs never count.
pub fn hash_protected_in_tree(workspace: &Path, globs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
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
pub fn protected_violations(expected: &BTreeMap<String, String>, actual: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (path, hash) in expected {
        match actual.get(path) {
            None => out.push(format!("protected file {path} was removed")),
            Some(h) if h != hash => match h.strip_prefix(SYMLINK) {
                Some(target) => out.push(format!("protected file {path} was replaced by a symlink to {target}")),
                None => out.push(format!("protected file {path} was modified")),
            },
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
        b.add(globset::GlobBuilder::new(g).literal_separator(false).build()?);
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
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
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
    /// Where the harness writes its results: a name drawn at random, in
    /// the evaluation folder (outside the tree the candidate runs in).
    pub fn results(&self) -> PathBuf {
        self.dir.path().join(format!("results-{:016x}{:016x}.jsonl", rand::random::<u64>(), rand::random::<u64>()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            assert!(Command::new("git").args(args).current_dir(dir.path()).status().unwrap().success());
        };
        run(&["init", "-q"]);
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "build/\n").unwrap();
        run(&["add", "."]);
        run(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]);
        dir
    }

    #[test]
    fn tree_changes_with_uncommitted_and_untracked_files_only() {
        let ws = repo();
        let t0 = tree_hash(ws.path()).unwrap();
        assert_eq!(t0, tree_hash(ws.path()).unwrap(), "same tree, same hash");
        std::fs::create_dir(ws.path().join("build")).unwrap();
        std::fs::write(ws.path().join("build/out.o"), "x").unwrap();
        assert_eq!(t0, tree_hash(ws.path()).unwrap(), "ignored files do not count");
        std::fs::write(ws.path().join("a.txt"), "two\n").unwrap();
        let t1 = tree_hash(ws.path()).unwrap();
        assert_ne!(t0, t1);
        std::fs::write(ws.path().join("new.c"), "int x;\n").unwrap();
        let t2 = tree_hash(ws.path()).unwrap();
        assert_ne!(t1, t2);
        // A persistent index gives the same trees and follows every change.
        let idx = tempfile::tempdir().unwrap();
        let index = idx.path().join("index");
        assert_eq!(tree_hash_with_index(ws.path(), &index).unwrap(), t2);
        std::fs::remove_file(ws.path().join("new.c")).unwrap();
        assert_eq!(tree_hash_with_index(ws.path(), &index).unwrap(), t1);
        std::fs::write(ws.path().join("new.c"), "int x;\n").unwrap();
        assert_eq!(tree_hash_with_index(ws.path(), &index).unwrap(), t2);
        std::fs::write(&index, "garbage").unwrap();
        assert_eq!(tree_hash_with_index(ws.path(), &index).unwrap(), t2, "a damaged index is rebuilt");
        // the workspace's own index is untouched
        let status =
            Command::new("git").args(["diff", "--cached", "--name-only"]).current_dir(ws.path()).output().unwrap();
        assert!(status.stdout.is_empty());
        let dest = tempfile::tempdir().unwrap();
        export(ws.path(), &t2, dest.path()).unwrap();
        assert_eq!(std::fs::read_to_string(dest.path().join("a.txt")).unwrap(), "two\n");
        assert!(dest.path().join("new.c").exists());
        assert!(!dest.path().join("build").exists());
        // The same tree as a tar, unpacked elsewhere (what a worker does).
        let tar = archive(ws.path(), &t2).unwrap();
        let other = tempfile::tempdir().unwrap();
        unpack(&tar, other.path()).unwrap();
        assert_eq!(std::fs::read_to_string(other.path().join("a.txt")).unwrap(), "two\n");
        assert!(other.path().join("new.c").exists());
        assert!(unpack(b"not a tar", other.path()).is_err());
    }

    #[test]
    fn fingerprint_follows_changes_and_ignores_ignored_files() {
        let ws = repo();
        let f0 = fingerprint(ws.path()).unwrap();
        assert!(!f0.settled, "files written just now are racy");
        assert_eq!(f0.hash, fingerprint(ws.path()).unwrap().hash);
        std::fs::create_dir(ws.path().join("build")).unwrap();
        std::fs::write(ws.path().join("build/out.o"), "x").unwrap();
        assert_eq!(f0.hash, fingerprint(ws.path()).unwrap().hash, "ignored files do not count");
        std::fs::write(ws.path().join("a.txt"), "ONE\n").unwrap();
        assert_ne!(f0.hash, fingerprint(ws.path()).unwrap().hash);
        let f1 = fingerprint(ws.path()).unwrap();
        std::fs::write(ws.path().join(".hidden"), "x").unwrap();
        assert_ne!(f1.hash, fingerprint(ws.path()).unwrap().hash, "hidden files count");
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
        assert_eq!(v, vec!["protected file harness/h.sh was modified", "protected path harness/extra.sh was added"]);
    }
}
