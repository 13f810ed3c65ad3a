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
        pin_attributes(repo)?;
        return Ok(false);
    }
    std::fs::create_dir_all(repo).with_context(|| format!("creating {}", repo.display()))?;
    let mut cmd = scrubbed_git(repo);
    cmd.args(["init", "-q", "--bare", "--template="]).arg(absolute(repo)?);
    run(cmd, "init")?;
    pin_attributes(repo)?;
    Ok(true)
}

/// The attributes every store of gadfly's pins (`info/attributes`, which
/// wins over any `.gitattributes` of the tree): what is stored and exported
/// is byte for byte what the workspace holds. No line-ending or encoding
/// conversion, no `$Id$` expansion, no filter, and `git archive` neither
/// drops (`export-ignore`) nor rewrites (`export-subst`) a file.
pub const PINNED_ATTRIBUTES: &str = "* -text !eol -ident !filter !working-tree-encoding -export-ignore -export-subst\n";

/// Writes [`PINNED_ATTRIBUTES`] into the store `repo` unless it holds them.
pub fn pin_attributes(repo: &Path) -> anyhow::Result<()> {
    let info = repo.join("info");
    let file = info.join("attributes");
    if std::fs::read_to_string(&file).is_ok_and(|t| t == PINNED_ATTRIBUTES) {
        return Ok(());
    }
    std::fs::create_dir_all(&info).with_context(|| format!("creating {}", info.display()))?;
    std::fs::write(&file, PINNED_ATTRIBUTES).with_context(|| format!("writing {}", file.display()))
}

/// The hardened `git` command (a leaf, `src/git.rs`, so the spec's
/// workspace check shares it without importing this module).
pub use crate::git::hardened_git;

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
    let tree = attempt().or_else(|first| {
        // A damaged index of ours is rebuilt once.
        tracing::warn!(error = %first, "snapshot index rebuilt");
        let _ = std::fs::remove_file(&index);
        attempt()
    })?;
    distrust_stat(&index)?;
    Ok(tree)
}

/// The index's own time put back to 1 s past the epoch, so that git holds
/// every entry "racily clean" and compares its bytes at the next snapshot
/// instead of trusting its stat. A file's stat can be forged: the agent
/// rewrites it with the same size and puts its old modification time back,
/// and git's builds compare the change time to the second only, so a
/// rewrite in the second of the last snapshot looked unchanged and the stop
/// was judged on the old bytes (a test of the gate caught it). The bytes
/// judged are the bytes on disk, whatever the stat says. (Git reads an
/// index time of 0 as unknown, hence 1 s.)
fn distrust_stat(index: &Path) -> anyhow::Result<()> {
    let f = std::fs::File::options()
        .write(true)
        .open(index)
        .with_context(|| format!("opening the snapshot index {}", index.display()))?;
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1))
        .with_context(|| format!("setting the time of the snapshot index {}", index.display()))
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
    // The view's checks: the repository's own folders, owned by the
    // workspace's owner, no chain of alternates.
    let view = crate::git::WorkspaceView::open(workspace)
        .with_context(|| format!("reading tree {tree} of {}", workspace.display()))?;
    let objects = view.dirs.objects();
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

/// A fingerprint of the workspace by CONTENT: every file a snapshot would
/// see (`.gitignore` rules honoured, `.git` skipped; with candidate globs,
/// only the files they match), each by path, kind, executable bit and the
/// SHA-256 of its bytes (a link by its target). Equal fingerprints mean the
/// same bytes, whatever the files' times say: no timestamp, inode or size
/// can be arranged to make an edited workspace look unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    pub hash: [u8; 32],
}

pub fn fingerprint(workspace: &Path, candidate: &[String]) -> anyhow::Result<Fingerprint> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let only = if candidate.is_empty() { None } else { Some(glob_set(candidate)?) };
    let mut h = Sha256::new();
    // The same ignore rules as the snapshot's git: `.gitignore` files only
    // (not `.ignore`, not `.git/info/exclude`, not the user's global
    // excludes), so a file the snapshot sees is never skipped here.
    let walker = crate::git::snapshot_walk(workspace).sort_by_file_name(|a, b| a.cmp(b)).build();
    let mut buf = vec![0u8; 64 << 10];
    for entry in walker {
        let entry = entry.with_context(|| format!("walking {}", workspace.display()))?;
        if entry.depth() == 0 {
            continue;
        }
        let rel = entry.path().strip_prefix(workspace).unwrap_or(entry.path());
        let md = entry.path().symlink_metadata()?;
        if md.is_dir() {
            continue;
        }
        if let Some(set) = &only {
            if !set.is_match(rel) {
                continue;
            }
        }
        let name = rel.as_os_str().as_encoded_bytes();
        h.update((name.len() as u64).to_le_bytes());
        h.update(name);
        if md.file_type().is_symlink() {
            h.update(b"L");
            let target = std::fs::read_link(entry.path())?;
            let t = target.as_os_str().as_encoded_bytes();
            h.update((t.len() as u64).to_le_bytes());
            h.update(t);
            continue;
        }
        if !md.is_file() {
            h.update(b"O");
            continue;
        }
        h.update(if md.permissions().mode() & 0o111 != 0 { b"X" } else { b"F" });
        let mut file = match std::fs::File::open(entry.path()) {
            Ok(f) => f,
            // Unreadable now: never taken for unchanged.
            Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {}", entry.path().display()))),
        };
        let mut file_hash = Sha256::new();
        loop {
            let n = file.read(&mut buf).with_context(|| format!("reading {}", entry.path().display()))?;
            if n == 0 {
                break;
            }
            file_hash.update(&buf[..n]);
        }
        h.update(file_hash.finalize());
    }
    Ok(Fingerprint { hash: h.finalize().into() })
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

/// A protected file as gadfly keeps it (a leaf type the store shares).
pub use crate::pristine::PristineFile;

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
        std::fs::create_dir(dir.path().join("out"))?;
        Ok(Sandbox { dir })
    }
    pub fn tree(&self) -> PathBuf {
        self.dir.path().join("tree")
    }
    /// The folder the results file goes in: the only one a sandboxed run
    /// step may write (the tree it runs is read-only).
    pub fn results_dir(&self) -> PathBuf {
        self.dir.path().join("out")
    }
    /// Where the harness writes its results: a name drawn at random, in
    /// the results folder (outside the tree the candidate runs in).
    pub fn results(&self) -> PathBuf {
        self.results_dir().join(format!("results-{:016x}{:016x}.jsonl", rand::random::<u64>(), rand::random::<u64>()))
    }
}

#[cfg(test)]
mod tests;
