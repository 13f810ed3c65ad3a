//! Snapshots of a workspace: the current tree, uncommitted and untracked
//! (but not ignored) files included, written as a git tree into a private
//! git store of gadfly's own (`DATA/snapshots/CAMPAIGN.git`, bare), then
//! exported from there to a fresh directory. The agent can go on editing
//! its workspace; the evaluation sees exactly the snapshot.
//!
//! The workspace's own `.git` is never read by git here: the agent controls
//! it (its config can name an fsmonitor hook or a clean filter that git
//! would run inside the daemon; its replace refs can make `git archive`
//! export another blob than the tree names). Every git call runs against
//! the private store with the work tree given explicitly, in a scrubbed
//! environment (no system or global config, no replace objects, no system
//! attributes, no hooks, no fsmonitor, no inherited `GIT_*` variable). The
//! workspace's `.gitignore` files still apply; its `.git/info/exclude` and
//! the user's global excludes do not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

/// Where gadfly keeps the snapshots of a campaign: a bare git repository
/// of its own under the data dir.
pub fn store_path(data_dir: &Path, campaign_id: &str) -> PathBuf {
    data_dir.join("snapshots").join(format!("{campaign_id}.git"))
}

/// Creates the private store at `repo` (bare, no templates, so no sample
/// hooks) unless it exists; true when it was created now.
pub fn init_store(repo: &Path) -> anyhow::Result<bool> {
    if repo.join("HEAD").is_file() && repo.join("objects").is_dir() {
        return Ok(false);
    }
    std::fs::create_dir_all(repo).with_context(|| format!("creating {}", repo.display()))?;
    let mut cmd = scrubbed_git(repo);
    cmd.args(["init", "-q", "--bare", "--template="]).arg(absolute(repo)?);
    run(cmd, "init")?;
    Ok(true)
}

/// `git` in a scrubbed environment: no inherited `GIT_*` variable, no
/// system or global config, no replace objects, no system attributes,
/// `HOME` and `XDG_CONFIG_HOME` pointed at `home`, and command-line
/// settings (which win over any repository's config) that switch off
/// fsmonitor, hooks, the untracked cache and the user's attribute and
/// exclude files. For a repository gadfly does not own (the beam reads the
/// workspace's refs), use it with `-C`; snapshots use [`scrubbed_git`].
pub fn hardened_git(home: &Path) -> Command {
    let mut cmd = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_PAGER", "cat")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .stdin(Stdio::null());
    for setting in [
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "core.untrackedCache=false",
        "core.attributesFile=/dev/null",
        "core.excludesFile=/dev/null",
        "core.splitIndex=false",
        "core.sparseCheckout=false",
        "core.pager=cat",
        "gc.auto=0",
        "maintenance.auto=false",
        // The daemon, run as a user of its own (the recommended deployment),
        // reads repositories the agent's user owns: git's ownership check
        // would refuse them. What that check guards against (the owner's
        // hooks, fsmonitor and the like running as the daemon) is what the
        // settings above switch off.
        "safe.directory=*",
    ] {
        cmd.args(["-c", setting]);
    }
    cmd
}

/// [`hardened_git`] aimed at the private store `repo` (`HOME` is the store).
pub fn scrubbed_git(repo: &Path) -> Command {
    let home = absolute(repo).unwrap_or_else(|_| repo.to_path_buf());
    let mut cmd = hardened_git(&home);
    cmd.arg("--git-dir").arg(&home);
    cmd
}

/// [`scrubbed_git`] with the work tree `workspace` (and run from it, so
/// pathspecs are relative to it).
fn git_on(repo: &Path, workspace: &Path) -> anyhow::Result<Command> {
    let ws = absolute(workspace)?;
    let mut cmd = scrubbed_git(repo);
    cmd.arg("--work-tree").arg(&ws).current_dir(&ws);
    Ok(cmd)
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("making {} absolute", p.display()))
}

fn run(mut cmd: Command, what: &str) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("running git {what}"))?;
    if !out.status.success() {
        bail!("git {what} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The git tree id of the workspace as it is now (every file that is not
/// ignored), hashed into a throw-away store.
pub fn tree_hash(workspace: &Path) -> anyhow::Result<String> {
    let scratch = tempfile::tempdir().context("creating a scratch folder for the snapshot")?;
    let repo = scratch.path().join("store.git");
    init_store(&repo)?;
    tree_hash_with_index(&repo, workspace, &scratch.path().join("index"))
}

/// The workspace's tree written into the private store `repo` (created if
/// missing), through an index file of gadfly's own that persists between
/// snapshots, so git re-hashes only the files whose stat changed.
pub fn tree_hash_with_index(repo: &Path, workspace: &Path, index: &Path) -> anyhow::Result<String> {
    let index = absolute(index)?;
    if init_store(repo)? {
        // An index made before this store (an older gadfly's, against the
        // workspace's own repository) names objects the store lacks, and
        // its cached trees would be trusted by write-tree: start afresh.
        let _ = std::fs::remove_file(&index);
    }
    let attempt = || -> anyhow::Result<String> {
        let mut add = git_on(repo, workspace)?;
        add.env("GIT_INDEX_FILE", &index).args(["add", "-A", "--", "."]);
        run(add, &format!("add -A (snapshot of {})", workspace.display()))?;
        let mut write = git_on(repo, workspace)?;
        write.env("GIT_INDEX_FILE", &index).arg("write-tree");
        Ok(run(write, "write-tree")?.trim().to_string())
    };
    attempt().or_else(|first| {
        // A damaged index of ours is rebuilt once.
        tracing::warn!(error = %first, "snapshot index rebuilt");
        let _ = std::fs::remove_file(&index);
        attempt()
    })
}

/// One entry of a tree: mode (`100644`, `100755`, `120000` a link,
/// `160000` a submodule), object id and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub mode: String,
    pub id: String,
    pub path: String,
}

/// Every file of `tree` in the private store (submodules included, folders
/// not), sorted by path.
pub fn tree_entries(repo: &Path, tree: &str) -> anyhow::Result<Vec<Entry>> {
    let mut cmd = scrubbed_git(repo);
    cmd.args(["ls-tree", "-r", "-z", "--full-tree", tree]);
    let out = cmd.output().context("running git ls-tree")?;
    if !out.status.success() {
        bail!("git ls-tree {tree} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let mut entries = Vec::new();
    for record in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let tab = record.iter().position(|b| *b == b'\t').context("git ls-tree: a line without a tab")?;
        let head = String::from_utf8_lossy(&record[..tab]).into_owned();
        let mut parts = head.split(' ');
        let (Some(mode), Some(_kind), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
            bail!("git ls-tree: cannot read `{head}`");
        };
        entries.push(Entry {
            mode: mode.to_string(),
            id: id.to_string(),
            path: String::from_utf8_lossy(&record[tab + 1..]).into_owned(),
        });
    }
    Ok(entries)
}

/// The tree of only those files of `tree` whose paths match `globs` (the
/// campaign's `[harness] candidate`), written into the private store. Its
/// id names exactly what an evaluation gets of the workspace, so edits
/// elsewhere leave it (and the cached verdict) unchanged. Entries that
/// [`candidate_problems`] refuses are kept, so the evaluation of this tree
/// fails naming them.
pub fn candidate_tree(repo: &Path, tree: &str, globs: &[String]) -> anyhow::Result<String> {
    use std::io::Write;
    let set = glob_set(globs)?;
    let mut info = Vec::new();
    for e in tree_entries(repo, tree)? {
        if set.is_match(&e.path) {
            write!(info, "{} {} 0\t{}\0", e.mode, e.id, e.path)?;
        }
    }
    let scratch = tempfile::tempdir().context("creating a scratch folder for the candidate index")?;
    let index = scratch.path().join("index");
    let mut update = scrubbed_git(repo);
    update
        .env("GIT_INDEX_FILE", &index)
        .args(["update-index", "-z", "--index-info"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = update.spawn().context("running git update-index")?;
    let mut stdin = child.stdin.take().context("git update-index has no stdin")?;
    let written = stdin.write_all(&info);
    drop(stdin);
    let out = child.wait_with_output().context("waiting for git update-index")?;
    if !out.status.success() {
        bail!("git update-index (candidate tree) failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    written.context("writing the candidate's entries to git update-index")?;
    let mut write = scrubbed_git(repo);
    write.env("GIT_INDEX_FILE", &index).arg("write-tree");
    Ok(run(write, "write-tree (candidate tree)")?.trim().to_string())
}

/// Whether a candidate file's path is one gadfly hands to a build: ASCII
/// letters, digits and `._+-` in `/`-separated components, none empty,
/// none `.` or `..`, none starting with `-`. Nothing a shell or make would
/// read as anything but a word (no space, quote, backquote, `$`, glob or
/// `=`).
pub fn safe_candidate_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 1024
        && path.split('/').all(|c| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && !c.starts_with('-')
                && c.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
        })
}

/// Why the candidate tree `tree` cannot be evaluated, one sentence per
/// file naming it: only regular files and executables with safe names
/// ([`safe_candidate_path`]) are handed to a build.
pub fn candidate_problems(repo: &Path, tree: &str) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in tree_entries(repo, tree)? {
        let shown = e.path.escape_debug().to_string();
        if !safe_candidate_path(&e.path) {
            out.push(format!(
                "candidate file name `{shown}` is refused: candidate paths may hold only letters, digits, `.`, `_`, `+`, `-` and `/` (no component starting with `-`, no `..`)"
            ));
        } else if e.mode == "120000" {
            out.push(format!("candidate file `{shown}` is a symbolic link: only regular files are evaluated"));
        } else if e.mode == "160000" {
            out.push(format!(
                "candidate path `{shown}` is a submodule (a nested git repository): only regular files are evaluated"
            ));
        } else if e.mode != "100644" && e.mode != "100755" {
            out.push(format!("candidate file `{shown}` has mode {}: only regular files are evaluated", e.mode));
        }
    }
    Ok(out)
}

/// Brings `tree` of the workspace's own repository (a beam candidate's
/// commit) into the private store, without running git in that
/// repository: its objects are read as an alternate object store of a
/// throw-away index, written out to a scratch folder and snapshotted
/// afresh, so the id returned names exactly the content (a forged object
/// or a replace ref in the workspace cannot make it name another).
pub fn import_tree(repo: &Path, workspace: &Path, tree: &str) -> anyhow::Result<String> {
    init_store(repo)?;
    let objects = workspace.join(".git").join("objects");
    if !objects.is_dir() {
        bail!("{} has no .git/objects folder to read tree {tree} from", workspace.display());
    }
    let scratch = tempfile::tempdir().context("creating a scratch folder to import a tree")?;
    let files = scratch.path().join("files");
    std::fs::create_dir(&files)?;
    let index = scratch.path().join("index");
    let alternate = absolute(&objects)?;
    let mut read = git_on(repo, &files)?;
    read.env("GIT_INDEX_FILE", &index).env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &alternate).args(["read-tree", tree]);
    run(read, &format!("read-tree {tree}"))?;
    let mut checkout = git_on(repo, &files)?;
    checkout.env("GIT_INDEX_FILE", &index).env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &alternate).args([
        "checkout-index",
        "-a",
        "-f",
    ]);
    run(checkout, &format!("checkout-index (tree {tree})"))?;
    tree_hash_with_index(repo, &files, &scratch.path().join("fresh-index"))
}

/// A cheap stat fingerprint of the workspace: every file a snapshot would
/// see (`.gitignore` rules honoured, `.git` skipped) with its size, mtime,
/// inode and mode. Equal fingerprints mean an unchanged tree, provided no
/// mtime is recent enough to be racy.
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
    // The same ignore rules as the snapshot's git: `.gitignore` files only
    // (not `.ignore`, not `.git/info/exclude`, not the user's global
    // excludes), so a file the snapshot sees is never skipped here.
    let walker = ignore::WalkBuilder::new(workspace)
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_exclude(false)
        .git_global(false)
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
    let settled = now.duration_since(newest).map(|d| d > std::time::Duration::from_secs(2)).unwrap_or(false);
    Ok(Fingerprint { hash: h.finish(), settled })
}

/// Writes the files of `tree` (in the private store `repo`) into `dest`
/// (which must exist).
pub fn export(repo: &Path, tree: &str, dest: &Path) -> anyhow::Result<()> {
    let mut cmd = scrubbed_git(repo);
    cmd.args(["archive", "--format=tar", tree]).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut archive = cmd.spawn().context("running git archive")?;
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

/// The files of `tree` (in the private store `repo`) as a tar archive
/// (what [`export`] unpacks), for an evaluation that runs on another host.
/// Fails past [`ARCHIVE_LIMIT`].
pub fn archive(repo: &Path, tree: &str) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut cmd = scrubbed_git(repo);
    cmd.args(["archive", "--format=tar", tree]).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().context("running git archive")?;
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

/// Exports the workspace's current tree into `dest` through a throw-away
/// private store (the workspace's `.git` is not used).
fn export_workspace(workspace: &Path, dest: &Path) -> anyhow::Result<()> {
    let scratch = tempfile::tempdir().context("creating a scratch folder for the snapshot")?;
    let repo = scratch.path().join("store.git");
    let tree = tree_hash_with_index(&repo, workspace, &scratch.path().join("index"))?;
    export(&repo, &tree, dest)
}

/// At most this much is kept of a campaign's protected files.
pub const PRISTINE_LIMIT: usize = 64 * 1024 * 1024;

/// The protected files of the workspace's current tree (regular files
/// matching `globs`), with their contents and modes.
pub fn read_pristine(workspace: &Path, globs: &[String]) -> anyhow::Result<Vec<PristineFile>> {
    if globs.is_empty() {
        return Ok(vec![]);
    }
    let dir = tempfile::tempdir()?;
    export_workspace(workspace, dir.path())?;
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
        let path = real_parents(root, &f.path)?;
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if meta.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        // create_new (O_CREAT|O_EXCL) refuses any link found in its place.
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("restoring {}", path.display()))?;
        file.write_all(&f.content).with_context(|| format!("restoring {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(f.mode))?;
    }
    Ok(())
}

/// `root/rel` with every folder on the way a real folder inside `root`:
/// a link (to a folder or anywhere else) or a file in the place of a
/// folder is removed and replaced by an empty folder, so nothing written
/// at the returned path can land outside `root`. `rel` must be relative
/// with no `..`.
fn real_parents(root: &Path, rel: &str) -> anyhow::Result<PathBuf> {
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        bail!("refusing the protected path `{rel}`: not a plain relative path");
    }
    let mut at = root.to_path_buf();
    for part in &parts[..parts.len() - 1] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                // A link (followed nowhere) or a file where a folder belongs.
                std::fs::remove_file(&at).with_context(|| format!("removing {}", at.display()))?;
                std::fs::create_dir(&at).with_context(|| format!("creating {}", at.display()))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&at).with_context(|| format!("creating {}", at.display()))?;
            }
            Err(e) => return Err(e).with_context(|| format!("looking at {}", at.display())),
        }
    }
    Ok(at.join(parts[parts.len() - 1]))
}

/// Hashes protected files as the workspace's tree would export them, so
/// that ignored build outputs never count.
pub fn hash_protected_in_tree(workspace: &Path, globs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    if globs.is_empty() {
        return Ok(BTreeMap::new());
    }
    let dir = tempfile::tempdir()?;
    export_workspace(workspace, dir.path())?;
    hash_matching(dir.path(), globs)
}

/// The protected files recorded at creation that an evaluation of a tree
/// made with `candidate` globs can hold: all of them without candidate
/// globs, else only those the globs match.
pub fn protected_within(
    protected: &BTreeMap<String, String>,
    candidate: &[String],
) -> anyhow::Result<BTreeMap<String, String>> {
    if candidate.is_empty() {
        return Ok(protected.clone());
    }
    let set = glob_set(candidate)?;
    Ok(protected.iter().filter(|(p, _)| set.is_match(p.as_str())).map(|(p, h)| (p.clone(), h.clone())).collect())
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
        let store = idx.path().join("store.git");
        assert_eq!(tree_hash_with_index(&store, ws.path(), &index).unwrap(), t2);
        std::fs::remove_file(ws.path().join("new.c")).unwrap();
        assert_eq!(tree_hash_with_index(&store, ws.path(), &index).unwrap(), t1);
        std::fs::write(ws.path().join("new.c"), "int x;\n").unwrap();
        assert_eq!(tree_hash_with_index(&store, ws.path(), &index).unwrap(), t2);
        std::fs::write(&index, "garbage").unwrap();
        assert_eq!(tree_hash_with_index(&store, ws.path(), &index).unwrap(), t2, "a damaged index is rebuilt");
        // An index left by another store (an older gadfly's, kept in the
        // workspace's repository) is not trusted by a new store.
        let store2 = idx.path().join("store2.git");
        assert_eq!(tree_hash_with_index(&store2, ws.path(), &index).unwrap(), t2);
        export(&store2, &t2, tempfile::tempdir().unwrap().path()).unwrap();
        // the workspace's own index is untouched
        let status =
            Command::new("git").args(["diff", "--cached", "--name-only"]).current_dir(ws.path()).output().unwrap();
        assert!(status.stdout.is_empty());
        let dest = tempfile::tempdir().unwrap();
        export(&store, &t2, dest.path()).unwrap();
        assert_eq!(std::fs::read_to_string(dest.path().join("a.txt")).unwrap(), "two\n");
        assert!(dest.path().join("new.c").exists());
        assert!(!dest.path().join("build").exists());
        // The same tree as a tar, unpacked elsewhere (what a worker does).
        let tar = archive(&store, &t2).unwrap();
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

    fn git_in(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn loose_objects(ws: &Path) -> usize {
        walkdir::WalkDir::new(ws.join(".git/objects"))
            .into_iter()
            .filter(|e| e.as_ref().unwrap().file_type().is_file())
            .count()
    }

    #[test]
    fn a_hostile_git_dir_is_never_honoured() {
        let ws = repo();
        let marker = ws.path().join("..").join(format!("ran-{}", rand::random::<u64>()));
        let hook = ws.path().join(".git/hook.sh");
        std::fs::write(&hook, format!("#!/bin/sh\necho \"$0 $*\" >> {}\ncat\n", marker.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A replace ref that would make the exported a.txt another blob.
        let honest = git_in(ws.path(), &["rev-parse", "HEAD:a.txt"]);
        std::fs::write(ws.path().join("forged"), "forged\n").unwrap();
        let forged = git_in(ws.path(), &["hash-object", "-w", "forged"]);
        std::fs::remove_file(ws.path().join("forged")).unwrap();
        git_in(ws.path(), &["replace", &honest, &forged]);
        let h = hook.display().to_string();
        git_in(ws.path(), &["config", "core.fsmonitor", &h]);
        git_in(ws.path(), &["config", "filter.x.clean", &h]);
        git_in(ws.path(), &["config", "filter.x.required", "true"]);
        std::fs::write(ws.path().join(".git/info/attributes"), "* filter=x\n").unwrap();
        std::fs::write(ws.path().join(".gitattributes"), "*.txt filter=x\n").unwrap();
        let before = loose_objects(ws.path());

        let dir = tempfile::tempdir().unwrap();
        let store = store_path(dir.path(), "c1");
        std::fs::create_dir_all(dir.path().join("indexes")).unwrap();
        let index = dir.path().join("indexes/c1.index");
        let t = tree_hash_with_index(&store, ws.path(), &index).unwrap();
        std::fs::write(ws.path().join("new.txt"), "new\n").unwrap();
        let t2 = tree_hash_with_index(&store, ws.path(), &index).unwrap();
        assert_ne!(t, t2);
        let dest = tempfile::tempdir().unwrap();
        export(&store, &t2, dest.path()).unwrap();
        let tar = archive(&store, &t2).unwrap();
        assert!(!marker.exists(), "the workspace's git config ran: {}", std::fs::read_to_string(&marker).unwrap());
        assert_eq!(
            std::fs::read_to_string(dest.path().join("a.txt")).unwrap(),
            "one\n",
            "the replace ref was honoured"
        );
        let other = tempfile::tempdir().unwrap();
        unpack(&tar, other.path()).unwrap();
        assert_eq!(std::fs::read_to_string(other.path().join("a.txt")).unwrap(), "one\n");
        // Nothing was written into the workspace's repository, and the
        // tree is the same as a plain hash of the same files.
        assert_eq!(loose_objects(ws.path()), before);
        assert!(dir.path().join("snapshots/c1.git/HEAD").is_file());
        let plain = tempfile::tempdir().unwrap();
        std::fs::write(plain.path().join("a.txt"), "one\n").unwrap();
        std::fs::write(plain.path().join("new.txt"), "new\n").unwrap();
        std::fs::write(plain.path().join(".gitignore"), "build/\n").unwrap();
        std::fs::write(plain.path().join(".gitattributes"), "*.txt filter=x\n").unwrap();
        assert_eq!(tree_hash(plain.path()).unwrap(), t2);
        // Importing a commit's tree (the beam) reads the workspace's objects
        // without its replace refs and re-hashes them.
        let head_tree = git_in(ws.path(), &["rev-parse", "HEAD^{tree}"]);
        let imported = import_tree(&store, ws.path(), &head_tree).unwrap();
        let d3 = tempfile::tempdir().unwrap();
        export(&store, &imported, d3.path()).unwrap();
        assert_eq!(std::fs::read_to_string(d3.path().join("a.txt")).unwrap(), "one\n");
        assert!(!marker.exists());
        // The scrubbed environment wins over the daemon's own GIT_* variables.
        assert!(scrubbed_git(&store).get_envs().any(|(k, v)| k == "GIT_NO_REPLACE_OBJECTS" && v.is_some()));
    }

    #[test]
    fn a_candidate_tree_holds_only_the_candidate() {
        let ws = repo();
        std::fs::create_dir_all(ws.path().join("kernel")).unwrap();
        std::fs::create_dir_all(ws.path().join("tools")).unwrap();
        std::fs::write(ws.path().join("kernel/qr.c"), "int qr;\n").unwrap();
        std::fs::write(ws.path().join("GNUmakefile"), "forged: all\n").unwrap();
        std::fs::write(ws.path().join("tools/wrap.sh"), "exit 0\n").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (store, index) = (dir.path().join("s.git"), dir.path().join("i"));
        let globs = vec!["kernel/**".to_string()];
        let full = tree_hash_with_index(&store, ws.path(), &index).unwrap();
        let cand = candidate_tree(&store, &full, &globs).unwrap();
        let paths: Vec<String> = tree_entries(&store, &cand).unwrap().into_iter().map(|e| e.path).collect();
        assert_eq!(paths, vec!["kernel/qr.c"]);
        assert!(candidate_problems(&store, &cand).unwrap().is_empty());
        // Edits outside the candidate leave its tree as it was.
        std::fs::write(ws.path().join("tools/wrap.sh"), "exit 1\n").unwrap();
        let full2 = tree_hash_with_index(&store, ws.path(), &index).unwrap();
        assert_ne!(full, full2);
        assert_eq!(candidate_tree(&store, &full2, &globs).unwrap(), cand);
        std::fs::write(ws.path().join("kernel/qr.c"), "int qr2;\n").unwrap();
        let full3 = tree_hash_with_index(&store, ws.path(), &index).unwrap();
        assert_ne!(candidate_tree(&store, &full3, &globs).unwrap(), cand);
        // A name that is code for a shell, a link, are refused by name.
        std::fs::write(ws.path().join("kernel/a`sh${IFS}t.sh`.c"), "").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", ws.path().join("kernel/l.c")).unwrap();
        let full4 = tree_hash_with_index(&store, ws.path(), &index).unwrap();
        let bad = candidate_tree(&store, &full4, &globs).unwrap();
        let problems = candidate_problems(&store, &bad).unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("kernel/a`sh${IFS}t.sh`.c") && problems[0].contains("refused"), "{problems:?}");
        assert!(problems[1].contains("kernel/l.c") && problems[1].contains("symbolic link"), "{problems:?}");
        // An empty candidate is an empty tree, not an error.
        let none = candidate_tree(&store, &full4, &["nothing/**".to_string()]).unwrap();
        assert!(tree_entries(&store, &none).unwrap().is_empty());
    }

    #[test]
    fn safe_candidate_paths() {
        for ok in ["kernel/qr.c", "kernel/sub/a_b-c+d.cu", ".clang-format", "k/.x"] {
            assert!(safe_candidate_path(ok), "{ok}");
        }
        for bad in [
            "kernel/a`sh${IFS}t.sh`.c",
            "kernel/a b.c",
            "kernel/-o.c",
            "kernel/../x",
            "kernel//x",
            "kernel/a'b.c",
            "kernel/a\"b.c",
            "kernel/$x.c",
            "kernel/a;b.c",
            "kernel/a=b.c",
            "kernel/a*.c",
            "kernel/\u{e9}.c",
            "kernel/a\nb.c",
            "",
        ] {
            assert!(!safe_candidate_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn restore_never_follows_a_link() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("cpu")).unwrap();
        std::fs::write(outside.path().join("cpu/harness.h"), "agent's\n").unwrap();
        std::fs::write(outside.path().join("victim"), "untouched\n").unwrap();
        // A protected folder that is a link, and a protected file that is a
        // link inside a real folder.
        std::os::unix::fs::symlink(outside.path(), root.path().join("harness")).unwrap();
        std::fs::create_dir_all(root.path().join("ref")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), root.path().join("ref/expected.txt")).unwrap();
        let file = |path: &str, content: &str| PristineFile {
            path: path.into(),
            sha256: hex::encode(Sha256::digest(content.as_bytes())),
            mode: 0o644,
            content: content.as_bytes().to_vec(),
        };
        let files = vec![file("harness/cpu/harness.h", "pristine\n"), file("ref/expected.txt", "expected\n")];
        let globs = vec!["harness/**".to_string(), "ref/**".to_string()];
        restore_pristine(root.path(), &globs, &files).unwrap();
        assert_eq!(std::fs::read_to_string(outside.path().join("cpu/harness.h")).unwrap(), "agent's\n");
        assert_eq!(std::fs::read_to_string(outside.path().join("victim")).unwrap(), "untouched\n");
        assert!(root.path().join("harness").symlink_metadata().unwrap().is_dir());
        assert_eq!(std::fs::read_to_string(root.path().join("harness/cpu/harness.h")).unwrap(), "pristine\n");
        assert!(root.path().join("ref/expected.txt").symlink_metadata().unwrap().is_file());
        assert_eq!(std::fs::read_to_string(root.path().join("ref/expected.txt")).unwrap(), "expected\n");
        // Hashing does not follow a linked folder either.
        let linked = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), linked.path().join("harness")).unwrap();
        let h = hash_matching(linked.path(), &globs).unwrap();
        assert!(!h.keys().any(|k| k.starts_with("harness/")), "{h:?}");
        assert!(real_parents(root.path(), "../x").is_err());
    }
}
