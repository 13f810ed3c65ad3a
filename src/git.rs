//! The hardened `git` command: every git call gadfly makes starts from
//! [`hardened_git`], and runs on a repository of gadfly's own (a snapshot
//! store, or a [`WorkspaceView`] of the workspace's repository): never in
//! the agent's repository, whose config, attributes and hooks are the
//! agent's. A leaf (it names no module of the crate), so the snapshot code,
//! the beam and the spec's workspace check all use the one definition.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// `git` in a scrubbed environment: no inherited `GIT_*` variable, no
/// system or global config, no replace objects, no system attributes,
/// `HOME` and `XDG_CONFIG_HOME` pointed at `home`, and command-line
/// settings (which win over any repository's config) that switch off
/// fsmonitor, hooks, the untracked cache and the user's attribute and
/// exclude files. For a repository gadfly does not own (the beam reads the
/// workspace's refs), use it with `-C`; snapshots use
/// `crate::snapshot::scrubbed_git`.
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
        // The bytes stored are the bytes on disk: no line-ending conversion
        // (with the attributes every store of gadfly's pins, see
        // `crate::snapshot::PINNED_ATTRIBUTES`), and a file whose change
        // time moved is always hashed again.
        "core.autocrlf=false",
        "core.safecrlf=false",
        "core.trustctime=true",
        "core.checkStat=default",
        "log.showSignature=false",
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

// ---------------------------------------------------------------------------
// The workspace's repository, read without git reading any of it.
//
// The workspace's `.git` is the agent's: its config can name programs git
// runs (`gpg.program` with `log.showSignature`, `core.pager`, `diff.external`,
// `core.sshCommand`, aliases, filters, hooks...), and a setting overridden on
// the command line today is a new one tomorrow. So no git command of the
// daemon ever runs in it. Its refs are read here, as files, by gadfly's own
// code (no link followed, every file owned by the workspace's owner, every
// value checked), and written into a private bare repository of gadfly's
// whose object store borrows the workspace's objects (an alternate: objects
// are data, read and hashed, never run). Git then runs on that view, whose
// config is gadfly's.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;

use anyhow::{bail, Context};

/// Where the workspace's repository keeps its refs and objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoDirs {
    /// The folder holding `.git`: the top of the work tree.
    pub work_tree: PathBuf,
    /// The git dir (`.git`, or a worktree's folder): its `HEAD`.
    pub git_dir: PathBuf,
    /// The common dir (the main repository's `.git`): refs and objects.
    pub common_dir: PathBuf,
    /// The uid that owns the workspace; every file read must be its.
    pub owner: u32,
}

impl RepoDirs {
    pub fn objects(&self) -> PathBuf {
        self.common_dir.join("objects")
    }
}

const NOFOLLOW: i32 = nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK;

/// Reads a small regular file of the agent's: never through a link, never a
/// FIFO or device, at most `limit` bytes, owned by `owner`.
fn read_owned(path: &Path, owner: u32, limit: u64) -> anyhow::Result<String> {
    use std::io::Read;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(NOFOLLOW)
        .open(path)
        .with_context(|| format!("opening {} (links are not followed)", path.display()))?;
    let md = file.metadata()?;
    if !md.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    if md.uid() != owner {
        bail!("{} belongs to uid {}, not to the workspace's owner (uid {owner})", path.display(), md.uid());
    }
    if md.len() > limit {
        bail!("{} is {} bytes, over the {limit} gadfly reads", path.display(), md.len());
    }
    let mut text = String::new();
    file.take(limit).read_to_string(&mut text).with_context(|| format!("reading {}", path.display()))?;
    Ok(text)
}

/// A folder of the agent's that gadfly may read: a real folder (not a
/// link), owned by `owner`.
fn owned_dir(path: &Path, owner: u32) -> anyhow::Result<()> {
    let md = std::fs::symlink_metadata(path).with_context(|| format!("examining {}", path.display()))?;
    if md.file_type().is_symlink() {
        bail!("{} is a symbolic link: gadfly does not follow links in the workspace's repository", path.display());
    }
    if !md.is_dir() {
        bail!("{} is not a folder", path.display());
    }
    if md.uid() != owner {
        bail!("{} belongs to uid {}, not to the workspace's owner (uid {owner})", path.display(), md.uid());
    }
    Ok(())
}

/// Finds the repository the workspace belongs to (the workspace or the
/// nearest folder above it holding `.git`), without running git: `.git` a
/// folder, or a file `gitdir: PATH` (a worktree or submodule) whose folder
/// may name its main repository in `commondir`. Every folder must be a real
/// folder owned by the workspace's owner: a repository that points into
/// someone else's files (the daemon's data dir, say) is refused.
pub fn find_repo(workspace: &Path) -> anyhow::Result<RepoDirs> {
    let ws = std::path::absolute(workspace).with_context(|| format!("making {} absolute", workspace.display()))?;
    let owner = std::fs::metadata(&ws).with_context(|| format!("examining {}", ws.display()))?.uid();
    let mut at: Option<&Path> = Some(&ws);
    while let Some(dir) = at {
        let dot = dir.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(md) if md.is_dir() => {
                owned_dir(&dot, owner)?;
                let dirs = RepoDirs { work_tree: dir.to_path_buf(), git_dir: dot.clone(), common_dir: dot, owner };
                owned_dir(&dirs.objects(), owner)?;
                return Ok(dirs);
            }
            Ok(md) if md.is_file() => {
                let text = read_owned(&dot, owner, 4096)?;
                let Some(target) = text.trim_end_matches(['\n', '\r']).strip_prefix("gitdir: ") else {
                    bail!("{} is a file that does not start with `gitdir: `", dot.display());
                };
                let git_dir = dir.join(target.trim());
                owned_dir(&git_dir, owner)?;
                let common_dir = match read_owned(&git_dir.join("commondir"), owner, 4096) {
                    Ok(common) => git_dir.join(common.trim()),
                    Err(_) if !git_dir.join("commondir").exists() => git_dir.clone(),
                    Err(e) => return Err(e),
                };
                owned_dir(&common_dir, owner)?;
                let dirs = RepoDirs { work_tree: dir.to_path_buf(), git_dir, common_dir, owner };
                owned_dir(&dirs.objects(), owner)?;
                return Ok(dirs);
            }
            Ok(_) => bail!("{} is neither a folder nor a `gitdir:` file", dot.display()),
            Err(_) => at = dir.parent(),
        }
    }
    bail!("{} is not inside a git repository (no .git in it or above it)", ws.display())
}

/// Whether `name` is a ref name gadfly passes on: `refs/...`, printable
/// ASCII without space or any of `~^:?*[\`, no `..` or `@{`, no component
/// that is empty, starts with `.` or ends with `.lock`.
pub fn valid_ref_name(name: &str) -> bool {
    name.starts_with("refs/")
        && name.len() <= 1024
        && !name.contains("..")
        && !name.contains("@{")
        && name.bytes().all(|b| b.is_ascii_graphic() && !b"~^:?*[\\".contains(&b))
        && name.split('/').all(|c| !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock"))
}

fn object_id(text: &str) -> Option<&str> {
    let t = text.trim();
    ((t.len() == 40 || t.len() == 64) && t.bytes().all(|b| b.is_ascii_hexdigit())).then_some(t)
}

/// The branch refs of the repository (`refs/heads/...`) and what HEAD
/// names, read as files: `packed-refs`, then the loose refs (which win).
/// Values that are not object ids, names outside [`valid_ref_name`] and
/// symbolic refs other than HEAD are left out. Returns (refs, head), head
/// being `ref: NAME` or an object id.
pub fn read_branch_refs(dirs: &RepoDirs) -> anyhow::Result<(BTreeMap<String, String>, Option<String>)> {
    let mut refs = BTreeMap::new();
    let packed = dirs.common_dir.join("packed-refs");
    if std::fs::symlink_metadata(&packed).is_ok() {
        for line in read_owned(&packed, dirs.owner, 256 << 20)?.lines() {
            if line.starts_with('#') || line.starts_with('^') {
                continue;
            }
            if let Some((id, name)) = line.split_once(' ') {
                if let (Some(id), true) = (object_id(id), name.starts_with("refs/heads/") && valid_ref_name(name)) {
                    refs.insert(name.to_string(), id.to_string());
                }
            }
        }
    }
    let heads = dirs.common_dir.join("refs").join("heads");
    if std::fs::symlink_metadata(&heads).is_ok() {
        owned_dir(&heads, dirs.owner)?;
        for entry in walkdir::WalkDir::new(&heads).follow_links(false).max_depth(32) {
            let entry = entry.with_context(|| format!("walking {}", heads.display()))?;
            let ft = entry.file_type();
            if ft.is_dir() {
                owned_dir(entry.path(), dirs.owner)?;
                continue;
            }
            if !ft.is_file() {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&dirs.common_dir) else { continue };
            let name = rel.to_string_lossy().to_string();
            if !valid_ref_name(&name) {
                continue;
            }
            let Ok(text) = read_owned(entry.path(), dirs.owner, 1024) else { continue };
            if let Some(id) = object_id(&text) {
                refs.insert(name, id.to_string());
            }
        }
    }
    let head = read_owned(&dirs.git_dir.join("HEAD"), dirs.owner, 1024).ok().and_then(|text| {
        let t = text.trim();
        match t.strip_prefix("ref: ") {
            Some(name) if valid_ref_name(name) => Some(format!("ref: {name}")),
            Some(_) => None,
            None => object_id(t).map(str::to_string),
        }
    });
    Ok((refs, head))
}

/// A private bare repository of gadfly's that shows the workspace's branch
/// refs and HEAD over the workspace's objects (an alternate object store).
/// Removed when dropped. Git runs on it with gadfly's config only.
pub struct WorkspaceView {
    dir: tempfile::TempDir,
    pub dirs: RepoDirs,
}

impl WorkspaceView {
    pub fn open(workspace: &Path) -> anyhow::Result<Self> {
        let dirs = find_repo(workspace)?;
        let objects = dirs.objects();
        // A chain of alternates would let the workspace's repository borrow
        // objects from folders its owner may not read (the daemon's stores).
        for chained in ["alternates", "http-alternates"] {
            if std::fs::symlink_metadata(objects.join("info").join(chained)).is_ok() {
                bail!(
                    "{} names other object stores (objects/info/{chained}): gadfly reads only the workspace's own objects; \
                     run `git repack -a -d` and remove that file",
                    objects.display()
                );
            }
        }
        let (refs, head) = read_branch_refs(&dirs)?;
        let sha256 = refs.values().chain(head.iter()).any(|id| id.len() == 64);
        let dir =
            tempfile::Builder::new().prefix("gadfly-repo-view-").tempdir().context("creating a repository view")?;
        let home = dir.path().to_path_buf();
        let out = hardened_git(&home)
            .arg("--git-dir")
            .arg(dir.path())
            .args(["init", "-q", "--bare", "--template="])
            .args(sha256.then_some("--object-format=sha256"))
            .output()
            .context("running git init for the repository view")?;
        if !out.status.success() {
            bail!("git init (repository view): {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        let info = dir.path().join("objects").join("info");
        std::fs::create_dir_all(&info)?;
        std::fs::write(info.join("alternates"), format!("{}\n", objects.display()))?;
        let mut packed = String::new();
        for (name, id) in &refs {
            packed.push_str(&format!("{id} {name}\n"));
        }
        std::fs::write(dir.path().join("packed-refs"), packed)?;
        std::fs::write(dir.path().join("HEAD"), format!("{}\n", head.as_deref().unwrap_or("ref: refs/heads/main")))?;
        Ok(WorkspaceView { dir, dirs })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// [`hardened_git`] on the view.
    pub fn git(&self) -> Command {
        let mut cmd = hardened_git(self.dir.path());
        cmd.arg("--git-dir").arg(self.dir.path());
        cmd
    }

    /// Runs git on the view; its stdout, trimmed.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.git().args(args).output().context("running git")?;
        if !out.status.success() {
            bail!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Points `name` (a branch ref) at `id` in the WORKSPACE's repository,
    /// as git does (a `.lock` file renamed over the ref), without git and
    /// without following a link: every folder on the way is opened with
    /// `O_NOFOLLOW` through the descriptor of the one before.
    pub fn write_ref(&self, name: &str, id: &str) -> anyhow::Result<()> {
        use std::io::Write;
        if !valid_ref_name(name) || !name.starts_with("refs/heads/") {
            bail!("`{name}` is not a branch ref gadfly writes");
        }
        let id = object_id(id).with_context(|| format!("`{id}` is not an object id"))?;
        let open_dir = |path: &Path| -> anyhow::Result<File> {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_DIRECTORY | NOFOLLOW)
                .open(path)
                .with_context(|| format!("opening {} (links are not followed)", path.display()))?;
            let md = f.metadata()?;
            if md.uid() != self.dirs.owner {
                bail!("{} belongs to uid {}, not to the workspace's owner", path.display(), md.uid());
            }
            Ok(f)
        };
        let through = |dir: &File, name: &str| PathBuf::from(format!("/proc/self/fd/{}/{name}", dir.as_raw_fd()));
        use std::os::fd::AsRawFd;
        let mut dir = open_dir(&self.dirs.common_dir)?;
        let parts: Vec<&str> = name.split('/').collect();
        let (leaf, folders) = parts.split_last().context("empty ref name")?;
        for part in folders {
            let next = through(&dir, part);
            match std::fs::create_dir(&next) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(
                        anyhow::Error::new(e).context(format!("creating {} in the workspace's repository", part))
                    )
                }
            }
            dir = open_dir(&next)?;
        }
        let lock = through(&dir, &format!("{leaf}.lock"));
        let mut f =
            std::fs::OpenOptions::new().write(true).create_new(true).custom_flags(NOFOLLOW).open(&lock).with_context(
                || format!("creating {name}.lock in the workspace's repository (is another git running?)"),
            )?;
        let written = f.write_all(format!("{id}\n").as_bytes()).and_then(|_| f.sync_all());
        if let Err(e) = written.and_then(|_| std::fs::rename(&lock, through(&dir, leaf))) {
            let _ = std::fs::remove_file(&lock);
            return Err(anyhow::Error::new(e).context(format!("writing {name} in the workspace's repository")));
        }
        Ok(())
    }
}

/// A walk of `workspace` as gadfly's snapshot sees it: `.gitignore` files
/// only (not `.ignore`, not `.git/info/exclude`, not the user's global
/// excludes), hidden files included, links not followed, `.git` skipped.
/// Whatever walks the workspace to judge what an evaluation gets (the
/// fingerprint, the spec's candidate check) walks it with these rules.
pub fn snapshot_walk(workspace: &std::path::Path) -> ignore::WalkBuilder {
    let mut walk = ignore::WalkBuilder::new(workspace);
    walk.hidden(false)
        .parents(false)
        .ignore(false)
        .git_exclude(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git");
    walk
}
